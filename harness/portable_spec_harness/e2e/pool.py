"""``portable-spec bench pool``: one judgement from several ``bench e2e`` reports of one pair.

Why: issue 23's no-regression bench (``ours_platform_mrv2`` over ``builtin_mrv2``, bound 0.98) runs in several GPU
calls, each booting its engines once, so boots differ and no one report's passes decide the bound. Pass i of each
variant pairs only with pass i of the other in the same report (same interleaved round); the pooled cell concatenates
every report's per-pass ratios and judges them with ``paired.py``, and each report's own median stays beside it to
show the spread from boot to boot.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from portable_spec.errors import PortableSpecError
from portable_spec_harness.e2e.configs import BOUNDS, RATIOS
from portable_spec_harness.e2e.paired import LEVEL, paired_from_ratios, per_pass_ratios, per_pass_step_ratios
from portable_spec_harness.plotting import save_png

SAME = ("pair", "model_variant", "k", "bench_tokens")
"""What every pooled report must share: the same models, K and output length, or their passes measure other work."""
METHOD = ("passes pair only within a report (pass i of each variant ran in the same interleaved round); each "
          "report's per-pass ratios are concatenated over reports and judged by paired.py's seeded bootstrap "
          "interval of their median")
FIX = "pass bench_e2e.json files written by bench e2e"


def load_reports(paths: list[str | Path]) -> list[dict[str, Any]]:
    """The JSON of each path; an unreadable file or one that is not JSON is one line naming it."""
    reports = []
    for path in paths:
        try:
            reports.append(json.loads(Path(path).read_text()))
        except (OSError, ValueError) as exc:
            raise PortableSpecError(f"cannot read {str(path)!r} ({getattr(exc, 'strerror', None) or exc}): "
                                    f"{FIX}") from None
    return reports


def _check(reports: list[dict[str, Any]], sources: list[str]) -> None:
    if not reports:
        raise PortableSpecError(f"no reports to pool: {FIX}")
    seen: dict[str, str] = {}
    for report, source in zip(reports, sources):
        if not isinstance(report, dict) or not isinstance(report.get("results"), list):
            raise PortableSpecError(f"{source} is not a bench e2e report (no results): {FIX}")
        results = json.dumps(report["results"], sort_keys=True)
        if results in seen:  # the same passes twice would count as twice the evidence
            raise PortableSpecError(f"{source} holds the same results as {seen[results]}: pass each report once")
        seen[results] = source
    first = reports[0]
    for report, source in zip(reports[1:], sources[1:]):
        for key in SAME:
            if report.get(key) != first.get(key):
                raise PortableSpecError(f"{source} ran {key} {report.get(key)!r} but {sources[0]} ran "
                                        f"{first.get(key)!r}: pool reports of one pair, model variant, K and "
                                        "bench tokens")


def _cells(report: dict[str, Any]) -> dict[str, dict[int, dict[str, Any]]]:
    """Each measured variant's cells by concurrency, errored cells included (they hold no passes)."""
    return {row["variant"]: {int(b["concurrency"]): b for b in row["bench"]}
            for row in report["results"] if isinstance(row.get("bench"), list)}


def _tok_s(cell: dict[str, Any]) -> list[float]:
    return [cell["output_tokens"] / w for w in cell.get("wall_s_all") or [] if w > 0]


def _over(ours: list[float], other: list[float]) -> float:
    return round(statistics.median(ours) / statistics.median(other), 3)


def _pool_ratio(tables: list[dict[str, Any]], sources: list[str], ours: str,
                other: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The summary keys of one ratio over every report that ran both variants, and each report's own medians."""
    bound = BOUNDS.get((ours, other))
    name = f"{ours}_over_{other}"
    members = [(table[ours], table[other]) for table in tables if ours in table and other in table]
    per_report = [{"source": source, "paired": {}, "over": {}}
                  for table, source in zip(tables, sources) if ours in table and other in table]
    over, wall_cells, step_cells = {}, {}, {}
    for c in sorted({c for a, b in members for c in (*a, *b)}):
        wall, step, tok_s = [], [], ([], [])
        reports = step_reports = 0
        for (a_cells, b_cells), entry in zip(members, per_report):
            a, b = a_cells.get(c), b_cells.get(c)
            ratios = per_pass_ratios(a, b) if a and b else []
            if not ratios:
                continue
            reports += 1
            wall += ratios
            a_tok_s, b_tok_s = _tok_s(a), _tok_s(b)
            tok_s[0].extend(a_tok_s)
            tok_s[1].extend(b_tok_s)
            entry["paired"][c] = round(statistics.median(ratios), 3)
            entry["over"][c] = _over(a_tok_s, b_tok_s)
            steps = per_pass_step_ratios(a, b)
            if steps:
                step += steps
                step_reports += 1
                entry.setdefault("paired_step_time", {})[c] = round(statistics.median(steps), 3)
        if not wall:
            raise PortableSpecError(f"{name} at concurrency {c} has no paired passes in any report (cells errored "
                                    "or empty): pool reports in which both variants ran that concurrency")
        over[c] = _over(*tok_s)
        wall_cells[c] = {**paired_from_ratios(wall, bound), "reports": reports}
        step_cells[c] = {**paired_from_ratios(step, bound), "reports": step_reports, "wall_passes": len(wall)}
    summary = {name: over, f"paired_{ours}_vs_{other}": wall_cells}
    if any(cell["passes"] for cell in step_cells.values()):  # the median step, where the passes timed their steps
        summary[f"paired_step_time_{ours}_vs_{other}"] = step_cells
    return summary, per_report


def pool_reports(reports: list[dict[str, Any]], sources: list[str]) -> dict[str, Any]:
    """Every ratio of ``configs.RATIOS`` whose two variants ran in at least one report, pooled over the reports
    (``sources`` names each, in order): the summary keys one bench writes, over all passes, and each report's own
    paired median and ratio of medians. Refuses (one line) reports of different work, a file that is no report, and
    a ratio's concurrency with no passes anywhere."""
    sources = [str(s) for s in sources]
    if len(sources) != len(reports):
        raise ValueError(f"{len(reports)} reports but {len(sources)} sources: name each report once")
    _check(reports, sources)
    tables = [_cells(report) for report in reports]
    ratios = [(ours, other) for ours, other in RATIOS if any(ours in t and other in t for t in tables)]
    if not ratios:
        names = "; ".join(f"{ours} and {other}" for ours, other in RATIOS)
        raise PortableSpecError(f"no report ran both variants of a ratio the bench judges ({names}): {FIX} with "
                                "both variants of one ratio")
    summary: dict[str, Any] = {}
    per_report: dict[str, list[dict[str, Any]]] = {}
    for ours, other in ratios:
        keys, per_report[f"{ours}_over_{other}"] = _pool_ratio(tables, sources, ours, other)
        summary.update(keys)
    variants = {v for pair in ratios for v in pair}
    first = reports[0]
    return {
        "pair": first.get("pair"), "model_variant": first.get("model_variant"), "k": first.get("k"),
        "bench_tokens": first.get("bench_tokens"), "ratios": [list(pair) for pair in ratios],
        "concurrency": sorted({c for key, cells in summary.items() if "_over_" in key for c in cells}),
        "devices": sorted({str(r.get("device")) for r in reports}),
        "vllm": sorted({str(r.get("vllm")) for r in reports}),
        "tensor_parallel_sizes": sorted({int(r.get("tensor_parallel_size") or 1) for r in reports}),
        "reports": [{"path": source, "date": report.get("date"), "device": report.get("device"),
                     "vllm": report.get("vllm"), "repeats": report.get("repeats"),
                     "passes": {v: {c: len(cell.get("wall_s_all") or []) for c, cell in cells.items()}
                                for v, cells in table.items() if v in variants}}
                    for report, table, source in zip(reports, tables, sources)],
        "summary": summary, "per_report": per_report, "level": LEVEL, "method": METHOD}


PANELS = (("paired_", "paired", "output tok/s, ours / other (wall)"),
          ("paired_step_time_", "paired_step_time", "median step time, other / ours"))
"""The plot's panels: summary key prefix, per-report key, y label."""


def plot_pool(pooled: dict[str, Any], path: str | Path) -> str | None:
    """One panel per metric: each report's paired median (small dots), the pooled paired median with its interval,
    the pooled ratio of medians (wall panel), the bound and 1.0 dashed; x is concurrency (log2). None without
    matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    from portable_spec_harness.e2e.bench import pair_label

    summary, ratios = pooled["summary"], [tuple(pair) for pair in pooled["ratios"]]
    panels = [p for p in PANELS if any(f"{p[0]}{ours}_vs_{other}" in summary for ours, other in ratios)]
    fig, axes = plt.subplots(1, len(panels), figsize=(7.5 * len(panels), 6.0), squeeze=False)
    passes = set()
    for ax, (prefix, report_key, label) in zip(axes[0], panels):
        for index, (ours, other) in enumerate(ratios):
            cells = summary.get(f"{prefix}{ours}_vs_{other}") or {}
            color, entries = f"C{index}", pooled["per_report"][f"{ours}_over_{other}"]
            for i, entry in enumerate(entries):  # each report left of its concurrency, spread by report
                shift = 2 ** (-0.28 + 0.16 * i / max(len(entries) - 1, 1))
                points = entry.get(report_key) or {}
                ax.plot([c * shift for c in points], list(points.values()), "o", ms=4, color=color, alpha=0.45,
                        label=f"{ours} vs {other}: each report's paired median (left to right: "
                              "reports in the order given)" if i == 0 else None)
            judged = [(c, cell) for c, cell in cells.items() if cell.get("passes")]
            if not judged:
                continue
            mids = [cell["median"] for _, cell in judged]
            errs = [[m - cell["interval"][0] for m, (_, cell) in zip(mids, judged)],
                    [cell["interval"][1] - m for m, (_, cell) in zip(mids, judged)]]
            ax.errorbar([c for c, _ in judged], mids, yerr=errs, fmt="s", ms=6, capsize=4, color=color,
                        label=f"pooled paired median, {int(LEVEL * 100)}% interval")
            if prefix == "paired_":
                passes |= {cell["passes"] for _, cell in judged}
            for c, cell in judged:  # along the panel's foot, clear of the points
                note = f"{cell.get('verdict', '')}\n{cell['passes']} passes".strip()
                ax.text(c, 0.02 + 0.09 * index, note, transform=ax.get_xaxis_transform(), ha="center",
                        fontsize=7, color=color)
            if prefix == "paired_":
                over = summary[f"{ours}_over_{other}"]
                ax.plot([c * 2 ** 0.12 for c in over], list(over.values()), "D", ms=6, mfc="none", color=color,
                        label="pooled ratio of medians")
        bounds = {BOUNDS[pair] for pair in ratios if pair in BOUNDS}
        for level in sorted(bounds | {1.0}):
            ax.axhline(level, color="grey" if level == 1.0 else "firebrick", linestyle="--", linewidth=0.9,
                       label=None if level == 1.0 else f"bound {level}")
        ax.set_xscale("log", base=2)
        ax.set_xticks(pooled["concurrency"], [str(c) for c in pooled["concurrency"]])
        ax.set_xlim(min(pooled["concurrency"]) / 2 ** 0.5, max(pooled["concurrency"]) * 2 ** 0.5)
        ax.set_xlabel("concurrency")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        low, high = ax.get_ylim()
        ax.set_ylim(low - 0.25 * (high - low), high + 0.05 * (high - low))  # room for the verdicts at the foot
    count = (f"{min(passes)}" if len(passes) == 1 else f"{min(passes)}-{max(passes)}") if passes else "0"
    fig.suptitle(f"{pair_label(pooled)}, K={pooled['k']}, {', '.join(pooled['devices'])}, vLLM "
                 f"{', '.join(pooled['vllm'])}: {len(pooled['reports'])} reports pooled, {count} paired passes per "
                 "cell (passes pair only within a report)", fontsize=10)
    legend = {}  # one legend for both panels, below them
    for ax in axes[0]:
        legend.update(zip(*reversed(ax.get_legend_handles_labels())))
    fig.legend(list(legend.values()), list(legend), loc="lower center", ncol=min(len(legend), 3), fontsize=8)
    fig.tight_layout(rect=(0, 0.04 + 0.035 * ((len(legend) + 2) // 3), 1, 1))
    save_png(fig, path, dpi=110)
    plt.close(fig)
    return str(path)
