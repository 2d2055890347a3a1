"""The musa-sim engine lane's own logic on fabricated results: its engine variants and parts are what the issue asks
for (and agree with the planner), the child's engine arguments are merged right, and every check passes on a
correct run and fails on the one thing each guards: a harness bug must not be able to hide a failure on the GPU."""

from __future__ import annotations

import copy
import os

import pytest

from portable_spec.capture_sizes import plan_capture_sizes
from portable_spec_harness.e2e.child import variant_engine_args
from portable_spec_harness.e2e.configs import MUSA_SIM_BUDGET_CAP, VARIANTS
from portable_spec_harness.e2e.facts import backend_names, simulation_facts
from portable_spec_harness.e2e.musa_sim_checks import musa_substitutes, part_checks
from portable_spec_harness.e2e.musa_sim_parts import PARTS, MusaSimPart
from portable_spec_harness.e2e.parent import variant_env
from portable_spec_harness.model_zoo import PAIRS
from portable_spec_harness.musa_sim_plugin import DIST_INFO, PLATFORM_QUALNAME
from test_e2e_harness import load_script  # a ci/gpu script, imported with its main guarded

K3 = [1.0, 1.0, 1.0]


# ------------------------------------------------------------------------------------------------ definitions
def test_variants_switch_the_simulation_and_the_comparison_on():
    sim, cuda, budget = (VARIANTS[v] for v in ("musa_sim_full_drafter", "cuda_triton_full_drafter",
                                                "musa_sim_budget"))
    assert sim.env == {"VLLM_USE_V2_MODEL_RUNNER": "0", "VLLM_PLATFORM": "musa", "PORTABLE_SPEC_SIM_DEVICE": "musa"}
    assert sim.simulated_device == "musa" and sim.attention_backend is None  # MUSA picks TRITON_ATTN itself
    assert cuda.env["VLLM_PLATFORM"] == "cuda" and cuda.attention_backend == "TRITON_ATTN"
    assert cuda.simulated_device is None
    assert budget.env["TORCHADA_GRAPH_EXEC_CAP"] == str(MUSA_SIM_BUDGET_CAP)
    assert budget.engine_args == {"compilation_config": {"cudagraph_mode": "FULL"}}


def test_a_musa_sim_child_gets_the_plugin_first_and_others_never_get_the_switch(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", "/tmp/site")
    monkeypatch.setenv("PORTABLE_SPEC_SIM_DEVICE", "musa")
    monkeypatch.setenv("TORCHADA_GRAPH_EXEC_CAP", "3")
    env = variant_env("musa_sim_full_drafter")
    first, *rest = env["PYTHONPATH"].split(os.pathsep)
    assert os.path.isdir(os.path.join(first, DIST_INFO)) and rest == ["/tmp/site"]
    assert "TORCHADA_GRAPH_EXEC_CAP" not in env  # a caller's cap never leaks into an unforced variant
    assert variant_env("musa_sim_budget")["TORCHADA_GRAPH_EXEC_CAP"] == str(MUSA_SIM_BUDGET_CAP)
    cuda = variant_env("cuda_triton_full_drafter")
    assert "PORTABLE_SPEC_SIM_DEVICE" not in cuda and cuda["PYTHONPATH"] == "/tmp/site"


def test_engine_arguments_merge_the_variants_with_the_tensor_parallel_switches():
    parallel = {"tensor_parallel_size": 2, "compilation_config": {"pass_config": {"fuse_allreduce_rms": False}}}
    assert variant_engine_args(VARIANTS["musa_sim_budget"], parallel) == {
        "tensor_parallel_size": 2,
        "compilation_config": {"pass_config": {"fuse_allreduce_rms": False}, "cudagraph_mode": "FULL"}}
    assert variant_engine_args(VARIANTS["cuda_triton_full_drafter"], {"tensor_parallel_size": 1}) == {
        "tensor_parallel_size": 1, "attention_backend": "TRITON_ATTN"}
    assert variant_engine_args(VARIANTS["full_drafter"], {"tensor_parallel_size": 1}) == {"tensor_parallel_size": 1}


def test_parts_are_the_issues_and_agree_with_the_planner():
    assert set(PARTS) == {"musa_sim_eagle", "musa_sim_eagle_attention", "musa_sim_eagle3", "musa_sim_dflash",
                          "musa_sim_draft_model", "musa_sim_mtp", "musa_sim_budget", "musa_sim_mrv2_eagle",
                          "musa_sim_mrv2_dflash", "musa_sim_mrv2_budget"}
    draft_model, eagle3, mtp = PARTS["musa_sim_draft_model"], PARTS["musa_sim_eagle3"], PARTS["musa_sim_mtp"]
    assert (draft_model.pair, draft_model.k, draft_model.mrv2) == ("llama_ctx_draft_model", 3, False)
    assert (mtp.pair, mtp.k, mtp.mrv2, mtp.prompt_set, PAIRS[mtp.pair][1]) == ("mimo_ctx_mtp", 3, False, "context",
                                                                                 "mtp")
    assert (eagle3.pair, eagle3.model_variant, eagle3.k, eagle3.mrv2) == ("llama_eagle3", "perfect", 3, False)
    assert draft_model.since == "0.28.0" and {p.since for n, p in PARTS.items() if p is not draft_model} == {"0.26.0"}
    eagle, dflash, budget = PARTS["musa_sim_eagle"], PARTS["musa_sim_dflash"], PARTS["musa_sim_budget"]
    assert (eagle.pair, eagle.k, eagle.max_num_seqs) == ("llama_eagle", 3, 8)
    assert "cuda_triton_full_drafter" in eagle.variants and "nospec" in eagle.variants
    assert (dflash.pair, dflash.k, dflash.max_num_seqs, dflash.capture_sizes) == ("qwen3_dflash", 8, 8,
                                                                                   (9, 18, 36, 72))
    assert plan_capture_sizes("dflash", 8, 8, live_graph_limit=1900).target_sizes == dflash.capture_sizes
    pruned = plan_capture_sizes(budget.pair.split("_")[1], budget.k, budget.max_num_seqs,
                                live_graph_limit=MUSA_SIM_BUDGET_CAP, graphs_per_target_size=1)
    assert pruned.target_sizes == budget.capture_sizes and pruned.warnings and budget.pruned
    assert budget.live_graph_limit == MUSA_SIM_BUDGET_CAP and eagle.live_graph_limit == 1900


def test_the_mrv2_parts_run_mrv2_on_the_musa_path_and_their_budget_agrees_with_the_count():
    """The MRV2 budget part's cap keeps exactly the sizes the MRV2 count keeps for vLLM's 11 default sizes."""
    from portable_spec.capture_sizes.mrv2 import mrv2_budget
    from portable_spec.capture_sizes.vllm_rules import vllm_default_ladder, vllm_default_max_capture_size
    from portable_spec_harness.e2e.configs import MUSA_SIM_MRV2_BUDGET_CAP

    mrv2 = {name: part for name, part in PARTS.items() if part.mrv2}
    assert set(mrv2) == {"musa_sim_mrv2_eagle", "musa_sim_mrv2_dflash", "musa_sim_mrv2_budget"}
    assert all(p.reference == "builtin_mrv2_triton" for p in mrv2.values())
    assert not any(p.mrv2 for name, p in PARTS.items() if name not in mrv2)
    budget = PARTS["musa_sim_mrv2_budget"]
    sizes = vllm_default_ladder(vllm_default_max_capture_size(budget.k, budget.max_num_seqs))
    counted = mrv2_budget(sizes, method="eagle", num_spec=budget.k, max_num_seqs=budget.max_num_seqs, mode="FULL",
                          live_graph_limit=MUSA_SIM_MRV2_BUDGET_CAP)
    assert counted.sizes == budget.capture_sizes and counted.dropped and budget.pruned
    assert counted.live_graphs == budget.live_graph_limit == MUSA_SIM_MRV2_BUDGET_CAP
    for name in ("musa_sim_mrv2", "musa_sim_mrv2_budget"):
        assert VARIANTS[name].env["PORTABLE_SPEC_SIM_TORCHADA_GRAPHS"] == "on"
        assert "VLLM_USE_V2_MODEL_RUNNER" not in VARIANTS[name].env  # vLLM picks the runner; the checks assert it
    assert VARIANTS["musa_sim_mrv2_budget"].engine_args == {"compilation_config": {"cudagraph_mode": "FULL"}}
    assert "PORTABLE_SPEC_SIM_TORCHADA_GRAPHS" not in VARIANTS["musa_sim_full_drafter"].env


def test_the_draft_model_part_runs_only_where_vllm_lets_our_musa_class_bind_its_kv_caches(tmp_path, monkeypatch,
                                                                                          capsys):
    """vLLM 0.26.0 refuses the draft model's shared layer indices on our standalone MUSA class
    (``tests/test_musa_platform_span.py``): the lane leaves the part out there by default, and naming it there is a
    one-line error (exit 2) before anything is built, not an engine failing at KV-cache set-up on the GPU."""
    from portable_spec_harness.e2e.musa_sim_parts import runnable

    others = [name for name in PARTS if name != "musa_sim_draft_model"]
    assert runnable("0.26.0") == others and runnable(None) == []
    assert runnable("0.28.0") == runnable("0.33.0") == list(PARTS)
    script = load_script("musa_sim_e2e")
    monkeypatch.setattr(script, "version", lambda package: "0.26.0")
    monkeypatch.setattr("sys.argv", ["musa_sim_e2e.py", str(tmp_path / "out"), "--parts", "musa_sim_draft_model"])
    with pytest.raises(SystemExit) as exited:
        script.main()
    assert exited.value.code == 2
    assert "need vLLM >= 0.28.0 (installed: 0.26.0)" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # refused before it made anything


@pytest.fixture(scope="module")
def shared_zoo(tmp_path_factory):
    return tmp_path_factory.mktemp("zoo")


@pytest.mark.parametrize("name", list(PARTS))
def test_every_part_has_the_design_its_checks_compare_with(name, shared_zoo):
    """The lane computes each part's greedy outputs from its pair's design before any engine boots. The context
    draft model's pair has no f-chain (its target follows the context): reading one cost the whole part on the GPU
    (vLLM 0.28.0, 2026-11-29: ``TypeError: 'NoneType' object is not subscriptable``). A context pair runs its own
    prompts, and the outputs are its design's on those prompts."""
    from portable_spec_harness.e2e.child import MAX_MODEL_LEN, prompts_for_seed
    from portable_spec_harness.model_zoo import CONTEXT_PAIRS, context_prompts

    part = PARTS[name]
    script = load_script("musa_sim_e2e")
    pair, child, continuations = script.part_design(part, shared_zoo)
    assert child[child.index("--prompt-set") + 1] == part.prompt_set == ("context" if part.pair in CONTEXT_PAIRS
                                                                          else "fixed")
    assert sorted(continuations) == list(part.seeds)
    for seed in part.seeds:
        prompts = prompts_for_seed(seed, part.prompt_set, script.MAX_TOKENS)
        assert len(continuations[seed]) == len(prompts) > 0
        assert all(out and all(isinstance(t, int) for t in out) for out in continuations[seed])
        if part.prompt_set == "context":  # the context function's own outputs on its own prompts
            designed = context_prompts(seed, max_model_len=MAX_MODEL_LEN, max_tokens=script.MAX_TOKENS)
            assert continuations[seed] == [list(p["expected_output"]) for p in designed]


def test_a_context_pair_is_judged_by_the_designs_bound_on_each_count():
    """On the context prompts a request's end cuts windows short, so the draft model's counts are held to the design's
    bound (``exactness.acceptance_as_designed``), not to exact rates; a count below the bound still fails."""
    part = PARTS["musa_sim_draft_model"]
    cut = {"drafts": 40, "draft_tokens": 120, "accepted": 117, "accepted_per_position": [40, 39, 38]}

    def rows(counts):
        return [row(v, s, acceptance_counts=counts, acceptance_per_position=[1.0, 0.975, 0.95],
                    replays={"first": 3, "chain_fused": 6}) for v in part.variants for s in part.seeds]

    checks = part_checks(part, rows(cut), {s: OUTPUTS[s] for s in part.seeds}, K3)
    assert checks["musa_sim_full_drafter_s0_acceptance_as_zoo_says"] is True
    assert all(checks.values()), [k for k, v in checks.items() if not v]
    low = {**cut, "accepted_per_position": [40, 39, 30]}  # 10 windows short with 2 requests: a drafter bug
    checks = part_checks(part, rows(low), {s: OUTPUTS[s] for s in part.seeds}, K3)
    assert checks["musa_sim_full_drafter_s0_acceptance_as_zoo_says"] is False


@pytest.mark.parametrize("kwargs,match", [({"variants": ("nospec", "bogus")}, "unknown engine variant"),
                                          ({"variants": ("nospec", "full_drafter")}, "boots no musa-sim variant"),
                                          ({"variants": ("musa_sim_full_drafter", "musa_sim_mrv2")},
                                           "mixes runners")])
def test_a_malformed_part_fails_in_one_line(kwargs, match):
    base = dict(name="p", pair="llama_eagle", model_variant="perfect", k=3, seeds=(0,), description="")
    with pytest.raises(ValueError, match=match):
        MusaSimPart(**{**base, **kwargs})


def test_facts_helpers_read_nested_attention_groups_and_no_simulation():
    class Backend:
        def __init__(self, name):
            self.name = name

        def get_name(self):
            return self.name

    def group(name):
        return type("G", (), {"backend": Backend(name)})()

    assert backend_names([[group("TRITON_ATTN"), group("TRITON_ATTN")], [group("FLASH_ATTN")]]) == [
        "FLASH_ATTN", "TRITON_ATTN"]
    assert backend_names([group("TRITON_ATTN")]) == ["TRITON_ATTN"] and backend_names(None) == []
    assert simulation_facts() is None  # nothing installed in this process


# ------------------------------------------------------------------------------------------------ checks
OUTPUTS = {0: [[5, 6, 7], [8, 9, 10]], 1: [[11, 12], [13, 14]], 2: [[15], [16, 17]]}


def log_lines(label="musa-sim"):
    ours = f"INFO [x.py:1] portable_spec[{label}]:"
    return ["INFO [__init__.py:52] Available plugins for group vllm.platform_plugins:",
            "INFO [__init__.py:237] Platform plugin portable_spec_musa_sim is activated",
            f"{ours} MusaWorker on {PLATFORM_QUALNAME}, live-graph limit 1900 (capture plan: 18 live graphs)",
            f"{ours} attention backend TRITON_ATTN from the MUSA rows of the capability table (x)",
            *[f"{ours} kernel substitute {name} bound at 1 vLLM site(s) (x)" for name in musa_substitutes()],
            "INFO [runner.py:1] portable_spec: drafter FULL graphs: 9 captured in 0.04 s, 1.0 MiB, sizes {}, 0 failed"]


def row(variant, seed, **extra):
    base = {"variant": variant, "seed": seed, "outputs": copy.deepcopy(OUTPUTS[seed]), "use_v2_model_runner": False,
            "jit_during_inference": [], "jit_monitor_active": True, "acceptance_per_position": K3,
            "acceptance_counts": {"drafts": 4, "draft_tokens": 12, "accepted": 12,
                                  "accepted_per_position": [4, 4, 4]}}
    if variant == "cuda_triton_full_drafter":
        base.update(platform="portable_spec.vllm_adapter.platform.cuda.PortableCudaPlatform",
                    attention_backends=["TRITON_ATTN"], draft_attention_backends=["TRITON_ATTN"],
                    capture_stats={"graphs": 9}, pointer_mismatches=0)
    if variant.startswith("musa_sim"):
        base.update(
            platform=PLATFORM_QUALNAME, platform_label="musa-sim",
            worker="portable_spec.vllm_adapter.worker.musa_worker.MusaWorker", attention_backends=["TRITON_ATTN"],
            draft_attention_backends=["TRITON_ATTN"], substitutes_bound=musa_substitutes(),
            capture_stats={"graphs": 9, "failed": {}}, replays={"first": 3, "chain_fused": 6}, pointer_mismatches=0,
            drafter_graphs=9, drafter_live_graph_limit=1891, drafter_port="musa-sim", vllm_graphs=45, one_pool=True,
            capture_plan={"live_graph_limit": 1900, "live_graphs": 54}, plan_warnings=[], log_excerpt=log_lines(),
            simulation={"label": "musa-sim", "calls": {"MUSAGraph": 9, "graph": 9, "graph_pool_handle": 1},
                        "live_graphs": 9})
    base.update(extra)
    return base


def eagle_rows(**broken):
    part = PARTS["musa_sim_eagle"]
    return [row(v, s, **(broken if v == "musa_sim_full_drafter" else {})) for v in part.variants for s in part.seeds]


def check(part_name, rows, expected=None):
    part = PARTS[part_name]
    return part_checks(part, rows, {s: OUTPUTS[s] for s in part.seeds}, expected)


def test_every_check_passes_for_a_correct_run():
    checks = check("musa_sim_eagle", eagle_rows())
    assert checks and all(checks.values()), [k for k, v in checks.items() if not v]
    assert "musa_sim_full_drafter_s1_acceptance_equals_cuda_platform" in checks
    assert "musa_sim_full_drafter_s2_log_names_substitute_find_seq_idx" in checks


BROKEN = [
    ({"platform_label": "musa"}, "platform_is_musa_sim"),
    ({"platform": "portable_spec.vllm_adapter.platform.cuda.PortableCudaPlatform"}, "platform_is_musa_sim"),
    ({"worker": "portable_spec.vllm_adapter.worker.gpu_worker.PortableWorker"}, "worker_is_musa_worker"),
    ({"attention_backends": ["FLASH_ATTN"]}, "attention_is_triton_attn"),
    ({"draft_attention_backends": ["FLASH_ATTN", "TRITON_ATTN"]}, "attention_is_triton_attn"),
    ({"substitutes_bound": musa_substitutes()[1:]}, "substitutes_bound"),
    ({"log_excerpt": [line for line in log_lines() if "TRITON_ATTN" not in line]}, "log_names_triton_attn"),
    ({"log_excerpt": [line for line in log_lines() if "find_seq_idx" not in line]},
     "log_names_substitute_find_seq_idx"),
    ({"log_excerpt": log_lines("musa")}, "log_names_musa_sim_class_and_worker"),
    ({"log_excerpt": [line for line in log_lines() if "is activated" not in line]}, "platform_plugin_activated"),
    # vLLM 0.33.0's in-process engine logs neither line: the resolved platform must then be musa-sim's class
    ({"log_excerpt": log_lines()[2:], "platform": "vllm.platforms.cuda.CudaPlatform"}, "platform_plugin_activated"),
    ({"outputs": [[5, 6, 7], [8, 9, 11]]}, "greedy_equals_nospec"),
    ({"acceptance_counts": {"drafts": 4, "draft_tokens": 12, "accepted": 11, "accepted_per_position": [4, 4, 3]}},
     "acceptance_equals_cuda_platform"),
    ({"acceptance_counts": None}, "acceptance_equals_cuda_platform"),
    ({"replays": {"first": 3}}, "chain_graphs_replayed"),
    ({"replays": {"chain_fused": 3}}, "first_pass_graphs_replayed"),
    ({"pointer_mismatches": 1}, "no_pointer_mismatch"),
    ({"capture_stats": {"graphs": 9, "failed": {"first:4": "capture failed"}}}, "no_failed_capture"),
    ({"simulation": {"label": "musa-sim", "calls": {"MUSAGraph": 9, "graph": 8, "graph_pool_handle": 1},
                     "live_graphs": 9}}, "drafter_captured_through_simulated_musa"),
    ({"simulation": {"label": "musa-sim", "calls": {"MUSAGraph": 9, "graph": 9, "graph_pool_handle": 2},
                     "live_graphs": 9}}, "one_pool"),
    ({"one_pool": False}, "one_pool"),
    ({"drafter_port": "cuda"}, "drafter_port_is_musa_sim"),
    ({"capture_plan": {"live_graph_limit": 2048}}, "live_graph_limit_planned"),
    ({"vllm_graphs": 1892}, "live_graphs_within_limit"),
    ({"vllm_graphs": 63}, "live_graphs_counted_exactly"),  # vLLM held graphs the plan did not count
    ({"capture_plan": {"live_graph_limit": 1900}}, "live_graphs_counted_exactly"),
    ({"drafter_live_graph_limit": 8}, "drafter_within_runtime_budget"),
    ({"use_v2_model_runner": True}, "v1_runner"),
    ({"jit_during_inference": ["Triton kernel JIT compilation: _rejection_kernel"]}, "no_compile_after_boot"),
    ({"jit_monitor_active": False}, "no_compile_after_boot"),
    ({"jit_monitor_active": None}, "no_compile_after_boot"),
]


def assert_fails(part_name, rows, name):
    """``name`` is false, and so the part fails."""
    checks = check(part_name, rows)
    assert checks[name] is False
    assert not all(checks.values())


@pytest.mark.parametrize("broken,failing", BROKEN, ids=[f for _, f in BROKEN])
def test_each_failure_mode_fails_its_check(broken, failing):
    assert_fails("musa_sim_eagle", eagle_rows(**broken), f"musa_sim_full_drafter_s0_{failing}")


def test_a_crashed_variant_or_comparison_fails_the_part():
    rows = [r if r["variant"] != "musa_sim_full_drafter" or r["seed"] != 1 else {**r, "error": "exit 1"}
            for r in eagle_rows()]
    assert check("musa_sim_eagle", rows)["musa_sim_full_drafter_s1_ran"] is False
    cuda_bad = [r if r["variant"] != "cuda_triton_full_drafter" else {**r, "attention_backends": ["FLASH_ATTN"]}
                for r in eagle_rows()]
    assert check("musa_sim_eagle", cuda_bad)["cuda_triton_full_drafter_s0_attention_is_triton_attn"] is False
    compiled = [r if r["variant"] != "cuda_triton_full_drafter" else {**r, "jit_during_inference": ["_topk_topp_kernel"]}
                for r in eagle_rows()]
    assert check("musa_sim_eagle", compiled)["cuda_triton_full_drafter_s0_no_compile_after_boot"] is False
    missing = [r for r in eagle_rows() if r["variant"] != "musa_sim_full_drafter"]
    assert check("musa_sim_eagle", missing)["musa_sim_full_drafter_s0_ran"] is False


def test_without_a_nospec_engine_the_zoo_continuation_is_the_reference():
    part = PARTS["musa_sim_eagle_attention"]
    rows = [row(v, 0) for v in part.variants]
    checks = check(part.name, rows, expected=K3)
    assert checks["musa_sim_full_drafter_s0_greedy_equals_zoo_continuation"] is True and all(checks.values())
    bad = [row(v, 0, **({"acceptance_per_position": [1.0, 1.0, 0.5]} if v.startswith("musa") else {}))
           for v in part.variants]
    assert check(part.name, bad, expected=K3)["musa_sim_full_drafter_s0_acceptance_as_zoo_says"] is False


def budget_row(seed, **extra):
    warning = "18 live graphs exceed the live-graph limit 8 (1 per target size): dropped ..."
    facts = dict(capture_sizes=[4, 8], capture_plan={"live_graph_limit": 8, "live_graphs": 8}, plan_warnings=[warning],
                 log_excerpt=log_lines() + [warning], replays={"chain_fused": 6},
                 capture_stats={"graphs": 6, "failed": {}}, drafter_graphs=6, drafter_live_graph_limit=6,
                 vllm_graphs=2, simulation={"label": "musa-sim", "calls": {"MUSAGraph": 6, "graph": 6,
                                                                          "graph_pool_handle": 1}, "live_graphs": 6})
    return row("musa_sim_budget", seed, **{**facts, **extra})


def test_the_budget_part_needs_pruned_sizes_the_warning_and_the_cap():
    ok = check("musa_sim_budget", [budget_row(0), budget_row(1)], expected=K3)
    assert all(ok.values()), [k for k, v in ok.items() if not v]
    assert "musa_sim_budget_s0_first_pass_graphs_replayed" not in ok  # 4-request first passes are over the cap
    for broken, failing in [({"plan_warnings": []}, "sizes_pruned_with_warning"),
                            ({"log_excerpt": log_lines()}, "sizes_pruned_with_warning"),
                            ({"capture_sizes": [4, 8, 16]}, "capture_sizes"),
                            ({"vllm_graphs": 3}, "live_graphs_within_limit"),
                            ({"capture_plan": {"live_graph_limit": 1900}}, "live_graph_limit_planned")]:
        checks = check("musa_sim_budget", [budget_row(0, **broken), budget_row(1)], expected=K3)
        assert checks[f"musa_sim_budget_s0_{failing}"] is False, failing


def test_the_dflash_part_is_judged_by_its_block_graphs_and_sizes():
    part = PARTS["musa_sim_dflash"]
    expected = [1.0] + [0.0] * 7
    extra = {"replays": {"dflash_block": 5}, "capture_sizes": [9, 18, 36, 72], "acceptance_per_position": expected}
    rows = [row(v, 0, **extra) for v in part.variants]
    checks = check(part.name, rows, expected=expected)
    assert all(checks.values()), [k for k, v in checks.items() if not v]
    assert "musa_sim_full_drafter_s0_chain_graphs_replayed" not in checks
    bad = [row(v, 0, **{**extra, "replays": {"dflash_block": 0}, "capture_sizes": [8, 16]}) for v in part.variants]
    checks = check(part.name, bad, expected=expected)
    assert checks["musa_sim_full_drafter_s0_block_graphs_replayed"] is False
    assert checks["musa_sim_full_drafter_s0_capture_sizes"] is False


# ------------------------------------------------------------------------------------------------ Model Runner V2
POOL = [0, 7]
MRV2_SIZES = [1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64]


def mrv2_managers(sizes=MRV2_SIZES, pool=POOL):
    full = [4, 8, 16, 24, 32]  # FULL_AND_PIECEWISE: uniform (1+K)-token graphs up to 8 requests
    return {"target": {"mode": "FULL_AND_PIECEWISE", "full_sizes": full, "pool": pool,
                       "graph_pools": [pool] * len(full)},
            "draft_prefill": {"mode": "FULL_AND_PIECEWISE", "full_sizes": full, "pool": pool,
                              "graph_pools": [pool] * len(full)},
            "draft_decode": {"mode": "FULL_DECODE_ONLY", "full_sizes": [1, 2, 4, 8], "pool": pool,
                             "graph_pools": [pool] * 4}}


def mrv2_row(variant, seed, **extra):
    """A correct MRV2 row: 14 FULL graphs and 11 * (5 + 2) piecewise ones, 91 live graphs in all."""
    base = row(variant, seed)
    for key in ("capture_stats", "replays", "pointer_mismatches", "drafter_graphs", "drafter_live_graph_limit",
                "drafter_port", "capture_plan"):
        base.pop(key, None)
    base.update(use_v2_model_runner=True, runner_kind="mrv2", capture_sizes=list(MRV2_SIZES),
                mrv2_managers=mrv2_managers(), mrv2_full_graphs=14, vllm_graphs=77, one_pool=True,
                platform_pool=POOL, port_pool=POOL, attention_backends=["TRITON_ATTN"],
                draft_attention_backends=["TRITON_ATTN"])
    if variant == "builtin_mrv2_triton":
        base.update(platform="vllm.platforms.cuda.NvmlCudaPlatform", port_pool=None, platform_pool=[0, 1])
    if variant.startswith("musa_sim"):
        base.update(log_excerpt=[line for line in log_lines() if "drafter FULL graphs" not in line],
                    mrv2_sizes={"sizes": list(MRV2_SIZES), "live_graphs": 91, "live_graph_limit": 1900},
                    simulation={"label": "musa-sim", "calls": {"MUSAGraph": 91, "graph": 91, "graph_pool_handle": 1,
                                                               "MUSAGraph.replay": 300},
                                "live_graphs": 91, "live_graph_cap": 1900, "torch_cuda_aliased": True})
    base.update(extra)
    return base


def mrv2_rows(**broken):
    part = PARTS["musa_sim_mrv2_eagle"]
    return [mrv2_row(v, s, **(broken if v == "musa_sim_mrv2" else {})) for v in part.variants for s in part.seeds]


def test_every_mrv2_check_passes_for_a_correct_run():
    checks = check("musa_sim_mrv2_eagle", mrv2_rows())
    assert checks and all(checks.values()), [k for k, v in checks.items() if not v]
    for name in ("musa_sim_mrv2_s1_acceptance_equals_builtin_mrv2", "musa_sim_mrv2_s0_mrv2_runner",
                 "musa_sim_mrv2_s0_graphs_captured_through_simulated_musa", "musa_sim_mrv2_s2_draft_decode_graphs_captured",
                 "musa_sim_mrv2_s0_capture_sizes_left_to_mrv2", "builtin_mrv2_triton_s0_platform_is_vllms_cuda",
                 "musa_sim_mrv2_s0_log_names_substitute_find_seq_idx"):
        assert name in checks, name
    assert not any("v1_runner" in name or "drafter_capture" in name for name in checks)


def test_a_vllm_that_logs_no_plugin_lines_is_judged_on_the_platform_it_resolved():
    """vLLM 0.33.0 resolves the platform before an in-process engine configures its logging: neither the plugin
    group's listing nor the activation line reaches the log, and the resolved class carries the check."""
    checks = check("musa_sim_mrv2_eagle", mrv2_rows(log_excerpt=log_lines()[2:]))
    assert checks["musa_sim_mrv2_s0_platform_plugin_activated"] is True and all(checks.values())


def sim(**changes):
    base = {"label": "musa-sim", "calls": {"MUSAGraph": 91, "graph": 91, "graph_pool_handle": 1,
                                           "MUSAGraph.replay": 300}, "live_graphs": 91, "live_graph_cap": 1900,
            "torch_cuda_aliased": True}
    calls = changes.pop("calls", {})
    return {**base, **changes, "calls": {**base["calls"], **calls}}


MRV2_BROKEN = [
    ({"runner_kind": "v1"}, "mrv2_runner"),
    ({"use_v2_model_runner": False}, "mrv2_runner"),
    ({"worker": "portable_spec.vllm_adapter.worker.gpu_worker.PortableWorker"}, "worker_is_musa_worker"),
    ({"draft_attention_backends": []}, "attention_is_triton_attn"),
    ({"substitutes_bound": []}, "substitutes_bound"),
    ({"mrv2_managers": {k: v for k, v in mrv2_managers().items() if k != "draft_decode"}},
     "draft_decode_graphs_captured"),
    ({"mrv2_managers": {**mrv2_managers(), "target": {**mrv2_managers()["target"], "full_sizes": []}}},
     "target_graphs_captured"),
    ({"simulation": sim(torch_cuda_aliased=False)}, "torch_cuda_graphs_aliased_to_simulated_musa"),
    ({"simulation": sim(calls={"MUSAGraph": 14, "graph": 14}, live_graphs=14)},
     "graphs_captured_through_simulated_musa"),  # only some of MRV2's graphs went through the simulation
    ({"simulation": sim(calls={"MUSAGraph.replay": 0})}, "graphs_replayed_through_simulated_musa"),
    ({"mrv2_managers": mrv2_managers(pool=[0, 9])}, "graphs_in_our_one_pool"),
    ({"port_pool": None}, "graphs_in_our_one_pool"),
    ({"one_pool": False}, "graphs_in_our_one_pool"),
    ({"simulation": sim(calls={"graph_pool_handle": 2})}, "graphs_in_our_one_pool"),
    ({"mrv2_sizes": {"live_graphs": 77, "live_graph_limit": 1900}}, "live_graphs_counted_exactly"),
    ({"mrv2_sizes": {"live_graphs": 91, "live_graph_limit": 2048}}, "live_graph_limit_planned"),
    ({"simulation": sim(live_graph_cap=None)}, "live_graphs_within_limit"),
    ({"capture_sizes": [4, 8, 16, 32, 64]}, "capture_sizes_left_to_mrv2"),
    ({"outputs": [[5, 6, 7], [8, 9, 11]]}, "greedy_equals_nospec"),
    ({"acceptance_counts": {"drafts": 4, "draft_tokens": 12, "accepted": 12, "accepted_per_position": [4, 3, 5]}},
     "acceptance_equals_builtin_mrv2"),
    ({"log_excerpt": [line for line in log_lines() if "is activated" not in line]}, "platform_plugin_activated"),
    # vLLM 0.33.0's in-process engine logs neither line: the resolved platform must then be musa-sim's class
    ({"log_excerpt": log_lines()[2:], "platform": "vllm.platforms.cuda.CudaPlatform"}, "platform_plugin_activated"),
]


@pytest.mark.parametrize("broken,failing", MRV2_BROKEN, ids=[f for _, f in MRV2_BROKEN])
def test_each_mrv2_failure_mode_fails_its_check(broken, failing):
    assert_fails("musa_sim_mrv2_eagle", mrv2_rows(**broken), f"musa_sim_mrv2_s0_{failing}")


def test_the_mrv2_comparison_must_be_mrv2_on_vllms_platform_with_triton_attn():
    part = PARTS["musa_sim_mrv2_eagle"]
    for broken, failing in [({"runner_kind": "v1"}, "mrv2_runner"),
                            ({"platform": "portable_spec.vllm_adapter.platform.cuda.PortableCudaPlatform"},
                             "platform_is_vllms_cuda"),
                            ({"attention_backends": ["FLASH_ATTN"]}, "attention_is_triton_attn"),
                            ({"mrv2_managers": {}}, "draft_prefill_graphs_captured")]:
        rows = [mrv2_row(v, s, **(broken if v == "builtin_mrv2_triton" else {})) for v in part.variants
                for s in part.seeds]
        assert check(part.name, rows)[f"builtin_mrv2_triton_s0_{failing}"] is False, failing
    missing = [r for r in mrv2_rows() if r["variant"] != "builtin_mrv2_triton"]
    checks = check(part.name, missing)
    assert checks["builtin_mrv2_triton_s0_ran"] is False and "musa_sim_mrv2_s0_acceptance_equals_builtin_mrv2" \
        not in checks


def mrv2_budget_row(seed, **extra):
    warning = ("26 live graphs of Model Runner V2 exceed the live-graph limit 12: dropped the largest capture sizes "
               "[16, 24, 32, 40, 48, 56, 64], now 12 live graphs (target 4, draft_prefill 4, draft_decode 4)")
    managers = {name: {"mode": "FULL", "full_sizes": [1, 2, 4, 8], "pool": POOL, "graph_pools": [POOL] * 4}
                for name in ("target", "draft_prefill")}
    managers["draft_decode"] = {"mode": "FULL_DECODE_ONLY", "full_sizes": [1, 2, 4, 8], "pool": POOL,
                                "graph_pools": [POOL] * 4}
    facts = dict(capture_sizes=[1, 2, 4, 8], mrv2_managers=managers, mrv2_full_graphs=12, vllm_graphs=0,
                 mrv2_sizes={"sizes": [1, 2, 4, 8], "live_graphs": 12, "live_graph_limit": 12},
                 plan_warnings=[warning], log_excerpt=log_lines()[:-1] + [f"WARNING portable_spec[musa-sim]: {warning}"],
                 simulation=sim(calls={"MUSAGraph": 12, "graph": 12}, live_graphs=12, live_graph_cap=12))
    return mrv2_row("musa_sim_mrv2_budget", seed, **{**facts, **extra})


MRV2_BUDGET_BROKEN = [
    ({"plan_warnings": []}, "sizes_pruned_with_warning"),
    ({"capture_sizes": [1, 2, 4, 8, 16]}, "capture_sizes"),
    # the speculator's graphs were not counted by the budget: it would have let them past the cap
    ({"mrv2_sizes": {"live_graphs": 4, "live_graph_limit": 12}}, "live_graphs_counted_exactly"),
    ({"vllm_graphs": 5, "simulation": sim(calls={"MUSAGraph": 17, "graph": 17}, live_graphs=17, live_graph_cap=12)},
     "live_graphs_within_limit"),
    ({"mrv2_sizes": {"live_graphs": 12, "live_graph_limit": 1900}}, "live_graph_limit_planned"),
]


def test_the_mrv2_budget_part_counts_target_and_speculator_graphs_together():
    ok = check("musa_sim_mrv2_budget", [mrv2_budget_row(0), mrv2_budget_row(1)], expected=K3)
    assert all(ok.values()), [k for k, v in ok.items() if not v]


@pytest.mark.parametrize("broken,failing", MRV2_BUDGET_BROKEN, ids=[f for _, f in MRV2_BUDGET_BROKEN])
def test_each_mrv2_budget_failure_fails_its_check(broken, failing):
    checks = check("musa_sim_mrv2_budget", [mrv2_budget_row(0, **broken), mrv2_budget_row(1)], expected=K3)
    assert checks[f"musa_sim_mrv2_budget_s0_{failing}"] is False


def test_the_mrv2_dflash_part_needs_the_query_blocks_graphs():
    part = PARTS["musa_sim_mrv2_dflash"]
    query = {"mode": "FULL_DECODE_ONLY", "full_sizes": [9, 18, 36, 72], "pool": POOL, "graph_pools": [POOL] * 4}
    managers = {"target": mrv2_managers()["target"], "draft_query": query}
    expected = [1.0] + [0.0] * 7
    rows = [mrv2_row(v, 0, mrv2_managers=managers, acceptance_per_position=expected) for v in part.variants]
    checks = check(part.name, rows, expected=expected)
    assert checks["musa_sim_mrv2_s0_draft_query_graphs_captured"] and "musa_sim_mrv2_s0_draft_decode_graphs_captured" \
        not in checks
    assert all(checks.values()), [k for k, v in checks.items() if not v]
    no_query = [mrv2_row(v, 0, mrv2_managers={"target": managers["target"]}, acceptance_per_position=expected)
                for v in part.variants]
    assert check(part.name, no_query, expected=expected)["musa_sim_mrv2_s0_draft_query_graphs_captured"] is False


# ------------------------------------------------------------------------------------------------ the rejudge script
def stored_report(**broken):
    """A musa_sim_e2e.json as a 0.33.0 run wrote it: every check true but the old log-line check."""
    rows = mrv2_rows(log_excerpt=log_lines()[2:], **broken)
    checks = {k.replace("platform_plugin_activated", "log_names_platform_plugin"): v
              for k, v in check("musa_sim_mrv2_eagle", mrv2_rows()).items()}
    checks.update({f"musa_sim_mrv2_s{s}_log_names_platform_plugin": False for s in PARTS["musa_sim_mrv2_eagle"].seeds})
    return {"parts": {"musa_sim_mrv2_eagle": {"rows": rows, "checks": checks}}}


def test_the_rejudge_passes_a_0_33_run_on_its_resolved_platform_and_fails_a_wrong_one():
    rejudge = load_script("rejudge_musa_sim_plugin").rejudge
    good = rejudge(stored_report())["musa_sim_mrv2_eagle"]
    assert good["passes"] and good["compared_rows"] == len(PARTS["musa_sim_mrv2_eagle"].seeds)
    wrong = rejudge(stored_report(platform="vllm.platforms.cuda.CudaPlatform"))["musa_sim_mrv2_eagle"]
    assert not wrong["passes"] and not all(wrong["rejudged"].values())
    report = stored_report()
    report["parts"]["musa_sim_mrv2_eagle"]["checks"]["musa_sim_mrv2_s0_greedy_equals_nospec"] = False
    assert rejudge(report)["musa_sim_mrv2_eagle"]["other_checks_false"] == ["musa_sim_mrv2_s0_greedy_equals_nospec"]
    assert not rejudge({"parts": {"p": {"rows": [], "checks": {}}}})["p"]["passes"]  # nothing compared: fails
