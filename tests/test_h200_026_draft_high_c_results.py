"""Session 34's GPU results (one H200, vLLM 0.26.0, V1 runner) as its README states them, read back from the
committed JSON and logs: the perfect draft at c = 8, 32 (three rounds, pooled with session 33's c = 1, 2 calls), the
designed partial draft's third round at 1024 in, c = 8, 32 (pooled with session 25's two); no compile after boot on
ours; the two calls that ran no round, the carried FlashInfer cache and the kept servers. A changed number in the
README or in a JSON fails."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

from results_readback import (ResultsFolder, check_draft_v1_call, checked_pooled_cell, compile_to_kv_gap,
                              rows_by_c, upstream_compiles_ours_none)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
RUN = RESULTS / "2026-11-30-h200-session34"
PERFECT, PARTIAL = RUN / "dmp026", RUN / "dm832026"
PAIR = "llama8b_draft1b"
COMMIT = "1eed016"
MEASURED = {PERFECT: ("call3", "call4"), PARTIAL: ("call4",)}
NO_ROUND = {PERFECT: "call5", PARTIAL: "call3"}
MODE = {PERFECT: "designed-perfect", PARTIAL: "designed-partial"}

PERFECT_FOLDER, PARTIAL_FOLDER = ResultsFolder(RUN, PERFECT), ResultsFolder(RUN, PARTIAL)
readme, folded = PERFECT_FOLDER.readme, PERFECT_FOLDER.folded


section = PERFECT_FOLDER.section


def every_call():
    for bench in (PERFECT, PARTIAL):
        for call in MEASURED[bench] + (NO_ROUND[bench],):
            yield bench, call, ResultsFolder(RUN, bench).call_report(call)


def test_every_call_ran_this_sessions_code_on_vllm_0_26_v1_with_async_scheduling():
    seen = 0
    for bench, call, report in every_call():
        seen += check_draft_v1_call(report, call, COMMIT, MODE[bench])
    assert seen == 10
    assert f"**Code:** `{COMMIT}`, `tree_changes` 0 in every call." in folded()
    runs = [r for bench in MEASURED for call in MEASURED[bench]
            for r in ResultsFolder(RUN, bench).call_report(call)["runs"]]
    assert len(runs) == 8 + 16 + 8
    assert f"every timed run {min(r['duration_s'] for r in runs):.1f} s or more" in folded()


def test_the_perfect_draft_table_its_rounds_and_the_prefill_at_1024_c32():
    s, entry = PERFECT_FOLDER.pooled_entry(PAIR, "designed-perfect", "0.26.0",
                                             ("call1", "call2", "call3", "call4"))
    assert [Path(p).parts[-4] for p in entry["sources"]] == ["2026-11-30-h200-session33"] * 2 + \
        ["2026-11-30-h200-session34"] * 2
    assert (RESULTS / "2026-11-30-h200-session33" / "dmp026" / "pooled" / "SET_ASIDE").read_text().startswith(
        "superseded by bench/results/2026-11-30-h200-session34/dmp026/pooled")
    cells, ratios = entry["cells"], s["ours_over_upstream_v1"][PAIR]["designed-perfect"]
    rows = rows_by_c(section("## The perfect draft at c = 8, 32"), "256|1024")
    assert sorted(rows) == [("1024", 8), ("1024", 32), ("256", 8), ("256", 32)]
    lines, lowest = {}, []
    for (length, c), row in rows.items():
        key = f"in{length}/greedy/c{c}"
        up, ours, per_round = checked_pooled_cell(cells, ratios, key, row, 3)
        assert up["spec_decode_acceptance_length"]["all"] == [4.0] * 3, key
        assert ratios[key]["output_tok_s"] >= 1.0 and min(per_round) > 1.0, key  # issue 39: >= 1.00x in every cell
        lowest += per_round
        lines.setdefault(length, []).append(f"c={c} " + ", ".join(f"{r:.3f}" for r in per_round))
    assert f"(lowest {min(lowest):.3f}, 1024 in at c=32)" in folded()
    assert f"256 in: {'; '.join(lines['256'])}. 1024 in: {'; '.join(lines['1024'])}." in folded()
    # the rounds are in order: call 3 holds round 0, call 4 rounds 1-2
    rounds = [(r["round"], r["variant"]) for call in ("call3", "call4")
              for r in PERFECT_FOLDER.call_report(call)["runs"] if (r["input_len"], r["concurrency"]) == (1024, 32)]
    assert sorted(rounds) == [(0, "ours"), (0, "upstream_v1"), (1, "ours"), (1, "upstream_v1"), (2, "ours"),
                              (2, "upstream_v1")]
    stalls = {v: [r["result"]["stall_total_ms"] / 1000 for call in ("call3", "call4")
                  for r in sorted(PERFECT_FOLDER.call_report(call)["runs"], key=lambda r: r["round"])
                  if (r["variant"], r["input_len"], r["concurrency"]) == (v, 1024, 32)]
              for v in ("upstream_v1", "ours")}
    assert ("summed ITL gaps of 100 ms or more of " + ", ".join(f"{x:.1f}" for x in stalls["upstream_v1"][:2])
            + f" and {stalls['upstream_v1'][2]:.1f} s (upstream) and "
            + ", ".join(f"{x:.1f}" for x in stalls["ours"][:2]) + f" and {stalls['ours'][2]:.1f} s (ours)") in folded()
    key = "in1024/greedy/c32"
    tpot = {v: cells[v][key]["median_tpot_ms"]["median"] for v in ("ours", "upstream_v1")}
    assert f"(median TPOT {tpot['ours']:.2f} against {tpot['upstream_v1']:.2f} ms)" in folded()


def test_the_partial_drafts_third_round_and_its_pool():
    s, entry = PARTIAL_FOLDER.pooled_entry(PAIR, "designed-partial", "0.26.0", ("call1", "call2", "call4"))
    assert [Path(p).parts[-4] for p in entry["sources"]] == ["2026-11-29-h200-session25"] * 2 + \
        ["2026-11-30-h200-session34"]
    assert s["problems"] == []
    assert (RESULTS / "2026-11-29-h200-session25" / "dm832026" / "pooled" / "SET_ASIDE").read_text().startswith(
        "superseded by bench/results/2026-11-30-h200-session34/dm832026/pooled")
    cells, ratios = entry["cells"], s["ours_over_upstream_v1"][PAIR]["designed-partial"]
    rows = rows_by_c(section("## The designed partial draft"), "greedy|sampled")
    assert len(rows) == 4
    this_round, itl = {}, []
    for (sampling, c), row in rows.items():
        key = f"in1024/{sampling}/c{c}"
        up, ours, per_round = checked_pooled_cell(cells, ratios, key, row, 3)
        assert per_round[2] >= min(per_round[:2]), key  # inside the first two rounds' range or above it
        this_round[sampling, c] = per_round[2]
        itl.append(ours["p99_itl_ms"]["median"] / up["p99_itl_ms"]["median"])
    acceptance = [a for v in ("upstream_v1", "ours") for k in ratios
                  for a in cells[v][k]["spec_decode_acceptance_length"]["all"]]
    assert f"Acceptance length {min(acceptance):.2f}–{max(acceptance):.2f}, equal" in folded()
    assert max(itl) <= 1.06 and "within 6% of upstream's or below it in every pooled cell" in folded()
    assert (f"**This round:** {this_round['greedy', 8]:.3f} / {this_round['greedy', 32]:.3f} greedy and "
            f"{this_round['sampled', 8]:.3f} / {this_round['sampled', 32]:.3f} sampled at c = 8 / 32") in folded()
    # the third round is call 4's, round 2
    assert {r["round"] for r in PARTIAL_FOLDER.call_report("call4")["runs"]} == {2}


def test_no_compile_after_boot_on_ours_and_ours_replayed_its_graphs():
    compared = 0
    for bench, call, report in every_call():
        upstream = upstream_compiles_ours_none(report, bench / call / "serve-bench")
        assert len(upstream) == (6 if bench == PERFECT else 7), (call, upstream)
        assert bench == PERFECT or upstream[-1] == "_topk_topp_kernel"
        compared += 1
    assert compared == 5
    facts = {c: {f["when"]: f for f in PERFECT_FOLDER.call_report(c)["variants"]["ours"]["facts"]}
             for c in ("call3", "call4")}
    first, second = facts["call3"]["after"]["replays"], facts["call4"]["after"]["replays"]
    assert facts["call4"]["before"]["replays"] == first  # the same kept server
    assert facts["call3"]["after"]["eager_keys"] == facts["call4"]["after"]["eager_keys"] == {}
    assert (f"{first['chain']:,} chain-step and {first['first']:,} first-pass replays in call 3, "
            f"{second['chain'] - first['chain']:,} and {second['first'] - first['first']:,} more in call 4") in folded()


def test_the_calls_that_ran_no_round_and_what_the_lease_showed():
    c2 = PERFECT_FOLDER.call_report("call5")
    assert c2["rounds_done"] == 0 and c2["runs"] == [] and c2["stopped_because"] == "--budget-s 150 would be passed"
    assert c2["workload"]["max_num_seqs"] == 2 and PERFECT_FOLDER.call_report("call4")["workload"]["max_num_seqs"] == 32
    assert {v["not_reused"] for v in c2["variants"].values()} == {"its vllm serve arguments differ"}
    # and its round would not have pooled with session 33's calls: other input lengths
    from portable_spec_harness.serve_bench.combine import workload_differences

    s33 = ResultsFolder(RESULTS / "2026-11-30-h200-session33", RESULTS / "2026-11-30-h200-session33" / "dmp026")
    assert workload_differences(c2, s33.call_report("call1")) == ["input_lens"]
    assert c2["workload"]["input_lens"] == [1024] and s33.call_report("call1")["workload"]["input_lens"] == [256, 1024]
    assert "it ran 1024 in alone, session 33's calls 256 and 1024" in folded()
    assert f"Both\n    booted again ({round(c2['phases_s']['boot_s'])} s), and the one round " \
           f"({round(c2['phases_s']['round_estimate_s'])} s predicted)" in readme()
    late = PARTIAL_FOLDER.call_report("call3")
    assert late["rounds_done"] == 0 and late["stopped_because"] == "--budget-s 330 would be passed"
    assert (f"`dm832026/call3` booted in {round(late['phases_s']['boot_s'])} s and warmed in "
            f"{round(late['phases_s']['warm_s'])} s; the round, predicted at "
            f"{round(late['phases_s']['round_estimate_s'])} s") in folded()
    # the kept servers: call 4 reused both, each with call 3's boot recorded
    first = PERFECT_FOLDER.call_report("call3")
    reused = PERFECT_FOLDER.call_report("call4")
    assert reused["phases_s"]["boot_s"] == 0.0
    for variant, info in reused["variants"].items():
        (boot,) = info["boots"]
        assert boot["seconds"] == 0.0 and boot["reused"]["first_boot"] == first["variants"][variant]["boots"][0]
    ours_boot = first["variants"]["ours"]["boots"][0]["seconds"]
    assert f"reused both (boot 0 s), each with its first\n  boot ({ours_boot} s, call 3) recorded" in readme()
    # the carried FlashInfer cache: placed as ahead-of-time builds, and the first boot no longer builds it
    console = gzip.open(PERFECT / "call3" / "console.log.gz", "rt").read()
    assert "placed 1 FlashInfer 0.6.14 module(s) of sm_90 as ahead-of-time builds" in console
    gaps = {v: compile_to_kv_gap(gzip.open(PERFECT / "call3" / "serve-bench" / f"server_{v}.log.gz", "rt").read())
            for v in ("upstream_v1", "ours")}
    assert len(set(gaps.values())) == 1 and gaps["ours"] <= 15, gaps
    assert f"first boot on the fresh host took {round(first['phases_s']['boot_s'])} s" in folded()
    assert f"both servers waited {gaps['ours']} s between the end of torch.compile and the KV-cache sizing" in folded()


def test_ours_boot_warm_up_on_the_draft_model_pair():
    def logged(path: Path, pattern: str) -> float:
        return float(re.search(pattern, gzip.open(path, "rt").read()).group(1))

    def ours(folder: Path) -> Path:
        return folder / "serve-bench" / "server_ours.log.gz"

    boots = (PERFECT / "call3", PARTIAL / "call3", PARTIAL / "call4")
    init = {v: [logged(b / "serve-bench" / f"server_{v}.log.gz", r"init engine \(profile, create kv cache, warmup "
                       r"model\) took ([\d.]+) s") for b in boots] for v in ("ours", "upstream_v1")}
    warmups = [logged(ours(b), r"kernel warm-up: 19 steps \(9 rounds[^)]*\) in ([\d.]+) s; 12 Triton compiles")
               for b in boots]
    small = logged(ours(PERFECT / "call5"), r"kernel warm-up: 9 steps .*? in ([\d.]+) s")
    warm_host = RESULTS / "2026-11-29-h200-session28" / "e3g4k028" / "call3"
    eagle3 = logged(ours(warm_host), r"kernel warm-up: 19 steps \(9 rounds[^)]*\) in ([\d.]+) s; 7 Triton compiles")
    structured = r"structured-output warm-up: [^\n]*? in ([\d.]+) s"
    probes = [logged(ours(b), structured) for b in boots + (PERFECT / "call5",)]
    warm_probe = logged(ours(warm_host), structured)
    assert all(o - u > 20 for o, u in zip(init["ours"], init["upstream_v1"])) and min(warmups) > 20 > eagle3 * 10
    assert min(probes) > 1.0 > 0.1 > warm_probe  # every boot here cold on Triton's disk cache, session 28's warm
    # dm832026/call3 and call4 booted the same servers (the partial draft); dmp026/call3 the perfect draft's
    drafts = [PERFECT_FOLDER.call_report("call3")["pair"]["mode"]] + \
        [PARTIAL_FOLDER.call_report(c)["pair"]["mode"] for c in ("call3", "call4")]
    assert drafts == ["designed-perfect", "designed-partial", "designed-partial"]
    assert (f"Ours' engine init took {init['ours'][0]:.1f}, {init['ours'][1]:.1f} and {init['ours'][2]:.1f} s in the "
            f"three boots at `--max-num-seqs 32` (`dmp026/call3`, `dm832026/call3`, `dm832026/call4`), upstream V1's "
            f"{init['upstream_v1'][0]:.1f}, {init['upstream_v1'][1]:.1f} and {init['upstream_v1'][2]:.1f} s") in folded()
    assert (f"{warmups[0]:.2f}, {warmups[1]:.2f} and {warmups[2]:.2f} s, the second boot of the same server on this "
            f"host included, and {small:.2f} s at `--max-num-seqs 2`") in folded()
    assert (f"took {probes[0]:.2f}, {probes[1]:.2f}, {probes[2]:.2f} and {probes[3]:.2f} s; with the cache warm it "
            f"takes {warm_probe:.2f} s") in folded()
    assert f"same 19-step plan) then took {eagle3:.2f} s" in folded()
