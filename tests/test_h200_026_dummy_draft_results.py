"""Session 32's GPU results (one H200, vLLM 0.26.0, V1 runner) as its README states them, read back from the
committed JSON and logs: the draft model with dummy weights, upstream V1 against ours, pooled over three calls (3
rounds at c = 1, 2, one at c = 8, 32), no compile after boot on ours, ours' replays, the stall totals. A changed
number in the README or in a JSON fails."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from results_readback import ResultsFolder, compile_to_kv_gap, jit_compiles, pooled_rows_by_round, pooled_table

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "bench" / "results" / "2026-11-29-h200-session32"
DM = RUN / "dmd026"
PAIR, MODE = "llama8b_draft1b", "dummy"
CONCURRENCY = (1, 2, 8, 32)
COMMIT = "85cc0b7"
CALLS = ("call1", "call2", "call3")
ROUNDS = {1: 3, 2: 3, 8: 1, 32: 1}


FOLDER = ResultsFolder(RUN, DM)
readme, folded, call_report, summary = FOLDER.readme, FOLDER.folded, FOLDER.call_report, FOLDER.summary


def section(length: int) -> str:
    """The README's table for one input length (both tables share a header)."""
    text = readme()
    start = text.index(f"### Input {length}\n")
    end = text.find("### Input", start + 1)
    return text[start:] if end < 0 else text[start:end]


def test_every_call_ran_this_sessions_code_on_vllm_0_26_v1_with_async_scheduling():
    seen = 0
    for folder in CALLS:
        report = call_report(folder)
        assert report["vllm"] == "0.26.0" and report["commit"].startswith(COMMIT) and report["tree_changes"] == 0
        assert report["device"] == "NVIDIA H200" and sorted(report["variants"]) == ["ours", "upstream_v1"]
        assert report["pair"]["mode"] == MODE and report["pair"]["k"] == 3
        assert report["async_scheduling"]["per_variant"] == {"upstream_v1": True, "ours": True}
        for variant, info in report["variants"].items():
            assert info["facts"] and all(f["runner_kind"] == "v1" for f in info["facts"]), (folder, variant)
            drafter = {f["drafter"] for f in info["facts"]}
            assert drafter == {"portable_spec.vllm_adapter.spec_decode.draft_model.FullGraphDraftModelProposer"
                               if variant == "ours" else "vllm.v1.spec_decode.draft_model.DraftModelProposer"}
            seen += 1
    assert seen == 6


def test_both_tables_print_the_pooled_numbers_with_the_rounds_each_cell_has():
    s, _ = FOLDER.pooled_entry(PAIR, MODE, "0.26.0", CALLS)
    lines, lowest = [], []
    for length in (256, 1024):
        cells, ratios, rows = pooled_table(s, PAIR, MODE, section(length), "| c | upstream V1 | ours |",
                                           CONCURRENCY)
        trimmed = {c: row[:-1] for c, row in rows.items()}
        _, per_round = pooled_rows_by_round(cells, ratios, trimmed, length, CONCURRENCY)
        for c in CONCURRENCY:
            key = f"in{length}/greedy/c{c}"
            up, ours = cells["upstream_v1"][key], cells["ours"][key]
            assert up["runs"] == ours["runs"] == ROUNDS[c] == int(rows[str(c)][-1]), (length, c)
            assert up["failed"] == ours["failed"] == 0
            assert up["spec_decode_acceptance_length"]["all"] == ours["spec_decode_acceptance_length"]["all"] == \
                [1.0] * ROUNDS[c]
            lowest += [o / u for o, u in zip(ours["output_throughput"]["all"], up["output_throughput"]["all"])]
        lines.append(per_round)
    assert min(lowest) > 1.0  # ahead in every round of every cell
    assert f"(lowest {min(lowest):.3f}, 256 in at c=32)" in folded()
    assert f"256 in: {lines[0]}. 1024 in: {lines[1]}." in folded()
    cells = s["pairs"][PAIR][MODE]["cells"]
    shortest = {v: min(x for c in cells[v].values() for x in c["duration"]["all"]) for v in ("upstream_v1", "ours")}
    assert (f"Every timed run lasted {shortest['ours']:.2f} s or more** (ours' shortest; upstream V1's "
            f"{shortest['upstream_v1']:.2f} s or more)") in folded()
    noisy = cells["upstream_v1"]["in1024/greedy/c1"]["output_throughput"]["all"]
    steady = cells["ours"]["in1024/greedy/c1"]["output_throughput"]["all"]
    assert f"{noisy[0]:.1f}, {noisy[1]:.1f} and {noisy[2]:.1f} tok/s, ours' {steady[0]:.1f} in all" in folded()
    assert len({round(x, 1) for x in steady}) == 1


def test_the_pool_keeps_every_cell_and_only_call_3s_shortfall_stays_a_problem():
    s = summary()
    assert s["pairs"][PAIR][MODE]["workload"]["concurrency"] == list(CONCURRENCY)
    assert s["problems"] == [f"{PAIR} ({MODE}) 1 of 2 rounds ran (--budget-s 555 would be passed)"]
    assert len(s["made_up"]) == 1 and "call1/serve-bench: 1 of 3 rounds ran" in s["made_up"][0]
    one, two, three = (call_report(f) for f in CALLS)
    assert (one["rounds_done"], one["rounds_asked"], one["phases_s"]["boot_s"]) == (1, 3, 222.4)
    assert (two["rounds_done"], two["problems"], two["phases_s"]["boot_s"]) == (2, [], 63.1)
    assert two["settings"]["first_round"] == 1 and two["settings"]["sizing_from"]
    assert (three["rounds_done"], three["rounds_asked"], three["phases_s"]["boot_s"]) == (1, 2, 138.2)
    assert three["workload"]["concurrency"] == [8, 32]
    assert "the first boot on a fresh host took 222 s" in folded() and "boot 63 s" in folded()
    assert "boot 138 s" in folded()


def test_no_compile_after_boot_on_ours_and_ours_replayed_its_graphs():
    compared = 0
    for folder in CALLS:
        report = call_report(folder)
        assert report["variants"]["ours"]["jit_after_boot"] == []
        assert jit_compiles(DM / folder / "serve-bench" / "server_ours.log.gz") == []
        upstream = jit_compiles(DM / folder / "serve-bench" / "server_upstream_v1.log.gz")
        assert len(upstream) == 6 and upstream[0] == "_compute_slot_mapping_kernel", upstream
        compared += 1
    assert compared == 3
    assert "Upstream V1 compiled 6 Triton kernels of vLLM's draft path after boot in every call" in folded()
    facts = {f["when"]: f for f in call_report("call2")["variants"]["ours"]["facts"]}
    before, after = facts["before"], facts["after"]
    chain = after["replays"]["chain"] - before["replays"].get("chain", 0)
    first = after["replays"]["first"] - before["replays"].get("first", 0)
    assert chain > 0 and first > 0 and after["eager_keys"] == {}
    assert f"{chain:,} chain-step and {first:,} first-pass replays during call 2" in folded()


def test_the_stall_totals_the_readme_names():
    cells = summary()["pairs"][PAIR][MODE]["cells"]
    wave = [cells[v]["in1024/greedy/c32"]["stall_total_ms"]["all"][0] / 1000 for v in ("upstream_v1", "ours")]
    assert f"of {wave[0]:.1f} s (upstream) and {wave[1]:.1f} s (ours) in the one round" in folded()
    small = max(x for v in ("upstream_v1", "ours") for length in (256, 1024) for c in (1, 2, 8)
                for x in cells[v][f"in{length}/greedy/c{c}"]["stall_total_ms"]["all"])
    assert f"at c ≤ 8, at most {small / 1000:.1f} s per run" in folded()


def test_the_first_boots_gap_and_the_flashinfer_build_that_explains_it():
    gaps = {}
    for folder in CALLS:
        for variant in ("upstream_v1", "ours"):
            log = gzip.open(DM / folder / "serve-bench" / f"server_{variant}.log.gz", "rt").read()
            gaps[folder, variant] = compile_to_kv_gap(log)
            assert "Using FlashInfer for top-p & top-k sampling." in log, (folder, variant)
    assert gaps["call1", "upstream_v1"] == 105 and gaps["call1", "ours"] == 102
    later = [g for (folder, _), g in gaps.items() if folder != "call1"]
    assert f"the same step took {min(later)}–{max(later)} s" in folded()
    probe = json.loads((RUN / "flashinfer_jit" / "probe.json").read_text())
    first, again = probe["runs"]
    assert first["tag"] == "first" and again["tag"] == "again" and first["flashinfer"] == "0.6.14"
    assert (f"`top_k_top_p_sampling_from_logits` call took **{first['top_k_top_p_first_call_s']} s**, and "
            f"{again['top_k_top_p_first_call_s']} s in a second process") in folded()
    assert first["top_k_top_p_first_call_s"] > 50 * again["top_k_top_p_first_call_s"]
