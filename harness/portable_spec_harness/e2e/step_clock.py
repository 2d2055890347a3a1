"""The duration of every engine step inside a timed pass, so a pass's wall time splits into its steady step time and
its stalls.

Why: the MRV2 bench (issue 23 item 4) times two engines that run the same graphs and kernels, and its ~0.4 s passes
still spread +-30% on either engine, with adjacent passes barely correlated. A pass's wall cannot say whether every
step got slower or a few steps stalled; the per-step durations can. The median step time of a pass is the engine's
steady cost per step, robust to a stall; the stall time (the excess of the steps slower than ``SLOW_FACTOR`` x the
median) says how much each engine lost to stalls, so stalls our platform caused would still show.

The clock wraps ``llm.llm_engine.step`` on the instance for the pass only (``LLM._run_engine`` calls it once per
engine step; ``tests/test_step_clock.py`` fails if vLLM stops doing so) and puts it back after.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

SLOW_FACTOR = 2.0
"""A step slower than this many times the pass's median step counts as a stall."""
SLOWEST_KEPT = 3
"""How many of a pass's slowest steps the report names (position in the pass, ms)."""
STEP_KEYS = ("steps", "step_ms_median", "step_ms_p90", "stall_steps", "stall_ms", "slowest_steps")
"""What ``step_report`` gives for a pass with steps; the bench summary keeps each per pass as ``<key>_all``."""


_NONE = object()


class StepClock:
    """Times each call of ``engine.step`` between ``__enter__`` and ``__exit__``."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.durations_s: list[float] = []
        self._own: Any = _NONE  # an instance attribute ``step`` already there, put back on exit

    def __enter__(self) -> "StepClock":
        step = self.engine.step
        self._own = vars(self.engine).get("step", _NONE)

        def timed_step(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return step(*args, **kwargs)
            finally:
                self.durations_s.append(time.perf_counter() - started)

        self.engine.step = timed_step
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._own is _NONE:
            del self.engine.step
        else:
            self.engine.step = self._own

    def report(self) -> dict[str, Any]:
        return step_report(self.durations_s)


def step_report(durations_s: list[float]) -> dict[str, Any]:
    """A pass's steps: how many, the median and 90th percentile step in ms, the stalls (steps over ``SLOW_FACTOR``
    x the median: count and their excess over the median in ms) and the slowest few as [position, ms]. No steps:
    ``steps`` 0 and nothing else (a pass the clock did not see must not read as a fast one)."""
    if not durations_s:
        return {"steps": 0}
    ms = [1000 * d for d in durations_s]
    median = statistics.median(ms)
    slow = [m for m in ms if m > SLOW_FACTOR * median]
    ranked = sorted(range(len(ms)), key=lambda i: ms[i], reverse=True)[:SLOWEST_KEPT]
    return {"steps": len(ms), "step_ms_median": round(median, 4),
            "step_ms_p90": round(sorted(ms)[min(len(ms) - 1, int(0.9 * len(ms)))], 4),
            "stall_steps": len(slow), "stall_ms": round(sum(m - median for m in slow), 3),
            "slowest_steps": [[i, round(ms[i], 3)] for i in ranked]}
