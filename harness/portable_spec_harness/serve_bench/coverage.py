"""Which cells of a serving table the committed, pooled serving benchmarks cover, and whether each meets its targets.

Why: issue 41's table (three pairs x inputs 128 / 1024 / 4096 x c = 1, 2, 8, 32 x greedy and sampled, against
upstream V1 and, on dense pairs, MRV2) fills over many leases, on several vLLM versions and machines, each lease's
cells pooled into its own ``serve_bench_summary.json``. This reads every pooled summary under ``bench/results/``
(``serve_bench.combine``'s output; older ones keyed by concurrency alone are read through their workload) and says
per cell what was measured where, with how many rounds, and the verdict on each target: so a closing note can say
which cells are done and which miss, and the next lease can be planned from what is missing.

A cell counts as measured only from a pooled summary of at least ``MIN_ROUNDS`` rounds; fewer rounds are listed but
not counted. p99 ITL is judged paired round by round where the summary has it (``paired_p99_itl_ms``), else as the
ratio of the two engines' medians, and the report says which.

    python -m portable_spec_harness.serve_bench.coverage [--results bench/results] [--table issue41|issue37]
        [--json | --markdown]
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from portable_spec.errors import PortableSpecError
from portable_spec.output import emit_error
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
    min_tok_s_low_c: dict[str, float] = field(default_factory=dict)
    """Baseline -> the lowest ours / baseline output tok/s at c <= 2 with designed weights (absent: none)."""
    tensor_parallel: int = 1
    """The TP the table is for: a cell measured at another TP belongs to another table and is not read."""
    no_compile_after_boot: bool = False
    """Whether a cell also needs ours' server to have compiled no kernel after boot in every call pooled into it (its
    JIT monitor's count; a call that does not say is a miss)."""

    def cells(self) -> list[tuple[Row, str, Cell]]:
        return [(row, base, Cell(n, s, c)) for row in self.rows for base in row.baselines for n in self.inputs
                for s in self.samplings for c in self.concurrencies]


FLOORS = {base: TARGET_LINES[base][0] for base in ("upstream_v1", "mrv2")}
"""Ours / baseline output tok/s that meets a cell's target: the lowest line the plots draw (1.00x upstream V1, 0.97x
MRV2)."""
LOW_C_FLOORS = {"upstream_v1": TARGET_LINES["upstream_v1"][1]}
"""At c <= 2 with designed acceptance: 1.10x upstream V1."""

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
    min_tok_s=FLOORS, min_tok_s_low_c=LOW_C_FLOORS, tensor_parallel=2)
"""Issue 37 item 4 at TP=2: ours >= 1.00x upstream V1 in every cell, >= 1.10x at c <= 2 with designed acceptance,
>= 0.97x MRV2 on the dense pair."""
TABLES = {"issue41": ISSUE_41, "issue37": ISSUE_37}


def read_json(path: Path) -> dict[str, Any]:
    return json.loads(gzip.open(path, "rt").read() if path.suffix == ".gz" else path.read_text())


def summaries(results: Path) -> list[Path]:
    """Every pooled summary under ``results``; none is an error (a coverage of nothing proves nothing)."""
    found = sorted(p for name in SUMMARY_NAMES for p in results.rglob(name))
    if not found:
        raise PortableSpecError(f"no serve_bench_summary.json under {results}: pass --results the folder that holds "
                                "bench/results' pooled serving benchmarks")
    return found


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
        found = next((base / source / name for base in bases for name in ("serve_bench.json", "serve_bench.json.gz")
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


def measurements(path: Path, root: Path) -> list[dict[str, Any]]:
    """Every (pair, mode, baseline, cell) one pooled summary measured, with where and how."""
    summary = read_json(path)
    out = []
    for pair, modes in summary.get("pairs", {}).items():
        for mode, entry in modes.items():
            reports = source_reports(entry.get("sources") or [], path, root)
            tp = entry.get("tensor_parallel_size") or tensor_parallel(reports)
            where = {"summary": str(path.relative_to(root)) if path.is_relative_to(root) else str(path),
                     "device": entry.get("device"), "vllm": entry.get("vllm"), "rounds": entry.get("rounds"),
                     "tensor_parallel": tp}
            for base, keys in BASELINE_KEYS.items():
                for key in keys:
                    ours = key.removesuffix(f"_over_{base}")
                    compiles = compiles_after_boot(reports, ours)  # one count per variant, shared by its cells
                    for cell_key, ratio in ((summary.get(key) or {}).get(pair, {}).get(mode) or {}).items():
                        if "error" in ratio:
                            continue
                        cell = cell_of_key(cell_key, entry["workload"])
                        out.append({"pair": pair, "mode": mode, "baseline": base, "cell": cell.key, "ours": ours,
                                    **where, "compiles_after_boot": compiles,
                                    **_ratios(ratio, entry.get("cells") or {}, ours, base, cell_key)})
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
    low_c = found["mode"].startswith("designed") and int(found["cell"].rpartition("/c")[2]) <= 2
    floor = table.min_tok_s_low_c.get(base, table.min_tok_s[base]) if low_c else table.min_tok_s[base]
    out = {"output_tok_s": found["output_tok_s"] >= floor}
    if base in table.max_p99_itl:
        out["p99_itl"] = found["p99_itl"] is not None and found["p99_itl"] <= table.max_p99_itl[base]
    if table.no_compile_after_boot:
        out["no_compile_after_boot"] = found["compiles_after_boot"] == 0
    return out


def coverage(table: Table, results: Path, root: Path | None = None) -> dict[str, Any]:
    """The table's cells: each with its measurements (newest summary last) and, for the counted ones (at least
    ``MIN_ROUNDS`` rounds), the verdicts; and the totals: counted, meeting every target, missing."""
    root = root or results
    paths = summaries(results)
    every = [m for path in paths for m in measurements(path, root)
             if (m["tensor_parallel"] or 1) == table.tensor_parallel]
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
            "cells": cells, "cells_in_table": len(cells), "counted": len(counted),
            "meeting_every_target": sum(c["meets"] for c in counted),
            "missing": [f"{c['pair']} {c['mode']} vs {c['baseline']} {c['cell']}" for c in cells if not c["counted"]]}


def text(report: dict[str, Any], table: Table) -> str:
    """A grid per row, baseline and the variant over it (``NUMERATORS``): input x sampling down, concurrency across;
    a counted cell shows its ratio and ``!`` where a target misses, ``(nr)`` a cell measured with fewer than
    ``MIN_ROUNDS`` rounds only (n: the most rounds of any of its summaries), ``-`` none."""
    lines = [f"{report['table']}: {report['counted']} of {report['cells_in_table']} cells measured with >= "
             f"{MIN_ROUNDS} rounds ({report['meeting_every_target']} meet every target), from "
             f"{report['summaries_read']} pooled summaries"]
    for row, base, ours, lines_of_cells in grids(report, table):
        lines.append(f"\n{row.pair} {row.mode}, {NUMERATORS.get(ours, ours)} / {base} output tok/s (c = "
                     f"{', '.join(map(str, table.concurrencies))})")
        for n, sampling, cells in lines_of_cells:
            lines.append(f"  in{n:<5} {sampling:<8} " + " ".join(f"{_mark(c, ours):>8}" for c in cells))
    return "\n".join(lines)


NUMERATORS = {"ours": "ours", "ours_mrv2": "ours on vLLM's pick (MRV2)"}
"""How a grid names the variant over its baseline: ``ours`` is our V1 drafter (the V1 runner, forced on a dense
target), ``ours_mrv2`` our platform on the runner vLLM picks (MRV2 for a dense target: what a user gets unless V1 is
forced). Against MRV2 both answer different questions, so each has its own grid and neither hides the other."""


def numerators(grid: list[dict[str, Any]]) -> list[str]:
    """The variants measured over one row's baseline (``ours`` where none was), in ``NUMERATORS`` order."""
    seen = {m["ours"] for cell in grid for m in cell["measurements"]}
    return [o for o in NUMERATORS if o in seen] + sorted(seen - set(NUMERATORS)) or ["ours"]


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
    cell = {**cell, "measurements": [m for m in cell["measurements"] if m["ours"] == ours]}
    counted = [m for m in cell["measurements"] if m["counted"]]
    if counted:
        m = counted[-1]
        return f"{m['output_tok_s']:.2f}" + ("" if all(m["verdicts"].values()) else "!")
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
            lines.append(f"| {row.pair} | {row.mode} | {NUMERATORS.get(ours, ours)} / {base} | {n} | {sampling} | "
                         + " | ".join(_md_mark(c, ours) for c in cells) + f" | {', '.join(versions)} |")
    lines.append(f"\n{report['counted']} of {report['cells_in_table']} cells counted (>= {MIN_ROUNDS} rounds), "
                 f"{report['meeting_every_target']} meeting every target; `!` a missed target, `(nr)` n rounds only "
                 "(shown, not counted), `–` not measured; rows with no measurement are left out.")
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
    parser.add_argument("--json", action="store_true", help="print the whole coverage as JSON")
    parser.add_argument("--markdown", action="store_true", help="print the measured rows as one markdown table "
                        "(what README's serving tables are, checked by tests/test_docs_agree.py)")
    args = parser.parse_args(argv)
    table = TABLES[args.table]
    try:
        report = coverage(table, args.results, Path.cwd())
    except PortableSpecError as exc:
        return emit_error(str(exc), 2, args.json)
    print(json.dumps(report, indent=1) if args.json else markdown(report, table) if args.markdown
          else text(report, table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
