"""musa-sim: a simulated ``torch.musa`` backed by ``torch.cuda`` that records every call.

It drives MUSA code paths on an NVIDIA GPU and enforces the MUSA rules we know of (MUSAGraph takes no
``keep_graph``; capture must run under ``inference_mode``; torchada's live-executable cap). Whatever it shows is
labelled ``musa-sim``: it proves our MUSA code path is exercised, never that anything works on MUSA hardware.
It is injected into a platform (``MusaPort(device_module=SimulatedMusa())``); no fake ``torch_musa`` package is
installed and ``sys.modules`` is left alone.

``alias_torch_cuda_graphs`` adds torchada's one graph-related job: on MUSA, torchada makes ``torch.cuda.CUDAGraph``
and ``torch.cuda.graph`` MUSA's, so graphs vLLM records through ``torch.cuda`` itself (Model Runner V2's managers,
vLLM's piecewise wrappers) are MUSAGraphs, under the same rules and the same live-executable cap as ours.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from typing import Any, Callable, Iterator

import torch

LABEL = "musa-sim"


class MusaSimError(RuntimeError):
    """A MUSA rule the simulation enforces was broken."""


class SimulatedMusa:
    """The subset of ``torch.musa`` that portable_spec binds, each call recorded in ``calls``."""

    __name__ = "torch.musa (musa-sim)"
    tensor_device_type = "cuda"  # its memory is the backing CUDA device's

    def __init__(self, backing: Any = None, live_graph_cap: int | None = None,
                 capability: tuple[int, int] = (3, 1)) -> None:
        self._cuda = torch.cuda if backing is None else backing
        # The backing's own graph API, taken before any aliasing: an aliased torch.cuda must not call back into us.
        self._backing_graph_class = getattr(self._cuda, "CUDAGraph", None)
        self._backing_graph = getattr(self._cuda, "graph", None)
        self.capability = capability  # MUSA numbering (3.1: MTT S5000); never the backing GPU's
        self.calls: list[str] = []
        self.live_graph_cap = live_graph_cap
        self.live_graphs = 0
        sim = self

        class MUSAGraph:  # noqa: N801 - torch_musa's name
            """torch_musa's MUSAGraph has no ``keep_graph`` parameter; passing one is a bug in the caller."""

            def __init__(self, *args: Any, **kwargs: Any) -> None:
                sim._record("MUSAGraph")
                if args or kwargs:
                    raise TypeError(f"MUSAGraph() takes no arguments (got {args}, {sorted(kwargs)}); "
                                    "torch_musa has no keep_graph")
                self._graph = sim._backing_graph_class()

            def replay(self) -> None:
                sim._record("MUSAGraph.replay")
                self._graph.replay()

            def reset(self) -> None:
                sim._record("MUSAGraph.reset")
                self._graph.reset()

            def pool(self) -> Any:
                return self._graph.pool()

        self.MUSAGraph = MUSAGraph

    def _record(self, name: str) -> None:
        self.calls.append(name)

    def call_counts(self) -> Counter:
        return Counter(self.calls)

    # streams, events, device ------------------------------------------------------------------------------
    def Stream(self, *args: Any, **kwargs: Any) -> Any:  # noqa: N802 - torch API name
        self._record("Stream")
        return self._cuda.Stream(*args, **kwargs)

    def Event(self, *args: Any, **kwargs: Any) -> Any:  # noqa: N802
        self._record("Event")
        return self._cuda.Event(*args, **kwargs)

    def stream(self, stream: Any) -> Any:
        """``torch.musa.stream``: the context that makes ``stream`` current (used to warm up on a capture stream)."""
        self._record("stream")
        return self._cuda.stream(stream)

    def current_stream(self, device: Any = None) -> Any:
        self._record("current_stream")
        return self._cuda.current_stream(device)

    def synchronize(self, device: Any = None) -> None:
        self._record("synchronize")
        self._cuda.synchronize(device)

    def device_count(self) -> int:
        self._record("device_count")
        return self._cuda.device_count()

    def current_device(self) -> int:
        return self._cuda.current_device()

    def get_device_capability(self, device: Any = None) -> tuple[int, int]:
        self._record("get_device_capability")
        return self.capability

    def get_device_properties(self, device: Any = None) -> Any:
        self._record("get_device_properties")
        return self._cuda.get_device_properties(device)

    def set_device(self, device: Any) -> None:
        self._record("set_device")
        self._cuda.set_device(device)

    def empty_cache(self) -> None:
        self._record("empty_cache")
        self._cuda.empty_cache()

    def reset_peak_memory_stats(self, device: Any = None) -> None:
        self._record("reset_peak_memory_stats")
        self._cuda.reset_peak_memory_stats(device)

    def max_memory_allocated(self, device: Any = None) -> int:
        self._record("max_memory_allocated")
        return self._cuda.max_memory_allocated(device)

    def manual_seed_all(self, seed: int) -> None:
        self._record("manual_seed_all")
        self._cuda.manual_seed_all(seed)

    def mem_get_info(self, device: Any = None) -> tuple[int, int]:
        return self._cuda.mem_get_info(device)

    def memory_reserved(self, device: Any = None) -> int:
        return self._cuda.memory_reserved(device)

    def memory_allocated(self, device: Any = None) -> int:
        return self._cuda.memory_allocated(device)

    def get_device_name(self, device: Any = None) -> str:
        self._record("get_device_name")
        return f"{LABEL} on {self._cuda.get_device_name(device)}"

    # graphs ------------------------------------------------------------------------------------------------
    def graph_pool_handle(self) -> Any:
        self._record("graph_pool_handle")
        return self._cuda.graph_pool_handle()

    def is_current_stream_capturing(self) -> bool:
        self._record("is_current_stream_capturing")
        return self._cuda.is_current_stream_capturing()

    @contextlib.contextmanager
    def graph(self, musa_graph: Any, pool: Any = None, stream: Any = None,
              capture_error_mode: str = "global") -> Iterator[Any]:
        """``torch.musa.graph``: refuses capture outside inference mode and beyond the live-executable cap."""
        self._record("graph")
        if not torch.is_inference_mode_enabled():
            raise MusaSimError("musa-sim: capture must run under torch.inference_mode (torch_musa rejects "
                               "in-place updates to inference tensors under no_grad)")
        if self.live_graph_cap is not None and self.live_graphs >= self.live_graph_cap:
            raise MusaSimError(f"musa-sim: live graph executables would exceed the cap {self.live_graph_cap} "
                               "(on MUSA: illegal memory access at capture_end)")
        with self._backing_graph(musa_graph._graph, pool=pool, stream=stream,
                                 capture_error_mode=capture_error_mode):
            yield musa_graph
        self.live_graphs += 1


def alias_torch_cuda_graphs(sim: SimulatedMusa, cuda: Any = None) -> Callable[[], None]:
    """torchada's graph aliasing, simulated: ``cuda.CUDAGraph`` and ``cuda.graph`` (default ``torch.cuda``) become
    ``sim``'s MUSAGraph and graph, so every graph recorded through ``torch.cuda`` goes through the simulation (its
    MUSA rules, its live-executable cap, its call counts). Process-wide, as torchada's is; returns the function that
    restores the originals (tests use it; a musa-sim process keeps the aliasing). Idempotent for one ``sim``."""
    cuda = torch.cuda if cuda is None else cuda
    saved = {name: getattr(cuda, name) for name in ("CUDAGraph", "graph")}
    if saved["CUDAGraph"] is sim.MUSAGraph:
        return lambda: None
    cuda.CUDAGraph, cuda.graph = sim.MUSAGraph, sim.graph

    def restore() -> None:
        for name, value in saved.items():
            setattr(cuda, name, value)
    return restore
