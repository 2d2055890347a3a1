"""Imported by vLLM only when ``VLLM_PLATFORM`` cannot be honoured: the import itself raises the one-line reason.

vLLM resolves the platform qualname outside its plugin try-block, so this is how the user sees our message
instead of a silent fall-back to another platform.
"""

from portable_spec.errors import PlatformError
from portable_spec.envs import PLATFORM_ENV, requested_platform
from portable_spec.vllm_adapter.plugin.platform_plugin import selection_problem

_name = requested_platform()
raise PlatformError(
    (selection_problem(_name) if _name else None)
    or f"{PLATFORM_ENV} is unset; portable_spec's platform plugin should not have been selected")
