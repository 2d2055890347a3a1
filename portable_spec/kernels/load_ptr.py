"""``_load_ptr`` for MUSA: Model Runner V2's pointer-table load without a dtype parameter in ``tl.pointer_type``.

vLLM 0.26.0's ``v1/worker/gpu/buffer_utils.py:313`` reads a device pointer from a table of addresses and casts it
with ``tl.pointer_type(elem_dtype)``, ``elem_dtype`` being a parameter its callers fill with ``tl.int32``
(``_gather_block_tables_kernel``, ``_compute_slot_mappings_kernel``, the multi-group ``_apply_write_kernel``).
Front ends older than Triton 3.2 hand a helper such an argument as a ``constexpr`` and ``tl.pointer_type`` refuses it
("element_ty is a constexpr."; vllm-musa patches the block-table kernels for it). This helper keeps the parameter,
so vLLM's call sites stay as they are, and names the only dtype they pass; another one fails at compile time.
Triton looks a helper up in the calling kernel's module globals, so the registry binds it in both modules.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _load_ptr(ptr_to_ptr, elem_dtype):
    tl.static_assert(elem_dtype == tl.int32, "portable_spec's MUSA _load_ptr reads int32 tables only")
    ptr = tl.load(ptr_to_ptr)
    ptr = tl.cast(ptr, tl.pointer_type(tl.int32))
    return tl.multiple_of(ptr, 16)
