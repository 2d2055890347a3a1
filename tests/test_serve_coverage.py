"""The serving tables' coverage (``serve_bench/coverage.py``): which cells the committed pooled summaries measured,
with how many rounds, on which TP, and each cell's verdict on its table's targets. Read over the real committed
results (session 28's 4096-token row, session 27's TP=2 row) and over fabricated summaries that must miss."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from portable_spec.errors import PortableSpecError
from portable_spec_harness.serve_bench import coverage

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
SESSION28 = "bench/results/2026-11-29-h200-session28/e3g4k028/pooled/serve_bench_summary.json"


def cell(report: dict, pair: str, mode: str, base: str, key: str) -> dict:
    found = [c for c in report["cells"] if (c["pair"], c["mode"], c["baseline"], c["cell"]) == (pair, mode, base, key)]
    assert len(found) == 1, (pair, mode, base, key)
    return found[0]


def test_session_28s_4096_row_is_counted_and_meets_issue_41s_targets_with_p99_judged_paired():
    report = coverage.coverage(coverage.ISSUE_41, RESULTS, ROOT)
    assert report["summaries_read"] >= 11 and report["measurements_read"] > 0
    for c in (1, 2, 8, 32):
        entry = cell(report, "llama8b_eagle3", "designed-partial", "upstream_v1", f"in4096/greedy/c{c}")
        (m,) = entry["measurements"]
        assert m["summary"] == SESSION28 and m["rounds"] == 3 and m["vllm"] == ["0.28.0"] and m["counted"]
        assert m["tensor_parallel"] == 1 and entry["meets"], (c, m)
    c8 = cell(report, "llama8b_eagle3", "designed-partial", "upstream_v1", "in4096/greedy/c8")["measurements"][0]
    assert c8["p99_itl_judged"] == "paired" and c8["p99_itl"] == 1.011  # 1.32 as a ratio of medians (session 28)
    uncounted = [f"{c['pair']} {c['mode']} vs {c['baseline']} {c['cell']}" for c in report["cells"] if not c["counted"]]
    assert sorted(report["missing"]) == sorted(uncounted)  # every cell without 3 rounds, named, and no other
    assert report["counted"] + len(report["missing"]) == report["cells_in_table"] == 120


def test_a_cell_measured_at_tp2_belongs_to_issue_37s_table_not_issue_41s():
    key = "in1024/greedy/c1"
    tp1 = cell(coverage.coverage(coverage.ISSUE_41, RESULTS, ROOT), "llama8b_eagle3", "designed-partial",
               "upstream_v1", key)
    tp2 = cell(coverage.coverage(coverage.ISSUE_37, RESULTS, ROOT), "llama8b_eagle3", "designed", "upstream_v1", key)
    (m,) = tp2["measurements"]
    assert m["tensor_parallel"] == 2 and m["counted"] and m["verdicts"] == {"output_tok_s": True}  # 1.67 >= 1.10
    # one GPU's cell is measured too (one H200, vLLM 0.26.0), from its own pool and none of TP=2's
    assert tp1["measurements"] and all(t["tensor_parallel"] == 1 for t in tp1["measurements"])
    assert m["summary"] not in {t["summary"] for t in tp1["measurements"]}


def write_summary(folder: Path, ratios: dict, rounds: int = 3, cells: dict | None = None, mode: str = "dummy",
                  workload: dict | None = None) -> Path:
    folder.mkdir(parents=True)
    summary = {"kind": "serve_bench_summary",
               "pairs": {"qwen3moe30b_eagle3": {mode: {"sources": [], "device": ["NVIDIA H200"], "vllm": ["0.26.0"],
                                                      "rounds": rounds, "workload": workload or {},
                                                      "cells": cells or {}}}},
               "ours_over_upstream_v1": {"qwen3moe30b_eagle3": {mode: ratios}}}
    path = folder / "serve_bench_summary.json"
    path.write_text(json.dumps(summary))
    return path


def test_a_cell_below_a_target_misses_and_fewer_rounds_are_listed_not_counted(tmp_path):
    write_summary(tmp_path / "a", {"in128/greedy/c1": {"output_tok_s": 0.99},
                                   "in128/greedy/c2": {"output_tok_s": 1.2,
                                                       "paired_p99_itl_ms": {"median": 1.3, "passes": 3}}})
    write_summary(tmp_path / "b", {"in128/greedy/c8": {"output_tok_s": 1.5}}, rounds=2)
    report = coverage.coverage(coverage.ISSUE_41, tmp_path)
    slow = cell(report, "qwen3moe30b_eagle3", "dummy", "upstream_v1", "in128/greedy/c1")
    assert slow["counted"] and not slow["meets"]
    # no p99 data and no call report saying what compiled after boot: both misses (unknown is not zero)
    assert slow["measurements"][0]["verdicts"] == {"output_tok_s": False, "p99_itl": False,
                                                   "no_compile_after_boot": False}
    paused = cell(report, "qwen3moe30b_eagle3", "dummy", "upstream_v1", "in128/greedy/c2")
    assert paused["measurements"][0]["verdicts"] == {"output_tok_s": True, "p99_itl": False,
                                                     "no_compile_after_boot": False}
    short = cell(report, "qwen3moe30b_eagle3", "dummy", "upstream_v1", "in128/greedy/c8")
    assert short["measurements"] and not short["counted"]
    assert (report["counted"], report["meeting_every_target"]) == (2, 0)
    grid = coverage.text(report, coverage.ISSUE_41)
    assert "0.99!" in grid and "1.20!" in grid and "(2r)" in grid


def test_a_cell_measured_twice_shows_both_ratios_oldest_first_and_meets_only_if_both_do(tmp_path):
    passes = {"paired_p99_itl_ms": {"median": 1.0, "passes": 3}}
    write_summary(tmp_path / "2026-12-01-a" / "pooled", {"in128/greedy/c1": {"output_tok_s": 0.95, **passes},
                                                         "in128/greedy/c2": {"output_tok_s": 1.05, **passes}})
    write_summary(tmp_path / "2026-12-02-b" / "pooled", {"in128/greedy/c1": {"output_tok_s": 1.02, **passes}})
    write_summary(tmp_path / "2026-12-02-c" / "pooled", {"in128/greedy/c2": {"output_tok_s": 1.04, **passes}},
                  rounds=2)
    report = coverage.coverage(coverage.ISSUE_41, tmp_path)
    twice = cell(report, "qwen3moe30b_eagle3", "dummy", "upstream_v1", "in128/greedy/c1")
    assert [m["output_tok_s"] for m in twice["measurements"]] == [0.95, 1.02] and not twice["meets"]
    grid = coverage.text(report, coverage.ISSUE_41).splitlines()
    (line,) = [g for g in grid if g.lstrip().startswith("in128   greedy") and "0.95" in g]
    # fabricated summaries have no call reports, so every measurement misses the compile check ("!"); an uncounted
    # measurement (2 rounds) adds no ratio to a counted cell; the columns widen to the longest mark
    assert line.split()[2:4] == ["0.95!/1.02!", "1.05!"] and len(line) == len("  in128   greedy   ") + 4 * 12 + 3
    rows = [r for r in coverage.markdown(report, coverage.ISSUE_41).splitlines() if r.startswith("| qwen")]
    assert rows[0].split(" | ")[5:7] == ["0.95!/1.02!", "1.05!"]
    # one measurement that meets after one that misses: the grid shows the miss, not the newest alone
    met = {"ours": "ours", "counted": True, "output_tok_s": 0.997, "verdicts": {"output_tok_s": True}}
    missed = {**met, "output_tok_s": 0.944, "verdicts": {"output_tok_s": False}}
    assert coverage._mark({"measurements": [missed, met, {**met, "counted": False, "rounds": 2}]}) == "0.94!/1.00"


def test_as_of_counts_the_folders_up_to_the_one_named_so_an_older_readmes_count_still_checks(tmp_path, capsys):
    write_summary(tmp_path / "2026-11-29-session38" / "pooled", {"in128/greedy/c1": {"output_tok_s": 1.1}})
    write_summary(tmp_path / "2026-11-30-session39" / "pooled", {"in128/greedy/c8": {"output_tok_s": 1.2}})
    write_summary(tmp_path / "2026-11-30-session40" / "x" / "pooled", {"in128/greedy/c32": {"output_tok_s": 1.3}})
    counts = {as_of: coverage.coverage(coverage.ISSUE_41, tmp_path, as_of=as_of)["counted"]
              for as_of in (None, "2026-11-30-session40", "2026-11-30-session39", "2026-11-29-session38")}
    assert counts == {None: 3, "2026-11-30-session40": 3, "2026-11-30-session39": 2, "2026-11-29-session38": 1}
    with pytest.raises(PortableSpecError, match="up to 2026-11-28"):
        coverage.coverage(coverage.ISSUE_41, tmp_path, as_of="2026-11-28")
    assert coverage.main(["--results", str(tmp_path), "--as-of", "2026-11-30-session39", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["counted"] == 2


def test_p99_without_a_pairing_is_judged_on_the_ratio_of_medians(tmp_path):
    cells = {"ours": {"in128/greedy/c1": {"p99_itl_ms": {"median": 12.0}}},
             "upstream_v1": {"in128/greedy/c1": {"p99_itl_ms": {"median": 10.0}}}}
    write_summary(tmp_path / "a", {"in128/greedy/c1": {"output_tok_s": 1.1}}, cells=cells)
    (m,) = cell(coverage.coverage(coverage.ISSUE_41, tmp_path), "qwen3moe30b_eagle3", "dummy", "upstream_v1",
                "in128/greedy/c1")["measurements"]
    assert (m["p99_itl"], m["p99_itl_judged"], m["verdicts"]["p99_itl"]) == (1.2, "medians", True)


def test_a_summary_written_before_the_axes_is_read_through_its_workload(tmp_path):
    write_summary(tmp_path / "a", {"2": {"output_tok_s": 1.05}}, workload={"input_len": 1024, "temperature": 0.0})
    entry = cell(coverage.coverage(coverage.ISSUE_41, tmp_path), "qwen3moe30b_eagle3", "dummy", "upstream_v1",
                 "in1024/greedy/c2")
    assert entry["counted"] and entry["measurements"][0]["output_tok_s"] == 1.05


def test_the_low_concurrency_floor_applies_to_designed_weights_only(tmp_path):
    ratios = {"in256/greedy/c2": {"output_tok_s": 1.05}, "in256/greedy/c8": {"output_tok_s": 1.05}}
    write_summary(tmp_path / "designed", ratios, mode="designed-perfect")
    write_summary(tmp_path / "dummy", ratios)
    table = coverage.Table("t", (coverage.Row("qwen3moe30b_eagle3", "designed", ("upstream_v1",)),
                                 coverage.Row("qwen3moe30b_eagle3", "dummy", ("upstream_v1",))),
                           (256,), ("greedy",), (2, 8), min_tok_s={"upstream_v1": 1.0},
                           low_c_floors={"upstream_v1": {2: 1.10, 8: 1.0}})
    report = coverage.coverage(table, tmp_path)
    verdict = {(c["mode"], c["cell"]): c["meets"] for c in report["cells"]}
    assert verdict == {("designed", "in256/greedy/c2"): False, ("designed", "in256/greedy/c8"): True,
                       ("dummy", "in256/greedy/c2"): True, ("dummy", "in256/greedy/c8"): True}


def test_no_summary_is_an_error_and_the_cli_exits_2_with_one_line(tmp_path, capsys):
    with pytest.raises(PortableSpecError, match="no serve_bench_summary.json"):
        coverage.coverage(coverage.ISSUE_41, tmp_path)
    assert coverage.main(["--results", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--results" in err[0]
    assert coverage.main(["--results", str(tmp_path), "--json"]) == 2
    out = capsys.readouterr()
    payload = json.loads(out.out)
    assert out.err == "" and payload["exit"] == 2 and "--results" in payload["error"]


def test_ours_forced_onto_v1_and_ours_on_vllms_pick_get_a_grid_each_against_mrv2(tmp_path):
    """Against MRV2 a dense pair has two "ours": our V1 drafter (V1 forced) and our platform on the runner vLLM picks
    (MRV2). Each is judged on its own and shown in its own grid, so a miss of one is not hidden by the other."""
    (tmp_path / "a").mkdir()
    key = "in1024/greedy/c1"
    entry = {"sources": [], "device": ["NVIDIA H200"], "vllm": ["0.28.0"], "rounds": 3, "workload": {}, "cells": {}}
    (tmp_path / "a" / "serve_bench_summary.json").write_text(json.dumps({
        "pairs": {"llama8b_eagle3": {"designed-partial": entry}},
        "ours_over_mrv2": {"llama8b_eagle3": {"designed-partial": {key: {"output_tok_s": 0.93}}}},
        "ours_mrv2_over_mrv2": {"llama8b_eagle3": {"designed-partial": {key: {"output_tok_s": 1.0}}}}}))
    report = coverage.coverage(coverage.ISSUE_41, tmp_path)
    found = cell(report, "llama8b_eagle3", "designed-partial", "mrv2", key)
    assert sorted((m["ours"], m["verdicts"]["output_tok_s"]) for m in found["measurements"]) == [
        ("ours", False), ("ours_mrv2", True)]
    assert found["counted"] and not found["meets"]  # a miss of either is the cell's miss
    grid = coverage.text(report, coverage.ISSUE_41).split("\n\n")
    v1 = next(g for g in grid if g.startswith("llama8b_eagle3 designed-partial, ours / mrv2"))
    pick = next(g for g in grid if g.startswith("llama8b_eagle3 designed-partial, ours on vLLM's pick (MRV2) / mrv2"))
    assert "0.93!" in v1 and "1.00" not in v1 and "1.00" in pick and "0.93" not in pick


def test_the_markdown_table_lists_measured_rows_only_and_shows_uncounted_ratios_with_their_rounds(tmp_path):
    write_summary(tmp_path / "a", {"in128/greedy/c1": {"output_tok_s": 0.99}, "in128/greedy/c2": {"output_tok_s": 1.2}})
    write_summary(tmp_path / "b", {"in4096/sampled/c8": {"output_tok_s": 1.5}}, rounds=2)
    report = coverage.coverage(coverage.ISSUE_41, tmp_path)
    lines = coverage.markdown(report, coverage.ISSUE_41).splitlines()
    rows = [line for line in lines[2:] if line.startswith("| ")]
    assert rows == ["| qwen3moe30b_eagle3 | dummy | ours / upstream_v1 | 128 | greedy | 0.99! | 1.20! | – | – | 0.26.0 |",
                    "| qwen3moe30b_eagle3 | dummy | ours / upstream_v1 | 4096 | sampled | – | – | 1.50 (2r) | – | 0.26.0 |"]
    assert lines[-1].startswith("2 of 120 cells counted (>= 3 rounds), 0 meeting every target")
    assert coverage.main(["--results", str(tmp_path), "--markdown"]) == 0


def test_a_cell_where_ours_compiled_after_boot_misses_issue_41_and_the_calls_are_found_beside_the_summary(tmp_path):
    """The compile count comes from each pooled call's own report, found from the repository root or, as session
    folders store them, beside the summary; one compile in any call misses issue 41's no-compile target (issue 37's
    table does not judge it), and a call whose report is gone leaves the count unknown, a miss."""
    session = tmp_path / "session"
    for call, compiles in (("call1", []), ("call2", ["Triton kernel JIT compilation: fused_moe_kernel"])):
        (session / call).mkdir(parents=True)
        (session / call / "serve_bench.json").write_text(json.dumps(
            {"variants": {"ours": {"jit_after_boot": compiles}, "upstream_v1": {"jit_after_boot": ["x"]}},
             "tensor_parallel": {"tensor_parallel_size": 1}}))
    path = write_summary(session / "pooled", {"in1024/greedy/c1": {"output_tok_s": 1.2,
                                                                  "paired_p99_itl_ms": {"median": 0.9, "passes": 3}}})
    summary = json.loads(path.read_text())
    summary["pairs"]["qwen3moe30b_eagle3"]["dummy"]["sources"] = ["call1", "call2"]
    path.write_text(json.dumps(summary))
    (m,) = cell(coverage.coverage(coverage.ISSUE_41, tmp_path), "qwen3moe30b_eagle3", "dummy", "upstream_v1",
                "in1024/greedy/c1")["measurements"]
    assert m["compiles_after_boot"] == 1 and m["verdicts"] == {"output_tok_s": True, "p99_itl": True,
                                                               "no_compile_after_boot": False}
    (session / "call2" / "serve_bench.json").write_text(json.dumps({"variants": {"ours": {"jit_after_boot": []}}}))
    (m,) = cell(coverage.coverage(coverage.ISSUE_41, tmp_path), "qwen3moe30b_eagle3", "dummy", "upstream_v1",
                "in1024/greedy/c1")["measurements"]
    assert m["compiles_after_boot"] == 0 and all(m["verdicts"].values())
    (session / "call1" / "serve_bench.json").unlink()
    (m,) = cell(coverage.coverage(coverage.ISSUE_41, tmp_path), "qwen3moe30b_eagle3", "dummy", "upstream_v1",
                "in1024/greedy/c1")["measurements"]
    assert m["compiles_after_boot"] is None and m["verdicts"]["no_compile_after_boot"] is False


def test_the_committed_issue_41_cells_read_their_calls_and_ours_compiled_nothing_after_boot():
    report = coverage.coverage(coverage.ISSUE_41, RESULTS, ROOT)
    counted = [m for c in report["cells"] for m in c["measurements"] if m["counted"]]
    assert len(counted) >= 10 and all(m["compiles_after_boot"] == 0 for m in counted), counted
    tp2 = coverage.coverage(coverage.ISSUE_37, RESULTS, ROOT)
    moe = cell(tp2, "qwen3moe30b_eagle3", "dummy", "upstream_v1", "in1024/greedy/c1")["measurements"]
    # session 29's pooled two calls and session 30's three: one compile in each of session 29's calls (before the MoE
    # size warm-up), none in session 30's
    assert [(m["rounds"], m["compiles_after_boot"]) for m in moe] == [(2, 2), (3, 2)]


def test_a_cell_counts_the_rounds_of_its_own_servers_not_the_summarys_most(tmp_path):
    """A pooled summary's ``rounds`` is the most any cell has; a lease that ran out pools a last call of some cells
    only, so a cell with two rounds in a three-round summary is listed, not counted. Session 31's 1024-token draft
    model row is such a summary: c = 8, 32 three rounds, c = 1, 2 two."""
    runs = {"in128/greedy/c1": 2, "in128/greedy/c2": 3}
    cells = {v: {k: {"runs": n} for k, n in runs.items()} for v in ("ours", "upstream_v1")}
    write_summary(tmp_path / "a", {k: {"output_tok_s": 1.2} for k in runs}, rounds=3, cells=cells)
    report = coverage.coverage(coverage.ISSUE_41, tmp_path)
    two = cell(report, "qwen3moe30b_eagle3", "dummy", "upstream_v1", "in128/greedy/c1")
    three = cell(report, "qwen3moe30b_eagle3", "dummy", "upstream_v1", "in128/greedy/c2")
    assert (two["measurements"][0]["rounds"], two["counted"]) == (2, False)
    assert (three["measurements"][0]["rounds"], three["counted"]) == (3, True)
    # session 31's pool as committed (set aside since a later pool holds its calls and a third round at c = 1, 2),
    # read alone: its summary and its calls' reports, which the coverage reads for the scheduling and short runs
    session31 = ROOT / "bench/results/2026-11-29-h200-session31"
    copy = tmp_path / "s31"
    shutil.copytree(session31 / "dm1k033", copy / "dm1k033",
                    ignore=shutil.ignore_patterns("SET_ASIDE", "runs", "*.log.gz", "phase_clock"))
    alone = coverage.coverage(coverage.ISSUE_39, copy)
    for c, rounds in ((1, 2), (2, 2), (8, 3), (32, 3)):
        (m,) = cell(alone, "llama8b_draft1b", "designed-partial", "mrv2", f"in1024/greedy/c{c}")["measurements"]
        assert (m["rounds"], m["counted"]) == (rounds, rounds >= 3), c


def write_draft_model_summary(folder: Path, ratios: dict, mode: str, per_variant: dict | None) -> None:
    """A pooled draft-model summary over one call whose report says how each server scheduled (None: the report
    does not say)."""
    folder.mkdir(parents=True)
    (folder / "call").mkdir()
    report = {"variants": {"ours": {"jit_after_boot": []}, "upstream_v1": {"jit_after_boot": []}}}
    if per_variant is not None:
        report["async_scheduling"] = {"per_variant": per_variant}
    (folder / "call" / "serve_bench.json").write_text(json.dumps(report))
    entry = {"sources": ["call"], "device": ["NVIDIA H200"], "vllm": ["0.26.0"], "rounds": 3, "workload": {},
             "cells": {}}
    (folder / "serve_bench_summary.json").write_text(json.dumps({
        "pairs": {"llama8b_draft1b": {mode: entry}}, "ours_over_upstream_v1": {"llama8b_draft1b": {mode: ratios}}}))


def test_issue_39s_floors_are_per_concurrency_on_designed_weights_and_each_scheduling_has_its_grid(tmp_path):
    ratios = {"in256/greedy/c1": {"output_tok_s": 1.25}, "in256/greedy/c2": {"output_tok_s": 1.2},
              "in256/greedy/c8": {"output_tok_s": 0.99}}
    write_draft_model_summary(tmp_path / "sync", ratios, "designed-partial", {"ours": False, "upstream_v1": False})
    write_draft_model_summary(tmp_path / "async", {"in256/greedy/c1": {"output_tok_s": 1.6}}, "designed-partial",
                              {"ours": True, "upstream_v1": True})
    write_draft_model_summary(tmp_path / "dummy", {"in256/greedy/c1": {"output_tok_s": 1.05}}, "dummy", None)
    report = coverage.coverage(coverage.ISSUE_39, tmp_path)
    c1 = cell(report, "llama8b_draft1b", "designed-partial", "upstream_v1", "in256/greedy/c1")
    assert sorted((m["ours"], m["verdicts"]["output_tok_s"]) for m in c1["measurements"]) == [
        ("ours@async", True), ("ours@sync", False)]  # 1.25 < 1.30 at c=1 with designed weights
    assert not c1["meets"]
    c2 = cell(report, "llama8b_draft1b", "designed-partial", "upstream_v1", "in256/greedy/c2")
    assert c2["meets"]  # 1.20 >= 1.15 at c=2
    assert not cell(report, "llama8b_draft1b", "designed-partial", "upstream_v1", "in256/greedy/c8")["meets"]
    dummy = cell(report, "llama8b_draft1b", "dummy", "upstream_v1", "in256/greedy/c1")
    assert dummy["meets"] and dummy["measurements"][0]["ours"] == "ours@default"  # 1.05: no low-c floor on dummy
    grids = coverage.text(report, coverage.ISSUE_39).split("\n\n")
    sync = next(g for g in grids if g.startswith("llama8b_draft1b designed-partial, ours, sync scheduling /"))
    asynchronous = next(g for g in grids if g.startswith("llama8b_draft1b designed-partial, ours, async scheduling"))
    assert "1.25!" in sync and "1.60" not in sync and "1.60" in asynchronous and "1.25" not in asynchronous
    assert any(g.startswith("llama8b_draft1b dummy, ours, vLLM's default scheduling (not recorded) /") for g in grids)


def test_servers_that_scheduled_differently_are_mixed_and_a_report_that_does_not_say_is_default():
    same = {"async_scheduling": {"per_variant": {"ours": True, "mrv2": True}}}
    other = {"async_scheduling": {"per_variant": {"ours": False, "mrv2": False}}}
    split = {"async_scheduling": {"per_variant": {"ours": True, "mrv2": False}}}
    assert coverage.scheduling([same, same], "ours", "mrv2") == "async"
    assert coverage.scheduling([other], "ours", "mrv2") == "sync"
    assert coverage.scheduling([same, other], "ours", "mrv2") == "mixed"
    assert coverage.scheduling([split], "ours", "mrv2") == "mixed"
    assert coverage.scheduling([same, None], "ours", "mrv2") == "default"
    assert coverage.scheduling([], "ours", "mrv2") == "default"


def test_a_summary_its_session_set_aside_is_listed_not_read(tmp_path):
    """Session 19's 256-token pool holds a round its README keeps apart: a ``SET_ASIDE`` file beside it says why, and
    the coverage lists it and reads the same rounds repooled without it; a fabricated summary with such a file gives
    no measurement, and without it its cell is read."""
    report = coverage.coverage(coverage.ISSUE_39, RESULTS, ROOT)
    aside, *superseded = report["set_aside"]
    assert aside["summary"] == "bench/results/2026-11-28-h200-session19/in256_pooled/serve_bench_summary.json.gz"
    assert "profiler" in aside["why"]
    read = {m["summary"] for c in report["cells"] for m in c["measurements"]}
    assert aside["summary"] not in read and any("repooled/s19-dm256b" in s for s in read)
    read |= {m["summary"] for c in coverage.coverage(coverage.ISSUE_41, RESULTS, ROOT)["cells"]
             for m in c["measurements"]}  # a pool of issue 41's pairs is read by its table
    # pools a later pool of the same calls and more replaced: (the set-aside pool, the one read instead)
    replaced = [("2026-11-29-h200-session25/dm832026", "2026-11-30-h200-session34/dm832026"),
                ("2026-11-29-h200-session31/dm1k033", "2026-11-30-h200-session37/dm1k033"),
                ("2026-11-29-h200-session32/dmd026", "2026-11-30-h200-session33/dmd026"),
                ("2026-11-30-h200-session33/dmp026", "2026-11-30-h200-session34/dmp026"),
                ("2026-11-30-h200-session34/dmp026", "2026-11-30-h200-session38/dmp026"),
                ("2026-12-01-h200-session46/moe1k", "2026-12-01-h200-session47/moe1k"),
                ("2026-12-01-h200-session47/moe1k832", "2026-12-01-h200-session48/moe1k832"),
                ("2026-12-01-h200-session48/moe4kg", "2026-12-02-h200-session49/moe4kg"),
                ("2026-12-01-h200-session48/moe4ks", "2026-12-02-h200-session49/moe4ks"),
                ("2026-12-02-h200-session49/e3m128", "2026-12-02-h200-session50/e3m128"),
                ("2026-12-03-h200-session57/e1m4096s", "2026-12-03-h200-session60/e1m4096s")]
    assert [one["summary"] for one in superseded] == [
        f"bench/results/{old}/pooled/serve_bench_summary.json" for old, _ in replaced]
    newer = dict(replaced)
    for one, (_, new) in zip(superseded, replaced):
        assert one["why"].startswith(f"superseded by bench/results/{new}/pooled")
        while new in newer:  # a replacement itself replaced: the last of the chain is read
            new = newer[new]
        assert one["summary"] not in read and any(f"{new}/pooled" in s for s in read)
    for one in (aside, *superseded):
        assert f"set aside: {one['summary']}: {one['why']}" in coverage.text(report, coverage.ISSUE_39)
    path = write_summary(tmp_path / "a", {"in128/greedy/c1": {"output_tok_s": 1.2}})
    (path.parent / coverage.SET_ASIDE).write_text("a round followed the profiler\n")
    fabricated = coverage.coverage(coverage.ISSUE_41, tmp_path)
    assert fabricated["set_aside"] == [{"summary": "a/serve_bench_summary.json", "why": "a round followed the profiler"}]
    assert fabricated["measurements_read"] == 0
    (path.parent / coverage.SET_ASIDE).unlink()
    assert coverage.coverage(coverage.ISSUE_41, tmp_path)["measurements_read"] == 1


def test_counted_cells_with_a_run_under_its_calls_min_run_s_are_named_in_the_text_and_json(tmp_path):
    """Each pooled call's report lists its runs under its own ``--min-run-s`` (``short_runs``): the coverage names
    the counted cells holding one (cell, variant, seconds, that call's floor) and still counts them; a short run of a
    cell with too few rounds, or of a server the cell does not compare, is not named."""
    session = tmp_path / "session"
    shorts = {"call1": (10.0, [("ours", "in1024/greedy/c1", 8.5), ("mrv2", "in1024/greedy/c2", 7.0),
                               ("upstream_v1", "in1024/greedy/c8", 6.0)]),
              "call2": (12.0, [("upstream_v1", "in1024/greedy/c1", 11.0)])}
    for call, (floor, runs) in shorts.items():
        (session / call).mkdir(parents=True)
        (session / call / "serve_bench.json").write_text(json.dumps({"workload": {"min_run_s": floor}, "short_runs": [
            {"variant": v, "cell": key, "round": 0, "duration_s": s, "num_prompts": 4} for v, key, s in runs]}))
    rounds = {"in1024/greedy/c1": 3, "in1024/greedy/c2": 3, "in1024/greedy/c8": 2}
    cells = {v: {k: {"runs": n} for k, n in rounds.items()} for v in ("ours", "upstream_v1")}
    path = write_summary(session / "pooled", {k: {"output_tok_s": 1.2} for k in rounds}, cells=cells)
    summary = json.loads(path.read_text())
    summary["pairs"]["qwen3moe30b_eagle3"]["dummy"]["sources"] = ["call1", "call2"]
    path.write_text(json.dumps(summary))
    report = coverage.coverage(coverage.ISSUE_41, tmp_path)
    assert report["counted"] == 2  # short runs do not change which cells count
    assert report["counted_with_short_runs"] == [
        {"pair": "qwen3moe30b_eagle3", "mode": "dummy", "baseline": "upstream_v1", "cell": "in1024/greedy/c1",
         "short_runs": [{"variant": "ours", "duration_s": 8.5, "round": 0, "min_run_s": 10.0},
                        {"variant": "upstream_v1", "duration_s": 11.0, "round": 0, "min_run_s": 12.0}]}]
    assert coverage.text(report, coverage.ISSUE_41).splitlines()[1] == (
        "short runs: 1 of 2 counted cells hold a timed run under its call's --min-run-s: qwen3moe30b_eagle3 dummy "
        "in1024/greedy/c1 vs upstream_v1: ours 8.50 s (< 10), upstream_v1 11.00 s (< 12)")
    (session / "call1" / "serve_bench.json").unlink()
    (session / "call2" / "serve_bench.json").unlink()
    assert coverage.text(coverage.coverage(coverage.ISSUE_41, tmp_path), coverage.ISSUE_41).splitlines()[1] == \
        "short runs: 0 of 2 counted cells hold a timed run under its call's --min-run-s"
