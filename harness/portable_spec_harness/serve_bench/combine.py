"""``python -m portable_spec_harness.serve_bench.combine --out DIR RUN_DIR...``: one summary over several serving
benchmarks (pairs x weight modes, or one benchmark split over several calls), keyed the way issue 24 reads it:
``ours_over_upstream_v1[pair][mode][concurrency]`` and ``ours_over_mrv2[...]`` on output tok/s and median TPOT.

Runs of the same pair and mode are pooled (their medians taken over every round of every call); their workloads must
match (lengths, K, temperature, prompts), or the summary refuses to mix them. Writes ``DIR/serve_bench_summary.json``
and ``.png``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from portable_spec.errors import PortableSpecError
from portable_spec.output import emit_error
from portable_spec_harness.serve_bench import stats
from portable_spec_harness.serve_bench.plan import RATIO_BASES, TARGET_LINES
from portable_spec_harness.plotting import legend

SAME = ("input_len", "output_len", "temperature", "num_prompts", "max_model_len")


def load(folder: Path) -> dict[str, Any]:
    path = folder / "serve_bench.json" if folder.is_dir() else folder
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        raise PortableSpecError(f"{path} is missing or not JSON: pass folders a serve bench wrote") from None


def combine(reports: list[dict[str, Any]], sources: list[str]) -> dict[str, Any]:
    groups: dict[tuple[str, str], list[tuple[dict[str, Any], str]]] = {}
    for rep, source in zip(reports, sources):
        groups.setdefault((rep["pair"]["name"], rep["pair"]["mode"]), []).append((rep, source))
    summary: dict[str, Any] = {"kind": "serve_bench_summary", "pairs": {},
                               **{f"ours_over_{b}": {} for b in RATIO_BASES}, "problems": []}
    for (pair, mode), members in sorted(groups.items()):
        first = members[0][0]
        for rep, source in members[1:]:
            differs = [k for k in SAME if rep["workload"].get(k) != first["workload"].get(k)]
            if differs or rep["pair"]["k"] != first["pair"]["k"]:
                raise PortableSpecError(f"{source}: {pair} ({mode}) ran another workload ({', '.join(differs) or 'K'})"
                                        " than the first: combine runs of one workload")
        variants = list(dict.fromkeys(v for rep, _ in members for v in rep["cells"]))
        concurrency = first["workload"]["concurrency"]
        runs = [r for rep, _ in members for r in rep["runs"]]
        table = stats.cells(runs, variants, concurrency)
        entry: dict[str, Any] = {
            "sources": [s for _, s in members], "device": sorted({str(rep.get("device")) for rep, _ in members}),
            "vllm": sorted({str(rep.get("vllm")) for rep, _ in members}), "shapes": first["pair"].get("shapes"),
            "k": first["pair"]["k"], "workload": first["workload"],
            "rounds": sum(rep.get("rounds_done", 0) for rep, _ in members), "cells": table,
            "phase_clock_c1": {v: r.get("split") for rep, _ in members
                               for v, r in (rep.get("phase_clock_c1") or {}).items() if r.get("split")}}
        if "ours" in variants:
            for base in RATIO_BASES:
                if base in variants:
                    entry[f"ours_over_{base}"] = stats.ratios(table, "ours", base, concurrency)
                    summary[f"ours_over_{base}"].setdefault(pair, {})[mode] = entry[f"ours_over_{base}"]
                    summary["problems"] += [f"{pair} ({mode}) ours_over_{base} c={c}: {r['error']}"
                                            for c, r in entry[f"ours_over_{base}"].items() if "error" in r]
        summary["problems"] += [f"{pair} ({mode}) {p}" for rep, _ in members for p in rep.get("problems", [])]
        summary["pairs"].setdefault(pair, {})[mode] = entry
    return summary


def plot(summary: dict[str, Any], path: Path) -> str | None:
    """Ours over upstream V1 (and over MRV2) on output tok/s per concurrency, one line per pair and mode."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, axes = plt.subplots(1, len(RATIO_BASES), figsize=(7 * len(RATIO_BASES), 4.5))
    for ax, base in zip(axes, RATIO_BASES):
        for pair, modes in summary[f"ours_over_{base}"].items():
            for mode, ratios in modes.items():
                points = {int(c): r["output_tok_s"] for c, r in ratios.items() if "error" not in r}
                if points:
                    ax.plot(list(points), list(points.values()), marker="o", label=f"{pair} ({mode})")
        for level in TARGET_LINES[base]:
            ax.axhline(level, color="grey", linestyle="--", linewidth=0.8)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("max concurrency (vllm bench serve)")
        ax.set_ylabel(f"output tok/s: ours / {base}")
        ax.grid(alpha=0.3)
        legend(ax, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)


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
    plot(summary, args.out / "serve_bench_summary.png")
    if args.json:
        print(json.dumps(summary))
    else:
        for base in RATIO_BASES:
            for pair, modes in summary[f"ours_over_{base}"].items():
                for mode, ratios in modes.items():
                    cells = "  ".join(f"c={c}: {r['output_tok_s']:.3f}" if "error" not in r else f"c={c}: error"
                                      for c, r in ratios.items())
                    print(f"ours_over_{base} {pair} ({mode}) output tok/s: {cells}")
        print(f"{len(summary['problems'])} problems" + "".join(f"\n  {p}" for p in summary["problems"][:20]))
    return 0 if not summary["problems"] else 1


if __name__ == "__main__":
    sys.exit(main())
