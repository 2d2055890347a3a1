"""Session 44's results README (one H200, vLLM 0.26.0) read back from its JSON and logs: the 8B EAGLE-1 pair's
4096-token rows pooled to three rounds with session 43's two (issue 41), its 128-token row's first round on the same
servers, and the 8-sequence server whose warm-up ran the trimmed-draft rounds on the GPU and left nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from portable_spec_harness.serve_bench import coverage
from results_readback import (EAGLE_DRAFTERS, ResultsFolder, check_draft_v1_call, check_runs_archived,
                              check_triton_keys_logged, checked_counted_row, checked_coverage, checked_issue41_rows,
                              checked_issue41_targets, compiles_in_every_call, no_compile_after_boot, server_log,
                              upstream_compiled_sentence, warmup_limits_of)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
RUN = RESULTS / "2026-12-01-h200-session44"
S43 = "2026-12-01-h200-session43"
EAGLE1 = ("llama8b_eagle", "dummy")
LONG = ResultsFolder(RUN, RUN / "e1d4k")
SHORT = ResultsFolder(RUN, RUN / "e1c")
CHECK = ResultsFolder(RUN, RUN)
S43_LONG = ResultsFolder(RESULTS / S43, RESULTS / S43 / "e1d4k")
KEPT = "/tmp/serve_bench_kept.json"
CALLS = ((SHORT, "call1"), (LONG, "call1"), (SHORT, "call2"))


def folded() -> str:
    return LONG.folded()


def test_every_call_ran_de726ba_on_the_v1_runner_one_server_shape_the_sizing_file_untracked():
    assert sum(check_draft_v1_call(folder.call_report(call), call, "de726ba", "dummy", tree_changes=1,
                                   drafters=EAGLE_DRAFTERS) for folder, call in CALLS) == 6
    sizing = [None, "gpu-inputs/s43-e1d4k-call3.json", "/tmp/lane-e1c1/serve-bench/serve_bench.json"]
    shapes = set()
    for (folder, call), sized in zip(CALLS, sizing):
        report = folder.call_report(call)
        assert report["settings"]["sizing_from"] == sized and report["pair"]["name"] == EAGLE1[0], call
        assert report["workload"]["max_model_len"] == 4304 and len(report["workload"]["cells"]) == 8, call
        check_triton_keys_logged(report, call)
        shapes |= {tuple(info["serve_args"]) for info in report["variants"].values()}
        assert report["kept_servers"]["registry"] == KEPT, call
    assert len(shapes) == 1  # both variants' servers and every call: the same vllm serve arguments
    later = [folder.call_report(call) for folder, call in CALLS[1:]]
    assert all(info["boots"][0]["reused"]["registry"] == KEPT for r in later for info in r["variants"].values())
    assert "`tree_changes` 1 in every call: the one untracked file, session 43's `e1d4k/call3` report" in folded()


def test_the_4096_token_rows_pool_three_rounds_meet_the_targets_and_compile_nothing_after_boot():
    summary, entry = LONG.pooled_entry(*EAGLE1, "0.26.0", ("call2", "call3", "call1"))
    assert [Path(p).parts[-4] for p in entry["sources"]] == [S43, S43, RUN.name]
    assert summary["problems"] == [] and entry["rounds"] == 3
    cells, ratios = entry["cells"], summary["ours_over_upstream_v1"][EAGLE1[0]][EAGLE1[1]]
    tok, itl, rounds = checked_issue41_rows(LONG, cells, ratios, 4096, (1, 2, 8, 32), rounds=3)
    assert len(rounds) == 24 and sorted(r for r in rounds if r < 1.0) == [0.999, 0.999]
    assert "22 of the 24 rounds are at or above 1.0; the two below are session 43's 0.999" in folded()
    shortest = checked_issue41_targets(LONG, cells, tok, itl, runs=48)
    assert f"Acceptance length 1.000 on both servers in every run. Every timed run lasted {shortest:.1f} s" in folded()
    # this session's round alone: the c=2 greedy tail the pooled cell absorbs
    mine = LONG.call_report("call1")
    c2 = mine["ours_over_upstream_v1"]["in4096/greedy/c2"]
    assert round(c2["paired_p99_itl_ms"]["median"], 2) == 1.30 and round(ratios["in4096/greedy/c2"]["p99_itl_ms"], 3) \
        == 0.908
    assert "greedy was 1.30× upstream's (10.44 / 8.04 ms" in folded() and "the cell is 0.908" in folded()
    assert no_compile_after_boot(LONG, ("call1",), ("ours",)) == 1
    plans = [folder.call_report(call)["variants"]["ours"]["facts"][0]["warmup_stats"]
             for folder, call in ((S43_LONG, "call2"), (LONG, "call1"))]
    assert len({(w["steps"], w["rounds"], tuple(w["sampled_rounds"]), tuple(w["num_reqs"])) for w in plans}) == 1
    assert "both boots' warm-ups ran the same 19 steps, 9 rounds, 6 of them sampled" in folded()
    assert no_compile_after_boot(S43_LONG, ("call2", "call3"), ("ours",)) == 2
    assert upstream_compiled_sentence(compiles_in_every_call(LONG.bench, ("call1",))) in folded()


def test_the_128_token_round_on_the_same_servers():
    summary, entry = SHORT.pooled_entry(*EAGLE1, "0.26.0", ("call2",))
    assert summary["problems"] == ["llama8b_eagle (dummy) 1 of 3 rounds ran (--budget-s 520 would be passed)"]
    cells, ratios = entry["cells"], summary["ours_over_upstream_v1"][EAGLE1[0]][EAGLE1[1]]
    tok, itl, rounds = checked_issue41_rows(SHORT, cells, ratios, 128, (1, 2, 8, 32), rounds=1,
                                            title="## The 128-token row", per_round_sentence=False)
    assert len(rounds) == 8 and min(rounds) > 1.0
    assert f"every cell of the round ({min(tok):.3f}–{max(tok):.3f}); p99 ITL {min(itl):.3f}–{max(itl):.3f}×" \
        in folded()
    durations = [d for v in cells.values() for k in cells["ours"] for d in v[k]["duration"]["all"]]
    assert len(durations) == 16 and f"Every timed run lasted {min(durations):.1f} s or more" in folded()
    assert no_compile_after_boot(SHORT, ("call1", "call2"), ("ours",)) == 2
    assert compiles_in_every_call(SHORT.bench, ("call1", "call2")) == compiles_in_every_call(LONG.bench, ("call1",))
    up, ours = (cells[v]["in128/greedy/c32"]["median_ttft_ms"]["median"] for v in ("upstream_v1", "ours"))
    assert f"median TTFT is longer ({ours:.2f} against {up:.2f} ms)" in folded()


def test_the_eight_sequence_server_ran_trimmed_rounds_and_left_nothing(monkeypatch):
    from portable_spec.vllm_adapter.worker import sampling_plan as sp

    report = CHECK.call_report("seq8")
    assert report["commit"].startswith("de726ba") and report["vllm"] == "0.26.0" and report["status"] == "complete"
    info = report["variants"]["ours"]
    assert sorted(report["variants"]) == ["ours"] and info["jit_after_boot"] == [] and info["jit_monitor_active"]
    assert no_compile_after_boot(CHECK, ("seq8",), ("ours",)) == 1
    facts = info["facts"][0]
    assert facts["runner_kind"] == "v1" and facts["drafter"] == EAGLE_DRAFTERS["ours"]
    stats = facts["warmup_stats"]
    assert (facts["max_num_seqs"], stats["k"], stats["steps"], stats["num_reqs"]) == (8, 3, 19, [1, 2, 3, 6])
    assert stats["uncovered"] == [] and stats["triton_builds"]["compiled"] == 3
    log = [ln for ln in server_log(CHECK, "seq8", "ours").splitlines() if "portable_spec: kernel warm-up: 19" in ln]
    assert len(log) == 1 and " INFO " in log[0] and "left to the first requests" not in log[0]
    slowest = max(range(len(stats["step_seconds"])), key=stats["step_seconds"].__getitem__)
    assert stats["step_triton_compiles"][slowest] == 1
    assert f"slowest steps: {slowest + 1} (6 requests, 22 tokens, sampled, compiles 1) " \
           f"{stats['step_seconds'][slowest]:.2f} s" in log[0]
    assert f"Its slowest step, {stats['step_seconds'][slowest]:.2f} s with one Triton compile" in folded()
    compiled = [b["name"] for b in stats["triton_builds"]["keys"] if not b["from_disk"]]
    assert compiled.count("_topk_topp_kernel") == 1
    limits = warmup_limits_of(info)
    plan = sp.plan_v1_warmup(limits, sp.SamplingLimits())
    assert len(plan.rounds) == stats["rounds"] == 9 and plan.left == frozenset()
    assert [r.profile for r in plan.sampled] == stats["sampled_rounds"]
    trimmed = [r for r in plan.rounds if r.trimmed]
    assert len(trimmed) == 3 and {r.drafts(limits.k) for r in trimmed} == {16}
    with monkeypatch.context() as patched:  # session 43's plan: no trimmed rounds
        patched.setattr(sp, "trimmed_rounds", lambda candidates, lim: [])
        before = sp.plan_v1_warmup(limits, sp.SamplingLimits())
    assert before.left == {(sp.TOPK_TOPP, k, p, "16") for k, p in ((True, False), (False, True), (True, True))}
    assert "9 rounds, the same 7 sampled profiles, 3 of them trimmed to 16 draft rows, nothing left" in folded()
    free = report["device_memory"]["free_bytes"]
    assert f"the harness read {free / 1e9:.1f} GB free" in folded()
    used, total = (RUN / "seq8" / "nvidia_smi_before.txt").read_text().splitlines()[1].split(", ")
    assert total == "143771 MiB" and f"`nvidia-smi` read {int(used.split()[0]):,} MiB in use before it" in folded()
    assert f"in {info['boots'][0]['seconds']:.1f} s, and ran sampled traffic" in folded()


def test_issue_41s_coverage_counts_the_4096_token_rows():
    rows = checked_coverage(coverage.ISSUE_41, RESULTS, ROOT, (RUN.name, S43), folded(), (120, 44, 43, 36),
                            (*EAGLE1, "upstream_v1"))
    checked_counted_row(rows, 4096, f"bench/results/{RUN.name}/e1d4k/")
    short = [c for c in rows if c["cell"].startswith("in128/")]
    assert len(short) == 8 and not any(c["counted"] for c in short)
    assert all(m["rounds"] == 1 for c in short for m in c["measurements"])
    readme = (ROOT / "README.md").read_text()
    assert "| llama8b_eagle | dummy | ours / upstream_v1 | 4096 | greedy | 1.04 | 1.01 | 1.00 | 1.00 | 0.26.0 |" \
        in readme


@pytest.mark.parametrize("folder,call", [(SHORT, "call1"), (SHORT, "call2"), (LONG, "call1"), (CHECK, "seq8")])
def test_every_runs_folder_here_is_one_archive(folder, call):
    check_runs_archived(folder, call)


def test_the_calls_that_ran_fewer_rounds_than_asked():
    first, short = SHORT.call_report("call1"), SHORT.call_report("call2")
    assert (first["status"], first["rounds_done"], first["stopped_because"]) == \
        ("incomplete", 0, "--budget-s 480 would be passed")
    assert (short["status"], short["rounds_done"], short["stopped_because"]) == \
        ("incomplete", 1, "--budget-s 520 would be passed")
    boots = {v: info["boots"][0]["seconds"] for v, info in first["variants"].items()}
    assert (f"compiling the model ({boots['upstream_v1']:.1f} / {boots['ours']:.1f} s, upstream / ours), and ran "
            f"the warm runs ({first['phases_s']['warm_s']:.1f} s). Its round was estimated at "
            f"{first['phases_s']['round_estimate_s']:.1f} s") in folded()
    assert f"round 0 was estimated at {short['phases_s']['round_estimate_s']:.1f} s" in folded()
