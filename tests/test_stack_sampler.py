"""The join probe's sampler (``serve_bench/stack_sampler.py``) must name what a blocked thread is in, and the
collector's pauses, within a client-side time window: the diagnosis of a one-off serving pause rests on it."""

from __future__ import annotations

import gc
import threading
import time

from portable_spec_harness.serve_bench.stack_sampler import StackSampler, window


def _blocked_in_a_named_place(seconds: float) -> None:
    time.sleep(seconds)


def test_the_sampler_names_where_the_thread_was_blocked_and_the_collectors_pauses():
    sampler = StackSampler(threading.get_ident(), 0.002).start()
    start = time.time()
    _blocked_in_a_named_place(0.15)
    middle = time.time()
    gc.collect()
    report = sampler.stop()
    end = time.time()
    seen = window(report, start, middle)
    assert seen["samples"] >= 10
    assert seen["top_frames"][0][0].split(":")[1] == "_blocked_in_a_named_place"
    assert window(report, start, end)["gc"], "a full collection inside the window is reported"
    assert window(report, end + 1, end + 2)["samples"] == 0  # nothing outside the window counts
