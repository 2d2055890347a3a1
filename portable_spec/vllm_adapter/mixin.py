"""Hooks shared by our vLLM platform classes, kept in a mixin so CPU tests can apply them to a CPU-importable base
(vLLM's ``CudaPlatform``/``RocmPlatform`` modules do not import without a GPU)."""

from __future__ import annotations

import functools
import logging
from typing import Any, ClassVar

from portable_spec.platforms import DevicePlatform, platform_class
from portable_spec.vllm_adapter.config_hook import apply_capture_plan, record_user_sizes
from portable_spec.vllm_adapter.general_plugin import PORTABLE_WORKER

logger = logging.getLogger("portable_spec.vllm_adapter")


_INSTALLED_PORTS: dict[str, DevicePlatform] = {}


def install_device_port(port: DevicePlatform) -> None:
    """Use an explicitly constructed port (e.g. ``MusaPlatform(device_module=SimulatedMusa())``, labelled musa-sim)
    for its platform name in this process, instead of constructing one by detection."""
    _INSTALLED_PORTS[port.name] = port
    _constructed_port.cache_clear()


def installed_port(name: str) -> DevicePlatform | None:
    """The port ``install_device_port`` installed for ``name`` in this process, if any (never constructs one)."""
    return _INSTALLED_PORTS.get(name)


def device_port(name: str) -> DevicePlatform:
    """Our port for ``name``, one per process (it owns the ONE graph pool)."""
    return _INSTALLED_PORTS.get(name) or _constructed_port(name)


@functools.lru_cache(maxsize=None)
def _constructed_port(name: str) -> DevicePlatform:
    return platform_class(name)()


PORT_NAMES = ("cuda", "rocm", "musa")


def port_name_of(platform: Any) -> str:
    """Our port for vLLM's platform: the one our platform classes name (``port_name``: a musa-sim platform's tensors
    are CUDA's, its port is MUSA's), else vLLM's device name where we have a port for it, else CUDA's."""
    name = getattr(platform, "port_name", None) or platform.device_name
    return name if name in PORT_NAMES else "cuda"


def platform_label(platform: Any) -> str:
    """How a vLLM platform instance names itself in our logs and results: our classes' ``label()`` (``musa``;
    ``musa-sim`` under the harness's simulation), else vLLM's device name."""
    label = getattr(type(platform), "label", None)
    return label() if callable(label) else str(platform.device_name)


class PortableSpecPlatformMixin:
    """Put first in the bases: ``class P(PortableSpecPlatformMixin, SomeVllmPlatform)``."""

    port_name: ClassVar[str]
    """Our registry name for this platform (``cuda``, ``rocm``, ``musa``)."""
    worker_cls: ClassVar[str] = PORTABLE_WORKER
    """Set as ``parallel_config.worker_cls`` when the user left it on "auto" (builds our V1 runner)."""

    @classmethod
    def live_graph_limit(cls) -> int | None:
        return platform_class(cls.port_name).live_graph_limit

    @classmethod
    def label(cls) -> str:
        """How log lines and results name this platform (a simulation says so: ``musa-sim``)."""
        return cls.port_name

    @classmethod
    def apply_config_platform_defaults(cls, vllm_config: Any) -> None:
        super().apply_config_platform_defaults(vllm_config)  # type: ignore[misc]
        record_user_sizes(vllm_config)

    @classmethod
    def check_and_update_config(cls, vllm_config: Any) -> None:
        if vllm_config.parallel_config.worker_cls == "auto":
            vllm_config.parallel_config.worker_cls = cls.worker_cls
        super().check_and_update_config(vllm_config)  # type: ignore[misc]
        apply_capture_plan(vllm_config, live_graph_limit=cls.live_graph_limit(), platform_name=cls.port_name)


class SharedPoolMixin:
    """vLLM's graph pool comes from our port, so vLLM's graphs and ours share ONE pool per device."""

    port_name: ClassVar[str]

    def get_global_graph_pool(self) -> Any:
        return device_port(self.port_name).graph_pool()
