"""Session 36's GPU results (one H200, vLLM 0.33.0, Model Runner V2) as its README states them, read back from the
committed JSON and logs: dummy weights at inputs 256 and 1024, c = 1–32, three rounds over four calls split by
concurrency and pooled; acceptance; the short run and the call that sized it up; no compile after boot; ours'
replays; boots, skipped warm runs and round times. A changed number in the README or in a JSON fails."""

from __future__ import annotations

import gzip
from pathlib import Path

from results_readback import (MRV2_VARIANTS as VARIANTS, ResultsFolder, acceptance_lengths, check_draft_mrv2_call,
                              checked_pooled_cell, check_mrv2_moves_and_tpot, load, mrv2_table_rows,
                              no_compile_after_boot, prefill_waves_sentence, speculator_counts)

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "bench" / "results" / "2026-11-30-h200-session36"
DM = RUN / "dmd033"
PAIR, MODE = "llama8b_draft1b", "dummy"
COMMIT, TREE_CHANGES = "af90968", 86
CALLS = ("call1", "call2", "call3", "call4")
CONCURRENCY = {"call1": [8, 32], "call2": [1, 2], "call3": [8, 32], "call4": [1, 2]}

FOLDER = ResultsFolder(RUN, DM)
readme, folded, call_report = FOLDER.readme, FOLDER.folded, FOLDER.call_report


def timed_runs() -> list[dict]:
    return [r for call in CALLS for r in call_report(call)["runs"]]


def test_every_call_ran_on_vllm_0_33_mrv2_with_async_scheduling_on_servers_of_one_shape():
    seen = sum(check_draft_mrv2_call(call_report(call), call, COMMIT, MODE, TREE_CHANGES) for call in CALLS)
    assert seen == 8
    for call in CALLS:
        workload = call_report(call)["workload"]
        assert workload["concurrency"] == CONCURRENCY[call], call
        assert (workload["max_model_len"], workload["max_num_seqs"]) == (1360, 32), call
    assert f"the lane recorded commit `{COMMIT}` with `tree_changes` {TREE_CHANGES} in every call" in folded()
    assert "max-model-len 1360, max-num-seqs 32 in every call" in folded()


def test_the_table_prints_the_pooled_numbers_and_every_round_is_ours():
    s, entry = FOLDER.pooled_entry(PAIR, MODE, "0.33.0", CALLS)
    assert s["problems"] == [] and entry["rounds"] == 3 and entry["rounds_run"] == 6
    assert "The pooled summary's `rounds` is now what every cell holds (3); `rounds_run` (6)" in folded()
    cells, ratios = entry["cells"], s["ours_mrv2_over_mrv2"][PAIR][MODE]
    rows = mrv2_table_rows(FOLDER, "## Dummy weights on MRV2")
    assert sorted(rows) == [(n, c) for n in (256, 1024) for c in (1, 2, 8, 32)]
    lines, lowest = {}, {}
    for (length, c), row in rows.items():
        key = f"in{length}/greedy/c{c}"
        _, ours, per_round = checked_pooled_cell(cells, ratios, key, row, 3, VARIANTS)
        assert ours["spec_decode_acceptance_length"]["all"] == [4.0] * 3, key
        assert min(per_round) > 1.0, key  # issue 39's target for every cell
        lowest.update({r: (length, c) for r in per_round})
        lines.setdefault(length, []).append(f"c={c} " + ", ".join(f"{r:.3f}" for r in per_round))
    low = min(lowest)
    assert lowest[low] == (1024, 32) and f"(lowest {low:.3f}, 1024 in at c=32)" in folded()
    assert f"256 in: {'; '.join(lines[256])}. 1024 in: {'; '.join(lines[1024])}." in folded()
    assert check_mrv2_moves_and_tpot(cells, folded(), 7, "in1024/greedy/c2") == 8


def test_every_run_accepted_every_draft_token():
    """The README's first bullet: 4.00 on both servers in every timed run (dummy weights on 0.33.0), against 1.00 on
    0.26.0's dummy pool that it names."""
    runs = timed_runs()
    assert len(runs) == 48 and {r["result"]["spec_decode_acceptance_length"] for r in runs} == {4.0}
    assert "**Acceptance length 4.00 on both servers in every run, with dummy weights.**" in folded()
    v1 = load(ROOT / "bench/results/2026-11-30-h200-session33/dmd026/pooled/serve_bench_summary.json")
    lengths = acceptance_lengths(v1["pairs"][PAIR][MODE]["cells"])
    assert lengths == {1.0} and "the same pair's dummy\n  weights gave 1.00 (sessions 32–33" in readme()


def test_the_prefill_waves_at_1024_c32():
    assert prefill_waves_sentence(timed_runs()) in folded()


def test_the_short_run_and_the_call_that_sized_its_cell_up():
    short = [(call, r) for call in CALLS for r in call_report(call)["short_runs"]]
    assert all(call_report(call)["workload"]["min_run_s"] == 10.0 for call in CALLS)
    assert [(call, r["variant"], r["cell"], r["round"]) for call, r in short] == \
        [("call1", "mrv2", "in256/greedy/c32", 0)]
    run = short[0][1]
    mrv2 = [r for r in timed_runs() if r["variant"] == "mrv2"]
    assert (f"**Short runs: 1 of MRV2's {len(mrv2)} timed runs ended under `--min-run-s` 10 s** "
            f"({run['duration_s']:.2f} s at 256 in, c=32, round 0, {run['num_prompts']}") in folded()
    sized = call_report("call3")["sizing"]["in256/greedy/c32"]["per_variant"]["mrv2"]
    resized = sized["resized_from_short"]
    assert round(resized["shortest_s"], 2) == round(run["duration_s"], 2) and resized["earlier_per_slot"] == 5
    assert f"({resized['earlier_per_slot']} prompts per slot to {sized['per_slot']}, `resized_from_short`" in folded()
    later = [r["duration_s"] for r in call_report("call3")["runs"]
             if (r["variant"], r["input_len"], r["concurrency"]) == ("mrv2", 256, 32)]
    assert len(later) == 2 and f"its two runs there lasted {min(later):.2f} s or more" in folded()
    ours = min(r["duration_s"] for r in timed_runs() if r["variant"] == "ours_mrv2")
    rest = min(r["duration_s"] for r in mrv2 if r["duration_s"] >= 10.0)
    assert f"Ours' runs lasted {ours:.2f} s or more, MRV2's other runs {rest:.2f} s or more" in folded()
    first = [r for r in call_report("call1")["runs"] if (r["variant"], r["input_len"], r["concurrency"]) ==
             ("mrv2", 256, 32)]
    assert f"(MRV2 at {first[0]['result']['output_throughput']:,.1f} tok/s in the short run)" in folded()


def test_no_compile_after_boot_and_ours_replayed_its_graphs():
    assert no_compile_after_boot(FOLDER, CALLS, VARIANTS) == 8
    n = speculator_counts(FOLDER, CALLS)  # the same kept server throughout: each call starts where one ended
    assert n["loops_after"] == n["loops_before"]
    assert (f"{n['decode']:,} decode-step and {n['step0']:,} step-0 replays, {n['eager_step0']:,} eager step-0 passes"
            in folded())
    assert f"no eager decode loop after boot ({n['loops_before']} at boot, {n['loops_after']} after call 4)" in folded()


def test_boots_warm_skips_and_rounds_are_what_the_readme_says():
    reports = {call: call_report(call) for call in CALLS}
    first = reports["call1"]
    boots = sorted(info["boots"][0]["seconds"] for info in first["variants"].values())
    assert f"booting the two 0.33.0 servers took {boots[0]:.0f}–{boots[1]:.0f} s" in folded()
    assert "jit cache: restored FlashInfer 0.7.2.post1" in gzip.open(DM / "call1" / "console.log.gz", "rt").read()
    assert [reports[c]["rounds_done"] for c in CALLS] == [1, 2, 2, 1]
    assert [reports[c]["problems"] != [] for c in CALLS] == [True, True, False, False]
    for call in CALLS[1:]:
        assert reports[call]["phases_s"]["boot_s"] == 0.0 and all(
            b["seconds"] == 0.0 and b["reused"] for info in reports[call]["variants"].values()
            for b in info["boots"]), call
    skipped = {c: len(reports[c].get("warm_skipped", [])) for c in CALLS}
    assert skipped == {"call1": 0, "call2": 0, "call3": 6, "call4": 6}
    warm = {c: reports[c]["phases_s"]["warm_s"] for c in CALLS}
    assert (f"{warm['call3']:.1f} and {warm['call4']:.1f} s of warm runs, against "
            f"{min(warm['call1'], warm['call2']):.1f}–{max(warm['call1'], warm['call2']):.1f} s in calls 1 and 2") \
        in folded()
    per_round = {c: (r["phases_s"]["total_s"] - r["phases_s"]["boot_s"] - r["phases_s"]["warm_s"]) / r["rounds_done"]
                 for c, r in reports.items()}
    high = [per_round["call1"], per_round["call3"]]
    low = [per_round["call2"], per_round["call4"]]
    assert f"of the 4 cells at c = 8, 32 ({per_round['call1']:.0f} s) after its boot and {warm['call1']:.1f} s" \
        in folded()
    assert (f"a round of the 4 cells at c = 8, 32 took {min(high):.0f}–{max(high):.0f} s, of the 4 at c = 1, 2 "
            f"{min(low):.0f}–{max(low):.0f} s") in folded()
    estimates = [r["phases_s"]["round_estimate_s"] for r in reports.values()]
    assert f"against the {min(estimates):.0f}–{max(estimates):.0f} s the serve bench predicted" in folded()
