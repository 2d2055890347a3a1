"""Per-step FULL draft graphs: one graph per ``DraftKey``, replayed once per draft step.

Never the whole K-step chain as one graph (vllm-musa MUSA-0203: acceptance collapsed and devices rebooted). Every
device call goes through the platform port (``new_graph``, ``capture`` = the ONE shared pool + capture stream +
inference mode on MUSA, ``grad_mode_for_capture``, ``synchronize``), so the same runner serves CUDA, ROCm, MUSA and
musa-sim. Per step the host does only: in-place copies of new inputs into the capture-time buffers (first step),
``current_draft_step.fill_(i)`` and ``replay()`` — no allocation, no ``.item()``, no sync.

A key whose capture fails runs eagerly (warning), and so do keys beyond the platform's live-graph budget.
"""

from __future__ import annotations

import threading
import warnings
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from portable_spec.draft.buffers import TOKENS, DraftModel
from portable_spec.draft.dispatcher import FIRST, DraftDispatcher, DraftKey
from portable_spec.errors import PortableSpecError
from portable_spec.platforms.interface import DevicePlatform

# Live graphs per device module, process-wide (the MUSA cap counts executables in the process, not per runner).
_LIVE: "weakref.WeakKeyDictionary[Any, int]" = weakref.WeakKeyDictionary()
_LIVE_LOCK = threading.Lock()


class DraftGraphWarning(RuntimeWarning):
    """A draft key runs eagerly instead of from a graph (capture failed, or over the live-graph budget)."""


def live_graphs(platform: DevicePlatform) -> int:
    """Draft graphs this process holds on the platform's device module."""
    with _LIVE_LOCK:
        return _LIVE.get(platform.device_module, 0) if platform.supports_graphs else 0


def _add_live(platform: DevicePlatform, delta: int) -> None:
    with _LIVE_LOCK:
        _LIVE[platform.device_module] = max(0, _LIVE.get(platform.device_module, 0) + delta)


def _progress(items: list, desc: str, enabled: bool) -> Iterable:
    if not enabled:
        return items
    try:
        from tqdm import tqdm
    except ImportError:
        return items
    return tqdm(items, desc=desc, leave=False)


@dataclass
class CaptureReport:
    captured: list[DraftKey] = field(default_factory=list)
    eager: dict[DraftKey, str] = field(default_factory=dict)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"captured": len(self.captured), "eager": {str(k): why for k, why in self.eager.items()},
                "seconds": round(self.seconds, 3)}


class DraftGraphRunner:
    """Captures ``model``'s step callables per key of ``dispatcher`` and replays them (see module docstring)."""

    def __init__(self, platform: DevicePlatform, dispatcher: DraftDispatcher, model: DraftModel, *,
                 device: torch.device | None = None, live_graph_limit: int | None = None, warmup_runs: int = 1,
                 progress: bool = False) -> None:
        self.platform = platform
        self.dispatcher = dispatcher
        self.model = model
        self.device = device if device is not None else platform.device()
        self.live_graph_limit = platform.live_graph_limit if live_graph_limit is None else live_graph_limit
        self.warmup_runs = warmup_runs
        self.progress = progress
        self.graphs: dict[DraftKey, Any] = {}
        self.eager_keys: dict[DraftKey, str] = {}
        self.schedule = list(model.schedule())
        self.kinds = list(dict.fromkeys(self.schedule))
        self._step_scalar = model.outputs.current_draft_step
        self._check_compatible()

    def _check_compatible(self) -> None:
        for kind in self.kinds:
            if not self.dispatcher.has_step(kind):
                raise PortableSpecError(f"the draft model runs {kind!r} steps but the capture plan has none: plan "
                                        f"with the model's method and num_spec")
            dq, mq = self.dispatcher.query_len(kind), self.model.query_len(kind)
            if dq != mq:
                raise PortableSpecError(f"{kind} step: the capture plan keys query length {dq} but the model "
                                        f"runs {mq}; plan with the same num_spec")
        if self.dispatcher.max_num_seqs > self.model.max_reqs:
            raise PortableSpecError(f"the capture plan allows {self.dispatcher.max_num_seqs} requests but the "
                                    f"draft buffers hold {self.model.max_reqs}: build the model with "
                                    "max_reqs >= max_num_seqs")
        keys = [k for kind in self.kinds for k in self.dispatcher.keys_for(kind)]
        for name, si in self.model.inputs.items():
            need = max((k.num_tokens if si.unit == TOKENS else (k.num_reqs or 0) for k in keys), default=0)
            if need > si.capacity:
                raise PortableSpecError(f"static input {name!r} holds {si.capacity} {si.unit} but a key needs "
                                        f"{need}: allocate the model for the plan's largest size")

    # ---- capture ---------------------------------------------------------------------------------------------
    def graph_keys(self) -> list[DraftKey]:
        """The FULL keys of the model's step kinds (what ``capture`` would capture without a budget)."""
        return [k for kind in self.kinds for k in self.dispatcher.keys_for(kind, "FULL")]

    def capture(self, keys: Iterable[DraftKey] | None = None) -> CaptureReport:
        """Warm up and capture each key (default: all FULL keys) into the shared pool; failures go eager."""
        import time

        start = time.perf_counter()
        report = CaptureReport()
        wanted = [k for k in (self.graph_keys() if keys is None else keys) if k not in self.graphs]
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
            return report
        # Under a live-graph budget the smallest batches keep their graphs: they are the launch-bound ones.
        wanted.sort(key=lambda k: (k.num_tokens, k.step))
        if self.live_graph_limit is not None:
            room = max(0, self.live_graph_limit - live_graphs(self.platform))
            for key in wanted[room:]:
                self._go_eager(key, f"live-graph limit {self.live_graph_limit} reached on {self.platform.label}",
                               report)
            wanted = wanted[:room]
        # Largest first, so smaller graphs reuse the pool blocks the larger ones freed (as vLLM does).
        for key in _progress(sorted(wanted, key=lambda k: -k.num_tokens), "capturing draft graphs", self.progress):
            try:
                graph = self._capture_one(key)
            except Exception as exc:  # noqa: BLE001 - any capture failure degrades this key to eager
                self._go_eager(key, f"capture failed: {type(exc).__name__}: {exc}".splitlines()[0], report)
                continue
            self.graphs[key] = graph
            _add_live(self.platform, 1)
            report.captured.append(key)
        self.platform.synchronize()
        report.seconds = time.perf_counter() - start
        return report

    def _capture_one(self, key: DraftKey) -> Any:
        num_reqs = key.num_reqs
        assert num_reqs is not None
        self.platform.synchronize()
        with self.platform.on_capture_stream(), self.platform.grad_mode_for_capture():
            for _ in range(self.warmup_runs):
                self.model.step(key.step, key.num_tokens, num_reqs)
        self.platform.synchronize()
        graph = self.platform.new_graph()
        with self.platform.capture(graph):
            self.model.step(key.step, key.num_tokens, num_reqs)
        return graph

    def _go_eager(self, key: DraftKey, why: str, report: CaptureReport, warn: bool = True) -> None:
        self.eager_keys[key] = why
        report.eager[key] = why
        if warn:
            warnings.warn(f"draft key {key} runs eagerly: {why}", DraftGraphWarning, stacklevel=3)

    def close(self) -> None:
        """Drop this runner's graphs (and their share of the live-graph budget)."""
        n = len(self.graphs)
        self.graphs.clear()
        if n:
            _add_live(self.platform, -n)

    # ---- dispatch and replay ---------------------------------------------------------------------------------
    def keys_for_batch(self, num_reqs: int, num_tokens: int | None = None, uniform: bool = True) -> list[DraftKey]:
        """The key of every step of one proposal, in schedule order."""
        by_kind = {FIRST: self.dispatcher.dispatch(FIRST, num_reqs, num_tokens, uniform)}
        for kind in self.kinds:
            if kind != FIRST:
                by_kind[kind] = self.dispatcher.dispatch(kind, num_reqs)
        return [by_kind[kind] for kind in self.schedule]

    def prepare(self, inputs: Mapping[str, torch.Tensor], keys: list[DraftKey], num_reqs: int,
                num_tokens: int) -> None:
        """Copy ``inputs`` in place into the static buffers and fill every padded tail the keys will read."""
        model_inputs = self.model.inputs
        unknown = set(inputs) - set(model_inputs)
        if unknown:
            raise PortableSpecError(f"unknown draft inputs {sorted(unknown)}: the model takes {sorted(model_inputs)}")
        ext_tokens = max(k.num_tokens for k in keys)
        ext_reqs = max(k.num_reqs or num_reqs for k in keys)
        for name, si in model_inputs.items():
            n = num_tokens if si.unit == TOKENS else num_reqs
            src = inputs.get(name)
            if src is not None:
                if src.shape[si.dim] != n:
                    raise PortableSpecError(f"draft input {name!r} has {src.shape[si.dim]} {si.unit} along dim "
                                            f"{si.dim}, expected {n}")
                si.buffer.narrow(si.dim, 0, n).copy_(src, non_blocking=True)
            if si.pad is None:
                continue
            ext = min(ext_tokens if si.unit == TOKENS else ext_reqs, si.capacity)
            if ext > n:
                tail = si.buffer.narrow(si.dim, n, ext - n)
                if isinstance(si.pad, torch.Tensor):
                    tail.copy_(si.pad.expand_as(tail))
                else:
                    tail.fill_(si.pad)

    def run_step(self, key: DraftKey, step_index: int, num_reqs: int, *, eager: bool = False) -> None:
        """Write the step scalar, then replay ``key``'s graph (or run it eagerly at the same padded shape)."""
        self._step_scalar.fill_(step_index)
        graph = None if eager else self.graphs.get(key)
        if graph is not None:
            graph.replay()
            return
        reqs = key.num_reqs if key.mode == "FULL" else num_reqs
        tokens = key.num_tokens if key.mode == "FULL" else num_reqs * self.model.query_len(key.step)
        with torch.inference_mode():
            self.model.step(key.step, tokens, reqs)

    def propose(self, inputs: Mapping[str, torch.Tensor], num_reqs: int, num_tokens: int | None = None, *,
                eager: bool = False) -> list[DraftKey]:
        """One proposal: dispatch every step, copy the inputs, run the K steps; returns the keys used.

        ``eager=True`` runs the same keys eagerly at the same padded shapes (the parity reference)."""
        q = self.model.query_len(FIRST)
        tokens = num_reqs * q if num_tokens is None else num_tokens
        keys = self.keys_for_batch(num_reqs, tokens)
        self.prepare(inputs, keys, num_reqs, tokens)
        for i, key in enumerate(keys):
            self.run_step(key, i, num_reqs, eager=eager)
        return keys

    # ---- introspection ---------------------------------------------------------------------------------------
    def pool_ids(self) -> set:
        """The memory pools this runner's graphs were captured into (one: the platform's shared pool)."""
        return {graph.pool() for graph in self.graphs.values()}

    def describe(self) -> dict[str, Any]:
        return {"platform": self.platform.label, "graphs": len(self.graphs),
                "eager_keys": {str(k): why for k, why in sorted(self.eager_keys.items())},
                "live_graph_limit": self.live_graph_limit, "schedule": self.schedule}
