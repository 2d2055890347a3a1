"""Model Runner V2's standalone draft model with our FULL decode graphs (issue 39 item 2), at CPU level, against the
real vLLM classes: which speculator MRV2 builds (ours for ``draft_model`` under our override, vLLM's otherwise), the
decode manager ours builds (MRV2's own ``SpeculatorCudaGraphManager``, the descriptors vLLM's EAGLE speculator
builds, the platform's pool), and the inputs our replay path prepares against those vLLM's eager loop prepares
(``mrv2_standalone_child.py``, vLLM's Triton kernels interpreted). Capture and replay need a GPU (the GPU session's
part; ``spec_decode/standalone_ar.py`` says what is graphed).

The hook points these rely on are pinned in ``test_vllm_hook_points.py`` (census entries ``Model Runner V2: our
standalone draft model speculator`` and ``... FULL decode graphs``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

import vllm_configs
from version_span import needs
from vllm_configs import speculative

FEATURE = "mrv2_standalone_graphs"
pytestmark = needs(FEATURE)

LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
         "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
         "vocab_size": 512, "max_position_embeddings": 2048, "torch_dtype": "float32", "rms_norm_eps": 1e-6,
         "rope_theta": 10000.0, "tie_word_embeddings": False}
EAGLE = {**LLAMA, "architectures": ["EagleLlamaForCausalLM"], "num_hidden_layers": 1}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("standalone_models")
    out = {}
    for name, config in (("target", LLAMA), ("draft", LLAMA), ("eagle", EAGLE)):
        (root / name).mkdir()
        (root / name / "config.json").write_text(json.dumps(config))
        out[name] = str(root / name)
    return out


@pytest.fixture
def mrv2(monkeypatch, vllm_platform):
    """Model Runner V2, as a GPU host gets it (this CPU host has no Triton driver, which MRV2's check asks for), our
    drafter switch unset, and MRV2's graph managers able to build here: a single pipeline rank, and the platform's
    pool a sentinel (so a manager that takes it is seen to)."""
    import vllm.config.vllm as config_module
    import vllm.v1.worker.gpu.cudagraph_utils as cudagraph_utils

    monkeypatch.setenv("VLLM_USE_V2_MODEL_RUNNER", "1")
    monkeypatch.delenv("PORTABLE_SPEC_DRAFT_GRAPH", raising=False)
    monkeypatch.setattr(config_module, "HAS_TRITON", True)
    monkeypatch.setattr(cudagraph_utils, "get_pp_group", lambda: SimpleNamespace(is_first_rank=True,
                                                                                 is_last_rank=True))
    pool = ("the platform's pool", object())
    monkeypatch.setattr(type(vllm_platform), "get_global_graph_pool", lambda self: pool, raising=False)
    return pool


def engine_config(models, method="draft_model", k=3, **kwargs):
    draft = models["eagle"] if method == "eagle" else models["draft"]
    return vllm_configs.engine_config(models["target"], speculative(method, draft, k), max_num_seqs=8,
                                      max_model_len=512, **kwargs)


def build_speculator(cfg):
    """What MRV2's runner does: ``init_speculator`` from the spec_decode package, by its module-level name."""
    import torch
    from vllm.config import set_current_vllm_config
    from vllm.v1.worker.gpu.model_runner import init_speculator

    with set_current_vllm_config(cfg):
        return init_speculator(cfg, torch.device("cpu"), None)


# ------------------------------------------------------------------------------------------------ which class
def test_mrv2_builds_ours_for_the_draft_model_under_the_override_and_vllms_outside(models, mrv2):
    from vllm.v1.worker.gpu.spec_decode.standalone_ar.speculator import StandaloneARSpeculator

    from portable_spec.vllm_adapter.spec_decode.standalone_ar import GraphedStandaloneARSpeculator
    from portable_spec.vllm_adapter.worker import mrv2_speculator

    cfg = engine_config(models)
    assert cfg.use_v2_model_runner and cfg.speculative_config.method == "draft_model"
    with mrv2_speculator.installed(cfg) as on:
        assert on
        inside = build_speculator(cfg)
    outside = build_speculator(cfg)
    assert type(inside) is GraphedStandaloneARSpeculator and isinstance(inside, StandaloneARSpeculator)
    assert type(outside) is StandaloneARSpeculator  # restored on exit


@pytest.mark.parametrize("value", ["none", "piecewise"])
def test_the_drafter_switch_keeps_vllms_speculator(models, mrv2, monkeypatch, value, caplog):
    from vllm.v1.worker.gpu.spec_decode.standalone_ar.speculator import StandaloneARSpeculator

    from portable_spec.vllm_adapter.worker import mrv2_speculator

    monkeypatch.setenv("PORTABLE_SPEC_DRAFT_GRAPH", value)
    cfg = engine_config(models)
    assert mrv2_speculator.declined(cfg) == f"PORTABLE_SPEC_DRAFT_GRAPH={value}"
    with mrv2_speculator.installed(cfg) as on:
        assert not on
        assert type(build_speculator(cfg)) is StandaloneARSpeculator


@pytest.mark.parametrize("change,phrase", [
    ({"enforce_eager": True}, "enforce_eager=True"),
    ({"compilation_config": {"cudagraph_mode": "PIECEWISE"}}, "has no FULL decode graphs"),
])
def test_where_our_graphs_do_not_apply_vllms_speculator_stays(models, mrv2, change, phrase):
    from portable_spec.vllm_adapter.worker import mrv2_speculator

    cfg = engine_config(models, **change)
    assert phrase in (mrv2_speculator.declined(cfg) or "")
    with mrv2_speculator.installed(cfg) as on:
        assert not on


def test_other_methods_and_the_v1_runner_are_not_touched(models, mrv2, monkeypatch):
    from portable_spec.vllm_adapter.worker import mrv2_speculator

    eagle = engine_config(models, method="eagle")
    with mrv2_speculator.installed(eagle) as on:
        assert not on
        assert type(build_speculator(eagle)).__name__ == "EagleSpeculator"
    monkeypatch.setenv("VLLM_USE_V2_MODEL_RUNNER", "0")
    v1 = engine_config(models)
    assert not v1.use_v2_model_runner
    with mrv2_speculator.installed(v1) as on:
        assert not on


# ------------------------------------------------------------------------------------------------ the manager
def decode_descs(manager):
    from vllm.config.compilation import CUDAGraphMode

    return sorted((d.cg_mode, d.num_tokens, d.num_reqs, d.uniform_token_count)
                  for d in manager._capture_descs.get(CUDAGraphMode.FULL, []))


@pytest.mark.parametrize("mode", ["FULL_AND_PIECEWISE", "FULL_DECODE_ONLY", "FULL"])
def test_ours_builds_mrv2s_decode_manager_as_vllms_eagle_speculator_does(models, mrv2, mode):
    """The decode manager is MRV2's own class, in the platform's pool, with exactly the FULL descriptors vLLM's
    TargetDependentARSpeculator builds for its decode step (one token per request) from the same config."""
    from vllm.config.compilation import CUDAGraphMode
    from vllm.v1.worker.gpu.spec_decode.target_dependent_ar.cudagraph_utils import SpeculatorCudaGraphManager
    from vllm.v1.worker.gpu.spec_decode.target_dependent_ar.speculator import TargetDependentARSpeculator

    from portable_spec.vllm_adapter.worker import mrv2_speculator

    cfg = engine_config(models, compilation_config={"cudagraph_mode": mode})
    with mrv2_speculator.installed(cfg):
        ours = build_speculator(cfg)
    ours.init_cudagraph_manager(CUDAGraphMode[mode])
    manager = ours.decode_cudagraph_manager
    assert type(manager) is SpeculatorCudaGraphManager and manager.pool is mrv2
    assert manager.decode_query_len == 1 and manager.cudagraph_mode == CUDAGraphMode.FULL_DECODE_ONLY
    vllms = SimpleNamespace(vllm_config=cfg, device=ours.device, num_speculative_steps=ours.num_speculative_steps)
    TargetDependentARSpeculator.init_cudagraph_manager(vllms, CUDAGraphMode[mode])
    ours_descs, vllm_descs = decode_descs(manager), decode_descs(vllms.decode_cudagraph_manager)
    assert ours_descs == vllm_descs and len(ours_descs) > 0
    assert {d[3] for d in ours_descs} == {1} and all(d[1] == d[2] <= 8 for d in ours_descs)
    # Nothing captured yet (the profile run, or a size with no graph): vLLM's eager loop.
    assert ours.decode_batch(3, skip_attn=False).cg_mode == CUDAGraphMode.NONE


@pytest.mark.parametrize("k", [1, 3])
@pytest.mark.parametrize("mode", ["FULL_AND_PIECEWISE", "FULL_DECODE_ONLY", "FULL"])
def test_ours_builds_a_step0_manager_at_two_plus_k_tokens_per_request(models, mrv2, mode, k):
    """Step 0's manager is MRV2's own class, in the platform's pool, FULL_DECODE_ONLY at 2 + K tokens per request:
    exactly the uniform FULL descriptors vLLM's own manager derives at that query length from the same config (the
    capture sizes rounded to multiples of 2 + K within max_num_seqs requests and vLLM's largest size). K = 1 has a
    step 0 and no decode step."""
    from vllm.config.compilation import CUDAGraphMode
    from vllm.v1.worker.gpu.spec_decode.target_dependent_ar.cudagraph_utils import SpeculatorCudaGraphManager

    from portable_spec.vllm_adapter.worker import mrv2_speculator

    cfg = engine_config(models, k=k, compilation_config={"cudagraph_mode": mode})
    with mrv2_speculator.installed(cfg) as on:
        assert on
        ours = build_speculator(cfg)
    ours.init_cudagraph_manager(CUDAGraphMode[mode])
    manager = ours.prefill_cudagraph_manager
    assert type(manager) is SpeculatorCudaGraphManager and manager.pool is mrv2
    assert manager.decode_query_len == k + 2 and manager.cudagraph_mode == CUDAGraphMode.FULL_DECODE_ONLY
    descs = decode_descs(manager)
    sizes = cfg.compilation_config.cudagraph_capture_sizes
    rounded = {-(-size // (k + 2)) * (k + 2) for size in sizes}  # each size up to a multiple of 2 + K
    want = sorted(n for n in rounded if n <= min(8 * (k + 2), max(sizes)))  # within 8 requests and vLLM's largest
    assert [d[1] for d in descs] == want and len(descs) > 0
    assert all(d[3] == k + 2 and d[1] == d[2] * (k + 2) for d in descs)
    assert (ours.decode_cudagraph_manager is None) == (k == 1)


def uniform_batch(num_reqs: int, lens: list[int], eligible: bool = True):
    import numpy as np

    return SimpleNamespace(num_tokens=sum(lens), num_scheduled_tokens=np.array(lens, dtype=np.int32),
                           decode_graph_eligible=eligible)


def test_step0_replays_only_where_every_request_decodes_with_one_plus_k_tokens(models, mrv2):
    """The step-0 dispatch: a batch where every request verifies 1 + K tokens asks the manager for its 2 + K-per-request
    graph (vLLM's uniform-decode test, as its EAGLE speculator asks it); a ragged batch, a prefill, vLLM's "not
    graph-eligible" flag, a dummy run without attention or an empty batch never ask, and run vLLM's eager step 0."""
    from vllm.config.compilation import CUDAGraphMode

    from portable_spec.vllm_adapter.worker import mrv2_speculator

    cfg = engine_config(models, k=3)
    with mrv2_speculator.installed(cfg):
        ours = build_speculator(cfg)
    asked = []
    full = SimpleNamespace(cg_mode=CUDAGraphMode.FULL)
    ours.prefill_cudagraph_manager = SimpleNamespace(dispatch=lambda *a, **kw: asked.append((a, kw)) or full)
    assert ours.prefill_batch(uniform_batch(3, [4, 4, 4]), 3, skip_attn=False) is full
    assert asked == [((3, 15), {"uniform_token_count": 5, "num_active_loras": 0})]
    for batch, num_reqs, skip in ((uniform_batch(3, [4, 4, 3]), 3, False), (uniform_batch(2, [9, 9]), 2, False),
                                  (uniform_batch(3, [4, 4, 4], eligible=False), 3, False),
                                  (uniform_batch(3, [4, 4, 4]), 3, True), (uniform_batch(0, []), 0, False)):
        assert ours.prefill_batch(batch, num_reqs, skip_attn=skip).cg_mode == CUDAGraphMode.NONE
    assert len(asked) == 1


def test_no_full_decode_mode_builds_no_manager_and_one_step_no_decode_manager(models, mrv2):
    from vllm.config.compilation import CUDAGraphMode

    from portable_spec.vllm_adapter.spec_decode.standalone_ar import GraphedStandaloneARSpeculator

    built = 0
    for k, mode in ((3, CUDAGraphMode.PIECEWISE), (3, CUDAGraphMode.NONE), (1, CUDAGraphMode.FULL_AND_PIECEWISE)):
        cfg = engine_config(models, k=k)
        import torch
        from vllm.config import set_current_vllm_config

        with set_current_vllm_config(cfg):
            ours = GraphedStandaloneARSpeculator(cfg, torch.device("cpu"))
        ours.init_cudagraph_manager(mode)
        assert ours.decode_cudagraph_manager is None, (k, mode)
        assert (ours.prefill_cudagraph_manager is None) == (mode.decode_mode() != CUDAGraphMode.FULL), (k, mode)
        assert ours.decode_batch(2, skip_attn=False).cg_mode == CUDAGraphMode.NONE
        built += 1
    assert built == 3


# ------------------------------------------------------------------------------------------------ the inputs
def run_child(method: str, pass_name: str) -> dict:
    """``mrv2_standalone_child.py`` for one draft sampling ``method`` and one ``pass_name`` (decode or prefill)."""
    from lane_tools import require_interpreter

    require_interpreter()
    here = os.path.dirname(os.path.abspath(__file__))
    env = {**os.environ, "VLLM_LOGGING_STREAM": "ext://sys.stderr", "VLLM_PLUGINS": "",
           "PYTHONPATH": os.pathsep.join(p for p in (os.path.dirname(here), os.path.join(os.path.dirname(here),
                                                                                         "harness"), here,
                                                     os.environ.get("PYTHONPATH", "")) if p)}
    proc = subprocess.run([sys.executable, os.path.join(here, "mrv2_standalone_child.py"), method, pass_name],
                          capture_output=True, text=True, env=env, timeout=900)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    return json.loads(lines[-1])


@pytest.mark.parametrize("method", ["greedy", "probabilistic"])
def test_replay_inputs_and_drafts_are_vllms_eager_loops(method):
    """Per decode step, the buffers the draft reads (ids, positions, seq_lens, query_start_loc, slot mapping, the
    sampler's step) equal vLLM's eager loop's for the real rows, the padding rows are vLLM's padding, and the drafts
    (and the probabilistic logits cache) are bitwise vLLM's: vLLM's kernels interpreted in a child process."""
    result = run_child(method, "decode")
    assert result["mismatches"] == []
    # 3 steps x (6 buffers + 5 padding facts) + the drafts (+ the logits cache): the comparison saw them all.
    assert result["compared"] == 34 + (method == "probabilistic")
    assert result["distinct_rows"] == 3 and len(set(result["slot_mapping_step1"])) == 3  # not a degenerate batch
    # Every decode step after the first replayed the padded size's graph, and none fell back to vLLM's eager loop.
    assert result["replays"] == {str(result["padded"]): result["k"] - 1} and result["eager_decode_loops"] == 0


@pytest.mark.parametrize("method", ["greedy", "probabilistic"])
def test_step0_replay_inputs_and_drafts_are_vllms_eager_prefill(method):
    """Step 0 (the expanded pass) of a decode batch with 0, 1 and 2 rejected tokens: the expanded ids and positions,
    seq_lens, query starts and slot mapping the draft reads equal vLLM's eager ``_prefill``'s for every real token,
    the padding rows and tokens are vLLM's padding, and the step-0 drafts (and the probabilistic logits cache) are
    bitwise vLLM's: vLLM's input kernel, slot mapping and sampler interpreted in a child process."""
    result = run_child(method, "prefill")
    assert result["mismatches"] == []
    # 6 buffers + 6 padding facts + the drafts (+ the logits cache): the comparison saw them all.
    assert result["compared"] == 13 + (method == "probabilistic")
    # 3 requests x (1 + K verified + the correction slot), each token its own slot: not a degenerate batch.
    assert result["tokens"] == result["distinct_slots"] == 18 and result["distinct_rows"] == 3
    assert result["replays"] == {str(result["padded_tokens"]): 1} and result["eager_prefills"] == 0


def test_the_phase_clocks_draft_scopes_hold_step0_and_the_decode_steps():
    """The serving bench's phase clock on the standalone draft model (vLLM 0.33.0's ``StandaloneARSpeculator`` and
    ours): under the harness's real hook table, whole ``propose`` calls (vLLM's eager class, ours replaying, ours
    without graphs) run step 0's forward and sample inside the drafter-first-pass scope and each decode step's inside
    the chain-steps scope, which the phase map reads as ``draft_first`` and ``draft_chain`` (not output processing,
    where they fell when no hook matched this speculator); every scope closed after."""
    from portable_spec_harness.e2e.step_breakdown import PHASE_OF

    result = run_child("greedy", "scopes")
    k = result["k"]
    want = [["draft_first", "draft_first"]] + [["draft_chain", "draft_chain"]] * (k - 1)
    for run in ("vllm", "ours_replayed", "ours_eager"):
        phases = [[PHASE_OF.get(scope) for scope in forward_and_sample] for forward_and_sample in result[run]]
        assert phases == want, (run, result[run])
    # ours ran both of its paths: step 0 and the K-1 decode steps replayed, then vLLM's eager steps via super()
    assert result["counts"] == {"replays": [1, k - 1], "eager": [1, 1]}
    assert result["left_open"] == []
    assert result["installed"] == [
        "vllm.v1.worker.gpu.spec_decode.standalone_ar.speculator.StandaloneARSpeculator.propose",
        "vllm.v1.worker.gpu.spec_decode.standalone_ar.speculator.StandaloneARSpeculator._multi_step_decode",
        "portable_spec.vllm_adapter.spec_decode.standalone_ar.GraphedStandaloneARSpeculator._multi_step_decode"]


def test_this_module_is_in_the_version_span():
    from version_span import MODULES

    assert os.path.basename(__file__) in MODULES


def test_our_worker_builds_it_inside_init_device_and_puts_vllms_back(models, mrv2, monkeypatch):
    """PortableWorker.init_device under MRV2 holds the override around vLLM's init_device (whose runner build the
    hook-point test pins): the speculator built inside is ours, and vLLM's name is back after, also on a raise."""
    import vllm.v1.worker.gpu.spec_decode.standalone_ar.speculator as standalone_module
    from vllm.v1.worker.gpu_worker import Worker

    from portable_spec.vllm_adapter.spec_decode.standalone_ar import GraphedStandaloneARSpeculator
    from portable_spec.vllm_adapter.worker import gpu_worker

    vllms = standalone_module.StandaloneARSpeculator
    built = []

    def runner_build(self):  # stands in for vLLM's device set-up; the runner's speculator build is vLLM's
        built.append(build_speculator(self.vllm_config))
        if len(built) == 2:
            raise RuntimeError("device set-up failed")

    monkeypatch.setattr(Worker, "init_device", runner_build)
    monkeypatch.setattr(gpu_worker, "bind_kernel_substitutes", lambda vllm_config=None: [])
    worker = gpu_worker.PortableWorker.__new__(gpu_worker.PortableWorker)
    worker.vllm_config = engine_config(models)
    worker.init_device()
    assert type(built[0]) is GraphedStandaloneARSpeculator
    assert standalone_module.StandaloneARSpeculator is vllms
    with pytest.raises(RuntimeError, match="device set-up failed"):
        worker.init_device()
    assert type(built[1]) is GraphedStandaloneARSpeculator and standalone_module.StandaloneARSpeculator is vllms


def test_the_phase_clock_scopes_on_the_standalone_speculators_resolve_and_no_detail_encloses_a_switch():
    """The draft-model speculator's phase scopes (vLLM's and ours: the first pass a region, the decode steps a switch
    into the chain) and our speculator's detail scopes (its input prep and replays) name methods this vLLM's classes
    define; no detail scope is a method a region switch happens inside (which would misnest the clock's scopes)."""
    import inspect

    import portable_spec.vllm_adapter.spec_decode.standalone_ar  # noqa: F401
    import vllm.v1.worker.gpu.spec_decode.standalone_ar.speculator  # noqa: F401
    from portable_spec_harness.vllm_door import profile_scopes as scopes

    modules = (scopes.MRV2_STANDALONE, scopes.OURS_STANDALONE)
    hooks = [h for h in scopes.HOOKS if h.module in modules]
    details = [h for h in scopes.DETAIL_HOOKS if h.module in modules]
    switches = {h.attr.split(".")[-1] for h in scopes.HOOKS if h.kind.startswith("switch")}
    assert len(hooks) >= 3 and len(details) == 4, (hooks, details)
    for hook in hooks + details:
        owner, name = scopes.resolve(hook)
        assert callable(getattr(owner, name)), hook
    for hook in details:
        owner, name = scopes.resolve(hook)
        assert name in vars(owner), hook  # ours defines it (a hook on an inherited method would wrap vLLM's)
        source = inspect.getsource(vars(owner)[name])
        assert not any(f".{s}(" in source for s in switches), hook
