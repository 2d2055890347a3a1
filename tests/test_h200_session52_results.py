"""Session 52's results README (one H200, vLLM 0.26.0) read back from its JSON, logs and client files: the MoE pair's
4096-token cells at c=32 over three rounds in turn (two calls, four boots; both cells a miss) and session 49's missed
cell (4096 in, sampled, c=8) once more with the phase clock."""

from __future__ import annotations

import json
import tarfile
from datetime import datetime
from pathlib import Path

import pytest

from portable_spec_harness.serve_bench import coverage
from results_readback import (EAGLE_DRAFTERS, ResultsFolder, check_draft_v1_call, check_runs_archived,
                              check_triton_keys_logged, checked_coverage, checked_issue41_rows, checked_p99_neighbours,
                              compile_to_kv_gap, jit_compiles, log_time, no_compile_after_boot, server_log, value_span)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
RUN = RESULTS / "2026-12-02-h200-session52"
S49 = RESULTS / "2026-12-02-h200-session49"
S51 = "2026-12-02-h200-session51"
PAIR = ("qwen3moe30b_eagle3", "dummy")
VARIANTS = ("upstream_v1", "ours")
C32 = ResultsFolder(RUN, RUN / "moe4k32")
CLOCKED = ResultsFolder(RUN, RUN / "moeclk")
CALLS = [(CLOCKED, "call1"), (C32, "call1"), (C32, "call2")]
"""The serving calls in the order they ran."""
MISSED = "in4096/sampled/c8"
CELLS = ("in4096/greedy/c32", "in4096/sampled/c32")
UPSTREAM_EAGLE = ("eagle_prepare_next_token_padded_kernel", "eagle_step_slot_mapping_metadata_kernel",
                  "rejection_greedy_sample_kernel", "eagle_prepare_inputs_padded_kernel")


def c32_pool() -> tuple[dict, dict]:
    """The c=32 pool's cells (variant -> cell key -> cell) and ours over upstream V1, checked to pool both calls."""
    summary, entry = C32.pooled_entry(*PAIR, "0.26.0", ("call1", "call2"))
    assert entry["rounds"] == 3 and summary["problems"] == [] and len(summary["made_up"]) == 1
    return entry["cells"], summary["ours_over_upstream_v1"][PAIR[0]][PAIR[1]]


def run_file(call: str, name: str) -> dict:
    """One client run's saved result from a call's ``runs.tar.gz``."""
    with tarfile.open(C32.bench / call / "serve-bench" / "runs.tar.gz") as runs:
        return json.load(runs.extractfile(f"runs/{name}.json"))


def run_window(call: str, name: str) -> tuple[int, int]:
    """When a client run started and ended (seconds of the day): vLLM's bench stamps its result when the run is over
    (``date``), and the run lasted ``duration`` seconds."""
    saved = run_file(call, name)
    end = datetime.strptime(saved["date"], "%Y%m%d-%H%M%S")
    end_s = end.hour * 3600 + end.minute * 60 + end.second
    return end_s - int(saved["duration"]) - 1, end_s


def test_every_call_ran_f724e45_on_the_v1_runner_with_the_drafter_it_names():
    servers = sum(check_draft_v1_call(folder.call_report(call), call, "f724e45", "dummy", drafters=EAGLE_DRAFTERS)
                  for folder, call in CALLS)
    assert servers == 6
    modes = [folder.call_report(call)["placement"]["mode"] for folder, call in CALLS]
    assert modes == ["together", "in_turn", "in_turn"]
    for folder, call in CALLS:
        report = folder.call_report(call)
        assert report["pair"]["name"] == PAIR[0] and report["workload"]["max_model_len"] == 4304, call
        check_triton_keys_logged(report, call)
        assert report["short_runs"] == [], call
        assert "saved FlashInfer 0.6.14 as" in folder.console(call)  # each call, before jit_cache.sh's fix
    seqs = [folder.call_report(call)["workload"]["max_num_seqs"] for folder, call in CALLS]
    kv = [folder.call_report(call)["placement"]["kv_cache_gib"] for folder, call in CALLS]
    assert seqs == [8, 32, 32] and kv == [4.037, 16.15, 16.15]
    text = C32.folded()
    assert "`f724e45`, `tree_changes` 0 in every call" in text
    assert "(session 48's shape: `--max-model-len 4304`, KV cache 4.04 GiB each)" in text
    assert "(one server at a time, 32 sequences, `--max-model-len 4304`, KV cache 16.15 GiB)" in text


def test_the_chain_boots_four_times_for_three_rounds_under_the_lease_clocks_budgets():
    clock, first, second = (folder.call_report(call) for folder, call in CALLS)
    assert [r["settings"]["budget_s"] for r in (clock, first, second)] == [545, 545, 545]
    assert [(r["rounds_done"], r["settings"]["first_round"]) for r in (clock, first, second)] == [(1, 0), (1, 0),
                                                                                                (2, 1)]
    for report in (clock, first):
        assert report["stopped_because"] == "--budget-s 545 would be passed"
    assert first["kept_servers"] == {"registry": "/tmp/kA.json", "variants": ["ours"]}
    assert second["kept_servers"] == {"registry": "/tmp/kB.json", "variants": ["ours"]}  # round 2's last server
    adopted, booted = second["variants"]["ours"]["boots"]
    assert adopted["seconds"] == 0.0 and adopted["reused"]["registry"] == "/tmp/kA.json"
    assert adopted["reused"]["first_boot"]["seconds"] == first["variants"]["ours"]["boots"][0]["seconds"]
    (upstream,) = second["variants"]["upstream_v1"]["boots"]
    assert second["in_turn_carried"] == [{"round": 2, "variant": "upstream_v1"}]
    assert [w["why"] for w in second["warm_skipped"]].count("the round before's last server, carried into this "
                                                             "round: it ran this cell's timed runs just now, with "
                                                             "the prompts fixed then") == 2
    boots = {v: first["variants"][v]["boots"][0]["seconds"] for v in VARIANTS}
    text = C32.folded()
    assert (f"upstream V1 {boots['upstream_v1']:.1f} s and ours {boots['ours']:.1f} s in call 1 (compile caches from "
            f"`moeclk`'s boot), {upstream['seconds']:.1f} s and {booted['seconds']:.1f} s in call 2") in text
    assert "each serving call got the cap (555 s, a budget of 545 s)" in text


def test_the_c32_rows_pool_three_rounds_and_both_miss():
    cells, ratios = c32_pool()
    tok, itl, rounds = checked_issue41_rows(C32, cells, ratios, 4096, (32,), rounds=3,
                                            title="## Issue 41: the MoE pair at 4096 in, c=32")
    assert all(r < 1.0 for r in tok) and max(itl) <= 1.25 and len(rounds) == 6
    assert min(rounds) < 1.0 < max(rounds)  # either side of parity
    text = C32.folded()
    greedy, sampled = (ratios[k] for k in CELLS)
    assert (f"greedy at {greedy['output_tok_s']:.3f} and sampled at {sampled['output_tok_s']:.3f} (ratio of the "
            f"medians; the greedy paired interval [{greedy['paired_output_tok_s']['interval'][0]:.3f}, "
            f"{greedy['paired_output_tok_s']['interval'][1]:.3f}] holds 1.0, the sampled one "
            f"[{sampled['paired_output_tok_s']['interval'][0]:.3f}, "
            f"{sampled['paired_output_tok_s']['interval'][1]:.3f}] too)") in text
    assert all(r["paired_output_tok_s"]["interval"][0] <= 1.0 <= r["paired_output_tok_s"]["interval"][1]
               for r in (greedy, sampled))
    assert f"in both ({itl[0]:.3f} and {itl[1]:.3f} pooled)" in text
    lengths = {a for v in cells.values() for k in CELLS for a in v[k]["spec_decode_acceptance_length"]["all"]}
    durations = [d for v in cells.values() for k in CELLS for d in v[k]["duration"]["all"]]
    stalls = [s / 1000 for v in cells.values() for k in CELLS for s in v[k]["stall_total_ms"]["all"]]
    assert lengths == {1.0} and len(durations) == 12 and len(stalls) == 12
    assert f"Every timed run lasted {min(durations):.2f} s or more" in text
    assert f"summing to {value_span(stalls, 1)} s per run on both servers" in text
    up, ours = (cells[v]["in4096/greedy/c32"]["output_throughput"]["all"] for v in VARIANTS)
    ours_s = cells["ours"]["in4096/sampled/c32"]["output_throughput"]["all"]
    assert f"(upstream V1 {value_span(up, 1)} tok/s greedy, ours {value_span(ours_s, 1)} sampled)" in text
    assert f"upstream V1's greedy rounds were {up[1]:.1f} and {up[2]:.1f} tok/s" in text


def test_sampled_ours_is_slower_per_token_and_later_to_start_greedy_earlier():
    cells, _ = c32_pool()

    def per_round(variant: str, key: str, field: str) -> list[float]:
        return cells[variant][key][field]["all"]

    key = "in4096/sampled/c32"
    tpot = [per_round(v, key, "median_tpot_ms") for v in VARIANTS]
    ttft = [per_round(v, key, "median_ttft_ms") for v in VARIANTS]
    assert all(o > u for u, o in zip(*tpot)) and all(o > u for u, o in zip(*ttft))
    text = C32.folded()
    assert (f"ours' median TPOT was the higher in all three rounds ({', '.join(f'{x:.2f}' for x in tpot[1])} "
            f"against {', '.join(f'{x:.2f}' for x in tpot[0])} ms) and so was its median time to first token "
            f"({', '.join(f'{x:.1f}' for x in ttft[1])} against {', '.join(f'{x:.1f}' for x in ttft[0])} ms)") in text
    greedy = [per_round(v, "in4096/greedy/c32", "median_ttft_ms") for v in VARIANTS]
    assert all(o < u for u, o in zip(*greedy))
    assert "greedy, ours' median time to first token was the lower in all three" in text
    assert "**The phase clock was not run at c=32**" in text
    assert all(folder.call_report(call)["phase_clock"] == {} for folder, call in CALLS[1:])


def test_upstream_compiled_its_moe_kernel_inside_its_first_greedy_timed_run():
    log = server_log(C32, "call1", "upstream_v1").splitlines()
    (compiled,) = [line for line in log if "JIT compilation during inference: fused_moe_kernel" in line]
    start, end = run_window("call1", "timed_upstream_v1_in4096_greedy_c32_r0")
    assert start <= log_time(compiled) <= end
    assert " 09:08:31 " in compiled and end == log_time(" 09:08:39 ")
    duration = run_file("call1", "timed_upstream_v1_in4096_greedy_c32_r0")["duration"]
    assert f"inside the run that ended at 09:08:39 after {duration:.1f} s" in C32.folded()
    # in call 2 its boot's compile came in the warm runs, before the first timed run
    log = server_log(C32, "call2", "upstream_v1").splitlines()
    (compiled,) = [line for line in log if "JIT compilation during inference: fused_moe_kernel" in line]
    assert log_time(compiled) < run_window("call2", "timed_upstream_v1_in4096_greedy_c32_r1")[0]


def test_no_compile_after_boot_on_ours_and_upstreams_compiles():
    assert no_compile_after_boot(CLOCKED, ("call1",), ("ours",)) == 1
    assert no_compile_after_boot(C32, ("call1", "call2"), ("ours",)) == 2
    for call in ("call1", "call2"):
        compiled = jit_compiles(C32.bench / call / "serve-bench" / "server_upstream_v1.log.gz")
        assert sorted(compiled) == sorted([*UPSTREAM_EAGLE, "_topk_topp_kernel", "fused_moe_kernel"]), call
    clocked = jit_compiles(CLOCKED.bench / "call1" / "serve-bench" / "server_upstream_v1.log.gz")
    assert clocked == [UPSTREAM_EAGLE[0], UPSTREAM_EAGLE[1], UPSTREAM_EAGLE[3], "_topk_topp_kernel"]
    for call in ("call1", "call2"):
        assert ("MoE size warm-up: 20 token counts in (256, 8192] (8 experts per token)" in
                server_log(C32, call, "ours") and "(fused_moe_kernel x12)" in server_log(C32, call, "ours"))
    assert "20 token counts in (256, 8192] at boot,\n  12 `fused_moe_kernel` compiles" in C32.readme()


def test_call_2_holds_only_the_round_2_server_of_ours_and_its_verdict_covers_both():
    """The log overwrite this lease found (fixed since): call 2's ``server_ours.log`` is the round-2 boot's, whose
    first line comes after the adopted server's round-1 runs; the report's verdict on ours covers both servers."""
    report = C32.call_report("call2")
    booted = [line for line in server_log(C32, "call2", "ours").splitlines() if "non-default args" in line]
    assert len(booted) == 1 and log_time(booted[0]) > run_window("call2", "timed_ours_in4096_sampled_c32_r1")[1]
    assert [b["log"] for b in report["variants"]["ours"]["boots"]] == ["server_ours.log", "server_ours.log"]
    assert report["variants"]["ours"]["jit_after_boot"] == [] and report["variants"]["ours"]["jit_monitor_active"]
    assert "**The kept server's log is missing from call 2's folder:**" in C32.readme()


@pytest.fixture(scope="module")
def clock() -> dict:
    report = CLOCKED.call_report("call1")
    clocks = report["phase_clock"]
    assert sorted(clocks) == sorted(VARIANTS) and all(clocks[v]["cell"] == MISSED for v in VARIANTS)
    return clocks


def test_the_phase_clock_in_session_49s_missed_cell(clock):
    walls = {v: clock[v]["clock"]["step_wall_ms"] for v in VARIANTS}
    steps = {v: clock[v]["clock"]["steps"] for v in VARIANTS}
    phase = {v: {k: p["wall_ms"] for k, p in clock[v]["clock"]["phases"].items()} for v in VARIANTS}
    drafting = {v: phase[v]["draft_first"] + phase[v]["draft_chain"] for v in VARIANTS}
    waits = {v: clock[v]["clock"]["details"]["v1 _get_valid_sampled_token_count"]["wall_ms"] for v in VARIANTS}
    busy = {v: clock[v]["profile"]["device_gaps"]["busy_ms"] for v in VARIANTS}
    idle = {v: clock[v]["profile"]["device_gaps"]["gap_ms"]["100us_up"] for v in VARIANTS}
    launches = {v: clock[v]["split"]["launches_per_step"] for v in VARIANTS}
    assert walls["ours"] < walls["upstream_v1"] and waits["ours"] > waits["upstream_v1"]
    assert abs(busy["ours"] - busy["upstream_v1"]) < 0.01 * busy["ours"] and launches["ours"] < launches["upstream_v1"]
    assert all(clock[v]["profile"]["runner"] == "v1" for v in VARIANTS) and steps["ours"] == steps["upstream_v1"]
    assert [clock[v]["clock_run"]["num_prompts"] for v in VARIANTS] == [16, 16]
    assert [clock[v]["profile_run"]["num_prompts"] for v in VARIANTS] == [8, 8]
    text = " ".join(CLOCKED.section("## Session 49's missed cell").split())
    assert (f"**{walls['upstream_v1']:.3f} ms (upstream V1) and {walls['ours']:.3f} ms (ours)** over "
            f"{steps['ours']} steps each") in text
    assert (f"Ours spends {drafting['upstream_v1'] - drafting['ours']:.3f} ms less per step drafting on the host "
            f"(first pass {phase['ours']['draft_first']:.3f} against {phase['upstream_v1']['draft_first']:.3f} ms, "
            f"chain steps {phase['ours']['draft_chain']:.3f} against {phase['upstream_v1']['draft_chain']:.3f} ms)") \
        in text
    assert f"(`_get_valid_sampled_token_count` {waits['ours']:.3f} against {waits['upstream_v1']:.3f} ms" in text
    assert (f"{busy['upstream_v1']:.3f} and {busy['ours']:.3f} ms busy per decode step, "
            f"{launches['upstream_v1']:.2f} against {launches['ours']:.2f} launches per step, and idle gaps of "
            f"100 µs or more {idle['upstream_v1']:.3f} against {idle['ours']:.3f} ms per step") in text
    shorter = 1 - walls["ours"] / walls["upstream_v1"]
    assert f"its engine step is {100 * shorter:.1f}% shorter" in text


def test_the_clock_cells_one_round_and_session_49s_rounds():
    summary = CLOCKED.summary()
    entry = summary["pairs"][PAIR[0]][PAIR[1]]
    assert entry["rounds"] == 1 and summary["problems"] == [f"{PAIR[0]} ({PAIR[1]}) 1 of 3 rounds ran (--budget-s "
                                                            "545 would be passed)"]
    up, ours = (entry["cells"][v][MISSED] for v in VARIANTS)
    ratio = summary["ours_over_upstream_v1"][PAIR[0]][PAIR[1]][MISSED]["output_tok_s"]

    def med(cell: dict, field: str) -> float:
        return cell[field]["median"]

    row = (f"| 4096 | 8 | {med(up, 'output_throughput'):.1f} | {med(ours, 'output_throughput'):.1f} | {ratio:.3f} | "
           f"{med(up, 'median_tpot_ms'):.2f} / {med(ours, 'median_tpot_ms'):.2f} | "
           f"{med(up, 'median_ttft_ms'):.1f} / {med(ours, 'median_ttft_ms'):.1f} | "
           f"{med(up, 'p99_itl_ms'):.2f} / {med(ours, 'p99_itl_ms'):.2f} | 1 |")
    assert row in CLOCKED.readme() and ratio > 1.0 and med(ours, "median_ttft_ms") < med(up, "median_ttft_ms")
    s49 = ResultsFolder(S49, S49 / "moe4ks").summary()
    cells = s49["pairs"][PAIR[0]][PAIR[1]]["cells"]
    rounds = [o / u for u, o in zip(*(cells[v][MISSED]["output_throughput"]["all"] for v in VARIANTS))]
    assert ", ".join(f"{r:.3f}" for r in rounds[:2]) + f" and {rounds[2]:.3f}" in CLOCKED.folded()


def test_the_first_boot_built_flashinfers_sampling_module():
    report = CLOCKED.call_report("call1")
    boots = {v: report["variants"][v]["boots"][0]["seconds"] for v in VARIANTS}
    gaps = {v: compile_to_kv_gap(server_log(CLOCKED, "call1", v)) for v in VARIANTS}
    before = compile_to_kv_gap(server_log(ResultsFolder(S49, S49 / "moe4kg"), "call1", "ours"))
    assert gaps == {"upstream_v1": 125, "ours": 124} and before == 14
    assert report["phases_s"]["boot_s"] == boots["ours"] == max(boots.values())
    text = CLOCKED.folded()
    assert (f"upstream V1 {boots['upstream_v1']:.1f} s and ours {boots['ours']:.1f} s, both booting at once; their "
            f"logs pass {gaps['upstream_v1']} and {gaps['ours']} s") in text
    assert f"({before} s in session 49's boot" in text and f"(the boot took {boots['ours']:.1f} s, below)" in text
    assert "jit cache: /tmp/site holds FlashInfer 0.6.14, not 0.7.2.post1" in CLOCKED.console("call1")


def test_issue_41s_coverage_counts_the_c32_cells_as_misses():
    rows = checked_coverage(coverage.ISSUE_41, RESULTS, ROOT, (RUN.name, S51), C32.folded(), (120, 96, 91, 94),
                            (*PAIR, "upstream_v1"))
    counted = {c["cell"]: c for c in rows if c["counted"]}
    new = {k for k, c in counted.items() if any(m["summary"].startswith(f"bench/results/{RUN.name}/")
                                                for m in c["measurements"] if m["counted"])}
    assert new == set(CELLS) and not any(counted[k]["meets"] for k in new)
    shown = [m for m in counted[MISSED]["measurements"] if m["summary"].startswith(f"bench/results/{RUN.name}/")]
    assert [(m["rounds"], m["counted"]) for m in shown] == [(1, False)]  # the clock's round: shown, not counted
    report = coverage.coverage(coverage.ISSUE_41, RESULTS, ROOT, as_of=RUN.name)
    misses = [(c["pair"], c["baseline"], c["cell"]) for c in report["cells"] if c["counted"] and not c["meets"]]
    assert misses == [("llama8b_eagle3", "upstream_v1", "in4096/sampled/c8"),
                      ("llama8b_eagle3", "mrv2", "in1024/greedy/c8"), (PAIR[0], "upstream_v1", "in4096/greedy/c32"),
                      (PAIR[0], "upstream_v1", MISSED), (PAIR[0], "upstream_v1", "in4096/sampled/c32")]
    table = coverage.markdown(report, coverage.TABLES["issue41"])
    readme = (ROOT / "README.md").read_text()
    for sampling, c8 in (("greedy", "1.03"), ("sampled", "1.00!")):
        row = f"| {PAIR[0]} | {PAIR[1]} | ours / upstream_v1 | 4096 | {sampling} |"
        line = next(line for line in table.splitlines() if line.startswith(row))
        assert line.endswith(f"| {c8} | 0.99! | 0.26.0 |") and line in readme, line


def test_the_main_readme_gives_the_c32_cells_and_the_clock():
    readme = " ".join((ROOT / "README.md").read_text().split())
    _, ratios = c32_pool()
    paired = [f"{p['median']:.3f} [{p['interval'][0]:.3f}, {p['interval'][1]:.3f}]"
              for p in (ratios[k]["paired_output_tok_s"] for k in CELLS)]
    assert (f"give 0.99 greedy and 0.99 sampled over 3 rounds ({ratios[CELLS[0]]['output_tok_s']:.3f} and "
            f"{ratios[CELLS[1]]['output_tok_s']:.3f}, paired {paired[0]} and {paired[1]}") in readme
    clock = CLOCKED.call_report("call1")["phase_clock"]
    walls = [f"{clock[v]['clock']['step_wall_ms']:.3f}" for v in ("ours", "upstream_v1")]
    busy = [f"{clock[v]['profile']['device_gaps']['busy_ms']:.3f}" for v in ("ours", "upstream_v1")]
    assert f"(16.414 against 16.769 ms" in readme and walls == ["16.414", "16.769"]
    assert f"{busy[0]} and {busy[1]} ms busy" in readme
    assert "([results](bench/results/2026-12-02-h200-session52/README.md))" in readme


@pytest.mark.parametrize("folder,call", CALLS)
def test_every_runs_folder_here_is_one_archive(folder, call):
    check_runs_archived(folder, call)


def test_each_runs_p99_neighbours_bracket_its_p99_itl():
    assert checked_p99_neighbours(CALLS) == 14
