"""Live graphs the target's capture sizes cost on vLLM's V1 runner, for every cudagraph mode vLLM has, held to vLLM's
own keys and to the live graphs counted on the GPU.

Why: the MUSA plan prunes capture sizes to torchada's cap with this count, and the drafter's runtime budget is the cap
minus it. An undercount lets the engine's graphs exceed the cap. The count once was "one FULL graph and the target's
pieces per size"; the GPU (vLLM 0.28.0, musa-sim) showed 68 live graphs beside our 9 where it planned 54: vLLM's V1
drafter also captures PIECEWISE graphs of its own model at every size, and FULL graphs exist only for the
uniform-decode sizes. For the separate draft model the stored plan even counted the draft's layers as the target's
(vLLM re-runs the hook on the draft's replaced config)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from portable_spec.capture_sizes import plan_capture_sizes
from portable_spec.vllm_adapter.patch import version_gate
from portable_spec.vllm_adapter.platform import plan_state
from portable_spec.vllm_adapter.platform.config_hook import target_graph_cost
from shared_zoo import shared_zoo
from vllm_configs import zoo_config

RESULTS = Path(__file__).resolve().parents[1] / "bench" / "results"

pytestmark = pytest.mark.skipif(not version_gate.has("v1_full_drafter"),
                                reason=str(version_gate.why_not("v1_full_drafter")))


@pytest.fixture(scope="module")
def config(vllm_platform, tmp_path_factory):
    return zoo_config("llama_eagle", shared_zoo(tmp_path_factory))


def planned_target_graphs(config) -> int:
    """The planner's count for the config's own capture sizes, with the cost the hook derives."""
    per_size, full_decode = target_graph_cost(config)
    spec = config.speculative_config
    plan = plan_capture_sizes(spec.method, spec.num_speculative_tokens, config.scheduler_config.max_num_seqs,
                              user_sizes=config.compilation_config.cudagraph_capture_sizes,
                              graphs_per_target_size=per_size, full_decode_graphs=full_decode)
    assert list(plan.target_sizes) == list(config.compilation_config.cudagraph_capture_sizes)
    return plan.target_live_graphs


def vllms_keyed_graphs(config) -> dict[str, int]:
    """The graphs vLLM's own dispatchers key for this config: the runner's (``CudagraphDispatcher``) and the V1
    drafter's (``SpecDecodeBaseProposer.initialize_cudagraph_keys``, vLLM's method on a stand-in holding only what it
    reads), each PIECEWISE key times its model's pieces. The drafter's PIECEWISE keys become graphs only where the
    compiled model is split into pieces (a PIECEWISE mixed mode); under FULL no piece is wrapped in a graph (the GPU's
    FULL part has exactly its FULL graphs)."""
    from vllm.config.compilation import CUDAGraphMode
    from vllm.v1.cudagraph_dispatcher import CudagraphDispatcher
    from vllm.v1.spec_decode.llm_base_proposer import SpecDecodeBaseProposer

    mode = config.compilation_config.cudagraph_mode
    spec = config.speculative_config
    runner = CudagraphDispatcher(config)
    runner.initialize_cudagraph_keys(mode, 1 + spec.num_speculative_tokens)
    drafter = SimpleNamespace(speculative_config=spec, cudagraph_dispatcher=CudagraphDispatcher(config))
    SpecDecodeBaseProposer.initialize_cudagraph_keys(drafter, mode)
    parallel = config.parallel_config
    target_pieces = config.model_config.get_num_layers(parallel) + 1
    draft_pieces = spec.draft_model_config.get_num_layers(parallel) + 1
    keys, draft_keys = runner.cudagraph_keys, drafter.cudagraph_dispatcher.cudagraph_keys
    split = mode.mixed_mode() == CUDAGraphMode.PIECEWISE
    return {"full": len(keys[CUDAGraphMode.FULL]),
            "target_pieces": len(keys[CUDAGraphMode.PIECEWISE]) * target_pieces,
            "draft_pieces": len(draft_keys[CUDAGraphMode.PIECEWISE]) * draft_pieces if split else 0}


@pytest.mark.parametrize("mode", ["FULL", "PIECEWISE", "FULL_AND_PIECEWISE", "FULL_DECODE_ONLY"])
def test_the_count_is_the_graphs_vllms_dispatchers_key(vllm_platform, tmp_path_factory, mode):
    from vllm.config.compilation import CUDAGraphMode

    config = zoo_config("llama_eagle", shared_zoo(tmp_path_factory), mode=mode)
    config.compilation_config.cudagraph_mode = CUDAGraphMode[mode]  # vLLM may resolve it on the CPU platform
    keyed = vllms_keyed_graphs(config)
    assert sum(keyed.values()) > 0, keyed
    if mode == "FULL_AND_PIECEWISE":  # every term present, and the FULL ones only for the uniform-decode sizes
        assert keyed["draft_pieces"] > 0 and 0 < keyed["full"] < len(config.compilation_config.cudagraph_capture_sizes)
    if mode == "PIECEWISE":
        return  # no FULL graph: our hook plans no drafter graphs there, and nothing here counts for it
    assert planned_target_graphs(config) == sum(keyed.values()), keyed


def test_a_draft_models_replaced_config_counts_the_targets_pieces(vllm_platform, tmp_path_factory):
    """vLLM re-runs the hook on the separate draft model's replaced config (its ``model_config`` is the draft's):
    the target's pieces are those recorded on the first run, not the draft's layers."""
    import dataclasses

    config = zoo_config("llama_ctx_draft_model", shared_zoo(tmp_path_factory))
    parallel = config.parallel_config
    target_layers = config.model_config.get_num_layers(parallel)
    draft_layers = config.speculative_config.draft_model_config.get_num_layers(parallel)
    assert target_layers != draft_layers  # else this test could not tell them apart
    first = target_graph_cost(config)
    assert plan_state.read(config).plan is not None
    replaced = dataclasses.replace(config, model_config=config.speculative_config.draft_model_config)
    assert target_graph_cost(replaced) == first == ((target_layers + 1) + (draft_layers + 1), True)


# ------------------------------------------------------------------------------------------------ the GPU's count
GPU_RUNS = {
    # vLLM 0.28.0, musa-sim lane on an H200: every V1 part (EAGLE partial and attention, EAGLE-3, DFlash, the
    # separate draft model, and FULL-only under a forced cap of 8)
    "2026-11-29-h200-session26": ("ms028v1a", "ms028v1b", "ms028dm"),
    # vLLM 0.28.0, musa-sim lane on an H200x2: MiMo-shaped MTP (a draft vLLM does not compile: 32 live target graphs
    # where the count then planned 50), EAGLE over 3 seeds, the draft model, FULL-only under the cap of 8
    "2026-11-29-h200x2-session27": ("ms028v1c",),
    # vLLM 0.26.0, the context matrix on an H100: EAGLE, DFlash and MTP on MLA with our drafter
    "2026-11-25-h100-context-matrix": ("e2e_context",),
}


def gpu_rows():
    """Every committed V1 row with our drafter's graphs and vLLM's live graphs counted: (where, zoo pair, row)."""
    rows = []
    for run, folders in GPU_RUNS.items():
        for folder in folders:
            for path in sorted([*(RESULTS / run / folder).rglob("*.json"), *(RESULTS / run / folder).rglob("*.json.gz")]):
                data = json.loads(gzip.open(path, "rt").read() if path.suffix == ".gz" else path.read_text())
                if "parts" in data:  # the musa-sim lane: a pair per part
                    found = [(part.get("pair"), r) for part in data["parts"].values() for r in part.get("rows", [])]
                elif "results" in data and "injected_bug" in data and not data["injected_bug"]:
                    found = [(data["pair"], r) for r in data["results"]]  # an e2e run (no injected bug)
                else:
                    continue
                rows += [(f"{run}/{folder}/{path.name}:{r['variant']}:s{r.get('seed')}", pair, r) for pair, r in found
                         if r.get("drafter_graphs") and r.get("use_v2_model_runner") is False and r.get("capture_plan")]
    return rows


def test_the_committed_gpu_runs_have_rows_to_compare():
    rows = gpu_rows()
    methods = {r["capture_plan"]["method"] for _, _, r in rows}
    assert {"eagle", "eagle3", "dflash", "draft_model", "mtp"} <= methods, methods
    assert {"deepseek_mla_mtp", "mimo_ctx_mtp"} <= {pair for _, pair, _ in rows}  # MTP compiled by vLLM, and not
    assert any(r.get("cudagraph_mode") == "FULL" for _, _, r in rows)  # the FULL-only part
    assert all(pair for _, pair, _ in rows)


@pytest.mark.parametrize("where,pair,row", gpu_rows(), ids=lambda v: v if isinstance(v, str) and ":" in v else "")
def test_the_count_equals_the_live_graphs_the_gpu_counted(vllm_platform, tmp_path_factory, where, pair, row):
    """Each committed row's configuration rebuilt on CPU (its pair, K, max_num_seqs, capture sizes and cudagraph mode):
    the planned target graphs plus our drafter's planned graphs equal vLLM's live graphs plus ours on the GPU."""
    plan = row["capture_plan"]
    config = zoo_config(pair, shared_zoo(tmp_path_factory), max_num_seqs=plan["max_num_seqs"], k=plan["num_spec"],
                           sizes=row["capture_sizes"], mode=row["cudagraph_mode"])
    drafter_planned = len(plan["first_step"]["sizes"]) + len((plan.get("chain_step") or {}).get("sizes") or [])
    assert drafter_planned == row["drafter_graphs"], where
    assert planned_target_graphs(config) + drafter_planned == row["vllm_graphs"] + row["drafter_graphs"], where
