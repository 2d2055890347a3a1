"""The one interface every accelerator port implements.

Like Triton's backend drivers, each platform class says whether it is active (``is_active``) and why it cannot run
here (``unavailable_reason``); like PyTorch's ``DeviceInterface``, the device functions are declared as class
members (``DeviceFunction``), each naming the attribute of the port's one device module it is (``torch.cuda``,
``torch.musa``, or an injected simulation). Unlike vLLM's ``Platform.__getattr__`` nothing is resolved silently: a
device module that lacks a declared function raises at construction.

torch is imported by the methods that touch it, never by importing a port: the CLI's planning commands read a
port class's facts (``live_graph_limit``) and must not pay torch's seconds-long import for them. Detection and the
facts ``probe`` reports read the torch build from ``torch_build`` (torch's version file, without importing torch); a
port without graphs (CPU) loads its device module on first use.
"""

from __future__ import annotations

import abc
import contextlib
import threading
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterator

from portable_spec.errors import PlatformError
from portable_spec.ports.torch_build import torch_version

if TYPE_CHECKING:
    import torch

# ONE graph pool per (device module, device index) for the whole process: every runner, ours and vLLM's, captures
# into it. Private pools per runner broke replay on torch_musa 2.9 (vllm-musa MUSA-0109) and waste memory anywhere.
_SHARED_POOLS: dict[tuple[int, int], Any] = {}
_SHARED_CAPTURE_STREAMS: dict[tuple[int, int], Any] = {}
_LOCK = threading.Lock()


class DeviceFunction:
    """A function of the port's device module, declared on the port class and read from the instance's module when
    used (``port._Stream`` is ``port.device_module.Stream``): a type checker sees every member, and an injected
    module (a simulation) serves the same declarations."""

    def __init__(self, attr: str) -> None:
        self.attr = attr

    def __get__(self, port: Any, owner: type | None = None) -> Callable[..., Any]:
        if port is None:
            return self  # type: ignore[return-value]
        return getattr(port.device_module, self.attr)


class DevicePort(abc.ABC):
    """A device port: identity, graph machinery, streams/events and the facts that shape capture planning."""

    name: ClassVar[str]
    """Registry name (``cuda``, ``rocm``, ``musa``, ``cpu``)."""
    device_type: ClassVar[str]
    """torch device type of tensors on this platform (ROCm tensors are ``cuda``)."""
    dist_backend: ClassVar[str]
    """torch.distributed backend name."""
    supports_graphs: ClassVar[bool] = True
    live_graph_limit: ClassVar[int | None] = None
    """Soft cap on live graph executables per process (None: no known cap). A budget for planning, not a crash line."""
    capture_inference_mode: ClassVar[bool] = False
    """True where capture must run under ``torch.inference_mode`` (MUSA rejects in-place updates under no_grad)."""
    graph_class_name: ClassVar[str] = "CUDAGraph"
    """Attribute of the device module that is the graph class."""

    # The device functions a port uses, from its device module (the DeviceInterface pattern).
    _Stream = DeviceFunction("Stream")
    _Event = DeviceFunction("Event")
    _current_stream = DeviceFunction("current_stream")
    _stream = DeviceFunction("stream")
    _synchronize = DeviceFunction("synchronize")
    _device_count = DeviceFunction("device_count")
    _graph_pool_handle = DeviceFunction("graph_pool_handle")
    _is_current_stream_capturing = DeviceFunction("is_current_stream_capturing")
    _graph = DeviceFunction("graph")
    _current_device = DeviceFunction("current_device")
    _get_device_name = DeviceFunction("get_device_name")

    @classmethod
    def runtime_live_graph_limit(cls) -> tuple[int | None, str | None]:
        """The live-graph limit the device's runtime applies, and the one line saying which setting of it the runtime
        ignores (None: none). A running engine plans with this and logs the line: it must not stop where the runtime
        itself would run. The CLI reads ``live_graph_limit``, which refuses such a setting."""
        return cls.live_graph_limit, None

    @classmethod
    def device_functions(cls) -> tuple[str, ...]:
        """The device-module attributes this port's declarations name."""
        return tuple(dict.fromkeys(value.attr for klass in reversed(cls.__mro__) for value in vars(klass).values()
                                   if isinstance(value, DeviceFunction)))

    def __init__(self, device_module: ModuleType | Any | None = None, *, label: str | None = None) -> None:
        """Check the device module has every declared function. An injected ``device_module`` (e.g. a musa-sim)
        bypasses detection."""
        injected = device_module is not None
        if not injected:
            reason = type(self).unavailable_reason()
            if reason:
                raise PlatformError(reason)
            if self.supports_graphs:  # a port without graphs (CPU) loads it on first use: its facts need no torch
                device_module = self._load_device_module()
        self._device_module = device_module
        self.injected = injected
        self.label = label or self.name
        if self.supports_graphs:
            for attr in self.device_functions():
                if not hasattr(device_module, attr):
                    raise PlatformError(
                        f"device module {getattr(device_module, '__name__', device_module)!r} lacks {attr}; "
                        f"platform {self.name!r} cannot bind it (is the runtime too old?)")
            self.graph_class = getattr(device_module, self.graph_class_name)

    # ---- detection -------------------------------------------------------------------------------------------
    @classmethod
    @abc.abstractmethod
    def is_active(cls) -> bool:
        """Auto-detection: True when this host's torch build and runtime are this platform's."""

    @classmethod
    @abc.abstractmethod
    def unavailable_reason(cls) -> str | None:
        """None when the platform can run here, else a one-line reason that names the fix."""

    @abc.abstractmethod
    def _load_device_module(self) -> ModuleType:
        """Import and return the torch device module (runs only after ``unavailable_reason`` said yes)."""

    @property
    def device_module(self) -> ModuleType | Any:
        """The port's one device module: injected, loaded at construction (graph ports), or on first use."""
        if self._device_module is None:
            self._device_module = self._load_device_module()
        return self._device_module

    # ---- identity and facts ----------------------------------------------------------------------------------
    def fp8_dtype_name(self) -> str:
        """The name in ``torch`` of the fp8 dtype kernels on this device use (``probe`` reports it without torch)."""
        return "float8_e4m3fn"

    def fp8_dtype(self) -> torch.dtype:
        """The fp8 dtype kernels on this device use."""
        import torch

        return getattr(torch, self.fp8_dtype_name())

    def device_name(self) -> str:
        return str(self._get_device_name(self._current_device())) if self.supports_graphs else "cpu"

    def runtime_versions(self) -> dict[str, str | None]:
        return {"torch": torch_version()}

    @property
    def tensor_device_type(self) -> str:
        """Device type of the tensors this port allocates: the class's, unless the (injected) device module says
        otherwise — a musa-sim module is backed by CUDA memory."""
        return getattr(self.device_module, "tensor_device_type", self.device_type)

    def device(self, index: int | None = None) -> torch.device:
        import torch

        idx = self._current_device() if index is None else index
        return torch.device(self.tensor_device_type, idx)

    # ---- graphs ----------------------------------------------------------------------------------------------
    def _require_graphs(self) -> None:
        if not self.supports_graphs:
            raise PlatformError(f"platform {self.name!r} has no device graphs; choose cuda, rocm or musa")

    def _pool_key(self, index: int | None) -> tuple[int, int]:
        return (id(self.device_module), self._current_device() if index is None else index)

    def new_graph(self) -> Any:
        """A fresh graph object of this platform's class (no ``keep_graph``: MUSAGraph has none)."""
        self._require_graphs()
        return self.graph_class()

    def graph_pool(self, index: int | None = None) -> Any:
        """The process-wide graph memory pool of this device: the same object for every caller."""
        self._require_graphs()
        key = self._pool_key(index)
        with _LOCK:
            if key not in _SHARED_POOLS:
                _SHARED_POOLS[key] = self._graph_pool_handle()
            return _SHARED_POOLS[key]

    def capture_stream(self, index: int | None = None) -> Any:
        """The process-wide side stream graphs are captured on (never the default stream)."""
        self._require_graphs()
        key = self._pool_key(index)
        with _LOCK:
            if key not in _SHARED_CAPTURE_STREAMS:
                _SHARED_CAPTURE_STREAMS[key] = self._Stream()
            return _SHARED_CAPTURE_STREAMS[key]

    def grad_mode_for_capture(self) -> contextlib.AbstractContextManager:
        import torch

        return torch.inference_mode() if self.capture_inference_mode else torch.no_grad()

    @contextlib.contextmanager
    def capture(self, graph: Any, *, stream: Any = None, pool: Any = None) -> Iterator[Any]:
        """Capture into ``graph`` using the shared pool and capture stream, under the platform's grad mode."""
        self._require_graphs()
        with self.grad_mode_for_capture():
            with self._graph(graph, pool=self.graph_pool() if pool is None else pool,
                             stream=self.capture_stream() if stream is None else stream):
                yield graph

    @contextlib.contextmanager
    def on_capture_stream(self) -> Iterator[Any]:
        """Run warm-ups on the capture stream, ordered after the current stream's work and before what follows.

        The first use of a stream allocates per-stream state (cuBLAS workspaces); done inside a capture, that lands
        in the shared pool and can keep the pool from being retired ("use_count > 0" in torch's allocator).
        """
        self._require_graphs()
        side, current = self.capture_stream(), self._current_stream()
        side.wait_stream(current)
        with self._stream(side):
            yield side
        current.wait_stream(side)

    def is_capturing(self) -> bool:
        """True only while the current stream is capturing a graph."""
        if not self.supports_graphs:
            return False
        return bool(self._is_current_stream_capturing())

    # ---- streams and events ----------------------------------------------------------------------------------
    def new_stream(self, **kwargs: Any) -> Any:
        self._require_graphs()
        return self._Stream(**kwargs)

    def new_event(self, enable_timing: bool = False) -> Any:
        self._require_graphs()
        return self._Event(enable_timing=enable_timing)

    def current_stream(self) -> Any:
        self._require_graphs()
        return self._current_stream()

    def synchronize(self) -> None:
        if self.supports_graphs:
            self._synchronize()

    def memory_snapshot(self) -> dict[str, int] | None:
        """Device memory as the driver sees it (``free``) and as torch's caching allocator does (``reserved``,
        ``allocated``); None where the device module cannot say (CPU, a simulation without memory queries)."""
        module = self.device_module
        queries = [getattr(module, name, None) for name in ("mem_get_info", "memory_reserved", "memory_allocated")]
        if not self.supports_graphs or any(query is None for query in queries):
            return None
        mem_get_info, reserved, allocated = queries
        return {"free": int(mem_get_info()[0]), "reserved": int(reserved()), "allocated": int(allocated())}

    def facts(self) -> dict[str, Any]:
        """Static facts for ``portable-spec probe``; touches the device only for its name."""
        return {
            "platform": self.name,
            "label": self.label,
            "device_type": self.device_type,
            "device_name": self.device_name(),
            "runtime": self.runtime_versions(),
            "graphs_supported": self.supports_graphs,
            "dist_backend": self.dist_backend,
            "fp8_dtype": self.fp8_dtype_name(),
            "live_graph_limit": self.live_graph_limit,
            "capture_inference_mode": self.capture_inference_mode,
        }
