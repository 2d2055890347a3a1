"""Which cells of a serving table the committed, pooled serving benchmarks cover, and whether each meets its targets.

Why: issue 41's table (three pairs x inputs 128 / 1024 / 4096 x c = 1, 2, 8, 32 x greedy and sampled, against
upstream V1 and, on dense pairs, MRV2), issue 37's at TP=2 and issue 39's (the draft model on either runner) fill
over many leases, on several vLLM versions and machines, each lease's cells pooled into its own
``serve_bench_summary.json``. This reads every pooled summary under ``bench/results/`` (``serve_bench.combine``'s
output; older ones keyed by concurrency alone are read through their workload) and says per cell what was measured
where, with how many rounds, and the verdict on each target: so a closing note can say which cells are done and which
miss, and the next lease can be planned from what is missing.

A cell counts as measured only where both its servers have at least ``MIN_ROUNDS`` rounds in a pooled summary (a
summary's cells can have different rounds: a lease that ran out pools a last call of some cells only); fewer rounds
are listed but not counted. p99 ITL is judged paired round by round where the summary has it
(``paired_p99_itl_ms``), else as the ratio of the two engines' medians, and the report says which. A summary with a
``SET_ASIDE`` file beside it (its results folder's one-line reason, e.g. a round its README keeps apart) is listed,
not read.

    python -m portable_spec_harness.serve_bench.coverage [--results bench/results] [--table issue41|issue37|issue39]
        [--json | --markdown]
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from portable_spec.errors import PortableSpecError
from portable_spec.output import emit_error
from portable_spec_harness.serve_bench.combine import REPORT_NAMES, read_json
from portable_spec_harness.serve_bench.plan import TARGET_LINES, Cell, legacy_sampling

MIN_ROUNDS = 3
"""The brief's rule for a benchmark cell users would trust: at least three interleaved rounds."""
SUMMARY_NAMES = ("serve_bench_summary.json", "serve_bench_summary.json.gz")
BASELINE_KEYS = {"upstream_v1": ("ours_over_upstream_v1",), "mrv2": ("ours_over_mrv2", "ours_mrv2_over_mrv2")}
"""Baseline -> the ratio keys that compare ours with it (on vLLM 0.33.0 ours is MRV2 on our platform)."""


@dataclass(frozen=True)
class Row:
    """One pair of a table: its weights (``designed-partial``, ``dummy``; ``designed``: either designed head) and the
    baselines it is compared with."""

    pair: str
    mode: str
    baselines: tuple[str, ...]

    def holds(self, found: dict[str, Any]) -> bool:
        """Whether a measurement is of this row's pair and weights."""
        mode = found["mode"]
        return found["pair"] == self.pair and (mode == self.mode or (self.mode == "designed"
                                                                       and mode.startswith("designed-")))


@dataclass(frozen=True)
class Table:
    """A serving table: rows by input length x sampling x concurrency, each cell against each row's baselines."""

    name: str
    rows: tuple[Row, ...]
    inputs: tuple[int, ...]
    samplings: tuple[str, ...]
    concurrencies: tuple[int, ...]
    min_tok_s: dict[str, float] = field(default_factory=dict)
    """Baseline -> the lowest ours / baseline output tok/s that meets the target."""
    max_p99_itl: dict[str, float] = field(default_factory=dict)
    """Baseline -> the highest ours / baseline p99 ITL that meets the target (absent: no p99 target)."""
    low_c_floors: dict[str, dict[int, float]] = field(default_factory=dict)
    """Baseline -> concurrency -> the lowest ours / baseline output tok/s there with designed weights (absent: the
    every-cell floor)."""
    tensor_parallel: int = 1
    """The TP the table is for: a cell measured at another TP belongs to another table and is not read."""
    no_compile_after_boot: bool = False
    """Whether a cell also needs ours' server to have compiled no kernel after boot in every call pooled into it (its
    JIT monitor's count; a call that does not say is a miss)."""
    by_scheduling: bool = False
    """Whether each scheduling the two servers ran with (``SCHEDULING``) gets a grid of its own: the draft model's
    speed on the V1 runner differs by whole factors between vLLM 0.26.0's default (synchronous for ``draft_model``)
    and ``--async-scheduling``, so neither may stand in for the other."""

    def cells(self) -> list[tuple[Row, str, Cell]]:
        return [(row, base, Cell(n, s, c)) for row in self.rows for base in row.baselines for n in self.inputs
                for s in self.samplings for c in self.concurrencies]


FLOORS = {base: TARGET_LINES[base][0] for base in ("upstream_v1", "mrv2")}
"""Ours / baseline output tok/s that meets a cell's target: the lowest line the plots draw (1.00x upstream V1, 0.97x
MRV2)."""
LOW_C_FLOORS = {"upstream_v1": {c: TARGET_LINES["upstream_v1"][1] for c in (1, 2)}}
"""At c <= 2 with designed acceptance: 1.10x upstream V1."""
DRAFT_MODEL_FLOOR = 1.0
DRAFT_MODEL_LOW_C_FLOORS = {1: 1.30, 2: 1.15}
"""Issue 39's draft model over upstream on either runner: 1.00x in every cell; with designed acceptance 1.30x at c=1
and 1.15x at c=2 (not drawn on the serving plots, whose lines are issues 37 and 41's)."""

ISSUE_41 = Table(
    "issue 41",
    (Row("llama8b_eagle3", "designed-partial", ("upstream_v1", "mrv2")),
     Row("llama8b_eagle", "dummy", ("upstream_v1", "mrv2")),
     Row("qwen3moe30b_eagle3", "dummy", ("upstream_v1",))),
    (128, 1024, 4096), ("greedy", "sampled"), (1, 2, 8, 32),
    min_tok_s=FLOORS, max_p99_itl={"upstream_v1": 1.25}, no_compile_after_boot=True)
"""Issue 41 item 4: ours >= 1.00x upstream V1 and (dense pairs) >= 0.97x MRV2 on output tok/s in every cell, and
ours' p99 ITL <= 1.25x upstream V1's; item 2: no compile after boot on ours in any cell."""
ISSUE_37 = Table(
    "issue 37 (TP=2)",
    (Row("qwen3moe30b_eagle3", "designed", ("upstream_v1",)),
     Row("qwen3moe30b_eagle3", "dummy", ("upstream_v1",)),
     Row("llama8b_eagle3", "designed", ("upstream_v1", "mrv2")),
     Row("llama8b_eagle3", "dummy", ("upstream_v1", "mrv2"))),
    (256, 1024), ("greedy",), (1, 2, 8, 32),
    min_tok_s=FLOORS, low_c_floors=LOW_C_FLOORS, tensor_parallel=2)
"""Issue 37 item 4 at TP=2: ours >= 1.00x upstream V1 in every cell, >= 1.10x at c <= 2 with designed acceptance,
>= 0.97x MRV2 on the dense pair."""
ISSUE_39 = Table(
    "issue 39 (draft model)",
    tuple(Row("llama8b_draft1b", mode, ("upstream_v1", "mrv2")) for mode in ("designed-partial", "designed-perfect",
                                                                              "dummy")),
    (256, 1024), ("greedy",), (1, 2, 8, 32),
    min_tok_s={base: DRAFT_MODEL_FLOOR for base in ("upstream_v1", "mrv2")},
    low_c_floors={base: DRAFT_MODEL_LOW_C_FLOORS for base in ("upstream_v1", "mrv2")}, by_scheduling=True)
"""Issue 39 items 4 and 5: the 8B + 1B-shaped draft model pair, dummy and designed weights (perfect and partial
draft), against upstream on the runner vLLM picks (V1 on 0.26.0 / 0.28.0; MRV2 on vLLM's platform on 0.33.0): ours
>= 1.00x in every cell, >= 1.30x at c=1 and >= 1.15x at c=2 with designed acceptance, on each runner."""
TABLES = {"issue41": ISSUE_41, "issue37": ISSUE_37, "issue39": ISSUE_39}
SCHEDULING = {True: "async", False: "sync"}
"""A server's async scheduling as its report read it back -> the name a grid gives it; two servers that differ are
``mixed``, a report written before the bench recorded it (vLLM's default then, never asked for) ``default``."""


SET_ASIDE = "SET_ASIDE"
"""A file beside a pooled summary whose text says why the summary is not comparable (written into that results
folder, where the run's history lives): the coverage lists it under ``set_aside`` and reads none of its cells."""


def summaries(results: Path, as_of: str | None = None) -> list[Path]:
    """Every pooled summary under ``results`` (``as_of``: only those in a results folder whose name sorts at or before
    that folder's, dated names sorting by date: the coverage a README of that folder counted); none is an error (a
    coverage of nothing proves nothing)."""
    found = sorted(p for name in SUMMARY_NAMES for p in results.rglob(name)
                   if as_of is None or p.relative_to(results).parts[0] <= as_of)
    if not found:
        raise PortableSpecError(f"no serve_bench_summary.json under {results}"
                                + (f" up to {as_of}" if as_of else "") + ": pass --results the folder that holds "
                                "bench/results' pooled serving benchmarks")
    return found


def _relative(path: Path, root: Path) -> str:
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def cell_of_key(key: str, workload: dict[str, Any]) -> Cell:
    """A ratio's cell key (``in1024/greedy/c2``), or a summary's written before the axes (``2``: its one input length
    and temperature from the workload)."""
    if "/" in key:
        length, sampling, c = key.split("/")
        return Cell(int(length.removeprefix("in")), sampling, int(c.removeprefix("c")))
    return Cell(int(workload["input_len"]), legacy_sampling(workload), int(key))


def source_reports(sources: list[str], summary: Path, root: Path) -> list[dict[str, Any] | None]:
    """Each pooled call's own report (``serve_bench.json``), its path as ``combine`` was given it: from the
    repository root, or from a folder above the summary (a session's results folder); None where none is found."""
    bases = [root, *summary.parents]
    out = []
    for source in sources:
        found = next((base / source / name for base in bases for name in REPORT_NAMES
                      if (base / source / name).exists()), None)
        out.append(read_json(found) if found else None)
    return out


def tensor_parallel(reports: list[dict[str, Any] | None]) -> int | None:
    """The TP the summary's calls ran at, read from each call's report (None: no report says), for a summary
    combined before it recorded its own ``tensor_parallel_size``."""
    seen = {(r.get("tensor_parallel") or {}).get("tensor_parallel_size") or 1 for r in reports if r is not None}
    return seen.pop() if len(seen) == 1 else None


def compiles_after_boot(reports: list[dict[str, Any] | None], variant: str) -> int | None:
    """Kernels vLLM's JIT monitor saw compile after boot on ``variant``'s server, over every pooled call; None when a
    call's report is missing or does not say (unknown is not zero)."""
    counts = [((r or {}).get("variants") or {}).get(variant, {}).get("jit_after_boot") for r in reports]
    return sum(len(c) for c in counts) if counts and all(c is not None for c in counts) else None


def scheduling(reports: list[dict[str, Any] | None], ours: str, base: str) -> str:
    """How the two servers scheduled in every pooled call (``SCHEDULING``): ``default`` where a call's report is
    missing or does not say, ``mixed`` where the servers or the calls differ."""
    seen = set()
    for report in reports:
        per_variant = ((report or {}).get("async_scheduling") or {}).get("per_variant") or {}
        if per_variant.get(ours) is None or per_variant.get(base) is None:
            return "default"
        seen |= {per_variant[ours], per_variant[base]}
    return SCHEDULING[seen.pop()] if len(seen) == 1 else ("mixed" if seen else "default")


def short_runs(reports: list[dict[str, Any] | None], cell: Cell, variants: tuple[str, ...]) -> list[dict[str, Any]]:
    """The timed runs of ``variants`` in ``cell`` that a pooled call's report lists as under that call's
    ``--min-run-s`` (its ``short_runs``; a call whose report is missing, or ran with no ``--min-run-s``, lists none):
    a counted cell may still rest on runs too short for a steady number, and a reader of the coverage should see
    which."""
    return [{"variant": s["variant"], "duration_s": s["duration_s"], "round": s["round"],
             "min_run_s": report["workload"]["min_run_s"]}
            for report in reports if report for s in report.get("short_runs") or []
            if s["cell"] == cell.key and s["variant"] in variants]


def cell_rounds(cells: dict[str, Any], ours: str, base: str, key: str, rounds: int | None) -> int | None:
    """The rounds behind one cell's ratio: the fewer of its two servers' runs in the pooled cells, else (a summary
    written before the cells) the summary's rounds."""
    runs = [((cells.get(v) or {}).get(key) or {}).get("runs") for v in (ours, base)]
    return min(runs) if all(isinstance(r, int) for r in runs) else rounds


def measurements(path: Path, root: Path) -> list[dict[str, Any]]:
    """Every (pair, mode, baseline, cell) one pooled summary measured, with where and how."""
    summary = read_json(path)
    out = []
    for pair, modes in summary.get("pairs", {}).items():
        for mode, entry in modes.items():
            reports = source_reports(entry.get("sources") or [], path, root)
            tp = entry.get("tensor_parallel_size") or tensor_parallel(reports)
            where = {"summary": _relative(path, root),
                     "device": entry.get("device"), "vllm": entry.get("vllm"), "rounds": entry.get("rounds"),
                     "tensor_parallel": tp}
            for base, keys in BASELINE_KEYS.items():
                for key in keys:
                    ours = key.removesuffix(f"_over_{base}")
                    compiles = compiles_after_boot(reports, ours)  # one count per variant, shared by its cells
                    scheduled = scheduling(reports, ours, base)
                    for cell_key, ratio in ((summary.get(key) or {}).get(pair, {}).get(mode) or {}).items():
                        if "error" in ratio:
                            continue
                        cell = cell_of_key(cell_key, entry["workload"])
                        cells = entry.get("cells") or {}
                        out.append({"pair": pair, "mode": mode, "baseline": base, "cell": cell.key, "ours": ours,
                                    **where, "rounds": cell_rounds(cells, ours, base, cell_key, where["rounds"]),
                                    "scheduling": scheduled, "compiles_after_boot": compiles,
                                    "short_runs": short_runs(reports, cell, (ours, base)),
                                    **_ratios(ratio, cells, ours, base, cell_key)})
    return out


def _ratios(ratio: dict[str, Any], cells: dict[str, Any], ours: str, base: str, key: str) -> dict[str, Any]:
    paired = ratio.get("paired_output_tok_s") or {}
    p99 = ratio.get("paired_p99_itl_ms") or {}
    p99_of_medians = ratio.get("p99_itl_ms")  # stats.RATIO_METRICS; a summary combined before it has the cells only
    if p99_of_medians is None:
        mine, theirs = (cells.get(ours) or {}).get(key) or {}, (cells.get(base) or {}).get(key) or {}
        try:
            p99_of_medians = round(mine["p99_itl_ms"]["median"] / theirs["p99_itl_ms"]["median"], 4)
        except (KeyError, TypeError, ZeroDivisionError):
            p99_of_medians = None
    return {"output_tok_s": ratio["output_tok_s"], "paired_output_tok_s": paired.get("median"),
            "p99_itl": p99.get("median") if p99.get("passes") else p99_of_medians,
            "p99_itl_judged": "paired" if p99.get("passes") else ("medians" if p99_of_medians else None)}


def verdicts(table: Table, found: dict[str, Any]) -> dict[str, bool]:
    """Each target of ``table`` for one measurement: True met, False missed (a p99 with no data misses)."""
    base = found["baseline"]
    concurrency = int(found["cell"].rpartition("/c")[2])
    floor = table.min_tok_s[base]
    if found["mode"].startswith("designed"):
        floor = table.low_c_floors.get(base, {}).get(concurrency, floor)
    out = {"output_tok_s": found["output_tok_s"] >= floor}
    if base in table.max_p99_itl:
        out["p99_itl"] = found["p99_itl"] is not None and found["p99_itl"] <= table.max_p99_itl[base]
    if table.no_compile_after_boot:
        out["no_compile_after_boot"] = found["compiles_after_boot"] == 0
    return out


def coverage(table: Table, results: Path, root: Path | None = None, as_of: str | None = None) -> dict[str, Any]:
    """The table's cells: each with its measurements (newest summary last) and, for the counted ones (at least
    ``MIN_ROUNDS`` rounds), the verdicts; and the totals: counted, meeting every target, missing. ``as_of`` counts
    the results folders up to that one only (``summaries``), so an older README's count stays checkable; a summary
    set aside later stays set aside."""
    root = root or results
    paths = summaries(results, as_of)
    reasons = {p: (p.parent / SET_ASIDE).read_text().strip() for p in paths if (p.parent / SET_ASIDE).is_file()}
    aside, paths = list(reasons.items()), [p for p in paths if p not in reasons]
    every = [m for path in paths for m in measurements(path, root)
             if (m["tensor_parallel"] or 1) == table.tensor_parallel]
    if table.by_scheduling:  # a grid per scheduling: the numerator's name carries it
        every = [{**m, "ours": f"{m['ours']}@{m['scheduling']}"} for m in every]
    cells = []
    for row, base, cell in table.cells():
        mine = [m for m in every if row.holds(m) and (m["baseline"], m["cell"]) == (base, cell.key)]
        for m in mine:
            m["counted"] = (m["rounds"] or 0) >= MIN_ROUNDS
            if m["counted"]:
                m["verdicts"] = verdicts(table, m)
        counted = [m for m in mine if m["counted"]]
        cells.append({"pair": row.pair, "mode": row.mode, "baseline": base, "cell": cell.key, "measurements": mine,
                      "counted": bool(counted),
                      "meets": bool(counted) and all(all(m["verdicts"].values()) for m in counted)})
    counted = [c for c in cells if c["counted"]]
    return {"table": table.name, "summaries_read": len(paths), "measurements_read": len(every),
            "set_aside": [{"summary": _relative(p, root), "why": why} for p, why in aside],
            "cells": cells, "cells_in_table": len(cells), "counted": len(counted),
            "meeting_every_target": sum(c["meets"] for c in counted),
            "counted_with_short_runs": counted_short(counted),
            "missing": [f"{c['pair']} {c['mode']} vs {c['baseline']} {c['cell']}" for c in cells if not c["counted"]]}


def counted_short(counted: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The counted cells whose counted measurements hold a timed run under its call's ``--min-run-s``, each with those
    runs: they count (the rounds are there), but a reader should know which numbers rest on short runs. A baseline's
    run is listed once where two numerators' measurements of one summary share it (ours and ours_mrv2 over MRV2)."""
    out = []
    for c in counted:
        runs = list({(m["summary"], r["variant"], r["round"], r["duration_s"]): r for m in c["measurements"]
                     if m["counted"] for r in m.get("short_runs") or []}.values())
        if runs:
            out.append({**{k: c[k] for k in ("pair", "mode", "baseline", "cell")}, "short_runs": runs})
    return out


def short_line(report: dict[str, Any]) -> str:
    """``text``'s line on ``counted_with_short_runs``: how many counted cells, and each one's short runs."""
    short = report.get("counted_with_short_runs") or []
    named = "; ".join(f"{c['pair']} {c['mode']} {c['cell']} vs {c['baseline']}: " + ", ".join(
        f"{r['variant']} {r['duration_s']:.2f} s (< {r['min_run_s']:g})" for r in c["short_runs"]) for c in short)
    return (f"short runs: {len(short)} of {report['counted']} counted cells hold a timed run under its call's "
            f"--min-run-s" + (f": {named}" if named else ""))


def text(report: dict[str, Any], table: Table) -> str:
    """A grid per row, baseline and the variant over it (``NUMERATORS``): input x sampling down, concurrency across;
    a counted cell shows its ratio and ``!`` where a target misses (``_mark``: one per counted measurement), ``(nr)``
    a cell measured with fewer than ``MIN_ROUNDS`` rounds only (n: the most rounds of any of its summaries), ``-``
    none."""
    lines = [f"{report['table']}: {report['counted']} of {report['cells_in_table']} cells measured with >= "
             f"{MIN_ROUNDS} rounds ({report['meeting_every_target']} meet every target), from "
             f"{report['summaries_read']} pooled summaries"]
    lines += [short_line(report)]
    lines += [f"set aside: {a['summary']}: {a['why']}" for a in report.get("set_aside", [])]
    for row, base, ours, lines_of_cells in grids(report, table):
        lines.append(f"\n{row.pair} {row.mode}, {numerator_name(ours)} / {base} output tok/s (c = "
                     f"{', '.join(map(str, table.concurrencies))})")
        marks = [(n, sampling, [_mark(c, ours) for c in cells]) for n, sampling, cells in lines_of_cells]
        width = max([8] + [len(mark) + 1 for _, _, row_marks in marks for mark in row_marks])
        for n, sampling, row_marks in marks:
            lines.append(f"  in{n:<5} {sampling:<8} " + " ".join(f"{mark:>{width}}" for mark in row_marks))
    return "\n".join(lines)


NUMERATORS = {"ours": "ours", "ours_mrv2": "ours on vLLM's pick (MRV2)"}
"""How a grid names the variant over its baseline: ``ours`` is our V1 drafter (the V1 runner, forced on a dense
target), ``ours_mrv2`` our platform on the runner vLLM picks (MRV2 for a dense target: what a user gets unless V1 is
forced). Against MRV2 both answer different questions, so each has its own grid and neither hides the other."""


SCHEDULING_NAMES = {"async": "async scheduling", "sync": "sync scheduling", "mixed": "mixed scheduling",
                    "default": "vLLM's default scheduling (not recorded)"}
"""How a ``by_scheduling`` grid names its numerator's scheduling (``SCHEDULING``)."""


def numerator_name(ours: str) -> str:
    """A grid's numerator as a reader reads it: ``NUMERATORS``' name, with its scheduling where the table splits by
    it (``ours@async``)."""
    variant, _, scheduled = ours.partition("@")
    name = NUMERATORS.get(variant, variant)
    return f"{name}, {SCHEDULING_NAMES.get(scheduled, scheduled)}" if scheduled else name


def numerators(grid: list[dict[str, Any]]) -> list[str]:
    """The variants measured over one row's baseline (``ours`` where none was), in ``NUMERATORS`` order, each
    variant's schedulings in ``SCHEDULING_NAMES`` order."""
    seen = {m["ours"] for cell in grid for m in cell["measurements"]}
    order = {f"{v}@{s}": (i, j) for i, v in enumerate(NUMERATORS) for j, s in enumerate(SCHEDULING_NAMES)}
    order.update({v: (i, -1) for i, v in enumerate(NUMERATORS)})
    return sorted(seen, key=lambda o: (order.get(o, (len(NUMERATORS), 0)), o)) or ["ours"]


def grids(report: dict[str, Any], table: Table) -> Iterator[tuple[Row, str, str, list[tuple[int, str, list]]]]:
    """Each grid ``text`` and ``markdown`` print, in the table's order: its row, baseline and variant over it, and its
    lines (input length, sampling, the cells by concurrency)."""
    by_key = {(c["pair"], c["mode"], c["baseline"], c["cell"]): c for c in report["cells"]}
    for row in table.rows:
        for base in row.baselines:
            lines = [(n, s, [by_key[row.pair, row.mode, base, Cell(n, s, c).key] for c in table.concurrencies])
                     for n in table.inputs for s in table.samplings]
            for ours in numerators([cell for _, _, cells in lines for cell in cells]):
                yield row, base, ours, lines


def _mark(cell: dict[str, Any], ours: str = "ours") -> str:
    """A cell's mark: each counted measurement's ratio, oldest first and joined by ``/``, ``!`` after each that misses
    a target. Why every one: the cell meets only where all its counted measurements do (``coverage``), so a grid
    showing the newest alone would hide the miss that keeps the cell from meeting."""
    cell = {**cell, "measurements": [m for m in cell["measurements"] if m["ours"] == ours]}
    counted = [m for m in cell["measurements"] if m["counted"]]
    if counted:
        return "/".join(f"{m['output_tok_s']:.2f}" + ("" if all(m["verdicts"].values()) else "!") for m in counted)
    return f"({max(m['rounds'] or 0 for m in cell['measurements'])}r)" if cell["measurements"] else "-"


def markdown(report: dict[str, Any], table: Table) -> str:
    """The measured part of ``text``'s grids as one markdown table, for a README: a line per pair, weights, variant
    over baseline, input length and sampling that has any measurement, its cells marked as in ``text`` (``–`` for
    none; an uncounted cell with its latest ratio), and the vLLM versions they were measured on; a closing line says
    what the marks mean and what the rows leave out."""
    head = ["pair", "weights", "ratio", "input", "sampling", *(f"c={c}" for c in table.concurrencies), "vLLM"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row, base, ours, lines_of_cells in grids(report, table):
        for n, sampling, cells in lines_of_cells:
            found = [m for c in cells for m in c["measurements"] if m["ours"] == ours]
            if not found:
                continue
            versions = sorted({v for m in found for v in (m["vllm"] or [])})
            lines.append(f"| {row.pair} | {row.mode} | {numerator_name(ours)} / {base} | {n} | {sampling} | "
                         + " | ".join(_md_mark(c, ours) for c in cells) + f" | {', '.join(versions)} |")
    lines.append(f"\n{report['counted']} of {report['cells_in_table']} cells counted (>= {MIN_ROUNDS} rounds), "
                 f"{report['meeting_every_target']} meeting every target; `!` a missed target, `a/b` a cell measured "
                 "more than once (oldest first), `(nr)` n rounds only (shown, not counted), `–` not measured; rows "
                 "with no measurement are left out.")
    return "\n".join(lines)


def _md_mark(cell: dict[str, Any], ours: str) -> str:
    """``_mark`` for a README: an uncounted cell also shows its latest ratio before its rounds (``0.95 (1r)``)."""
    mark = _mark(cell, ours)
    if mark == "-":
        return "–"
    if mark.startswith("("):
        latest = [m for m in cell["measurements"] if m["ours"] == ours][-1]
        return f"{latest['output_tok_s']:.2f} {mark}"
    return mark


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m portable_spec_harness.serve_bench.coverage",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=Path("bench/results"),
                        help="the folder of committed results (default bench/results)")
    parser.add_argument("--table", choices=sorted(TABLES), default="issue41", help="which table (default issue41)")
    parser.add_argument("--as-of", metavar="FOLDER", help="count only the results folders whose names sort at or "
                        "before FOLDER's (e.g. 2026-11-30-h200-session39): the coverage as that folder's README saw it")
    parser.add_argument("--json", action="store_true", help="print the whole coverage as JSON")
    parser.add_argument("--markdown", action="store_true", help="print the measured rows as one markdown table "
                        "(what README's serving tables are, checked by tests/test_docs_agree.py)")
    args = parser.parse_args(argv)
    table = TABLES[args.table]
    try:
        report = coverage(table, args.results, Path.cwd(), args.as_of)
    except PortableSpecError as exc:
        return emit_error(str(exc), 2, args.json)
    print(json.dumps(report, indent=1) if args.json else markdown(report, table) if args.markdown
          else text(report, table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
