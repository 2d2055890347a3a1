"""Session 43's results README (one H200, vLLM 0.26.0) read back from its JSON and logs: the restart with the Triton
folder fix, the folder probe's report, the 8B EAGLE-1 pair's 4096-token rows (two rounds, issue 41), the calls that
ran no round, and the warm-up line of the 8-sequence server that left three sampler variants (the plan of this
change covers them)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ci_scripts import load_ci_script
from portable_spec_harness.serve_bench import coverage
from results_readback import (EAGLE_DRAFTERS, ResultsFolder, check_draft_v1_call, check_runs_archived,
                              check_triton_keys_logged, checked_coverage, checked_issue41_rows, checked_issue41_targets,
                              compiles_in_every_call, init_engine, load, no_compile_after_boot, restart_table,
                              server_log, upstream_compiled_sentence, warmup_limits_of)
from test_h200_session41_results import builds

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
RUN = RESULTS / "2026-12-01-h200-session43"
EAGLE1 = ("llama8b_eagle", "dummy")
BENCH = ResultsFolder(RUN, RUN / "e1d4k")
CALLS = ("call1", "call2", "call3", "call4", "call5")
ROUND_CALLS = ("call2", "call3")
RESTART = "## The restart with the folder fix"


def folded() -> str:
    return BENCH.folded()


def test_every_serving_call_ran_6693835_on_the_v1_runner_with_the_key_line_on():
    assert sum(check_draft_v1_call(BENCH.call_report(call), call, "6693835", "dummy", drafters=EAGLE_DRAFTERS)
               for call in CALLS) == 10
    sizing = {"call1": None, "call2": "/tmp/lane-e1d4k1/serve-bench/serve_bench.json",
              "call3": "/tmp/lane-e1d4k2/serve-bench/serve_bench.json",
              "call4": "/tmp/lane-e1d4k3/serve-bench/serve_bench.json",
              "call5": "/tmp/lane-e1d4k3/serve-bench/serve_bench.json"}
    cells = {"call1": 8, "call2": 8, "call3": 8, "call4": 8, "call5": 6}
    for call in CALLS:
        report = BENCH.call_report(call)
        assert report["settings"]["sizing_from"] == sizing[call], call
        assert report["pair"]["name"] == EAGLE1[0] and len(report["workload"]["cells"]) == cells[call], call
        assert report["workload"]["input_lens"] == [4096], call
        check_triton_keys_logged(report, call)
    assert "`PORTABLE_SPEC_LOG_TRITON_KEYS=on`" in folded()


def test_the_restart_read_every_warm_up_build_from_disk_under_the_compiling_boots_keys():
    found = restart_table(BENCH, "e1d4k", RESTART)
    assert [found[c][1:3] for c in ("call1", "call2")] == [(13, 0), (0, 8)]
    (ptxas1, first), (ptxas2, restart) = (builds(found[c][4]) for c in ("call1", "call2"))
    assert ptxas1 == ptxas2 == "12.8" and len(first) == 13 and len(restart) == 8
    by_key = {b[2]: b for b in first}
    assert all(b[1] == "from disk" and b[2] in by_key and b[3:] == by_key[b[2]][3:] and b[0] == by_key[b[2]][0]
               for b in restart)
    inductor = [b for b in first if b[0].startswith("triton_")]
    assert len(inductor) == 5 and not {b[2] for b in inductor} & {b[2] for b in restart}
    assert f"The compiling boot's {len(first)} builds include {len(inductor)} inductor kernels" in folded()
    assert f"this restart read all {len(restart)} from disk" in folded()
    up, ours = (float(init_engine(server_log(BENCH, "call2", v))[0]) for v in ("upstream_v1", "ours"))
    assert f"warm-up {found['call2'][0]} s, and ours' init engine is {ours / up:.2f}× upstream's " \
           f"({ours:.2f} / {up:.2f} s)" in folded()
    assert f"1.05× upstream's" in " ".join((ROOT / "README.md").read_text().split())


def test_the_probe_report_judges_as_recorded():
    probe = load_ci_script("ci/gpu/triton_folder_probe.py")
    report = load(RUN / "probe" / "triton_folder_probe.json")
    judged = probe.verdict(report)
    assert judged == report["verdict"]
    assert judged["named_finds_both_on_disk"] is True and judged["unset_loading_compiled"] == ["k2"]
    assert judged["problems"] == [] and judged["compared"] == 8
    assert (report["torch"], report["triton"]) == ("2.11.0+cu130", "3.6.0")
    log = (RUN / "probe" / "triton_folder_probe.log").read_text()
    assert "probe rc=0" in log and json.dumps(judged) in log
    assert ("`named_finds_both_on_disk` true, `unset_loading_compiled` `[\"k2\"]`, no problem, 8 builds compared; "
            "exit 0") in folded()


def test_the_4096_token_rows_pool_two_rounds_meet_the_targets_and_compile_nothing_after_boot():
    summary, entry = BENCH.pooled_entry(*EAGLE1, "0.26.0", ROUND_CALLS)
    assert summary["problems"] == ["llama8b_eagle (dummy) 1 of 2 rounds ran (--budget-s 575 would be passed)"]
    assert entry["rounds"] == 2
    cells, ratios = entry["cells"], summary["ours_over_upstream_v1"][EAGLE1[0]][EAGLE1[1]]
    tok, itl, rounds = checked_issue41_rows(BENCH, cells, ratios, 4096, (1, 2, 8, 32), rounds=2)
    below = [r for r in rounds if r < 1.0]
    assert len(rounds) == 16 and below == [0.999, 0.999]
    assert "14 of the 16 rounds are at or above 1.0; the two below are 0.999 (sampled, c=8 and c=32)" in folded()
    shortest = checked_issue41_targets(BENCH, cells, tok, itl, runs=32)
    assert "Acceptance length 1.000 on both servers" in folded()
    assert f"Every timed run lasted {shortest:.1f} s or more." in folded()
    assert no_compile_after_boot(BENCH, ROUND_CALLS, ("ours",)) == 2
    assert upstream_compiled_sentence(compiles_in_every_call(BENCH.bench, ROUND_CALLS)) in folded()


def test_the_tpot_sentence_is_the_pooled_cells():
    cells = BENCH.summary()["pairs"][EAGLE1[0]][EAGLE1[1]]["cells"]
    up, ours = (cells[v]["in4096/greedy/c1"] for v in ("upstream_v1", "ours"))

    def med(cell: dict, field: str) -> float:
        return cell[field]["median"]

    assert (f"mean TPOT {med(ours, 'mean_tpot_ms'):.2f} ms on ours against {med(up, 'mean_tpot_ms'):.2f} ms on "
            f"upstream (medians {med(ours, 'median_tpot_ms'):.2f} / {med(up, 'median_tpot_ms'):.2f} ms) and the "
            f"per-request p99 TPOT {med(ours, 'p99_tpot_ms'):.2f} against {med(up, 'p99_tpot_ms'):.2f} ms") \
        in folded()
    before = load(RESULTS / "2026-12-01-h200-session41" / "e1d1k" / "pooled" / "serve_bench_summary.json")
    then = before["pairs"][EAGLE1[0]][EAGLE1[1]]["cells"]
    p99 = [then[v]["in1024/greedy/c1"]["p99_tpot_ms"]["median"] for v in ("ours", "upstream_v1")]
    assert f"p99 TPOT were {p99[0]:.2f} / {p99[1]:.2f} ms (ours / upstream)" in folded()


def test_issue_41s_coverage_shows_the_two_round_cells_and_counts_none():
    rows = checked_coverage(coverage.ISSUE_41, RESULTS, ROOT, (RUN.name, "2026-12-01-h200-session41"), folded(),
                            (120, 36, 35, 36), (*EAGLE1, "upstream_v1"))
    long = [c for c in rows if c["cell"].startswith("in4096/")]
    assert len(long) == 8 and not any(c["counted"] for c in long), long
    runs = [m for c in long for m in c["measurements"]]
    assert len(runs) == 8 and all(m["rounds"] == 2 and not m["counted"] and m["compiles_after_boot"] == 0
                                  and m["summary"].startswith(f"bench/results/{RUN.name}/") for m in runs)


def test_the_calls_without_a_round():
    reports = {c: BENCH.call_report(c) for c in CALLS}
    stopped = {c: (r["status"], r["rounds_done"], r.get("stopped_because")) for c, r in reports.items()}
    assert stopped == {"call1": ("incomplete", 0, "--budget-s 530 would be passed"),
                       "call2": ("complete", 1, None),
                       "call3": ("incomplete", 1, "--budget-s 575 would be passed"),
                       "call4": ("incomplete", 0, "--budget-s 395 would be passed"),
                       "call5": ("incomplete", 0, "--budget-s 330 would be passed")}
    first = reports["call1"]
    boots = {v: info["boots"][0]["seconds"] for v, info in first["variants"].items()}
    assert (f"compiling the model ({boots['upstream_v1']:.1f} / {boots['ours']:.1f} s, upstream / ours, "
            f"FlashInfer's JIT build included), and ran the warm runs ({first['phases_s']['warm_s']:.1f} s). Its "
            f"round was estimated at {first['phases_s']['round_estimate_s']:.1f} s") in folded()
    assert f"(an estimate of {reports['call3']['phases_s']['round_estimate_s']:.1f} s per round)" in folded()
    assert f"the estimate ({reports['call4']['phases_s']['round_estimate_s']:.1f} s) did not fit" in folded()
    assert all(info["boots"][0].get("reused") for c in ("call3", "call4")
               for info in reports[c]["variants"].values())
    assert reports["call3"]["settings"]["keep_servers"] == "/tmp/serve_bench_kept.json"
    assert reports["call4"]["settings"]["keep_servers"] is None and "kept_servers" not in reports["call4"]
    fifth = reports["call5"]
    assert not any(info["boots"][0].get("reused") for info in fifth["variants"].values())
    boots5 = {v: info["boots"][0]["seconds"] for v, info in fifth["variants"].items()}
    assert f"({boots5['ours']:.1f} / {boots5['upstream_v1']:.1f} s, ours / upstream)" in folded()
    assert f"(estimated at {fifth['phases_s']['round_estimate_s']:.1f} s) did not fit the 330 s budget" in folded()
    logs = {v: server_log(BENCH, "call5", v) for v in ("upstream_v1", "ours")}
    assert all("Directly load AOT compilation" not in log for log in logs.values())


def call5_warm_up() -> tuple[dict, dict, str]:
    report = BENCH.call_report("call5")
    info = report["variants"]["ours"]
    facts = info["facts"][0]
    return facts, info, server_log(BENCH, "call5", "ours")


def test_the_eight_sequence_server_left_three_variants_and_the_plan_now_warms_them(monkeypatch):
    from portable_spec.vllm_adapter.worker import sampling_plan as sp

    facts, info, log = call5_warm_up()
    stats = facts["warmup_stats"]
    line = [ln for ln in log.splitlines() if "portable_spec: kernel warm-up: 13 steps" in ln]
    assert len(line) == 1 and " WARNING " in line[0]
    assert "Triton builds: 0 compiled, 12 from the disk cache /root/.triton/cache" in line[0]
    assert line[0].endswith("; 3 kernel variants left to the first requests: _topk_topp_kernel x3")
    assert (facts["max_num_seqs"], stats["k"], stats["steps"], stats["num_reqs"]) == (8, 3, 13, [1, 2, 3])
    recorded = {eval(key) for key in stats["uncovered"]}  # noqa: S307 - tuples of str/bool written by us
    assert recorded == {(sp.TOPK_TOPP, k, p, "16") for k, p in ((True, False), (False, True), (True, True))}
    limits = warmup_limits_of(info)
    sampling = sp.SamplingLimits()

    def plan() -> tuple[list, frozenset]:
        planned = sp.plan_v1_warmup(limits, sampling)
        return planned.rounds, planned.left

    rounds, left = plan()
    assert left == frozenset() and sum(r.trimmed > 0 for r in rounds) == 3
    assert {r.drafts(limits.k) for r in rounds if r.trimmed} == {16}
    with monkeypatch.context() as patched:  # the plan the GPU ran: no trimmed rounds
        patched.setattr(sp, "trimmed_rounds", lambda candidates, lim: [])
        before, left_before = plan()
    assert left_before == recorded and len(before) == stats["rounds"]
    assert [r.profile for r in before if r.profile != "greedy"] == stats["sampled_rounds"]
    assert "3 kernel variants left to the first requests: `_topk_topp_kernel` x3" in folded()


@pytest.mark.parametrize("call", CALLS)
def test_every_runs_folder_here_is_one_archive(call):
    check_runs_archived(BENCH, call)
