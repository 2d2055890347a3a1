"""Session 31's GPU results (one H200, vLLM 0.33.0, Model Runner V2) as its README states them, read back from the
committed JSON and logs: the draft model's 1024-token serving table pooled over three calls (rounds per cell as
stated), ours' replays, no compile after boot, and the c=1 phase clock (ours' step against its summed kernel time).
A changed number in the README or in a JSON fails."""

from __future__ import annotations

from pathlib import Path

from results_readback import ResultsFolder, jit_compiles, pooled_row, table

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "bench" / "results" / "2026-11-29-h200-session31"
DM = RUN / "dm1k033"
PAIR, MODE = "llama8b_draft1b", "designed-partial"
CONCURRENCY = (1, 2, 8, 32)
COMMIT = "0164ce2"
CALLS = ("call1", "call2", "call3")


FOLDER = ResultsFolder(RUN, DM)
readme, folded, call_report, summary = FOLDER.readme, FOLDER.folded, FOLDER.call_report, FOLDER.summary


def test_every_call_ran_this_sessions_code_on_vllm_0_33_mrv2_with_async_scheduling():
    seen = 0
    for folder in ("phase_clock", *CALLS):
        report = call_report(folder)
        assert report["vllm"] == "0.33.0" and report["commit"].startswith(COMMIT) and report["tree_changes"] == 0
        assert report["device"] == "NVIDIA H200" and sorted(report["variants"]) == ["mrv2", "ours_mrv2"]
        assert report["async_scheduling"]["per_variant"] == {"mrv2": True, "ours_mrv2": True}
        for variant, info in report["variants"].items():
            assert info["facts"] and all(f["runner_kind"] == "mrv2" for f in info["facts"]), (folder, variant)
            seen += 1
    assert seen == 8


def test_the_table_prints_the_pooled_numbers_with_the_rounds_each_cell_has():
    s, entry = FOLDER.pooled_entry(PAIR, MODE, "0.33.0", CALLS)
    cells, ratios = entry["cells"], s["ours_mrv2_over_mrv2"][PAIR][MODE]
    rows = table(readme(), "| c | MRV2 | ours |")
    assert sorted(rows, key=int) == [str(c) for c in CONCURRENCY]
    per_round = []
    for c in CONCURRENCY:
        key = f"in1024/greedy/c{c}"
        mrv2, ours = cells["mrv2"][key], cells["ours_mrv2"][key]
        assert rows[str(c)] == pooled_row(mrv2, ours, ratios[key]), c
        assert mrv2["runs"] == ours["runs"] == (2 if c <= 2 else 3) and ours["failed"] == mrv2["failed"] == 0, c
        rounds = [o / m for o, m in zip(ours["output_throughput"]["all"], mrv2["output_throughput"]["all"])]
        per_round.append(f"c={c} " + ", ".join(f"{r:.3f}" for r in rounds))
        assert min(rounds) > 2.0, c  # ahead of vLLM's eager speculator in every round
    assert "Ours / MRV2 per round: " + "; ".join(per_round) + "." in folded()
    durations = {v: min(x for c in cells[v].values() for x in c["duration"]["all"]) for v in ("mrv2", "ours_mrv2")}
    assert (f"Every timed run lasted {durations['ours_mrv2']:.2f} s or more** (ours' shortest; MRV2's "
            f"{durations['mrv2']:.2f} s or more)") in folded()


def test_the_calls_stop_where_the_readme_says():
    assert call_report("phase_clock")["rounds_done"] == 0 and call_report("phase_clock")["phases_s"]["boot_s"] == 252.4
    assert "the first boot on a fresh host took 252 s" in folded()
    one = call_report("call1")
    assert one["rounds_done"] == 1 and one["rounds_asked"] == 2 and len(one["problems"]) == 1
    for folder in ("call2", "call3"):
        assert call_report(folder)["rounds_done"] == 1 and call_report(folder)["problems"] == []
    assert call_report("call3")["workload"]["concurrency"] == [8, 32]


def test_no_compile_after_boot_and_ours_replayed_its_graphs():
    for folder in CALLS:
        report = call_report(folder)
        for variant in ("mrv2", "ours_mrv2"):
            assert report["variants"][variant]["jit_after_boot"] == [], (folder, variant)
            assert jit_compiles(DM / folder / "serve-bench" / f"server_{variant}.log.gz") == [], (folder, variant)
    facts = {f["when"]: f for f in call_report("call2")["variants"]["ours_mrv2"]["facts"]}
    before, after = facts["before"], facts["after"]
    decode = sum(after["speculator_replays"].values()) - sum(before["speculator_replays"].values())
    step0 = sum(after["speculator_prefill_replays"].values()) - sum(before["speculator_prefill_replays"].values())
    eager = after["speculator_eager_prefills"] - before["speculator_eager_prefills"]
    assert after["speculator_eager_loops"] == before["speculator_eager_loops"]
    assert decode > 0 and step0 > 0
    assert (f"{decode:,} decode-step graphs and {step0:,} step-0 graphs, against {eager} eager step-0 passes"
            in folded())


def test_the_phase_clock_table_and_ours_step_within_1_1x_of_its_kernel_time():
    clocks = call_report("phase_clock")["phase_clock_c1"]
    rows = table(readme(), "| | MRV2 (vLLM's eager speculator) |")
    for variant, column in (("mrv2", 0), ("ours_mrv2", 1)):
        clock, profile, split = clocks[variant]["clock"], clocks[variant]["profile"], clocks[variant]["split"]
        assert clocks[variant]["cell"] == "in1024/greedy/c1"
        assert rows["step, ms of wall (unprofiled pass, 243 steps)"][column] == f"{clock['step_wall_ms']:.3f}"
        assert clock["steps"] == 243 and profile["steps"] == 29
        assert rows["summed kernel time per step, ms (profiled pass, 29 steps)"][column] == \
            f"{profile['device_ms']:.3f}"
        ratio = clock["step_wall_ms"] / profile["device_ms"]
        assert rows["step / summed kernel time"][column].strip("*") == f"{ratio:.2f}"
        assert rows["launches per step"][column] == f"{split['launches_per_step']:.2f}"
        phases = clock["phases"]
        assert rows["drafter first pass, host ms per step (unprofiled)"][column] == \
            f"{phases['draft_first']['wall_ms']:.3f}"
        assert rows["drafter chain steps, host ms per step (unprofiled)"][column] == \
            f"{phases['draft_chain']['wall_ms']:.3f}"
    ours = clocks["ours_mrv2"]
    assert ours["clock"]["step_wall_ms"] / ours["profile"]["device_ms"] <= 1.10  # issue 39's c=1 target
    wait = ours["clock"]["phases"]["host_wait"]
    assert rows["host waiting for the sampled tokens, ms per step"][1] == \
        f"{wait['wall_ms']:.3f} ({wait['off_cpu_ms']:.3f} off-CPU)"
    details = ours["clock"]["details"]
    assert f"engine step's CPU time here: {details['engine EngineCoreProc._process_engine_step']['cpu_ms']:.3f} ms" \
        in folded()
    for scope in ("prepare_step", "prepare_prefill", "prepare_decode", "replay"):
        d = details[f"ours mrv2 {scope}"]
        assert f"`{scope}` {d['wall_ms']:.3f} / {d['calls_per_step']:.2f}" in folded(), scope
    gaps = ours["profile"]["device_gaps"]
    assert (f"ours {gaps['gap_ms']['under_5us']:.3f} in gaps under 5 µs ({gaps['gaps']['under_5us']:.0f} of them), "
            f"{gaps['gap_ms']['5_to_100us']:.3f} in 5–100 µs gaps ({gaps['gaps']['5_to_100us']:.1f}), "
            f"{gaps['gap_ms']['100us_up']:.3f} in gaps of 100 µs or more ({gaps['gaps']['100us_up']:.1f}), over a "
            f"span of {gaps['span_ms']:.3f} ms for {gaps['busy_ms']:.3f} ms busy") in folded()
