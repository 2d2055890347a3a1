"""Stand-ins for the tensor-descriptor helpers of vLLM 0.26.0's unified attention (TRITON_ATTN) on MUSA.

``_load_q_td``, ``_load_kv_tile_td`` and ``_store_output_td`` (``v1/attention/ops/triton_unified_attention.py:68,
111, 146``) call ``tl.make_tensor_descriptor``, which Triton 3.2 (MUSA's) lacks. Triton resolves ``tl.*`` attributes
while hashing a kernel, dead ``USE_TD`` branches included, so ``kernel_unified_attention`` fails to compile even with
tensor descriptors off; vLLM turns them on only on Intel XPU (``VLLM_TRITON_USE_TD``). These stand-ins keep the
parameters and, if a launch ever takes that branch, fail at compile time naming the fix. Triton looks a helper up in
the calling kernel's module globals when it compiles the kernel, so the registry binds them there.
"""

from __future__ import annotations

import triton
import triton.language as tl

_NO_TD = tl.constexpr("tensor descriptors need Triton >= 3.3, which MUSA does not ship: set VLLM_TRITON_USE_TD=0")


@triton.jit
def _load_q_td(query_ptr, q_block_local_len, query_stride_0, query_stride_1, cur_batch_in_all_start_index,
               q_block_local_idx, kv_head_idx, num_queries_per_kv: tl.constexpr, BLOCK_Q: tl.constexpr,
               BLOCK_M: tl.constexpr, HEAD_SIZE: tl.constexpr, HEAD_SIZE_PADDED: tl.constexpr):
    tl.static_assert(False, _NO_TD)


@triton.jit
def _load_kv_tile_td(cache_ptr, physical_block_idx_scalar, kv_head_idx, offset_in_block, stride_cache_0,
                     stride_cache_1, stride_cache_2, stride_cache_3: tl.constexpr, BLOCK_SIZE: tl.constexpr,
                     TILE_SIZE: tl.constexpr, HEAD_SIZE: tl.constexpr, HEAD_SIZE_PADDED: tl.constexpr):
    tl.static_assert(False, _NO_TD)


@triton.jit
def _store_output_td(base_ptr, acc, q_block_local_len, stride_token, stride_head, num_queries_per_kv: tl.constexpr,
                     BLOCK_Q: tl.constexpr, HEAD_SIZE: tl.constexpr, HEAD_SIZE_PADDED: tl.constexpr):
    tl.static_assert(False, _NO_TD)
