"""The ONE draft-graph runner: every engine's per-step FULL draft graphs are keyed, captured, replayed, budgeted,
reported and fall back here — vLLM's V1 drafters (``vllm_adapter/spec_decode/proposer.py``) and the synthetic harness alike.

A drafter hands the runner a ``DraftStepSource``: for a ``DraftKey`` it prepares its persistent buffers and
metadata and returns a ``StepCall`` (the callable that runs that step at the key's padded shape, and the input
addresses a replay must see). The runner then, for every FULL key of its dispatcher:
- captures the most tokens first (each graph keeps its outputs in the shared pool; captured smallest first, each
  larger graph found only holes too small for it, several times the memory), after one warm-up on
  the capture stream, into the platform's ONE process-wide pool, in the platform's grad mode (inference mode on MUSA);
- counts every graph against the platform's live-graph budget (process-wide, as MUSA's cap is): keys beyond it run
  eagerly, the smallest batches (the launch-bound ones) keep their graphs;
- degrades a key whose capture fails to eager, with a warning naming the key and the error;
- with tensor parallelism, agrees with the other ranks (``agree``) so that a key that failed on any rank is dropped
  on every rank: ranks must replay the same graphs, or their collectives stop matching;
- logs one line (count, seconds, MiB, sizes, failures) and keeps the statistics.
Never the whole K-step chain as one graph (vllm-musa MUSA-0203: acceptance collapsed and devices rebooted).

Replay is ``replay(key, input_ptrs)``: the captured step, or None (not captured, or the inputs moved since capture:
the caller then runs eagerly). No allocation, no sync, no ``.item()`` on the replay path.
"""

from __future__ import annotations

import logging
import threading
import time
import warnings
import weakref
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from portable_spec.draft.capture_log import capture_summary
from portable_spec.draft.dispatcher import DraftDispatcher, DraftKey
from portable_spec.draft.fault_injection import maybe_fail_capture
from portable_spec.errors import PortableSpecError
from portable_spec.ports.interface import DevicePort

logger = logging.getLogger("portable_spec.draft")

# Live graphs per device module, process-wide (the MUSA cap counts executables in the process, not per runner).
_LIVE: "weakref.WeakKeyDictionary[Any, int]" = weakref.WeakKeyDictionary()
_LIVE_LOCK = threading.Lock()


class DraftGraphWarning(RuntimeWarning):
    """A draft key runs eagerly instead of from a graph (capture failed, or over the live-graph budget)."""


def live_graphs(platform: DevicePort) -> int:
    """Draft graphs this process holds on the platform's device module."""
    with _LIVE_LOCK:
        return _LIVE.get(platform.device_module, 0) if platform.supports_graphs else 0


def _add_live(platform: DevicePort, delta: int) -> None:
    with _LIVE_LOCK:
        _LIVE[platform.device_module] = max(0, _LIVE.get(platform.device_module, 0) + delta)


@dataclass
class StepCall:
    """One draft step, ready to run at a key's padded shape over persistent buffers.

    ``run`` must not sync, allocate anything that outlives it, or read a tensor that a later step rebinds;
    ``input_ptrs`` are the addresses the caller will pass at replay time (empty: the step owns its inputs)."""

    run: Callable[[], Any]
    input_ptrs: tuple[int, ...] = ()


class DraftStepSource(Protocol):
    """What a drafter implements so the runner can capture it (the vLLM proposers and the synthetic steps)."""

    def step_call(self, key: DraftKey) -> StepCall:
        """Prepare buffers and metadata for ``key`` and return the call that runs its step (no collective here)."""


@dataclass
class CapturedStep:
    """A captured key: its graph, the input addresses it was captured with, its static outputs."""

    key: DraftKey
    graph: Any
    input_ptrs: tuple[int, ...]
    outputs: Any


@dataclass
class CaptureReport:
    captured: list[DraftKey] = field(default_factory=list)
    eager: dict[DraftKey, str] = field(default_factory=dict)
    over_budget: list[DraftKey] = field(default_factory=list)
    seconds: float = 0.0
    memory: dict[str, int | None] = field(default_factory=lambda: {"memory_bytes": None})

    def stats(self) -> dict[str, Any]:
        """The statistics the log line and the e2e checks read: graphs, sizes per kind, failures, seconds, memory."""
        sizes: dict[str, list[int]] = {}
        for key in sorted(self.captured, key=lambda k: (k.step, k.num_tokens)):
            sizes.setdefault(key.step, []).append(key.num_tokens)
        failed = {f"{k.step}:{k.num_reqs}": why for k, why in self.eager.items() if k not in self.over_budget}
        over_budget = sorted(f"{k.step}:{k.num_reqs}" for k in self.over_budget)
        return {"graphs": len(self.captured), "num_tokens": sizes, "failed": failed, "over_budget": over_budget,
                "seconds": round(self.seconds, 3), **self.memory}

    def to_dict(self) -> dict[str, Any]:
        return {"captured": len(self.captured), "eager": {str(k): why for k, why in self.eager.items()},
                "seconds": round(self.seconds, 3)}


def memory_deltas(before: dict[str, int] | None, after: dict[str, int] | None) -> dict[str, int | None]:
    """What capturing cost: ``memory_bytes`` (drop in free device memory, the headline), and how much of it torch's
    allocator reserved and still holds allocated (static outputs); the rest is outside the allocator."""
    if before is None or after is None:
        return {"memory_bytes": None}
    return {"memory_bytes": before["free"] - after["free"],
            "reserved_bytes": after["reserved"] - before["reserved"],
            "allocated_bytes": after["allocated"] - before["allocated"]}


def _progress(items: list, desc: str, enabled: bool) -> Iterable:
    if not enabled:
        return items
    try:
        from tqdm import tqdm
    except ImportError:
        return items
    return tqdm(items, desc=desc, leave=False)


Agreement = Callable[[list[bool]], list[bool]]
"""Given this rank's per-key capture success (in capture order), every rank's AND of it."""


class DraftGraphRunner:
    """Captures ``source``'s steps per FULL key of ``dispatcher`` and replays them (see the module docstring)."""

    def __init__(self, platform: DevicePort, dispatcher: DraftDispatcher, source: DraftStepSource, *,
                 live_graph_limit: int | None = None, pool: Any = None, warmup_runs: int = 1,
                 progress: bool | Callable[[list], Iterable] = False, agree: Agreement | None = None,
                 rank: int = 0) -> None:
        self.platform = platform
        self.dispatcher = dispatcher
        self.source = source
        self.live_graph_limit = platform.live_graph_limit if live_graph_limit is None else live_graph_limit
        self.pool = pool
        self.warmup_runs = warmup_runs
        self.progress = progress
        self.agree = agree
        self.rank = rank
        self.captured: dict[DraftKey, CapturedStep] = {}
        self.eager_keys: dict[DraftKey, str] = {}
        self.replays: Counter = Counter()
        self.pointer_mismatches = 0
        self.report: CaptureReport | None = None
        self.capturing: DraftKey | None = None
        """The key whose graph is being recorded right now (None outside a capture): what a hook that runs only at
        capture, whose effect is baked into the graph and replayed without Python, can attribute itself to."""

    # ---- capture ---------------------------------------------------------------------------------------------
    def graph_keys(self) -> list[DraftKey]:
        """The dispatcher's FULL keys (what ``capture`` captures without a budget)."""
        return [k for kind in self.dispatcher.step_kinds for k in self.dispatcher.keys_for(kind, "FULL")]

    @property
    def graphs(self) -> dict[DraftKey, Any]:
        """Key -> graph of every captured key."""
        return {key: step.graph for key, step in self.captured.items()}

    def capture(self, keys: Iterable[DraftKey] | None = None) -> CaptureReport:
        """Warm up and capture each key (default: all FULL keys) into the shared pool; failures go eager."""
        start = time.perf_counter()
        report = CaptureReport()
        wanted = [k for k in (self.graph_keys() if keys is None else keys) if k not in self.captured]
        bad = [k for k in wanted if k.mode != "FULL" or k not in self.dispatcher.keys]
        if bad:
            raise PortableSpecError(f"cannot capture {', '.join(map(str, bad))}: only the dispatcher's FULL keys "
                                    "are captured")
        if not self.platform.supports_graphs:
            for key in wanted:
                self._go_eager(key, f"platform {self.platform.name!r} has no device graphs", report, warn=False)
            if wanted:
                warnings.warn(f"platform {self.platform.label!r} has no device graphs: all {len(wanted)} draft keys "
                              "run eagerly", DraftGraphWarning, stacklevel=2)
            return self._finish(report, start, None)
        order = list(self.dispatcher.step_kinds)
        # Under a live-graph budget the smallest batches keep their graphs: they are the launch-bound ones.
        wanted.sort(key=lambda k: (k.num_tokens, order.index(k.step)))
        if self.live_graph_limit is not None:
            room = max(0, self.live_graph_limit - live_graphs(self.platform))
            for key in wanted[room:]:
                report.over_budget.append(key)
                self._go_eager(key, f"live-graph limit {self.live_graph_limit} reached on {self.platform.label}",
                               report)
            wanted = wanted[:room]
        # Most tokens first, so smaller graphs reuse the pool blocks the larger ones freed (as vLLM does).
        wanted.sort(key=lambda k: (-k.num_tokens, order.index(k.step)))
        before = self.platform.memory_snapshot()
        attempts: list[tuple[DraftKey, CapturedStep | None]] = []
        bar = self.progress(wanted) if callable(self.progress) else _progress(wanted, "capturing draft graphs",
                                                                              bool(self.progress))
        for key in bar:
            try:
                step = self._capture_one(key)
            except Exception as exc:  # noqa: BLE001 - any capture failure degrades this key to eager
                self._go_eager(key, f"capture failed: {type(exc).__name__}: {exc}".splitlines()[0], report)
                step = None
            attempts.append((key, step))
        if self.agree is not None:
            agreed = self.agree([step is not None for _, step in attempts])
            for (key, step), ok in zip(attempts, agreed):
                if step is not None and not ok:
                    self._go_eager(key, "capture failed on another rank (every rank drops it)", report)
            attempts = [(key, step if ok else None) for (key, step), ok in zip(attempts, agreed)]
        for key, step in attempts:
            if step is not None:
                self.captured[key] = step
                _add_live(self.platform, 1)
                report.captured.append(key)
        self.platform.synchronize()
        return self._finish(report, start, before)

    def _finish(self, report: CaptureReport, start: float, before: dict[str, int] | None) -> CaptureReport:
        report.seconds = time.perf_counter() - start
        report.memory = memory_deltas(before, self.platform.memory_snapshot() if before is not None else None)
        self.report = report
        if report.captured or report.eager:
            logger.info(capture_summary(report.stats()))
        return report

    def _capture_one(self, key: DraftKey) -> CapturedStep:
        call = self.source.step_call(key)
        platform = self.platform
        with platform.on_capture_stream(), platform.grad_mode_for_capture():
            for _ in range(self.warmup_runs):  # lazy initialisation, autotuning, per-stream workspaces
                call.run()
        platform.synchronize()
        graph = platform.new_graph()
        with platform.capture(graph, pool=self.pool):
            maybe_fail_capture(key, self.rank)
            self.capturing = key
            try:
                outputs = call.run()
            finally:
                self.capturing = None
        return CapturedStep(key, graph, call.input_ptrs, outputs)

    def _go_eager(self, key: DraftKey, why: str, report: CaptureReport, warn: bool = True) -> None:
        self.eager_keys[key] = why
        report.eager[key] = why
        if warn:
            message = f"draft key {key} runs eagerly: {why}"
            logger.warning("portable_spec: %s", message)
            warnings.warn(message, DraftGraphWarning, stacklevel=3)

    def close(self) -> None:
        """Drop this runner's graphs (and their share of the live-graph budget)."""
        n = len(self.captured)
        self.captured.clear()
        if n:
            _add_live(self.platform, -n)

    # ---- replay ----------------------------------------------------------------------------------------------
    def replay(self, key: DraftKey, input_ptrs: tuple[int, ...] | None = None) -> CapturedStep | None:
        """Replay ``key``'s graph and return its captured step, or None when there is no graph for it or the
        caller's inputs are not at the captured addresses (the caller then runs the step eagerly)."""
        step = self.captured.get(key)
        if step is None:
            return None
        if input_ptrs is not None and input_ptrs != step.input_ptrs:
            self.pointer_mismatches += 1
            return None
        step.graph.replay()
        self.replays[key.step] += 1
        return step

    def count_replays(self, kind: str, n: int) -> None:
        """For callers that replay a captured graph in a hot loop themselves (``captured[key].graph.replay``)."""
        self.replays[kind] += n

    # ---- introspection ---------------------------------------------------------------------------------------
    def pool_ids(self) -> set:
        """The memory pools this runner's graphs were captured into (one: the platform's shared pool)."""
        return {step.graph.pool() for step in self.captured.values()}

    def describe(self) -> dict[str, Any]:
        return {"platform": self.platform.label, "graphs": len(self.captured),
                "eager_keys": {str(k): why for k, why in sorted(self.eager_keys.items())},
                "live_graph_limit": self.live_graph_limit, "replays": dict(self.replays),
                "pointer_mismatches": self.pointer_mismatches}
