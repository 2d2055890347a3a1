"""Session 46's results README (one H200, vLLM 0.26.0) read back from its JSON and logs: the MoE pair's 128-token rows
pooled to three rounds on servers kept through the calls (issue 41), its first 1024-token round, the client import
off the first run, and the host readings of one lease."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from portable_spec_harness.serve_bench import coverage
from results_readback import (EAGLE_DRAFTERS, ResultsFolder, check_draft_v1_call, check_runs_archived,
                              check_triton_keys_logged, checked_counted_row, checked_coverage, checked_issue41_rows,
                              checked_issue41_targets, compile_and_init, jit_compiles, no_compile_after_boot,
                              server_log)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
RUN = RESULTS / "2026-12-01-h200-session46"
S45 = "2026-12-01-h200-session45"
MOE_PAIR = ("qwen3moe30b_eagle3", "dummy")
MOE = ResultsFolder(RUN, RUN / "moe")
MOE1K = ResultsFolder(RUN, RUN / "moe1k")
S45_MOE = ResultsFolder(RESULTS / S45, RESULTS / S45 / "moe")
KEPT = "/tmp/serve_bench_kept.json"
CALLS = ("call1", "call2", "call3")
ALL = [(MOE, c) for c in CALLS] + [(MOE1K, "call1"), (MOE1K, "call2")]
UPSTREAM_FIRST = ["eagle_prepare_next_token_padded_kernel", "eagle_step_slot_mapping_metadata_kernel",
                  "rejection_greedy_sample_kernel", "eagle_prepare_inputs_padded_kernel"]


def folded() -> str:
    return MOE.folded()


def test_every_call_ran_a5d6410_on_the_v1_runner_on_one_pair_of_kept_servers():
    assert sum(check_draft_v1_call(folder.call_report(call), call, "a5d6410", "dummy", tree_changes=0,
                                   drafters=EAGLE_DRAFTERS) for folder, call in ALL) == 10
    shapes, first_boots = set(), set()
    for folder, call in ALL:
        report = folder.call_report(call)
        assert report["pair"]["name"] == MOE_PAIR[0], call
        assert report["workload"]["max_model_len"] == 1232 and report["workload"]["max_num_seqs"] == 32, call
        assert report["placement"]["mode"] == "together" and report["placement"]["per_server_gib"] == 68.23, call
        check_triton_keys_logged(report, call)
        shapes |= {(v, tuple(info["serve_args"])) for v, info in report["variants"].items()}
        if (folder, call) != (MOE, "call1"):
            assert all(info["boots"][0]["reused"]["registry"] == KEPT for info in report["variants"].values()), call
            first_boots |= {(v, info["boots"][0]["reused"]["first_boot"]["port"])
                            for v, info in report["variants"].items()}
        console = gzip.decompress((folder.bench / call / "console.log.gz").read_bytes()).decode()
        assert "placed 1 FlashInfer 0.6.14 module(s) of sm_90" in console, call
    assert len(shapes) == 2  # one set of vllm serve arguments per variant in all five calls
    booted = MOE.call_report("call1")["variants"]
    assert first_boots == {(v, info["boots"][0]["port"]) for v, info in booted.items()}  # the boot call's servers
    assert "`a5d6410`, `tree_changes` 0 in every call" in folded()
    assert "estimated 68.23 GiB each" in folded() and "`--max-model-len 1232`, 32 sequences" in folded()


def test_the_128_token_rows_pool_three_rounds_meet_the_targets_and_compile_nothing_after_boot():
    summary, entry = MOE.pooled_entry(*MOE_PAIR, "0.26.0", CALLS)
    assert summary["problems"] == [] and entry["rounds"] == 3
    cells, ratios = entry["cells"], summary["ours_over_upstream_v1"][MOE_PAIR[0]][MOE_PAIR[1]]
    tok, itl, rounds = checked_issue41_rows(MOE, cells, ratios, 128, (1, 2, 8, 32), rounds=3)
    assert len(rounds) == 24 and sorted(r for r in rounds if r < 1.0) == [0.916, 0.996, 0.998]
    shortest = checked_issue41_targets(MOE, cells, tok, itl, runs=48)
    assert f"Acceptance length 1.000 on both servers in every run. Every timed run lasted {shortest:.1f} s" in folded()
    assert no_compile_after_boot(MOE, CALLS, ("ours",)) == 3
    assert no_compile_after_boot(MOE1K, ("call1", "call2"), ("ours",)) == 2
    logs = {call: jit_compiles(MOE.bench / call / "serve-bench" / "server_upstream_v1.log.gz") for call in CALLS}
    assert logs == {"call1": UPSTREAM_FIRST, "call2": UPSTREAM_FIRST,
                    "call3": [*UPSTREAM_FIRST, "fused_moe_kernel", "_topk_topp_kernel"]}
    assert ("`rejection_greedy_sample_kernel` and `eagle_prepare_inputs_padded_kernel` after boot by the end of "
            "`moe/call1` (c = 1, 2), and `fused_moe_kernel` and `_topk_topp_kernel` too by the end of `moe/call3`"
            in folded())
    log = server_log(MOE, "call1", "ours")
    assert "MoE size warm-up: 20 token counts in (256, 8192]" in log and "fused_moe_kernel x12" in log
    assert "kernel warm-up: 19 steps" in log
    assert MOE.call_report("call1")["variants"]["ours"]["facts"][0]["warmup_stats"]["uncovered"] == []


def test_the_gain_is_at_c1_and_the_rounds_below_one():
    _, entry = MOE.pooled_entry(*MOE_PAIR, "0.26.0", CALLS)
    cells = entry["cells"]
    up, ours = cells["upstream_v1"], cells["ours"]

    def tpot(variant: dict, key: str) -> float:
        return variant[key]["median_tpot_ms"]["median"]

    assert (f"at c=1 ours' median TPOT is {tpot(ours, 'in128/greedy/c1'):.2f} / {tpot(ours, 'in128/sampled/c1'):.2f} "
            f"ms against {tpot(up, 'in128/greedy/c1'):.2f} / {tpot(up, 'in128/sampled/c1'):.2f} ms") in folded()
    later = [k for k in ours if not k.endswith("/c1")]
    assert len(later) == 6 and all(abs(tpot(ours, k) / tpot(up, k) - 1) < 0.01 for k in later)
    _, ratios = MOE.summary(), MOE.summary()["ours_over_upstream_v1"][MOE_PAIR[0]][MOE_PAIR[1]]
    later_tok = [ratios[k]["output_tok_s"] for k in later]
    assert f"the ratio of the medians {min(later_tok):.3f}–{max(later_tok):.3f}" in folded()
    key = "in128/sampled/c8"
    slow = ours[key]["median_tpot_ms"]["all"]
    assert slow[2] > 1.1 * max(slow[:2])
    assert (f"ours' median TPOT {slow[2]:.2f} ms against {slow[0]:.2f} / {slow[1]:.2f} ms in its rounds 0–1, while "
            f"upstream V1's stayed {min(up[key]['median_tpot_ms']['all']):.2f}–"
            f"{max(up[key]['median_tpot_ms']['all']):.2f} ms") in folded()
    assert (f"(ours {ours[key]['stall_total_ms']['all'][2]:.1f} ms, upstream V1 "
            f"{up[key]['stall_total_ms']['all'][2]:.1f} ms)") in folded()
    stalls = {v: [s for k, cell in by.items() for s in cell["stall_total_ms"]["all"] if s > 0]
              for v, by in cells.items()}
    quiet = [s for by in cells.values() for k, cell in by.items() if k.endswith(("/c1", "/c2"))
             for s in cell["stall_total_ms"]["all"]]
    assert len(quiet) == 24 and set(quiet) == {0}
    assert (f"upstream V1 in {len(stalls['upstream_v1'])} of the 12 (round, cell) runs of c = 8, 32 "
            f"({min(stalls['upstream_v1']):.1f}–{max(stalls['upstream_v1']):.1f} ms), ours in {len(stalls['ours'])} "
            f"({min(stalls['ours']):.1f}–{max(stalls['ours']):.1f} ms); none at c = 1, 2") in folded()


def test_the_1024_token_round_is_shown_not_counted_and_its_gap_is_ttft():
    summary = MOE1K.summary()
    entry = summary["pairs"][MOE_PAIR[0]][MOE_PAIR[1]]
    assert summary["problems"] == [] and entry["rounds"] == 1
    assert [Path(p).parts[-2] for p in entry["sources"]] == ["call1"]
    cells, ratios = entry["cells"], summary["ours_over_upstream_v1"][MOE_PAIR[0]][MOE_PAIR[1]]
    tok, _, _ = checked_issue41_rows(MOE1K, cells, ratios, 1024, (1, 2), rounds=1,
                                     title="## The MoE pair at 1024-token prompts", per_round_sentence=False)
    assert [t < 1.0 for t in tok] == [False, True, False, True]  # c=2 below upstream V1 in both samplings
    up, ours = cells["upstream_v1"], cells["ours"]
    for sampling in ("greedy", "sampled"):
        key = f"in1024/{sampling}/c2"
        assert abs(ours[key]["median_tpot_ms"]["median"] / up[key]["median_tpot_ms"]["median"] - 1) < 0.002
        assert ours[key]["median_ttft_ms"]["median"] > up[key]["median_ttft_ms"]["median"] + 10
    g, s = "in1024/greedy/c2", "in1024/sampled/c2"
    assert (f"ours' median TTFT {ours[g]['median_ttft_ms']['median']:.2f} against "
            f"{up[g]['median_ttft_ms']['median']:.2f} ms (greedy) and {ours[s]['median_ttft_ms']['median']:.2f} "
            f"against {up[s]['median_ttft_ms']['median']:.2f} ms (sampled)") in folded()
    assert no_compile_after_boot(MOE1K, ("call1",), ("ours",)) == 1
    assert jit_compiles(MOE1K.bench / "call1" / "serve-bench" / "server_upstream_v1.log.gz") == \
        jit_compiles(MOE.bench / "call3" / "serve-bench" / "server_upstream_v1.log.gz")
    # Shown as (1r) until session 47 pooled it with two more rounds: from then on this one-round pool is set aside.
    aside = {a["summary"]: a["why"] for a in coverage.coverage(coverage.TABLES["issue41"], RESULTS, ROOT)["set_aside"]}
    assert aside[f"bench/results/{RUN.name}/moe1k/pooled/serve_bench_summary.json"].startswith(
        "superseded by bench/results/2026-12-01-h200-session47/moe1k/pooled")


def test_the_call_that_started_no_round():
    report = MOE1K.call_report("call2")
    assert (report["status"], report["rounds_done"], report["stopped_because"]) == \
        ("incomplete", 0, "--budget-s 195 would be passed")
    phases = report["phases_s"]
    assert phases["total_s"] + phases["round_estimate_s"] + 15 > 195
    assert (f"after its warm runs ({phases['warm_s']:.1f} s; {phases['total_s']:.1f} s in all) the round's estimate "
            f"of {phases['round_estimate_s']:.1f} s with the 15 s a keeping call holds back passed its 195 s budget"
            in folded())
    ran = MOE1K.call_report("call1")["runs"]
    assert len(ran) == 8 and f"eight timed runs took {sum(r['seconds'] for r in ran):.1f} s" in folded()
    assert sum(r["seconds"] for r in ran) < phases["round_estimate_s"]


def test_the_client_import_no_longer_costs_the_first_run():
    preload, firsts, later = [], [], []
    for folder, call in ALL:
        report = folder.call_report(call)
        assert "client_preload_error" not in report["phases_s"], call
        preload.append(report["phases_s"]["client_preload_s"])
        rows = report["warm_runs"] + report["runs"]
        over = [row["seconds"] - row["duration_s"] for row in rows]
        firsts.append(over[0])
        later += over[1:]
    assert len(later) == 103 and max(firsts) < 1.5 and max(later) < 1.5
    assert (f"`client_preload_s` {preload[0]:.1f} s in `moe/call1`, where it ran while the servers booted, and "
            f"{min(preload[1:]):.1f}–{max(preload[1:]):.1f} s in the calls on kept servers") in folded()
    assert (f"first client run then took {min(firsts):.2f}–{max(firsts):.2f} s more by the wall clock than the run "
            f"the client measured, every later run at most {max(later):.2f} s more") in folded()


def test_the_host_readings_of_one_lease():
    hosts = [folder.call_report(call)["host"] for folder, call in ALL]
    assert {h["cpu_signature"] for h in hosts} == {"family 6 model 207 stepping 2, cache 307200 KB"}
    assert {(h["usable_cpus"], h["logical_cpus"]) for h in hosts} == {(16, 16)}
    boot, kept = hosts[0], hosts[1:]
    assert (f"{boot['torch_cpu_op_us']:.2f} µs per torch CPU op and {boot['python_loop_ms']:.1f} ms per Python loop "
            f"before the boot (`moe/call1`, load {boot['loadavg'][0]:.2f})") in folded()
    op = [h["torch_cpu_op_us"] for h in kept]
    loop = [h["python_loop_ms"] for h in kept]
    load = [h["loadavg"][0] for h in kept]
    assert max(op) > 1.8 * boot["torch_cpu_op_us"]  # the same host read twice as slow beside the kept servers
    assert (f"{min(op):.2f}–{max(op):.2f} µs and {min(loop):.1f}–{max(loop):.1f} ms in the calls on kept servers "
            f"(load {min(load):.2f}–{max(load):.2f}") in folded()
    readings = {}
    for folder, call, name in ((MOE, "call1", "here"), (S45_MOE, "call1", "s45")):
        for variant in ("upstream_v1", "ours"):
            log = server_log(folder, call, variant)
            readings[(name, variant)] = compile_and_init(log)
    assert all(float(readings[("here", v)][0]) < 0.8 * float(readings[("s45", v)][0]) for v in ("upstream_v1", "ours"))
    assert (f"`torch.compile took {readings[('here', 'upstream_v1')][0]} s` / `{readings[('here', 'ours')][0]} s` "
            f"(upstream / ours) against session 45's `{readings[('s45', 'upstream_v1')][0]} s` / "
            f"`{readings[('s45', 'ours')][0]} s` for the same model, and `init engine ... took "
            f"{readings[('here', 'upstream_v1')][1]} s` / `{readings[('here', 'ours')][1]} s` against "
            f"`{readings[('s45', 'upstream_v1')][1]} s` / `{readings[('s45', 'ours')][1]} s`") in folded()


def test_issue_41s_coverage_counts_the_moe_128_token_rows():
    rows = checked_coverage(coverage.ISSUE_41, RESULTS, ROOT, (RUN.name, S45), folded(), (120, 60, 59, 52),
                            (*MOE_PAIR, "upstream_v1"))
    checked_counted_row(rows, 128, f"bench/results/{RUN.name}/moe/")
    readme = (ROOT / "README.md").read_text()
    assert "| qwen3moe30b_eagle3 | dummy | ours / upstream_v1 | 128 | greedy | 1.08 | 1.00 | 1.00 | 1.01 | 0.26.0 |" \
        in readme
    ratios = MOE.summary()["ours_over_upstream_v1"][MOE_PAIR[0]][MOE_PAIR[1]]
    c1 = [ratios[f"in128/{s}/c1"]["output_tok_s"] for s in ("greedy", "sampled")]
    assert (f"at 128 in is ahead at c=1 ({c1[0]:.2f} / {c1[1]:.2f}) and at parity from c=2 on"
            in " ".join(readme.split()))


@pytest.mark.parametrize("folder,call", ALL)
def test_every_runs_folder_here_is_one_archive(folder, call):
    check_runs_archived(folder, call)
