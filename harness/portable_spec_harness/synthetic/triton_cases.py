"""The synthetic harness's Triton kernels as rows of the Triton 3.2 check (``portable-spec kernels --check-triton``
adds them through ``triton_table.kernel_cases``): the musa-sim parity runs them on the MUSA code path, so MUSA's
Triton must accept them too, but they are not on ``vllm serve``'s path, so the product's table does not name them."""

from __future__ import annotations

from portable_spec.kernels.triton_table import KernelCase, sig

SOURCE = "portable_spec_harness.synthetic.triton_cases:SYNTHETIC_KERNELS"
"""How the CLI names this table to the check's worker (a ``module:attr`` string, imported in the worker)."""
_OPS = "harness/portable_spec_harness/synthetic/ops.py"

SYNTHETIC_KERNELS: tuple[KernelCase, ...] = (
    KernelCase(
        "ours/rms_norm_kernel", "portable_spec_harness.synthetic.triton_kernels:rms_norm_kernel",
        sig("x_ptr w_ptr out_ptr:*bf16 | stride_x stride_o n_cols:i32 | eps:fp32"), dict(BLOCK=1024),
        f"{_OPS} Ops.rms_norm", owner="portable_spec"),
    KernelCase(
        "ours/silu_mul_kernel", "portable_spec_harness.synthetic.triton_kernels:silu_mul_kernel",
        sig("x_ptr out_ptr:*bf16 | stride_x stride_o n_cols:i32"), dict(BLOCK=1024),
        f"{_OPS} Ops.silu_mul", owner="portable_spec"),
    KernelCase(
        "ours/rope_store_kv_kernel", "portable_spec_harness.synthetic.triton_kernels:rope_store_kv_kernel",
        sig("qkv_ptr:*bf16 | pos_ptr slot_ptr:*i64 | cos_sin_ptr:*fp32 | q_out_ptr k_cache_ptr v_cache_ptr:*bf16"
            " | stride_qkv stride_q_out stride_slot max_pos:i32"),
        dict(NUM_HEADS=8, NUM_KV_HEADS=2, HEAD_DIM=128), f"{_OPS} Ops.rope_store_kv", owner="portable_spec"),
    KernelCase(
        "ours/uniform_attention_kernel", "portable_spec_harness.synthetic.triton_kernels:uniform_attention_kernel",
        sig("q_ptr k_cache_ptr v_cache_ptr out_ptr:*bf16 | block_table_ptr req_ptr seq_len_ptr:*i32 | scale:fp32"
            " | stride_q stride_o stride_slot stride_bt:i32"),
        dict(QUERY_LEN=4, GROUP=4, HEAD_DIM=128, PAGE=16, BLOCK_M=16, BLOCK_N=64, CAUSAL=True),
        f"{_OPS} Ops.attention", owner="portable_spec"),
    KernelCase(
        "ours/sample_record_kernel", "portable_spec_harness.synthetic.triton_kernels:sample_record_kernel",
        sig("logits_ptr:*bf16 | stride_l:i32 | req_ptr pos_ptr:*i64 | temp_ptr:*fp32 | seed_ptr step_ptr:*i64"
            " | tokens_ptr:*i64 | stride_tok:i32 | draft_logits_ptr:*fp32 | stride_dl_req stride_dl_col:i32"
            " | next_ptr:*i64 | vocab:i32"),
        dict(COLS=1, QUERY_LEN=1, OFFSET=0, WRITE_LOGITS=True, WRITE_NEXT=True, BLOCK_V=4096),
        f"{_OPS} Ops.sample_record", owner="portable_spec", options=dict(num_warps=8)),
    KernelCase(
        "ours/advance_kernel", "portable_spec_harness.synthetic.triton_kernels:advance_kernel",
        sig("hidden_ptr:*bf16 | stride_h:i32 | pos_ptr sample_idx_ptr req_ptr:*i64 | block_table_ptr:*i32"
            " | stride_bt:i32 | next_hidden_ptr:*bf16 | stride_nh:i32 | next_pos_ptr next_seq_ptr next_slot_ptr:*i64"
            " | hidden_size max_pos:i32"),
        dict(QUERY_LEN=4, HAS_SAMPLE_INDEX=True, PAGE=16, BLOCK_H=1024), f"{_OPS} Ops.advance",
        owner="portable_spec"),
)
