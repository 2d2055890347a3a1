"""Session 39's results README (one H200, vLLM 0.26.0) read back from its JSON and logs: the draft model's sampled
drafts on the V1 runner (issue 39's last GPU check), judged again with the sampled-exactness checks together with
every sampled V1 run committed before; the 8B EAGLE-3 pair's 1024-token rows (issue 41); the restart's warm-up line
and the ptxas experiment; the two calls that ran no round."""

from __future__ import annotations

import json
import re
from pathlib import Path

from portable_spec_harness.e2e import exactness
from portable_spec_harness.serve_bench import coverage
from results_readback import (EAGLE_DRAFTERS, ResultsFolder, check_draft_v1_call, compiles_in_every_call,
                              checked_issue41_rows, coverage_counts, load, no_compile_after_boot, restart_table,
                              upstream_compiled_sentence)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
RUN = RESULTS / "2026-11-30-h200-session39"
EAGLE3 = ("llama8b_eagle3", "designed-partial")
BENCH = ResultsFolder(RUN, RUN / "e3g1k026")
SHORT = ResultsFolder(RUN, RUN / "e3g128")
ROUND_CALLS = ("call2", "call3", "call4")
E2E = RUN / "p39prob" / "v1_drafter_e2e_llama_ctx_draft_model_perfect_k3_t1_logit8.json.gz"


def folded() -> str:
    return BENCH.folded()


def rows_of(report: dict) -> dict[tuple[str, int], dict]:
    return {(r["variant"], r.get("seed")): r for r in report["results"] if "error" not in r}


def sampled_verdicts(report: dict, cross_seed: bool = False) -> list[tuple[exactness.Verdict, exactness.Verdict]]:
    """Per seed of a sampled run, ours' output and acceptance counts against the eager drafter's (``cross_seed``:
    against the next seed's eager run instead, which must not pass)."""
    rows = rows_of(report)
    seeds = sorted(s for v, s in rows if v == "full_drafter")
    verdicts = []
    for i, seed in enumerate(seeds):
        ours, eager = rows["full_drafter", seed], rows["eager_drafter", seeds[(i + 1) % len(seeds)] if cross_seed
                                                    else seed]
        verdicts.append((exactness.sampled_equals_eager(ours["outputs"], eager["outputs"]),
                         exactness.acceptance_counts_equal(ours["acceptance_counts"], eager["acceptance_counts"])))
    return verdicts


def test_the_draft_models_sampled_drafts_passed_every_check_on_the_v1_runner():
    report = load(E2E)
    assert (report["vllm"], report["device"], report["method"], report["draft_sample_method"]) == (
        "0.26.0", "NVIDIA H200", "draft_model", "probabilistic")
    assert report["temperature"] == 1.0 and report["target_logit"] == 8.0 and report["injected_bug"] is None
    checks = report["checks"]
    assert len(checks) == 45 and all(checks.values())
    assert sum(name.endswith("_sampled_off_greedy") for name in checks) == 6
    assert f"**{len(checks)} of {len(checks)} checks true** as the lane judged them" in folded()
    rows = rows_of(report)
    assert {r["drafter"] for (v, _), r in rows.items() if v == "full_drafter"} == {
        "portable_spec.vllm_adapter.spec_decode.draft_model.FullGraphDraftModelProposer"}
    assert {r["drafter"] for (v, _), r in rows.items() if v == "eager_drafter"} == {
        "vllm.v1.spec_decode.draft_model.DraftModelProposer"}
    assert all(r["use_v2_model_runner"] is False for r in rows.values()) and len(rows) == 6
    lane = json.loads((RUN / "p39prob" / "cuda_lane.json").read_text())
    assert lane["commit"].startswith("7f56ca0") and lane["tree_changes"] == 0 and lane["stages"] == {"probe": 0,
                                                                                                     "e2e": 0}


def test_sampled_output_and_counts_equal_the_eager_drafters_here_and_in_every_committed_sampled_run():
    ours = sampled_verdicts(load(E2E))
    assert [(a.ok, a.count, b.ok, b.count) for a, b in ours] == [(True, 480, True, 359)] * 3
    counts = rows_of(load(E2E))["full_drafter", 0]["acceptance_counts"]
    assert (counts["drafts"], counts["draft_tokens"], counts["accepted"]) == (120, 359, 359)
    assert f"`{counts['accepted_per_position']}` per position".replace("'", "") in folded()
    runs = seeds = 0
    for path in sorted(RESULTS.glob("*/**/v1_drafter_e2e_*.json*")):
        report = load(path)
        if not report.get("temperature"):
            continue
        verdicts = sampled_verdicts(report)
        assert verdicts and all(a.ok and a.count and b.ok and b.count for a, b in verdicts), path
        assert not any(a.ok for a, _ in sampled_verdicts(report, cross_seed=True)), path  # the check tells seeds apart
        runs, seeds = runs + 1, seeds + len(verdicts)
    assert (runs, seeds) == (14, 42)
    assert f"**{runs} of {runs} runs, {seeds} of {seeds} seeds**" in folded()


def test_every_serving_call_ran_7f56ca0_on_the_v1_runner():
    seen = sum(check_draft_v1_call(BENCH.call_report(call), call, "7f56ca0", "designed-partial",
                                   tree_changes=0 if call == "call1" else 1, drafters=EAGLE_DRAFTERS)
               for call in ("call1", *ROUND_CALLS))
    seen += check_draft_v1_call(SHORT.call_report("call1"), "e3g128", "7f56ca0", "designed-partial", tree_changes=1,
                                drafters=EAGLE_DRAFTERS)
    assert seen == 10
    sized = load(BENCH.bench / "call1" / "serve-bench" / "serve_bench.json")
    for call in ROUND_CALLS:
        report = BENCH.call_report(call)
        assert report["settings"]["sizing_from"] == "bench/tmp-sizing/e3g1k026c1.json"
        assert report["sizing_from_pools"] == {"pools": True, "differs": []}
        assert report["workload"]["cells"] == sized["workload"]["cells"]


def test_the_1024_token_rows_pool_three_rounds_meet_the_targets_and_compile_nothing_after_boot():
    s, entry = BENCH.pooled_entry(*EAGLE3, "0.26.0", ROUND_CALLS)
    assert s["problems"] == [] and entry["rounds"] == 3
    cells, ratios = entry["cells"], s["ours_over_upstream_v1"][EAGLE3[0]][EAGLE3[1]]
    tok, itl, rounds = checked_issue41_rows(BENCH, cells, ratios, 1024, (1, 8, 32), rounds=3)
    below = [r for r in rounds if r < 1.0]
    assert len(rounds) == 18 and len(below) == 1 and f"One round of 18 is below 1.0 (sampled c=8, round 2: " \
        f"{below[0]:.3f})" in folded()
    assert min(tok) >= 1.0 and f"met ({min(tok):.3f}–{max(tok):.3f}, ratio of the medians)" in folded()
    assert max(itl) <= 1.25 and f"met in every cell ({min(itl):.3f}–{max(itl):.3f} pooled)" in folded()
    keys = [k for k in cells["ours"]]
    lengths = [a for v in cells.values() for k in keys for a in v[k]["spec_decode_acceptance_length"]["all"]]
    durations = [d for v in cells.values() for k in keys for d in v[k]["duration"]["all"]]
    assert len(keys) == 6 and len(lengths) == len(durations) == 36
    assert f"({min(lengths):.3f}–{max(lengths):.3f}). Every timed run lasted {min(durations):.1f} s or more." \
        in folded()
    assert no_compile_after_boot(BENCH, ("call1", *ROUND_CALLS), ("ours",)) == 4
    assert upstream_compiled_sentence(compiles_in_every_call(BENCH.bench, ("call1", *ROUND_CALLS))) in folded()


def test_issue_41s_coverage_counts_the_six_new_cells():
    report, counted, meets = coverage_counts(coverage.ISSUE_41, RESULTS, ROOT, RUN.name)
    assert (len(report["cells"]), counted, meets) == (120, 20, 19)
    assert f"**{counted} of {len(report['cells'])} cells counted, {meets} meeting every target**" in folded()


def test_the_restarts_warm_up_line_and_the_ptxas_experiment():
    found = restart_table(BENCH, "e3g1k026")
    assert [found[c][1:3] for c in ("call1", "call2")] == [(13, 0), (6, 2)]
    probe = json.loads((RUN / "ptxas_key" / "triton_ptxas_key.json").read_text())
    assert probe["torch"] == "2.11.0+cu130" and probe["triton"] == "3.6.0" and probe["has_set_ptxas"]
    torch_release, triton_release = (re.search(r"cuda_(\d+\.\d+)", probe[k]).group(1)
                                     for k in ("torch_ptxas", "triton_ptxas"))
    assert (torch_release, triton_release) == ("13.0", "12.8")
    runs = probe["runs"]
    assert [r["mode"] for r in runs] == ["plain", "inductor", "plain", "inductor"] and all(r["rc"] == 0 for r in runs)
    versions = [json.loads(r["child"])["ptxas_version"] for r in runs]
    assert versions == [probe["triton_ptxas"], probe["torch_ptxas"]] * 2
    entries = [r["cache_entries"] for r in runs]
    assert entries == [3, 4, 4, 4]
    assert (f"reads CUDA {torch_release} (`torch/bin/ptxas`) against {triton_release} (Triton's)" in folded()
            and "left " + ", ".join(map(str, entries[:-1])) + f" and {entries[-1]} entries" in folded())


def test_the_calls_without_a_round():
    first = BENCH.call_report("call1")
    short = SHORT.call_report("call1")
    for report in (first, short):
        assert report["status"] == "incomplete" and report["rounds_done"] == 0
        assert not [r for r in report["runs"] if r["kind"] == "timed"] and len(report["workload"]["cells"]) == 6
        assert report["stopped_because"] == f"--budget-s {report['settings']['budget_s']:g} would be passed"
    boots = {v: info["boots"][0]["seconds"] for v, info in first["variants"].items()}
    phases = first["phases_s"]
    assert (f"booted both servers, compiling the model ({boots['upstream_v1']:.1f} / {boots['ours']:.1f} s, "
            f"upstream / ours), and sized the six cells (warm runs, {phases['warm_s']:.1f} s); "
            f"{phases['total_s']:.1f} s spent, and a round estimated at {phases['round_estimate_s']:.1f} s") \
        in folded()
    assert all(info["boots"][0].get("reused") for info in short["variants"].values())
    assert (f"sized the 128-token cells (warm runs, {short['phases_s']['warm_s']:.1f} s); the round's estimate "
            f"({short['phases_s']['round_estimate_s']:.1f} s) would have passed its "
            f"{short['settings']['budget_s']:g} s budget") in folded()
    assert not (SHORT.bench / "pooled").exists()
