"""Counts a torch-profiler trace into ``step_breakdown``'s phases, per decode step.

Host: each phase scope's duration minus the phase scopes nested in it (found through torch's CPU tree,
``FunctionEvent.cpu_parent``). Device: every kernel, copy and memset is tied to the CUDA API call that launched it by
the CUPTI correlation id both carry (``FunctionEvent.id``); a CUDA graph's replayed kernels all carry their
``cudaGraphLaunch``'s. The phase is the innermost phase scope open when the call started (a timeline of the step
thread's scopes; the call's own thread id is not comparable, torch numbers its threads itself). Torch's own link
(``FunctionEvent.kernels``) is not used: Kineto ties device work only to aten ops (scopes carry a separate user
correlation), so a graph replayed or a Triton kernel launched under a scope but outside any op (our drafter's
chain, MRV2's replays) would be lost; ``checks`` reports how much it reaches, for comparison. Steps are the windows
between successive step-scope starts (``STEP_SCOPES``)."""

from __future__ import annotations

import bisect
import re
import statistics
from collections import defaultdict
from typing import Any, Callable, Iterable

from portable_spec_harness.e2e.step_breakdown import PHASE_OF, PHASES, SCOPE_PHASES, STEP_SCOPES, UNATTRIBUTED, is_scope

UNLINKED = "unlinked"  # device work whose launching API call is not in the trace
DEVICE_WORK = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})  # Kineto activity types
API_CALLS = frozenset({"cuda_runtime", "cuda_driver"})
API_NAME = re.compile(r"cu(da)?[A-Z]")  # cudaLaunchKernel, cuLaunchKernelEx, cudaGraphLaunch, ...
SYNC_CALLS = frozenset({"cudaStreamSynchronize", "cudaEventSynchronize", "cudaDeviceSynchronize", "cudaMemcpy",
                        "cuStreamSynchronize", "cuEventSynchronize", "cuCtxSynchronize"})
LAUNCH_PREFIXES = ("cudaLaunch", "cuLaunch", "cudaGraphLaunch", "cuGraphLaunch", "cudaMemcpyAsync",
                   "cudaMemsetAsync")


def _activity(event: Any) -> str | None:
    kind = getattr(event, "activity_type", None)  # newer torch; older ones fall back to names
    return kind if isinstance(kind, str) and kind else None


def is_api_call(event: Any) -> bool:
    kind = _activity(event)
    return kind in API_CALLS if kind else bool(API_NAME.match(event.name))


def is_device_work(event: Any) -> bool:
    """A kernel, copy or memset (not a scope's GPU-side span, nor a sync record)."""
    kind = _activity(event)
    if kind:
        return kind in DEVICE_WORK
    return not getattr(event, "is_user_annotation", False) and not is_scope(event.name)


def breakdown(events: Iterable[Any], runner: str | None = None) -> dict[str, Any]:
    """Per-step host and device ms per phase from ``prof.events()`` (torch ``FunctionEvent``s, CPU tree built).
    ``runner``: "v1" or "mrv2", to list the map's scopes for that runner the trace never had (``missing_scopes``)."""
    from torch.autograd import DeviceType

    events = list(events)
    cpu = [e for e in events if e.device_type == DeviceType.CPU and not e.is_async]
    on_device = [e for e in events if e.device_type != DeviceType.CPU]
    device = [e for e in on_device if is_device_work(e)]
    marker = next((name for name in STEP_SCOPES if any(e.name == name for e in cpu)), None)
    if marker is None:
        return {"error": f"no step scope ({' or '.join(STEP_SCOPES)}) in the trace: were the runner scopes on?"}
    steps = sorted((e for e in cpu if e.name == marker), key=lambda e: e.time_range.start)
    thread = steps[0].thread
    on_thread = [e for e in cpu if e.thread == thread and not is_api_call(e)]
    span = (min(e.time_range.start for e in on_thread), max(e.time_range.end for e in on_thread))
    starts = [span[0]] + [e.time_range.start for e in steps[1:]]
    windows = [end - start for start, end in zip(starts, starts[1:] + [span[1]])]
    scopes = [e for e in cpu if e.name in PHASE_OF]

    def step_of(t: float) -> int:
        return max(bisect.bisect_right(starts, t) - 1, 0)

    acc = {"host": _host(scopes, step_of, len(steps)), "calls": defaultdict(int)}
    for scope in scopes:
        acc["calls"][scope.name] += 1
    acc.update(_device(cpu, device, _timeline([e for e in scopes if e.thread == thread]), step_of, len(steps)))
    summary = _summary(acc, windows, marker, runner)
    summary["checks"] = _checks(cpu, on_device, len(steps))
    return summary


def _checks(cpu: list[Any], on_device: list[Any], n: int) -> dict[str, Any]:
    """What to compare the attribution with: the device events left out, by kind (scope spans and sync records
    belong there; kernels would mean the kinds were misread), and how much device time torch's own op links reach
    (graph replays and bare Triton launches under scopes are what they miss)."""
    skipped: dict[str, int] = defaultdict(int)
    for event in on_device:
        if not is_device_work(event):
            skipped[_activity(event) or ("scope span" if is_scope(event.name) else "annotation")] += 1
    linked = sum(kernel.duration for event in cpu for kernel in event.kernels)
    return {"device_events_skipped": dict(skipped), "device_ms_torch_op_links": _ms(linked / n)}


def _host(scopes: list[Any], step_of: Callable[[float], int], n: int) -> dict[str, list[float]]:
    """Each phase scope's time, less the phase scopes nested in it, per step."""
    host: dict[str, list[float]] = defaultdict(lambda: [0.0] * n)
    for scope in scopes:
        step, duration = step_of(scope.time_range.start), scope.time_range.elapsed_us()
        host[PHASE_OF[scope.name]][step] += duration
        parent = scope.cpu_parent
        while parent is not None and parent.name not in PHASE_OF:
            parent = parent.cpu_parent
        if parent is not None:
            host[PHASE_OF[parent.name]][step] -= duration
    return host


def _timeline(scopes: list[Any]) -> Callable[[float], str]:
    """time -> the innermost phase scope open then (``UNATTRIBUTED`` outside all), for properly nested scopes."""
    marks: list[tuple[float, str]] = []
    stack: list[Any] = []

    def close_until(t: float) -> None:
        while stack and stack[-1].time_range.end <= t:
            end = stack.pop().time_range.end
            marks.append((end, PHASE_OF[stack[-1].name] if stack else UNATTRIBUTED))
    for scope in sorted(scopes, key=lambda e: (e.time_range.start, -e.time_range.end)):
        close_until(scope.time_range.start)
        stack.append(scope)
        marks.append((scope.time_range.start, PHASE_OF[scope.name]))
    close_until(float("inf"))
    times = [t for t, _ in marks]

    def phase_at(t: float) -> str:
        i = bisect.bisect_right(times, t) - 1
        return marks[i][1] if i >= 0 else UNATTRIBUTED
    return phase_at


def _device(cpu: list[Any], device: list[Any], phase_at: Callable[[float], str], step_of: Callable[[float], int],
            n: int) -> dict[str, Any]:
    """Device time and kernel counts per phase, through each item's launching API call; launches and host time in
    CUDA syncs per phase, by when the call was made."""
    calls = [e for e in cpu if is_api_call(e)]
    by_correlation = {e.id: e for e in calls}
    out: dict[str, Any] = {"device": defaultdict(lambda: [0.0] * n), "kernels": defaultdict(int),
                           "launches": defaultdict(int), "sync_us": defaultdict(float),
                           "intervals": [[] for _ in range(n)]}
    for call in calls:
        phase = phase_at(call.time_range.start)
        if call.name in SYNC_CALLS:
            out["sync_us"][phase] += call.time_range.elapsed_us()
        elif call.name.startswith(LAUNCH_PREFIXES):
            out["launches"][phase] += 1
    for item in device:
        call = by_correlation.get(item.id)
        phase = phase_at(call.time_range.start) if call is not None else UNLINKED
        t = call.time_range.start if call is not None else item.time_range.start
        out["device"][phase][step_of(t)] += item.time_range.elapsed_us()
        out["kernels"][phase] += 1
        out["intervals"][step_of(t)].append((item.time_range.start, item.time_range.end))
    return out


GAP_BUCKETS_US = (5.0, 100.0)
"""Idle stretches between a step's device items, by length: under 5 us is the GPU's own launch gap (kernels back
to back in a replayed graph or a busy stream), 5-100 us a launch the host issued just in time, 100 us and up the
GPU waiting on the host. Why: a step's wall over its summed kernel time is the sum of these gaps, and only the long
ones are host time that a graph or an earlier launch could remove."""
GAP_NAMES = ("under_5us", "5_to_100us", "100us_up")


def device_gaps(intervals: list[list[tuple[float, float]]]) -> dict[str, Any]:
    """Per step (mean): the busy time of the union of the step's device items (overlapping streams counted once),
    their span from first start to last end, and the idle gaps inside that span, summed and counted by
    ``GAP_BUCKETS_US``."""
    n = len(intervals) or 1
    busy = span = 0.0
    gaps = {name: 0.0 for name in GAP_NAMES}
    counts = {name: 0 for name in GAP_NAMES}
    for items in intervals:
        merged: list[list[float]] = []
        for start, end in sorted(items):
            if merged and start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        if not merged:
            continue
        busy += sum(end - start for start, end in merged)
        span += merged[-1][1] - merged[0][0]
        for (_, end), (start, _) in zip(merged, merged[1:]):
            name = GAP_NAMES[bisect.bisect_right(GAP_BUCKETS_US, start - end)]
            gaps[name] += start - end
            counts[name] += 1
    return {"busy_ms": _ms(busy / n), "span_ms": _ms(span / n), "gap_ms": {k: _ms(v / n) for k, v in gaps.items()},
            "gaps": {k: round(v / n, 2) for k, v in counts.items()}}


def _ms(us: float) -> float:
    return round(us / 1000.0, 4)


def _summary(acc: dict[str, Any], windows: list[float], marker: str, runner: str | None) -> dict[str, Any]:
    n, zeros = len(windows), [0.0] * len(windows)
    host, device = acc["host"], acc["device"]

    def counts(phase: str) -> dict[str, float]:
        return {"kernels": round(acc["kernels"].get(phase, 0) / n, 2),
                "launches": round(acc["launches"].get(phase, 0) / n, 2),
                "sync_ms": _ms(acc["sync_us"].get(phase, 0.0) / n)}
    phases = {p: {"host_ms": _ms(sum(host.get(p, zeros)) / n), "device_ms": _ms(sum(device.get(p, zeros)) / n),
                  "host_ms_median": _ms(statistics.median(host.get(p, zeros))),
                  "device_ms_median": _ms(statistics.median(device.get(p, zeros))), **counts(p)} for p in PHASES}
    host_total, device_total = sum(windows), sum(sum(v) for v in device.values())
    outside = sum(device.get(UNATTRIBUTED, zeros))
    unlinked = sum(device.get(UNLINKED, zeros))
    host[UNATTRIBUTED] = [w - sum(host.get(p, zeros)[i] for p in PHASES) for i, w in enumerate(windows)]
    unattributed = {"host_ms": _ms(sum(host[UNATTRIBUTED]) / n),
                    "host_ms_median": _ms(statistics.median(host[UNATTRIBUTED])),
                    "device_ms": _ms((outside + unlinked) / n), "device_ms_unlinked": _ms(unlinked / n),
                    **counts(UNATTRIBUTED)}
    unattributed["kernels"] = round((acc["kernels"].get(UNATTRIBUTED, 0) + acc["kernels"].get(UNLINKED, 0)) / n, 2)
    seen = set(acc["calls"])
    return {"runner": runner, "steps": n, "step_scope": marker, "unit": "ms per step (mean over steps)",
            "host_ms": _ms(host_total / n), "device_ms": _ms(device_total / n),
            "phases": phases, UNATTRIBUTED: unattributed, "device_gaps": device_gaps(acc["intervals"]),
            "scope_calls": dict(sorted(acc["calls"].items())),
            "missing_scopes": [s for s, _, runners, _ in SCOPE_PHASES if runner in runners.split() and s not in seen],
            "per_step": {"window_ms": [_ms(w) for w in windows],
                         "host_ms": {p: [_ms(v) for v in host[p]] for p in (*PHASES, UNATTRIBUTED) if p in host},
                         "device_ms": {p: [_ms(v) for v in device[p]] for p in PHASES if p in device}}}
