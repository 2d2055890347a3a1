"""Session 50's results README (one H200, vLLM 0.33.0) read back from its JSON and logs: the EAGLE-3 pair on Model
Runner V2 at 128 in (rounds 0 and 2, pooled with session 49's round 1) and at 1024 in, c = 8, 32 (one cell a
miss), from one boot kept through a chain of four calls."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from portable_spec_harness.serve_bench import coverage
from results_readback import (ResultsFolder, acceptance_lengths, check_runs_archived, checked_coverage,
                              checked_eagle3_mrv2_chain, checked_issue41_rows, checked_p99_neighbours,
                              compiled_once_after_serving, jit_compiles, kept_chain_budgets, log_time,
                              no_compile_after_boot, server_log, value_span)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
RUN = RESULTS / "2026-12-02-h200-session50"
S49 = "2026-12-02-h200-session49"
PAIR = ("llama8b_eagle3", "designed-partial")
MRV2 = ("mrv2", "ours_mrv2")
E3M128 = ResultsFolder(RUN, RUN / "e3m128")
E3M1K = ResultsFolder(RUN, RUN / "e3m1k832")
CHAIN = [(E3M1K, "call1"), (E3M128, "call1"), (E3M128, "call2"), (E3M1K, "call2")]
"""The calls in the order they ran: the boot call, then three on its servers."""
MISSED = "in1024/greedy/c8"




def test_every_call_ran_612c75c_on_mrv2_with_vllms_speculator_and_one_graph_set():
    servers = checked_eagle3_mrv2_chain(CHAIN, "612c75c", PAIR[1])
    assert servers == 8
    sizes = {v: E3M1K.call_report("call1")["variants"][v]["facts"][0]["mrv2_managers"] for v in MRV2}
    assert sizes["mrv2"] == sizes["ours_mrv2"]
    for variant in MRV2:
        assert "GPU KV cache size: 49,920 tokens" in server_log(E3M1K, "call1", variant)
    assert "saved FlashInfer 0.7.2.post1 as" in E3M1K.console("call1")
    text = E3M1K.folded()
    assert "`612c75c`, `tree_changes` 0 in every call" in text
    assert ("41 FULL graphs each (target 17, draft decode 7, draft prefill 17) in one pool, the same capture sizes and "
            "the same KV cache (49,920 tokens)") in text


def test_one_boot_served_the_whole_chain_under_the_lease_clocks_budgets():
    budgets = kept_chain_budgets(CHAIN, ["/tmp/kA.json", "/tmp/kB.json", "/tmp/kC.json", "/tmp/kD.json"])
    assert budgets == [545, 545, 545, 360]  # each the lane limit less 10 s: the cap 555 thrice, then 370
    assert "the first three serving calls got the cap (555 s), the last 370 s" in E3M1K.folded()


def test_the_calls_rounds_and_stops():
    boot, last = E3M1K.call_report("call1"), E3M1K.call_report("call2")
    assert (boot["rounds_done"], boot["settings"]["first_round"], len(boot["runs"])) == (1, 0, 8)
    assert boot["stopped_because"] == "--budget-s 545 would be passed" and boot["status"] == "incomplete"
    assert (last["rounds_done"], last["settings"]["first_round"], len(last["runs"])) == (2, 1, 16)
    assert last["status"] == "complete" and last["workload"]["num_prompts"] == boot["workload"]["num_prompts"]
    for call, first in (("call1", 0), ("call2", 2)):
        report = E3M128.call_report(call)
        assert (report["rounds_done"], report["settings"]["first_round"], report["status"]) == (1, first, "complete")
        assert report["sizing_from_pools"] == {"pools": True, "differs": []}
        assert report["workload"]["num_prompts"] == E3M128.summary()["pairs"][PAIR[0]][PAIR[1]]["workload"][
            "num_prompts"]
    build = server_log(E3M1K, "call1", "ours_mrv2").splitlines()
    start = next(i for i, line in enumerate(build) if "Building JIT module sampling" in line)
    assert "04:15:52" in build[start] and log_time(build[start + 1]) == log_time(" 04:17:29 ")
    assert '"Building JIT module sampling" at\n  04:15:52, the next line at 04:17:29' in E3M1K.readme()


def pooled(folder: ResultsFolder, calls: tuple[str, ...], sessions: list[str]) -> tuple[dict, dict]:
    """A pool's cells (variant -> cell key -> cell) and ours_mrv2 over mrv2 per cell: vLLM 0.33.0, three rounds in
    every cell from ``calls`` of the results folders ``sessions``, nothing left short."""
    summary, entry = folder.pooled_entry(*PAIR, "0.33.0", calls)
    assert [Path(p).parts[2] for p in entry["sources"]] == sessions
    assert entry["rounds"] == 3 and summary["problems"] == [] and len(summary["made_up"]) == 1
    return entry["cells"], summary["ours_mrv2_over_mrv2"][PAIR[0]][PAIR[1]]


def runs_of(cells: dict, field: str) -> list[float]:
    return [x for by_cell in cells.values() for cell in by_cell.values() for x in cell[field]["all"]]


def test_the_128_token_rows_pool_three_rounds_and_meet_the_mrv2_target():
    cells, ratios = pooled(E3M128, ("call2", "call1", "call2"), [S49, RUN.name, RUN.name])
    tok, _, rounds = checked_issue41_rows(E3M128, cells, ratios, 128, (1, 2, 8, 32), rounds=3, variants=MRV2,
                                          title="## Issue 41: the EAGLE-3 pair on MRV2 at 128 in")
    assert len(rounds) == 24 and min(tok) >= 0.97
    text = E3M128.folded()
    assert f"in all eight cells ({value_span(tok, 3)}, ratio of the medians; sampled c=2 at {min(tok):.4f}" in text
    assert min(tok) == ratios["in128/sampled/c2"]["output_tok_s"]
    assert f"every run ({value_span(acceptance_lengths(cells))})" in text
    assert f"Every timed run lasted {min(runs_of(cells, 'duration')):.2f} s or more; no stall" in text
    assert not any(runs_of(cells, "stall_total_ms")) and len(runs_of(cells, "duration")) == 48
    greedy, sampled = ([o / u for o, u in zip(*(cells[v][f"in128/{s}/c32"]["output_throughput"]["all"] for v in
                                                 ("ours_mrv2", "mrv2")))] for s in ("greedy", "sampled"))
    assert (round(greedy[0], 3), round(sampled[0], 3)) == (1.202, 0.946)  # session 49's round, the pool's first
    assert round(max(greedy), 3) == 1.202 and round(min(sampled), 3) == 0.946
    assert "Session 49's one round (1.202 greedy and 0.946 sampled at c=32)" in text


def test_the_1024_token_rows_and_the_miss():
    cells, ratios = pooled(E3M1K, ("call1", "call2"), [RUN.name, RUN.name])
    tok, _, rounds = checked_issue41_rows(E3M1K, cells, ratios, 1024, (8, 32), rounds=3, variants=MRV2,
                                          title="## Issue 41: the EAGLE-3 pair on MRV2 at 1024 in")
    assert len(rounds) == 12
    met = [r for r in tok if r >= 0.97]
    assert [r < 0.97 for r in tok] == [True, False, False, False] and ratios[MISSED]["output_tok_s"] == tok[0]
    text = E3M1K.folded()
    assert f"three of the four cells ({value_span(met, 3)})" in text
    paired = ratios[MISSED]["paired_output_tok_s"]
    base, ours = (cells[v][MISSED]["output_throughput"]["all"] for v in MRV2)
    assert (f"**greedy c=8 misses at {tok[0]:.3f}** (paired {paired['median']:.3f} [{paired['interval'][0]:.3f}, "
            f"{paired['interval'][1]:.3f}]: mrv2's three rounds {base[0]:.1f}, {base[1]:.1f} and {base[2]:.1f} tok/s, "
            f"ours_mrv2's {ours[0]:.1f}, {ours[1]:.1f} and {ours[2]:.1f})") in text
    spreads = round_spreads(cells)
    assert min(spreads) > 100 * (1 - statistics.median(ours) / statistics.median(base)) > 0
    assert (f"gave {ratios['in1024/sampled/c8']['output_tok_s']:.3f} sampled at c=8 minutes apart, and each server's "
            f"own three greedy c=8 rounds spread by {spreads[0]:.1f}% (mrv2) and {spreads[1]:.1f}% (ours_mrv2)") in text
    assert f"every run ({value_span(acceptance_lengths(cells))})" in text
    assert f"lasted {min(runs_of(cells, 'duration')):.2f} s or more" in text
    stalls = {c: [s for v in MRV2 for k, cell in cells[v].items() if k.endswith(f"/c{c}")
                  for s in cell["stall_total_ms"]["all"]] for c in (8, 32)}
    assert len(stalls[8]) == len(stalls[32]) == 12 and min(stalls[8]) > 0
    assert (f"at c=8 ({value_span(stalls[8], 0)} ms), {value_span([s / 1000 for s in stalls[32]], 1)} s summed "
            "at c=32") in text


def round_spreads(cells: dict) -> list[float]:
    """How far each server's own three rounds in the missed cell spread (% of its slowest), mrv2 first."""
    return [100 * (max(r) - min(r)) / min(r) for r in (cells[v][MISSED]["output_throughput"]["all"] for v in MRV2)]


def test_no_compile_after_boot_on_ours_mrv2_and_mrv2s_one_compile():
    assert no_compile_after_boot(E3M128, ("call1", "call2"), ("ours_mrv2",)) == 2
    assert no_compile_after_boot(E3M1K, ("call1", "call2"), ("ours_mrv2",)) == 2
    for folder, call in CHAIN:
        log = folder.bench / call / "serve-bench" / "server_mrv2.log.gz"
        assert jit_compiles(log) == ["_gumbel_sample_kernel"], call
    compiled_once_after_serving(E3M1K, "call1", "mrv2", "_gumbel_sample_kernel")  # in call 1's warm runs


def test_issue_41s_coverage_counts_the_mrv2_cells():
    rows = checked_coverage(coverage.ISSUE_41, RESULTS, ROOT, (RUN.name, S49), E3M1K.folded(), (120, 86, 83, 74),
                            (*PAIR, "mrv2"))
    counted = {c["cell"]: c for c in rows if c["counted"]}
    new = {k for k, c in counted.items() if any(m["summary"].startswith(f"bench/results/{RUN.name}/")
                                                for m in c["measurements"] if m["counted"])}
    assert new == {f"in128/{s}/c{c}" for s in ("greedy", "sampled") for c in (1, 2, 8, 32)} | {
        f"in1024/{s}/c{c}" for s in ("greedy", "sampled") for c in (8, 32)}
    assert [k for k in new if not counted[k]["meets"]] == [MISSED]
    report = coverage.coverage(coverage.ISSUE_41, RESULTS, ROOT, as_of=RUN.name)
    misses = [(c["pair"], c["baseline"], c["cell"]) for c in report["cells"] if c["counted"] and not c["meets"]]
    assert misses == [(PAIR[0], "upstream_v1", "in4096/sampled/c8"), (PAIR[0], "mrv2", MISSED),
                      ("qwen3moe30b_eagle3", "upstream_v1", "in4096/sampled/c8")]
    aside = {a["summary"]: a["why"] for a in report["set_aside"]}
    why = aside[f"bench/results/{S49}/e3m128/pooled/serve_bench_summary.json"]
    assert why.startswith(f"superseded by bench/results/{RUN.name}/e3m128/pooled")
    table = coverage.markdown(report, coverage.TABLES["issue41"])
    readme = (ROOT / "README.md").read_text()
    for length, sampling in ((128, "greedy"), (128, "sampled"), (1024, "greedy"), (1024, "sampled")):
        row = next(line for line in table.splitlines() if line.startswith(
            f"| {PAIR[0]} | {PAIR[1]} | ours on vLLM's pick (MRV2) / mrv2 | {length} | {sampling} |"))
        assert "(" not in row.split(f"| {sampling} |")[1] and "–" not in row, row
        if (length, sampling) == (1024, "greedy"):  # a later session measured the missed cell again: "0.94!/..."
            row = row.split("| 0.94! |")[0] + "| 0.94!/"
        assert row in readme, row
    assert "| 0.94! |" in table


def test_the_main_readme_gives_the_mrv2_rows_and_the_miss():
    readme = " ".join((ROOT / "README.md").read_text().split())
    ratios = {**E3M128.summary()["ours_mrv2_over_mrv2"][PAIR[0]][PAIR[1]],
              **E3M1K.summary()["ours_mrv2_over_mrv2"][PAIR[0]][PAIR[1]]}

    def said(length: int, sampling: str, cs: tuple[int, ...]) -> str:
        return " / ".join(f"{ratios[f'in{length}/{sampling}/c{c}']['output_tok_s']:.2f}" for c in cs)

    assert (f"at 128 in, c = 1 / 2 / 8 / 32, {said(128, 'greedy', (1, 2, 8, 32))} greedy and "
            f"{said(128, 'sampled', (1, 2, 8, 32))} sampled over 3 rounds, and at 1024 in, c = 8 / 32, "
            f"{said(1024, 'greedy', (8, 32))} greedy and {said(1024, 'sampled', (8, 32))} sampled") in readme
    paired = ratios[MISSED]["paired_output_tok_s"]
    assert (f"misses the 0.97× target at {ratios[MISSED]['output_tok_s']:.3f}× (paired {paired['median']:.3f} "
            f"[{paired['interval'][0]:.3f}, {paired['interval'][1]:.3f}])") in readme
    spreads = round_spreads(E3M1K.summary()["pairs"][PAIR[0]][PAIR[1]]["cells"])
    assert (f"spread wider (by {spreads[0]:.1f}% and {spreads[1]:.1f}%) than the gap between their medians and the "
            f"same two servers gave {ratios['in1024/sampled/c8']['output_tok_s']:.3f}× sampled") in readme


@pytest.mark.parametrize("folder,call", CHAIN)
def test_every_runs_folder_here_is_one_archive(folder, call):
    check_runs_archived(folder, call)


def test_each_runs_p99_neighbours_bracket_its_p99_itl():
    assert checked_p99_neighbours(CHAIN) == 56
