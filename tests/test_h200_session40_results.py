"""Session 40's results README (one H200, vLLM 0.26.0) read back from its JSON and logs: the 8B EAGLE-3 pair's
128-token rows (issue 41), the restart's warm-up lines with the ptxas pin, the two ptxas probes that withdrew it, the
calls that ran no round and the boot that did not finish."""

from __future__ import annotations

import json
import re
from pathlib import Path

from portable_spec_harness.serve_bench import coverage
from results_readback import (EAGLE_DRAFTERS, ResultsFolder, check_draft_v1_call, compiles_in_every_call,
                              checked_coverage, load, no_compile_after_boot, pooled_rows_by_round, restart_table,
                              rows_by_c, upstream_compiled_sentence, warm_up_ptxas)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
RUN = RESULTS / "2026-11-30-h200-session40"
EAGLE3 = ("llama8b_eagle3", "designed-partial")
BENCH = ResultsFolder(RUN, RUN / "e3g128")
C2 = ResultsFolder(RUN, RUN / "e3g128c2")
CALLS = ("call1", "call2", "call3", "call4")
ROUND_CALLS = ("call3", "call4")
SIZING = "bench/tmp-sizing/e3g128c1.json"


def folded() -> str:
    return BENCH.folded()


def test_every_serving_call_ran_a537802_on_the_v1_runner_with_the_sizing_it_names():
    seen = sum(check_draft_v1_call(BENCH.call_report(call), call, "a537802", "designed-partial", tree_changes=1,
                                   drafters=EAGLE_DRAFTERS) for call in CALLS)
    seen += check_draft_v1_call(C2.call_report("call1"), "e3g128c2", "a537802", "designed-partial", tree_changes=1,
                                drafters=EAGLE_DRAFTERS)
    assert seen == 10
    sized = load(RESULTS / "2026-11-30-h200-session39" / "e3g128" / "call1" / "serve-bench" / "serve_bench.json")
    for call in CALLS:
        report = BENCH.call_report(call)
        expected = "/tmp/lane-e3g128c4/serve-bench/serve_bench.json" if call == "call4" else SIZING
        assert report["settings"]["sizing_from"] == expected, call
        assert report["sizing_from_pools"] == {"pools": True, "differs": []}, call
        assert report["workload"]["cells"] == sized["workload"]["cells"], call
        assert f"SERVE_BENCH_SIZING_FROM={expected}" in BENCH.readme(), call
    assert C2.call_report("call1")["settings"]["sizing_from"] is None
    assert f"`{SIZING}`, which is `../2026-11-30-h200-session39/e3g128/call1`'s `serve_bench.json`" in folded()


def pooled(folder: ResultsFolder, calls: tuple[str, ...]) -> tuple[dict, dict, dict]:
    summary, entry = folder.pooled_entry(*EAGLE3, "0.26.0", calls)
    assert summary["problems"] == [] and entry["rounds"] == 3
    return entry["cells"], summary["ours_over_upstream_v1"][EAGLE3[0]][EAGLE3[1]], entry


def test_the_128_token_rows_pool_three_rounds_meet_the_targets_and_compile_nothing_after_boot():
    benches = ((BENCH, ROUND_CALLS, (1, 8, 32)), (C2, ("call1",), (2,)))
    section = BENCH.section("## Issue 41")
    greedy_text, sampled_text = section.split("\nSampled:\n")
    lines, tok, itl, lengths, durations = [], [], [], [], []
    for sampling, text in (("greedy", greedy_text), ("sampled", sampled_text)):
        rows = {str(c): row for (_, c), row in rows_by_c(text, "128").items()}
        assert sorted(rows, key=int) == ["1", "2", "8", "32"], sampling
        per_c = {}
        for folder, calls, concurrencies in benches:
            cells, ratios, _ = pooled(folder, calls)
            by_c, per_round = pooled_rows_by_round(cells, ratios, {str(c): rows[str(c)] for c in concurrencies},
                                                   128, concurrencies, rounds=3, sampling=sampling)
            per_c.update(dict(zip(concurrencies, per_round.split("; "))))
            tok += [r["output_tok_s"] for r in by_c.values()]
            itl += [r["p99_itl_ms"] for r in by_c.values()]
            keys = [f"in128/{sampling}/c{c}" for c in concurrencies]
            lengths += [a for v in cells.values() for k in keys for a in v[k]["spec_decode_acceptance_length"]["all"]]
            durations += [d for v in cells.values() for k in keys for d in v[k]["duration"]["all"]]
        lines.append("; ".join(per_c[c] for c in (1, 2, 8, 32)))
    assert f"**Per round, greedy:** {lines[0]}. **Sampled:** {lines[1]}." in folded()
    rounds = [float(x) for line in lines for x in re.findall(r"\d\.\d{3}", line)]
    assert len(rounds) == 24 and min(rounds) > 1.0 and "Every one of the 24 rounds is above 1.0" in folded()
    assert len(tok) == len(itl) == 8 and len(lengths) == len(durations) == 48
    assert min(tok) >= 1.0 and f"met ({min(tok):.3f}–{max(tok):.3f}, ratio of the medians)" in folded()
    assert max(itl) <= 1.25 and f"met in every cell ({min(itl):.3f}–{max(itl):.3f} pooled)" in folded()
    assert f"({min(lengths):.3f}–{max(lengths):.3f}). Every timed run lasted {min(durations):.1f} s or more." \
        in folded()
    assert no_compile_after_boot(BENCH, CALLS, ("ours",)) + no_compile_after_boot(C2, ("call1",), ("ours",)) == 5
    upstream = compiles_in_every_call(BENCH.bench, CALLS)
    assert compiles_in_every_call(C2.bench, ("call1",)) == upstream
    assert upstream_compiled_sentence(upstream) in folded()


def test_issue_41s_coverage_counts_the_eight_new_cells_and_a_whole_eagle3_v1_grid():
    grid = checked_coverage(coverage.ISSUE_41, RESULTS, ROOT, (RUN.name, "2026-11-30-h200-session39"), folded(),
                            (120, 28, 27, 20), (*EAGLE3, "upstream_v1"))
    assert "meeting every target** (20 before)" in folded()
    assert len(grid) == 24 and all(c["counted"] for c in grid)
    assert [c["cell"] for c in grid if not c["meets"]] == ["in4096/sampled/c8"]


def test_the_restarts_warm_up_lines_with_the_pin():
    found = restart_table(BENCH, "e3g128")
    assert all(warm_up_ptxas(found[c][4]) == "13.0" for c in ("call1", "call2"))
    assert [found[c][1:3] for c in ("call1", "call2")] == [(13, 0), (7, 1)]
    assert "7 of the 8 kernels compiled again" in folded() and 'Both lines end "ptxas 13.0"' in folded()


def release(text: str) -> str:
    return re.search(r"release (\d+\.\d+)|cuda_(\d+\.\d+)", text).group(0).split()[-1].replace("cuda_", "")


def test_the_probes_a_compiling_process_keys_with_tritons_own_ptxas():
    probe = json.loads((RUN / "ptxas_key" / "triton_key_parts.json").read_text())
    assert probe["torch"] == "2.11.0+cu130" and probe["triton"] == "3.6.0"
    runs = probe["runs"]
    assert [r["mode"] for r in runs] == ["compiled", "pinned_only", "plain", "compiled"]
    assert all(r["rc"] == 0 and len(r["child"]["builds"]) == 1 for r in runs)
    builds = [r["child"]["builds"][0] for r in runs]
    assert [b["cache_hit"] for b in builds] == [False, False, True, True]
    assert [release(b["backend_hash"]) for b in builds] == ["12.8", "13.0", "12.8", "12.8"]
    keys = [b["metadata"]["hash"] for b in builds]
    assert keys[0] == keys[2] == keys[3] != keys[1] and len({b["src_hash"] for b in builds}) == 1
    ptxas_env = [r["child"]["triton_env"].get("TRITON_PTXAS_PATH") for r in runs]
    assert ptxas_env[0] == ptxas_env[1] and ptxas_env[0].endswith("torch/bin/ptxas") and ptxas_env[2:] == [None] * 2
    assert release(runs[0]["child"]["ptxas_version"]) == "12.8"  # what the compiled process's Triton asked: cached
    entries = [r["cache_entries"] for r in runs]
    assert entries == [5, 6, 6, 6]
    assert (f"a new key ({entries[0]} entries, then {entries[1]})" in folded()
            and f"found the first one's kernel on disk ({entries[2]} and {entries[3]})" in folded())
    assert "The source hash was the same in all four" in folded()
    first = json.loads((RUN / "ptxas_key" / "triton_ptxas_key.json").read_text())
    assert [r["mode"] for r in first["runs"]] == ["inductor", "pinned", "plain"]
    assert all(r["rc"] == 0 for r in first["runs"])
    left = [r["cache_entries"] for r in first["runs"]]
    assert left == [3, 3, 4] and f"left {left[0]}, {left[1]} and {left[2]} entries" in folded()


def test_the_calls_without_a_round_and_the_boot_that_did_not_finish():
    for call in ("call1", "call2"):
        report = BENCH.call_report(call)
        assert report["status"] == "incomplete" and report["rounds_done"] == 0, call
        assert not [r for r in report["runs"] if r["kind"] == "timed"] and len(report["workload"]["cells"]) == 6
        assert report["stopped_because"] == f"--budget-s {report['settings']['budget_s']:g} would be passed", call
    first, second = BENCH.call_report("call1"), BENCH.call_report("call2")
    boots = {v: info["boots"][0]["seconds"] for v, info in first["variants"].items()}
    assert (f"compiling the model ({boots['upstream_v1']:.1f} / {boots['ours']:.1f} s, upstream / ours), and ran the "
            f"warm runs ({first['phases_s']['warm_s']:.1f} s). Its round was estimated at "
            f"{first['phases_s']['round_estimate_s']:.1f} s and would have passed the "
            f"{first['settings']['budget_s']:g} s budget") in folded()
    assert (f"booted them again ({second['variants']['ours']['boots'][0]['seconds']:.1f} s for ours, loading; the "
            f"restart above), ran the warm runs ({second['phases_s']['warm_s']:.1f} s) and estimated "
            f"{second['phases_s']['round_estimate_s']:.1f} s, past its {second['settings']['budget_s']:g} s budget") \
        in folded()
    assert second["kept_servers"]["registry"] == "/tmp/serve_bench_kept.json"
    third, fourth = BENCH.call_report("call3"), BENCH.call_report("call4")
    assert all(info["boots"][0].get("reused") for info in third["variants"].values())
    assert (f"estimated {third['phases_s']['round_estimate_s']:.1f} s and finished its warm runs and the round in "
            f"{third['phases_s']['total_s']:.1f} s") in folded()
    assert f"predicted {fourth['phases_s']['round_estimate_s']:.1f} s a round" in folded()
    assert (third["rounds_done"], fourth["rounds_done"], C2.call_report("call1")["rounds_done"]) == (1, 2, 3)
    waves = {call: [r["duration_s"] for r in report["warm_runs"] if r["variant"] == "upstream_v1"]
             for call, report in (("call1", first), ("call2", second), ("call3", third))}
    assert all(len(w) == 6 for w in waves.values())
    assert (f"one wave took up to {max(waves['call1']):.2f} s in call 1 and {max(waves['call2']):.2f} s in call 2, "
            f"against {min(waves['call3']):.2f}–{max(waves['call3']):.2f} s once its servers were warm") in folded()
    boot = json.loads((RUN / "keys_boot" / "boot_time.json").read_text())
    assert boot["vllm"] == "0.26.0" and boot["pair"] == "llama_eagle" and boot["variants_asked"] == ["full_drafter"]
    assert [(b["phase"], b["error"]) for b in boot["boots"]] == [
        ("cold", "no READY within 65 s, see boot_cold_full_drafter.log")]
    assert "had not reached READY within the 65 s it was given" in folded()
