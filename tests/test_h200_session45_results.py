"""Session 45's results README (one H200, vLLM 0.26.0) read back from its JSON and logs: the 8B EAGLE-1 pair's
128-token rows pooled to three rounds with session 44's one (issue 41), the two leases' host speeds read from the
same boots' logs, and the MoE pair's boot call that started no round."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from portable_spec_harness import host_facts
from portable_spec_harness.serve_bench import coverage
from results_readback import (EAGLE_DRAFTERS, ResultsFolder, check_draft_v1_call, check_runs_archived,
                              check_triton_keys_logged, checked_counted_row, checked_coverage, checked_issue41_rows,
                              checked_issue41_targets, compile_and_init, jit_compiles, no_compile_after_boot,
                              server_log)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
RUN = RESULTS / "2026-12-01-h200-session45"
S44 = "2026-12-01-h200-session44"
EAGLE1 = ("llama8b_eagle", "dummy")
SHORT = ResultsFolder(RUN, RUN / "e1c")
MOE = ResultsFolder(RUN, RUN / "moe")
S44_SHORT = ResultsFolder(RESULTS / S44, RESULTS / S44 / "e1c")
KEPT = "/tmp/serve_bench_kept.json"
CALLS = ("callA", "callB", "callC")
UPSTREAM_FIRST = ("eagle_prepare_next_token_padded_kernel", "eagle_step_slot_mapping_metadata_kernel",
                  "rejection_greedy_sample_kernel", "eagle_prepare_inputs_padded_kernel")


def folded() -> str:
    return SHORT.folded()


def test_every_call_ran_8e04137_on_the_v1_runner_on_servers_of_session_44s_shape():
    assert sum(check_draft_v1_call(SHORT.call_report(call), call, "8e04137", "dummy", tree_changes=1,
                                   drafters=EAGLE_DRAFTERS) for call in CALLS) == 6
    assert check_draft_v1_call(MOE.call_report("call1"), "call1", "8e04137", "dummy", tree_changes=1,
                               drafters=EAGLE_DRAFTERS) == 2
    shapes = set()
    for call in CALLS:
        report = SHORT.call_report(call)
        assert report["settings"]["sizing_from"] == "gpu-inputs/s44-e1c-call2.json", call
        assert report["workload"]["max_model_len"] == 4304 and report["workload"]["max_num_seqs"] == 32, call
        check_triton_keys_logged(report, call)
        shapes |= {(v, tuple(info["serve_args"])) for v, info in report["variants"].items()}
    earlier = S44_SHORT.call_report("call2")
    # each variant's servers had session 44's vllm serve arguments (its model path, flags and shape): the rounds pool
    assert len(shapes) == 2 and shapes == {(v, tuple(info["serve_args"])) for v, info in earlier["variants"].items()}
    later = [SHORT.call_report(call) for call in CALLS[1:]]
    assert all(info["boots"][0]["reused"]["registry"] == KEPT for r in later for info in r["variants"].values())
    assert "`tree_changes` 1 in every call: the one untracked file, session 44's `e1c/call2` report" in folded()
    for folder, call in [(SHORT, c) for c in CALLS] + [(MOE, "call1")]:
        console = folder.bench / call / "console.log.gz"
        assert "placed 1 FlashInfer 0.6.14 module(s) of sm_90" in gzip.decompress(console.read_bytes()).decode(), call


def test_the_128_token_rows_pool_three_rounds_meet_the_targets_and_compile_nothing_after_boot():
    summary, entry = SHORT.pooled_entry(*EAGLE1, "0.26.0", ("call2", *CALLS))
    assert [Path(p).parts[-4] for p in entry["sources"]] == [S44, RUN.name, RUN.name, RUN.name]
    assert summary["problems"] == [] and entry["rounds"] == 3
    cells, ratios = entry["cells"], summary["ours_over_upstream_v1"][EAGLE1[0]][EAGLE1[1]]
    tok, itl, rounds = checked_issue41_rows(SHORT, cells, ratios, 128, (1, 2, 8, 32), rounds=3)
    assert len(rounds) == 24 and min(rounds) > 1.0 and "Every round is above 1.0." in folded()
    shortest = checked_issue41_targets(SHORT, cells, tok, itl, runs=48)
    assert f"Acceptance length 1.000 on both servers in every run. Every timed run lasted {shortest:.1f} s" in folded()
    assert no_compile_after_boot(SHORT, CALLS, ("ours",)) == 3
    ttft = {v: cells[v]["in128/greedy/c32"]["median_ttft_ms"] for v in ("upstream_v1", "ours")}
    (up0, up1, up2), (ours0, ours1, ours2) = ttft["upstream_v1"]["all"], ttft["ours"]["all"]
    assert ours0 > 1.5 * up0 and up1 < ours1 and ours2 < up2  # session 44's gap, then none either way
    assert (f"at c=32 greedy ({ours0:.2f} against {up0:.2f} ms), was upstream V1's round: in rounds 1 and 2 ours' was "
            f"{ours1:.2f} / {ours2:.2f} ms and upstream V1's {up1:.2f} / {up2:.2f} ms (pooled medians "
            f"{ttft['ours']['median']:.2f} / {ttft['upstream_v1']['median']:.2f} ms") in folded()
    logs = {call: jit_compiles(SHORT.bench / call / "serve-bench" / "server_upstream_v1.log.gz") for call in CALLS}
    assert logs == {"callA": list(UPSTREAM_FIRST), "callB": [*UPSTREAM_FIRST, "_topk_topp_kernel"],
                    "callC": [*UPSTREAM_FIRST, "_topk_topp_kernel"]}
    named = ", ".join(f"`{k}`" for k in UPSTREAM_FIRST[:-1]) + f" and `{UPSTREAM_FIRST[-1]}`"
    assert (f"compiled {named} after boot by the end of `callA` (c = 1, 2), and `_topk_topp_kernel` too by the end "
            f"of `callB` (c = 8, 32)") in folded()


def test_only_upstream_slowed_on_this_lease_whose_boots_compiled_slower():
    _, entry = SHORT.pooled_entry(*EAGLE1, "0.26.0", ("call2", *CALLS))
    cells = entry["cells"]
    grew: dict[str, list[float]] = {"upstream_v1": [], "ours": []}
    for variant, by_cell in cells.items():
        for key, cell in by_cell.items():
            first, *later = cell["median_tpot_ms"]["all"]  # round 0 (session 44) first: the pooling order
            assert len(later) == 2, key
            grew[variant] += [t / first for t in later]
    up, ours = grew["upstream_v1"], grew["ours"]
    assert len(up) == len(ours) == 16 and max(up) > 1.4 and max(ours) < 1.1
    assert (f"Upstream V1's median TPOT in rounds 1–2 was {min(up):.2f}–{max(up):.2f}× its round-0 value, cell by "
            f"cell; ours' {min(ours):.2f}–{max(ours):.2f}×") in folded()
    readings = {}
    for folder, call in ((S44_SHORT, "call1"), (SHORT, "callA")):
        for variant in ("upstream_v1", "ours"):
            log = server_log(folder, call, variant)
            readings[(call, variant)] = compile_and_init(log)
    compile_s = {k: float(v[0]) for k, v in readings.items()}
    assert all(compile_s[("callA", v)] > 1.3 * compile_s[("call1", v)] for v in ("upstream_v1", "ours"))
    assert (f"logged `torch.compile took {readings[('callA', 'upstream_v1')][0]} s` / "
            f"`{readings[('callA', 'ours')][0]} s` (upstream / ours) against session 44's "
            f"`{readings[('call1', 'upstream_v1')][0]} s` / `{readings[('call1', 'ours')][0]} s`, and "
            f"`init engine ... took {readings[('callA', 'upstream_v1')][1]} s` / `{readings[('callA', 'ours')][1]} s` "
            f"against `{readings[('call1', 'upstream_v1')][1]} s` / `{readings[('call1', 'ours')][1]} s`") in folded()
    s44 = [r["output_tok_s"] for r in S44_SHORT.call_report("call2")["ours_over_upstream_v1"].values()]
    assert len(s44) == 8 and f"Session 44's round gave ours {min(s44):.3f}–{max(s44):.3f}" in folded()
    every = {v: {key: cell["output_throughput"] for key, cell in by_cell.items()} for v, by_cell in cells.items()}
    ours_rounds = [o / u for key, tok in every["ours"].items()  # rounds 1 and 2: this lease's
                   for o, u in zip(tok["all"][1:], every["upstream_v1"][key]["all"][1:])]
    assert len(ours_rounds) == 16
    medians = [min(range(3), key=lambda i: abs(tok["all"][i] - tok["median"]))  # the round the median is
               for by_cell in every.values() for tok in by_cell.values()]       # (printed rounded)
    assert len(medians) == 16 and 0 not in medians
    lowest = sum(min(r := [o / u for o, u in zip(every["ours"][key]["all"], every["upstream_v1"][key]["all"])]) == r[0]
                 for key in every["ours"])
    assert lowest == 7 and "session 44's round is the lowest ratio in 7 of the 8 cells" in folded()
    assert "Both servers' pooled median output tok/s is one of this lease's rounds in every cell" in folded()
    assert f"this lease's two rounds {min(ours_rounds):.3f}–{max(ours_rounds):.3f}" in folded()
    assert all("host" not in SHORT.call_report(call) for call in CALLS)  # before the change that records it
    main = " ".join((ROOT / "README.md").read_text().split())
    assert "1.01–1.07 on the first, 1.06–1.33 on the second" in main
    assert f"its median TPOT up to {max(up):.2f}×, ours' at most {max(ours):.2f}×" in main


def test_the_moe_boot_call_started_no_round_and_says_why():
    report = MOE.call_report("call1")
    assert report["pair"]["name"] == "qwen3moe30b_eagle3" and report["status"] == "incomplete"
    assert (report["rounds_done"], report["stopped_because"]) == (0, "--budget-s 530 would be passed")
    phases, place = report["phases_s"], report["placement"]
    assert (place["mode"], place["reason"]) == ("together", "--placement together")
    assert f"(estimated {place['per_server_gib']:.2f} GiB each against {place['free_gib']:.2f} GiB free)" in folded()
    boots = {v: info["boots"][0]["seconds"] for v, info in report["variants"].items()}
    assert boots["ours"] == phases["boot_s"]  # booted together: the call's boot phase is the slower one
    assert f"in {boots['upstream_v1']:.1f} / {boots['ours']:.1f} s (upstream / ours" in folded()
    assert f"ran the warm runs ({phases['warm_s']:.1f} s). Its round was estimated at " \
           f"{phases['round_estimate_s']:.1f} s" in folded()
    elapsed = phases["boot_s"] + phases["warm_s"]
    assert elapsed + phases["round_estimate_s"] + 45 > 530 >= elapsed + phases["round_estimate_s"] + 15
    assert (f"({elapsed:.1f} s at least), with the 45 s a call that stops its servers keeps back, {elapsed:.1f} + "
            f"{phases['round_estimate_s']:.1f} + 45 = {elapsed + phases['round_estimate_s'] + 45:.1f} s passes the "
            f"530 s budget") in folded()
    ours, up = report["variants"]["ours"], report["variants"]["upstream_v1"]
    assert ours["jit_after_boot"] == [] and no_compile_after_boot(MOE, ("call1",), ("ours",)) == 1
    stats = ours["facts"][0]["warmup_stats"]
    assert stats["steps"] == 19 and stats["uncovered"] == [] and "ours' warm-up ran 19 steps and left nothing" \
        in folded()
    upstream = jit_compiles(MOE.bench / "call1" / "serve-bench" / "server_upstream_v1.log.gz")
    assert upstream == ["_compute_slot_mapping_kernel", *UPSTREAM_FIRST] and len(up["jit_after_boot"]) == 5
    warm = report["warm_runs"]
    assert len(warm) == 16 and "in the 16 warm runs" in folded()
    first = {v: next(w for w in warm if w["variant"] == v) for v in ("upstream_v1", "ours")}
    assert first["upstream_v1"]["result"]["median_ttft_ms"] > 2000 > 100 > first["ours"]["result"]["median_ttft_ms"]
    assert (f"upstream V1's first warm run lasted {first['upstream_v1']['duration_s']:.2f} s, its first token after "
            f"{first['upstream_v1']['result']['median_ttft_ms']:,.1f} ms (the compiles), ours' "
            f"{first['ours']['duration_s']:.2f} s ({first['ours']['result']['median_ttft_ms']:.1f} ms)") in folded()


def test_each_calls_first_client_run_waited_on_the_clients_import():
    firsts, later = {}, []
    for folder, call in [(SHORT, c) for c in CALLS] + [(MOE, "call1")]:
        report = folder.call_report(call)
        rows = report["warm_runs"] + report["runs"]  # in the order they ran: warm runs before any timed run
        assert rows[0]["kind"] == "warm" and rows[0]["variant"] == "upstream_v1", call
        over = [row["seconds"] - row["duration_s"] for row in rows]
        firsts[call] = (over[0], rows[0])
        later += over[1:]
    assert len(later) == 62 and max(later) < 1.5 < 20 < min(o for o, _ in firsts.values())  # 66 runs, 4 calls
    assert ("24.37 s more in `e1c/callA`, 21.64 s in `callB`, 21.39 s in `callC`" in folded()
            and "24.50 s in `moe/call1`" in folded())
    assert [f"{o:.2f}" for o, _ in firsts.values()] == ["24.37", "21.64", "21.39", "24.50"]
    row = firsts["callC"][1]
    assert f"{row['seconds']:.2f} s for a run of {row['duration_s']:.2f} s" in folded()
    assert f"every later run {min(later):.2f}–{max(later):.2f} s more" in folded()


def test_the_call_that_ran_fewer_rounds_than_asked():
    first = SHORT.call_report("callA")
    assert (first["status"], first["rounds_done"], first["rounds_asked"], first["stopped_because"]) == \
        ("incomplete", 1, 2, "--budget-s 540 would be passed")
    boots = {v: info["boots"][0]["seconds"] for v, info in first["variants"].items()}
    assert (f"`e1c/callA` booted both servers ({boots['upstream_v1']:.1f} / {boots['ours']:.1f} s, upstream / "
            f"ours) and ran the warm runs ({first['phases_s']['warm_s']:.1f} s); round 1 was estimated at "
            f"{first['phases_s']['round_estimate_s']:.1f} s") in folded()
    assert all(SHORT.call_report(c)["status"] == "complete" for c in CALLS[1:])
    used, = (RUN / "e1c" / "callC" / "nvidia_smi_after.txt").read_text().splitlines()[1:]
    assert used == "0 MiB" and "0 MiB in use after it" in folded()


def test_issue_41s_coverage_counts_the_128_token_rows():
    rows = checked_coverage(coverage.ISSUE_41, RESULTS, ROOT, (RUN.name, S44), folded(), (120, 52, 51, 44),
                            (*EAGLE1, "upstream_v1"))
    checked_counted_row(rows, 128, f"bench/results/{RUN.name}/e1c/")
    readme = (ROOT / "README.md").read_text()
    assert "| llama8b_eagle | dummy | ours / upstream_v1 | 128 | greedy | 1.06 | 1.32 | 1.18 | 1.24 | 0.26.0 |" \
        in readme


@pytest.mark.parametrize("folder,call", [(SHORT, c) for c in CALLS] + [(MOE, "call1")])
def test_every_runs_folder_here_is_one_archive(folder, call):
    check_runs_archived(folder, call)


def test_the_host_probe_on_a_fresh_h200_lease():
    facts = json.loads((RUN / "host" / "host_facts.json").read_text())
    assert set(facts) == {"cpu_model", "logical_cpus", "usable_cpus", "loadavg", "python_loop_ms", "torch_cpu_op_us"}
    assert facts["python_loop_ms"] > 0 and facts["torch_cpu_op_us"] > 0  # both probes ran on the host
    assert (f'"{facts["cpu_model"]}", {facts["usable_cpus"]} of {facts["logical_cpus"]} CPUs, load '
            f'{facts["loadavg"][0]:.1f}, {facts["python_loop_ms"]:.1f} ms per Python loop, '
            f'{facts["torch_cpu_op_us"]:.2f} µs per torch CPU op') in folded()
    lscpu = dict(line.split(":", 1) for line in (RUN / "host" / "lscpu.txt").read_text().splitlines() if ":" in line)
    fields = {k: lscpu[k].strip() for k in ("Model name", "CPU family", "Model", "Stepping")}
    assert fields == {"Model name": facts["cpu_model"], "CPU family": "6", "Model": "207", "Stepping": "2"}
    assert "family 6, model 207, stepping 2 in `lscpu.txt`" in folded()
    assert host_facts.describe({**facts, "cpu_signature": "family 6 model 207 stepping 2"}).startswith(
        f"host: {facts['cpu_model']} (family 6 model 207 stepping 2), 16 of 16 CPUs")
