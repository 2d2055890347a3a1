"""Session 55's results README (one H200, vLLM 0.33.0) read back from its JSON and logs: the EAGLE-1 dummy pair's
cells on Model Runner V2 at 128 in (c=32 greedy, sampled) and 1024 in (greedy), three rounds each, from one boot kept
through a chain of four calls, the last of which ran no round."""

from __future__ import annotations

from pathlib import Path

from portable_spec_harness.serve_bench import coverage
from results_readback import (ResultsFolder, acceptance_lengths, check_flashinfer_cache_restored, checked_coverage,
                              checked_mrv2_chain_readme, checked_tables_per_round, compiled_once_after_serving,
                              jit_compiles, kept_chain_budgets, merged_pools, no_compile_after_boot, value_span)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
RUN = RESULTS / "2026-12-02-h200-session55"
S54 = "2026-12-02-h200-session54"
PAIR = ("llama8b_eagle", "dummy")
MRV2 = ("mrv2", "ours_mrv2")
C32 = ResultsFolder(RUN, RUN / "e1m128c32")
SAMPLED = ResultsFolder(RUN, RUN / "e1m128s")
GREEDY_1K = ResultsFolder(RUN, RUN / "e1m1024g")
SAMPLED_1K = ResultsFolder(RUN, RUN / "e1m1024s")
CHAIN = [(C32, "call1"), (SAMPLED, "call1"), (GREEDY_1K, "call1"), (SAMPLED_1K, "call1")]
"""The calls in the order they ran: the boot call, then three on its servers."""
POOLED = (C32, SAMPLED, GREEDY_1K)
"""The calls that ran rounds, each pooled alone."""
CELLS = {"greedy": [(128, 32), (1024, 1), (1024, 2), (1024, 8), (1024, 32)],
         "sampled": [(128, 1), (128, 2), (128, 8), (128, 32)]}
"""The README's two tables, row by row (input, c)."""
MAX_MODEL_LEN = 4304


def test_every_call_ran_6b15be0_on_mrv2_with_vllms_speculator_and_one_graph_set():
    assert checked_mrv2_chain_readme(CHAIN, "6b15be0", PAIR[1], MAX_MODEL_LEN, PAIR[0], "172,800") == 8
    check_flashinfer_cache_restored(C32, "call1", MRV2)


def test_one_boot_served_the_chain_and_the_last_call_ran_no_round():
    budgets = kept_chain_budgets(CHAIN, ["/tmp/kA.json", "/tmp/kB.json", "/tmp/kC.json", None])
    assert budgets == [545, 545, 545, 256]  # each the lane limit less 10 s: the cap 555 thrice, then 266
    text = C32.folded()
    assert ("The first three serving calls got the lease clock's cap, 555 s (a budget of 545 s), the last 266 s "
            "(256 s).") in text
    for folder, call in CHAIN[:3]:
        report = folder.call_report(call)
        assert (report["rounds_done"], report["status"], report.get("stopped_because")) == (3, "complete", None)
        assert report["settings"]["first_round"] == 0 and report["phase_clock"] == {}
    last = SAMPLED_1K.call_report("call1")
    assert (last["rounds_done"], last["status"], last["runs"]) == (0, "incomplete", [])
    assert last["stopped_because"] == "--budget-s 256 would be passed"
    phases = last["phases_s"]
    assert (f"after its warm runs ({phases['warm_s']:.1f} s) the budget (256 s) could not hold a round (estimate "
            f"{phases['round_estimate_s']:.1f} s)") in text
    assert sorted(last["sizing"]) == sorted(f"in1024/sampled/c{c}" for c in (1, 2, 8, 32))
    boots = {v: C32.call_report("call1")["variants"][v]["boots"][0]["seconds"] for v in MRV2}
    assert f"**Boot:** {boots['mrv2']:.1f} s (`mrv2`) and {boots['ours_mrv2']:.1f} s (`ours_mrv2`)" in text


def test_the_next_lease_plan_reads_the_calls_overheads():
    reports = [folder.call_report(call) for folder, call in CHAIN]
    preload = [r["phases_s"]["client_preload_s"] for r in reports]
    warm = [r["phases_s"]["warm_s"] for r in reports]
    assert f"paid {value_span(preload, 0)} s of client preload" in C32.folded()
    assert f"{value_span(warm, 0)} s of warm runs" in C32.folded()
    per_cell = []
    for report in reports[1:3]:  # the two later calls that ran rounds: no boot in their totals
        p = report["phases_s"]
        per_cell.append((p["total_s"] - p["client_preload_s"] - p["warm_s"]) / len(report["workload"]["num_prompts"]))
    assert all(93 <= s <= 97 for s in per_cell), per_cell
    assert "a cell's three rounds of timed runs took about 95 s at 128 and 1024 in" in C32.folded()


def this_sessions_pools() -> list[tuple[dict, dict]]:
    """The three pools (summary, entry): each call pooled alone, three rounds in every cell, nothing made up, no
    problem."""
    pools = []
    for folder in POOLED:
        summary, entry = folder.pooled_entry(*PAIR, "0.33.0", ("call1",))
        assert [Path(p).parts[2] for p in entry["sources"]] == [RUN.name]
        assert entry["rounds"] == 3 and summary["problems"] == [] and summary["made_up"] == []
        pools.append((summary, entry))
    return pools


def this_sessions_table() -> tuple[dict, dict]:
    """The three pools' cells (variant -> cell key -> cell) and ratios as one table's: nine cells."""
    cells, ratios = merged_pools(this_sessions_pools(), PAIR, "ours_mrv2_over_mrv2", MRV2)
    assert len(ratios) == 9
    return cells, ratios


def test_the_rows_pool_three_rounds_and_meet_the_mrv2_target():
    cells, ratios = this_sessions_table()
    lines, per_round = checked_tables_per_round(C32.section("## Issue 41: the EAGLE-1 dummy pair on MRV2"), cells,
                                                ratios, CELLS, MRV2)
    rounds = [r for cell in per_round.values() for r in cell]
    text = C32.folded()
    assert f"**Per round, greedy:** {lines['greedy']}. **Sampled:** {lines['sampled']}." in text
    assert len(rounds) == 27
    tok = [r["output_tok_s"] for r in ratios.values()]
    assert min(tok) >= 0.97 and min(rounds) >= 0.97
    assert f"in all nine cells ({value_span(tok, 3)}, ratio of the medians); no round under 0.97 (the lowest " \
           f"{min(rounds):.3f})" in text
    assert acceptance_lengths(cells) == {1.0}
    durations = [d for v in MRV2 for cell in cells[v].values() for d in cell["duration"]["all"]]
    assert len(durations) == 54 and f"every timed run {min(durations):.2f} s or more" in text


def test_stalls_only_where_1024_token_prompts_join_decodes_at_c8_and_c32():
    cells, _ = this_sessions_table()

    def stalls(predicate) -> list[float]:
        return [s / 1000 for v in MRV2 for key, cell in cells[v].items() if predicate(key)
                for s in cell["stall_total_ms"]["all"]]

    quiet = stalls(lambda k: k.startswith("in128/") or k.endswith(("/c1", "/c2")))
    assert len(quiet) == 42 and not any(quiet)  # 7 cells x 2 servers x 3 rounds
    c8, c32 = stalls(lambda k: k == "in1024/greedy/c8"), stalls(lambda k: k == "in1024/greedy/c32")
    assert len(c8) == len(c32) == 6 and min(c8) > 0
    assert (f"{value_span(c8, 1)} s summed per run at c=8, {value_span(c32, 1)} s at c=32") in C32.folded()
    itl = [cells[v]["in1024/greedy/c32"]["p99_itl_ms"]["median"] for v in MRV2]
    assert f"(the p99 ITL of {itl[0]:.2f} / {itl[1]:.2f} ms there is those stalls" in C32.folded()


def test_no_compile_after_boot_on_ours_mrv2_and_mrv2s_one_compile_at_its_first_sampled_request():
    for folder, call in CHAIN:
        assert no_compile_after_boot(folder, (call,), ("ours_mrv2",)) == 1
    for folder, call in CHAIN:  # each call's copy of the log holds the whole log since boot
        assert jit_compiles(folder.bench / call / "serve-bench" / "server_mrv2.log.gz") == ["_gumbel_sample_kernel"]
    compiled_once_after_serving(C32, "call1", "mrv2", "_gumbel_sample_kernel")
    assert "compiled `_gumbel_sample_kernel` after boot, once, at its first sampled request" in C32.folded()


def test_issue_41s_coverage_counts_the_nine_cells():
    rows = checked_coverage(coverage.ISSUE_41, RESULTS, ROOT, (RUN.name, S54), C32.folded(), (120, 108, 103, 99),
                            (*PAIR, "mrv2"))
    counted = [c for c in rows if c["counted"]]
    assert len(counted) == 12 and all(c["meets"] for c in counted)
    ours_here = sorted(c["cell"] for c in counted if any(
        m["counted"] and m["summary"].startswith(f"bench/results/{RUN.name}/") for m in c["measurements"]))
    assert ours_here == sorted([f"in{n}/{s}/c{c}" for s, cells in CELLS.items() for n, c in cells])
    assert all(m["compiles_after_boot"] == 0 for c in counted for m in c["measurements"] if m["counted"])
    missing = sorted(c["cell"] for c in rows if not c["counted"])
    assert missing == sorted([f"in1024/sampled/c{c}" for c in (1, 2, 8, 32)]
                             + [f"in4096/{s}/c{c}" for s in ("greedy", "sampled") for c in (1, 2, 8, 32)])
    assert "its 1024-token sampled and 4096-token cells (12) are not yet measured" in C32.folded()
    report = coverage.coverage(coverage.ISSUE_41, RESULTS, ROOT, as_of=RUN.name)
    table = coverage.markdown(report, coverage.TABLES["issue41"])
    for length, sampling in ((128, "greedy"), (128, "sampled"), (1024, "greedy")):
        row = next(line for line in table.splitlines() if line.startswith(
            f"| {PAIR[0]} | {PAIR[1]} | ours on vLLM's pick (MRV2) / mrv2 | {length} | {sampling} |"))
        assert row in (ROOT / "README.md").read_text(), row

