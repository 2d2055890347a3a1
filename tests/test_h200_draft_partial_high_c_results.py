"""Session 37's GPU results (one H200; vLLM 0.33.0's Model Runner V2, then vLLM 0.26.0's V1 runner) as its README
states them, read back from the committed JSON and logs: the designed partial draft at 256 in, c = 8, 32 on both
runners, MRV2's third round at 1024 in, c = 1, 2 pooled with session 31's calls; acceptance across prompt sets and
across runners; compiles after boot; replays; the boot warm-up's Triton line; boots, warm runs and the refused call.
A changed number in the README or in a JSON fails."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

from results_readback import (MRV2_VARIANTS, ResultsFolder, check_draft_mrv2_call, check_draft_v1_call,
                              init_engine, jit_compiles, log_time, mrv2_table_rows, pooled_rows_by_round,
                              rows_by_c, speculator_counts, upstream_compiles_ours_none)

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "bench" / "results" / "2026-11-30-h200-session37"
S31 = ROOT / "bench" / "results" / "2026-11-29-h200-session31" / "dm1k033"
PAIR, MODE, COMMIT = "llama8b_draft1b", "designed-partial", "efcc859"
MRV2_CALLS = ("dm256033/call1", "dm1k033/call4")
V1_CALLS = ("dm256v026/call1", "dm256v026/call2")
V1_VARIANTS = ("upstream_v1", "ours")

FOLDER = ResultsFolder(RUN, RUN)  # calls named "chain/callN" under the session's folder
readme, folded, call_report = FOLDER.readme, FOLDER.folded, FOLDER.call_report


def pooled(chain: str) -> dict:
    return ResultsFolder(RUN, RUN / chain).summary()


def runs(calls: tuple[str, ...]) -> list[dict]:
    return [r for call in calls for r in call_report(call)["runs"]]


def per_round_line(cells: dict, ratios: dict, length: int, concurrencies: tuple[int, ...], rows: dict,
                   same_prompts: bool, variants: tuple[str, str] = MRV2_VARIANTS) -> str:
    """The README's "c=8 3.109, 3.284, 3.943; c=32 ..." line at ``length``, each row checked against its pooled
    cell with three rounds and ours ahead in every round."""
    return pooled_rows_by_round(cells, ratios, {str(c): rows[length, c] for c in concurrencies}, length,
                                concurrencies, variants, rounds=3, same_prompts=same_prompts,
                                ours_ahead_every_round=True)[1]


def test_every_call_ran_efcc859_on_its_runner_with_async_scheduling_on_servers_of_one_shape():
    seen = check_draft_mrv2_call(call_report(MRV2_CALLS[0]), MRV2_CALLS[0], COMMIT, MODE)
    seen += check_draft_mrv2_call(call_report(MRV2_CALLS[1]), MRV2_CALLS[1], COMMIT, MODE, sized_per_variant=False)
    seen += sum(check_draft_v1_call(call_report(call), call, COMMIT, MODE) for call in V1_CALLS)
    assert seen == 8
    shapes = {call: (call_report(call)["workload"]["max_model_len"], call_report(call)["workload"]["max_num_seqs"])
              for call in MRV2_CALLS + V1_CALLS}
    assert shapes == {"dm256033/call1": (1360, 32), "dm1k033/call4": (1360, 32), "dm256v026/call1": (592, 32),
                      "dm256v026/call2": (592, 32)}
    session31 = {(r := json.loads(gzip.open(S31 / c / "serve-bench" / "serve_bench.json.gz").read()))["workload"]
                 ["max_model_len"] for c in ("call1", "call2", "call3")}
    assert session31 == {1360}
    assert "- **Code:** `efcc859`, `tree_changes` 0 in every call." in folded()


def test_the_mrv2_table_prints_both_pools_and_ours_leads_every_round():
    rows = mrv2_table_rows(FOLDER, "## MRV2 (vLLM 0.33.0)")
    assert sorted(rows) == [(256, 8), (256, 32), (1024, 1), (1024, 2), (1024, 8), (1024, 32)]
    short = pooled("dm256033")
    entry = short["pairs"][PAIR][MODE]
    assert short["problems"] == [] and (entry["rounds"], entry.get("rounds_run")) == (3, 3)
    line_256 = per_round_line(entry["cells"], short["ours_mrv2_over_mrv2"][PAIR][MODE], 256, (8, 32), rows,
                              same_prompts=False)
    long, long_entry = ResultsFolder(RUN, RUN / "dm1k033").pooled_entry(PAIR, MODE, "0.33.0",
                                                                         ("call1", "call2", "call3", "call4"))
    assert [Path(p).parts[-4] for p in long_entry["sources"]] == ["2026-11-29-h200-session31"] * 3 + \
        ["2026-11-30-h200-session37"]
    assert long["problems"] == [] and (long_entry["rounds"], long_entry["rounds_run"]) == (3, 4)
    long_ratios = long["ours_mrv2_over_mrv2"][PAIR][MODE]
    line_1024 = per_round_line(long_entry["cells"], long_ratios, 1024, (1, 2), rows, same_prompts=True)
    per_round_line(long_entry["cells"], long_ratios, 1024, (8, 32), rows, same_prompts=True)
    assert f"256 in: {line_256}. 1024 in, c = 1, 2 (rounds 0–1 session 31's, round 2 this session's): {line_1024}." \
        in folded()
    c1, c2 = long_ratios["in1024/greedy/c1"]["output_tok_s"], long_ratios["in1024/greedy/c2"]["output_tok_s"]
    assert c1 >= 1.30 and c2 >= 1.15  # issue 39's designed targets
    assert f"{c1:.2f}× at c=1 (≥ 1.30×), {c2:.2f}× at c=2 (≥ 1.15×)" in folded()
    assert (S31 / "pooled" / "SET_ASIDE").read_text().startswith(
        "superseded by bench/results/2026-11-30-h200-session37/dm1k033/pooled")
    cells = {v: {**entry["cells"][v], **long_entry["cells"][v]} for v in MRV2_VARIANTS}
    tpot = {v: [c["median_tpot_ms"]["median"] for c in cells[v].values()] for v in MRV2_VARIANTS}
    assert len(tpot["mrv2"]) == 6
    assert (f"Ours' median TPOT is {min(tpot['ours_mrv2']):.2f}–{max(tpot['ours_mrv2']):.2f} ms in every cell, "
            f"against MRV2's {min(tpot['mrv2']):.2f}–{max(tpot['mrv2']):.2f} ms") in folded()


def acceptance(calls: tuple[str, ...], variant: str, concurrency: int | None = None) -> list[float]:
    return [r["result"]["spec_decode_acceptance_length"] for r in runs(calls)
            if r["variant"] == variant and concurrency in (None, r["concurrency"])]


def widest_gap(calls: tuple[str, ...], variants: tuple[str, str]) -> float:
    """The largest difference between the two servers' acceptance lengths in one cell's round."""
    by_run: dict[tuple, dict] = {}
    for r in runs(calls):
        key = (r["input_len"], r["concurrency"], r["round"])
        by_run.setdefault(key, {})[r["variant"]] = r["result"]["spec_decode_acceptance_length"]
    assert all(sorted(v) == sorted(variants) for v in by_run.values()) and len(by_run) == 6
    return max(abs(v[variants[0]] - v[variants[1]]) for v in by_run.values())


def test_acceptance_equal_on_the_same_prompts_close_on_others_and_alike_on_both_runners():
    same = [r for r in runs(("dm1k033/call4",))]
    by_cell = {}
    for r in same:
        by_cell.setdefault(r["concurrency"], {})[r["variant"]] = (r["num_prompts"], r["result"]
                                                                  ["spec_decode_acceptance_length"])
    assert sorted(by_cell) == [1, 2] and all(v["mrv2"] == v["ours_mrv2"] for v in by_cell.values())
    assert f"({by_cell[1]['mrv2'][1]:.3f} and {by_cell[2]['mrv2'][1]:.3f} in round 2)" in folded()
    prompts = {(r["variant"], r["concurrency"]) for r in runs(MRV2_CALLS[:1])}
    counts = {key: {r["num_prompts"] for r in runs(MRV2_CALLS[:1]) if (r["variant"], r["concurrency"]) == key}
              for key in prompts}
    assert all(len(n) == 1 for n in counts.values())
    n = {key: v.pop() for key, v in counts.items()}
    assert (f"{n['mrv2', 8]} and {n['mrv2', 32]} prompts a run on MRV2 at c = 8, 32, {n['ours_mrv2', 8]} and "
            f"{n['ours_mrv2', 32]} on ours") in folded()
    mrv2, ours = acceptance(MRV2_CALLS[:1], "mrv2"), acceptance(MRV2_CALLS[:1], "ours_mrv2")
    assert (f"{min(mrv2):.3f}–{max(mrv2):.3f} on MRV2, {min(ours):.3f}–{max(ours):.3f} on ours, at most "
            f"{widest_gap(MRV2_CALLS[:1], MRV2_VARIANTS):.3f} apart in a round") in folded()
    up, ours_v1 = acceptance(V1_CALLS, "upstream_v1"), acceptance(V1_CALLS, "ours")
    assert (f"**Acceptance length {min(up):.3f}–{max(up):.3f} on upstream, {min(ours_v1):.3f}–{max(ours_v1):.3f} on "
            f"ours**, of different prompt sets (sized per variant), at most "
            f"{widest_gap(V1_CALLS, V1_VARIANTS):.3f} apart") in folded()
    # ours on MRV2 and ours on V1 ran the same 320 prompts at c=32: the same acceptance, run by run
    at_32 = {v: [(r["round"], r["num_prompts"], r["result"]["spec_decode_acceptance_length"])
                 for r in runs(calls) if r["variant"] == v and r["concurrency"] == 32]
             for v, calls in (("ours_mrv2", MRV2_CALLS[:1]), ("ours", V1_CALLS))}
    assert len(at_32["ours"]) == 3 and sorted(at_32["ours_mrv2"]) == sorted(at_32["ours"])
    assert {n for _, n, _ in at_32["ours"]} == {320}
    lengths = [f"{a:.5f}" for _, _, a in sorted(at_32["ours"])]
    printed = ", ".join(lengths[:-1]) + f" and {lengths[-1]}"
    assert f"320 prompts (below): {printed} in rounds 0, 1, 2." in folded()


def first_prefix_hit(log: str) -> tuple[int, str]:
    """The time and the rate, as printed, of the first engine-stats line with a prefix-cache hit rate above 0%."""
    for line in log.splitlines():
        found = re.search(r"Prefix cache hit rate: ([\d.]+)%", line)
        if found and float(found.group(1)) > 0:
            return log_time(line), found.group(1)
    raise AssertionError("no prefix-cache hit")


def test_compiles_after_boot_mrv2_one_kernel_ours_none():
    for call in MRV2_CALLS:
        report = call_report(call)
        logs = RUN / call / "serve-bench"
        assert report["variants"]["ours_mrv2"]["jit_after_boot"] == [] and jit_compiles(
            logs / "server_ours_mrv2.log.gz") == [], call
        # the same kept server's log in both calls: the one compile, in call 1
        assert jit_compiles(logs / "server_mrv2.log.gz") == ["_prepare_prefill_inputs_kernel"], call
    log = gzip.open(RUN / MRV2_CALLS[0] / "serve-bench" / "server_mrv2.log.gz", "rt").read()
    (line,) = [x for x in log.splitlines() if "JIT compilation during inference" in x]
    when, (hit_at, hit) = log_time(line), first_prefix_hit(log)
    assert abs(when - hit_at) < 10, (when, hit_at)  # "in the same 10 s"
    assert "12:42:44" in line and "logged `_prepare_prefill_inputs_kernel` on MRV2's server at 12:42:44" in folded()
    assert f"its first prefix-cache hit ({hit}%)" in folded()
    mrv2_runs = [r for r in call_report(MRV2_CALLS[0])["runs"] if r["variant"] == "mrv2"]
    assert ("round 2's run at 256 in, c=32" in folded() and
            max(r["round"] for r in mrv2_runs if r["concurrency"] == 32) == 2)
    compared = 0
    for call in V1_CALLS:
        upstream = upstream_compiles_ours_none(call_report(call), RUN / call / "serve-bench")
        assert len(upstream) == 6, upstream
        compared += 1
    assert compared == 2 and "**No compile after boot on ours; upstream compiled six kernels**" in folded()


def test_ours_replayed_its_graphs_on_both_runners():
    n = speculator_counts(FOLDER, MRV2_CALLS)
    assert n["loops_after"] == n["loops_before"]
    assert (f"{n['decode']:,} decode-step and {n['step0']:,} step-0 replays over both calls, {n['eager_step0']:,} "
            f"eager step-0 passes") in folded()
    assert f"no eager decode loop after boot ({n['loops_before']} at boot, {n['loops_after']} after call 4)" \
        in folded()
    facts = [{f["when"]: f for f in call_report(call)["variants"]["ours"]["facts"]} for call in V1_CALLS]
    assert facts[1]["before"]["replays"] == facts[0]["after"]["replays"]  # the same kept server
    before, after = facts[0]["before"]["replays"], facts[1]["after"]["replays"]
    chain, first = after["chain"] - before.get("chain", 0), after["first"] - before.get("first", 0)
    assert chain > 0 and first > 0 and all(f[w]["eager_keys"] == {} for f in facts for w in f)
    assert f"{chain:,} chain-step and {first:,} first-pass replays over both calls, no eager key" in folded()


def test_the_v1_table_its_rounds_and_its_p99_itl():
    s, entry = ResultsFolder(RUN, RUN / "dm256v026").pooled_entry(PAIR, MODE, "0.26.0", ("call1", "call2"))
    assert s["problems"] == [] and len(s["made_up"]) == 1 and (entry["rounds"], entry["rounds_run"]) == (3, 3)
    rows = rows_by_c(FOLDER.section("## V1 (vLLM 0.26.0)"), "256")
    rows = {(int(n), c): row for (n, c), row in rows.items()}
    assert sorted(rows) == [(256, 8), (256, 32)]
    ratios = s["ours_over_upstream_v1"][PAIR][MODE]
    line = per_round_line(entry["cells"], ratios, 256, (8, 32), rows, same_prompts=False,
                          variants=V1_VARIANTS)
    assert f"**Ours is ahead in every round:** {line}." in folded()
    c8, c32 = ratios["in256/greedy/c8"]["output_tok_s"], ratios["in256/greedy/c32"]["output_tok_s"]
    assert f"({c8:.2f}× at c=8, {c32:.2f}× at c=32;" in folded()
    cells = entry["cells"]
    tpot = {c: {v: cells[v][f"in256/greedy/c{c}"]["median_tpot_ms"]["median"] for v in V1_VARIANTS} for c in (8, 32)}
    assert (f"Ours' median TPOT {tpot[8]['ours']:.2f} ms against {tpot[8]['upstream_v1']:.2f} ms at c=8, "
            f"{tpot[32]['ours']:.2f} against {tpot[32]['upstream_v1']:.2f} ms at c=32") in folded()
    itl = {c: {v: sorted((r["round"], r["result"]["p99_itl_ms"]) for r in runs(V1_CALLS)
                         if r["variant"] == v and r["concurrency"] == c) for v in V1_VARIANTS} for c in (8, 32)}
    pairs = ", ".join(f"{o:.1f} / {u:.1f}" for (_, o), (_, u) in zip(itl[8]["ours"], itl[8]["upstream_v1"]))
    moves = {v: max(x for _, x in itl[8][v]) / min(x for _, x in itl[8][v]) for v in V1_VARIANTS}
    assert (f"(round by round {pairs} ms, ours / upstream: upstream's moved {moves['upstream_v1']:.1f}× between "
            f"rounds, ours' {moves['ours']:.1f}×)") in folded()
    p99 = {c: {v: cells[v][f"in256/greedy/c{c}"]["p99_itl_ms"]["median"] for v in V1_VARIANTS} for c in (8, 32)}
    assert (f"{p99[32]['ours']:.2f} / {p99[32]['upstream_v1']:.2f} ms at c=32; at c=8 ours' {p99[8]['ours']:.2f} ms "
            f"against upstream's {p99[8]['upstream_v1']:.2f} ms") in folded()
    prompts = {v: {r["num_prompts"] for r in runs(V1_CALLS) if r["variant"] == v and r["concurrency"] == 8}
               for v in V1_VARIANTS}
    assert prompts == {"ours": {96}, "upstream_v1": {48}} and "twice upstream's prompts (96 to 48 at c=8" in folded()
    high_c = ResultsFolder(ROOT / "bench/results/2026-11-30-h200-session34",
                           ROOT / "bench/results/2026-11-30-h200-session34/dm832026").summary()
    ratios_1024 = high_c["ours_over_upstream_v1"][PAIR][MODE]
    assert (f"at 1024 in session 34's pool gave\n  {ratios_1024['in1024/greedy/c8']['output_tok_s']:.2f}× and "
            f"{ratios_1024['in1024/greedy/c32']['output_tok_s']:.2f}×") in readme()


def test_the_warm_up_line_boots_and_warm_runs():
    ours = gzip.open(RUN / V1_CALLS[0] / "serve-bench" / "server_ours.log.gz", "rt").read()
    (line,) = [x for x in ours.splitlines() if "portable_spec: kernel warm-up:" in x]
    found = re.search(r"kernel warm-up: (\d+) steps .*? in ([\d.]+) s; (\d+) Triton compiles .*?Triton builds: (\d+) "
                      r"compiled, (\d+) from the disk cache (\S+);", line)
    steps, seconds, compiles, built, cached, folder = found.groups()
    assert int(built) > 0 and int(cached) == 0
    assert folder.endswith("/inductor_cache/triton/0") and "/torch_compile_cache/torch_aot_compile/" in folder
    assert (f"`kernel warm-up: {steps} steps … in {seconds} s; {compiles} Triton compiles … Triton builds: {built} "
            f"compiled, {cached}\n  from the disk cache`") in readme()
    # session 33's boots: a loading boot (vLLM's compiled model from its cache) of the 19-step plan still took as
    # long; the 9-step plan's did not
    s33 = ROOT / "bench" / "results" / "2026-11-30-h200-session33"
    warm_ups = {}
    for call in ("dmd026/call4", "dmd026/call5", "dmp026/call1", "dmp026/call2"):
        log = gzip.open(s33 / call / "serve-bench" / "server_ours.log.gz", "rt").read()
        (found,) = re.findall(r"kernel warm-up: (\d+) steps .*? in ([\d.]+) s", log)
        warm_ups[call] = (int(found[0]), found[1], "Directly load AOT compilation" in log)
    assert [(n, loaded) for n, _, loaded in warm_ups.values()] == [(19, False), (19, True), (9, False), (9, True)]
    assert (f"the same 19-step warm-up took {warm_ups['dmd026/call5'][1]} s ({warm_ups['dmd026/call4'][1]} s in "
            f"`call4`'s boot before it), while `dmp026/call2`, a loading boot with the 9-step plan of c ≤ 2, took "
            f"{warm_ups['dmp026/call2'][1]} s against `call1`'s {warm_ups['dmp026/call1'][1]} s") in folded()
    upstream = gzip.open(RUN / V1_CALLS[0] / "serve-bench" / "server_upstream_v1.log.gz", "rt").read()
    (o_total, o_compile), (u_total, u_compile) = init_engine(ours), init_engine(upstream)
    assert (f"vLLM's \"init engine\" took {o_total} s on ours against {u_total} s on upstream in the same boot "
            f"({o_compile} s and {u_compile} s of it torch.compile)") in folded()
    boots = {call: {v: info["boots"][0]["seconds"] for v, info in call_report(call)["variants"].items()}
             for call in (MRV2_CALLS[0], V1_CALLS[0])}
    assert (f"booted in {boots[MRV2_CALLS[0]]['mrv2']:.1f} s (MRV2) and {boots[MRV2_CALLS[0]]['ours_mrv2']:.1f} s "
            f"(ours)") in folded()
    assert (f"the two 0.26.0 servers in {boots[V1_CALLS[0]]['upstream_v1']:.1f} s (upstream) and "
            f"{boots[V1_CALLS[0]]['ours']:.1f} s (ours)") in folded()
    console = gzip.open(RUN / V1_CALLS[0] / "console.log.gz", "rt").read()
    assert "/tmp/site holds FlashInfer 0.6.14, not 0.7.2.post1: no ahead-of-time module placed" in console
    reports = {call: call_report(call) for call in MRV2_CALLS + V1_CALLS}
    assert [reports[c]["rounds_done"] for c in reports] == [3, 1, 2, 1]
    assert [reports[c]["problems"] != [] for c in reports] == [False, False, True, False]
    for call in (MRV2_CALLS[1], V1_CALLS[1]):
        assert reports[call]["phases_s"]["boot_s"] == 0.0 and all(
            b["seconds"] == 0.0 and b["reused"] for info in reports[call]["variants"].values()
            for b in info["boots"]), call
    skipped = {c: sorted((w["variant"], w["cell"]) for w in reports[c].get("warm_skipped") or []) for c in reports}
    assert skipped == {"dm256033/call1": [], "dm1k033/call4": [], "dm256v026/call1": [],
                       "dm256v026/call2": [("ours", "in256/greedy/c32"), ("upstream_v1", "in256/greedy/c32")]}
    warm = {c: reports[c]["phases_s"]["warm_s"] for c in reports}
    assert f"call 1 (0.33.0) warmed both cells in {warm['dm256033/call1']:.1f} s" in folded()
    assert f"call 4 warmed its cells, new to the kept servers, in {warm['dm1k033/call4']:.1f} s" in folded()
    assert f"and warmed in {warm['dm256v026/call2']:.1f} s" in folded()
    c1 = {r["variant"]: r["duration_s"] for r in reports["dm1k033/call4"]["runs"] if r["concurrency"] == 1}
    assert f"The MRV2 c=1 runs lasted {c1['mrv2']:.2f} s (14 prompts sized in session 31), ours' " \
           f"{c1['ours_mrv2']:.2f} s" in folded()


def test_the_refused_call():
    folder = RUN / "dmp026" / "call6-refused"
    lane = json.loads((folder / "cuda_lane.json").read_text())
    assert lane["stages"] == {"serve-bench": 2} and lane["commit"].startswith(COMMIT)
    console = gzip.open(folder / "console.log.gz", "rt").read()
    found = re.search(r"--budget-s (\d+) cannot hold one round: the call --sizing-from names booted in ([\d.]+) s and "
                      r"ran these cells' timed runs in ([\d.]+) s, plus (\d+) s to stop and report = ([\d.]+) s; "
                      r"raise --budget-s \(SERVE_BENCH_BUDGET\) to (\d+) or more", console)
    budget, boot, timed, stop, total, need = found.groups()
    assert round(float(boot) + float(timed) + float(stop), 1) == float(total)
    assert re.search(rf"=== serve-bench: exit 2 in (\d) s ===", console)
    assert (f"reckoning with the boot ({boot} s) and the\n  timed runs ({timed} s) of the call `--sizing-from` names "
            f"plus {stop} s to stop and report, asked for {need} s where the call\n  had {budget}") in readme()
    assert not list(folder.rglob("serve_bench.json*"))  # refused before it wrote a report
