"""Platform registry and selection: ``--platform``, else ``VLLM_PLATFORM``, else auto-detection.

Adding a platform means one module with a ``DevicePlatform`` subclass plus one entry in ``PLATFORMS``.
Entries are lazy ``module:Class`` strings so that selecting one platform never imports another's runtime.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping

from portable_spec import envs
from portable_spec.errors import PlatformError
from portable_spec.platforms.interface import DevicePlatform

PLATFORMS: dict[str, str] = {
    "cuda": "portable_spec.platforms.cuda:CudaPlatform",
    "rocm": "portable_spec.platforms.rocm:RocmPlatform",
    "musa": "portable_spec.platforms.musa:MusaPlatform",
    "cpu": "portable_spec.platforms.cpu:CpuPlatform",
}
# Detection order: the specific runtimes first (a MUSA or ROCm host may also answer CUDA-ish questions), CPU last.
DETECTION_ORDER = ("musa", "rocm", "cuda", "cpu")


def platform_names() -> list[str]:
    return sorted(PLATFORMS)


def platform_class(name: str, *, source: str = "platform name") -> type[DevicePlatform]:
    """The class registered under ``name``; an unknown name raises one line listing the valid choices."""
    key = name.strip().lower()
    if key not in PLATFORMS:
        raise PlatformError(f"unknown platform {name!r} from {source}; valid choices: {', '.join(platform_names())}")
    module, _, qualname = PLATFORMS[key].partition(":")
    return getattr(importlib.import_module(module), qualname)


def detect_platform_name() -> str:
    """The first platform in ``DETECTION_ORDER`` whose ``is_active()`` is true."""
    for name in DETECTION_ORDER:
        if platform_class(name).is_active():
            return name
    return "cpu"


def requested_platform_name(cli_choice: str | None = None,
                            environ: Mapping[str, str] | None = None) -> tuple[str, str]:
    """``(name, source)`` by precedence: CLI flag, then ``VLLM_PLATFORM``, then detection."""
    if cli_choice:
        return cli_choice, "--platform"
    requested = envs.requested_platform(environ)
    if requested:
        return requested, envs.PLATFORM_ENV
    return detect_platform_name(), "auto-detection"


def select_platform(cli_choice: str | None = None, environ: Mapping[str, str] | None = None) -> DevicePlatform:
    """Resolve and construct the platform; raises ``PlatformError`` (one line) if it cannot run here."""
    name, source = requested_platform_name(cli_choice, environ)
    return platform_class(name, source=source)()
