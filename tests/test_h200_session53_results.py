"""Session 53's results README (one H200, vLLM 0.26.0) read back from its JSON and logs: the MoE pair's phase-clock
call at c=32 in turn, which read upstream V1's clock and was killed inside ours' round after two cold boots."""

from __future__ import annotations

import re
import statistics
from datetime import datetime
from pathlib import Path

from portable_spec_harness.serve_bench import driver
from results_readback import (EAGLE_DRAFTERS, ResultsFolder, check_draft_v1_call, check_runs_archived,
                              check_triton_keys_logged, init_engine, jit_compiles, load, log_time, server_log)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
RUN = RESULTS / "2026-12-02-h200-session53"
S52 = RESULTS / "2026-12-02-h200-session52" / "moe4k32" / "call1" / "serve-bench" / "serve_bench.json"
CLOCKED = ResultsFolder(RUN, RUN / "moeclk32")
CELL = "in4096/sampled/c32"
UPSTREAM_COMPILES = ["eagle_prepare_next_token_padded_kernel", "eagle_step_slot_mapping_metadata_kernel",
                     "rejection_greedy_sample_kernel", "eagle_prepare_inputs_padded_kernel", "_topk_topp_kernel",
                     "fused_moe_kernel"]


def report() -> dict:
    return CLOCKED.call_report("call1")


def boots(r: dict) -> dict[str, float]:
    return {v: r["variants"][v]["boots"][0]["seconds"] for v in r["variants"]}


def test_the_call_ran_a79befc_on_the_v1_runner_and_was_cut_off_in_ours_round():
    r = report()
    assert check_draft_v1_call(r, "call1", "a79befc", "dummy", drafters=EAGLE_DRAFTERS) == 2
    check_triton_keys_logged(r, "call1")
    assert r["placement"]["mode"] == "in_turn" and r["placement"]["kv_cache_gib"] == 16.15
    assert r["workload"]["max_model_len"] == 4304 and r["workload"]["max_num_seqs"] == 32
    assert r["settings"]["budget_s"] == 545 and r["settings"]["sizing_from"].endswith("session52/moe4k32/call1/"
                                                                                        "serve-bench")
    assert r["rounds_done"] == 0 and r["stopped_because"] == "interrupted (SystemExit)" and r["status"] != "complete"
    assert [x["variant"] for x in r["runs"]] == ["upstream_v1", "upstream_v1"]  # ours timed nothing
    assert [x["variant"] for x in r["warm_runs"]] == ["upstream_v1", "upstream_v1", "ours"]
    assert [f["when"] for f in r["variants"]["ours"]["facts"]] == ["before round 0"]
    assert [f["when"] for f in r["variants"]["upstream_v1"]["facts"]] == ["before round 0", "after round 0"]
    assert sorted(r["phase_clock"]) == ["upstream_v1"] and r["phase_clock"]["upstream_v1"]["cell"] == CELL
    assert not (CLOCKED.bench / "call1" / "cuda_lane.json").exists()
    check_runs_archived(CLOCKED, "call1")
    assert "lane exit 124 after 555 s" in CLOCKED.console("call1")
    text = CLOCKED.folded()
    assert "**No cell is counted from this session; ours has no clock reading at c=32.**" in text
    assert "`a79befc`, `tree_changes` 0" in text
    assert "gave the cap, 555 s (a budget of 545 s)" in text


def test_upstream_compiled_after_boot_and_ours_did_not_in_what_it_ran():
    r = report()
    logs = CLOCKED.bench / "call1" / "serve-bench"
    assert jit_compiles(logs / "server_upstream_v1.log.gz") == UPSTREAM_COMPILES
    assert r["variants"]["upstream_v1"]["jit_after_boot"] == [f"Triton kernel JIT compilation: {k}"
                                                              for k in UPSTREAM_COMPILES]
    assert jit_compiles(logs / "server_ours.log.gz") == [] and r["variants"]["ours"]["jit_after_boot"] == []
    assert r["variants"]["ours"]["jit_monitor_active"] is True
    assert ("upstream V1 compiled the four EAGLE kernels, `_topk_topp_kernel` and `fused_moe_kernel` after boot"
            in CLOCKED.folded())


def test_cold_boots_outran_the_preflights_earlier_boots():
    r, earlier = report(), load(S52)
    now, then = boots(r), boots(earlier)
    assert now["upstream_v1"] > then["upstream_v1"] and now["ours"] > then["ours"]
    text = CLOCKED.folded()
    assert (f"(upstream V1 {then['upstream_v1']:.1f} s, ours {then['ours']:.1f} s, on compile caches" in text)
    assert f"upstream V1 booted in {now['upstream_v1']:.1f} s, ours in {now['ours']:.1f} s" in text
    up, ours = server_log(CLOCKED, "call1", "upstream_v1"), server_log(CLOCKED, "call1", "ours")
    compiles = [re.findall(r"torch\.compile took ([\d.]+) s in total", log) for log in (up, ours)]
    assert (f"`torch.compile` took {' + '.join(compiles[0])} s on upstream V1 and {' + '.join(compiles[1])} s on "
            f"ours, and vLLM's engine start {init_engine(up)[0]} s against {init_engine(ours)[0]} s") in text
    assert all("/tmp/portable_spec_vllm_cache/serve-bench-" + v + "/torch_compile_cache" in log
               for v, log in (("upstream_v1", up), ("ours", ours)))
    moe = re.search(r"MoE size warm-up: .*? in ([\d.]+) s; (\d+) Triton compiles \(fused_moe_kernel", ours)
    kernel = re.search(r"kernel warm-up: 19 steps .*? in ([\d.]+) s; (\d+) Triton compiles", ours)
    assert (f"the MoE size warm-up {moe.group(1)} s with {moe.group(2)} `fused_moe_kernel` compiles, the kernel "
            f"warm-up {kernel.group(1)} s with {kernel.group(2)} compiles") in text


def test_the_new_in_turn_guard_would_have_stopped_before_ours_boot():
    """At ours' launch (its log's first line) the budget left (545 s less the time since the call began, less the
    reserve) is short of what the guard asks: the longest boot seen (upstream V1's) + ours' two timed runs at session
    52's medians + the phase clock's reserve."""
    r, earlier = report(), load(S52)
    ended = datetime.fromisoformat(r["date"])
    began = ended.hour * 3600 + ended.minute * 60 + ended.second - r["phases_s"]["total_s"]
    ours_log = server_log(CLOCKED, "call1", "ours")
    first = next(line for line in ours_log.splitlines() if re.search(r" \d\d:\d\d:\d\d ", line))
    left = r["settings"]["budget_s"] - (log_time(first) - began) - driver.ROUND_RESERVE_S
    ours_runs = [x["duration_s"] for x in earlier["runs"] if x["variant"] == "ours"]
    assert len(ours_runs) == 2
    need = (boots(r)["upstream_v1"] + len(ours_runs) * (statistics.median(ours_runs) + driver.RUN_OVERHEAD_S)
            + driver.PHASE_CLOCK_RESERVE_S)
    assert 150 < left < need, (left, need)
    assert "with it this call would have stopped after upstream V1's clock" in CLOCKED.folded()
    assert "(here 184.1 s)" in CLOCKED.folded() and boots(r)["upstream_v1"] == 184.1


def test_upstream_v1s_phase_clock_at_c32():
    r = report()
    clock = r["phase_clock"]["upstream_v1"]
    split, profile = clock["split"], clock["profile"]
    rows = {
        "engine step (unprofiled pass, 277 steps)": f"{clock['clock']['step_wall_ms']:.3f} ms",
        "device busy per decode step (profiled, 82 steps)":
            f"{split['device_busy_ms']:.3f} ms ({split['device_busy_share']:.0%} of the step)",
        "target forward, device": f"{split['phases_ms']['target_forward']['device']:.3f} ms",
        "launches per step": f"{split['launches_per_step']:.2f}",
        "`_get_valid_sampled_token_count` (host, waiting on the GPU)":
            f"{clock['clock']['details']['v1 _get_valid_sampled_token_count']['wall_ms']:.3f} ms",
    }
    assert clock["clock"]["steps"] == 277 and profile["steps"] == 82
    assert split["device_busy_ms"] > split["step_wall_ms"]  # the step is the GPU's
    readme = CLOCKED.readme()
    for name, value in rows.items():
        assert f"| {name} | {value} |" in readme, name
    greedy, sampled = r["runs"]
    text = CLOCKED.folded()
    assert (f"greedy {r['cells']['upstream_v1']['in4096/greedy/c32']['output_throughput']['median']:.1f} tok/s over "
            f"{greedy['duration_s']:.2f} s, sampled "
            f"{r['cells']['upstream_v1'][CELL]['output_throughput']['median']:.1f} tok/s over "
            f"{sampled['duration_s']:.2f} s; 96 prompts each") in text
    assert r["workload"]["num_prompts"] == {"in4096/greedy/c32": 96, CELL: 96}
    assert "**the cause of the two c=32 misses stays unmeasured.**" in text

