"""Session 51's results README (one H200, vLLM 0.33.0) read back from its JSON and logs: the EAGLE-3 pair on Model
Runner V2 at 4096 in (greedy and sampled, three rounds each) and session 50's missed cell (1024 in, greedy, c=8)
over three more rounds with the phase clock, from one boot kept through a chain of four calls."""

from __future__ import annotations

from pathlib import Path

import pytest

from portable_spec_harness.serve_bench import coverage
from results_readback import (ResultsFolder, acceptance_lengths, check_flashinfer_cache_restored, check_runs_archived,
                              checked_coverage, checked_eagle3_mrv2_chain, checked_issue41_rows, checked_p99_neighbours,
                              checked_pooled_cell, compiled_once_after_serving, jit_compiles, kept_chain_budgets,
                              merged_pools, no_compile_after_boot, rows_by_c, server_log, value_span)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
RUN = RESULTS / "2026-12-02-h200-session51"
S50 = "2026-12-02-h200-session50"
PAIR = ("llama8b_eagle3", "designed-partial")
MRV2 = ("mrv2", "ours_mrv2")
GREEDY = ResultsFolder(RUN, RUN / "e3m4kg")
SAMPLED = ResultsFolder(RUN, RUN / "e3m4ks")
CLOCKED = ResultsFolder(RUN, RUN / "e3clk")
CHAIN = [(GREEDY, "call1"), (GREEDY, "call2"), (SAMPLED, "call1"), (CLOCKED, "call1")]
"""The calls in the order they ran: the boot call, then three on its servers."""
MISSED = "in1024/greedy/c8"
MAX_MODEL_LEN = 4304
"""4096 in + 128 out, as the benchmark sizes ``--max-model-len`` for 4096-token prompts."""


def test_every_call_ran_2098ef1_on_mrv2_with_vllms_speculator_and_one_graph_set():
    servers = checked_eagle3_mrv2_chain(CHAIN, "2098ef1", PAIR[1], MAX_MODEL_LEN)
    assert servers == 8
    sizes = {v: GREEDY.call_report("call1")["variants"][v]["facts"][0]["mrv2_managers"] for v in MRV2}
    assert sizes["mrv2"] == sizes["ours_mrv2"]
    for variant in MRV2:
        assert "GPU KV cache size: 172,800 tokens" in server_log(GREEDY, "call1", variant)
    check_flashinfer_cache_restored(GREEDY, "call1", MRV2)
    boot = max(info["boots"][0]["seconds"] for info in GREEDY.call_report("call1")["variants"].values())
    text = GREEDY.folded()
    assert f"so no boot built it: the boot took {boot:.1f} s" in text
    assert "`2098ef1`, `tree_changes` 0 in every call" in text
    assert ("41 FULL graphs each (target 17, draft decode 7, draft prefill 17) in one pool, the same capture sizes and "
            "the same KV cache (172,800 tokens)") in text
    assert f"(`--max-model-len {MAX_MODEL_LEN}`, 32 sequences)" in text


def test_one_boot_served_the_whole_chain_under_the_lease_clocks_budgets():
    budgets = kept_chain_budgets(CHAIN, ["/tmp/kA.json", "/tmp/kB.json", "/tmp/kC.json", None])
    assert budgets == [545, 545, 545, 387]  # each the lane limit less 10 s: the cap 555 thrice, then 397
    assert "the first three serving calls got the cap (555 s), the last 397 s" in GREEDY.folded()


def test_the_calls_rounds_and_stops():
    boot, second = GREEDY.call_report("call1"), GREEDY.call_report("call2")
    assert (boot["rounds_done"], boot["settings"]["first_round"], len(boot["runs"])) == (2, 0, 16)
    assert boot["stopped_because"] == "--budget-s 545 would be passed" and boot["status"] == "incomplete"
    assert (second["rounds_done"], second["settings"]["first_round"], len(second["runs"])) == (1, 2, 8)
    assert second["status"] == "complete" and second["workload"]["num_prompts"] == boot["workload"]["num_prompts"]
    assert second["sizing_from_pools"] == {"pools": True, "differs": []}
    sampled, clocked = SAMPLED.call_report("call1"), CLOCKED.call_report("call1")
    assert (sampled["rounds_done"], len(sampled["runs"]), sampled["status"]) == (3, 24, "complete")
    assert (clocked["rounds_done"], len(clocked["runs"]), clocked["status"]) == (3, 6, "complete")
    assert clocked["settings"]["phase_clock"] is True and clocked["settings"]["clock_cell"] == MISSED
    for report in (boot, second, sampled):
        assert report["settings"]["phase_clock"] is False and report["phase_clock"] == {}


def merged_4096_pools() -> tuple[dict, dict]:
    """The greedy and sampled pools' cells (variant -> cell key -> cell) and ratios as one table's: vLLM 0.33.0,
    three rounds in every cell, nothing left short; the greedy pool made up from its two calls."""
    pools = []
    for folder, calls, made_up in ((GREEDY, ("call1", "call2"), 1), (SAMPLED, ("call1",), 0)):
        summary, entry = folder.pooled_entry(*PAIR, "0.33.0", calls)
        assert [Path(p).parts[2] for p in entry["sources"]] == [RUN.name] * len(calls)
        assert entry["rounds"] == 3 and summary["problems"] == [] and len(summary["made_up"]) == made_up
        pools.append((summary, entry))
    cells, ratios = merged_pools(pools, PAIR, "ours_mrv2_over_mrv2", MRV2)
    assert len(ratios) == 8
    return cells, ratios


def test_the_4096_token_rows_pool_three_rounds_and_meet_the_mrv2_target():
    cells, ratios = merged_4096_pools()
    tok, _, rounds = checked_issue41_rows(GREEDY, cells, ratios, 4096, (1, 2, 8, 32), rounds=3, variants=MRV2,
                                          title="## Issue 41: the EAGLE-3 pair on MRV2 at 4096 in")
    assert len(rounds) == 24 and min(tok) >= 0.97
    text = GREEDY.folded()
    assert f"in all eight cells ({value_span(tok, 3)}, ratio of the medians)" in text
    low = min(r["paired_output_tok_s"]["interval"][0] for r in ratios.values())
    assert f"the widest paired interval's low end is {low:.3f}" in text
    assert f"every run ({value_span(acceptance_lengths(cells))})" in text
    durations = [d for by_cell in cells.values() for cell in by_cell.values() for d in cell["duration"]["all"]]
    assert len(durations) == 48 and f"Every timed run lasted {min(durations):.2f} s or more" in text
    stalls = {c: [s for v in MRV2 for k, cell in cells[v].items() if k.endswith(f"/c{c}")
                  for s in cell["stall_total_ms"]["all"]] for c in (1, 2, 8, 32)}
    assert all(len(s) == 12 for s in stalls.values()) and not any(stalls[1] + stalls[2]) and min(stalls[8]) > 0
    assert (f"{value_span([s / 1000 for s in stalls[8]], 1)} s summed per run at c=8, "
            f"{value_span([s / 1000 for s in stalls[32]], 1)} s at c=32") in text


def test_no_compile_after_boot_on_ours_mrv2_and_mrv2s_one_compile_at_its_first_sampled_request():
    assert no_compile_after_boot(GREEDY, ("call1", "call2"), MRV2) == 4  # greedy only: neither compiled
    assert no_compile_after_boot(SAMPLED, ("call1",), ("ours_mrv2",)) == 1
    assert no_compile_after_boot(CLOCKED, ("call1",), ("ours_mrv2",)) == 1
    for folder in (SAMPLED, CLOCKED):  # each call's copy of the log holds the whole log since boot
        assert jit_compiles(folder.bench / "call1" / "serve-bench" / "server_mrv2.log.gz") == ["_gumbel_sample_kernel"]
    compiled_once_after_serving(SAMPLED, "call1", "mrv2", "_gumbel_sample_kernel")
    assert "compiled `_gumbel_sample_kernel` after boot, once, at its first sampled request" in GREEDY.folded()


def clocked_cell() -> tuple[dict, dict]:
    summary, entry = CLOCKED.pooled_entry(*PAIR, "0.33.0", ("call1",))
    assert entry["rounds"] == 3 and summary["problems"] == [] and summary["made_up"] == []
    return entry["cells"], summary["ours_mrv2_over_mrv2"][PAIR[0]][PAIR[1]]


def test_the_missed_cell_measured_again_on_a_second_boot():
    cells, ratios = clocked_cell()
    assert list(ratios) == [MISSED]
    section = CLOCKED.section("## Session 50's missed cell")
    ((_, row),) = rows_by_c(section, "1024").items()
    _, _, per_round = checked_pooled_cell(cells, ratios, MISSED, row, 3, MRV2)
    assert min(per_round) >= 0.97 and ratios[MISSED]["output_tok_s"] >= 0.97
    text = " ".join(section.split())
    assert f"**Per round:** {', '.join(f'{r:.3f}' for r in per_round)}" in text
    assert f"the cell's median {ratios[MISSED]['output_tok_s']:.3f}×" in text
    s50 = ResultsFolder(RESULTS / S50, RESULTS / S50 / "e3m1k832").summary()
    before = s50["ours_mrv2_over_mrv2"][PAIR[0]][PAIR[1]][MISSED]
    paired = before["paired_output_tok_s"]
    assert (f"Session 50 measured this cell at {before['output_tok_s']:.3f}× (paired {paired['median']:.3f} "
            f"[{paired['interval'][0]:.3f}, {paired['interval'][1]:.3f}])") in text
    mrv2_then = s50["pairs"][PAIR[0]][PAIR[1]]["cells"]["mrv2"][MISSED]["output_throughput"]["median"]
    mrv2_now = cells["mrv2"][MISSED]["output_throughput"]["median"]
    assert f"({mrv2_now:,.0f} tok/s for mrv2 here against session 50's {mrv2_then:,.1f})" in text
    then = ResultsFolder(RESULTS / S50, RESULTS / S50 / "e3m1k832")
    for variant in MRV2:
        assert "GPU KV cache size: 49,920 tokens" in server_log(then, "call1", variant)
    assert "a KV cache of 172,800 tokens instead of 49,920" in text


def test_the_phase_clock_finds_the_same_work_per_step_on_both_servers():
    clock = CLOCKED.call_report("call1")["phase_clock"]
    assert sorted(clock) == sorted(MRV2) and all(clock[v]["cell"] == MISSED for v in MRV2)
    walls = {v: clock[v]["clock"]["step_wall_ms"] for v in MRV2}
    steps = {v: clock[v]["clock"]["steps"] for v in MRV2}
    phases = {v: {k: p["wall_ms"] for k, p in clock[v]["clock"]["phases"].items()} for v in MRV2}
    assert set(phases["mrv2"]) == set(phases["ours_mrv2"]) and len(phases["mrv2"]) == 8
    widest = max(abs(phases["mrv2"][k] - phases["ours_mrv2"][k]) for k in phases["mrv2"])
    assert abs(walls["mrv2"] - walls["ours_mrv2"]) < 0.05 * walls["mrv2"] and widest <= 0.34
    busy = {v: clock[v]["profile"]["device_gaps"]["busy_ms"] for v in MRV2}
    launches = {v: clock[v]["split"]["launches_per_step"] for v in MRV2}
    assert launches["mrv2"] == launches["ours_mrv2"] and all(clock[v]["profile"]["runner"] == "mrv2" for v in MRV2)
    text = " ".join(CLOCKED.section("## Session 50's missed cell").split())
    assert (f"**{walls['mrv2']:.3f} ms (mrv2) and {walls['ours_mrv2']:.3f} ms (ours_mrv2)** over {steps['mrv2']} "
            f"and {steps['ours_mrv2']} steps; every phase within 0.34 ms") in text
    pair = {k: f"{phases['mrv2'][k]:.3f} / {phases['ours_mrv2'][k]:.3f}"
            for k in ("target_prep", "verify", "host_wait")}
    assert (f"(target input prep {pair['target_prep']} ms, verification {pair['verify']}, the host's wait for "
            f"sampled tokens {pair['host_wait']})") in text
    assert (f"{busy['mrv2']:.3f} and {busy['ours_mrv2']:.3f} ms busy per step, {launches['mrv2']:.2f} launches per "
            "step on both") in text


def test_issue_41s_coverage_counts_the_4096_cells_and_keeps_the_miss():
    rows = checked_coverage(coverage.ISSUE_41, RESULTS, ROOT, (RUN.name, S50), GREEDY.folded(), (120, 94, 91, 86),
                            (*PAIR, "mrv2"))
    counted = {c["cell"]: c for c in rows if c["counted"]}
    new = {k for k, c in counted.items() if any(m["summary"].startswith(f"bench/results/{RUN.name}/")
                                                for m in c["measurements"] if m["counted"])}
    assert new == {f"in4096/{s}/c{c}" for s in ("greedy", "sampled") for c in (1, 2, 8, 32)} | {MISSED}
    assert [k for k in new if not counted[k]["meets"]] == [MISSED]
    missed = [m for m in counted[MISSED]["measurements"] if m["counted"]]
    assert [m["summary"].split("/")[2] for m in missed] == [S50, RUN.name]
    assert [all(m["verdicts"].values()) for m in missed] == [False, True]
    report = coverage.coverage(coverage.ISSUE_41, RESULTS, ROOT, as_of=RUN.name)
    misses = [(c["pair"], c["baseline"], c["cell"]) for c in report["cells"] if c["counted"] and not c["meets"]]
    assert misses == [(PAIR[0], "upstream_v1", "in4096/sampled/c8"), (PAIR[0], "mrv2", MISSED),
                      ("qwen3moe30b_eagle3", "upstream_v1", "in4096/sampled/c8")]
    table = coverage.markdown(report, coverage.TABLES["issue41"])
    readme = (ROOT / "README.md").read_text()
    for length, sampling in ((4096, "greedy"), (4096, "sampled"), (1024, "greedy")):
        row = next(line for line in table.splitlines() if line.startswith(
            f"| {PAIR[0]} | {PAIR[1]} | ours on vLLM's pick (MRV2) / mrv2 | {length} | {sampling} |"))
        assert "(" not in row.split(f"| {sampling} |")[1] and "–" not in row and row in readme, row
    assert "| 0.94!/1.00 |" in table and "`0.94!/1.00`" in GREEDY.readme()


def test_the_main_readme_gives_the_4096_rows_and_the_second_boot():
    readme = " ".join((ROOT / "README.md").read_text().split())
    _, ratios = merged_4096_pools()

    def said(sampling: str) -> str:
        return " / ".join(f"{ratios[f'in4096/{sampling}/c{c}']['output_tok_s']:.2f}" for c in (1, 2, 8, 32))

    assert (f"at 4096 in, c = 1 / 2 / 8 / 32, ours / MRV2 is {said('greedy')} greedy and {said('sampled')} sampled "
            "over 3 rounds ([results](bench/results/2026-12-02-h200-session51/README.md))") in readme
    _, clocked = clocked_cell()
    paired = clocked[MISSED]["paired_output_tok_s"]
    assert (f"that cell gave {clocked[MISSED]['output_tok_s']:.3f}× over three more rounds (paired "
            f"{paired['median']:.3f} [{paired['interval'][0]:.3f}, {paired['interval'][1]:.3f}])") in readme
    clock = CLOCKED.call_report("call1")["phase_clock"]
    assert (f"({clock['mrv2']['clock']['step_wall_ms']:.3f} and {clock['ours_mrv2']['clock']['step_wall_ms']:.3f} ms "
            f"of engine time per step, {clock['mrv2']['split']['launches_per_step']:.2f} launches each)") in readme


@pytest.mark.parametrize("folder,call", CHAIN)
def test_every_runs_folder_here_is_one_archive(folder, call):
    check_runs_archived(folder, call)


def test_each_runs_p99_neighbours_bracket_its_p99_itl():
    assert checked_p99_neighbours(CHAIN) == 54
