"""Paired ratios of interleaved passes, with a bootstrap interval: can the passes decide a bound at all?

Why: the bench times its engines in turns (``interleave.measure_interleaved``), so pass i of one variant runs next
to pass i of the other. Their ratio cancels the host's slow drift that a ratio of two medians keeps, and the
interval of the median paired ratio says whether the run can tell a bound apart from noise. Issue 23's bound is
0.98, and session 12's H200 MRV2 bench spread +-30% per pass: two engines running the same graphs and kernels gave
ratios of medians from 0.91 to 1.26, which no single cell can be judged by.
"""

from __future__ import annotations

import math
import random
import statistics
from typing import Any

LEVEL = 0.95
DRAWS = 2000


def per_pass_ratios(ours: dict[str, Any], other: dict[str, Any]) -> list[float]:
    """Output tok/s of ours over the other's, pass by pass (pass i of each ran in the same round)."""
    walls_ours, walls_other = ours.get("wall_s_all") or [], other.get("wall_s_all") or []
    tokens_ours, tokens_other = ours.get("output_tokens"), other.get("output_tokens")
    if not tokens_ours or not tokens_other:
        return []
    return [(tokens_ours / w_ours) / (tokens_other / w_other)
            for w_ours, w_other in zip(walls_ours, walls_other) if w_ours > 0 and w_other > 0]


def per_pass_step_ratios(ours: dict[str, Any], other: dict[str, Any]) -> list[float]:
    """The other's median step time over ours, pass by pass (``step_clock``: each pass's steady step cost, stalls
    left out; above 1 when ours steps faster). Empty where either side has no step clock."""
    steps_ours, steps_other = ours.get("step_ms_median_all") or [], other.get("step_ms_median_all") or []
    return [s_other / s_ours for s_ours, s_other in zip(steps_ours, steps_other) if s_ours > 0 and s_other > 0]


METRICS = {"output_tok_s": per_pass_ratios, "step_time": per_pass_step_ratios}
"""What a paired cell can compare, pass by pass: output tok/s (the wall, stalls included) or the median step."""


def median_interval(values: list[float], level: float = LEVEL, draws: int = DRAWS, seed: int = 0) -> tuple[float, float]:
    """A seeded percentile-bootstrap interval of the median (deterministic for the same passes)."""
    rng = random.Random(seed)
    medians = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(draws))
    tail = (1 - level) / 2
    return medians[int(tail * (draws - 1))], medians[int(math.ceil((1 - tail) * (draws - 1)))]


def verdict(low: float, high: float, bound: float) -> str:
    """``holds`` when the whole interval is at or above ``bound``, ``fails`` when it is all below, else
    ``undecided`` (the passes cannot tell)."""
    if low >= bound:
        return "holds"
    if high < bound:
        return "fails"
    return "undecided"


def passes_to_decide(values: list[float], interval: tuple[float, float], bound: float) -> int | None:
    """About how many passes would shrink ``interval`` (the median's, over ``values``) past ``bound``: it narrows as
    1/sqrt(passes). None where the median sits on the bound."""
    low, high = interval
    gap = abs(statistics.median(values) - bound)
    if gap == 0:
        return None
    return max(len(values), math.ceil(len(values) * ((high - low) / 2 / gap) ** 2))


def paired_from_ratios(ratios: list[float], bound: float | None = None) -> dict[str, Any]:
    """The paired statistic of per-pass ratios: median, its interval, how many passes it rests on and, with a bound,
    the verdict. No ratios: ``passes`` 0 and, with a bound, ``undecided`` (never a pass on nothing)."""
    if not ratios:
        return {"passes": 0, **({"bound": bound, "verdict": "undecided"} if bound is not None else {})}
    low, high = median_interval(ratios)
    cell: dict[str, Any] = {"median": round(statistics.median(ratios), 3), "interval": [round(low, 3), round(high, 3)],
                            "level": LEVEL, "passes": len(ratios)}
    if bound is not None:
        cell.update(bound=bound, verdict=verdict(low, high, bound))
        if cell["verdict"] == "undecided":
            cell["passes_to_decide"] = passes_to_decide(ratios, (low, high), bound)
    return cell


def paired_cell(ours: dict[str, Any], other: dict[str, Any], bound: float | None = None,
                metric: str = "output_tok_s") -> dict[str, Any]:
    """One bench cell's paired statistic on ``metric`` (``METRICS``), by ``paired_from_ratios``."""
    return paired_from_ratios(METRICS[metric](ours, other), bound)
