"""torch profiler ``FunctionEvent``s built by hand the way torch builds them from a Kineto trace: scopes and ops on
the step thread, CUDA API calls on their own thread (as an unlinked call keeps its OS thread id), device work tied
to its call by the CUPTI correlation id. ``typed=False`` leaves out ``activity_type``, as older torch does."""

from __future__ import annotations

from torch.autograd import DeviceType
from torch.autograd.profiler_util import EventList, FunctionEvent

from portable_spec_harness.e2e.step_attribution import API_NAME
from portable_spec_harness.e2e.step_breakdown import is_scope

API_THREAD = 99


def cpu_event(name: str, start: float, end: float, correlation: int = 0, typed: bool = True) -> FunctionEvent:
    api = bool(API_NAME.match(name))
    kind = "cuda_runtime" if api else "user_annotation" if is_scope(name) else "cpu_op"
    return FunctionEvent(id=correlation, name=name, thread=API_THREAD if api else 1, start_us=start, end_us=end,
                         is_user_annotation=is_scope(name), activity_type=kind if typed else None)


def device_event(name: str, duration: float, correlation: int, start: float = 0.0, kind: str = "kernel",
                 typed: bool = True) -> FunctionEvent:
    return FunctionEvent(id=correlation, name=name, thread=7, start_us=start, end_us=start + duration,
                         device_type=DeviceType.CUDA, is_user_annotation=kind == "gpu_user_annotation",
                         activity_type=kind if typed else None)


def trace(events: list[FunctionEvent]) -> EventList:
    """The events with torch's own CPU tree built, as ``prof.events()`` returns them."""
    listed = EventList(events)
    listed._populate_cpu_children()
    return listed


def sample_breakdown(scale: float = 1.0, runner: str = "v1") -> dict:
    """The breakdown of two hand-built steps whose phases take ``scale`` times fixed host and device times; every
    kernel is a graph replay launched inside its phase."""
    from portable_spec_harness.e2e.step_attribution import breakdown
    from portable_spec_harness.vllm_door import profile_scopes as ours

    events = []
    for step in range(2):
        t = step * 1000 * scale

        def at(name: str, start: float, end: float, kernels: tuple[float, ...] = ()) -> None:
            events.append(cpu_event(name, t + start * scale, t + end * scale))
            for k in kernels:
                correlation = len(events) + 1000
                events.append(cpu_event("cudaGraphLaunch", t + (start + 1) * scale, t + (start + 2) * scale,
                                        correlation))
                events.append(device_event("gemm", k * scale, correlation))
        at(ours.STEP, 0, 400)
        at(ours.MRV2_FORWARD, 100, 300, kernels=(150,))
        at(ours.OUTPUT, 450, 900)
        at(ours.DRAFT_FIRST, 500, 600, kernels=(40,))
        at(ours.DRAFT_CHAIN, 600, 800, kernels=(30, 30, 30))
    return breakdown(trace(events), runner=runner)
