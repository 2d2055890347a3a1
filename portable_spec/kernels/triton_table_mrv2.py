"""Every Triton kernel vLLM 0.26.0's and 0.28.0's Model Runner V2 (MRV2, ``vllm/v1/worker/gpu/``) launches when it
serves a dense model, plainly or with EAGLE, EAGLE-3, DFlash, DFlash2 or multi-module MTP speculation: input
preparation, block tables, the sampler with every sampling parameter (penalties, logit bias, bad words, min-p,
top-k/top-p, logprobs, structured output, thinking budget, sampling mask), the speculators' input kernels and rejection
sampling, one row per launch variant.

Types and values are what MRV2's own buffers hold (``states.py``, ``input_batch.py``, ``block_table.py``,
``sample/*.py``: token ids, query starts, sequence lengths and request indices int32; positions, last sampled and
draft tokens, slot mappings int64; logits in the model dtype, bf16) at the bench's shapes, the zoo's tiny Llama-style
pairs: vocab 1024, hidden 1024, KV block 16, max_num_seqs 256, K = 3 draft tokens (a verify row of 1 + K = 4
logits), 5 logprobs. A constexpr that follows from those is computed as vLLM computes it (e.g. ``BLOCK_SIZE =
next_power_of_2(K + 1)``). ``launched_at`` names the launch line in vLLM 0.26.0 and the MRV2 caller.

Each row states vLLM 0.26.0's launch; where 0.28.0 or 0.33.0 launches the kernel with other parameters (or from
another module), the row's ``changes`` state what that version changed, read from its kernel and its launch site
(``triton_case.Change``), and ``kernel_cases`` applies them up to the installed vLLM. A kernel new in 0.28.0 (the
sampling-mask output, the thinking budget, the DFlash2 selector, the multi-module MTP speculator) has a row from
``since=_V28`` on, stating 0.28.0's launch and line; below it the row is absent, as is an exclusion named in
``EXCLUDED_SINCE``.

Not here, on purpose: kernels only a non-dense model or another parallelism launches (Mamba/hybrid state, multimodal
M-RoPE and input embeddings, decode context parallelism), listed with their reason in ``EXCLUDED``
(``tests/test_triton_table_span.py`` walks MRV2's source on each vLLM up to ``COVERED_THROUGH`` and fails on any other
launched kernel without a row), and MRV2's ``@triton.jit`` helpers, checked
through their callers (``triton_rules`` follows them; the compile layer compiles them inlined).
"""

from __future__ import annotations

from portable_spec.kernels.triton_case import Change, KernelCase, sig

_G = "vllm.v1.worker.gpu"
_F = "vllm/v1/worker/gpu"
_MR = f"{_F}/model_runner.py"
_K = 3  # draft tokens per request in the rows below
_VOCAB = 1024
_V28 = "0.28.0"  # the kernels new in this vLLM: their rows state its launch (``since``)
_TOP_K = 8  # DFlash2's selector_top_k (the draft's dflash_config; a checkpoint's value, 8 here)


def _pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def _row(key: str, module: str, kernel: str, spec: str, constexprs: dict, where: str, **kw) -> KernelCase:
    """A row for ``kernel`` of ``vllm.v1.worker.gpu.<module>`` (key ``mrv2/<module>.<kernel>[variant]``)."""
    return KernelCase(f"mrv2/{module}.{key}", f"{_G}.{module}:{kernel}", sig(spec), constexprs, where, **kw)


def _target_dependent_ar(kernel: str, line: int, launcher: str, added: str = "") -> Change:
    """0.33.0 moved EAGLE's speculator (``spec_decode/autoregressive/``) to ``spec_decode/target_dependent_ar/``; its
    decode kernels also read the positions the draft samples from (int64, ``sample_src_positions``)."""
    return Change(added, ref=f"{_G}.spec_decode.target_dependent_ar.speculator:{kernel}",
                  launched_at=f"{_F}/spec_decode/target_dependent_ar/speculator.py:{line} {launcher} (vLLM 0.33.0)")


_LOGITS = "logits_ptr:*bf16 | logits_stride:i32"
_REJECT_STATS = (" | target_local_max_ptr:*fp32 | target_local_max_stride:i32 | target_local_sumexp_ptr:*fp32"
                 " | target_local_sumexp_stride:i32")
_DRAFT_STATS = (" | draft_local_max_ptr:*fp32 | draft_local_max_stride:i32 | draft_local_sumexp_ptr:*fp32"
                " | draft_local_sumexp_stride:i32")


def _draft_logits(present: bool) -> str:
    return f" | draft_logits_ptr:{'*fp32' if present else 'none'} | draft_logits_stride_0 draft_logits_stride_1:i32"


def _gumbel(key: str, processed: str, col: str, per_token_col: bool, apply_temperature: bool, where: str):
    """0.28.0 replaced the processed-logits output by a logits cache of the model's head dtype (bf16 here: the
    drafts' ``draft_logits``); 0.33.0 gave it two strides and a source (the sampled logits) and ``IS_DRAFTING``."""
    cache = "none" if processed == "none" else "*bf16"
    return _row(f"_gumbel_sample_kernel[{key}]", "sample.gumbel", "_gumbel_sample_kernel",
                "local_argmax_ptr:*i64 | local_argmax_stride:i32 | local_max_ptr:*fp32 | local_max_stride:i32"
                f" | processed_logits_ptr:{processed} | processed_logits_stride:i32 | processed_logits_col_ptr:{col}"
                f" | {_LOGITS} | expanded_idx_mapping_ptr:*i32 | seeds_ptr pos_ptr:*i64 | temp_ptr:*fp32"
                " | vocab_size:i32",
                dict(BLOCK_SIZE=1024, APPLY_TEMPERATURE=apply_temperature, USE_FP64=False,
                     PER_TOKEN_COL=per_token_col),
                f"{_F}/sample/gumbel.py:241 gumbel_sample ({where})",
                changes={"0.28.0": Change(f"logits_cache_ptr:{cache} | logits_cache_stride:i32"
                                          f" | logits_cache_col_ptr:{col}",
                                          ("processed_logits_ptr", "processed_logits_stride",
                                           "processed_logits_col_ptr")),
                         "0.33.0": Change(f"logits_cache_stride_0 logits_cache_stride_1:i32"
                                          f" | logits_cache_source_ptr:{cache} | logits_cache_source_stride:i32",
                                          ("logits_cache_stride",), dict(IS_DRAFTING=processed != "none"))})


def _stats(key: str, has_draft_logits: bool) -> KernelCase:
    return _row(f"_compute_local_logits_stats_kernel[{key}]", "spec_decode.rejection_sampler_utils",
                "_compute_local_logits_stats_kernel",
                "target_local_argmax_ptr:*i64 | target_local_argmax_stride:i32" + _REJECT_STATS + _DRAFT_STATS
                + " | target_logits_ptr:*bf16 | target_logits_stride:i32" + _draft_logits(has_draft_logits)
                + " | expanded_idx_mapping_ptr expanded_local_pos_ptr:*i32 | temp_ptr:*fp32"
                " | vocab_size num_speculative_steps:i32",
                dict(BLOCK_SIZE=8192, HAS_DRAFT_LOGITS=has_draft_logits),
                f"{_F}/spec_decode/rejection_sampler_utils.py:923 rejection_sample "
                "(spec_decode/rejection_sampler.py:123 RejectionSampler.__call__)", changes=_PER_LOGIT)


def _rejection(key: str, has_draft_logits: bool, block: bool) -> KernelCase:
    extra = "*fp32" if block else "none"
    return _row(f"_rejection_kernel[{key}]", "spec_decode.rejection_sampler_utils", "_rejection_kernel",
                "sampled_ptr:*i64 | sampled_stride:i32 | rejected_steps_ptr:*i32"
                " | target_rejected_logsumexp_ptr draft_rejected_logsumexp_ptr:*fp32"
                " | target_logits_ptr:*bf16 | target_logits_stride:i32"
                " | target_local_argmax_ptr:*i64 | target_local_argmax_stride:i32" + _REJECT_STATS
                + " | draft_sampled_ptr:*i32" + _draft_logits(has_draft_logits) + _DRAFT_STATS
                + " | cu_num_logits_ptr idx_mapping_ptr:*i32 | temp_ptr:*fp32 | seed_ptr pos_ptr:*i64"
                f" | synthetic_conditional_rates_ptr:none | cumulative_log_p_ptr:{extra}"
                f" | local_residual_mass_ptr:{extra if has_draft_logits else 'none'}"
                " | local_residual_mass_stride vocab_num_blocks:i32",
                dict(PADDED_VOCAB_NUM_BLOCKS=1, HAS_DRAFT_LOGITS=has_draft_logits, SYNTHETIC_MODE=False,
                     USE_BLOCK_VERIFICATION=block),
                f"{_F}/spec_decode/rejection_sampler_utils.py:1032 rejection_sample "
                "(spec_decode/rejection_sampler.py:123 RejectionSampler.__call__)", options=dict(num_warps=1),
                # 0.33.0's FLy acceptance, off unless fly_window_size > 0: no entropy tensor, window 0
                changes={"0.33.0": Change("fly_entropy_ptr:none | fly_entropy_threshold:fp32",
                                          constexprs=dict(FLY_WINDOW_SIZE=0))})


def _resample(key: str, has_draft_logits: bool, block: bool) -> KernelCase:
    return _row(f"_resample_kernel[{key}]", "spec_decode.rejection_sampler_utils", "_resample_kernel",
                "resampled_local_argmax_ptr:*i64 | resampled_local_argmax_stride:i32"
                " | resampled_local_max_ptr:*fp32 | resampled_local_max_stride:i32"
                " | target_logits_ptr:*bf16 | target_logits_stride:i32 | target_rejected_logsumexp_ptr:*fp32"
                + _draft_logits(has_draft_logits) + " | draft_rejected_logsumexp_ptr:*fp32"
                " | rejected_step_ptr cu_num_logits_ptr expanded_idx_mapping_ptr draft_sampled_ptr:*i32"
                f" | temp_ptr:*fp32 | seed_ptr pos_ptr:*i64 | cumulative_log_p_ptr:{'*fp32' if block else 'none'}"
                " | vocab_size:i32",
                dict(BLOCK_SIZE=1024, HAS_DRAFT_LOGITS=has_draft_logits, USE_FP64=False,
                     USE_BLOCK_VERIFICATION=block),
                f"{_F}/spec_decode/rejection_sampler_utils.py:1083 rejection_sample "
                "(spec_decode/rejection_sampler.py:123 RejectionSampler.__call__)",
                # 0.33.0's watermarking, off without contexts: None tensors, zero key and stride, width 1
                changes={"0.33.0": Change("contexts_ptr:none | contexts_stride:i32 | watermarking_ptr"
                                          " watermarking_skip_mask_ptr:none | watermark_key_0 watermark_key_1:i32",
                                          constexprs=dict(CONTEXT_WIDTH=1, WATERMARK=False,
                                                          DEDUPLICATE_CONTEXTS=False))})


_PER_LOGIT = {"0.33.0": Change("num_logits:i32", ("num_speculative_steps",))}
"""0.33.0's per-logit stats kernels bound their rows by the logit count instead of the draft steps."""

_APPLY_WRITE = ("write_indices_ptr write_starts_ptr:*i32 | write_contents_ptr:{content} | write_cu_lens_ptr:*i32"
                " | write_group_ids_ptr:{groups}")

MRV2_KERNELS: tuple[KernelCase, ...] = (
    # ---------------------------------------------------------------- staged writes (buffer_utils.py)
    _row("_apply_write_kernel[int32]", "buffer_utils", "_apply_write_kernel",
         "output_ptr:*i32 | output_stride:i32 | " + _APPLY_WRITE.format(content="*i32", groups="none"),
         dict(BLOCK_SIZE=1024, MULTI_GROUP=False),
         f"{_F}/buffer_utils.py:189 StagedWriteTensor.apply_write (block tables, token ids, lengths: "
         f"{_MR}:833 add_requests, :1166 execute_model)"),
    _row("_apply_write_kernel[fp32]", "buffer_utils", "_apply_write_kernel",
         "output_ptr:*fp32 | output_stride:i32 | " + _APPLY_WRITE.format(content="*fp32", groups="none"),
         dict(BLOCK_SIZE=1024, MULTI_GROUP=False),
         f"{_F}/buffer_utils.py:189 StagedWriteTensor.apply_write (logit bias values, "
         f"sample/logit_bias.py:115 from {_MR}:836)"),
    _row("_apply_write_kernel[multi-group]", "buffer_utils", "_apply_write_kernel",
         "output_ptr:*u64 | output_stride:*i64 | " + _APPLY_WRITE.format(content="*i32", groups="*i32"),
         dict(BLOCK_SIZE=1024, MULTI_GROUP=True),
         f"{_F}/buffer_utils.py:259 FusedStagedWriter.apply (block_table.py:129, more than one KV cache group)"),
    # ---------------------------------------------------------------- input preparation (input_batch.py)
    _row("_prepare_prefill_inputs_kernel", "input_batch", "_prepare_prefill_inputs_kernel",
         "input_ids_ptr next_prefill_tokens_ptr idx_mapping_ptr query_start_loc_ptr all_token_ids_ptr:*i32"
         " | all_token_ids_stride:i32 | prefill_lens_ptr num_computed_tokens_ptr:*i32",
         dict(BLOCK_SIZE=1024), f"{_F}/input_batch.py:232 prepare_prefill_inputs ({_MR}:953 prepare_inputs)",
         # 0.28.0 stores the next prefill tokens of each lookahead row: one row (states.py) for these speculators
         changes={"0.28.0": Change("next_prefill_tokens_stride num_lookahead:i32",
                                   constexprs=dict(LOOKAHEAD_BLOCK=_pow2(1)))}),
    _row("_prepare_pos_seq_lens_kernel", "input_batch", "_prepare_pos_seq_lens_kernel",
         "pos_ptr:*i64 | seq_lens_ptr idx_mapping_ptr query_start_loc_ptr num_computed_tokens_ptr:*i32"
         " | max_num_reqs:i32",
         dict(BLOCK_SIZE=1024), f"{_F}/input_batch.py:292 prepare_pos_seq_lens ({_MR}:964 prepare_inputs)"),
    *(_row(f"_combine_sampled_and_draft_tokens_kernel[{key}]", "input_batch",
           "_combine_sampled_and_draft_tokens_kernel",
           "input_ids_ptr idx_mapping_ptr:*i32 | last_sampled_tokens_ptr:*i64"
           " | query_start_loc_ptr seq_lens_ptr prefill_len_ptr:*i32 | draft_tokens_ptr:*i64"
           " | draft_tokens_stride:i32 | cu_num_logits_ptr:*i32 | logits_indices_ptr:*i64",
           dict(BLOCK_SIZE=_pow2(k + 1), NUM_NEW_SAMPLED_TOKENS=1),
           f"{_F}/input_batch.py:388 combine_sampled_and_draft_tokens ({_MR}:988 prepare_inputs, {what})")
      for key, k, what in (("decode", 0, "no speculation"), (f"spec-k{_K}", _K, f"K = {_K}"))),
    _row("_get_num_sampled_and_rejected_kernel", "input_batch", "_get_num_sampled_and_rejected_kernel",
         "num_sampled_ptr num_rejected_ptr seq_lens_ptr cu_num_logits_ptr idx_mapping_ptr prefill_len_ptr:*i32",
         {}, f"{_F}/input_batch.py:447 get_num_sampled_and_rejected (sample/sampler.py:124 Sampler.__call__, "
             "spec_decode/rejection_sampler.py:148 RejectionSampler.__call__)"),
    _row("_post_update_kernel", "input_batch", "_post_update_kernel",
         "idx_mapping_ptr num_computed_tokens_ptr:*i32 | last_sampled_tokens_ptr:*i64"
         " | output_bin_counts_ptr:*i32 | output_bin_counts_stride:i32 | sampled_tokens_ptr:*i64"
         " | sampled_tokens_stride:i32 | num_sampled_ptr num_rejected_ptr query_start_loc_ptr all_token_ids_ptr:*i32"
         " | all_token_ids_stride:i32 | total_len_ptr:*i32",
         {}, f"{_F}/input_batch.py:542 post_update ({_MR}:1133 postprocess_sampled, from :1489 sample_tokens)",
         options=dict(num_warps=1),
         # 0.33.0 also copies the step's draft tokens into the request state (int64, K per request)
         changes={"0.33.0": Change("draft_tokens_ptr draft_tokens_out_ptr:*i64 | num_draft_tokens:i32")}),
    _row("_post_update_num_computed_tokens_kernel", "input_batch", "_post_update_num_computed_tokens_kernel",
         "idx_mapping_ptr num_computed_tokens_ptr query_start_loc_ptr:*i32", {},
         f"{_F}/input_batch.py:585 post_update_num_computed_tokens ({_MR}:1583 postprocess_num_computed_tokens, "
         "pipeline-parallel ranks)"),
    _row("_expand_idx_mapping_kernel", "input_batch", "_expand_idx_mapping_kernel",
         "idx_mapping_ptr expanded_idx_mapping_ptr expanded_local_pos_ptr cu_num_logits_ptr:*i32",
         dict(BLOCK_SIZE=_pow2(_K + 1)),
         f"{_F}/input_batch.py:623 expand_idx_mapping ({_MR}:930 prepare_inputs, steps with drafts)"),
    # ---------------------------------------------------------------- block tables (block_table.py)
    _row("_gather_block_tables_kernel", "block_table", "_gather_block_tables_kernel",
         "batch_idx_to_req_idx:*i32 | src_block_table_ptrs dst_block_table_ptrs:*u64 | block_table_strides:*i64"
         " | num_blocks_ptr:*i32 | num_blocks_stride num_reqs:i32",
         dict(BLOCK_SIZE=1024), f"{_F}/block_table.py:149 BlockTables.gather_block_tables ({_MR}:1062 prepare_attn)",
         # 0.33.0 masks blocks behind a sliding window; a dense Llama has none (int32 tensors passed all the same)
         changes={"0.33.0": Change("num_computed_tokens_ptr sliding_window_reach_ptr block_sizes_ptr:*i32",
                                   constexprs=dict(MASK_SLIDING_WINDOW=False))}),
    _row("_compute_slot_mappings_kernel", "block_table", "_compute_slot_mappings_kernel",
         "max_num_tokens:i32 | idx_mapping query_start_loc:*i32 | pos:*i64 | block_table_ptrs:*u64"
         " | block_table_strides:*i64 | block_sizes:*i32 | slot_mappings_ptr:*i64 | slot_mappings_stride cp_rank:i32",
         dict(CP_SIZE=1, CP_INTERLEAVE=1, PAD_ID=-1, TRITON_BLOCK_SIZE=1024),
         f"{_F}/block_table.py:179 BlockTables.compute_slot_mappings ({_MR}:1068 prepare_attn; "
         "spec_decode/autoregressive/speculator.py:390 _multi_step_decode)",
         changes={"0.33.0": Change("slot_mapping_enabled dcp_sharded:*i1")}),  # per-group bool tensors
    # ---------------------------------------------------------------- sampler (sample/)
    _row("_bias_kernel", "sample.logit_bias", "_bias_kernel",
         f"{_LOGITS} | vocab_size:i32 | expanded_idx_mapping_ptr num_allowed_token_ids_ptr allowed_token_ids_ptr:*i32"
         " | allowed_token_ids_stride:i32 | num_logit_bias_ptr bias_token_ids_ptr:*i32 | bias_token_ids_stride:i32"
         " | bias_ptr:*fp32 | bias_stride:i32 | pos_ptr:*i64 | min_lens_ptr num_stop_token_ids_ptr"
         " stop_token_ids_ptr:*i32 | stop_token_ids_stride:i32",
         dict(BLOCK_SIZE=1024, LOGITS_BLOCK_SIZE=8192),
         f"{_F}/sample/logit_bias.py:266 apply_logit_bias (sample/sampler.py:171 apply_sampling_params)",
         changes={"0.33.0": Change("restore_when_all_masked_ptr:*i32",
                                   constexprs=dict(CHECK_ALL_MASKED_ROWS=False))}),  # no request asks for it
    _row("_penalties_kernel", "sample.penalties", "_penalties_kernel",
         f"{_LOGITS} | expanded_idx_mapping_ptr token_ids_ptr expanded_local_pos_ptr:*i32"
         " | repetition_penalty_ptr frequency_penalty_ptr presence_penalty_ptr:*fp32 | prompt_bin_mask_ptr:*i32"
         " | prompt_bin_mask_stride:i32 | output_bin_counts_ptr:*i32 | output_bin_counts_stride vocab_size:i32",
         dict(BLOCK_SIZE=8192),
         f"{_F}/sample/penalties.py:200 apply_penalties (sample/sampler.py:176 apply_sampling_params)"),
    _row("_bincount_kernel", "sample.penalties", "_bincount_kernel",
         "expanded_idx_mapping_ptr all_token_ids_ptr:*i32 | all_token_ids_stride:i32 | prompt_len_ptr"
         " prefill_len_ptr prompt_bin_mask_ptr:*i32 | prompt_bin_mask_stride:i32 | output_bin_counts_ptr:*i32"
         " | output_bin_counts_stride:i32",
         dict(BLOCK_SIZE=1024),
         f"{_F}/sample/penalties.py:286 bincount (PenaltiesState.apply_staged_writes, {_MR}:836 add_requests)"),
    _row("_bad_words_kernel", "sample.bad_words", "_bad_words_kernel",
         f"{_LOGITS} | expanded_idx_mapping_ptr bad_word_token_ids_ptr:*i32 | bad_word_token_ids_stride:i32"
         " | bad_word_offsets_ptr:*i32 | bad_word_offsets_stride:i32 | num_bad_words_ptr all_token_ids_ptr:*i32"
         " | all_token_ids_stride:i32 | prompt_len_ptr total_len_ptr input_ids_ptr expanded_local_pos_ptr:*i32",
         {}, f"{_F}/sample/bad_words.py:179 apply_bad_words (sample/sampler.py:185 apply_sampling_params)"),
    _row("_temperature_kernel", "sample.gumbel", "_temperature_kernel",
         f"{_LOGITS} | expanded_idx_mapping_ptr:*i32 | temperature_ptr:*fp32 | vocab_size:i32",
         dict(BLOCK_SIZE=8192),
         f"{_F}/sample/gumbel.py:51 apply_temperature (sample/states.py:81, sample/sampler.py:194)"),
    _row("_min_p_kernel", "sample.min_p", "_min_p_kernel",
         f"{_LOGITS} | expanded_idx_mapping_ptr:*i32 | min_p_ptr:*fp32 | vocab_size:i32", dict(BLOCK_SIZE=1024),
         f"{_F}/sample/min_p.py:53 apply_min_p (sample/states.py:92, sample/sampler.py:199)"),
    *(KernelCase(  # top-k / top-p: vLLM's V1 sampler op, which MRV2 calls for batches of 8 rows or more
        f"mrv2/sample.ops.topk_topp_triton._topk_topp_kernel[{key}]",
        "vllm.v1.sample.ops.topk_topp_triton:_topk_topp_kernel",
        sig(f"LOGITS:*bf16 | LOGITS_STRIDE_0:i32 | BUFFER PERCENTILE_TO_STD_TABLE NORMAL_CDF_TO_SIGMA_TABLE:*fp32"
            f" | K:{'*i32' if top_k else '*bf16'} | P:{'*fp32' if top_p else '*bf16'} | BATCH_SIZE:i32"),
        dict(VOCAB_SIZE=_VOCAB, MASK_VALUE=float("-inf"), BLOCK_SIZE=8192, BLOCK_SIZE_TRUNC=4096, TOPK_ENABLED=top_k,
             TOPP_ENABLED=top_p),
        "vllm/v1/sample/ops/topk_topp_triton.py:947 apply_top_k_top_p_triton (vllm/v1/sample/ops/"
        f"topk_topp_sampler.py:357 apply_top_k_top_p, from {_F}/sample/sampler.py:248 Sampler.sample; a disabled "
        "bound is passed the logits as a dummy pointer)",
        # 0.33.0: 8 warps on a GPU; the split top-p pass only where current_platform.is_cuda_alike() (not MUSA)
        changes={"0.33.0": Change(constexprs=dict(SPLIT_COVERS_PONLY=False), options=dict(num_warps=8))})
      for key, top_k, top_p in (("top-k+top-p", True, True), ("top-k", True, False), ("top-p", False, True))),
    _gumbel("target", "none", "none", False, False, "sample/sampler.py:249 Sampler.sample"),
    _gumbel("draft", "*fp32", "*i64", False, True,
            "spec_decode/speculator.py:284 sample_draft, draft_sample_method='probabilistic', EAGLE"),
    _gumbel("draft-per-token", "*fp32", "*i32", True, True,
            "spec_decode/speculator.py:284 sample_draft, draft_sample_method='probabilistic', DFlash"),
    _row("_topk_log_softmax_kernel", "sample.logprob", "_topk_log_softmax_kernel",
         "output_ptr:*fp32 | logits_ptr:*bf16 | logits_stride:i32 | topk_ids_ptr:*i64 | topk vocab_size:i32",
         dict(BLOCK_SIZE=1024, TOPK_BLOCK_SIZE=_pow2(1 + 5)),
         f"{_F}/sample/logprob.py:96 compute_token_logprobs (compute_topk_scores, sample/sampler.py:108)",
         changes={"0.33.0": Change("topk_ids_stride:i32")}),
    _row("_ranks_kernel", "sample.logprob", "_ranks_kernel",
         "output_ptr:*i64 | logits_ptr:*bf16 | logits_stride:i32 | token_ids_ptr:*i64 | vocab_size:i32",
         dict(BLOCK_SIZE=8192), f"{_F}/sample/logprob.py:172 compute_topk_scores (sample/sampler.py:108)"),
    _row("_fill_logprob_token_ids_kernel", "sample.logprob", "_fill_logprob_token_ids_kernel",
         "out_token_ids_ptr:*i64 | out_token_ids_stride:i32 | out_valid_mask_ptr:*i1 | out_valid_mask_stride:i32"
         " | sampled_token_ids_ptr:*i64 | topk_indices_ptr:*i32 | topk_indices_stride:i32"
         " | expanded_idx_mapping_ptr num_per_req_token_ids_ptr per_req_token_ids_ptr:*i32"
         " | per_req_token_ids_stride:i32",
         dict(NUM_TOPK=5, PADDED_COLS=_pow2(5)),
         f"{_F}/sample/logprob.py:150 compute_topk_scores (logprob_token_ids requested, sample/sampler.py:108)"),
    _row("_prompt_logprobs_token_ids_kernel", "sample.prompt_logprob", "_prompt_logprobs_token_ids_kernel",
         "prompt_logprobs_token_ids_ptr:*i64 | query_start_loc_ptr idx_mapping_ptr num_computed_tokens_ptr"
         " all_token_ids_ptr:*i32 | all_token_ids_stride:i32",
         dict(BLOCK_SIZE=1024),
         f"{_F}/sample/prompt_logprob.py:195 get_prompt_logprobs_token_ids (prompt_logprob.py:74, {_MR}:297)"),
    _row("_apply_grammar_bitmask_kernel", "structured_outputs", "_apply_grammar_bitmask_kernel",
         f"{_LOGITS} | logits_indices_ptr bitmask_ptr:*i32 | bitmask_stride vocab_size:i32", dict(BLOCK_SIZE=8192),
         f"{_F}/structured_outputs.py:68 StructuredOutputsWorker.apply_grammar_bitmask ({_MR}:1096 sample)",
         # 0.28.0: one mask row per decode query position (mask_stride = decode_query_len = K + 1)
         changes={"0.28.0": Change("cu_num_logits_ptr:*i32", constexprs=dict(MASK_STRIDE=_K + 1))}),
    _row("_num_nans_kernel", "metrics.logits", "_num_nans_kernel",
         f"{_LOGITS} | num_nans_ptr:*i32 | vocab_size:i32", dict(BLOCK_SIZE=8192),
         f"{_F}/metrics/logits.py:35 get_num_nans (VLLM_COMPUTE_NANS_IN_LOGITS=1: sample/sampler.py:84, "
         "spec_decode/rejection_sampler.py:111)"),
    # ---------------------------------------------------------------- EAGLE / EAGLE-3 speculator (autoregressive/)
    _row("_prepare_prefill_inputs_kernel", "spec_decode.autoregressive.speculator", "_prepare_prefill_inputs_kernel",
         "last_token_indices_ptr draft_current_step_ptr:*i64 | draft_input_ids_ptr:*i32 | draft_positions_ptr:*i64"
         " | draft_query_start_loc_ptr draft_seq_lens_ptr target_input_ids_ptr:*i32 | target_positions_ptr:*i64"
         " | idx_mapping_ptr:*i32 | last_sampled_ptr:*i64 | next_prefill_tokens_ptr num_sampled_ptr num_rejected_ptr"
         " query_start_loc_ptr seq_lens_ptr:*i32 | max_num_reqs:i32",
         dict(BLOCK_SIZE=1024),
         f"{_F}/spec_decode/autoregressive/speculator.py:571 prepare_prefill_inputs (speculator.py:187 propose)",
         changes={"0.33.0": _target_dependent_ar("_prepare_prefill_inputs_kernel", 785, "prepare_prefill_inputs")}),
    _row("_prepare_decode_inputs_kernel", "spec_decode.autoregressive.speculator", "_prepare_decode_inputs_kernel",
         "draft_tokens_ptr:*i64 | draft_tokens_stride:i32 | target_seq_lens_ptr num_rejected_ptr input_ids_ptr:*i32"
         " | positions_ptr:*i64 | query_start_loc_ptr seq_lens_ptr:*i32 | max_model_len max_num_reqs:i32",
         dict(BLOCK_SIZE=1024, ADVANCE_DRAFT_POSITIONS=True),
         f"{_F}/spec_decode/autoregressive/speculator.py:654 prepare_decode_inputs (speculator.py:243 propose)",
         changes={"0.33.0": _target_dependent_ar("_prepare_decode_inputs_kernel", 873, "prepare_decode_inputs",
                                                 "sample_src_positions_ptr:*i64")}),
    _row("_update_draft_inputs_kernel", "spec_decode.autoregressive.speculator", "_update_draft_inputs_kernel",
         "output_draft_tokens_ptr:*i64 | output_draft_tokens_stride:i32 | next_input_hidden_states_ptr:*bf16"
         " | next_input_hidden_states_stride:i32 | input_ids_ptr:*i32 | positions_ptr:*i64 | seq_lens_ptr:*i32"
         " | draft_tokens_ptr current_draft_step_ptr:*i64 | hidden_states_ptr:*bf16"
         " | hidden_states_stride hidden_size max_model_len num_speculative_steps:i32",
         dict(BLOCK_SIZE=1024, ADVANCE_DRAFT_POSITIONS=True),
         f"{_F}/spec_decode/autoregressive/speculator.py:750 update_draft_inputs (speculator.py:457 "
         "_generate_draft, captured in the draft decode graphs)",
         changes={"0.33.0": _target_dependent_ar("_update_draft_inputs_kernel", 976, "update_draft_inputs",
                                                 "sample_src_positions_ptr:*i64")}),
    # ---------------------------------------------------------------- DFlash speculator (dflash/)
    _row("_prepare_dflash_inputs_kernel", "spec_decode.dflash.speculator", "_prepare_dflash_inputs_kernel",
         "out_input_ids_ptr:*i32 | out_query_positions_ptr:*i64 | out_query_start_loc_ptr out_seq_lens_ptr:*i32"
         " | out_query_slot_mapping_ptr out_context_positions_ptr out_context_slot_mapping_ptr out_sample_indices_ptr"
         " out_sample_pos_ptr:*i64 | out_sample_idx_mapping_ptr:*i32 | target_positions_ptr:*i64"
         " | target_query_start_loc_ptr idx_mapping_ptr:*i32 | last_sampled_ptr:*i64 | next_prefill_tokens_ptr"
         " num_sampled_ptr num_rejected_ptr block_table_ptr:*i32 | block_table_stride parallel_drafting_token_id"
         " block_size num_query_per_req num_speculative_steps max_num_reqs max_num_tokens max_model_len:i32",
         dict(SAMPLE_FROM_ANCHOR=False, PAD_SLOT_ID=-1, BLOCK_SIZE=_pow2(2 * (_K + 1))),
         f"{_F}/spec_decode/dflash/speculator.py:642 prepare_dflash_inputs (speculator.py:367 propose)",
         # 0.28.0 copies each request's temperature and seed for the draft sampler; 0.33.0 marks padding tokens
         # (bool) and places KV slots for context parallelism (none here: rank 0 of 1)
         changes={"0.28.0": Change("out_temperature_ptr:*fp32 | out_seeds_ptr:*i64 | temperature_ptr:*fp32"
                                   " | seeds_ptr:*i64"),
                  "0.33.0": Change("out_is_padding_ptr:*i1 | cp_rank:i32",
                                   constexprs=dict(CP_SIZE=1, CP_INTERLEAVE=1))}),
    # ---------------------------------------------------------------- rejection sampling (spec_decode/)
    _stats("greedy-draft", False),
    _stats("draft-logits", True),
    _rejection("greedy-draft", False, False),
    _rejection("draft-logits", True, False),
    _rejection("block-verification", True, True),
    _resample("greedy-draft", False, False),
    _resample("draft-logits", True, False),
    _resample("block-verification", True, True),
    _row("_insert_resampled_kernel", "spec_decode.rejection_sampler_utils", "_insert_resampled_kernel",
         "sampled_ptr:*i64 | sampled_stride:i32 | num_sampled_ptr:*i32 | resampled_local_argmax_ptr:*i64"
         " | resampled_local_argmax_stride:i32 | resampled_local_max_ptr:*fp32"
         " | resampled_local_max_stride resample_num_blocks:i32 | cu_num_logits_ptr expanded_idx_mapping_ptr:*i32"
         " | temp_ptr:*fp32",
         dict(PADDED_RESAMPLE_NUM_BLOCKS=1),
         f"{_F}/spec_decode/rejection_sampler_utils.py:1111 rejection_sample "
         "(spec_decode/rejection_sampler.py:123 RejectionSampler.__call__)"),
    _row("_compute_cumulative_log_p_kernel", "spec_decode.rejection_sampler_utils",
         "_compute_cumulative_log_p_kernel",
         "cumulative_log_p_ptr:*fp32 | target_logits_ptr:*bf16 | target_logits_stride:i32" + _REJECT_STATS
         + " | draft_sampled_ptr:*i32" + _draft_logits(True) + _DRAFT_STATS
         + " | cu_num_logits_ptr idx_mapping_ptr:*i32 | temp_ptr:*fp32 | vocab_num_blocks:i32",
         dict(PADDED_VOCAB_NUM_BLOCKS=1, HAS_DRAFT_LOGITS=True),
         f"{_F}/spec_decode/rejection_sampler_utils.py:959 rejection_sample (rejection_sample_method='block')",
         options=dict(num_warps=1)),
    _row("_compute_local_residual_mass_kernel", "spec_decode.rejection_sampler_utils",
         "_compute_local_residual_mass_kernel",
         "local_residual_mass_ptr:*fp32 | local_residual_mass_stride:i32 | cumulative_log_p_ptr:*fp32"
         " | target_logits_ptr:*bf16 | target_logits_stride:i32" + _REJECT_STATS + _draft_logits(True)
         + _DRAFT_STATS + " | expanded_idx_mapping_ptr expanded_local_pos_ptr:*i32 | temp_ptr:*fp32"
         " | vocab_size num_speculative_steps vocab_num_blocks:i32",
         dict(BLOCK_SIZE=8192, PADDED_VOCAB_NUM_BLOCKS=1),
         f"{_F}/spec_decode/rejection_sampler_utils.py:992 rejection_sample (rejection_sample_method='block', "
         "draft logits)",
         changes={"0.28.0": Change("draft_sampled_ptr:*i32"), **_PER_LOGIT}),
    _row("_flatten_sampled_kernel", "spec_decode.rejection_sampler", "_flatten_sampled_kernel",
         "flat_sampled_ptr sampled_ptr:*i64 | sampled_stride:i32 | num_sampled_ptr cu_num_logits_ptr:*i32", {},
         f"{_F}/spec_decode/rejection_sampler.py:85 RejectionSampler._get_logprobs_tensors (logprobs with drafts)",
         options=dict(num_warps=1)),
    # ---------------------------------------------------------------- new in vLLM 0.28.0
    # sampler (sample/): the finite-logit mask (model_config.return_sampling_mask) of the processed logits, fp32 once
    # any sampling parameter made the sampler copy them (sampler.py:196); 0.33.0 renamed it
    # _compact_sampling_mask_kernel and also writes the first max_num_kept ids per row, one row per request there
    _row("_pack_sampling_mask_kernel", "sample.output", "_pack_sampling_mask_kernel",
         "logits_ptr:*fp32 | logits_row_stride logits_col_stride:i32 | num_sampled_tokens_ptr:*i32"
         " | packed_mask_ptr:*u8 | packed_mask_row_stride:i32 | counts_ptr:*i32 | vocab_size:i32",
         dict(BLOCK_SIZE=8192),
         f"{_F}/sample/output.py:88 SamplingMaskTensors.from_logits (sample/sampler.py:163 Sampler.__call__, "
         "return_sampling_mask)", since=_V28,
         changes={"0.33.0": Change("cu_num_logits_ptr token_ids_ptr:*i32 | token_ids_row_stride max_num_kept:i32",
                                   constexprs=dict(ROWS_PER_REQUEST=1),
                                   ref=f"{_G}.sample.output:_compact_sampling_mask_kernel",
                                   launched_at=f"{_F}/sample/output.py:125 SamplingMaskTensors.from_logits "
                                               "(sample/sampler.py:205 Sampler.__call__) (vLLM 0.33.0)")}),
    # the thinking budget (a reasoning parser with start/end markers, a request's thinking_token_budget), on the
    # sampler's fp32 logits: Qwen3-style <think> / </think> markers, one token each, and a forced end string of two
    # tokens (reasoning_end_str), so the end-prefix loop (static_range(1, END_LEN)) is compiled
    _row("_update_committed_marker_cache_kernel", "sample.thinking_budget", "_update_committed_marker_cache_kernel",
         "req_ids_ptr thinking_token_budget_ptr all_token_ids_ptr:*i32 | all_token_ids_stride:i32"
         " | total_len_ptr cached_last_start_ptr cached_last_end_ptr cached_scan_pos_ptr"
         " reasoning_start_token_ids_ptr natural_reasoning_end_token_ids_ptr:*i32",
         dict(START_LEN=1, NATURAL_END_LEN=1, MAX_LEN=1, BLOCK=1024),
         f"{_F}/sample/thinking_budget.py:393 apply_thinking_budget (ThinkingBudgetState.apply, "
         "sample/sampler.py:223 apply_sampling_params)", since=_V28),
    _row("_thinking_budget_kernel", "sample.thinking_budget", "_thinking_budget_kernel",
         "logits_ptr:*fp32 | logits_stride:i32 | expanded_idx_mapping_ptr thinking_token_budget_ptr"
         " all_token_ids_ptr:*i32 | all_token_ids_stride:i32 | total_len_ptr input_ids_ptr expanded_local_pos_ptr"
         " cached_last_start_ptr cached_last_end_ptr reasoning_start_token_ids_ptr"
         " natural_reasoning_end_token_ids_ptr reasoning_end_token_ids_ptr:*i32",
         dict(START_LEN=1, NATURAL_END_LEN=1, END_LEN=2),
         f"{_F}/sample/thinking_budget.py:410 apply_thinking_budget (ThinkingBudgetState.apply, "
         "sample/sampler.py:223 apply_sampling_params)", since=_V28),
    # DFlash2 (dflash2/, a DFlash draft with DFlash2DraftModel): the selector's walk over its top-k candidates (int64
    # ids, model-dtype scores) into the draft tokens, probabilistic drafting (draft logits kept, fp32), one warp.
    # Triton 3.2's AMD backend rejects it as shipped (the inlined Gumbel helper's run-time ifs without else); with
    # the MUSA table bound it compiles vLLM's kernel calling the helper substitute gumbel_noised_argmax (if-to-where
    # x2), which the table binds in this module
    _row("_selector_walk_kernel", "spec_decode.dflash2.speculator", "_selector_walk_kernel",
         "scores_ptr:*bf16 | candidate_ptr sample_pos_ptr:*i64 | req_state_ptr:*i32 | temperature_ptr:*fp32"
         " | seeds_ptr tokens_ptr:*i64 | realized_scores_ptr:*fp32",
         dict(num_steps=_K, top_k=_TOP_K, BLOCK_K=_pow2(_TOP_K), SAMPLE_PROBABILISTIC=True, USE_FP64=False),
         f"{_F}/spec_decode/dflash2/speculator.py:144 DFlash2Speculator._sample_path (speculator.py:213 "
         "_generate_draft)", options=dict(num_warps=1), since=_V28),
    _row("_cache_draft_logits_kernel", "spec_decode.dflash2.speculator", "_cache_draft_logits_kernel",
         "draft_logits_ptr:*fp32 | cached_candidate_ptr candidate_ptr:*i64 | scores_ptr:*fp32 | req_state_ptr:*i32"
         " | draft_logits_stride_0 draft_logits_stride_1:i32",
         dict(num_steps=_K, top_k=_TOP_K, BLOCK_K=_pow2(_TOP_K)),
         f"{_F}/spec_decode/dflash2/speculator.py:165 DFlash2Speculator._cache_draft_logits (speculator.py:215 "
         "_generate_draft, probabilistic drafting)", options=dict(num_warps=1), since=_V28),
    # multi-module MTP (multi_module_mtp/, K MTP modules, one per draft step) on a text model: no input embeddings
    # (None, strides 0, USE_INPUT_EMBEDS=False); hidden states bf16, last_token_indices and cached draft ids int64
    _row("_prepare_input_buffers_kernel", "spec_decode.multi_module_mtp.speculator", "_prepare_input_buffers_kernel",
         "last_token_indices_ptr:*i64 | draft_input_ids_ptr:*i32 | draft_positions_ptr:*i64"
         " | draft_seq_lens_ptr target_input_ids_ptr:*i32 | target_positions_ptr cached_draft_input_ids_ptr:*i64"
         " | cached_draft_input_ids_stride0:i32 | draft_input_id_overrides_ptr:*i64"
         " | draft_input_id_overrides_stride0:i32 | idx_mapping_ptr:*i32 | last_sampled_ptr:*i64"
         " | next_prefill_tokens_ptr:*i32 | next_prefill_tokens_stride0:i32 | num_sampled_ptr num_rejected_ptr"
         " target_seq_lens_ptr query_start_loc_ptr:*i32 | max_num_reqs num_speculative_steps:i32",
         dict(BLOCK_SIZE=1024),
         f"{_F}/spec_decode/multi_module_mtp/speculator.py:608 prepare_input_buffers (speculator.py:319 "
         "_prepare_inputs)", since=_V28),
    _row("_prepare_input_hidden_states_and_embeddings_kernel", "spec_decode.multi_module_mtp.speculator",
         "_prepare_input_hidden_states_and_embeddings_kernel",
         "draft_input_hidden_states_ptr:*bf16 | draft_input_hidden_states_stride0:i32 | target_hidden_states_ptr:*bf16"
         " | target_hidden_states_stride0:i32 | cached_target_hidden_states_ptr:*bf16"
         " | cached_target_hidden_states_stride0 cached_target_hidden_states_stride1:i32 | input_embeds_ptr:none"
         " | input_embeds_stride0:i32 | cached_draft_input_embeds_ptr:none | cached_draft_input_embeds_stride0"
         " cached_draft_input_embeds_stride1:i32 | idx_mapping_ptr num_rejected_ptr query_start_loc_ptr:*i32"
         " | num_speculative_steps hidden_size:i32",
         dict(BLOCK_SIZE_Q=16, BLOCK_SIZE_H=256, USE_INPUT_EMBEDS=False),
         f"{_F}/spec_decode/multi_module_mtp/speculator.py:766 prepare_input_hidden_states_and_embeddings "
         "(speculator.py:354 _prepare_inputs)", since=_V28),
    _row("_pad_trailing_draft_slots_kernel", "spec_decode.multi_module_mtp.speculator",
         "_pad_trailing_draft_slots_kernel",
         "slot_mappings_ptr:*i64 | slot_mappings_stride0:i32 | query_start_loc_ptr:*i32"
         " | last_token_indices_ptr:*i64 | PAD_ID:i32",
         dict(BLOCK_SIZE=256),
         f"{_F}/spec_decode/multi_module_mtp/speculator.py:831 pad_trailing_draft_slots (speculator.py:216 propose, "
         "PAD_SLOT_ID = -1)", since=_V28),
    _row("_cache_inputs_kernel", "spec_decode.multi_module_mtp.speculator", "_cache_inputs_kernel",
         "draft_input_ids_ptr:*i32 | draft_input_embeds_ptr:none | draft_input_embeds_stride0:i32"
         " | draft_input_hidden_states_ptr:*bf16 | draft_input_hidden_states_stride0:i32"
         " | cached_draft_input_ids_ptr:*i64 | cached_draft_input_ids_stride0:i32 | cached_draft_input_embeds_ptr:none"
         " | cached_draft_input_embeds_stride0 cached_draft_input_embeds_stride1:i32"
         " | cached_target_hidden_states_ptr:*bf16"
         " | cached_target_hidden_states_stride0 cached_target_hidden_states_stride1:i32"
         " | idx_mapping_ptr:*i32 | last_token_indices_ptr:*i64 | query_start_loc_ptr:*i32"
         " | num_speculative_steps hidden_size:i32",
         dict(BLOCK_SIZE=1024, USE_INPUT_EMBEDS=False),
         f"{_F}/spec_decode/multi_module_mtp/speculator.py:943 cache_inputs (speculator.py:384 _generate_drafts)",
         since=_V28),
    _row("_shift_input_ids_kernel", "spec_decode.multi_module_mtp.speculator", "_shift_input_ids_kernel",
         "input_ids_ptr idx_mapping_ptr query_start_loc_ptr:*i32 | last_token_indices_ptr draft_tokens_ptr:*i64",
         dict(BLOCK_SIZE=1024),
         f"{_F}/spec_decode/multi_module_mtp/speculator.py:1069 update_draft_inputs (speculator.py:438 "
         "_generate_drafts, between draft steps)", since=_V28),
)

EXCLUDED: dict[str, str] = {
    f"{_G}.cp_utils:_dcp_local_seq_lens_kernel": "decode context parallelism only (model_runner.py:968, use_dcp)",
    f"{_G}.mm.rope:_prepare_rope_positions_kernel": "multimodal M-RoPE models only (model_states/default.py, "
                                                    "get_rope_state returns None unless uses_mrope)",
    f"{_G}.model_states.mamba_hybrid:_scatter_num_accepted_kernel": "Mamba/hybrid models' state only",
    "vllm.v1.worker.utils:_zero_kv_blocks_kernel": "zeroes new KV blocks only when the KV cache has Mamba layers "
                                                   "(KVCacheConfig.needs_kv_cache_zeroing)",
    f"{_G}.model_states.mamba_hybrid:_fill_num_accepted_kernel": "Mamba/hybrid models' state only",
    f"{_G}.spec_decode.multi_module_mtp.speculator:_shift_input_embeds_kernel":
        "multimodal MTP drafts only (update_draft_inputs launches it when inputs_embeds is set: supports_mm_inputs)",
}
"""MRV2 ``@triton.jit`` kernels not in the table, each with why no dense serving launches it."""

EXCLUDED_SINCE: dict[str, str] = {
    f"{_G}.model_states.mamba_hybrid:_fill_num_accepted_kernel": _V28,
    f"{_G}.spec_decode.multi_module_mtp.speculator:_shift_input_embeds_kernel": _V28,
}
"""The first vLLM that launches an excluded kernel, for the kernels newer than vLLM 0.26.0 (``triton_case.launched``;
the coverage test's stale-exclusion check skips them below it)."""

COVERED_THROUGH = _V28
"""The newest vLLM whose MRV2-launched kernels each have a row or an exclusion. vLLM 0.33.0 launches 23 more that
have neither yet (batch sharding, watermarking, ngram, xpress, the acceptance estimator, ...), so the coverage test
(``tests/test_triton_table_span.py``) stops here."""
