"""Session 48's results README (one H200, vLLM 0.26.0) read back from its JSON and logs: the MoE pair's 1024-token
cells at c = 8, 32 pooled to three rounds with session 47's round, and its first two rounds at 4096 in, c = 1, 2, 8,
under budgets set from the lease's clock."""

from __future__ import annotations

import functools
import gzip
from pathlib import Path

import pytest

from portable_spec_harness.serve_bench import coverage
from results_readback import (EAGLE_DRAFTERS, ResultsFolder, check_draft_v1_call, check_runs_archived,
                              check_triton_keys_logged, checked_coverage, checked_issue41_pool, checked_issue41_rows,
                              checked_p99_neighbours, jit_compiles, merged_pools, no_compile_after_boot)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
RUN = RESULTS / "2026-12-01-h200-session48"
S47 = "2026-12-01-h200-session47"
MOE_PAIR = ("qwen3moe30b_eagle3", "dummy")
MOE1K832 = ResultsFolder(RUN, RUN / "moe1k832")
MOE4KG = ResultsFolder(RUN, RUN / "moe4kg")
MOE4KS = ResultsFolder(RUN, RUN / "moe4ks")
SERVING = [(MOE1K832, "call1"), (MOE1K832, "call2"), (MOE4KG, "call1"), (MOE4KS, "call1")]
UPSTREAM_MOE = ["eagle_prepare_next_token_padded_kernel", "eagle_step_slot_mapping_metadata_kernel",
                "rejection_greedy_sample_kernel", "eagle_prepare_inputs_padded_kernel"]


def folded() -> str:
    return MOE1K832.folded()


def test_every_serving_call_ran_7393d8c_on_the_v1_runner():
    assert sum(check_draft_v1_call(folder.call_report(call), call, "7393d8c", "dummy", tree_changes=0,
                                   drafters=EAGLE_DRAFTERS) for folder, call in SERVING) == 8
    for folder, call in SERVING:
        report = folder.call_report(call)
        check_triton_keys_logged(report, call)
        assert report["placement"]["mode"] == "together" and report["short_runs"] == [], call
        console = gzip.decompress((folder.bench / call / "console.log.gz").read_bytes()).decode()
        assert "placed 1 FlashInfer 0.6.14 module(s) of sm_90" in console, call
    for call in ("call1", "call2"):
        report = MOE1K832.call_report(call)
        assert (report["workload"]["max_model_len"], report["workload"]["max_num_seqs"],
                report["placement"]["per_server_gib"]) == (1232, 32, 68.23)
    assert "`7393d8c`, `tree_changes` 0 in every call" in folded()


def test_the_chains_kept_and_reused_their_servers():
    first, second = (MOE1K832.call_report(c) for c in ("call1", "call2"))
    greedy, sampled = MOE4KG.call_report("call1"), MOE4KS.call_report("call1")
    for keeper, reuser, registry in ((first, second, "/tmp/kept1k.json"), (greedy, sampled, "/tmp/kept4k.json")):
        assert keeper["kept_servers"]["registry"] == registry and reuser.get("kept_servers") is None
        for info in reuser["variants"].values():
            (boot,) = info["boots"]
            assert boot["seconds"] == 0.0 and boot["reused"]["registry"] == registry
    skipped = {(w["variant"], w["cell"]) for w in second["warm_skipped"]}
    assert len(skipped) == 6 and {c for _, c in skipped} == {"in1024/greedy/c32", "in1024/sampled/c8",
                                                             "in1024/sampled/c32"}
    assert "their warm runs skipped in three of the four cells" in folded()
    assert {v: info["not_reused"] for v, info in greedy["variants"].items()} == {
        "upstream_v1": "its vllm serve arguments differ", "ours": "its vllm serve arguments differ"}
    assert '("its vllm serve arguments differ") and booted' in folded()


def test_the_moe_1024_rows_at_c8_c32_pool_three_rounds_and_meet_the_targets():
    cells = checked_issue41_pool(MOE1K832, MOE_PAIR, ("call1", "call1", "call2"), [S47, RUN.name, RUN.name], 1024,
                                 (8, 32), "## Issue 41: the MoE pair at 1024 in, c = 8, 32", [0.992, 0.996], runs=24)
    up, ours = cells["upstream_v1"], cells["ours"]
    c8 = "in1024/greedy/c8"
    tpot = [ours[c8]["median_tpot_ms"]["all"], up[c8]["median_tpot_ms"]["all"]]
    assert all(abs(o / u - 1) < 0.01 for o, u in zip(*tpot))
    assert (f"({min(tpot[0]):.2f}–{max(tpot[0]):.2f}\n  against {min(tpot[1]):.2f}–{max(tpot[1]):.2f} ms greedy)"
            in MOE1K832.readme())
    for sampling in ("greedy", "sampled"):  # round 2 is the one below 1.0 in each sampling, at c=8
        key = f"in1024/{sampling}/c8"
        per_round = [o / u for o, u in zip(ours[key]["output_throughput"]["all"], up[key]["output_throughput"]["all"])]
        assert [r < 1.0 for r in per_round] == [False, False, True], per_round
    c32 = "in1024/greedy/c32"
    stalls = [up[c32]["stall_total_ms"]["all"], ours[c32]["stall_total_ms"]["all"]]
    assert all(s > 0 for s in stalls[0] + stalls[1])
    assert (f"upstream V1 {min(stalls[0]):.1f}–{max(stalls[0]):.1f} ms in all per run, ours "
            f"{min(stalls[1]):.1f}–{max(stalls[1]):.1f} ms, greedy") in folded()
    assert {s for by in cells.values() for k, cell in by.items() if k.endswith("/c8")
            for s in cell["stall_total_ms"]["all"]} == {0}
    ttft = [cells[v][c32]["p99_ttft_ms"]["median"] for v in ("ours", "upstream_v1")]
    assert f"ours' p99 TTFT is lower ({ttft[0]:.2f} against {ttft[1]:.2f} ms greedy)" in folded()
    assert no_compile_after_boot(MOE1K832, ("call1", "call2"), ("ours",)) == 2
    for call in ("call1", "call2"):
        assert jit_compiles(MOE1K832.bench / call / "serve-bench" / "server_upstream_v1.log.gz") == \
            [*UPSTREAM_MOE, "_topk_topp_kernel", "fused_moe_kernel"]


@functools.cache
def merged_4096() -> tuple[dict, dict]:
    """The greedy and the sampled pool at 4096 in as one (cells per variant, ratios): the README's table of two
    samplings from two pools of the same servers."""
    pools = []
    for folder in (MOE4KG, MOE4KS):
        summary, entry = folder.pooled_entry(*MOE_PAIR, "0.26.0", ("call1",))
        assert entry["rounds"] == 2 and len(summary["problems"]) == 1
        assert [Path(p).parts[2:4] for p in entry["sources"]] == [(RUN.name, folder.bench.name)]
        pools.append((summary, entry))
    return merged_pools(pools, MOE_PAIR)


def test_the_moe_4096_rows_two_rounds():
    cells, ratios = merged_4096()
    tok, itl, rounds = checked_issue41_rows(MOE4KG, cells, ratios, 4096, (1, 2, 8), rounds=2,
                                            title="## The MoE pair at 4096 in, c = 1, 2, 8")
    assert len(rounds) == 12 and sorted(r for r in rounds if r < 1.0) == [0.969, 0.993]
    assert f"{ratios['in4096/sampled/c8']['output_tok_s']:.3f}" == "1.000"
    assert "sampled c=8 is at parity over two rounds (ratio of the\n  medians 1.000), one round each side of it" \
        in MOE4KG.readme()
    up, ours = cells["upstream_v1"], cells["ours"]
    spans = []
    for key in ("in4096/greedy/c1", "in4096/sampled/c1"):
        o, u = ours[key]["median_tpot_ms"]["all"], up[key]["median_tpot_ms"]["all"]
        assert max(o) < min(u)
        spans.append((f"{min(o):.2f}–{max(o):.2f}", f"{min(u):.2f}–{max(u):.2f}"))
    assert (f"ours' median TPOT {spans[0][0]} ms greedy and {spans[1][0]} ms sampled in both rounds, against upstream "
            f"V1's {spans[0][1]} and {spans[1][1]} ms") in MOE4KG.folded()
    key = "in4096/sampled/c8"
    o, u = ours[key]["median_tpot_ms"]["all"], up[key]["median_tpot_ms"]["all"]
    assert f"{min(u):.2f}" == f"{max(u):.2f}"
    assert f"(median TPOT {min(o):.2f}–{max(o):.2f} against {min(u):.2f} ms sampled)" in MOE4KG.folded()
    for key in cells["ours"]:
        stalled = any(s > 0 for v in cells for s in cells[v][key]["stall_total_ms"]["all"])
        assert stalled == key.endswith("/c8"), key
    assert {a for v in cells.values() for cell in v.values() for a in cell["spec_decode_acceptance_length"]["all"]} \
        == {1.0}


def test_the_4096_calls_budgets_and_compiles():
    greedy, sampled = MOE4KG.call_report("call1"), MOE4KS.call_report("call1")
    for report, budget in ((greedy, 467), (sampled, 360)):
        assert report["settings"]["budget_s"] == budget
        assert (report["status"], report["rounds_done"], report["stopped_because"]) == \
            ("incomplete", 2, f"--budget-s {budget} would be passed")
        assert report["phases_s"]["total_s"] + report["phases_s"]["round_estimate_s"] > budget - 15
        assert (report["workload"]["max_model_len"], report["workload"]["max_num_seqs"]) == (4304, 8)
    gp, sp = greedy["phases_s"], sampled["phases_s"]
    text = MOE4KG.folded()
    assert (f"the greedy call's boot {gp['boot_s']:.1f} s, warm runs {gp['warm_s']:.1f} s and the next round's "
            f"estimate of {gp['round_estimate_s']:.1f} s would have passed its 467 s budget; the sampled call's warm "
            f"runs took {sp['warm_s']:.1f} s and its next round's estimate was {sp['round_estimate_s']:.1f} s "
            "against 360 s") in text
    placement = greedy["placement"]
    assert f"estimated {placement['per_server_gib']} GiB each, {placement['kv_cache_gib']:.2f} GiB of it KV" in text
    assert 2 * (placement["per_server_gib"] + 3 * placement["kv_cache_gib"]) > placement["free_gib"]
    assert no_compile_after_boot(MOE4KG, ("call1",), ("ours",)) == 1
    assert no_compile_after_boot(MOE4KS, ("call1",), ("ours",)) == 1
    logs = [folder.bench / "call1" / "serve-bench" / "server_upstream_v1.log.gz" for folder in (MOE4KG, MOE4KS)]
    assert jit_compiles(logs[0]) == UPSTREAM_MOE
    assert jit_compiles(logs[1]) == [*UPSTREAM_MOE, "_topk_topp_kernel"]
    lanes = [(folder.bench / "call1" / "console.log.gz") for folder in (MOE4KG, MOE4KS)]
    assert all("serve-bench: exit 1" in gzip.decompress(p.read_bytes()).decode() for p in lanes)


def test_issue_41s_coverage_counts_the_moe_1024_cells_at_c8_c32():
    rows = checked_coverage(coverage.ISSUE_41, RESULTS, ROOT, (RUN.name, S47), folded(), (120, 68, 67, 64),
                            (*MOE_PAIR, "upstream_v1"))
    counted = {c["cell"] for c in rows if c["counted"]}
    assert {f"in1024/{s}/c{c}" for s in ("greedy", "sampled") for c in (8, 32)} <= counted
    assert all(c["meets"] for c in rows if c["counted"])
    assert not any(c["counted"] for c in rows if c["cell"].startswith("in4096/"))
    assert all(m["summary"].startswith(f"bench/results/{RUN.name}/moe1k832/") for c in rows
               if c["cell"].startswith("in1024/") and c["cell"].endswith(("/c8", "/c32"))
               for m in c["measurements"] if m["counted"])
    report = coverage.coverage(coverage.ISSUE_41, RESULTS, ROOT)
    table = coverage.markdown(report, coverage.TABLES["issue41"])
    readme = (ROOT / "README.md").read_text()
    for sampling in ("greedy", "sampled"):
        row = next(line for line in table.splitlines() if line.startswith(
            f"| qwen3moe30b_eagle3 | dummy | ours / upstream_v1 | 1024 | {sampling} |"))
        assert "(" not in row and row in readme, row
    # the two-round pools at 4096 in (shown as "(2r)" then): a later pool of them and a third round replaces each
    aside = {a["summary"]: a["why"] for a in report["set_aside"]}
    for name in ("moe4kg", "moe4ks"):
        why = aside[f"bench/results/{RUN.name}/{name}/pooled/serve_bench_summary.json"]
        assert why.startswith(f"superseded by bench/results/2026-12-02-h200-session49/{name}/pooled")


def test_the_main_readme_gives_the_moe_rows():
    readme = " ".join((ROOT / "README.md").read_text().split())
    ratios = MOE1K832.summary()["ours_over_upstream_v1"][MOE_PAIR[0]][MOE_PAIR[1]]
    tok = {s: [ratios[f"in1024/{s}/c{c}"]["output_tok_s"] for c in (8, 32)] for s in ("greedy", "sampled")}
    itl = max(r["p99_itl_ms"] for r in ratios.values())
    assert (f"and at c = 8 / 32 {tok['greedy'][0]:.2f} / {tok['greedy'][1]:.2f} greedy and {tok['sampled'][0]:.2f} / "
            f"{tok['sampled'][1]:.2f} sampled, ours' p99 ITL at most {itl:.2f}× upstream's") in readme
    # the main README's 4096-token sentence is session 49's since (its read-back checks it)


@pytest.mark.parametrize("folder,call", SERVING)
def test_every_runs_folder_here_is_one_archive(folder, call):
    check_runs_archived(folder, call)


def test_each_runs_p99_neighbours_bracket_its_p99_itl():
    """``itl_stalls.p99_neighbours`` (new in ``7393d8c``) on the GPU: in every timed run the two gaps sit at the
    ranks numpy's p99 interpolates between (``client.p99_ranks``) and bracket the p99 ITL vLLM's bench reported."""
    checked = checked_p99_neighbours(SERVING)
    assert checked == 40 and f"in all {checked} timed runs of this session" in folded()
    example = {run["variant"]: run["result"] for run in MOE1K832.call_report("call1")["runs"]
               if (run["concurrency"], run["sampling"]) == (32, "greedy")}
    ours, up = example["ours"], example["upstream_v1"]
    ranks = [n["rank"] for n in ours["itl_stalls"]["p99_neighbours"]]
    assert (f"ours' p99 ({ours['p99_itl_ms']:.2f} ms) fell between its {ranks[0]}th and {ranks[1]}th longest gaps of "
            f"{ours['itl_stalls']['itls']:,}, with {ours['itl_stalls']['gaps_over_threshold']} gaps of 100 ms or more "
            f"against upstream V1's {up['itl_stalls']['gaps_over_threshold']} (whose p99 was "
            f"{up['p99_itl_ms']:.2f} ms)") in folded()
