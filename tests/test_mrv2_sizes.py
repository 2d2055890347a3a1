"""Capture sizes under Model Runner V2 (issue 23): the count of MRV2's graphs (``capture_sizes.mrv2``) against the
installed vLLM's own graph managers, and our config hook leaving vLLM's sizes to MRV2 with one log line, pruning them
only to a live-graph budget (``vllm_adapter.platform.mrv2_sizes``). Real ``VllmConfig``s from ``EngineArgs``; the
managers are vLLM's classes, built by vLLM's own ``init_cudagraph_manager`` methods."""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path
from types import SimpleNamespace

import pytest

from portable_spec.capture_sizes.mrv2 import MODES, managers, mrv2_budget
from portable_spec.capture_sizes.vllm_rules import vllm_default_ladder
import vllm_configs
from version_span import needs
from vllm_configs import speculative

LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256, "intermediate_size": 512,
         "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
         "vocab_size": 1024, "max_position_embeddings": 2048, "torch_dtype": "bfloat16", "rms_norm_eps": 1e-6,
         "rope_theta": 10000.0, "tie_word_embeddings": False}
EAGLE = {**LLAMA, "architectures": ["EagleLlamaForCausalLM"], "num_hidden_layers": 1}
LLAMA2 = {**LLAMA, "num_hidden_layers": 2}  # a separate draft model (method draft_model) of the target's vocabulary
QWEN3 = {**LLAMA, "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3"}
DFLASH = {**QWEN3, "architectures": ["DFlashDraftModel"], "num_hidden_layers": 1, "layer_types": ["full_attention"],
          "dflash_config": {"mask_token_id": 1000, "target_layer_ids": [0, 1]}, "block_size": 4}
LEFT = "capture sizes left to Model Runner V2"


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("mrv2_models")
    out = {}
    for name, config in (("llama", LLAMA), ("eagle", EAGLE), ("qwen3", QWEN3), ("dflash", DFLASH),
                         ("llama2", LLAMA2)):
        (root / name).mkdir()
        (root / name / "config.json").write_text(json.dumps(config))
        out[name] = str(root / name)
    return out


PAIRS = {"eagle": ("llama", "eagle"), "dflash": ("qwen3", "dflash"), "draft_model": ("llama", "llama2")}
"""Each method's target and draft among ``models``."""


def engine_config(models, method="eagle", k=3, max_num_seqs=8, **kwargs):
    target, draft = PAIRS[method]
    return vllm_configs.engine_config(models[target], speculative(method, models[draft], k),
                                      max_num_seqs=max_num_seqs, max_model_len=512, **kwargs)


@pytest.fixture
def ours_logged(caplog, monkeypatch):
    """caplog sees our logger's records exactly once, whether or not an earlier engine gave it vLLM's handlers
    (``logs.share_vllm_log_handlers`` turns propagation off, as vLLM's own logger has it)."""
    ours = logging.getLogger("portable_spec")
    monkeypatch.setattr(ours, "propagate", False)
    ours.addHandler(caplog.handler)
    yield caplog
    ours.removeHandler(caplog.handler)


@pytest.fixture
def mrv2(monkeypatch):
    """Model Runner V2, as a GPU host gets it (this CPU host has no Triton driver, which MRV2's check asks for)."""
    import vllm.config.vllm as config_module

    monkeypatch.setenv("VLLM_USE_V2_MODEL_RUNNER", "1")
    monkeypatch.setattr(config_module, "HAS_TRITON", True)


# ------------------------------------------------------------------------------------------------ the count
def vllm_managers(cfg, mode_name, monkeypatch):
    """vLLM's own managers for ``cfg``: the target's (as the runner builds it) and the speculator's, built by the
    speculator class's real ``init_cudagraph_manager`` on an object holding only what that method reads."""
    import torch
    import vllm.v1.worker.gpu.cudagraph_utils as cudagraph_utils
    from vllm.config.compilation import CUDAGraphMode
    from vllm.platforms import current_platform
    from vllm.v1.attention.backend import AttentionCGSupport

    monkeypatch.setattr(cudagraph_utils, "get_pp_group", lambda: SimpleNamespace(is_first_rank=True,
                                                                                 is_last_rank=True))
    monkeypatch.setattr(type(current_platform), "get_global_graph_pool", lambda self: ("pool", 0), raising=False)
    mode, device = CUDAGraphMode[mode_name], torch.device("cpu")
    spec = cfg.speculative_config
    found = {"target": cudagraph_utils.CudaGraphManager(cfg, device, mode, spec.num_speculative_tokens + 1)}
    if spec.method == "dflash":
        from vllm.v1.worker.gpu.spec_decode.dflash.speculator import DFlashSpeculator as Speculator
    else:
        from vllm.v1.worker.gpu.spec_decode.eagle.speculator import EagleSpeculator as Speculator
    bare = Speculator.__new__(Speculator)
    bare.vllm_config, bare.device, bare.num_speculative_steps = cfg, device, spec.num_speculative_tokens
    bare.num_query_per_req = 1 + spec.num_speculative_tokens
    bare.attn_cg_support = SimpleNamespace(min_cg_support=AttentionCGSupport.ALWAYS, min_cg_attn_backend="TRITON_ATTN")
    Speculator.init_cudagraph_manager(bare, mode)
    for name, attr in (("draft_prefill", "prefill_cudagraph_manager"), ("draft_decode", "decode_cudagraph_manager"),
                       ("draft_query", "query_cudagraph_manager")):
        if getattr(bare, attr, None) is not None:
            found[name] = getattr(bare, attr)
    return found


def descs(manager, kind):
    from vllm.config.compilation import CUDAGraphMode

    return sorted(d.num_tokens for d in manager._capture_descs.get(CUDAGraphMode[kind], []))


CASES = [("eagle", 3, 8, None), ("eagle", 3, 64, None), ("eagle", 5, 8, None), ("eagle", 1, 8, None),
         ("eagle", 3, 8, [1, 3, 5, 12, 40]), ("dflash", 3, 8, None), ("dflash", 8, 4, [3, 9, 10, 27])]


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("method,k,max_num_seqs,sizes", CASES, ids=[f"{m}-k{k}-r{r}-{'user' if s else 'ladder'}"
                                                                   for m, k, r, s in CASES])
@needs("mrv2_graph_budget")
def test_the_count_is_what_vllms_own_managers_capture(models, mrv2, monkeypatch, mode, method, k, max_num_seqs,
                                                       sizes):
    compilation = {"cudagraph_capture_sizes": sizes} if sizes else {}
    cfg = engine_config(models, method, k, max_num_seqs, compilation_config=compilation)
    real = vllm_managers(cfg, mode, monkeypatch)
    ours = {m.name: m for m in managers(method, k, mode, target_pieces=5, draft_pieces=2)}
    if k == 1:  # vLLM builds a decode-step manager but its capture() returns before using it at K=1
        del real["draft_decode"]
    assert set(ours) == set(real)
    listed = list(cfg.compilation_config.cudagraph_capture_sizes)
    compared = 0
    for name, manager in real.items():
        assert descs(manager, "FULL") == sorted(ours[name].full_sizes(listed, max_num_seqs)), name
        assert descs(manager, "PIECEWISE") == ours[name].piecewise_sizes(listed), name
        compared += len(descs(manager, "FULL")) + len(descs(manager, "PIECEWISE"))
    assert compared or mode == "NONE"  # the comparison saw descriptors


DRAFT_CASES = [(3, 8, None), (3, 64, None), (5, 8, None), (1, 8, None), (3, 8, [1, 3, 5, 12, 40])]


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("k,max_num_seqs,sizes", DRAFT_CASES, ids=[f"k{k}-r{r}-{'user' if s else 'ladder'}"
                                                                  for k, r, s in DRAFT_CASES])
@needs("mrv2_standalone_graphs")
@needs("mrv2_graph_budget")
def test_the_draft_models_count_is_what_our_speculators_manager_captures(models, mrv2, monkeypatch, mode, k,
                                                                         max_num_seqs, sizes):
    """vLLM 0.33.0's standalone draft model (``draft_model``): the target's manager is vLLM's, the speculator's is the
    step-0 and decode managers our GraphedStandaloneARSpeculator builds (vLLM's own builds none). Graphs per manager, counted
    against the real managers' descriptors (a manager the speculator does not build counts 0)."""
    import torch
    import vllm.v1.worker.gpu.cudagraph_utils as cudagraph_utils
    from vllm.config.compilation import CUDAGraphMode
    from vllm.platforms import current_platform

    from portable_spec.vllm_adapter.spec_decode.standalone_ar import GraphedStandaloneARSpeculator

    monkeypatch.setattr(cudagraph_utils, "get_pp_group", lambda: SimpleNamespace(is_first_rank=True,
                                                                                 is_last_rank=True))
    monkeypatch.setattr(type(current_platform), "get_global_graph_pool", lambda self: ("pool", 0), raising=False)
    compilation = {"cudagraph_capture_sizes": sizes} if sizes else {}
    cfg = engine_config(models, "draft_model", k, max_num_seqs, compilation_config=compilation)
    device, graph_mode = torch.device("cpu"), CUDAGraphMode[mode]
    real = {"target": cudagraph_utils.CudaGraphManager(cfg, device, graph_mode, k + 1)}
    bare = GraphedStandaloneARSpeculator.__new__(GraphedStandaloneARSpeculator)
    bare.vllm_config, bare.device, bare.num_speculative_steps, bare.dp_size = cfg, device, k, 1
    bare.decode_cudagraph_manager = bare.prefill_cudagraph_manager = None
    bare.num_extra_query_per_req = GraphedStandaloneARSpeculator.num_extra_query_per_req
    bare.init_cudagraph_manager(graph_mode)
    if bare.prefill_cudagraph_manager is not None:
        real["draft_prefill"] = bare.prefill_cudagraph_manager
    if bare.decode_cudagraph_manager is not None:
        real["draft_decode"] = bare.decode_cudagraph_manager
    ours = {m.name: m for m in managers("draft_model", k, mode, target_pieces=5, draft_pieces=3)}
    assert set(real) <= set(ours), (set(real), set(ours))
    listed, compared = list(cfg.compilation_config.cudagraph_capture_sizes), 0
    for name, manager in ours.items():
        want = (descs(real[name], "FULL"), descs(real[name], "PIECEWISE")) if name in real else ([], [])
        assert (sorted(manager.full_sizes(listed, max_num_seqs)), manager.piecewise_sizes(listed)) == want, name
        compared += len(want[0]) + len(want[1])
    assert compared or mode == "NONE"  # the comparison saw descriptors
    # Our speculator graphs step 0 exactly where the decode mode is FULL, and its decode steps where also K > 1.
    assert ("draft_prefill" in real) == (graph_mode.decode_mode() == CUDAGraphMode.FULL)
    assert ("draft_decode" in real) == (k > 1 and graph_mode.decode_mode() == CUDAGraphMode.FULL)


def test_the_bench_engines_count_is_the_h100s():
    """The MRV2 engine of the H100 bench (llama_eagle K=3, 64 sequences, vLLM's 51 default sizes,
    FULL_AND_PIECEWISE) held 357 PIECEWISE graphs (target 4 layers: 5 pieces; EAGLE head 1 layer: 2 pieces);
    its progress bars showed 33 FULL target graphs (``bench/results/2026-11-25-h100-postmove``)."""
    budget = mrv2_budget(vllm_default_ladder(512), method="eagle", num_spec=3, max_num_seqs=64,
                         mode="FULL_AND_PIECEWISE", live_graph_limit=None, target_pieces=5, draft_pieces=2)
    assert budget.graphs == {"target": 33 + 51 * 5, "draft_prefill": 33 + 51 * 2, "draft_decode": 11}
    assert 51 * 5 + 51 * 2 == 357


def test_a_limit_drops_the_largest_sizes_until_the_graphs_fit_and_says_so():
    sizes = vllm_default_ladder(64)  # 11 sizes: FULL mode captures 11 + 11 + 4 (decode steps at <= 8 requests)
    free = mrv2_budget(sizes, method="eagle", num_spec=3, max_num_seqs=8, mode="FULL", live_graph_limit=None)
    assert free.live_graphs == 26 and not free.warnings and free.sizes == tuple(sizes)
    tight = mrv2_budget(sizes, method="eagle", num_spec=3, max_num_seqs=8, mode="FULL", live_graph_limit=12)
    assert tight.sizes == (1, 2, 4, 8) and tight.live_graphs == 12 and tight.dropped == tuple(sizes[4:])
    assert len(tight.warnings) == 1 and "26 live graphs of Model Runner V2 exceed the live-graph limit 12" in \
        tight.warnings[0]
    unmet = mrv2_budget(sizes, method="eagle", num_spec=3, max_num_seqs=8, mode="FULL", live_graph_limit=2)
    assert unmet.sizes == (1,) and unmet.live_graphs == 3 and "cannot be met" in unmet.warnings[-1]
    with pytest.raises(ValueError, match="nothing to capture"):
        mrv2_budget([], method="eagle", num_spec=3, max_num_seqs=8, mode="FULL", live_graph_limit=None)


# ------------------------------------------------------------------------------------------------ the hook
def left_lines(caplog):
    return [r.getMessage() for r in caplog.records if LEFT in r.getMessage()]


@needs("mrv2_graph_budget")
def test_under_mrv2_the_hook_keeps_vllms_sizes_and_says_why_once(vllm_platform, models, mrv2, ours_logged):
    caplog = ours_logged
    with caplog.at_level(logging.INFO, logger="portable_spec"):
        cfg = engine_config(models, "eagle", 3, 16)
        assert cfg.use_v2_model_runner is True
        replaced = dataclasses.replace(cfg)  # vLLM re-runs the hook on every replaced config (workers do)
        type(vllm_platform).check_and_update_config(replaced)
    sizes = cfg.compilation_config.cudagraph_capture_sizes
    assert sizes == vllm_default_ladder(128)  # vLLM's own: 1 and 2 kept, not multiples of 1+K
    assert replaced.compilation_config.cudagraph_capture_sizes == sizes
    state = cfg.additional_config["portable_spec"]
    assert "plan" not in state  # no plan for our drafter: it does not run under MRV2
    assert state["mrv2"]["sizes"] == sizes and state["mrv2"]["dropped"] == [] and state["mrv2"]["live_graphs"] > 0
    assert state["mrv2"]["counted"] is True
    lines = left_lines(caplog)
    assert len(lines) == 1, lines
    assert "draft decode steps run 1 token per request" in lines[0] and "multiples of 1+K=4" in lines[0]


@needs("mrv2_standalone_graphs")
def test_the_draft_models_own_config_keeps_the_engines_count(vllm_platform, models, mrv2):
    """vLLM 0.33.0 loads MRV2's standalone draft model under ``replace(vllm_config, model_config=<the draft's>)``,
    which re-runs our hook with the engine's additional_config: the count stays the one made on the target's config
    (a 4-layer target's 5 pieces per PIECEWISE size, not the 2-layer draft's 3; the GPU run that found it recorded
    64 planned against 42 captured)."""
    cfg = engine_config(models, "draft_model", 3, 8)
    assert cfg.use_v2_model_runner is True
    engine = json.loads(json.dumps(cfg.additional_config["portable_spec"]["mrv2"]))
    sizes = cfg.compilation_config.cudagraph_capture_sizes
    uniform = len({-(-s // 4) * 4 for s in sizes if -(-s // 4) * 4 <= 32})
    step0 = len({-(-s // 5) * 5 for s in sizes if -(-s // 5) * 5 <= 40})  # 1 + K + the correction slot per request
    assert engine["graphs"] == {"target": uniform + 5 * len(sizes), "draft_prefill": step0,
                                "draft_decode": len([s for s in sizes if s <= 8])}
    draft_copy = dataclasses.replace(cfg, model_config=cfg.speculative_config.draft_model_config)
    # The hook ran on the copy, whose state is the engine's own dict (a shallow copy of additional_config).
    assert draft_copy.additional_config["portable_spec"] is cfg.additional_config["portable_spec"]
    assert cfg.additional_config["portable_spec"]["mrv2"] == engine
    # The bug it guards: the hook counting the draft's copy as an engine of its own.
    type(vllm_platform).check_and_update_config(dataclasses.replace(cfg, model_config=cfg.model_config))
    assert cfg.additional_config["portable_spec"]["mrv2"] == engine  # an engine copy recounts to the same


def test_the_one_line_reaches_vllms_log_handlers(vllm_platform, models, mrv2, monkeypatch):
    """The line is written at config time, before any worker shares vLLM's handlers: the hook shares them."""
    ours = logging.getLogger("portable_spec")
    monkeypatch.setattr(ours, "handlers", [])
    monkeypatch.setattr(ours, "propagate", ours.propagate)
    monkeypatch.setattr(ours, "level", ours.level)
    engine_config(models, "eagle", 3, 8)
    assert ours.handlers and set(ours.handlers) <= set(logging.getLogger("vllm").handlers)


@needs("mrv2_graph_budget")
def test_under_a_live_graph_limit_mrv2s_sizes_are_pruned_with_one_warning(vllm_platform, models, mrv2, monkeypatch,
                                                                        ours_logged):
    caplog = ours_logged
    monkeypatch.setattr(type(vllm_platform), "live_graph_limit", classmethod(lambda cls: 12))
    with caplog.at_level(logging.INFO, logger="portable_spec"):
        cfg = engine_config(models, "eagle", 3, 8, compilation_config={"cudagraph_mode": "FULL"})
        type(vllm_platform).check_and_update_config(dataclasses.replace(cfg))
    cc = cfg.compilation_config
    assert cc.cudagraph_capture_sizes == [1, 2, 4, 8] and cc.max_cudagraph_capture_size == 8
    state = cfg.additional_config["portable_spec"]
    assert state["mrv2"]["graphs"] == {"target": 4, "draft_prefill": 4, "draft_decode": 4}
    assert state["mrv2"]["dropped"] == [16, 24, 32, 40, 48, 56, 64] and state["mrv2"]["live_graph_limit"] == 12
    warned = [r.getMessage() for r in caplog.records if "exceed the live-graph limit 12" in r.getMessage()]
    assert len(warned) == 1 and warned[0] in " ".join(f"portable_spec[cpu]: {w}" for w in state["warnings"])
    assert len(left_lines(caplog)) == 1


def test_the_v1_runner_still_gets_our_plan(vllm_platform, models, monkeypatch):
    monkeypatch.setenv("VLLM_USE_V2_MODEL_RUNNER", "0")
    cfg = engine_config(models, "eagle", 3, 16)
    assert all(s % 4 == 0 for s in cfg.compilation_config.cudagraph_capture_sizes)
    assert "plan" in cfg.additional_config["portable_spec"] and "mrv2" not in cfg.additional_config["portable_spec"]


def test_where_the_count_does_not_hold_no_size_is_dropped(vllm_platform, models, mrv2, monkeypatch):
    """A vLLM outside the gate (a newer one): its managers are unchecked, so nothing is guessed or dropped."""
    from portable_spec.vllm_adapter.patch import version_gate

    real_has = version_gate.has
    monkeypatch.setattr(version_gate, "has", lambda name, version=None: name != "mrv2_graph_budget"
                        and real_has(name, version))
    monkeypatch.setattr(type(vllm_platform), "live_graph_limit", classmethod(lambda cls: 12))
    cfg = engine_config(models, "eagle", 3, 8, compilation_config={"cudagraph_mode": "FULL"})
    state = cfg.additional_config["portable_spec"]["mrv2"]
    assert state["dropped"] == [] and state["live_graph_limit"] is None
    assert state["counted"] is False and state["live_graphs"] is None and state["graphs"] == {}  # no guessed count


def test_a_configuration_the_count_does_not_model_drops_nothing_with_one_warning(vllm_platform, models, mrv2,
                                                                                   monkeypatch, ours_logged):
    caplog = ours_logged
    """vLLM's breakable graphs (its own switch, read by its own function) capture PIECEWISE graphs another way."""
    monkeypatch.setenv("VLLM_USE_BREAKABLE_CUDAGRAPH", "1")
    monkeypatch.setattr(type(vllm_platform), "live_graph_limit", classmethod(lambda cls: 12))
    with caplog.at_level(logging.WARNING, logger="portable_spec.vllm_adapter"):
        cfg = engine_config(models, "eagle", 3, 8)
    state = cfg.additional_config["portable_spec"]["mrv2"]
    assert state["dropped"] == [] and state["counted"] is False and state["live_graph_limit"] is None
    lines = [r.getMessage() for r in caplog.records if "not counted against the live-graph limit 12" in r.getMessage()]
    assert len(lines) == 1 and "breakable CUDA graphs" in lines[0]


@pytest.mark.parametrize("change,phrase", [
    ({"lora_config": object()}, "LoRA"),
    ({"spec": {"enable_adaptive_verification": True}}, "adaptive verification"),
    ({"spec": {"uses_dynamic_speculative_decoding": lambda: True}}, "dynamic speculative decoding"),
    ({"parallel": {"enable_dbo": True}}, "micro-batching"),
    ({"parallel": {"data_parallel_size": 2}}, "data or pipeline parallel"),
    ({"cache": {"use_kda_recoverssm": True}}, "recoverSSM"),
])
def test_each_unmodelled_feature_is_named(change, phrase):
    from portable_spec.vllm_adapter.platform.mrv2_sizes import unmodelled

    def config(**overrides):
        parts = {"spec": {"uses_dynamic_speculative_decoding": lambda: False}, "parallel": {}, "cache": {}}
        for key, value in overrides.items():
            parts[key] = {**parts.get(key, {}), **value} if isinstance(value, dict) else value
        return SimpleNamespace(speculative_config=SimpleNamespace(**parts["spec"]),
                               parallel_config=SimpleNamespace(**parts["parallel"]),
                               cache_config=SimpleNamespace(**parts["cache"]), lora_config=parts.get("lora_config"))

    assert unmodelled(config()) == []
    found = unmodelled(config(**change))
    assert len(found) == 1 and phrase in found[0], found


def test_this_module_is_in_the_version_span():
    assert Path(__file__).name in __import__("version_span").MODULES
