"""The bench child's garbage-collector hygiene: freeze the boot's heap, and time every collection during a pass.

Why: ``vllm serve`` (and ``vllm bench serve``) freeze the heap once booted (``vllm.utils.gc_utils.freeze_gc_heap``).
A full collection over a booted engine's heap (~0.6-1 M objects) costs 0.1-0.3 s, the size of the one-sided hiccups
of the MRV2 bench's passes (issue 23 item 4), so the bench froze its child's heap to rule that out. Tested on the
H200 and refuted: with the harness's in-process engine core (``VLLM_ENABLE_V1_MULTIPROCESSING=0``) vLLM's
``EngineCore`` already freezes the heap at boot, the timed passes paid 0 full collections either way, and the noise
stayed. The module stays as hygiene and as the per-pass count that shows it (``step_clock`` looks at the stalls).
"""

from __future__ import annotations

import gc
import time
from typing import Any

GC_HEAP_MODES = ("frozen", "live")
"""``frozen``: collect once and move the survivors to the permanent generation after boot (what vLLM's server
does); ``live``: leave the heap as the offline ``LLM`` leaves it (the bench before this module)."""


def settle_heap(mode: str) -> dict[str, Any]:
    """Apply ``mode`` once, after boot; returns what it did (the report says which heap the passes ran on)."""
    if mode not in GC_HEAP_MODES:
        raise ValueError(f"gc heap mode {mode!r}: pass one of {', '.join(GC_HEAP_MODES)}")
    if mode == "live":
        return {"gc_heap": mode, "frozen_objects": 0}
    gc.collect()
    gc.freeze()
    return {"gc_heap": mode, "frozen_objects": gc.get_freeze_count()}


class CollectionClock:
    """Counts and times the collections between ``__enter__`` and ``__exit__`` (``gc.callbacks``): per generation,
    how many ran and their total pause in ms."""

    def __init__(self) -> None:
        self.counts = [0, 0, 0]
        self.pause_s = 0.0
        self._started: float | None = None

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        elif self._started is not None:
            self.pause_s += time.perf_counter() - self._started
            self.counts[info["generation"]] += 1
            self._started = None

    def __enter__(self) -> "CollectionClock":
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: Any) -> None:
        gc.callbacks.remove(self._callback)

    def report(self) -> dict[str, Any]:
        return {"gc_collections": list(self.counts), "gc_pause_ms": round(1000 * self.pause_s, 3)}
