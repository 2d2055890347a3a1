"""The ``vllm.platform_plugins`` probe: ``VLLM_PLATFORM`` names the platform, unset leaves vLLM's built-ins alone.

vLLM calls every probe twice and swallows their exceptions, so this probe never raises and never imports vLLM's
platform modules (``vllm.platforms.cuda`` does not even import without a GPU). A value we cannot honour returns the
qualname of ``platform_error.PlatformSelectionError``: vLLM imports that outside its try, and the import raises our
one-line error where the user sees it.
"""

from __future__ import annotations

import os

ENV_VAR = "VLLM_PLATFORM"
ERROR_QUALNAME = "portable_spec.vllm_adapter.platform_error.PlatformSelectionError"


def requested_platform() -> str | None:
    """The lower-cased ``VLLM_PLATFORM`` value, or None when it is unset or blank."""
    value = os.environ.get(ENV_VAR, "").strip().lower()
    return value or None


def vllm_platform_qualname(name: str) -> str | None:
    """The vLLM platform class our port ``name`` names (``DevicePlatform.vllm_platform``), None for unknown names."""
    from portable_spec.errors import PlatformError
    from portable_spec.platforms import platform_class

    try:
        return platform_class(name, source=ENV_VAR).vllm_platform
    except PlatformError:
        return None


def selection_problem(name: str) -> str | None:
    """Why ``name`` cannot be used on this host (one line), or None. Uses our ports only, never vLLM."""
    from portable_spec.errors import PlatformError
    from portable_spec.platforms import platform_class

    try:
        cls = platform_class(name, source=ENV_VAR)
    except PlatformError as exc:
        return str(exc)
    return cls.unavailable_reason()


def probe() -> str | None:
    """Return our platform's qualname for ``VLLM_PLATFORM=cuda|rocm|musa|cpu``, None when unset."""
    name = requested_platform()
    if name is None:
        return None
    try:
        if selection_problem(name):
            return ERROR_QUALNAME
    except Exception:  # never raise inside vLLM's probe loop; the error class re-derives the message
        return ERROR_QUALNAME
    return vllm_platform_qualname(name) or ERROR_QUALNAME
