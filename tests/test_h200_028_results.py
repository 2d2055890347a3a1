"""Session 28's GPU results (one H200, vLLM 0.28.0) as its README states them, read back from the committed JSON and
logs: the musa-sim MTP part every check true with the live-graph count exact; the MRV2 sampling sweep (ours compiles
nothing after boot, vLLM's platform the six kernels named); the soak with structured output passed, ours' checks and
conditions as printed; the 4096-token serving table number for number, with its per-round p99 ITL table and the
prefill-gap counts that explain the c=8 miss. A changed number in the README or in a JSON fails."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest

from results_readback import SOAK_CONDITIONS, jit_compiles, load, passed_soak, pooled_table, table

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "bench" / "results" / "2026-11-29-h200-session28"
SERVE = RUN / "e3g4k028"
CALLS = ("call1", "call2", "call3")
PAIR, MODE, LENGTH = "llama8b_eagle3", "designed-partial", 4096
CONCURRENCY = (1, 2, 8, 32)
COMMIT = "b96f108"
SWEEP_MRV2_COMPILES = {"_compute_local_logits_stats_kernel", "_rejection_kernel", "_resample_kernel",
                       "_gumbel_sample_kernel", "_topk_log_softmax_kernel", "_topk_topp_kernel"}
UPSTREAM_COMPILES = {"eagle_prepare_next_token_padded_kernel", "eagle_step_slot_mapping_metadata_kernel",
                     "eagle_prepare_inputs_padded_kernel"}
STALL_MS = 100.0


def readme() -> str:
    return (RUN / "README.md").read_text()


def folded() -> str:
    return " ".join(readme().split())


# --- musa-sim MTP ---------------------------------------------------------------------------------------------------

def test_musa_sim_mtp_passes_with_the_live_graph_count_exact():
    report = load(RUN / "ms028mtp" / "musa_sim" / "musa_sim_e2e.json.gz")
    assert report["vllm"] == "0.28.0" and report["label"] == "musa-sim" and report["simulated"]
    assert report["failed_parts"] == [] and list(report["parts"]) == ["musa_sim_mtp"]
    part = report["parts"]["musa_sim_mtp"]
    checks = part["checks"]
    assert len(checks) == 53 and all(v is True for v in checks.values())
    assert "53 of 53 checks true" in folded()
    assert checks["musa_sim_full_drafter_s0_live_graphs_counted_exactly"] is True
    assert all(r["use_v2_model_runner"] is False and r["runner_kind"] == "v1" for r in part["rows"])
    sim = next(r for r in part["rows"] if r["variant"] == "musa_sim_full_drafter")
    cuda = next(r for r in part["rows"] if r["variant"] == "cuda_triton_full_drafter")
    plan = sim["capture_plan"]
    assert (plan["live_graphs"], plan["target_graphs"], sim["drafter_graphs"], sim["vllm_graphs"]) == (41, 32, 9, 32)
    assert plan["live_graphs"] == sim["vllm_graphs"] + sim["drafter_graphs"]
    assert sim["drafter_live_graph_limit"] == plan["live_graph_limit"] - sim["vllm_graphs"] == 1868
    text = folded()
    assert "planned 41 live graphs (target 32, drafter 9), and vLLM held 32 beside our 9" in text
    assert "1,868 = 1,900 (torchada's default cap) − 32" in text
    assert sim["acceptance_per_position"] == cuda["acceptance_per_position"] == [1.0, 1.0, 0.9917]
    assert f"[{', '.join(str(x) for x in sim['acceptance_per_position'])}]" in text
    assert len(sim["substitutes_bound"]) == 17 and "17 substitutes bound" in text
    assert sim["replays"] == {"chain": 54, "first": 25} and "25 first-pass and 54 chain replays" in text
    for row in (sim, cuda):
        assert row["jit_monitor_active"] is True and row["jit_during_inference"] == [], row["variant"]


# --- the MRV2 sampling sweep ----------------------------------------------------------------------------------------

def test_the_mrv2_sampling_sweep_rows_are_the_reports():
    sweep = load(RUN / "sweep028" / "sampling-sweep" / "sampling_sweep.json.gz")
    assert sweep["problems"] == [] and sweep["served_requests_of_ours"] == 54
    assert sorted(sweep["refused_everywhere"]) == ["logit_bias", "logit_bias+greedy", "min_p", "min_p+greedy"]
    variants = {v["variant"]: v for v in sweep["variants"]}
    assert sorted(variants) == ["mrv2", "ours_mrv2"]
    for name, entry in variants.items():
        assert entry["facts"]["runner_kind"] == "mrv2" and entry["boot"]["ready"] is True, name
    folder = RUN / "sweep028" / "sampling-sweep"
    assert jit_compiles(folder / "server_ours_mrv2.log.gz") == []
    assert set(jit_compiles(folder / "server_mrv2.log.gz")) == SWEEP_MRV2_COMPILES
    rows = table(readme(), "| variant | batches served |")
    assert rows["MRV2 on our platform (`ours_mrv2`)"][0] == "28 of 32 (54 requests)"
    assert rows["MRV2 on our platform (`ours_mrv2`)"][2] == "**none**"
    printed = set(re.findall(r"`(\w+)`", rows["MRV2 on vLLM's platform (`mrv2`)"][2]))
    assert printed == SWEEP_MRV2_COMPILES
    ours_log = gzip.open(folder / "server_ours_mrv2.log.gz", "rt").read()
    warmup = re.search(r"Model Runner V2 sampled warm-up: (\d+) steps .*? in ([\d.]+) s; (\d+) Triton compiles",
                       ours_log)
    text = folded()
    assert warmup and f"{warmup.group(1)} steps" in text and f"{warmup.group(2)} s; {warmup.group(3)} Triton" in text


# --- the soak -------------------------------------------------------------------------------------------------------

def test_the_soak_passed_with_structured_output_and_no_compile_on_ours():
    ours = passed_soak(load(RUN / "soak028" / "soak" / "soak.json.gz"), COMMIT)
    checks = ours["checks"]
    assert len(checks) == 41
    assert checks["no_compile_after_boot"] and checks["condition_structured_output"] and checks["v1_runner"]
    text = folded()
    assert "Ours: 41 checks, every one true" in text
    conditions = ours["conditions"]
    for key, label in SOAK_CONDITIONS.items():
        shown = f"**{label} {conditions[key]}**" if key == "structured_output" else f"{label} {conditions[key]}"
        assert shown in text, (key, shown)
    assert all(conditions[key] > 0 for key in SOAK_CONDITIONS)
    assert f"{conditions['spec_decode_drafts']:,} spec-decode drafts" in text
    assert f"{conditions['draft_graph_replays']:,} drafter graph replays" in text
    folder = RUN / "soak028" / "soak"
    assert jit_compiles(folder / "soak_llama_ctx_eagle3_full_drafter.log.gz") == []
    eager = jit_compiles(folder / "soak_llama_ctx_eagle3_eager_drafter.log.gz")
    assert eager.count("apply_token_bitmask_inplace_kernel") == 1 and len(eager) == 6  # "beside 5 drafter and sampler"
    assert jit_compiles(folder / "soak_llama_ctx_eagle3_nospec.log.gz") == ["apply_token_bitmask_inplace_kernel"]
    ours_log = gzip.open(folder / "soak_llama_ctx_eagle3_full_drafter.log.gz", "rt").read()
    structured = re.search(r"structured-output warm-up: .*? in ([\d.]+) s; (\d+) Triton compiles", ours_log)
    assert structured and f"in {structured.group(1)} s; {structured.group(2)} Triton compiles" in text


# --- the 4096-token serving table -----------------------------------------------------------------------------------

def summary() -> dict:
    return load(SERVE / "pooled" / "serve_bench_summary.json")


def call_reports() -> dict[str, dict]:
    return {call: load(SERVE / call / "serve-bench" / "serve_bench.json") for call in CALLS}


def test_three_rounds_from_three_calls_on_the_v1_runner_no_short_run():
    s = summary()
    pooled = s["pairs"][PAIR][MODE]
    assert pooled["rounds"] == 3 and pooled["vllm"] == ["0.28.0"] and pooled["k"] == 3
    assert pooled["workload"]["input_lens"] == [LENGTH] and pooled["workload"]["output_len"] == 128
    assert s["problems"] == [] and len(s["made_up"]) == 1 and "1 of 2 rounds ran" in s["made_up"][0]
    runs = []
    for call, report in call_reports().items():
        assert report["vllm"] == "0.28.0" and report["commit"].startswith(COMMIT) and report["tree_changes"] == 0
        assert report["rounds_done"] == 1 and report["short_runs"] == [] and report["device"] == "NVIDIA H200"
        for variant, info in report["variants"].items():
            assert info["facts"] and all(f["use_v2_model_runner"] is False for f in info["facts"]), (call, variant)
        runs += [r for r in report["runs"] if r["kind"] == "timed"]
    assert len(runs) == 3 * 2 * len(CONCURRENCY)
    shortest = min(r["duration_s"] for r in runs)
    assert shortest >= 10 and f"Every timed run lasted {shortest:.1f} s or more" in folded()


def test_the_table_prints_the_pooled_numbers_and_meets_the_throughput_targets():
    s = summary()
    cells, ratios, rows = pooled_table(s, PAIR, MODE, readme(), "| c | upstream V1 out tok/s | ours out tok/s |", CONCURRENCY)
    for c in CONCURRENCY:
        key = f"in{LENGTH}/greedy/c{c}"
        up, ours, ratio = cells["upstream_v1"][key], cells["ours"][key], ratios[key]
        paired = ratio["paired_output_tok_s"]
        med = lambda cell, field: cell[field]["median"]  # noqa: E731
        both = lambda field, digits: f"{med(up, field):.{digits}f} / {med(ours, field):.{digits}f}"  # noqa: E731
        assert rows[str(c)] == [f"{med(up, 'output_throughput'):.1f}", f"{med(ours, 'output_throughput'):.1f}",
                                f"{ratio['output_tok_s']:.3f}",
                                f"{paired['median']:.3f} [{paired['interval'][0]:.3f}, {paired['interval'][1]:.3f}]",
                                both("median_tpot_ms", 2), both("p99_itl_ms", 1), both("p99_ttft_ms", 1)], c
        # issue 41's throughput targets as the README judges them: >= 1.00x everywhere, >= 1.10x at c <= 2
        assert ratio["output_tok_s"] >= (1.10 if c <= 2 else 1.00) and paired["interval"][0] >= 1.0, c
        p99 = med(ours, "p99_itl_ms") / med(up, "p99_itl_ms")
        assert (p99 > 1.25) == (c == 8), (c, p99)  # the one p99 ITL miss the README explains


def gaps(report: dict, variant: str, c: int) -> dict:
    run = next(r for r in report["runs"] if r["kind"] == "timed" and r["variant"] == variant and r["concurrency"] == c)
    stalls = run["result"]["itl_stalls"]
    assert stalls["threshold_ms"] == STALL_MS and stalls["itls"] > 0
    return {"count": stalls["gaps_over_threshold"], "ms": stalls["gap_ms_over_threshold"], "itls": stalls["itls"],
            "p99": run["result"]["p99_itl_ms"], "longest": stalls["largest"][0]["ms"] if stalls["largest"] else 0.0,
            "round": run["round"]}


def test_the_c8_p99_miss_is_the_quantile_edge_of_equal_prefill_gaps():
    rows = table(readme(), "| round | gaps ≥ 100 ms, upstream / ours |")
    reports = call_reports()
    means = {"upstream_v1": [], "ours": []}
    longest = {"upstream_v1": [], "ours": []}
    totals = {"upstream_v1": [], "ours": []}
    for call, report in reports.items():
        up, ours = gaps(report, "upstream_v1", 8), gaps(report, "ours", 8)
        assert up["round"] == ours["round"] and up["itls"] == ours["itls"]
        assert rows[str(up["round"])] == [f"{up['count']} / {ours['count']}", f"{up['p99']:.1f} / {ours['p99']:.1f}",
                                          f"{ours['p99'] / up['p99']:.3f}"], call
        for variant, g in (("upstream_v1", up), ("ours", ours)):
            assert 0.009 < g["count"] / g["itls"] < 0.013, (call, variant)  # "1.0–1.2%": p99 sits on the edge
            means[variant].append(g["ms"] / g["count"])
            longest[variant].append(g["longest"])
            totals[variant].append(g["ms"] / 1000)
        for c in (1, 2):  # "no gap of 100 ms or more in any run of either engine" at c <= 2
            assert gaps(report, "upstream_v1", c)["count"] == 0 and gaps(report, "ours", c)["count"] == 0
    text = folded()
    span = lambda xs, d=0: f"{min(xs):.{d}f}–{max(xs):.{d}f}"  # noqa: E731
    assert f"their mean {span(means['ours'])} ms on ours, {span(means['upstream_v1'])} ms upstream" in text
    assert f"the longest {span(longest['ours'])} ms on ours, {span(longest['upstream_v1'])} ms upstream" in text
    assert f"{span(totals['ours'], 1)} s on ours and {span(totals['upstream_v1'], 1)} s upstream" in text
    per_round = sorted(float(r[-1]) for r in rows.values())
    assert f"the ratio's median is {per_round[1]:.3f}" in text
    paired = {c: summary()["ours_over_upstream_v1"][PAIR][MODE][f"in{LENGTH}/greedy/c{c}"]["paired_p99_itl_ms"]
              for c in CONCURRENCY}
    assert all(p["passes"] == 3 and p["unpaired_rounds"] == 0 for p in paired.values())
    assert paired[8]["median"] == round(per_round[1], 3)  # the summary's pairing is the table's
    low, high = paired[8]["interval"]
    assert f"{paired[8]['median']:.3f} [{low:.3f}, {high:.3f}] at c=8" in text
    assert (f"{paired[1]['median']:.3f}, {paired[2]['median']:.3f} and {paired[32]['median']:.3f} at c = 1, 2, 32"
            in text)


def test_ours_compiled_nothing_after_boot_and_upstream_the_three_named():
    from portable_spec_harness import jit_judge

    for call, report in call_reports().items():
        folder = SERVE / call / "serve-bench"
        assert report["variants"]["ours"]["jit_after_boot"] == [] and report["variants"]["ours"]["jit_monitor_active"]
        assert not jit_judge.verdict("ours", jit_judge.read(folder / "server_ours.log.gz"))
        assert set(jit_compiles(folder / "server_upstream_v1.log.gz")) == UPSTREAM_COMPILES, call
    for name in UPSTREAM_COMPILES:
        assert f"`{name}`" in readme()


@pytest.mark.parametrize("claim", ["171 / 190 s, 95 / 111 s, 74 / 69 s"])
def test_the_boot_times_are_each_calls(claim):
    boots = [tuple(round(report["variants"][v]["boots"][0]["seconds"]) for v in ("upstream_v1", "ours"))
             for report in call_reports().values()]
    assert ", ".join(f"{u} / {o} s" for u, o in boots) == claim and claim in folded()
