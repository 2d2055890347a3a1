"""``python -m portable_spec_harness.serve_bench.combine --out DIR RUN_DIR...``: one summary over several serving
benchmarks (pairs x weight modes, or one benchmark split over several calls), keyed the way issue 24 reads it:
``ours_over_upstream_v1[pair][mode][cell]`` and ``ours_over_mrv2[...]`` on output tok/s and median TPOT, a cell
keyed ``in256/greedy/c1`` (input length, sampling, concurrency), the rounds paired within each call; variants named
with a scheduling suffix add their ratios the same way (``ours@async_over_upstream_v1``, ``ours@async_over_ours``:
``plan.ratio_pairs``).

Runs of the same pair and mode are pooled (their medians taken over every round of every call); their workloads must
match (lengths, K, sampling, prompts unless sized by ``--min-run-s``), or the summary refuses to mix them. Reports
written before the input-length and sampling axes are read as one input length and their temperature's sampling.
A call that ran fewer rounds than it asked for reports a problem; where the pooled rounds reach the furthest round
any call asked for (one benchmark split over calls with ``SERVE_BENCH_FIRST_ROUND``), that problem moves to the
summary's ``made_up``.
Writes ``DIR/serve_bench_summary.json`` and ``.png``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path
from typing import Any

from portable_spec.errors import PortableSpecError
from portable_spec.output import emit_error
from portable_spec_harness.serve_bench import stats
from portable_spec_harness.serve_bench.report import phase_clock_readings, rounds_short, tensor_parallel_size
from portable_spec_harness.serve_bench.plan import (RATIO_BASES, TARGET_LINES, Cell, cell_of, kind_of,
                                                    legacy_sampling, ratio_pairs, workload_cells)
from portable_spec_harness.plotting import legend, save_png, wrapped_title


def comparable(workload: dict[str, Any], settings: dict[str, Any] | None = None) -> dict[str, Any]:
    """What pooled reports must share, the same whether a report was written before the axes or after: lengths,
    sampling, ``max_model_len``, the prompts per run where they were fixed (sized runs differ from call to call
    by design; their rounds still pair only within a call), ``--async-scheduling`` (what a variant without a
    scheduling suffix ran) and the tensor parallelism (a TP=2 round is no round of a TP=1 table)."""
    same = {"input_lens": workload.get("input_lens") or [workload.get("input_len")],
            "sampling": workload.get("sampling") or [legacy_sampling(workload)],
            "output_len": workload.get("output_len"), "max_model_len": workload.get("max_model_len"),
            "async_scheduling": (settings or {}).get("async_scheduling", "default"),
            "tensor_parallel_size": tensor_parallel_size({"settings": settings})}
    if not workload.get("min_run_s"):
        same["num_prompts"] = workload.get("num_prompts")
    return same


def _same(key: str, mine: Any, theirs: Any) -> bool:
    """Whether two calls agree on one ``comparable`` item; fixed prompts per cell are compared on the cells both
    ran (a call split by concurrency shares no cell with the call before it), and where sized per variant on the
    variants both ran."""
    if key == "num_prompts" and isinstance(mine, dict) and isinstance(theirs, dict):
        return all(_same(key, mine[c], theirs[c]) for c in mine.keys() & theirs.keys())
    return mine == theirs


def workload_differences(report: dict[str, Any], other: dict[str, Any]) -> list[str]:
    """What keeps two calls' reports (``pair``, ``workload``, ``settings``) from pooling: the ``comparable`` items
    they disagree on, and ``K`` where the speculative depth differs; empty where ``combine`` pools them."""
    mine, theirs = (comparable(r["workload"], r.get("settings")) for r in (report, other))
    differs = [k for k in {**mine, **theirs} if not _same(k, mine.get(k), theirs.get(k))]
    return differs + (["K"] if report["pair"]["k"] != other["pair"]["k"] else [])


def sized_per_variant(report: dict[str, Any]) -> bool:
    """Whether a call sized each variant's runs from its own warm runs (``--size-per-variant``) rather than one size
    per cell for every variant (every report written before the option)."""
    return bool(report["workload"].get("sized_per_variant"))


def refuse_mixed_sizing(first: dict[str, Any], first_source: str, rep: dict[str, Any], source: str) -> None:
    """One line naming the fix where two pooled calls sized their runs differently: the pooled workload keeps one
    prompts table (per cell, or per cell and variant), and a call sized per variant ran its slow variant with fewer
    prompts than its fast one."""
    if sized_per_variant(rep) != sized_per_variant(first):
        per, once = (source, first_source) if sized_per_variant(rep) else (first_source, source)
        raise PortableSpecError(f"{per} sized its runs per variant (--size-per-variant), {once} once per cell: "
                                "pool calls of one sizing (run them all with or all without --size-per-variant)")


def pooled_runs(members: list[tuple[dict[str, Any], str]]) -> list[dict[str, Any]]:
    """Every timed run of the members, each carrying its cell (from its own report's workload) and its report
    (``source``), so rounds pair only within a call."""
    return [_tagged(run, rep["workload"], i) for i, (rep, _) in enumerate(members) for run in rep["runs"]]


def _tagged(run: dict[str, Any], workload: dict[str, Any], source: int) -> dict[str, Any]:
    cell = cell_of(run, workload)
    return {**run, "input_len": cell.input_len, "sampling": cell.sampling, "source": source}


REPORT_NAMES = ("serve_bench.json", "serve_bench.json.gz")
"""A call's report as the bench writes it, and as a session's results folder stores an older one (gzip)."""


def read_json(path: Path) -> dict[str, Any]:
    """A JSON result file, read through gzip where it is stored compressed (``.gz``)."""
    return json.loads(gzip.open(path, "rt").read() if path.suffix == ".gz" else path.read_text())


def report_path(folder: Path) -> Path:
    """The report a call's folder holds: the first of ``REPORT_NAMES`` there, else the first name (missing)."""
    return next((folder / n for n in REPORT_NAMES if (folder / n).exists()), folder / REPORT_NAMES[0])


def load(folder: Path) -> dict[str, Any]:
    """A call's report: a folder holding one of ``REPORT_NAMES``, or the file itself."""
    path = report_path(folder) if folder.is_dir() else folder
    try:
        return read_json(path)
    except (OSError, ValueError):
        raise PortableSpecError(f"{path} is missing or not JSON: pass folders a serve bench wrote") from None


def pooled_cells(members: list[tuple[dict[str, Any], str]]) -> list[Cell]:
    """Every cell any call ran, in the report's reading order: calls of one benchmark may split it by concurrency
    (one call c = 1, 2, the next c = 8, 32), and a cell only a later call ran is pooled too, never dropped. The
    calls share their input lengths and sampling (``comparable``)."""
    ran = list(dict.fromkeys(cell for rep, _ in members for cell in workload_cells(rep["workload"])))
    lens = list(dict.fromkeys(c.input_len for c in ran))
    modes = list(dict.fromkeys(c.sampling for c in ran))
    return sorted(ran, key=lambda c: (lens.index(c.input_len), modes.index(c.sampling), c.concurrency))


def pooled_workload(members: list[tuple[dict[str, Any], str]], cells: list[Cell]) -> dict[str, Any]:
    """The first call's workload over every pooled cell: its concurrencies and cells the union of the calls', each
    sized cell's prompts per run as the first call that ran it sized them (each call's own report keeps its own;
    per variant where the calls sized per variant, ``refuse_mixed_sizing``),
    ``max_num_seqs`` the largest any call's servers had (each call sets it to its own largest concurrency)."""
    workload = {**members[0][0]["workload"], "concurrency": sorted({c.concurrency for c in cells})}
    if "cells" in workload:
        workload["cells"] = [c.key for c in cells]
    prompts: dict[str, Any] = {}
    for rep, _ in members:
        sized = rep["workload"].get("num_prompts")  # an int in reports whose prompts were fixed, not sized per cell
        for key, n in sized.items() if isinstance(sized, dict) else ():
            prompts.setdefault(key, n)
    if prompts:
        workload["num_prompts"] = {c.key: prompts[c.key] for c in cells if c.key in prompts}
    seqs = [rep["workload"]["max_num_seqs"] for rep, _ in members if "max_num_seqs" in rep["workload"]]
    if seqs:
        workload["max_num_seqs"] = max(seqs)
    return workload


def round_goals(members: list[tuple[dict[str, Any], str]]) -> dict[str, int]:
    """Per cell, the rounds one benchmark split over calls asked for in all: up to the furthest last round of the
    calls that ran that cell (``SERVE_BENCH_FIRST_ROUND`` + rounds asked). A call short of rounds is made up only
    when every cell it ran reaches its goal in the pool (a call at c = 8, 32 is not made up by rounds at c = 1, 2)."""
    goals: dict[str, int] = {}
    for rep, _ in members:
        last = (rep.get("settings") or {}).get("first_round", 0) + rep.get("rounds_asked", 0)
        for cell in workload_cells(rep["workload"]):
            goals[cell.key] = max(goals.get(cell.key, 0), last)
    return goals


def fewest_rounds(table: dict[str, dict[str, Any]]) -> int:
    """The rounds every pooled cell holds: the fewest runs of any variant in any cell. The calls' rounds summed are
    ``rounds_run`` beside it (what summaries pooled before this held as ``rounds``): a chain split by concurrency
    (c = 8, 32 in one call, c = 1, 2 in the next) runs more rounds between its calls than any one cell holds."""
    return min((cell["runs"] for cells in table.values() for cell in cells.values()), default=0)


def combine(reports: list[dict[str, Any]], sources: list[str]) -> dict[str, Any]:
    groups: dict[tuple[str, str], list[tuple[dict[str, Any], str]]] = {}
    for rep, source in zip(reports, sources):
        groups.setdefault((rep["pair"]["name"], rep["pair"]["mode"]), []).append((rep, source))
    summary: dict[str, Any] = {"kind": "serve_bench_summary", "pairs": {},
                               **{f"ours_over_{b}": {} for b in RATIO_BASES}, "problems": [], "made_up": []}
    for (pair, mode), members in sorted(groups.items()):
        first = members[0][0]
        for rep, source in members[1:]:
            refuse_mixed_sizing(first, members[0][1], rep, source)
            differs = workload_differences(rep, first)
            if differs:
                raise PortableSpecError(f"{source}: {pair} ({mode}) ran another workload ({', '.join(differs)})"
                                        " than the first: combine runs of one workload")
        variants = list(dict.fromkeys(v for rep, _ in members for v in rep["cells"]))
        cells = pooled_cells(members)
        runs = pooled_runs(members)
        table = stats.cells(runs, variants, cells, first["workload"])
        entry: dict[str, Any] = {
            "sources": [s for _, s in members], "device": sorted({str(rep.get("device")) for rep, _ in members}),
            "vllm": sorted({str(rep.get("vllm")) for rep, _ in members}), "shapes": first["pair"].get("shapes"),
            "k": first["pair"]["k"], "workload": pooled_workload(members, cells),
            "tensor_parallel_size": tensor_parallel_size(first),
            # each call's host CPU (None: a report from before it was recorded): pooled leases may differ in it
            "hosts": {s: rep.get("host") for rep, s in members},
            "rounds": fewest_rounds(table), "rounds_run": sum(rep.get("rounds_done", 0) for rep, _ in members),
            "cells": table,
            "phase_clock": {v: {"cell": r.get("cell"), **r["split"]} for rep, _ in members
                            for v, r in phase_clock_readings(rep).items() if r.get("split")}}
        for key, (variant, base) in ratio_pairs(variants).items():
            entry[key] = stats.ratios(table, runs, variant, base, cells, first["workload"])
            summary.setdefault(key, {}).setdefault(pair, {})[mode] = entry[key]
            summary["problems"] += [f"{pair} ({mode}) {key} {c}: {r['error']}" for c, r in entry[key].items()
                                    if "error" in r]
        goals = round_goals(members)
        for rep, source in members:
            short = rounds_short(rep)
            pooled = {c.key: min(table[v][c.key]["runs"] for v in rep["cells"])
                      for c in workload_cells(rep["workload"])}
            made_up = short is not None and short in rep.get("problems", []) and \
                all(runs >= goals[key] for key, runs in pooled.items())
            if made_up:
                summary["made_up"].append(f"{pair} ({mode}) {source}: {short}; pooled: {min(pooled.values())} rounds")
            summary["problems"] += [f"{pair} ({mode}) {p}" for p in rep.get("problems", [])
                                    if not (made_up and p == short)]
        summary["pairs"].setdefault(pair, {})[mode] = entry
    return summary


def ratio_keys(summary: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """The summary's ratios, ``plan.ratio_pairs`` of every pooled entry's variants: ``ours_over_upstream_v1`` and
    ``ours_over_mrv2`` always (empty where no pair ran them), then what the variants added."""
    keys = {f"ours_over_{b}": ("ours", b) for b in RATIO_BASES}
    for modes in summary["pairs"].values():
        for entry in modes.values():
            keys.update(ratio_pairs(list(entry["cells"])))
    return keys


NO_PNG = ("no serve_bench_summary.png: matplotlib is not installed (pip install matplotlib; the harness depends on "
          "it)")


def plot(summary: dict[str, Any], path: Path) -> str | None:
    """Every ratio on output tok/s per concurrency, one panel per base variant that has a ratio (upstream V1, MRV2,
    ours when ``ours@async`` ran beside it), one line per ratio, pair, mode, input length and sampling."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    keys = ratio_keys(summary)
    every = list(dict.fromkeys(base for _, base in keys.values()))
    bases = [b for b in every if any(summary.get(k) for k, (_, base) in keys.items() if base == b)] or every
    fig, axes = plt.subplots(1, len(bases), figsize=(7 * len(bases), 4.5), squeeze=False)
    for ax, base in zip(axes[0], bases):
        for key, (variant, _) in ((k, sides) for k, sides in keys.items() if sides[1] == base):
            for pair, modes in summary.get(key, {}).items():
                for mode, ratios in modes.items():
                    for group, points in _lines(ratios).items():
                        ax.plot(list(points), list(points.values()), marker="o",
                                label=f"{variant}: {pair} ({mode}) {group}")
        for level in TARGET_LINES.get(kind_of(base), ()):
            ax.axhline(level, color="grey", linestyle="--", linewidth=0.8)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("max concurrency (vllm bench serve)")
        ax.set_ylabel(f"output tok/s: variant / {base}")
        ax.grid(alpha=0.3)
        legend(ax, fontsize=8)
    fig.suptitle(wrapped_title(title(summary), 7 * len(bases)), fontsize=10)
    fig.tight_layout()
    save_png(fig, path, dpi=110)
    plt.close(fig)
    return str(path)


def title(summary: dict[str, Any]) -> str:
    """What the plot was measured on, per pooled pair: device, tensor parallelism, vLLM and rounds (a PNG read
    alone must say where its numbers come from)."""
    parts = []
    for pair, modes in summary["pairs"].items():
        for mode, e in modes.items():
            parts.append(f"{pair} ({mode}): {', '.join(e['device'])}, TP={e.get('tensor_parallel_size', 1)}, "
                         f"vLLM {', '.join(e['vllm'])}, {e['rounds']} rounds")
    return "pooled vllm serve + vllm bench serve: " + "; ".join(parts)


def _lines(ratios: dict[str, Any]) -> dict[str, dict[int, float]]:
    """A summary's ratios regrouped for a plot: ``in256/greedy`` -> concurrency -> output tok/s (errors left out)."""
    lines: dict[str, dict[int, float]] = {}
    for key, r in ratios.items():
        group, _, c = key.rpartition("/c")
        if "error" not in r:
            lines.setdefault(group, {})[int(c)] = r["output_tok_s"]
    return lines


def main(argv: list[str] | None = None) -> int:
    raw = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="python -m portable_spec_harness.serve_bench.combine",
                                     description="One summary over several serve-bench folders.")
    parser.add_argument("runs", nargs="+", type=Path, help="folders (or serve_bench.json files)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(raw)
    try:
        summary = combine([load(f) for f in args.runs], [str(f) for f in args.runs])
    except PortableSpecError as exc:
        return emit_error(str(exc), exc.exit_code, args.json)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "serve_bench_summary.json").write_text(json.dumps(summary, indent=1))
    if plot(summary, args.out / "serve_bench_summary.png") is None:
        print(NO_PNG, file=sys.stderr)
    if args.json:
        print(json.dumps(summary))
    else:
        for key in ratio_keys(summary):
            for pair, modes in summary.get(key, {}).items():
                for mode, ratios in modes.items():
                    cells = "  ".join(f"{c}: {r['output_tok_s']:.3f}" if "error" not in r else f"{c}: error"
                                      for c, r in ratios.items())
                    print(f"{key} {pair} ({mode}) output tok/s: {cells}")
        print(f"{len(summary['problems'])} problems" + "".join(f"\n  {p}" for p in summary["problems"][:20]))
        for line in summary["made_up"]:
            print(f"made up by pooling: {line}")
    return 0 if not summary["problems"] else 1


if __name__ == "__main__":
    sys.exit(main())
