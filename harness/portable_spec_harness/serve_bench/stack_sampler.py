"""A sampling profiler for one thread of a served engine: where the engine-core thread is, every few milliseconds,
and when Python's garbage collector ran. Used to find what a one-off pause (a long prompt joining a decode) spends
its time on, where the torch profiler's overhead and trace size would hide a single event.

Why sampling: a pause that happens once per server lifetime must be caught the first time; a sampler costs ~1% of a
core, records wall-clock times the client's clock can be lined up with (``time.time`` on the same host), and sees
what the thread is blocked in (a compile, a lock, an allocator call, the collector) at Python-frame resolution.
"""

from __future__ import annotations

import gc
import sys
import threading
import time
from collections import Counter
from typing import Any

DEPTH = 64  # deep enough to reach the engine step from inside a compiler


def frame_stack(frame: Any, depth: int = DEPTH) -> list[str]:
    """``file:function:line`` of ``frame`` and its callers, innermost first."""
    out = []
    while frame is not None and len(out) < depth:
        code = frame.f_code
        out.append(f"{code.co_filename.rsplit('/', 3)[-1] if '/' in code.co_filename else code.co_filename}"
                   f":{code.co_name}:{frame.f_lineno}")
        frame = frame.f_back
    return out


class StackSampler:
    """Samples ``thread_id``'s stack every ``interval_s`` on a daemon thread; records GC pauses on every thread."""

    def __init__(self, thread_id: int, interval_s: float = 0.005) -> None:
        self.thread_id, self.interval_s = thread_id, interval_s
        self.samples: list[tuple[float, list[str]]] = []
        self.gc_pauses: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._gc_start: float | None = None
        self._thread = threading.Thread(target=self._run, name="portable-spec-stack-sampler", daemon=True)

    def _gc(self, phase: str, info: dict[str, Any]) -> None:
        now = time.time()
        if phase == "start":
            self._gc_start = now
        elif self._gc_start is not None:
            self.gc_pauses.append({"at": self._gc_start, "ms": round((now - self._gc_start) * 1000, 3),
                                   "generation": info.get("generation"), "collected": info.get("collected")})
            self._gc_start = None

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            frame = sys._current_frames().get(self.thread_id)
            if frame is not None:
                self.samples.append((time.time(), frame_stack(frame)))

    def start(self) -> "StackSampler":
        gc.callbacks.append(self._gc)
        self._thread.start()
        return self

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        self._thread.join(timeout=2)
        if self._gc in gc.callbacks:
            gc.callbacks.remove(self._gc)
        return {"interval_s": self.interval_s, "samples": [[t, s] for t, s in self.samples],
                "gc_pauses": self.gc_pauses}


def window(report: dict[str, Any], start: float, end: float, top: int = 8) -> dict[str, Any]:
    """What the sampled thread did between ``start`` and ``end`` (``time.time``): how many samples, the most common
    innermost frames and whole stacks, and the GC pauses that overlap."""
    stacks = [tuple(s) for t, s in report["samples"] if start <= t <= end]
    inner = Counter(s[0] for s in stacks if s)
    whole = Counter(stacks)
    gcs = [g for g in report["gc_pauses"] if g["at"] <= end and g["at"] + g["ms"] / 1000 >= start]
    return {"samples": len(stacks), "ms": round((end - start) * 1000, 1),
            "top_frames": [[f, n] for f, n in inner.most_common(top)],
            "top_stacks": [[list(s), n] for s, n in whole.most_common(3)], "gc": gcs}
