"""Host time per decode-step phase without a profiler: wall and thread-CPU time of the same scopes the torch-profiler
breakdown reads (``step_breakdown.SCOPE_PHASES``), each exclusive of the phase scopes nested in it.

Why a second view: the profiler records every op, which inflates host time unevenly (ops, not Python, pay it), so
its columns compare phases but cannot say how much of a throughput gap a phase holds. Timing only the phase scopes
costs about a microsecond per scope, and the pass's wall time divided by its steps is the real step time. Wall minus
thread-CPU time is time the step thread was off the CPU (waiting for the GIL, the GPU with a yielding sync, I/O).

Detail scopes (``profile_scopes.DETAIL_HOOKS``: vLLM's input prep, the runner's draft prep, the bookkeeping) are
timed inclusive and reported apart (``details``): they say where a phase's time goes and count toward no phase.
A spinning wait for the GPU (vLLM's default event sync) stays CPU time: a detail such as
``_get_valid_sampled_token_count`` shows it.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from typing import Any, Callable

from portable_spec_harness.e2e.step_breakdown import PHASE_OF, PHASES, STEP_SCOPES, UNATTRIBUTED
from portable_spec_harness.vllm_door.profile_scopes import DETAIL_PREFIX


class PhaseClock:
    """``scope(name)`` is a context-manager factory (for ``offline.runner_scopes``); ``summary(wall_s)`` the result."""

    def __init__(self, wall: Callable[[], float] = time.perf_counter,
                 cpu: Callable[[], float] = time.thread_time) -> None:
        self.wall, self.cpu = wall, cpu
        self.totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])  # phase -> [wall s, cpu s]
        self.calls: dict[str, int] = defaultdict(int)
        self.details: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])  # detail -> [wall s, cpu s], inclusive
        self.misnested = 0  # scopes that did not close in the order they opened (their time is dropped)
        self._local = threading.local()

    def _stack(self) -> list[list[Any]]:
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        return stack

    def scope(self, name: str) -> "_Frame":
        return _Frame(self, name)

    def _enter(self, name: str) -> None:
        self.calls[name] += 1
        self._stack().append([name, self.wall(), self.cpu(), 0.0, 0.0])

    def _exit(self, expected: str) -> None:
        stack = self._stack()
        if not stack or stack[-1][0] != expected:
            self.misnested += 1
            for i in range(len(stack) - 1, -1, -1):
                if stack[i][0] == expected:
                    del stack[i]
                    break
            return
        name, wall0, cpu0, nested_wall, nested_cpu = stack.pop()
        wall, cpu = self.wall() - wall0, self.cpu() - cpu0
        phase = PHASE_OF.get(name)
        if phase is None:
            if name.startswith(DETAIL_PREFIX):
                detail = self.details[name[len(DETAIL_PREFIX):]]
                detail[0] += wall
                detail[1] += cpu
            return  # not a phase: its time stays with the enclosing phase (or unattributed)
        total = self.totals[phase]
        total[0] += wall - nested_wall
        total[1] += cpu - nested_cpu
        for frame in reversed(stack):  # the nearest enclosing phase does not count this one
            if frame[0] in PHASE_OF:
                frame[3] += wall
                frame[4] += cpu
                break

    def steps(self) -> int:
        return next((self.calls[name] for name in STEP_SCOPES if self.calls.get(name)), 0)

    def summary(self, wall_s: float) -> dict[str, Any]:
        """ms per step: each phase's wall, CPU and off-CPU time; the rest of the pass's wall is unattributed."""
        steps = self.steps()
        if not steps:
            return {"error": f"no step scope ({' or '.join(STEP_SCOPES)}) was entered: were the runner scopes on?"}
        per = 1000.0 / steps
        phases = {p: {"wall_ms": round(self.totals[p][0] * per, 4), "cpu_ms": round(self.totals[p][1] * per, 4),
                      "off_cpu_ms": round((self.totals[p][0] - self.totals[p][1]) * per, 4)} for p in PHASES}
        attributed = sum(self.totals[p][0] for p in PHASES)
        details = {name: {"wall_ms": round(w * per, 4), "cpu_ms": round(c * per, 4),
                          "calls_per_step": round(self.calls[DETAIL_PREFIX + name] / steps, 3)}
                   for name, (w, c) in sorted(self.details.items())}
        return {"steps": steps, "unit": "ms per step (pass wall / steps; phases exclusive of nested phases)",
                "step_wall_ms": round(wall_s * per, 4), "phases": phases,
                UNATTRIBUTED: {"wall_ms": round((wall_s - attributed) * per, 4)},
                "details": details, "misnested": self.misnested,
                "scope_calls": dict(sorted(self.calls.items()))}


class _Frame:
    def __init__(self, clock: PhaseClock, name: str) -> None:
        self.clock, self.name = clock, name

    def __enter__(self) -> "_Frame":
        self.clock._enter(self.name)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.clock._exit(self.name)
