"""Imported by vLLM only when ``VLLM_PLATFORM`` cannot be honoured: the import itself raises the one-line reason.

vLLM resolves the platform qualname outside its plugin try-block, so this is how the user sees our message
instead of a silent fall-back to another platform. The reason is the process's one platform ``Selection``'s.
"""

from portable_spec.envs import PLATFORM_ENV
from portable_spec.errors import PlatformError
from portable_spec.vllm_adapter.platform import selection

_chosen = selection.current()
raise PlatformError(_chosen.problem or f"{PLATFORM_ENV}={_chosen.name or 'unset'} has no problem to report; "
                    "portable_spec's platform plugin should not have answered with its error class")
