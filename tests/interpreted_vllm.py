"""vLLM's own Triton kernels on a CPU, for tests that hold our path against vLLM's: Triton's interpreter runs them
(``TRITON_INTERPRET=1``, set by the cpu lane).

vLLM turns Triton off on a host without a GPU driver (``vllm.triton_utils.HAS_TRITON``), so the kernels its modules
define at import are placeholders here. ``spec_decode_utils()`` executes vLLM's ``v1/spec_decode/utils.py`` once more
as a private module that sees the real ``triton`` (through a stand-in ``vllm.triton_utils``, only while that module's
body runs), so its kernels are vLLM's source run by the interpreter, while every module imported before or after
keeps what it has: the rest of the session is unaffected (no global switch, no reload).
"""

from __future__ import annotations

import importlib.util
import os
import sys
import types

import pytest
from lane_tools import import_triton, require_interpreter

PRIVATE_NAME = "portable_spec_tests.vllm_spec_decode_utils_interpreted"


def spec_decode_utils() -> types.ModuleType:
    """A fresh copy of ``vllm.v1.spec_decode.utils`` whose kernels are Triton's (skips without the interpreter)."""
    require_interpreter()
    triton = import_triton()
    import triton.language as tl
    import vllm.triton_utils as shipped_triton_utils
    import vllm.v1.spec_decode.utils as shipped  # imports everything it needs now: the window below imports nothing

    stand_in = types.ModuleType(shipped_triton_utils.__name__)
    stand_in.__dict__.update(vars(shipped_triton_utils), triton=triton, tl=tl, HAS_TRITON=True)
    spec = importlib.util.spec_from_file_location(PRIVATE_NAME, shipped.__file__)
    module = importlib.util.module_from_spec(spec)
    sys.modules[shipped_triton_utils.__name__] = stand_in
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules[shipped_triton_utils.__name__] = shipped_triton_utils
    for name in ("eagle_prepare_next_token_padded_kernel", "eagle_prepare_inputs_padded_kernel",
                 "eagle_step_slot_mapping_metadata_kernel"):
        kernel = getattr(module, name)
        assert type(kernel).__name__ == "InterpretedFunction", (name, type(kernel))
    return module
