"""The end-to-end harness's own logic (what decides pass/fail and what the benchmark reports), on fabricated child
results: a harness bug must not be able to hide a failure on the GPU lane."""

from __future__ import annotations

from pathlib import Path

import pytest

from portable_spec_harness.e2e.bench import plot, summarize
from portable_spec_harness.e2e.child import acceptance_counts, acceptance_per_position
from portable_spec_harness.e2e.configs import VARIANTS
from ci_scripts import load_ci_script

ROOT = Path(__file__).resolve().parents[1]


def load_script(name: str):
    """A ``ci/gpu/<name>.py`` script, imported as module ``name`` (its ``main`` guarded, so nothing runs)."""
    return load_ci_script(f"ci/gpu/{name}.py")


def load_e2e_script():
    return load_script("v1_drafter_e2e")


STEPS = [[[5, [3, 4, 5]], [9, [7, 8, 9]], [13, [11, 12, 13]], [17, [15, 16, 17]]]]
"""One prompt's recorded ``[position, drafts]`` steps (``harness.e2e.draft_steps``)."""


def run(variant, seed=0, outputs=((1, 2, 3),), per_pos=(4, 4, 4), drafts=4, steps=STEPS, **extra):
    result = {"variant": variant, "seed": seed, "use_v2_model_runner": False, "tensor_parallel_size": 1,
              "platform": "portable_spec.vllm_adapter.platform.cuda.PortableCudaPlatform" if "drafter" in variant
              else "vllm.platforms.cuda.NvmlCudaPlatform",
              "runner": "x", "outputs": [list(o) for o in outputs],
              "acceptance_per_position": [p / drafts for p in per_pos],
              "acceptance_counts": {"drafts": drafts, "draft_tokens": drafts * len(per_pos),
                                    "accepted": sum(per_pos), "accepted_per_position": list(per_pos)}}
    if variant != "nospec":
        result["draft_steps"] = steps
    result.update(extra)
    return result


GOOD_FULL = {"capture_stats": {"graphs": 9}, "replays": {"first": 3, "chain": 6}, "pointer_mismatches": 0,
             "jit_during_inference": [], "jit_monitor_active": True,
             "log_excerpt": ["INFO [proposer.py:236] portable_spec: drafter FULL graphs: 9 captured in 0.04 s, "
                             "58.0 MiB, sizes {'first': [4, 8], 'chain_fused': [1, 2]}, 0 failed"]}


def test_all_checks_pass_for_a_correct_run():
    e2e = load_e2e_script()
    results = [run("nospec"), run("upstream_v1"), run("eager_drafter"), run("full_drafter", **GOOD_FULL)]
    checks = e2e.checks_for(results, [0], greedy=True, perfect=True)
    assert checks and all(checks.values()), checks


def test_fused_first_pass_replays_count_as_first_pass_replays():
    e2e = load_e2e_script()
    fused = {**GOOD_FULL, "replays": {"first_fused": 3, "chain_fused": 6}}
    checks = e2e.checks_for([run("nospec"), run("eager_drafter"), run("full_drafter", **fused)], [0], greedy=True,
                            perfect=True)
    assert checks["full_drafter_s0_first_pass_graphs_replayed"]
    none = {**GOOD_FULL, "replays": {"first_fused": 0, "first": 0, "chain_fused": 6}}
    assert not e2e.checks_for([run("nospec"), run("full_drafter", **none)], [0], greedy=True,
                              perfect=True)["full_drafter_s0_first_pass_graphs_replayed"]


@pytest.mark.parametrize("broken,failing", [
    ({"outputs": [[1, 2, 4]]}, "full_drafter_s0_greedy_equals_nospec"),
    ({"per_pos": (4, 3, 4)}, "full_drafter_s0_every_position_100pct"),
    ({"pointer_mismatches": 2}, "full_drafter_s0_no_pointer_mismatch"),
    ({"replays": {"first": 0, "chain": 6}}, "full_drafter_s0_first_pass_graphs_replayed"),
    ({"capture_stats": {"graphs": 0}}, "full_drafter_s0_graphs_captured"),
    ({"platform": "vllm.platforms.cuda.NvmlCudaPlatform"}, "full_drafter_s0_our_platform"),
    ({"log_excerpt": ["Capturing drafter FULL graphs (portable_spec): 100%"]}, "full_drafter_s0_log_shows_capture"),
    ({"use_v2_model_runner": True}, "full_drafter_s0_v1_runner"),
])
def test_each_failure_mode_fails_its_check(broken, failing):
    e2e = load_e2e_script()
    full = run("full_drafter", **{k: v for k, v in {**GOOD_FULL, **broken}.items() if k not in ("outputs", "per_pos")},
               **{k: broken[k] for k in ("outputs", "per_pos") if k in broken})
    checks = e2e.checks_for([run("nospec"), run("eager_drafter"), full], [0], greedy=True, perfect=True)
    assert checks[failing] is False
    assert not all(checks.values())


def test_the_expected_draft_sample_is_what_our_variant_captured():
    """``--expect-draft-sample d2t_gather`` (the ``eagle3_d2t`` part): our variant's fused graphs took the d2t
    gather (``capture_stats["draft_sample"]``); vLLM's sample, or no fact at all, fails."""
    e2e = load_e2e_script()

    def check(stats):
        full = run("full_drafter", **{**GOOD_FULL, "capture_stats": stats})
        return e2e.checks_for([run("nospec"), run("eager_drafter"), full], [0], greedy=True, perfect=True,
                              draft_sample="d2t_gather").get("full_drafter_s0_draft_sample_d2t_gather")

    assert check({"graphs": 9, "draft_sample": "d2t_gather"}) is True
    assert check({"graphs": 9, "draft_sample": "vllm_greedy_sample"}) is False
    assert check({"graphs": 9}) is False
    assert "full_drafter_s0_draft_sample_d2t_gather" not in e2e.checks_for(
        [run("nospec"), run("full_drafter", **GOOD_FULL)], [0], greedy=True, perfect=True)


LOG_LINE = GOOD_FULL["log_excerpt"][0]
DRAFTER = "portable_spec.vllm_adapter.spec_decode.proposer.PortableEagleProposer"


def tp2_full(**broken_rank1):
    """A TP=2 full-drafter result: both ranks' facts, and each rank's capture line in the log."""
    stats = {"graphs": 9, "num_tokens": {"first": [4, 8], "chain_fused": [1, 2]}, "failed": {}}
    rank = {"capture_stats": stats, "pointer_mismatches": 0, "replays": {"first": 3, "chain_fused": 6},
            "drafter": DRAFTER}
    ranks = [{"rank": 0, **rank}, {"rank": 1, **rank, **broken_rank1}]
    return run("full_drafter", **{**GOOD_FULL, "tensor_parallel_size": 2, "ranks": ranks,
                                  "log_excerpt": ["(Worker_TP0) " + LOG_LINE, "(Worker_TP1) " + LOG_LINE]})


def test_tensor_parallel_checks_pass_when_every_rank_agrees():
    e2e = load_e2e_script()
    checks = e2e.checks_for([run("nospec"), run("eager_drafter"), tp2_full()], [0], greedy=True, perfect=True, tp=2)
    assert checks["full_drafter_s0_same_graphs_on_every_rank"] and checks["full_drafter_s0_tensor_parallel_2"]
    assert all(checks.values()), checks


@pytest.mark.parametrize("broken,failing", [
    ({"capture_stats": {"graphs": 8, "num_tokens": {"first": [4], "chain_fused": [1, 2]}, "failed": {}}},
     "full_drafter_s0_same_graphs_on_every_rank"),
    ({"pointer_mismatches": 1}, "full_drafter_s0_no_pointer_mismatch_on_any_rank"),
])
def test_a_rank_that_disagrees_fails_its_check(broken, failing):
    e2e = load_e2e_script()
    checks = e2e.checks_for([run("nospec"), run("eager_drafter"), tp2_full(**broken)], [0], greedy=True,
                            perfect=True, tp=2)
    assert checks[failing] is False


@pytest.mark.parametrize("part", ["tp2_ctx_eagle", "tp2_ctx_eagle3", "tp2_ctx_dflash", "tp2_mla_mtp",
                                  "tp2_ctx_draft_model"])
@pytest.mark.parametrize("broken,failing", [
    ({"replays": {"first": 3, "chain_fused": 0}}, "chain_graphs_replayed_on_every_rank"),
    ({"replays": {"first": 0, "chain_fused": 6}}, "first_pass_graphs_replayed_on_every_rank"),
    ({"drafter": "vllm.v1.spec_decode.eagle.EagleProposer"}, "same_drafter_on_every_rank"),
    ({"capture_stats": {"graphs": 9, "num_tokens": {"first": [4, 8], "chain_fused": [1, 2]}, "failed": {},
                        "draft_sample": "vllm_greedy_sample"}}, "draft_sample_d2t_gather_on_every_rank"),
    ("missing", "facts_from_every_rank"),
])
def test_issue37_tp2_parts_judge_every_rank(part, broken, failing):
    """Issue 37's TP=2 parts: rank 1's facts are judged, not only rank 0's (the top level). Rank 0 alone being
    right passes nothing: a rank 1 that replayed no graph, built another drafter, sampled otherwise or reported
    nothing fails its ``_on_every_rank`` check (and then the part)."""
    matrix = load_script("v1_drafter_matrix")
    assert [*matrix.PARTS[part.removeprefix("tp2_")], *matrix.TP2] == matrix.part_args(part)
    e2e = load_e2e_script()
    stats = {"graphs": 9, "num_tokens": {"first": [4, 8], "chain_fused": [1, 2]}, "failed": {},
             "draft_sample": "d2t_gather"}
    good = tp2_full(capture_stats=stats)
    good["capture_stats"] = good["ranks"][0]["capture_stats"] = stats
    bad = tp2_full(**({} if broken == "missing" else {"capture_stats": stats, **broken}))
    bad["capture_stats"] = bad["ranks"][0]["capture_stats"] = stats
    if broken == "missing":
        del bad["ranks"][1]
    rows = [run("nospec"), run("eager_drafter")]
    checks = e2e.checks_for([*rows, good], [0], greedy=True, perfect=True, tp=2, draft_sample="d2t_gather")
    assert checks.get("full_drafter_s0_" + failing) is True and all(checks.values()), checks
    checks = e2e.checks_for([*rows, bad], [0], greedy=True, perfect=True, tp=2, draft_sample="d2t_gather")
    assert checks["full_drafter_s0_" + failing] is False
    assert checks["full_drafter_s0_tensor_parallel_2"] and not all(checks.values())  # rank 0 alone looks fine
    if broken != "missing":  # a missing rank fails every check that asks for every rank
        assert checks["full_drafter_s0_facts_from_every_rank"]
    else:
        assert not any(checks[f"full_drafter_s0_{name}_on_every_rank"] for name in (
            "first_pass_graphs_replayed", "chain_graphs_replayed", "draft_sample_d2t_gather"))


def test_dflash_ranks_are_judged_on_their_block_graphs():
    e2e = load_e2e_script()
    dflash = "portable_spec.vllm_adapter.spec_decode.dflash.DFlashProposer"
    full = tp2_full(drafter=dflash, replays={"dflash_block": 0})
    full["drafter"] = full["ranks"][0]["drafter"] = dflash
    full["replays"] = full["ranks"][0]["replays"] = {"dflash_block": 5}
    checks = e2e.checks_for([run("nospec"), run("eager_drafter"), full], [0], greedy=True, perfect=False, tp=2)
    assert checks["full_drafter_s0_block_graphs_replayed"] is True
    assert checks["full_drafter_s0_block_graphs_replayed_on_every_rank"] is False
    full["ranks"][1]["replays"] = {"dflash_block": 5}
    checks = e2e.checks_for([run("nospec"), run("eager_drafter"), full], [0], greedy=True, perfect=False, tp=2)
    assert checks["full_drafter_s0_block_graphs_replayed_on_every_rank"] and all(checks.values()), checks


def test_every_tp1_matrix_part_names_a_zoo_pair_and_both_mtp_pairs_run():
    """A part's ``--pair`` is built by name on the GPU host: a misspelt one would cost the part there. Both MTP pairs
    run at TP=1: on MLA (``mla_mtp``) and on standard attention (``gqa_mtp``, vLLM's mimo_mtp)."""
    from portable_spec_harness.model_zoo import PAIRS

    matrix = load_script("v1_drafter_matrix")
    pairs = {name: args[args.index("--pair") + 1] for name, args in matrix.PARTS.items()}
    assert set(pairs.values()) <= set(PAIRS) and set(pairs) <= set(matrix.GROUPS["tp1"])
    assert {name for name, pair in pairs.items() if PAIRS[pair][1] == "mtp"} == {"mla_mtp", "gqa_mtp"}
    assert pairs["gqa_mtp"] == "mimo_ctx_mtp"


def test_the_tp2_ctx_group_is_issue37s_parts_and_part_of_tp2():
    matrix = load_script("v1_drafter_matrix")
    ctx = ["tp2_ctx_eagle", "tp2_ctx_eagle3", "tp2_ctx_dflash", "tp2_mla_mtp", "tp2_ctx_draft_model"]
    assert matrix.GROUPS["tp2_ctx"] == ctx and set(ctx) <= set(matrix.GROUPS["tp2"])
    for name in ctx:
        args = matrix.part_args(name)
        assert args[args.index("--tp") + 1] == "2"
        assert {"--disable-custom-all-reduce", "--no-fuse-allreduce-rms"} <= set(args)
        assert args[args.index("--pair") + 1] in ("llama_ctx_eagle", "llama_ctx_eagle3", "qwen3_ctx_dflash",
                                                  "deepseek_mla_mtp", "llama_ctx_draft_model")
    assert all("--inject-bug" not in matrix.part_args(name) for name in ctx)


def test_one_rank_capture_line_and_wrong_tp_fail():
    e2e = load_e2e_script()
    full = tp2_full()
    full["log_excerpt"] = full["log_excerpt"][:1]
    checks = e2e.checks_for([run("nospec"), full], [0], greedy=True, perfect=True, tp=2)
    assert checks["full_drafter_s0_log_shows_capture_per_rank"] is False
    checks = e2e.checks_for([run("nospec"), tp2_full()], [0], greedy=True, perfect=True, tp=4)
    assert checks["full_drafter_s0_tensor_parallel_4"] is False and checks["full_drafter_s0_facts_from_every_rank"] is False


def test_an_injected_failure_must_be_dropped_on_every_rank():
    e2e = load_e2e_script()
    dropped = {"graphs": 8, "num_tokens": {"first": [4, 8], "chain_fused": [1]},
               "failed": {"chain_fused:2": "capture failed on another rank (every rank drops it)"}}
    full = tp2_full(capture_stats=dropped)
    full["ranks"][0]["capture_stats"] = {**dropped, "failed": {"chain_fused:2": "capture failed: RuntimeError"}}
    checks = e2e.checks_for([run("nospec"), full], [0], greedy=True, perfect=True, tp=2, fail_capture="0:chain_fused:2")
    assert checks["full_drafter_s0_failed_key_dropped_on_every_rank"] and all(checks.values()), checks
    kept = tp2_full()  # rank 1 kept the key rank 0 failed: ranks would replay different graphs
    kept["ranks"][0]["capture_stats"] = dropped
    checks = e2e.checks_for([run("nospec"), kept], [0], greedy=True, perfect=True, tp=2, fail_capture="0:chain_fused:2")
    assert checks["full_drafter_s0_failed_key_dropped_on_every_rank"] is False
    assert checks["full_drafter_s0_same_graphs_on_every_rank"] is False


def test_a_sampled_run_that_reproduces_greedy_output_fails_as_not_sampling():
    """Temperature 1 on the sharp target (logit 16) reproduces the greedy chain: such a run proves nothing about
    sampling, so it must fail ``sampled_off_greedy``; output off the greedy chain passes it."""
    e2e = load_e2e_script()
    greedy_outputs = {0: [[1, 2, 3]]}
    sampled = [run("eager_drafter", outputs=((1, 9, 3),)), run("full_drafter", outputs=((1, 9, 3),), **GOOD_FULL)]
    checks = e2e.checks_for(sampled, [0], greedy=False, perfect=True, greedy_continuations=greedy_outputs)
    assert checks["eager_drafter_s0_sampled_off_greedy"] and checks["full_drafter_s0_sampled_off_greedy"]
    assert all(checks.values()), checks
    degenerate = e2e.checks_for([run("eager_drafter"), run("full_drafter", **GOOD_FULL)], [0], greedy=False,
                                perfect=True, greedy_continuations=greedy_outputs)
    assert degenerate["full_drafter_s0_sampled_off_greedy"] is False
    assert "full_drafter_s0_greedy_equals_nospec" not in degenerate


def test_a_sampled_run_must_give_the_eager_drafters_tokens_and_counts_seed_by_seed():
    """Sampled drafts are exact when ours gives, per seed, the tokens and acceptance counts vLLM's eager drafter gave;
    one token off, other counts, or no eager run to compare with fails (and a greedy run has no such check)."""
    e2e = load_e2e_script()
    greedy_outputs = {0: [[1, 2, 3]], 1: [[1, 2, 3]]}
    eager = [run("eager_drafter", seed=s, outputs=((1, 9, 3),)) for s in (0, 1)]
    same = [run("full_drafter", seed=s, outputs=((1, 9, 3),), **GOOD_FULL) for s in (0, 1)]

    def checks(rows):
        return e2e.judge(rows, [0, 1], False, False, greedy_continuations=greedy_outputs)

    good = checks(eager + same)
    assert all(good.checks.values()), good.checks
    assert good.evidence["full_drafter_s1_sampled_equals_eager"] == {"ok": True, "compared_tokens": 3}
    moved = checks(eager + [same[0], run("full_drafter", seed=1, outputs=((1, 9, 4),), **GOOD_FULL)])
    assert [n for n, ok in moved.checks.items() if not ok] == ["full_drafter_s1_sampled_equals_eager"]
    assert "token 2: 4 vs 3 in the eager run" in moved.evidence["full_drafter_s1_sampled_equals_eager"]["detail"]
    fewer = checks(eager + [same[0], run("full_drafter", seed=1, outputs=((1, 9, 3),), per_pos=(4, 4, 3),
                                         **GOOD_FULL)])
    assert [n for n, ok in fewer.checks.items() if not ok] == ["full_drafter_s1_acceptance_counts_equal_eager"]
    alone = checks([eager[0]] + same)  # seed 1's eager run missing: nothing to compare with fails
    assert alone.checks["full_drafter_s1_sampled_equals_eager"] is False
    assert alone.checks["eager_drafter_s1_ran"] is False
    greedy = e2e.checks_for([run("nospec")] + eager[:1] + same[:1], [0], greedy=True, perfect=False)
    assert "full_drafter_s0_sampled_equals_eager" not in greedy


def test_a_crashed_variant_fails_the_run():
    e2e = load_e2e_script()
    checks = e2e.checks_for([run("nospec"), {"variant": "full_drafter", "seed": 0, "error": "exit 1"}], [0],
                            greedy=True, perfect=True)
    assert checks == {"full_drafter_s0_ran": False}


def test_acceptance_deltas_come_from_vllms_counters():
    before = {"vllm:spec_decode_num_drafts": 10, "vllm:spec_decode_num_accepted_tokens_per_pos": [10, 9, 8]}
    after = {"vllm:spec_decode_num_drafts": 30, "vllm:spec_decode_num_accepted_tokens_per_pos": [30, 25, 18],
             "vllm:spec_decode_num_accepted_tokens": 73, "vllm:spec_decode_num_draft_tokens": 90}
    assert acceptance_per_position(before, after) == [1.0, 0.8, 0.5]
    counts = acceptance_counts(before, after)
    assert counts["drafts"] == 20 and counts["accepted_per_position"] == [20, 16, 10]
    assert acceptance_per_position({}, {}) is None


def test_bench_summary_ratios_and_plot(tmp_path):
    rows = [{"variant": v, "bench": [{"concurrency": c, "output_tok_s": tok, "tpot_ms": 1.0}
                                     for c, tok in ((1, base), (64, base * 10))]}
            for v, base in (("upstream_v1", 600.0), ("full_drafter", 900.0), ("mrv2", 1200.0))]
    summary = summarize(rows)
    assert summary["full_drafter_over_upstream_v1"] == {1: 1.5, 64: 1.5}
    assert summary["full_drafter_over_mrv2"] == {1: 0.75, 64: 0.75}
    pytest.importorskip("matplotlib")
    report = {"results": rows, "pair": "p", "model_variant": "perfect", "k": 3, "device": "cpu", "vllm": "0.26.0"}
    plot(report, tmp_path / "bench.png")
    assert (tmp_path / "bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_variants_say_which_runner_and_platform_they_need():
    assert VARIANTS["full_drafter"].env == {"VLLM_USE_V2_MODEL_RUNNER": "0", "VLLM_PLATFORM": "cuda"}
    assert VARIANTS["upstream_v1"].env == {"VLLM_USE_V2_MODEL_RUNNER": "0"}
    assert VARIANTS["mrv2"].env == {"VLLM_USE_V2_MODEL_RUNNER": "1"}
    assert VARIANTS["eager_drafter"].drafter_enforce_eager and not VARIANTS["nospec"].speculative


def test_one_boot_with_several_seeds_becomes_one_row_per_seed():
    e2e = load_e2e_script()
    child = {"variant": "full_drafter", "use_v2_model_runner": False, "platform": "p", "boot_s": 3.0,
             "runs": [{"seed": s, "outputs": [[s]], "acceptance_per_position": [1.0]} for s in (0, 1, 2)]}
    rows = e2e.per_seed_rows(child, [0, 1, 2])
    assert [(r["seed"], r["outputs"]) for r in rows] == [(0, [[0]]), (1, [[1]]), (2, [[2]])]
    assert all(r["platform"] == "p" and "runs" not in r for r in rows)
    # A seed the child never ran, or a child that crashed, is a failed row for that seed, never a silent skip.
    missing = e2e.per_seed_rows({**child, "runs": child["runs"][:1]}, [0, 1])
    assert "error" not in missing[0] and "no run for seed 1" in missing[1]["error"]
    crashed = e2e.per_seed_rows({"variant": "full_drafter", "error": "exit 1"}, [0, 1])
    assert [r["error"] for r in crashed] == ["exit 1", "exit 1"]
    checks = e2e.checks_for(crashed + e2e.per_seed_rows({**run("nospec"), "runs": [run("nospec")]}, [0]), [0, 1],
                            greedy=True, perfect=True)
    assert checks["full_drafter_s0_ran"] is False and checks["full_drafter_s1_ran"] is False


def test_seeds_change_the_prompts_and_stay_in_the_vocabulary():
    from portable_spec_harness.e2e.child import PROMPTS, prompts_for_seed
    from portable_spec_harness.model_zoo import VOCAB

    assert prompts_for_seed(0) == PROMPTS
    assert prompts_for_seed(1) != prompts_for_seed(2) and prompts_for_seed(1) == prompts_for_seed(1)
    assert all(3 <= t < VOCAB for s in (1, 2, 3) for p in prompts_for_seed(s) for t in p)


def test_dflash_runs_are_judged_by_their_block_graphs_and_fused_chains_count_as_chains():
    e2e = load_e2e_script()
    dflash = {"drafter": "portable_spec.vllm_adapter.spec_decode.proposer.FullGraphDFlashProposer",
              "capture_stats": {"graphs": 4}, "pointer_mismatches": 0}
    ok = e2e.checks_for([run("nospec"), run("eager_drafter"),
                         run("full_drafter", replays={"first": 0, "chain": 0, "dflash_block": 25}, **dflash)],
                        [0], greedy=True, perfect=False)
    assert ok["full_drafter_s0_block_graphs_replayed"] and "full_drafter_s0_first_pass_graphs_replayed" not in ok
    idle = e2e.checks_for([run("full_drafter", replays={"dflash_block": 0}, **dflash)], [0], greedy=True,
                          perfect=False)
    assert idle["full_drafter_s0_block_graphs_replayed"] is False
    fused = e2e.checks_for([run("full_drafter", **{**GOOD_FULL, "replays": {"first": 3, "chain": 0,
                                                                           "chain_fused": 6}})],
                           [0], greedy=True, perfect=True)
    assert fused["full_drafter_s0_chain_graphs_replayed"] is True


def test_bench_summary_reports_median_and_best_ratios_for_each_of_our_variants():
    def row(variant, median, best):
        return {"variant": variant, "bench": [{"concurrency": 1, "output_tok_s": median, "output_tok_s_best": best}]}
    summary = summarize([row("upstream_v1", 500.0, 700.0), row("full_drafter", 750.0, 1050.0),
                         row("full_drafter_unfused", 600.0, 700.0), row("mrv2", 1000.0, 1400.0)])
    assert summary["full_drafter_over_upstream_v1"] == {1: 1.5}
    assert summary["full_drafter_over_upstream_v1_best"] == {1: 1.5}
    assert summary["full_drafter_unfused_over_upstream_v1"] == {1: 1.2}
    assert summary["full_drafter_unfused_over_upstream_v1_best"] == {1: 1.0}
    assert summary["full_drafter_over_mrv2"] == {1: 0.75}
    failed = summarize([row("upstream_v1", 500.0, 700.0), {"variant": "full_drafter", "bench": [
        {"concurrency": 1, "error": "exit 1"}]}])
    assert failed["full_drafter_over_upstream_v1"] == {}  # a failed cell is no ratio, never a zero or a crash


def test_profile_scopes_are_told_apart_from_kernels():
    from portable_spec_harness.e2e.child import is_scope

    assert is_scope("gpu_model_runner: draft") and is_scope("llm_engine step: get_output")
    assert not is_scope("nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT") and not is_scope("aten::copy_")


def test_a_variant_gets_only_its_own_switches_whatever_the_caller_exported(monkeypatch):
    from portable_spec_harness.e2e.parent import variant_env

    monkeypatch.setenv("PORTABLE_SPEC_DRAFT_CHAIN", "forward")
    monkeypatch.setenv("VLLM_PLATFORM", "musa")
    full = variant_env("full_drafter")
    assert "PORTABLE_SPEC_DRAFT_CHAIN" not in full and full["VLLM_PLATFORM"] == "cuda"
    assert variant_env("full_drafter_unfused")["PORTABLE_SPEC_DRAFT_CHAIN"] == "forward"
    assert "VLLM_PLATFORM" not in variant_env("upstream_v1")
    assert "VLLM_USE_V2_MODEL_RUNNER" not in variant_env("full_drafter", runner="auto")


def test_bench_e2e_text_report_lists_every_ratio(tmp_path):
    import json

    from portable_spec_harness.bench_cli import render_e2e

    report = json.loads((ROOT / "bench/results/2026-11-22-h100-session2/bench_e2e.json").read_text())
    text = render_e2e(report)
    assert "full_drafter_over_upstream_v1: c=1: 1.396x" in text
    assert "full_drafter_over_upstream_v1_best:" in text and "full_drafter_unfused_over_mrv2:" in text
    assert text.splitlines()[0].startswith("llama_eagle (attention), K=3, TP=1, NVIDIA H100")
    assert "runner: nospec v1, upstream_v1 v1, full_drafter_unfused v1, full_drafter v1, mrv2 mrv2" in text


def test_the_capture_log_line_is_the_one_the_e2e_check_looks_for():
    from portable_spec.draft.capture_log import capture_summary

    e2e = load_e2e_script()
    line = capture_summary({"graphs": 44, "seconds": 0.164, "memory_bytes": 1071644672, "failed": {},
                            "num_tokens": {"first": [4, 8], "chain_fused": [1]}})
    assert line == ("portable_spec: drafter FULL graphs: 44 captured in 0.16 s, 1022.0 MiB, sizes "
                    "{'first': [4, 8], 'chain_fused': [1]}, 0 failed")
    assert e2e.checks_for([run("full_drafter", **{**GOOD_FULL, "log_excerpt": [line]})], [0], greedy=False,
                          perfect=False)["full_drafter_s0_log_shows_capture"]


def test_log_excerpt_keeps_our_lines_and_skips_path_mentions(tmp_path):
    from portable_spec_harness.e2e.parent import log_excerpt

    log = tmp_path / "engine.log"
    noise = [f"INFO Using cache directory: /tmp/portable_spec_vllm_cache/{i}" for i in range(60)]
    capture = "INFO [proposer.py:1] portable_spec: drafter FULL graphs: 9 captured in 0.04 s, 58.0 MiB, sizes {}, 0 failed"
    plugin = "INFO [__init__.py:237] Platform plugin portable_spec is activated"
    log.write_text("\n".join(noise + [plugin] + ["Capturing CUDA graphs (decode, FULL): 100%"] * 50 + [capture]))
    excerpt = log_excerpt(log)
    assert excerpt[0].endswith("0 failed") and plugin[-300:] in excerpt and len(excerpt) == 40
    assert not any("portable_spec_vllm_cache" in line for line in excerpt)


def test_log_excerpt_keeps_head_and_tail_of_a_long_line(tmp_path):
    """The musa-sim budget line names the worker and class first and runs past 600 characters: a tail-only cut lost
    'MusaWorker on' on the H100 (session 6), so the check failed on a log that had the line."""
    from portable_spec_harness.e2e.parent import log_excerpt
    from portable_spec_harness.e2e.musa_sim_checks import log_checks

    head = ("INFO 11-24 12:56:12 [musa_worker.py:70] portable_spec[musa-sim]: MusaWorker on "
            "portable_spec_harness.musa_sim_platform.MusaSimPlatform, live-graph limit 8 (")
    line = head + "dropped the largest capture sizes; " * 30 + "now 8 live graphs)"
    log = tmp_path / "engine.log"
    log.write_text(line + "\n")
    (kept,) = log_excerpt(log)
    assert kept.startswith(head) and kept.endswith("now 8 live graphs)") and len(kept) < len(line)
    assert log_checks({"log_excerpt": [kept]})["log_names_musa_sim_class_and_worker"]
    assert not log_checks({"log_excerpt": [line[-300:]]})["log_names_musa_sim_class_and_worker"]


def test_worker_facts_name_the_worker_inside_vllms_wrapper():
    """collective_rpc hands our function vLLM's WorkerWrapperBase; the fact must name the worker it wraps."""
    from vllm.v1.worker.worker_base import WorkerWrapperBase

    from portable_spec_harness.e2e.facts import wrapped_worker

    class MusaWorker:  # the class a platform chose (a stand-in: building a real worker needs a device)
        pass

    wrapper = WorkerWrapperBase(rpc_rank=0)
    wrapper.worker = inner = MusaWorker()
    assert wrapped_worker(wrapper) is inner
    assert wrapped_worker(inner) is inner


def test_jit_events_are_read_from_vllms_monitor_lines_and_fail_our_variant_by_default(tmp_path):
    """Every compilation counts (the child turns on vLLM's verbose monitor, so a second specialization of a kernel
    is a line of its own); our variant fails on any, unless allowed; upstream variants are only reported. The parent
    reads the log through ``jit_judge`` (one read: compiles and the monitor) and the check is jit_judge's verdict."""
    from portable_spec_harness import jit_judge

    log = tmp_path / "engine.log"
    log.write_text(
        "INFO Kernel JIT monitor activated; monitored JIT compilations during inference will use mode=warn.\n"
        "(Worker_TP1 pid=9) WARNING 11-23 10:00:00 [jit_monitor.py:137] Triton kernel JIT compilation during "
        "inference: eagle_prepare_next_token_padded_kernel (constexprs={BLOCK_SIZE_TOKENS=4}; signature={}). This "
        "causes a latency spike; consider extending warmup to cover this shape/config.\n"
        "WARNING 11-23 10:00:01 [jit_monitor.py:137] Triton kernel JIT compilation during inference: "
        "eagle_prepare_next_token_padded_kernel (constexprs={BLOCK_SIZE_TOKENS=1}; signature={}). This causes\n"
        "WARNING 11-23 10:00:01 [jit_monitor.py:137] Triton kernel JIT compilation during inference: "
        "rejection_greedy_sample_kernel. This causes a latency spike\n")
    jit = jit_judge.read(log)
    events = list(jit.compiles)
    assert jit.monitor_active is True
    assert events == ["Triton kernel JIT compilation: eagle_prepare_next_token_padded_kernel"] * 2 + [
        "Triton kernel JIT compilation: rejection_greedy_sample_kernel"]
    e2e = load_e2e_script()
    clean = run("full_drafter", **GOOD_FULL)
    spiky = run("full_drafter", **{**GOOD_FULL, "jit_during_inference": events})
    upstream = run("upstream_v1", jit_during_inference=events)
    key = "full_drafter_s0_no_jit_during_inference"
    assert e2e.checks_for([run("nospec"), upstream, clean], [0], greedy=True, perfect=True)[key]
    failing = e2e.checks_for([run("nospec"), upstream, spiky], [0], greedy=True, perfect=True)
    assert failing[key] is False and not any(k.startswith("upstream_v1") and not v for k, v in failing.items())
    assert key not in e2e.checks_for([run("nospec"), spiky], [0], greedy=True, perfect=True, require_no_jit=False)
    # A row without the field (the parent always sets it) fails rather than passes.
    silent = {k: v for k, v in clean.items() if k != "jit_during_inference"}
    assert not e2e.checks_for([run("nospec"), silent], [0], greedy=True, perfect=True)[key]


@pytest.mark.parametrize("monitor", [False, None], ids=["monitor_never_armed", "monitor_not_recorded"])
def test_our_variant_without_vllms_jit_monitor_fails_no_jit_during_inference(tmp_path, monitor):
    """Zero compile lines prove nothing when vLLM's JIT monitor never armed (its "Kernel JIT monitor activated" line
    missing from the engine's log) or when the row did not record it: jit_judge's verdict fails both, as it fails a
    serving check's server. The parent records what one read of the log says."""
    from portable_spec_harness.e2e import parent
    from portable_spec_harness import jit_judge

    log = tmp_path / "engine.log"
    log.write_text("INFO 11-23 10:00:00 [gpu_worker.py:1] warm-up done; no monitor line in this log\n")
    assert jit_judge.read(log) == jit_judge.JitLog((), False)
    row = {**GOOD_FULL, parent.COMPILES_KEY: [], jit_judge.MONITOR_KEY: monitor}
    if monitor is None:
        del row[jit_judge.MONITOR_KEY]
    e2e = load_e2e_script()
    key = "full_drafter_s0_no_jit_during_inference"
    checks = e2e.checks_for([run("nospec"), run("full_drafter", **row)], [0], greedy=True, perfect=True)
    assert checks[key] is False
    assert [k for k, ok in checks.items() if not ok] == [key]  # the monitor alone fails it


def test_the_parent_records_the_compiles_and_the_monitor_from_one_read(tmp_path, monkeypatch):
    """``run_variant`` keeps what ``jit_judge.read`` found in the child's log: the compiles under the e2e key and
    whether the monitor armed; a log without the monitor line records ``False``."""
    import subprocess
    from portable_spec_harness.e2e import parent

    armed = ("INFO Kernel JIT monitor activated; monitored JIT compilations during inference will use mode=warn.\n"
             "WARNING 11-23 10:00:01 [jit_monitor.py:137] Triton kernel JIT compilation during inference: "
             "_topk_topp_kernel. This causes a latency spike\n")
    for body, expect in ((armed, (["Triton kernel JIT compilation: _topk_topp_kernel"], True)),
                         ("INFO warmed up, no monitor line\n", ([], False))):
        def child(cmd, stdout=None, stderr=None, text=None, env=None, timeout=None, body=body):
            stderr.write(body)
            return subprocess.CompletedProcess(cmd, 0, stdout='RESULT {"variant": "full_drafter"}\n')

        monkeypatch.setattr(parent.subprocess, "run", child)
        result = parent.run_variant("full_drafter", [], tmp_path / "engine.log", 5)
        assert (result[parent.COMPILES_KEY], result["jit_monitor_active"]) == expect


def test_the_e2e_script_fails_on_jit_unless_allowed():
    e2e = load_e2e_script()
    source = Path(e2e.__file__).read_text()
    assert "require_no_jit=not args.allow_jit" in source and '"--allow-jit"' in source


def test_child_turns_on_vllms_verbose_jit_monitor_and_vllm_accepts_every_kwarg(vllm_platform, tmp_path):
    """The child's LLM kwargs are EngineArgs fields, and jit_monitor_verbose reaches vLLM's observability config."""
    import dataclasses

    from vllm.engine.arg_utils import EngineArgs

    from portable_spec_harness.e2e.child import engine_kwargs, parse_args
    from portable_spec_harness.model_zoo import build_pair

    pair = build_pair("llama_eagle", tmp_path, variant="perfect")
    kwargs = engine_kwargs(parse_args(["--variant", "full_drafter", "--target", pair["target"], "--draft",
                                       pair["draft"], "--kv-cache-bytes", str(1 << 28)]))
    assert kwargs["jit_monitor_verbose"] is True
    assert set(kwargs) <= {f.name for f in dataclasses.fields(EngineArgs)}
    cfg = EngineArgs(**kwargs).create_engine_config()
    assert cfg.observability_config.jit_monitor_verbose is True


def test_the_async_flag_reaches_vllms_scheduler_config_for_the_draft_model(vllm_platform, tmp_path):
    """vLLM 0.26.0 leaves async scheduling off for draft_model unless asked: the async part's engines must get it."""
    from vllm.engine.arg_utils import EngineArgs

    from portable_spec_harness.e2e.child import engine_kwargs, parse_args
    from portable_spec_harness.model_zoo import build_pair

    pair = build_pair("llama_ctx_draft_model", tmp_path)
    argv = ["--variant", "full_drafter", "--target", pair["target"], "--draft", pair["draft"], "--method",
            "draft_model", "--kv-cache-bytes", str(1 << 28)]
    assert "async_scheduling" not in engine_kwargs(parse_args(argv))  # vLLM decides
    kwargs = engine_kwargs(parse_args([*argv, "--async-scheduling"]))
    assert EngineArgs(**kwargs).create_engine_config().scheduler_config.async_scheduling is True


@pytest.mark.filterwarnings("ignore:CUDA is not available, disabling CUDA profiling:UserWarning")  # the CPU lane
@pytest.mark.parametrize("concurrency", [1, 16])
def test_the_profiled_pass_runs_at_the_requested_concurrency(concurrency):
    """The breakdown is read where the gap is: ``--profile-concurrency C`` profiles C requests (every generate call
    of the profile: the warm pass, the torch-profiled pass, the cProfile pass and the phase clock's pass), and says
    so in its report."""
    import types

    from portable_spec_harness.e2e.child import profile_decode

    seen = []

    class Engine:  # stands for vLLM's LLM: records each generate's prompts
        llm_engine = types.SimpleNamespace(vllm_config=types.SimpleNamespace(use_v2_model_runner=False))

        def generate(self, prompts, params, use_tqdm=False):
            seen.append(len(prompts))
            return []

    report = profile_decode(Engine(), types.SimpleNamespace(bench_tokens=4), lambda **kw: kw,
                            lambda prompt_token_ids: prompt_token_ids, concurrency)
    assert seen == [concurrency] * 4 and report["concurrency"] == concurrency
    assert "error" in report["phase_clock"]  # this stand-in engine enters no step scope: said, not divided by zero


def test_paired_passes_decide_a_bound_only_when_their_interval_clears_it():
    """Per-pass ratios of interleaved passes: a clear regression fails the 0.98 bound, equal engines with tight
    passes hold it, the same engines at +-30% noise are undecided (with an estimate of the passes it would take),
    and no passes decide nothing."""
    from portable_spec_harness.e2e.paired import paired_cell

    def cell(walls):
        return {"output_tokens": 512, "wall_s_all": walls}

    base = [0.40, 0.41, 0.39, 0.40, 0.42, 0.40, 0.41, 0.39, 0.40]
    slower = paired_cell(cell([w * 1.10 for w in base]), cell(base), 0.98)
    assert slower["verdict"] == "fails" and slower["median"] == pytest.approx(1 / 1.1, abs=1e-3)
    same = paired_cell(cell([w * 1.002 for w in base]), cell(base), 0.98)
    assert same["verdict"] == "holds" and same["passes"] == 9
    noisy_ours = [0.41, 0.36, 0.40, 0.35, 0.39, 0.42, 0.54, 0.35, 0.41]
    noisy_other = [0.40, 0.38, 0.36, 0.40, 0.55, 0.40, 0.51, 0.39, 0.41]
    noisy = paired_cell(cell(noisy_ours), cell(noisy_other), 0.98)
    assert noisy["verdict"] == "undecided" and noisy["passes_to_decide"] > 9
    assert noisy["interval"][0] < 0.98 <= noisy["interval"][1]
    assert paired_cell(cell([]), cell(base), 0.98) == {"passes": 0, "bound": 0.98, "verdict": "undecided"}
    assert "verdict" not in paired_cell(cell(base), cell(base))  # no bound asked, none judged


def test_bench_summary_pairs_the_mrv2_engines_against_the_no_regression_bound():
    def row(variant, walls):
        return {"variant": variant, "bench": [{"concurrency": 4, "output_tokens": 2048, "output_tok_s": 5000.0,
                                               "wall_s_all": walls}]}
    summary = summarize([row("builtin_mrv2", [0.4] * 5), row("ours_platform_mrv2", [0.5] * 5),
                         row("upstream_v1", [0.8] * 5), row("full_drafter", [0.4] * 5)])
    mrv2 = summary["paired_ours_platform_mrv2_vs_builtin_mrv2"][4]
    assert (mrv2["median"], mrv2["bound"], mrv2["verdict"]) == (0.8, 0.98, "fails")
    ours = summary["paired_full_drafter_vs_upstream_v1"][4]
    assert ours["median"] == 2.0 and "verdict" not in ours


def test_a_musa_sim_variant_reports_the_harness_simulation_of_our_class_as_ours():
    """The e2e child refuses to report vLLM's own path under our variant's name; musa-sim's platform class lives in
    the harness (outside the product), and only a simulated-device variant may resolve to it."""
    from portable_spec_harness.e2e.child import resolved_ours
    from portable_spec_harness.musa_sim_plugin import PLATFORM_QUALNAME

    assert resolved_ours("portable_spec.vllm_adapter.platform.cuda.PortableCudaPlatform", None)
    assert resolved_ours(PLATFORM_QUALNAME, "musa")
    assert not resolved_ours(PLATFORM_QUALNAME, None)  # a CUDA variant never passes on the simulation's class
    assert not resolved_ours("vllm.platforms.cuda.CudaPlatform", "musa")
    assert not resolved_ours("vllm.platforms.cuda.CudaPlatform", None)
