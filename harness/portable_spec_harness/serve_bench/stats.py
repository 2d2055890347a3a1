"""Medians over the rounds and the ratios the report keys on, per cell (``plan.Cell``: input length x sampling x
concurrency). Every number here must come from runs: an empty cell, a missing value or a zero denominator raises
``MissingData`` (the report writes it as that cell's error and the run does not pass) instead of becoming a 0, a NaN
or a silently shorter median. Rounds are also judged paired (``paired``), the way ``portable-spec bench pool``
judges e2e passes."""

from __future__ import annotations

import math
import statistics
from typing import Any, Iterable

from portable_spec_harness.e2e.paired import paired_from_ratios
from portable_spec_harness.serve_bench.client import LATENCIES, STATISTICS
from portable_spec_harness.serve_bench.plan import Cell, cell_of

CELL_METRICS = ("output_throughput", *(f"{s}_{m}_ms" for m in LATENCIES for s in STATISTICS),
                "spec_decode_acceptance_length", "duration")
"""Per variant and cell: the median over rounds of each of these (each run's own value is the client's; ``duration``
its timed seconds)."""
OPTIONAL_METRICS = ("stall_total_ms", "stall_gaps")
"""Kept like ``CELL_METRICS`` where any run of the cell has them (``client.stall_total``; results saved before the
stall threshold existed have none, and their cells simply lack these), required of every run once one has them."""
RATIO_METRICS = {"output_tok_s": "output_throughput", "median_tpot_ms": "median_tpot_ms", "p99_itl_ms": "p99_itl_ms"}
"""Ratio name -> cell metric. Ours over a baseline: above 1 on output tok/s is faster; below 1 on median TPOT or p99
ITL is."""
PAIRED_METRICS = {"paired_output_tok_s": "output_throughput", "paired_p99_itl_ms": "p99_itl_ms"}
"""Paired ratio name -> run metric, judged round by round (``paired``). p99 ITL is paired as well as taken as a ratio of
medians: where a small share of long gaps (a long prompt's prefill joining a decode) sits near the 99th percentile,
each run's p99 lands on one side of that edge or the other, so the median of one engine's p99s and the median of the
other's can come from different rounds; a round's two runs, back to back, met the same arrivals."""


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


def cells(runs: list[dict[str, Any]], variants: list[str], cell_list: list[Cell],
          workload: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """variant -> cell key -> {"runs": good runs, "failed": runs with an error, metric: {"median", "all"}} or
    {"error": why}, from the timed runs (``result`` holds ``client.read_result``'s dict, or the run has ``error``;
    ``workload`` gives a run written before the axes its cell, ``plan.cell_of``)."""
    table: dict[str, dict[str, Any]] = {}
    for variant in variants:
        table[variant] = {}
        for cell in cell_list:
            mine = [r for r in runs if r["variant"] == variant and cell_of(r, workload) == cell]
            table[variant][cell.key] = _cell(mine, f"{variant} {cell.key}")
    return table


def _cell(mine: list[dict[str, Any]], what: str) -> dict[str, Any]:
    good = [r["result"] for r in mine if "error" not in r]
    out: dict[str, Any] = {"runs": len(good), "failed": len(mine) - len(good)}
    optional = [m for m in OPTIONAL_METRICS if any(m in g for g in good)]
    try:
        for metric in (*CELL_METRICS, *optional):
            values = [g.get(metric) for g in good]
            out[metric] = {"median": round(median_of(values, f"{what} {metric}"), 4), "all": values}
    except MissingData as exc:
        return {"runs": len(good), "failed": len(mine) - len(good), "error": str(exc)}
    return out


def paired(runs: list[dict[str, Any]], ours: str, base: str, cell: Cell, workload: dict[str, Any],
           metric: str = "output_throughput") -> dict[str, Any]:
    """Ours over ``base`` on ``metric`` round by round in ``cell`` (a round's two runs ran back to back, so their
    ratio cancels the host's drift), judged as ``portable-spec bench pool`` judges e2e passes: ``paired.py``'s median
    with its seeded bootstrap interval. Rounds pair only within a report (a run's ``source``, set when reports are
    combined, and its ``round``); a round missing either side, or a run without the metric, is left out and
    counted."""
    by_round: dict[tuple[Any, int], dict[str, float]] = {}
    for r in runs:
        if r["variant"] in (ours, base) and "error" not in r and cell_of(r, workload) == cell:
            sides = by_round.setdefault((r.get("source"), r["round"]), {})
            if r["result"].get(metric) is not None:
                sides[r["variant"]] = r["result"][metric]
    ratios = [sides[ours] / sides[base] for sides in by_round.values()
              if len(sides) == 2 and sides[base] > 0 and sides[ours] >= 0]
    return {**paired_from_ratios(ratios), "unpaired_rounds": len(by_round) - len(ratios)}


def ratios(table: dict[str, dict[str, Any]], runs: list[dict[str, Any]], ours: str, base: str, cell_list: list[Cell],
           workload: dict[str, Any]) -> dict[str, Any]:
    """cell key -> {ratio name: ours' median / base's median, paired name: ``paired`` on its metric} or
    {"error": why}."""
    out: dict[str, Any] = {}
    for cell in cell_list:
        key = cell.key
        mine, theirs = table.get(ours, {}).get(key), table.get(base, {}).get(key)
        try:
            if mine is None or theirs is None:
                raise MissingData(f"{key}: {ours if mine is None else base} has no cell")
            for side, entry in ((ours, mine), (base, theirs)):
                if "error" in entry:
                    raise MissingData(f"{key}: {side}: {entry['error']}")
            out[key] = {name: ratio(mine[metric]["median"], theirs[metric]["median"], f"{key} {name}")
                        for name, metric in RATIO_METRICS.items()}
            for name, metric in PAIRED_METRICS.items():
                out[key][name] = paired(runs, ours, base, cell, workload, metric)
        except MissingData as exc:
            out[key] = {"error": str(exc)}
    return out
