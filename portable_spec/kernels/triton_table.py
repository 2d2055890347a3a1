"""Every Triton kernel on the MUSA serving path, with the argument types and constexpr values it is launched with.

The Triton front-end check (``portable-spec kernels --check-triton``) compiles each row for a GPU target without a
GPU, so each row must say what a launch would: runtime parameters with their Triton type (``*bf16`` pointer,
``i32``/``i64`` integer, ``fp32`` float, ``none`` for an argument passed as ``None``) and constexpr parameters with
the value the launch site passes (parameters left at their Python default are filled in by the worker). vLLM
kernels are named by ``"module:attr"`` strings, so importing this table imports neither vLLM nor Triton; each row's
``launched_at`` says where vLLM 0.26.0 launches it, and its ``changes`` what a later vLLM of the span launches
differently (``triton_case.Change``; ``kernel_cases`` resolves them for the installed vLLM). This module holds the V1
runner's kernels (its drafter, rejection sampler and TRITON_ATTN, at a Llama-style layer: 32 query heads, 8 KV heads,
head size 128, bf16, KV block 16); ``triton_table_mrv2.py`` holds Model Runner V2's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from portable_spec.kernels.triton_case import Change, KernelCase, resolved, sig
from portable_spec.kernels.triton_table_mrv2 import MRV2_KERNELS

_SD = "vllm/v1/spec_decode"
_RS = "vllm/v1/sample/rejection_sampler.py"
_FP64_GUMBEL = " (--use-fp64-gumbel: fp64 noise, inv_q, rejection_sampler.py:681)"
_UA = "vllm/v1/attention/ops/triton_unified_attention.py"

_UA_COMMON = sig(
    "output_ptr query_ptr key_cache_ptr value_cache_ptr:*bf16 | sink_ptr:none | block_tables_ptr seq_lens_ptr:*i32"
    " | alibi_slopes_ptr qq_bias_ptr:none | scale:fp32 | q_scale:none | k_scale v_scale:*fp32 | out_scale:fp32"
    " | softcap:i32 | block_table_stride query_stride_0 query_stride_1 output_stride_0 output_stride_1"
    " qq_bias_stride_0:i64 | per_seq_causal_ptr mm_prefix_range_ptr:none | rswa_prefix_lens_ptr:*i32"
    " | stride_k_cache_0 stride_k_cache_1 stride_k_cache_2 stride_v_cache_0 stride_v_cache_1 stride_v_cache_2:i64"
    " | query_start_len_ptr:*i32 | num_seqs:i32 | k_scale_cache_ptr v_scale_cache_ptr:none"
    " | stride_ks_blk stride_ks_slot stride_ks_head stride_vs_blk stride_vs_slot stride_vs_head:none")
_UA_CONST = dict(num_query_heads=32, num_queries_per_kv=4, BLOCK_SIZE=16, HEAD_SIZE=128, HEAD_SIZE_PADDED=128,
                 USE_ALIBI_SLOPES=False, USE_ALIBI_SQRT=False, USE_QQ_BIAS=False, USE_SOFTCAP=False, USE_SINKS=False,
                 SLIDING_WINDOW=0, USE_CAUSAL=True, USE_PER_SEQ_CAUSAL=False, USE_MM_PREFIX=False, MAX_MM_RANGES=0,
                 R_SWA_WINDOW=0, USE_R_SWA=False, stride_k_cache_3=1, stride_v_cache_3=1, BLOCK_Q=4, BLOCK_M=16,
                 USE_FP8=False, KV_QUANT_MODE=0, Q_IS_FP8=False, CHUNK_LOOKBACK=-1, CHUNK_SIZE=-1, USE_TD=False,
                 USE_TD_QO=False, MM_PREFIX_CLAMP_SW=False)

V1_KERNELS: tuple[KernelCase, ...] = (
    # ---------------------------------------------------------------- V1 drafter (vllm/v1/spec_decode/utils.py)
    KernelCase(  # chain steps: utils.py eagle_step_update_slot_mapping_and_metadata, from llm_base_proposer.py:786
        "eagle_step_slot_mapping_metadata_kernel", "vllm.v1.spec_decode.utils:eagle_step_slot_mapping_metadata_kernel",
        sig("positions_ptr:*i64 | block_table_ptr:*i32 | block_table_stride:i32 | seq_lens_ptr:*i32"
            " | out_clamped_positions_ptr out_slot_mapping_ptr:*i64 | batch_size:i32"),
        dict(block_size=16, max_model_len=4096, n_blocks_per_req=256, PAD_ID=-1),
        f"{_SD}/utils.py:121 eagle_step_update_slot_mapping_and_metadata (from llm_base_proposer.py:786)"),
    KernelCase(  # first pass, padded batch: llm_base_proposer.py:1127 prepare_inputs_padded
        "eagle_prepare_inputs_padded_kernel", "vllm.v1.spec_decode.utils:eagle_prepare_inputs_padded_kernel",
        sig("cu_num_draft_tokens_ptr valid_sampled_tokens_count_ptr query_start_loc_gpu_ptr"
            " token_indices_to_sample_ptr num_rejected_tokens_gpu_ptr:*i32 | num_reqs:i32"),
        {}, f"{_SD}/llm_base_proposer.py:1127 prepare_inputs_padded"),
    KernelCase(  # llm_base_proposer.py:1087 prepare_next_token_ids_padded
        "eagle_prepare_next_token_padded_kernel", "vllm.v1.spec_decode.utils:eagle_prepare_next_token_padded_kernel",
        sig("sampled_token_ids_ptr:*i32 | discard_request_mask_ptr:*i1 | backup_next_token_ids_ptr next_token_ids_ptr"
            " valid_sampled_tokens_count_ptr:*i32 | vocab_size num_sampled_tokens_per_req num_reqs"
            " stride_sampled_token_ids:i32"),
        dict(BLOCK_SIZE_TOKENS=4), f"{_SD}/llm_base_proposer.py:1087 prepare_next_token_ids_padded"),
    KernelCase(  # llm_base_proposer.py:901 set_inputs_first_pass (parallel drafting / padded slots)
        "copy_and_expand_eagle_inputs_kernel", "vllm.v1.spec_decode.utils:copy_and_expand_eagle_inputs_kernel",
        sig("target_token_ids_ptr:*i32 | target_positions_ptr:*i64 | next_token_ids_ptr out_input_ids_ptr:*i32"
            " | out_positions_ptr:*i64 | out_is_rejected_token_mask_ptr out_is_masked_token_mask_ptr:*i1"
            " | out_new_token_indices_ptr out_hidden_state_mapping_ptr query_start_loc_ptr query_end_loc_ptr:*i32"
            " | padding_token_id parallel_drafting_token_id total_input_tokens num_padding_slots_per_request:i32"
            " | shift_input_ids:i1"),
        dict(BLOCK_SIZE_TOKENS=8), f"{_SD}/llm_base_proposer.py:901 set_inputs_first_pass"),
    KernelCase(  # dflash.py:140 DFlashProposer.set_inputs_first_pass
        "copy_and_expand_dflash_inputs_kernel", "vllm.v1.spec_decode.utils:copy_and_expand_dflash_inputs_kernel",
        sig("next_token_ids_ptr:*i32 | target_positions_ptr:*i64 | out_input_ids_ptr:*i32"
            " | out_context_positions_ptr out_query_positions_ptr out_context_slot_mapping_ptr"
            " out_query_slot_mapping_ptr:*i64 | out_token_indices_ptr block_table_ptr:*i32 | block_table_stride:i32"
            " | query_start_loc_ptr num_rejected_tokens_ptr:*i32 | parallel_drafting_token_id block_size"
            " num_query_per_req num_speculative_tokens total_input_tokens:i32"),
        dict(BLOCK_SIZE=32, HAS_NUM_REJECTED=True), f"{_SD}/dflash.py:140 DFlashProposer.set_inputs_first_pass"),
    # ---------------------------------------------------------------- rejection sampler (rejection_sampler.py)
    KernelCase(  # rejection_sampler.py:458 rejection_sample, all requests greedy (is_greedy None)
        "rejection_greedy_sample_kernel[all-greedy]", "vllm.v1.sample.rejection_sampler:rejection_greedy_sample_kernel",
        sig("output_token_ids_ptr cu_num_draft_tokens_ptr draft_token_ids_ptr:*i32 | target_argmax_ptr:*i64"
            " | bonus_token_ids_ptr:*i32 | is_greedy_ptr:none | max_spec_len:i32"
            " | uniform_probs_ptr synthetic_conditional_rates_ptr:none"),
        dict(SYNTHETIC_MODE=False), f"{_RS}:458 rejection_sample (all greedy)"),
    KernelCase(  # rejection_sampler.py:458 rejection_sample, mixed greedy/random batch
        "rejection_greedy_sample_kernel[mixed]", "vllm.v1.sample.rejection_sampler:rejection_greedy_sample_kernel",
        sig("output_token_ids_ptr cu_num_draft_tokens_ptr draft_token_ids_ptr:*i32 | target_argmax_ptr:*i64"
            " | bonus_token_ids_ptr:*i32 | is_greedy_ptr:*i1 | max_spec_len:i32 | uniform_probs_ptr:*fp64"
            " | synthetic_conditional_rates_ptr:none"),
        dict(SYNTHETIC_MODE=False), f"{_RS}:458 rejection_sample (mixed batch)"),
    KernelCase(  # rejection_sampler.py:493 rejection_sample (random requests), draft probs present
        "rejection_random_sample_kernel", "vllm.v1.sample.rejection_sampler:rejection_random_sample_kernel",
        sig("output_token_ids_ptr cu_num_draft_tokens_ptr draft_token_ids_ptr:*i32"
            " | draft_probs_ptr target_probs_ptr:*fp32 | bonus_token_ids_ptr recovered_token_ids_ptr:*i32"
            " | uniform_probs_ptr:*fp64 | is_greedy_ptr:*i1 | max_spec_len vocab_size:i32"
            " | synthetic_conditional_rates_ptr:none"),
        dict(NO_DRAFT_PROBS=False, SYNTHETIC_MODE=False), f"{_RS}:493 rejection_sample (random requests)"),
    KernelCase(  # rejection_sampler.py:599 expand_batch_to_tokens (temperature, from apply_sampling_constraints)
        "expand_kernel", "vllm.v1.sample.rejection_sampler:expand_kernel",
        sig("output_ptr input_ptr:*fp32 | cu_num_tokens_ptr:*i32 | replace_from replace_to:i32"),
        dict(MAX_NUM_TOKENS=128), f"{_RS}:599 expand_batch_to_tokens"),
    *(KernelCase(  # rejection_sampler.py:700 sample_recovered_tokens; --use-fp64-gumbel: fp64 noise (inv_q)
        f"sample_recovered_tokens_kernel{'[fp64-gumbel]' if fp64 else ''}",
        "vllm.v1.sample.rejection_sampler:sample_recovered_tokens_kernel",
        sig("output_token_ids_ptr cu_num_draft_tokens_ptr draft_token_ids_ptr:*i32"
            f" | draft_probs_ptr target_probs_ptr:*fp32 | inv_q_ptr:{'*fp64' if fp64 else '*fp32'} | vocab_size:i32"),
        dict(BLOCK_SIZE=8192, NO_DRAFT_PROBS=False, USE_FP64_GUMBEL=fp64),
        f"{_RS}:700 sample_recovered_tokens{_FP64_GUMBEL if fp64 else ''}",
        engine=("use_fp64_gumbel",) if fp64 else ()) for fp64 in (False, True)),
    # ---------------------------------------------------------------- TRITON_ATTN (the backend VLLM_PLATFORM=musa uses)
    KernelCase(  # triton_unified_attention.py:1090 unified_attention, 2D path (prefill, verify, drafter first pass)
        "kernel_unified_attention[2d]", "vllm.v1.attention.ops.triton_unified_attention:kernel_unified_attention",
        {**_UA_COMMON, **sig("segm_output_ptr segm_max_ptr segm_expsum_ptr:none")},
        {**_UA_CONST, "TILE_SIZE": 32, "NUM_SEGMENTS_PER_SEQ": 1, "IS_3D": False},
        f"{_UA}:1090 unified_attention (2D: max_seqlen_q > 1)",
        changes={"0.33.0": Change(launched_at=f"{_UA}:1131 unified_attention (2D: max_seqlen_q > 1; vLLM 0.33.0)")}),
    KernelCase(  # same launch, 2D path with non-causal attention (DFlash draft blocks)
        "kernel_unified_attention[2d-noncausal]",
        "vllm.v1.attention.ops.triton_unified_attention:kernel_unified_attention",
        {**_UA_COMMON, **sig("segm_output_ptr segm_max_ptr segm_expsum_ptr:none")},
        {**_UA_CONST, "TILE_SIZE": 32, "NUM_SEGMENTS_PER_SEQ": 1, "IS_3D": False, "USE_CAUSAL": False},
        f"{_UA}:1090 unified_attention (2D, causal=False: DFlash draft)",
        changes={"0.33.0": Change(launched_at=f"{_UA}:1131 unified_attention (2D, causal=False: DFlash draft; vLLM 0.33.0)")}),
    KernelCase(  # same launch, 3D split-softmax decode path
        "kernel_unified_attention[3d]", "vllm.v1.attention.ops.triton_unified_attention:kernel_unified_attention",
        {**_UA_COMMON, **sig("segm_output_ptr segm_max_ptr segm_expsum_ptr:*fp32")},
        {**_UA_CONST, "TILE_SIZE": 16, "NUM_SEGMENTS_PER_SEQ": 16, "IS_3D": True},
        f"{_UA}:1090 unified_attention (3D: decode, few sequences)",
        changes={"0.33.0": Change(launched_at=f"{_UA}:1131 unified_attention (3D: decode, few sequences; vLLM 0.33.0)")}),
    KernelCase(  # triton_unified_attention.py:1170, after the 3D kernel
        "reduce_segments", "vllm.v1.attention.ops.triton_unified_attention:reduce_segments",
        sig("output_ptr:*bf16 | segm_output_ptr segm_max_ptr segm_expsum_ptr:*fp32 | seq_lens_ptr:*i32 | num_seqs:i32"
            " | out_scale_inv:fp32 | output_stride_0 output_stride_1 block_table_stride:i64"
            " | query_start_len_ptr:*i32"),
        dict(num_query_heads=32, TILE_SIZE=16, HEAD_SIZE=128, HEAD_SIZE_PADDED=128, BLOCK_Q=4,
             NUM_SEGMENTS_PER_SEQ=16, USE_FP8=False),
        f"{_UA}:1170 unified_attention (3D reduction)",
        changes={"0.33.0": Change(launched_at=f"{_UA}:1211 unified_attention (3D reduction; vLLM 0.33.0)")}),
    KernelCase(  # triton_reshape_and_cache_flash.py:434, from TritonAttentionImpl.do_kv_cache_update
        "reshape_and_cache_kernel_flash",
        "vllm.v1.attention.ops.triton_reshape_and_cache_flash:reshape_and_cache_kernel_flash",
        sig("key_ptr value_ptr key_cache_ptr value_cache_ptr:*bf16 | slot_mapping_ptr:*i64 | k_scale v_scale:*fp32"
            " | key_stride value_stride block_stride head_stride dim_stride_k dim_stride_v page_stride:i64"),
        dict(num_heads=8, head_size=128, block_size=16, x=1, USE_HEAD_MAJOR_LAYOUT=False, FP8_KV_CACHE=False,
             TILE_SIZE=1024),
        "vllm/v1/attention/ops/triton_reshape_and_cache_flash.py:434 triton_reshape_and_cache_flash "
        "(TritonAttentionImpl.do_kv_cache_update, triton_attn.py:825)",
        options=dict(num_warps=16, num_stages=10),
        changes={"0.33.0": Change(  # 0: V not interleaved
            constexprs=dict(INTERLEAVED_V_PACK_FACTOR=0),
            launched_at="vllm/v1/attention/ops/triton_reshape_and_cache_flash.py:455 triton_reshape_and_cache_flash "
                        "(TritonAttentionImpl.do_kv_cache_update, triton_attn.py:834; vLLM 0.33.0)")}),
)

Pick = Callable[[Mapping[str, KernelCase]], KernelCase]
"""``version_gate.pick``: a row's launch on the installed vLLM, among the launches its versions state."""

VLLM_KERNELS: tuple[KernelCase, ...] = V1_KERNELS + MRV2_KERNELS
"""vLLM's kernels on the MUSA serving path: the V1 runner's (above) and Model Runner V2's (``triton_table_mrv2``)."""

OUR_KERNELS: tuple[KernelCase, ...] = (
    KernelCase(
        "ours/eagle_prepare_next_token_padded_kernel",
        "portable_spec.kernels.eagle_prepare_next_token:eagle_prepare_next_token_padded_kernel",
        V1_KERNELS[2].signature, V1_KERNELS[2].constexprs,
        "bound over vLLM's on MUSA (portable_spec/kernels/registry.py)", owner="portable_spec"),
)

KERNELS: tuple[KernelCase, ...] = VLLM_KERNELS + OUR_KERNELS
"""The serving path's kernels. Callers may check more (the CLI adds the synthetic harness's, ``case_sources``)."""


def kernel_cases(sources: tuple[str, ...] | list[str] = (), pick: Pick | None = None) -> tuple[KernelCase, ...]:
    """``KERNELS`` plus the cases each ``"module:attr"`` source names (a tuple of ``KernelCase``), in order, each as
    the installed vLLM launches it (``KernelCase.at``; ``pick`` defaults to ``versions.pick``), without the rows of
    kernels newer than the installed vLLM; a key named twice raises."""
    import importlib

    rows = list(KERNELS)
    for source in sources:
        module, _, attr = source.partition(":")
        rows.extend(getattr(importlib.import_module(module), attr))
    cases = resolved(rows, pick)
    keys = [c.key for c in cases]
    if len(set(keys)) != len(keys):
        raise ValueError(f"kernel keys named twice: {sorted({k for k in keys if keys.count(k) > 1})}")
    return tuple(cases)
