"""Session 54's results README (one H200, vLLM 0.26.0 and 0.33.0) read back from its JSON and logs: the MoE pair's
phase clock at 4096 in, sampled, c=32 on both servers (one variant a call), and the EAGLE-1 dummy pair's first cells
on Model Runner V2 (128 in, greedy, c = 1, 2, 8, three rounds)."""

from __future__ import annotations

from pathlib import Path

import pytest

from portable_spec_harness.serve_bench import coverage
from results_readback import (EAGLE_DRAFTERS, ResultsFolder, acceptance_lengths, check_draft_v1_call,
                              check_runs_archived, check_triton_keys_logged, checked_coverage,
                              checked_eagle3_mrv2_chain, jit_compiles, no_compile_after_boot, pooled_rows_by_round,
                              rows_by_c, server_log, upstream_compiled_sentence, value_span)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
RUN = RESULTS / "2026-12-02-h200-session54"
S53 = "2026-12-02-h200-session53"
S52_POOL = ResultsFolder(RESULTS / "2026-12-02-h200-session52", RESULTS / "2026-12-02-h200-session52" / "moe4k32")
CLOCKED = ResultsFolder(RUN, RUN / "moeclk32")
E1 = ResultsFolder(RUN, RUN / "e1m128g")
CELL = "in4096/sampled/c32"
MOE = ("qwen3moe30b_eagle3", "dummy")
PAIR = ("llama8b_eagle", "dummy")
MRV2 = ("mrv2", "ours_mrv2")
CALL_OF = {"ours": "call1", "upstream_v1": "call2"}
"""Each variant's clock call: one variant a call, ours first."""
UPSTREAM_COMPILES = ["eagle_prepare_next_token_padded_kernel", "eagle_step_slot_mapping_metadata_kernel",
                     "rejection_greedy_sample_kernel", "eagle_prepare_inputs_padded_kernel", "fused_moe_kernel",
                     "_topk_topp_kernel"]


def clock_of(variant: str) -> dict:
    return CLOCKED.call_report(CALL_OF[variant])["phase_clock"][variant]


def drafter_ms(clock: dict, field: str) -> float:
    """The drafter's share of a step in a clock's split (its first pass + chain steps): ``device`` or
    ``host_wall``."""
    return sum(clock["split"]["phases_ms"][p][field] for p in ("draft_first", "draft_chain"))


@pytest.mark.parametrize("variant", sorted(CALL_OF))
def test_each_clock_call_ran_d8d42fb_on_the_v1_runner_with_one_variant(variant):
    call = CALL_OF[variant]
    r = CLOCKED.call_report(call)
    assert check_draft_v1_call(r, call, "d8d42fb", "dummy", drafters={variant: EAGLE_DRAFTERS[variant]}) == 1
    check_triton_keys_logged(r, call)
    assert r["pair"]["name"] == MOE[0] and r["placement"]["mode"] == "in_turn"
    assert r["workload"]["max_model_len"] == 4304 and r["workload"]["max_num_seqs"] == 32
    assert r["settings"]["budget_s"] == 545 and r["settings"]["sizing_from"].endswith(f"{S53}/moeclk32/call1/"
                                                                                        "serve-bench")
    assert r["workload"]["num_prompts"] == {"in4096/greedy/c32": 96, CELL: 96}
    assert (r["rounds_done"], r["status"], r.get("stopped_because")) == (1, "complete", None)
    assert [x["variant"] for x in r["runs"]] == [variant, variant]
    assert sorted(r["phase_clock"]) == [variant] and r["phase_clock"][variant]["cell"] == CELL
    assert [f["when"] for f in r["variants"][variant]["facts"]] == ["before round 0", "after round 0"]
    assert (CLOCKED.bench / call / "cuda_lane.json").is_file()
    check_runs_archived(CLOCKED, call)
    text = CLOCKED.folded()
    assert "`d8d42fb`, `tree_changes` 0 in every call" in text
    assert "Each serving call got the lease clock's cap, 555 s (a budget of 545 s)." in text


def test_both_servers_chose_the_same_kernels_and_booted_cold():
    logs = {v: server_log(CLOCKED, CALL_OF[v], v) for v in CALL_OF}
    for needle in ("Using FLASH_ATTN attention backend", "Using FlashAttention version 3", "Using TritonExperts MoE "
                   "backend", "fused_moe/configs/E=128,N=768,device_name=NVIDIA_H200.json",
                   "Chunked prefill is enabled with max_num_batched_tokens=8192."):
        assert all(needle in log for log in logs.values()), needle
    boots = {v: CLOCKED.call_report(CALL_OF[v])["variants"][v]["boots"] for v in CALL_OF}
    assert all(len(b) == 1 and b[0]["ready"] for b in boots.values())
    assert (f"(ours {boots['ours'][0]['seconds']:.1f} s, upstream V1 {boots['upstream_v1'][0]['seconds']:.1f} s)"
            in CLOCKED.folded())


def clock_rows() -> dict[str, tuple[str, str]]:
    """The clock table's rows from each call's report: (upstream V1, ours)."""
    def row(variant: str) -> dict[str, str]:
        clock = clock_of(variant)
        split, phases = clock["split"], clock["profile"]["phases"]
        forward = phases["target_forward"]
        return {
            "engine step (unprofiled pass, 277 steps)": f"{clock['clock']['step_wall_ms']:.3f} ms",
            "device busy per decode step (profiled, 82 steps)":
                f"{split['device_busy_ms']:.3f} ms ({split['device_busy_share']:.0%} of the step)",
            "target forward, device, mean": f"{forward['device_ms']:.3f} ms",
            "target forward, device, median": f"{forward['device_ms_median']:.3f} ms",
            "target forward, kernels / launches per step": f"{forward['kernels']:.2f} / {forward['launches']:.2f}",
            "verify, device": f"{phases['verify']['device_ms']:.3f} ms",
            "drafter (first pass + chain steps), device": f"{drafter_ms(clock, 'device'):.3f} ms",
            "drafter (first pass + chain steps), host": f"{drafter_ms(clock, 'host_wall'):.3f} ms",
            "launches per step": f"{split['launches_per_step']:.2f}",
            "`_get_valid_sampled_token_count` (host, waiting on the GPU)":
                f"{clock['clock']['details']['v1 _get_valid_sampled_token_count']['wall_ms']:.3f} ms",
        }
    up, ours = row("upstream_v1"), row("ours")
    return {name: (up[name], ours[name]) for name in up}


def test_the_clock_table_reads_both_servers():
    for variant in CALL_OF:
        clock = clock_of(variant)
        assert clock["clock"]["steps"] == 277 and clock["profile"]["steps"] == 82, variant
        assert clock["profile"]["runner"] == "v1" and clock["split"]["device_busy_ms"] > clock["split"]["step_wall_ms"]
    readme = CLOCKED.readme()
    rows = clock_rows()
    assert len(rows) == 10
    for name, (up, ours) in rows.items():
        assert f"| {name} | {up} | {ours} |" in readme, name


def test_what_the_clock_says_about_the_misses():
    up, ours = clock_of("upstream_v1"), clock_of("ours")

    def phase(clock: dict, name: str, field: str) -> float:
        return clock["profile"]["phases"][name][field]

    text = CLOCKED.folded()
    saving = drafter_ms(up, "host_wall") - drafter_ms(ours, "host_wall")
    shorter = 1 - ours["clock"]["step_wall_ms"] / up["clock"]["step_wall_ms"]
    assert saving > 0 and shorter > 0
    assert (f"Ours drafts in {saving:.3f} ms less host time per step and its engine step is {shorter:.1%} shorter"
            in text)
    assert phase(ours, "target_forward", "kernels") == phase(up, "target_forward", "kernels")
    assert phase(ours, "target_forward", "launches") == phase(up, "target_forward", "launches")
    median_lower = 1 - phase(ours, "target_forward", "device_ms_median") / phase(up, "target_forward",
                                                                                 "device_ms_median")
    assert 0 < median_lower and f"the target forward's median on the device equal ({median_lower:.1%} lower on ours)" \
        in text
    assert max(abs(phase(ours, "verify", "device_ms") - phase(up, "verify", "device_ms")),
               abs(drafter_ms(ours, "device") - drafter_ms(up, "device"))) < 0.015
    extra = phase(ours, "target_forward", "device_ms") - phase(up, "target_forward", "device_ms")
    busy = ours["split"]["device_busy_ms"] / up["split"]["device_busy_ms"] - 1
    assert (f"ours' target forward took {extra:.3f} ms ({extra / phase(up, 'target_forward', 'device_ms'):.1%}) more "
            f"per step on the device on average, and its device busy per step {busy:.1%} more") in text
    s52 = S52_POOL.summary()["ours_over_upstream_v1"][MOE[0]][MOE[1]]
    said = []
    for key in ("in4096/greedy/c32", CELL):
        paired = s52[key]["paired_output_tok_s"]
        said.append(f"{paired['median']:.3f} [{paired['interval'][0]:.3f}, {paired['interval'][1]:.3f}]")
        assert paired["interval"][0] <= 1.0 <= paired["interval"][1], key
    assert (f"(greedy {s52['in4096/greedy/c32']['output_tok_s']:.3f}×, sampled {s52[CELL]['output_tok_s']:.3f}×, "
            f"session 52; paired {said[0]} and {said[1]})") in text


def test_one_timed_round_each_and_the_compiles_after_boot():
    cells = {v: CLOCKED.call_report(CALL_OF[v])["cells"][v] for v in CALL_OF}

    def tok(variant: str, key: str) -> float:
        return cells[variant][key]["output_throughput"]["median"]

    greedy = "in4096/greedy/c32"
    p99_tpot = {v: cells[v][greedy]["p99_tpot_ms"]["median"] for v in CALL_OF}
    assert (f"greedy {tok('ours', greedy):.1f} tok/s ours and {tok('upstream_v1', greedy):.1f} upstream V1 "
            f"({tok('ours', greedy) / tok('upstream_v1', greedy):.3f}×; upstream V1's p99 TPOT "
            f"{p99_tpot['upstream_v1']:.2f} ms against ours' {p99_tpot['ours']:.2f}), sampled {tok('ours', CELL):.1f} "
            f"and {tok('upstream_v1', CELL):.1f} ({tok('ours', CELL) / tok('upstream_v1', CELL):.3f}×)"
            ) in CLOCKED.folded()
    up_log = CLOCKED.bench / "call2" / "serve-bench" / "server_upstream_v1.log.gz"
    assert jit_compiles(up_log) == UPSTREAM_COMPILES
    assert no_compile_after_boot(CLOCKED, ("call1",), ("ours",)) == 1
    said = upstream_compiled_sentence(tuple(UPSTREAM_COMPILES)).removesuffix(" in every server log")
    assert said in CLOCKED.folded()


def test_the_eagle1_mrv2_call_ran_on_vllms_speculator_with_one_graph_set():
    assert checked_eagle3_mrv2_chain([(E1, "call1")], "d8d42fb", PAIR[1], 4304, pair=PAIR[0]) == 2
    r = E1.call_report("call1")
    assert r["vllm"] == "0.33.0" and r["settings"]["budget_s"] == 545
    assert (r["rounds_done"], r["status"], len(r["runs"])) == (3, "complete", 18)
    assert r["settings"]["phase_clock"] is False and r.get("kept_servers") is None
    for variant in MRV2:
        assert "GPU KV cache size: 172,800 tokens" in server_log(E1, "call1", variant)
    boots = {v: r["variants"][v]["boots"][0]["seconds"] for v in MRV2}
    assert f"**Boot:** {boots['mrv2']:.1f} s (`mrv2`) and {boots['ours_mrv2']:.1f} s (`ours_mrv2`)" in E1.folded()
    assert no_compile_after_boot(E1, ("call1",), MRV2) == 2
    check_runs_archived(E1, "call1")


def test_the_eagle1_mrv2_rows_pool_three_rounds_and_meet_the_target():
    summary, entry = E1.pooled_entry(*PAIR, "0.33.0", ("call1",))
    assert entry["rounds"] == 3 and summary["problems"] == [] and summary["made_up"] == []
    cells, ratios = entry["cells"], summary["ours_mrv2_over_mrv2"][PAIR[0]][PAIR[1]]
    assert sorted(ratios) == [f"in128/greedy/c{c}" for c in (1, 2, 8)]
    section = E1.section("## Issue 41: the EAGLE-1 dummy pair on MRV2")
    rows = {str(c): row for (_, c), row in rows_by_c(section, "128").items()}
    by_c, per_round = pooled_rows_by_round(cells, ratios, rows, 128, (1, 2, 8), MRV2, rounds=3)
    assert f"**Per round:** {per_round}." in " ".join(section.split())
    tok = [r["output_tok_s"] for r in by_c.values()]
    assert min(tok) >= 0.97
    text = E1.folded()
    assert f"in all three cells ({value_span(tok, 3)}, ratio of the medians)" in text
    assert acceptance_lengths(cells) == {1.0}
    durations = [d for v in MRV2 for cell in cells[v].values() for d in cell["duration"]["all"]]
    stalls = [s for v in MRV2 for cell in cells[v].values() for s in cell["stall_total_ms"]["all"]]
    assert len(durations) == len(stalls) == 18 and not any(stalls)
    assert f"every timed run {min(durations):.2f} s or more, no gap of 100 ms or more in any run" in text


def test_issue_41s_coverage_counts_the_three_mrv2_cells():
    rows = checked_coverage(coverage.ISSUE_41, RESULTS, ROOT, (RUN.name, S53), E1.folded(), (120, 99, 94, 96),
                            (*PAIR, "mrv2"))
    counted = [c for c in rows if c["counted"]]
    assert sorted(c["cell"] for c in counted) == [f"in128/greedy/c{c}" for c in (1, 2, 8)]
    assert all(c["meets"] for c in counted)
    assert all(m["summary"].startswith(f"bench/results/{RUN.name}/e1m128g/") and m["compiles_after_boot"] == 0
               for c in counted for m in c["measurements"] if m["counted"])
    report = coverage.coverage(coverage.ISSUE_41, RESULTS, ROOT, as_of=RUN.name)
    misses = sorted((c["pair"], c["baseline"], c["cell"]) for c in report["cells"] if c["counted"] and not c["meets"])
    assert misses == sorted([("llama8b_eagle3", "upstream_v1", "in4096/sampled/c8"),
                             ("llama8b_eagle3", "mrv2", "in1024/greedy/c8"),
                             (MOE[0], "upstream_v1", "in4096/sampled/c8"),
                             (MOE[0], "upstream_v1", "in4096/greedy/c32"), (MOE[0], "upstream_v1", CELL)])


def test_the_main_readme_gives_the_c32_clock():
    readme = " ".join((ROOT / "README.md").read_text().split())
    up, ours = clock_of("upstream_v1"), clock_of("ours")
    assert (f"the phase clock at c=32 found both steps the GPU's ({up['split']['device_busy_ms']:.3f} and "
            f"{ours['split']['device_busy_ms']:.3f} ms of device work per decode step against engine steps of "
            f"{up['clock']['step_wall_ms']:.3f} and {ours['clock']['step_wall_ms']:.3f} ms, upstream V1 first)"
            ) in readme
    forward = {v: c["profile"]["phases"]["target_forward"] for v, c in (("upstream_v1", up), ("ours", ours))}
    assert (f"the same target kernels per step, the target forward's median on the device "
            f"{forward['upstream_v1']['device_ms_median']:.3f} and {forward['ours']['device_ms_median']:.3f} ms"
            ) in readme
