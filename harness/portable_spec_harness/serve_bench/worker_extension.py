"""The worker extension every benchmark server loads (``--worker-extension-cls``): the soak's facts (runner, drafter,
graph replays) plus the phase clock and the torch-profiler breakdown of a served engine, switched on and off through
vLLM's dev-mode ``/collective_rpc`` around one client run at concurrency 1.

Why in the server: the offline bench measures an in-process engine; a served one has the API server, the
engine-core process and its busy loop between requests. With a single GPU (``UniProcExecutor``) vLLM runs the
worker and the scheduler in the engine core's busy-loop thread and answers utility calls (``collective_rpc``)
between steps on that same thread, so the scopes installed here time the very steps the client is timing.

Two passes, as the offline bench does: the phase clock (``PhaseClock``, no profiler: real host ms per phase), and
a profiled one (torch profiler: host and device ms per phase, ``step_attribution``). The clock's step time is the
engine's busy time per step (``profile_scopes.SERVED_HOOKS``), so the idle waits between requests do not count.
"""

from __future__ import annotations

from typing import Any

from portable_spec_harness.soak.worker_extension import SoakWorkerExtension, _jsonable

SAMPLER = "_portable_spec_stack_sampler"
STATE = "_portable_spec_serve_bench"
"""The worker attribute that holds a measurement between its start and stop calls (set at run time: vLLM refuses an
extension class whose attributes clash with its worker's)."""


class ServeBenchWorkerExtension(SoakWorkerExtension):
    def portable_spec_bench_clock_start(self) -> dict[str, Any]:
        return start(self, "clock")

    def portable_spec_bench_clock_stop(self) -> dict[str, Any]:
        return stop(self, "clock")

    def portable_spec_bench_profile_start(self) -> dict[str, Any]:
        return start(self, "profile")

    def portable_spec_bench_profile_stop(self) -> dict[str, Any]:
        return stop(self, "profile")

    def portable_spec_bench_sampler_start(self, interval_ms: str = "5") -> dict[str, Any]:
        """Sample this thread's stack (the engine core's busy loop, which answers utility calls between steps)."""
        import threading

        from portable_spec_harness.serve_bench.stack_sampler import StackSampler

        if getattr(self, SAMPLER, None) is not None:
            return {"error": "the stack sampler is already running"}
        setattr(self, SAMPLER, StackSampler(threading.get_ident(), float(interval_ms) / 1000).start())
        return {"thread": threading.get_ident()}

    def portable_spec_bench_sampler_stop(self) -> dict[str, Any]:
        sampler = getattr(self, SAMPLER, None)
        if sampler is None:
            return {"error": "the stack sampler is not running"}
        setattr(self, SAMPLER, None)
        return sampler.stop()


def start(worker: Any, kind: str) -> dict[str, Any]:
    """Install the scopes (and start the profiler for ``profile``); one measurement at a time."""
    from portable_spec_harness.vllm_door.offline import runner_scopes
    from portable_spec_harness.vllm_door.profile_scopes import SERVED_HOOKS

    if getattr(worker, STATE, None) is not None:
        return {"error": f"a {getattr(worker, STATE)['kind']} measurement is already running"}
    state: dict[str, Any] = {"kind": kind}
    if kind == "clock":
        from portable_spec_harness.e2e.phase_clock import PhaseClock

        state["clock"] = PhaseClock()
        state["scopes"] = runner_scopes(state["clock"].scope, details=True, extra=SERVED_HOOKS)
        hooks = state["scopes"].__enter__()
    else:
        import torch

        activities = [torch.profiler.ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        state["scopes"] = runner_scopes()
        hooks = state["scopes"].__enter__()
        state["profiler"] = torch.profiler.profile(activities=activities)
        state["profiler"].start()
    setattr(worker, STATE, state)
    return {"kind": kind, "installed": len(hooks["installed"]), "skipped": hooks["skipped"]}


def stop(worker: Any, kind: str) -> dict[str, Any]:
    """Stop the measurement ``start`` began and return its summary (or its error)."""
    state = getattr(worker, STATE, None)
    if state is None or state["kind"] != kind:
        return {"error": f"no {kind} measurement is running"}
    setattr(worker, STATE, None)
    try:
        if kind == "profile":
            state["profiler"].stop()
        state["scopes"].__exit__(None, None, None)
        if kind == "clock":
            return _jsonable(served_summary(state["clock"]))
        return _jsonable(profiled_summary(state["profiler"], worker))
    except Exception as exc:  # a diagnostic: report it, never take the server down
        return {"error": f"{type(exc).__name__}: {exc}"}


def served_summary(clock: Any) -> dict[str, Any]:
    """The clock's summary with the engine's busy time (its steps, idle waits excluded) as the pass's wall."""
    from portable_spec_harness.vllm_door.profile_scopes import DETAIL_PREFIX, ENGINE_STEP

    name = ENGINE_STEP[len(DETAIL_PREFIX):]
    busy = clock.details.get(name)
    if not busy or busy[0] <= 0:
        return {"error": f"the engine-step scope ({name}) never ran: not a vllm serve engine core, or no request "
                         "reached it while the clock ran"}
    summary = clock.summary(busy[0])
    if "error" not in summary:
        summary["busy_s"] = round(busy[0], 4)
        summary["engine_steps"] = clock.calls[ENGINE_STEP]
        summary["step_wall_source"] = ("engine core busy time (EngineCoreProc._process_engine_step, inclusive) / "
                                       "model steps; idle waits for requests excluded")
    return summary


def profiled_summary(profiler: Any, worker: Any) -> dict[str, Any]:
    """Host and device ms per phase and step from the profiled pass (``step_attribution.breakdown``), without the
    per-step lists (the summary is what the report shows)."""
    from portable_spec_harness.e2e.step_attribution import breakdown

    runner = "mrv2" if getattr(worker.vllm_config, "use_v2_model_runner", False) else "v1"
    result = breakdown(profiler.events(), runner=runner)
    per_step = result.pop("per_step", None) or {}
    result["steps_listed"] = len(per_step.get("window_ms", []))
    return result
