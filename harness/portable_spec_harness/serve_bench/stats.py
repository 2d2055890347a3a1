"""Medians over the rounds and the ratios the report keys on. Every number here must come from runs: an empty cell, a
missing value or a zero denominator raises ``MissingData`` (the report writes it as that cell's error and the run
does not pass) instead of becoming a 0, a NaN or a silently shorter median."""

from __future__ import annotations

import math
import statistics
from typing import Any, Iterable

from portable_spec_harness.serve_bench.client import LATENCIES, STATISTICS

CELL_METRICS = ("output_throughput", *(f"{s}_{m}_ms" for m in LATENCIES for s in STATISTICS),
                "spec_decode_acceptance_length")
"""Per variant and concurrency: the median over rounds of each of these (each run's own value is the client's)."""
RATIO_METRICS = {"output_tok_s": "output_throughput", "median_tpot_ms": "median_tpot_ms"}
"""Ratio name -> cell metric. Ours over a baseline: above 1 on output tok/s is faster; below 1 on median TPOT is."""


class MissingData(ValueError):
    """A statistic asked of no data, or of data with a hole in it."""


def median_of(values: Iterable[Any], what: str) -> float:
    values = list(values)
    if not values:
        raise MissingData(f"no runs for {what}")
    bad = [v for v in values if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v)]
    if bad:
        raise MissingData(f"{what}: {len(bad)} of {len(values)} runs have no number ({bad[0]!r})")
    return float(statistics.median(values))


def ratio(numerator: float | None, denominator: float | None, what: str) -> float:
    if numerator is None or denominator is None:
        raise MissingData(f"{what}: a side is missing")
    if not denominator > 0 or not math.isfinite(numerator) or not math.isfinite(denominator):
        raise MissingData(f"{what}: {numerator!r} / {denominator!r} is not a ratio")
    return round(numerator / denominator, 4)


def cells(runs: list[dict[str, Any]], variants: list[str], concurrency: list[int]) -> dict[str, dict[str, Any]]:
    """variant -> str(concurrency) -> {"runs": good runs, "failed": runs with an error, metric: {"median", "all"}} or
    {"error": why}, from the timed runs (``result`` holds ``client.read_result``'s dict, or the run has ``error``)."""
    table: dict[str, dict[str, Any]] = {}
    for variant in variants:
        table[variant] = {}
        for c in concurrency:
            mine = [r for r in runs if r["variant"] == variant and r["concurrency"] == c]
            good = [r["result"] for r in mine if "error" not in r]
            cell: dict[str, Any] = {"runs": len(good), "failed": len(mine) - len(good)}
            try:
                for metric in CELL_METRICS:
                    values = [g.get(metric) for g in good]
                    cell[metric] = {"median": round(median_of(values, f"{variant} c={c} {metric}"), 4),
                                    "all": values}
            except MissingData as exc:
                cell = {"runs": len(good), "failed": len(mine) - len(good), "error": str(exc)}
            table[variant][str(c)] = cell
    return table


def ratios(table: dict[str, dict[str, Any]], ours: str, base: str, concurrency: list[int]) -> dict[str, Any]:
    """str(concurrency) -> {ratio name: ours' median / base's median} or {"error": why}."""
    out: dict[str, Any] = {}
    for c in concurrency:
        mine, theirs = table.get(ours, {}).get(str(c)), table.get(base, {}).get(str(c))
        try:
            if mine is None or theirs is None:
                raise MissingData(f"c={c}: {ours if mine is None else base} has no cell")
            for side, cell in ((ours, mine), (base, theirs)):
                if "error" in cell:
                    raise MissingData(f"c={c}: {side}: {cell['error']}")
            out[str(c)] = {name: ratio(mine[metric]["median"], theirs[metric]["median"], f"c={c} {name}")
                           for name, metric in RATIO_METRICS.items()}
        except MissingData as exc:
            out[str(c)] = {"error": str(exc)}
    return out
