"""Issue 23's Model Runner V2 parts on fabricated results, and the pieces they stand on: every check passes on a
correct run and fails on the one thing it guards (and on missing input); the parts are well formed and the cuda lane
runs them; the facts read from real vLLM classes; torchada's aliasing (musa-sim) puts MRV2's own captures through
the simulated torch.musa and its live-graph cap; the bench reports the no-regression key."""

from __future__ import annotations

import copy
import sys
from collections import namedtuple
from pathlib import Path
from types import SimpleNamespace

import pytest

from portable_spec_harness.e2e.bench import summarize
from portable_spec_harness.e2e.configs import BUILTIN_MRV2, OURS_PLATFORM_MRV2, VARIANTS
from portable_spec_harness.e2e.mrv2_checks import judge
from portable_spec.versions import installed_text
from portable_spec_harness.e2e.mrv2_parts import PARTS, Mrv2Part, runnable
from portable_spec_harness.e2e.parent import variant_env
from portable_spec.vllm_adapter.platform.mrv2_sizes import LEFT_TO_MRV2
from test_e2e_harness import load_script

ROOT = Path(__file__).resolve().parents[1]
OUR_POOL, VLLM_POOL = [0, 7], [0, 1]
SIZES = [1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64]
OUTPUTS = [[5, 6, 7, 8], [9, 10, 11, 12]]
LINE = (f"INFO [mrv2_sizes.py:71] portable_spec[cuda]: eagle K=3: {LEFT_TO_MRV2} {SIZES} (91 live graphs: ...). "
        "Why: ...")


def managers(pool, decode=True):
    full = [4, 8, 16, 24, 32]
    found = {name: {"mode": "FULL_AND_PIECEWISE", "full_sizes": full, "pool": pool, "graph_pools": [pool] * 5}
             for name in ("target", "draft_prefill")}
    if decode:
        found["draft_decode"] = {"mode": "FULL_DECODE_ONLY", "full_sizes": [1, 2, 4, 8], "pool": pool,
                                 "graph_pools": [pool] * 4}
    return found


def row(variant, seed=0, **extra):
    counts = {"drafts": 20, "draft_tokens": 60, "accepted": 60, "accepted_per_position": [20, 20, 20]}
    base = {"variant": variant, "seed": seed, "outputs": copy.deepcopy(OUTPUTS), "acceptance_counts": counts,
            "acceptance_per_position": [1.0, 1.0, 1.0]}
    if variant == "nospec":
        base.update(use_v2_model_runner=False, runner_kind="v1", platform="vllm.platforms.cuda.NvmlCudaPlatform",
                    acceptance_counts=None, acceptance_per_position=None)
    else:
        base.update(use_v2_model_runner=True, runner_kind="mrv2", capture_sizes=list(SIZES), vllm_graphs=77,
                    mrv2_full_graphs=14, one_pool=True)
    if variant == BUILTIN_MRV2:
        base.update(platform="vllm.platforms.cuda.NvmlCudaPlatform", worker="vllm.v1.worker.gpu_worker.Worker",
                    mrv2_managers=managers(VLLM_POOL), platform_pool=VLLM_POOL, port_pool=None, log_excerpt=[])
    if variant == OURS_PLATFORM_MRV2:
        base.update(platform="portable_spec.vllm_adapter.platform.cuda.PortableCudaPlatform",
                    worker="portable_spec.vllm_adapter.worker.gpu_worker.PortableWorker",
                    mrv2_managers=managers(OUR_POOL), platform_pool=OUR_POOL, port_pool=OUR_POOL,
                    mrv2_sizes={"sizes": list(SIZES), "live_graphs": 91, "live_graph_limit": None},
                    log_excerpt=["INFO [x.py:1] Platform plugin portable_spec is activated", LINE],
                    jit_during_inference=[], jit_monitor_active=True)
    base.update(extra)
    return base


def rows(**broken):
    return [row(v, **(broken if v == OURS_PLATFORM_MRV2 else {})) for v in ("nospec", BUILTIN_MRV2,
                                                                          OURS_PLATFORM_MRV2)]


def checks_of(results, method="eagle", k=3, perfect=True, design=None):
    return judge(results, [0], method=method, k=k, perfect=perfect, design=design)


def test_every_check_passes_for_a_correct_run():
    judged = checks_of(rows())
    assert judged.checks and all(judged.checks.values()), [k for k, v in judged.checks.items() if not v]
    assert judged.evidence["ours_platform_mrv2_s0_graphs_in_our_one_pool"] == {"ok": True, "compared_pools": 18}
    assert judged.evidence["ours_platform_mrv2_s0_capture_sizes_left_to_mrv2"]["compared_sizes"] == 11
    assert judged.evidence["ours_platform_mrv2_s0_acceptance_counts_equal_builtin_mrv2"]["compared_drafts"] == 60
    for name in ("builtin_mrv2_s0_greedy_equals_nospec", "builtin_mrv2_s0_every_position_100pct",
                 "ours_platform_mrv2_s0_draft_decode_graphs_captured", "ours_platform_mrv2_s0_one_line_says_why"):
        assert name in judged.checks, name


BROKEN = [
    ({"runner_kind": "v1"}, "mrv2_runner"),
    ({"use_v2_model_runner": False}, "mrv2_runner"),
    ({"platform": "vllm.platforms.cuda.NvmlCudaPlatform"}, "our_platform"),
    ({"worker": "vllm.v1.worker.gpu_worker.Worker"}, "our_worker"),
    ({"mrv2_managers": managers(VLLM_POOL)}, "graphs_in_our_one_pool"),
    ({"mrv2_managers": {**managers(OUR_POOL), "draft_decode": {**managers(OUR_POOL)["draft_decode"],
                                                               "graph_pools": [OUR_POOL] * 3 + [[0, 9]]}}},
     "graphs_in_our_one_pool"),
    ({"port_pool": None}, "graphs_in_our_one_pool"),
    ({"platform_pool": VLLM_POOL}, "graphs_in_our_one_pool"),
    ({"one_pool": False}, "piecewise_wrappers_in_the_pool"),
    ({"mrv2_managers": {k: v for k, v in managers(OUR_POOL).items() if k != "draft_decode"}},
     "draft_decode_graphs_captured"),
    ({"mrv2_managers": {**managers(OUR_POOL), "draft_prefill": {"full_sizes": []}}}, "draft_prefill_graphs_captured"),
    ({"capture_sizes": [4, 8, 16, 24, 32, 40, 48, 56, 64]}, "capture_sizes_left_to_mrv2"),
    ({"capture_sizes": []}, "capture_sizes_left_to_mrv2"),
    ({"log_excerpt": [LINE, LINE]}, "one_line_says_why"),
    ({"log_excerpt": []}, "one_line_says_why"),
    ({"jit_during_inference": ["Triton kernel JIT compilation: _resample_kernel"]}, "no_compile_after_boot"),
    ({"jit_monitor_active": False}, "no_compile_after_boot"),
    ({"mrv2_sizes": None}, "live_graphs_counted_exactly"),
    ({"vllm_graphs": 102}, "live_graphs_counted_exactly"),
    ({"mrv2_full_graphs": None}, "live_graphs_counted_exactly"),
    ({"outputs": [[5, 6, 7, 8], [9, 10, 11, 13]]}, "greedy_equals_nospec"),
    ({"outputs": [[5, 6, 7, 8]]}, "greedy_equals_nospec"),
    ({"acceptance_counts": {"drafts": 20, "draft_tokens": 60, "accepted": 59, "accepted_per_position": [20, 20, 19]}},
     "acceptance_counts_equal_builtin_mrv2"),
    ({"acceptance_counts": None}, "acceptance_counts_equal_builtin_mrv2"),
    ({"acceptance_per_position": [1.0, 1.0, 0.95]}, "every_position_100pct"),
    ({"acceptance_per_position": None}, "every_position_100pct"),
]


@pytest.mark.parametrize("broken,failing", BROKEN, ids=[f for _, f in BROKEN])
def test_each_failure_mode_fails_its_check(broken, failing):
    checks = checks_of(rows(**broken)).checks
    assert checks[f"ours_platform_mrv2_s0_{failing}"] is False
    assert not all(checks.values())


def test_where_vllm_has_no_count_the_count_check_is_left_out_and_says_why():
    judged = checks_of(rows(mrv2_sizes={"counted": False, "live_graphs": None}))
    assert "ours_platform_mrv2_s0_live_graphs_counted_exactly" not in judged.checks and all(judged.checks.values())
    assert judged.evidence["ours_platform_mrv2_s0_live_graphs_counted_exactly"] == {
        "not_applicable": "no count on this vLLM"}
    assert checks_of(rows(mrv2_sizes={"counted": True, "live_graphs": None})).checks[
        "ours_platform_mrv2_s0_live_graphs_counted_exactly"] is False


def test_a_missing_or_crashed_engine_fails_and_nothing_is_judged_on_nothing():
    without_builtin = [r for r in rows() if r["variant"] != BUILTIN_MRV2]
    checks = checks_of(without_builtin).checks
    assert checks["builtin_mrv2_s0_ran"] is False
    assert checks["ours_platform_mrv2_s0_capture_sizes_left_to_mrv2"] is False  # no reference: fails, never passes
    assert checks["ours_platform_mrv2_s0_acceptance_counts_equal_builtin_mrv2"] is False
    crashed = [r if r["variant"] != OURS_PLATFORM_MRV2 else {"variant": r["variant"], "seed": 0, "error": "exit 1"}
               for r in rows()]
    checks = checks_of(crashed).checks
    assert checks["ours_platform_mrv2_s0_ran"] is False and not all(checks.values())
    nospec_crashed = [r if r["variant"] != "nospec" else {"variant": "nospec", "seed": 0, "error": "exit 1"}
                      for r in rows()]
    assert checks_of(nospec_crashed).checks["ours_platform_mrv2_s0_greedy_equals_nospec"] is False
    assert not checks_of([]).checks.get("ours_platform_mrv2_s0_ran", False)


def test_the_builtin_engine_must_run_mrv2_with_graphs_too():
    results = [row(v, **({"runner_kind": "v1", "mrv2_managers": {}} if v == BUILTIN_MRV2 else {}))
               for v in ("nospec", BUILTIN_MRV2, OURS_PLATFORM_MRV2)]
    checks = checks_of(results).checks
    assert checks["builtin_mrv2_s0_mrv2_runner"] is False and checks["builtin_mrv2_s0_target_graphs_captured"] is False


def test_dflash_and_k1_parts_expect_their_speculators_managers():
    dflash = {"target": managers(OUR_POOL)["target"], "draft_query": {**managers(OUR_POOL)["target"]}}
    results = [row(v, mrv2_managers=dflash if v != "nospec" else None, acceptance_per_position=[1.0, 0.0, 0.0])
               for v in ("nospec", BUILTIN_MRV2, OURS_PLATFORM_MRV2)]
    for r in results[1:]:
        r["mrv2_managers"] = {name: {**m, "pool": r["platform_pool"],
                                     "graph_pools": [r["platform_pool"]] * len(m["full_sizes"])}
                              for name, m in dflash.items()}
    results[2]["mrv2_full_graphs"] = 10
    results[2]["mrv2_sizes"] = {"live_graphs": 87}
    checks = checks_of(results, method="dflash", perfect=False).checks
    assert all(checks.values()), [k for k, v in checks.items() if not v]
    assert "ours_platform_mrv2_s0_draft_query_graphs_captured" in checks
    assert not any("every_position" in name or "draft_decode" in name for name in checks)
    k1 = [row(v, mrv2_managers=managers(r_pool, decode=False) if v != "nospec" else None)
          for v, r_pool in (("nospec", None), (BUILTIN_MRV2, VLLM_POOL), (OURS_PLATFORM_MRV2, OUR_POOL))]
    k1[2]["mrv2_full_graphs"], k1[2]["mrv2_sizes"] = 10, {"live_graphs": 87}
    checks = checks_of(k1, k=1).checks
    assert all(checks.values()) and "ours_platform_mrv2_s0_draft_decode_graphs_captured" not in checks


def test_context_parts_are_judged_against_the_construction_too():
    design = {"outputs": {0: copy.deepcopy(OUTPUTS)}, "acceptance": [1.0, 1.0, 1.0]}
    judged = checks_of(rows(), perfect=False, design=design)
    assert all(judged.checks.values()), [k for k, v in judged.checks.items() if not v]
    assert judged.checks["nospec_s0_greedy_equals_design"] and judged.checks[
        "ours_platform_mrv2_s0_acceptance_as_designed"]
    off = checks_of(rows(acceptance_counts={"drafts": 20, "draft_tokens": 60, "accepted": 40,
                                            "accepted_per_position": [20, 20, 0]}), perfect=False, design=design)
    assert off.checks["ours_platform_mrv2_s0_acceptance_as_designed"] is False


# ------------------------------------------------------------------------------------------------ parts, lane
def test_the_parts_are_the_issues_and_the_lane_runs_them_by_name_or_group():
    assert set(PARTS) == {"mrv2_perfect", "mrv2_eagle3", "mrv2_dflash", "mrv2_ctx_eagle", "mrv2_ctx_eagle3",
                          "mrv2_ctx_dflash", "mrv2_ctx_draft_model"}
    assert (PARTS["mrv2_perfect"].pair, PARTS["mrv2_perfect"].k) == ("llama_eagle", 3)
    assert (PARTS["mrv2_eagle3"].pair, PARTS["mrv2_eagle3"].k) == ("llama_eagle3", 5)
    assert {PARTS[n].pair for n in ("mrv2_ctx_eagle", "mrv2_ctx_eagle3", "mrv2_ctx_dflash")} == {
        "llama_ctx_eagle", "llama_ctx_eagle3", "qwen3_ctx_dflash"}
    matrix = load_script("v1_drafter_matrix")
    assert load_script("mrv2_e2e").judge is judge  # the driver judges with these checks
    assert matrix.GROUPS["mrv2"] == runnable(installed_text())
    for name, part in PARTS.items():
        assert matrix.part_args(name) == part.args() and matrix.part_script(name).endswith("mrv2_e2e.py")
        assert part.args()[part.args().index("--variants") + 1] == "nospec,builtin_mrv2,ours_platform_mrv2"
    assert matrix.part_script("perfect").endswith("v1_drafter_e2e.py")
    lane = (ROOT / "ci/lanes/cuda.sh").read_text()
    assert "mrv2-bench) bash ci/gpu/mrv2_bench.sh" in lane and "E2E_PARTS=mrv2" in lane


def test_the_draft_model_part_runs_only_where_mrv2_runs_the_draft_model(tmp_path, monkeypatch, capsys):
    """vLLM sends ``draft_model`` to MRV2 from 0.33.0 only: the ``mrv2`` group leaves its part out below that, and
    naming it there is a one-line error (exit 2) rather than MRV2 checks judging a V1 engine."""
    part = PARTS["mrv2_ctx_draft_model"]
    assert (part.pair, part.k, part.seeds, part.since) == ("llama_ctx_draft_model", 3, (0, 1), "0.33.0")
    others = [name for name in PARTS if name != "mrv2_ctx_draft_model"]
    assert runnable("0.26.0") == runnable("0.28.0+musa") == others
    assert runnable("0.33.0") == runnable("0.33.1.dev3") == list(PARTS) and runnable(None) == []
    matrix = load_script("v1_drafter_matrix")
    monkeypatch.setattr(matrix, "installed_text", lambda: "0.26.0")
    monkeypatch.setattr(sys, "argv", ["v1_drafter_matrix.py", str(tmp_path), "--parts", "mrv2_ctx_draft_model"])
    with pytest.raises(SystemExit) as exited:
        matrix.main()
    assert exited.value.code == 2
    assert "need vLLM >= 0.33.0 (installed: 0.26.0)" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # refused before it made anything


@pytest.mark.parametrize("kwargs,match", [({"pair": "nope"}, "unknown pair"),
                                          ({"model_variant": "partial", "pair": "llama_eagle3"}, "no 'partial'"),
                                          ({"variants": ("nospec", "bogus", BUILTIN_MRV2)}, "unknown engine"),
                                          ({"variants": ("nospec", BUILTIN_MRV2)}, "must boot"),
                                          ({"k": 0}, "k must be")])
def test_a_malformed_part_fails_in_one_line(kwargs, match):
    base = dict(name="p", pair="llama_eagle", model_variant="perfect", k=3, description="")
    with pytest.raises(ValueError, match=match):
        Mrv2Part(**{**base, **kwargs})


def test_the_mrv2_variants_let_vllm_pick_the_runner_whatever_the_caller_exported(monkeypatch):
    monkeypatch.setenv("VLLM_USE_V2_MODEL_RUNNER", "0")
    monkeypatch.setenv("VLLM_PLATFORM", "cuda")
    builtin, ours = variant_env(BUILTIN_MRV2), variant_env(OURS_PLATFORM_MRV2)
    assert "VLLM_USE_V2_MODEL_RUNNER" not in builtin and "VLLM_USE_V2_MODEL_RUNNER" not in ours
    assert "VLLM_PLATFORM" not in builtin and ours["VLLM_PLATFORM"] == "cuda"
    assert VARIANTS["builtin_mrv2_triton"].attention_backend == "TRITON_ATTN"
    assert variant_env("nospec")["VLLM_USE_V2_MODEL_RUNNER"] == "0"  # the greedy reference stays V1


def test_the_bench_reports_ours_platform_mrv2_over_builtin_mrv2(tmp_path):
    rows_ = [{"variant": v, "bench": [{"concurrency": c, "output_tok_s": tok * (c if c > 1 else 1),
                                       "output_tok_s_best": tok * 1.1, "tpot_ms": 1.0} for c in (1, 4, 16, 64)]}
             for v, tok in ((BUILTIN_MRV2, 1000.0), (OURS_PLATFORM_MRV2, 990.0))]
    summary = summarize(rows_)
    assert summary["ours_platform_mrv2_over_builtin_mrv2"] == {1: 0.99, 4: 0.99, 16: 0.99, 64: 0.99}
    assert summary["ours_platform_mrv2_over_builtin_mrv2_best"] == {1: 0.99, 4: 0.99, 16: 0.99, 64: 0.99}
    assert not any(k.startswith("full_drafter") for k in summary)
    pytest.importorskip("matplotlib")
    from portable_spec_harness.e2e.bench import plot

    plot({"results": rows_, "pair": "llama_eagle", "model_variant": "attention", "k": 3, "device": "cpu",
          "vllm": "0.26.0"}, tmp_path / "b.png")
    assert (tmp_path / "b.png").read_bytes()[:4] == b"\x89PNG"


# ------------------------------------------------------------------------------------------------ facts
def test_runner_kind_and_managers_are_read_from_vllms_own_classes(vllm_platform, monkeypatch):
    """Bare instances of vLLM's runner classes (nothing built) and real ``CudaGraphManager`` objects."""
    import vllm.v1.worker.gpu.cudagraph_utils as cudagraph_utils
    from vllm.v1.worker.gpu.model_runner import GPUModelRunner as Mrv2Runner
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner as V1Runner

    import portable_spec.ports.current as current
    from portable_spec_harness.vllm_door.mrv2_graphs import graph_managers, mrv2_graph_facts, runner_kind
    from recording_device import RecordingDevice, RecordingPort

    device = RecordingDevice()
    monkeypatch.setitem(current._INSTALLED_PORTS, "cuda", RecordingPort(device_module=device))

    class Subclassed(Mrv2Runner):  # a platform's own MRV2 runner still counts as MRV2
        pass

    Desc = namedtuple("Desc", "num_tokens")  # a batch descriptor's one field read here

    assert [runner_kind(cls.__new__(cls)) for cls in (Mrv2Runner, Subclassed, V1Runner)] == ["mrv2", "mrv2", "v1"]
    assert runner_kind(object()) == "other"

    def manager(sizes):
        m = cudagraph_utils.CudaGraphManager.__new__(cudagraph_utils.CudaGraphManager)
        m.cudagraph_mode, m.pool = SimpleNamespace(name="FULL"), ("pool", 3)
        m.graphs = {Desc(s): SimpleNamespace(pool=lambda: ("pool", 3)) for s in sizes}
        return m

    runner = Mrv2Runner.__new__(Mrv2Runner)
    runner.cudagraph_manager = manager([8, 4])
    runner.speculator = SimpleNamespace(prefill_cudagraph_manager=manager([4]), decode_cudagraph_manager=manager(
        [1, 2]), other=manager([16]), not_a_manager=3)
    assert set(graph_managers(runner)) == {"target", "draft_prefill", "draft_decode", "draft:other"}
    facts = mrv2_graph_facts(runner)
    assert facts["runner_kind"] == "mrv2" and facts["mrv2_full_graphs"] == 6
    assert facts["mrv2_managers"]["target"] == {"mode": "FULL", "full_sizes": [4, 8], "pool": ["pool", 3],
                                                "graph_pools": [["pool", 3], ["pool", 3]]}
    assert facts["port_pool"] == ["pool", id(device)]  # the pinned test platform is ours: its port's one pool
    assert mrv2_graph_facts(V1Runner.__new__(V1Runner)) == {"runner_kind": "v1", "port_pool": ["pool", id(device)]}


# ------------------------------------------------------------------------------------------------ musa-sim aliasing
def test_torchada_aliasing_puts_mrv2s_own_captures_through_the_simulation_and_its_cap(vllm_platform, monkeypatch):
    """vLLM's real ``CudaGraphManager.capture`` (FULL mode, 3 sizes) with ``torch.cuda``'s graph API aliased to a
    ``SimulatedMusa`` over a recording CPU stand-in: every graph MRV2 records is a simulated MUSAGraph in the
    simulation's pool and counted live; a cap below MRV2's graphs stops the capture, as torchada's cap would; the
    aliasing is undone by its restore function."""
    import contextlib

    import torch
    import vllm.v1.worker.gpu.cudagraph_utils as cudagraph_utils
    from vllm.config.compilation import CUDAGraphMode

    from portable_spec_harness.musa_sim import MusaSimError, SimulatedMusa, alias_torch_cuda_graphs
    from recording_device import RecordingDevice

    monkeypatch.setattr(cudagraph_utils, "graph_capture", lambda device: contextlib.nullcontext())
    monkeypatch.setattr(cudagraph_utils, "get_pp_group", lambda: SimpleNamespace(is_first_rank=True,
                                                                                 is_last_rank=True))
    original = (torch.cuda.CUDAGraph, torch.cuda.graph)

    def capture(cap):
        sim = SimulatedMusa(backing=RecordingDevice(), live_graph_cap=cap)
        monkeypatch.setattr(type(vllm_platform), "get_global_graph_pool", lambda self: sim.graph_pool_handle(),
                            raising=False)
        cfg = SimpleNamespace(scheduler_config=SimpleNamespace(max_num_seqs=8), speculative_config=None,
                              parallel_config=SimpleNamespace(data_parallel_size=1, tensor_parallel_size=1),
                              compilation_config=SimpleNamespace(cudagraph_capture_sizes=[1, 2, 4],
                                                                 max_cudagraph_capture_size=4))
        manager = cudagraph_utils.CudaGraphManager(cfg, torch.device("cpu"), CUDAGraphMode.FULL, 4)
        ran = []
        restore = alias_torch_cuda_graphs(sim)
        try:
            assert torch.cuda.CUDAGraph is sim.MUSAGraph and alias_torch_cuda_graphs(sim)  # idempotent
            manager.capture(lambda desc, warmup: lambda mode: ran.append((desc.num_tokens, mode.name)))
        finally:
            restore()
        return sim, manager, ran

    sim, manager, ran = capture(cap=None)
    assert (torch.cuda.CUDAGraph, torch.cuda.graph) == original  # restored
    assert len(manager.graphs) == 3 and all(isinstance(g, sim.MUSAGraph) for g in manager.graphs.values())
    counts = sim.call_counts()
    assert counts["MUSAGraph"] == counts["graph"] == sim.live_graphs == 3 and counts["graph_pool_handle"] == 1
    assert {g.pool() for g in manager.graphs.values()} == {manager.pool}
    assert [n for n, mode in ran if mode == "NONE"] == [4, 4, 2, 2, 1, 1]  # warm-up + capture per size
    with pytest.raises(MusaSimError, match="exceed the cap 2"):
        capture(cap=2)
    assert (torch.cuda.CUDAGraph, torch.cuda.graph) == original


def test_the_standalone_draft_model_is_judged_on_our_step_graphs_and_vllms_eager_speculator():
    """``draft_model`` under MRV2 (vLLM 0.33.0): vLLM's platform builds its eager StandaloneARSpeculator (no
    speculator graphs), ours our GraphedStandaloneARSpeculator with its step-0 and decode-step graphs, each judged on
    its own replays; the other checks (greedy, acceptance equal to vLLM's platform, the pool) are the same."""
    from portable_spec_harness.e2e.mrv2_checks import GRAPHED_STANDALONE, VLLM_STANDALONE

    def standalone(variant, speculator, graphs, replays=None, prefill_replays=None):
        kept = {name: m for name, m in managers(OUR_POOL if variant == OURS_PLATFORM_MRV2 else VLLM_POOL).items()
                if name == "target" or name in graphs}
        return {"mrv2_managers": kept, "speculator": speculator, "speculator_replays": replays,
                "speculator_eager_loops": None if replays is None else 2,
                "speculator_prefill_replays": prefill_replays,
                "speculator_eager_prefills": None if prefill_replays is None else 3}

    def results(ours_speculator=GRAPHED_STANDALONE, ours_graphs=("draft_prefill", "draft_decode"),
                ours_replays={"1": 5, "4": 2}, ours_prefill_replays={"5": 4}):
        return [row("nospec"), row(BUILTIN_MRV2, **standalone(BUILTIN_MRV2, VLLM_STANDALONE, ())),
                row(OURS_PLATFORM_MRV2, **standalone(OURS_PLATFORM_MRV2, ours_speculator, ours_graphs,
                                                     ours_replays, ours_prefill_replays))]

    judged = checks_of(results(), method="draft_model")
    assert all(judged.checks.values()), [k for k, v in judged.checks.items() if not v]
    assert judged.evidence["ours_platform_mrv2_s0_draft_decode_graphs_replayed"] == {"ok": True,
                                                                                     "compared_replays": 7}
    assert judged.evidence["ours_platform_mrv2_s0_draft_prefill_graphs_replayed"] == {"ok": True,
                                                                                      "compared_replays": 4}
    assert "builtin_mrv2_s0_draft_decode_graphs_replayed" not in judged.checks  # vLLM's replays nothing
    assert "builtin_mrv2_s0_draft_prefill_graphs_replayed" not in judged.checks
    # The bug it guards: graphs captured, every pass eager (or no counter read at all), for either step.
    for replays, why in (({"1": 0, "4": 0}, "no decode graph replayed (2 eager passes)"),
                         ({}, "no decode graph replayed (2 eager passes)"),
                         (None, "no decode replay counter in the facts")):
        never = checks_of(results(ours_replays=replays), method="draft_model")
        assert never.checks["ours_platform_mrv2_s0_draft_decode_graphs_replayed"] is False
        assert never.evidence["ours_platform_mrv2_s0_draft_decode_graphs_replayed"]["detail"] == why
        assert never.checks["ours_platform_mrv2_s0_draft_prefill_graphs_replayed"]
    for replays, why in (({"5": 0}, "no prefill graph replayed (3 eager passes)"),
                         (None, "no prefill replay counter in the facts")):
        never = checks_of(results(ours_prefill_replays=replays), method="draft_model")
        assert never.checks["ours_platform_mrv2_s0_draft_prefill_graphs_replayed"] is False
        assert never.evidence["ours_platform_mrv2_s0_draft_prefill_graphs_replayed"]["detail"] == why
    assert judged.checks["ours_platform_mrv2_s0_draft_decode_graphs_captured"]
    assert judged.checks["ours_platform_mrv2_s0_draft_prefill_graphs_captured"]
    assert judged.checks["ours_platform_mrv2_s0_standalone_speculator_class"]
    assert judged.checks["builtin_mrv2_s0_standalone_speculator_class"]
    assert "builtin_mrv2_s0_draft_decode_graphs_captured" not in judged.checks  # vLLM's captures none
    vllms_class = checks_of(results(ours_speculator=VLLM_STANDALONE), method="draft_model")
    assert vllms_class.checks["ours_platform_mrv2_s0_standalone_speculator_class"] is False
    no_graphs = checks_of(results(ours_graphs=()), method="draft_model")
    assert no_graphs.checks["ours_platform_mrv2_s0_draft_prefill_graphs_captured"] is False
    assert no_graphs.checks["ours_platform_mrv2_s0_draft_decode_graphs_captured"] is False
