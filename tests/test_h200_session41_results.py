"""Session 41's results README (one H200, vLLM 0.26.0) read back from its JSON and logs: the 8B EAGLE-1 pair's
1024-token rows (issue 41), the restart's warm-up lines and the two boots' Triton key lines, the calls that ran no
round and the call that found no vLLM."""

from __future__ import annotations

import json
import re
import tarfile
from pathlib import Path

from portable_spec_harness.serve_bench import coverage
from results_readback import (EAGLE_DRAFTERS, ResultsFolder, check_draft_v1_call, checked_coverage,
                              checked_issue41_rows, compiles_in_every_call, init_engine, load, no_compile_after_boot,
                              restart_table, server_log, table, upstream_compiled_sentence)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
RUN = RESULTS / "2026-12-01-h200-session41"
EAGLE1 = ("llama8b_eagle", "dummy")
BENCH = ResultsFolder(RUN, RUN / "e1d1k")
CALLS = ("call1", "call2", "call3")
ROUND_CALLS = ("call2", "call3")
KEY_LINE = re.compile(r"Triton build keys \((\d+), ptxas ([\d.]+)\): (.*)$", re.M)
BUILD = re.compile(r"(\S+) (compiled|from disk) key (\w+) source (\w+) options (\w+)(?: variables (\w+))?")


def folded() -> str:
    return BENCH.folded()


def test_every_serving_call_ran_71b8165_on_the_v1_runner_with_the_key_line_on():
    assert sum(check_draft_v1_call(BENCH.call_report(call), call, "71b8165", "dummy", drafters=EAGLE_DRAFTERS)
               for call in CALLS) == 6
    sizing = {"call1": None, "call2": "/tmp/lane-e1d1k1/serve-bench/serve_bench.json",
              "call3": "/tmp/lane-e1d1k2/serve-bench/serve_bench.json"}
    for call in CALLS:
        report = BENCH.call_report(call)
        assert report["settings"]["sizing_from"] == sizing[call], call
        assert report["pair"]["name"] == EAGLE1[0] and len(report["workload"]["cells"]) == 8, call
        assert len(KEY_LINE.findall(server_log(BENCH, call, "ours"))) == 1, call
        assert "PORTABLE_SPEC_LOG_TRITON_KEYS=on" in BENCH.readme()


def test_the_1024_token_rows_pool_three_rounds_meet_the_targets_and_compile_nothing_after_boot():
    summary, entry = BENCH.pooled_entry(*EAGLE1, "0.26.0", ROUND_CALLS)
    assert summary["problems"] == [] and entry["rounds"] == 3
    cells, ratios = entry["cells"], summary["ours_over_upstream_v1"][EAGLE1[0]][EAGLE1[1]]
    tok, itl, rounds = checked_issue41_rows(BENCH, cells, ratios, 1024, (1, 2, 8, 32), rounds=3)
    below = [r for r in rounds if r < 1.0]
    assert len(rounds) == 24 and len(below) == 2 and max(below) == 0.998
    assert f"{24 - len(below)} of the 24 rounds are at or above 1.0; the two below are at c=32 (0.998 each)" \
        in folded()
    assert min(tok) >= 1.0 and max(itl) <= 1.25
    assert f"met ({min(tok):.3f}–{max(tok):.3f}, ratio of the medians)" in folded()
    assert f"met in every cell ({min(itl):.3f}–{max(itl):.3f} pooled)" in folded()
    keys = [k for k in cells["ours"]]
    lengths = {a for v in cells.values() for k in keys for a in v[k]["spec_decode_acceptance_length"]["all"]}
    durations = [d for v in cells.values() for k in keys for d in v[k]["duration"]["all"]]
    assert lengths == {1.0} and len(durations) == 48 and "Acceptance length 1.000 on both servers" in folded()
    assert f"Every timed run lasted {min(durations):.1f} s or more." in folded()
    tpot = [(cells["upstream_v1"][k]["median_tpot_ms"]["median"], cells["ours"][k]["median_tpot_ms"]["median"])
            for k in keys]
    low_c = [abs(u - o) for (u, o), k in zip(tpot, keys) if not k.endswith("c32")]
    assert len(low_c) == 6 and max(low_c) <= 0.07 and "equal to within 0.07 ms at c ≤ 8" in folded()
    flat = [t for pair in tpot for t in pair]
    assert f"median TPOT {min(flat):.1f}–{max(flat):.1f} ms on both servers" in folded()
    assert no_compile_after_boot(BENCH, CALLS, ("ours",)) == 3
    assert upstream_compiled_sentence(compiles_in_every_call(BENCH.bench, CALLS)) in folded()


def test_issue_41s_coverage_counts_the_eight_new_cells():
    rows = checked_coverage(coverage.ISSUE_41, RESULTS, ROOT, (RUN.name, "2026-11-30-h200-session40"), folded(),
                            (120, 36, 35, 28), (*EAGLE1, "upstream_v1"))
    assert "meeting every target** (28 before)" in folded()
    assert [c["cell"] for c in rows if c["counted"]] == [f"in1024/{s}/c{c}" for s in ("greedy", "sampled")
                                                         for c in (1, 2, 8, 32)]
    assert all(c["meets"] for c in rows if c["counted"])


def builds(log: str) -> tuple[str, list[tuple[str, ...]]]:
    """Ours' one key line in a server log: its ptxas and each build's (name, compiled|from disk, key, source,
    options); the line's count must equal the builds it lists."""
    found = KEY_LINE.findall(log)
    assert len(found) == 1, found
    count, ptxas, body = found[0]
    parts = [BUILD.fullmatch(part.strip()) for part in body.split("; ")]
    assert all(parts) and len(parts) == int(count), body[:200]
    return ptxas, [p.groups()[:5] for p in parts]


def test_the_restart_built_the_same_keys_and_found_only_the_one_built_before_inductors_first_kernel():
    found = restart_table(BENCH, "e1d1k")
    assert [found[c][1:3] for c in ("call1", "call2")] == [(13, 0), (7, 1)]
    (ptxas1, first), (ptxas2, restart) = (builds(found[c][4]) for c in ("call1", "call2"))
    assert ptxas1 == ptxas2 == "12.8" and "(ptxas 12.8 in both)" in folded()
    by_key = {b[2]: b for b in first}
    assert all(b[2] in by_key and b[3:] == by_key[b[2]][3:] and b[0] == by_key[b[2]][0] for b in restart)
    assert all(b[1] == "compiled" for b in first) and len(first) == 13 and len(restart) == 8
    rows = table(BENCH.section("## A restart still compiled"), "| # |")
    assert sorted(rows, key=int) == [str(i) for i in range(1, 14)]
    again = {b[2]: b[1] for b in restart}
    for i, build in enumerate(first, 1):
        assert rows[str(i)] == [f"`{build[0]}`", f"`{build[2]}`", "compiled", again.get(build[2], "not built")], i
    inductor = [i for i, b in enumerate(first) if b[0].startswith("triton_")]
    on_disk = [i for i, b in enumerate(first) if again.get(b[2]) == "from disk"]
    assert on_disk == [0] and min(inductor) == 1 and all(b[0].startswith("triton_") for b in first
                                                          if b[2] not in again)
    assert (f"Every one of the loading boot's {len(restart)} builds has a key, source hash and options digest equal "
            "to one of the compiling boot's") in folded()
    up, ours = (float(init_engine(server_log(BENCH, "call2", v))[0]) for v in ("upstream_v1", "ours"))
    assert f"{ours / up:.1f}× upstream's on the restart ({ours:.2f} / {up:.2f} s)" in folded()
    assert f"most of the {ours - up:.2f} s between them" in folded() and float(found["call2"][0]) < ours - up


def test_the_calls_without_a_round_and_the_call_that_found_no_vllm():
    first, second, third = (BENCH.call_report(c) for c in CALLS)
    assert first["status"] == "incomplete" and first["rounds_done"] == 0
    assert first["stopped_because"] == "--budget-s 530 would be passed"
    boots = {v: info["boots"][0]["seconds"] for v, info in first["variants"].items()}
    p1, p2, p3 = first["phases_s"], second["phases_s"], third["phases_s"]
    assert (f"compiling the model ({boots['upstream_v1']:.1f} / {boots['ours']:.1f} s, upstream / ours), and ran the "
            f"warm runs ({p1['warm_s']:.1f} s). Its round was estimated at {p1['round_estimate_s']:.1f} s") in folded()
    round2 = p2["total_s"] - p2["boot_s"] - p2["warm_s"]
    assert (second["rounds_done"], third["rounds_done"]) == (1, 2)
    assert f"took {round2:.1f} s in call 2 (after an estimate of {p2['round_estimate_s']:.1f} s)" in folded()
    assert round((p3["total_s"] - p3["warm_s"]) / 2) == 262 and "call 3 about 262 s each" in folded()
    assert all(info["boots"][0].get("reused") for info in third["variants"].values())
    lane = json.loads((RUN / "e1d128" / "cuda_lane.json").read_text())
    assert lane["vllm"] is None and lane["stages"] == {"serve-bench": 2} and lane["commit"].startswith("71b8165")
    console = (RUN / "e1d128" / "console.log").read_text()
    assert "vllm is not importable" in console and "exit 2 in 0 s" in console
    assert "`vllm is not importable`, exit 2 in 0 s, no server" in folded()


def test_every_runs_folder_here_is_one_archive_holding_each_timed_run():
    for call in CALLS:
        report = BENCH.call_report(call)
        archive = BENCH.bench / call / "serve-bench" / "runs.tar.gz"
        with tarfile.open(archive, "r:gz") as tar:
            names = {m.name for m in tar.getmembers()}
        named = {r["result_file"] for r in report["runs"] + report["warm_runs"]}
        assert named and all(any(n.startswith(f) for n in names) for f in named), call
        assert not (BENCH.bench / call / "serve-bench" / "runs").exists()
    assert load(BENCH.bench / "pooled" / "serve_bench_summary.json")["kind"] == "serve_bench_summary"
