"""Platform registry and selection: ``--platform``, else ``VLLM_PLATFORM``, else auto-detection.

Adding a platform means one module with a ``DevicePort`` subclass plus one entry in ``PLATFORMS``.
Entries are lazy ``module:Class`` strings so that selecting one platform never imports another's runtime.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import TYPE_CHECKING

from portable_spec import envs
from portable_spec.errors import PlatformError

if TYPE_CHECKING:
    from portable_spec.ports.interface import DevicePort

PLATFORMS: dict[str, str] = {
    "cuda": "portable_spec.ports.cuda_port:CudaPort",
    "rocm": "portable_spec.ports.rocm_port:RocmPort",
    "musa": "portable_spec.ports.musa_port:MusaPort",
    "cpu": "portable_spec.ports.cpu_port:CpuPort",
}
# Detection order: the specific runtimes first (a MUSA or ROCm host may also answer CUDA-ish questions), CPU last.
DETECTION_ORDER = ("musa", "rocm", "cuda", "cpu")


def platform_names() -> list[str]:
    return sorted(PLATFORMS)


def checked_platform_name(name: str, *, source: str = "platform name") -> str:
    """``name`` normalised (stripped, lower case); an unknown name raises one line listing the valid choices."""
    key = name.strip().lower()
    if not key:
        fix = ("unset it (auto-detection on the CLI; vLLM's built-in platforms under vLLM)" if source == envs.PLATFORM_ENV
               else "leave it out (then $VLLM_PLATFORM, else auto-detection)")
        raise PlatformError(f"{source} is set but empty: name one of {', '.join(platform_names())}, or {fix}")
    if key not in PLATFORMS:
        raise PlatformError(f"unknown platform {name!r} from {source}; valid choices: {', '.join(platform_names())}")
    return key


def platform_class(name: str, *, source: str = "platform name") -> type[DevicePort]:
    """The class registered under ``name``; an unknown name raises one line listing the valid choices."""
    module, _, qualname = PLATFORMS[checked_platform_name(name, source=source)].partition(":")
    return getattr(importlib.import_module(module), qualname)


def detect_platform_name() -> str:
    """The first platform in ``DETECTION_ORDER`` whose ``is_active()`` is true."""
    for name in DETECTION_ORDER:
        if platform_class(name).is_active():
            return name
    return "cpu"


def requested_platform_name(cli_choice: str | None = None,
                            environ: Mapping[str, str] | None = None) -> tuple[str, str]:
    """``(name, source)`` by precedence: CLI flag, then ``VLLM_PLATFORM``, then detection. A flag or variable that is
    given but empty is an error, never a silent fall-through to detection."""
    if cli_choice is not None:
        return checked_platform_name(cli_choice, source="--platform"), "--platform"
    requested = env_platform_name(environ)
    if requested is not None:
        return requested, envs.PLATFORM_ENV
    return detect_platform_name(), "auto-detection"


def env_platform_name(environ: Mapping[str, str] | None = None) -> str | None:
    """``VLLM_PLATFORM`` checked against ``PLATFORMS`` (None: unset). The CLI checks it before every command run
    without ``--platform``, so a wrong value fails in one line also where a default picks the platform (``caps``
    lists all, ``kernels`` shows musa)."""
    requested = envs.requested_platform(environ)
    return None if requested is None else checked_platform_name(requested, source=envs.PLATFORM_ENV)


def select_platform(cli_choice: str | None = None, environ: Mapping[str, str] | None = None) -> DevicePort:
    """Resolve and construct the platform; raises ``PlatformError`` (one line) if it cannot run here."""
    name, source = requested_platform_name(cli_choice, environ)
    return platform_class(name, source=source)()
