"""The ports this process uses: one per platform name, constructed once, because a port owns the ONE graph pool and
capture stream of its device. Every caller that needs "our port for this process" asks here (vLLM's platform
classes, the drafter, the worker), as vLLM resolves ``current_platform`` in one place.

``port_name_of`` / ``platform_label`` map a vLLM platform instance to our port and to the name our logs use; they
read attributes only (no vLLM import), so they live here with the table they index.
"""

from __future__ import annotations

import functools
from typing import Any

from portable_spec.ports.interface import DevicePort
from portable_spec.ports.registry import platform_class

_INSTALLED_PORTS: dict[str, DevicePort] = {}

PORT_NAMES = ("cuda", "rocm", "musa")
"""The ports a vLLM platform can map to (``cpu`` has no graphs to serve a drafter with)."""


def install_device_port(port: DevicePort) -> None:
    """Use an explicitly constructed port (e.g. ``MusaPort(device_module=SimulatedMusa())``, labelled musa-sim)
    for its platform name in this process, instead of constructing one by detection."""
    _INSTALLED_PORTS[port.name] = port
    _constructed_port.cache_clear()


def installed_port(name: str) -> DevicePort | None:
    """The port ``install_device_port`` installed for ``name`` in this process, if any (never constructs one)."""
    return _INSTALLED_PORTS.get(name)


def device_port(name: str) -> DevicePort:
    """Our port for ``name``, one per process (it owns the ONE graph pool)."""
    return _INSTALLED_PORTS.get(name) or _constructed_port(name)


@functools.lru_cache(maxsize=None)
def _constructed_port(name: str) -> DevicePort:
    return platform_class(name)()


def port_name_of(vllm_platform: Any) -> str:
    """Our port for a vLLM platform instance: the one our platform classes name (``port_name``: a musa-sim platform's
    tensors are CUDA's, its port is MUSA's), else vLLM's device name where we have a port for it, else CUDA's."""
    name = getattr(vllm_platform, "port_name", None) or vllm_platform.device_name
    return name if name in PORT_NAMES else "cuda"


def platform_label(vllm_platform: Any) -> str:
    """How a vLLM platform instance names itself in our logs and results: our classes' ``label()`` (``musa``;
    ``musa-sim`` under the harness's simulation), else vLLM's device name."""
    label = getattr(type(vllm_platform), "label", None)
    return label() if callable(label) else str(vllm_platform.device_name)


def current_port(vllm_platform: Any) -> DevicePort:
    """Our port for this process's vLLM platform."""
    return device_port(port_name_of(vllm_platform))
