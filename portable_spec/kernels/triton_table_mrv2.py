"""Every Triton kernel vLLM 0.26.0's, 0.28.0's and 0.33.0's Model Runner V2 (MRV2, ``vllm/v1/worker/gpu/``) launches
when it serves a dense model, plainly or with EAGLE, EAGLE-3, DFlash, DFlash2 or multi-module MTP speculation: input
preparation, block tables, the sampler with every sampling parameter (penalties, logit bias, bad words, min-p,
top-k/top-p, logprobs, structured output, thinking budget, sampling mask), the speculators' input kernels and rejection
sampling, one row per launch variant.

Types and values are what MRV2's own buffers hold (``states.py``, ``input_batch.py``, ``block_table.py``,
``sample/*.py``: token ids, query starts and sequence lengths int32; request indices int32 in 0.26.0 and int64 later
(``_INPUT_BATCH_INDICES_INT64``, ``_COPIED_INDICES_INT64``); positions, last sampled and draft tokens, slot mappings
int64; logits in the model dtype, bf16) at the bench's shapes, the zoo's tiny Llama-style pairs: vocab 1024, hidden
1024, KV block 16, max_num_seqs 256, K = 3 draft tokens (a verify row of 1 + K = 4 logits), 5 logprobs. A constexpr
that follows from those is computed as vLLM computes it (e.g. ``BLOCK_SIZE = next_power_of_2(K + 1)``).
``launched_at`` names the launch line in vLLM 0.26.0 and the MRV2 caller.

Each row states vLLM 0.26.0's launch; where 0.28.0 or 0.33.0 launches the kernel with other parameters (or from
another module), the row's ``changes`` state what that version changed, read from its kernel and its launch site
(``triton_case.Change``), and ``kernel_cases`` applies them up to the installed vLLM. A kernel new in 0.28.0 (the
sampling-mask output, the thinking budget, the DFlash2 selector, the multi-module MTP speculator) has a row from
``since=_V28`` on, stating 0.28.0's launch and line; below it the row is absent, as is an exclusion named in
``EXCLUDED_SINCE``. The kernels new in 0.33.0 (``_V33_ROWS``: the separate draft model's prefill, the rejection
sampler's draft gather, batch-sharded sampling, prompt embeddings, trace replay, the n-gram and XPress speculators, the
acceptance estimator, the watermark's context mask) likewise state 0.33.0's launch, at ``since=_V33``; there
``idx_mapping`` is int64.

An engine served with ``--use-fp64-gumbel`` launches the Gumbel sampler, the resample (and its insert) and DFlash2's
selector walk at ``USE_FP64`` with fp64 block maxima: those rows carry ``engine=("use_fp64_gumbel",)``
(``KernelCase.engine``), and so does vLLM 0.33.0's watermarked resample at fp64 (``_watermarked_resample``).

Not here, on purpose: kernels only a non-dense model or another parallelism launches (Mamba/hybrid state, multimodal
M-RoPE and input embeddings, decode context parallelism) or only CUDA-device tensors reach (the watermark's Philox
Gumbel sampling), listed with their reason in ``EXCLUDED``
(``tests/test_triton_table_span.py`` walks MRV2's source on each vLLM up to ``COVERED_THROUGH`` and fails on any other
launched kernel without a row), and MRV2's ``@triton.jit`` helpers, checked
through their callers (``triton_rules`` follows them; the compile layer compiles them inlined).
"""

from __future__ import annotations

import dataclasses

from portable_spec.kernels.triton_case import Change, KernelCase, sig
from portable_spec.versions import parse

_G = "vllm.v1.worker.gpu"
_F = "vllm/v1/worker/gpu"
_MR = f"{_F}/model_runner.py"
_K = 3  # draft tokens per request in the rows below
_VOCAB = 1024
_V28 = "0.28.0"  # the kernels new in this vLLM: their rows state its launch (``since``)
_V33 = "0.33.0"  # likewise
_NGRAM_N = 5  # ngram_gpu's prompt_lookup_min and _max when neither is set (config/speculative.py)
_TP = 2  # tensor-parallel ranks in the batch-sharded sampling rows (rank 0's launch)
_TOP_K = 8  # DFlash2's selector_top_k (the draft's dflash_config; a checkpoint's value, 8 here)


_FP64 = "-fp64"  # the key suffix of a row launched with fp64 Gumbel noise
_FP64_ENGINE = ("use_fp64_gumbel",)
"""The engine flag the fp64 rows need: ``--use-fp64-gumbel`` (``ModelConfig.use_fp64_gumbel``, off by default, the same
switch on 0.26.0, 0.28.0 and 0.33.0; no environment variable turns it on). MRV2's sampler, its speculators' draft
sampling, its rejection sampler's resample and DFlash2's selector walk then launch with ``USE_FP64=True`` and fp64
per-block maxima (``KernelCase.engine``: with substitutes bound, the check binds what such an engine binds)."""
_FP64_WHY = "; --use-fp64-gumbel: USE_FP64, fp64 block maxima"


def _local_max(fp64: bool) -> str:
    """The per-block maxima's type: fp64 under ``--use-fp64-gumbel`` (``local_max_dtype``), else fp32."""
    return "*fp64" if fp64 else "*fp32"


def _pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def _row(key: str, module: str, kernel: str, spec: str, constexprs: dict, where: str, **kw) -> KernelCase:
    """A row for ``kernel`` of ``vllm.v1.worker.gpu.<module>`` (key ``mrv2/<module>.<kernel>[variant]``)."""
    return KernelCase(f"mrv2/{module}.{key}", f"{_G}.{module}:{kernel}", sig(spec), constexprs, where, **kw)


# Request indices (idx_mapping, the expanded one made from it, and copies of either) are int32 everywhere in 0.26.0
# (model_runner.py:896). 0.28.0 builds the model runner's idx_mapping from an np.intp array (model_runner.py:1076),
# which async_copy_to_gpu copies as it is (model_runner.py:1121, buffer_utils.py:37 empty_like): int64, and so is every
# mapping made from it (input_batch.py:704 new_empty; model_runner.py:1135, the unexpanded alias; pp_utils.py:116,
# the same intp array). The speculators' own copy (spec_decode/speculator.py:115, filled by copy_, which casts),
# DFlash's per-sample copy (spec_decode/dflash/speculator.py:90) and the penalties' new-request list
# (sample/penalties.py:58) stay int32 there; 0.33.0 makes those three int64 too (spec_decode/speculator.py:154,
# dflash/speculator.py:121, sample/penalties.py:67) and states the model runner's dtype (model_runner.py:1407).
# ``tests/test_triton_table_span.py`` reads each of these from the installed vLLM's source.
_INPUT_BATCH_INDICES_INT64 = _V28
"""The first vLLM whose kernels fed from the model runner's ``InputBatch`` get int64 request indices."""
_COPIED_INDICES_INT64 = _V33
"""The first vLLM whose speculators' copies of the request indices (and the penalties' list) are int64."""


def _retyped(changes: dict[str, Change], retypes: dict[str, str]) -> dict[str, Change]:
    """``changes`` with each version's parameters of ``retypes`` (version -> ``sig`` spec) retyped there, merged into
    the ``Change`` the row already states at that version."""
    out = dict(changes)
    for version, spec in retypes.items():
        change = out.get(version, Change())
        out[version] = dataclasses.replace(change, signature=f"{change.signature} | {spec}" if change.signature
                                           else spec)
    return out


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


def _gumbel(key: str, processed: str, col: str, per_token_col: bool, apply_temperature: bool, where: str,
            indices_int64_at: str, fp64: bool = False):
    """0.28.0 replaced the processed-logits output by a logits cache of the model's head dtype (bf16 here: the
    drafts' ``draft_logits``); 0.33.0 gave it two strides and a source (the sampled logits) and ``IS_DRAFTING``. The
    request indices turn int64 at ``indices_int64_at``: the sampler's with the model runner's, a draft's with the
    speculator's copy (``_INPUT_BATCH_INDICES_INT64``, ``_COPIED_INDICES_INT64``)."""
    cache = "none" if processed == "none" else "*bf16"
    return _row(f"_gumbel_sample_kernel[{key}{_FP64 if fp64 else ''}]", "sample.gumbel", "_gumbel_sample_kernel",
                f"local_argmax_ptr:*i64 | local_argmax_stride:i32 | local_max_ptr:{_local_max(fp64)}"
                " | local_max_stride:i32"
                f" | processed_logits_ptr:{processed} | processed_logits_stride:i32 | processed_logits_col_ptr:{col}"
                f" | {_LOGITS} | expanded_idx_mapping_ptr:*i32 | seeds_ptr pos_ptr:*i64 | temp_ptr:*fp32"
                " | vocab_size:i32",
                dict(BLOCK_SIZE=1024, APPLY_TEMPERATURE=apply_temperature, USE_FP64=fp64,
                     PER_TOKEN_COL=per_token_col),
                f"{_F}/sample/gumbel.py:241 gumbel_sample ({where}{_FP64_WHY if fp64 else ''})",
                engine=_FP64_ENGINE if fp64 else (),
                changes=_retyped(
                    {"0.28.0": Change(f"logits_cache_ptr:{cache} | logits_cache_stride:i32"
                                      f" | logits_cache_col_ptr:{col}",
                                      ("processed_logits_ptr", "processed_logits_stride", "processed_logits_col_ptr")),
                     "0.33.0": Change(f"logits_cache_stride_0 logits_cache_stride_1:i32"
                                      f" | logits_cache_source_ptr:{cache} | logits_cache_source_stride:i32",
                                      ("logits_cache_stride",), dict(IS_DRAFTING=processed != "none"))},
                    {indices_int64_at: "expanded_idx_mapping_ptr:*i64"}))


def _stats(key: str, has_draft_logits: bool) -> KernelCase:
    return _row(f"_compute_local_logits_stats_kernel[{key}]", "spec_decode.rejection_sampler_utils",
                "_compute_local_logits_stats_kernel",
                "target_local_argmax_ptr:*i64 | target_local_argmax_stride:i32" + _REJECT_STATS + _DRAFT_STATS
                + " | target_logits_ptr:*bf16 | target_logits_stride:i32" + _draft_logits(has_draft_logits)
                + " | expanded_idx_mapping_ptr expanded_local_pos_ptr:*i32 | temp_ptr:*fp32"
                " | vocab_size num_speculative_steps:i32",
                dict(BLOCK_SIZE=8192, HAS_DRAFT_LOGITS=has_draft_logits),
                f"{_F}/spec_decode/rejection_sampler_utils.py:923 rejection_sample "
                "(spec_decode/rejection_sampler.py:123 RejectionSampler.__call__)",
                changes=_retyped(_PER_LOGIT, {_INPUT_BATCH_INDICES_INT64: "expanded_idx_mapping_ptr:*i64"}))


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
                changes=_retyped({"0.33.0": Change("fly_entropy_ptr:none | fly_entropy_threshold:fp32",
                                                   constexprs=dict(FLY_WINDOW_SIZE=0))},
                                 {_INPUT_BATCH_INDICES_INT64: "idx_mapping_ptr:*i64"}))


def _resample(key: str, has_draft_logits: bool, block: bool, fp64: bool = False) -> KernelCase:
    return _row(f"_resample_kernel[{key}{_FP64 if fp64 else ''}]", "spec_decode.rejection_sampler_utils",
                "_resample_kernel",
                "resampled_local_argmax_ptr:*i64 | resampled_local_argmax_stride:i32"
                f" | resampled_local_max_ptr:{_local_max(fp64)} | resampled_local_max_stride:i32"
                " | target_logits_ptr:*bf16 | target_logits_stride:i32 | target_rejected_logsumexp_ptr:*fp32"
                + _draft_logits(has_draft_logits) + " | draft_rejected_logsumexp_ptr:*fp32"
                " | rejected_step_ptr cu_num_logits_ptr expanded_idx_mapping_ptr draft_sampled_ptr:*i32"
                f" | temp_ptr:*fp32 | seed_ptr pos_ptr:*i64 | cumulative_log_p_ptr:{'*fp32' if block else 'none'}"
                " | vocab_size:i32",
                dict(BLOCK_SIZE=1024, HAS_DRAFT_LOGITS=has_draft_logits, USE_FP64=fp64,
                     USE_BLOCK_VERIFICATION=block),
                f"{_F}/spec_decode/rejection_sampler_utils.py:1083 rejection_sample "
                f"(spec_decode/rejection_sampler.py:123 RejectionSampler.__call__{_FP64_WHY if fp64 else ''})",
                engine=_FP64_ENGINE if fp64 else (),
                # 0.33.0's watermarking, off without contexts: None tensors, zero key and stride, width 1
                changes=_retyped({"0.33.0": Change("contexts_ptr:none | contexts_stride:i32 | watermarking_ptr"
                                                   " watermarking_skip_mask_ptr:none"
                                                   " | watermark_key_0 watermark_key_1:i32",
                                                   constexprs=dict(CONTEXT_WIDTH=1, WATERMARK=False,
                                                                   DEDUPLICATE_CONTEXTS=False))},
                                 {_INPUT_BATCH_INDICES_INT64: "expanded_idx_mapping_ptr:*i64"}))


_KEY_HALVES = {"": ("i64", "i64"), "key-i32": ("i32", "i32"), "key-lo-i32": ("i32", "i64"),
               "key-hi-i32": ("i64", "i32")}
"""The types Triton gives a watermark key's two 32-bit halves (``key & 0xFFFFFFFF``, ``key >> 32``; kernels keyed
with them do not specialize on the values, ``do_not_specialize``): i32 below 2**31, i64 from 2**31 to 2**32 - 1, so a
64-bit key (``WatermarkConfig.key``) launches one of four signatures. The ROCm table's watermark rows use it too
(``triton_table_rocm.WATERMARK_ROWS``)."""


def _watermarked_resample(halves: str = "", dedup: bool = True, fp64: bool = False) -> KernelCase:
    """vLLM 0.33.0's resample under a watermark config (with a drafter it requires probabilistic drafting and
    standard rejection: draft logits, no block verification; ``RejectionSampler._watermarking_kwargs``): the
    watermarked recovery draws with the watermark's Philox in the kernel (``philox_gumbel_block_argmax``), with no
    device check, so MUSA reaches it. Contexts int32 (the verifier's, token ids and -1) of the default width 4; the
    per-request flags a uint8 view of a bool tensor; the skip mask likewise under the default
    deduplicate_contexts='single_turn' (``dedup``), None under 'none'; the key halves typed as ``halves`` says."""
    base = _resample("draft-logits", True, False, fp64).at(lambda by_version: by_version[max(by_version, key=parse)])
    assert base is not None
    key_0, key_1 = _KEY_HALVES[halves]
    parts = "".join(f"-{p}" for p in (halves, "" if dedup else "no-dedup", "fp64" if fp64 else "") if p)
    return dataclasses.replace(
        base, key=f"mrv2/spec_decode.rejection_sampler_utils._resample_kernel[watermark{parts}]",
        signature={**base.signature, **sig(f"contexts_ptr:*i32 | contexts_stride:i32 | watermarking_ptr:*u8"
                                          f" | watermarking_skip_mask_ptr:{'*u8' if dedup else 'none'}"
                                          f" | watermark_key_0:{key_0} | watermark_key_1:{key_1}")},
        constexprs={**base.constexprs, "CONTEXT_WIDTH": 4, "WATERMARK": True, "DEDUPLICATE_CONTEXTS": dedup},
        launched_at=(f"{_F}/spec_decode/rejection_sampler_utils.py:1360 rejection_sample "
                     "(spec_decode/rejection_sampler.py:274 RejectionSampler._verify, a watermark config: "
                     f"_watermarking_kwargs{_FP64_WHY if fp64 else ''})"),
        since=_V33, changes={})


_PER_LOGIT = {"0.33.0": Change("num_logits:i32", ("num_speculative_steps",))}
"""0.33.0's per-logit stats kernels bound their rows by the logit count instead of the draft steps."""

_APPLY_WRITE = ("write_indices_ptr write_starts_ptr:*i32 | write_contents_ptr:{content} | write_cu_lens_ptr:*i32"
                " | write_group_ids_ptr:{groups}")

# ---------------------------------------------------------------- new in vLLM 0.33.0 (rows state its launch)
# 0.33.0's idx_mapping (and the expanded one made from it) is int64 (model_runner.py:1407); its query starts, sequence
# lengths, cu_num_logits and expanded_local_pos int32; sampled token ids int64; logprobs fp32 with int64 ids and ranks.
_BATCH_SHARD = f"{_F}/sample/batch_shard.py"
_ACCEPT = f"{_F}/spec_decode/acceptance_estimator.py"
_XPRESS = f"{_F}/spec_decode/xpress/kernels.py"
_QWEN3_XPRESS = "vllm/model_executor/models/qwen3_xpress.py"
_XPRESS_BLOCK = 15 + 1  # an XPress checkpoint's default block: num_speculative_steps 15 + the anchor (qwen3_xpress.py)
_WATERMARK = f"{_F}/sample/watermark.py"
_WATERMARK_WIDTH = 4  # WatermarkConfig.context_width's default (config/watermarking.py)
_WATERMARK_MASKS = (
    # key, launch line, caller, then the pointers' types: history offsets, contexts, local positions, prior contexts,
    # steps, enabled, and the constexprs that differ
    ("sampler", 339, "vllm/v1/watermarking/gpu_sampler.py:131 _get_repeated_contexts, from :82 "
     "GPUWatermarkSampler._sample_random", "none", "*i32", "none", "none", "none", "none",
     dict(NUM_SPECULATIVE_STEPS=0, HAS_HISTORY_OFFSETS=False, SPECULATIVE_CONTEXTS=False, DRAFT_CONTEXTS=False)),
    ("verify", 339, "vllm/v1/watermarking/gpu_sampler.py:131 _get_repeated_contexts, from "
     "spec_decode/rejection_sampler.py:240 _watermarking_kwargs", "*i32", "*i32", "*i32", "none", "none", "none",
     dict(NUM_SPECULATIVE_STEPS=_K, HAS_HISTORY_OFFSETS=True, SPECULATIVE_CONTEXTS=True, DRAFT_CONTEXTS=False)),
    ("draft", 413, "vllm/v1/watermarking/spec_decode.py:86 DraftWatermarker._sampling_state", "*i64", "*i64", "none",
     "*i64", "*i64", "*i1",
     dict(NUM_SPECULATIVE_STEPS=_K, HAS_HISTORY_OFFSETS=True, SPECULATIVE_CONTEXTS=False, DRAFT_CONTEXTS=True)),
)
"""The three launches of the watermark's repeated-context mask under a watermark config at its defaults (context
width 4, deduplicate_contexts 'single_turn': history 8192, no prompt): the sampler's committed contexts and the
verifier's draft-extended ones are int32 (``torch.where`` over int32 token ids and -1), the draft watermarker's state
int64, its steps int64 and its enabled mask bool."""


def _watermark_mask(key: str, line: int, caller: str, offsets: str, contexts: str, local: str, prior: str,
                    steps: str, enabled: str, constexprs: dict) -> KernelCase:
    """One launch of ``_repeated_context_mask_kernel`` (``_WATERMARK_MASKS``); an argument the launch passes as None
    is typed ``none``, its strides 0 (i32)."""
    return _row(f"_repeated_context_mask_kernel[{key}]", "sample.watermark", "_repeated_context_mask_kernel",
                "output_ptr:*i1 | all_token_ids_ptr:*i32 | all_token_ids_stride:i32 | req_indices_ptr:*i64"
                f" | prompt_lens_ptr total_lens_ptr:*i32 | history_offsets_ptr:{offsets}"
                f" | history_offsets_stride:i32 | contexts_ptr:{contexts} | context_stride:i32"
                f" | local_positions_ptr:{local} | prior_contexts_ptr:{prior}"
                f" | prior_contexts_stride_0 prior_contexts_stride_1:i32 | steps_ptr:{steps} | steps_stride:i32"
                f" | enabled_ptr:{enabled}",
                dict(CONTEXT_WIDTH=_WATERMARK_WIDTH, MAX_HISTORY=8192, INCLUDE_PROMPT=False,
                     SKIP_PARTIAL_CONTEXT=False, BLOCK=512, **constexprs),
                f"{_WATERMARK}:{line} ({caller})", since=_V33)


_V33_ROWS: tuple[KernelCase, ...] = (
    # the separate draft model's MRV2 speculator (standalone_ar/): step 0 expands each request's verified tokens by its
    # correction token; a verify step of K + 1 tokens gives BLOCK_SIZE = min(512, next_power_of_2(K + 1 + 2))
    _row("_prepare_prefill_inputs_kernel", "spec_decode.standalone_ar.speculator", "_prepare_prefill_inputs_kernel",
         "target_input_ids_ptr:*i32 | target_positions_ptr:*i64 | last_sampled_ptr:*i32 | idx_mapping_ptr:*i64"
         " | out_input_ids_ptr:*i32 | out_positions_ptr last_token_indices_ptr:*i64 | out_query_start_loc_ptr"
         " out_seq_lens_ptr query_start_loc_ptr seq_lens_ptr num_rejected_ptr:*i32 | max_num_reqs max_model_len:i32",
         dict(BLOCK_SIZE=min(512, _pow2(_K + 1 + 2))),
         f"{_F}/spec_decode/standalone_ar/speculator.py:526 prepare_prefill_inputs (speculator.py:198 "
         "StandaloneARSpeculator._prefill, last_sampled and num_rejected passed .int())", since=_V33),
    # the rejection sampler's first launch: each logits row's input token (int32, new_empty of input_ids) and position
    _row("_gather_draft_sampled_kernel", "spec_decode.rejection_sampler", "_gather_draft_sampled_kernel",
         "draft_sampled_ptr:*i32 | pos_ptr:*i64 | input_ids_ptr:*i32 | positions_ptr logits_indices_ptr"
         " expanded_idx_mapping_ptr:*i64 | expanded_local_pos_ptr prefill_len_ptr:*i32 | num_logits:i32",
         dict(BLOCK_SIZE=1024),
         f"{_F}/spec_decode/rejection_sampler.py:132 gather_draft_sampled (rejection_sampler.py:427 "
         "RejectionSampler.__call__)", since=_V33),
    # batch-sharded sampling (parallel_config.enable_batch_sharded_sampling, tensor parallelism > 1, a model with
    # compute_logits_local): rank 0 of _TP; max_num_logits_per_req = decode_query_len = K + 1; no NaN counting
    # (VLLM_COMPUTE_NANS_IN_LOGITS unset: num_nans and its cu_num_logits None); 5 logprobs, no logprob token ids
    # (num_logprob_cols = 1 + 5)
    _row("_build_shard_plan_kernel", "sample.batch_shard", "_build_shard_plan_kernel",
         "idx_mapping_ptr:*i64 | cu_num_logits_ptr query_start_loc_ptr seq_lens_ptr:*i32 | sorted_logits_indices_ptr"
         " gathered_src_indices_ptr local_idx_mapping_ptr:*i64 | local_cu_num_logits_ptr:*i32"
         " | local_logits_indices_ptr local_expanded_idx_mapping_ptr:*i64 | local_expanded_local_pos_ptr"
         " local_seq_lens_ptr:*i32 | num_reqs local_logits_start max_num_reqs_per_rank:i32",
         dict(TP_SIZE=_TP, TP_RANK=0, PADDED_NUM_REQS=_pow2(256), PADDED_NUM_LOGITS_PER_REQ=_pow2(_K + 1)),
         f"{_BATCH_SHARD}:243 BatchSharder.shard_sampler_inputs ({_MR}:1645 sample)",
         options=dict(num_warps=max(1, min(8, _pow2(256) // 128))), since=_V33),
    _row("_pack_sampler_output_kernel", "sample.batch_shard", "_pack_sampler_output_kernel",
         "packed_ptr:*i64 | packed_stride:i32 | sampled_token_ids_ptr:*i64 | sampled_token_ids_stride:i32"
         " | num_sampled_ptr num_rejected_ptr:*i32 | num_nans_ptr local_cu_num_logits_ptr:none"
         " | max_num_logits_per_req num_src_cols:i32",
         dict(BLOCK_SIZE=_pow2(_K + 1)),
         f"{_BATCH_SHARD}:646 gather_sampler_output ({_MR}:1700 sample)", since=_V33),
    _row("_unpack_gathered_output_kernel", "sample.batch_shard", "_unpack_gathered_output_kernel",
         "gathered_ptr:*i64 | gathered_stride:i32 | gathered_src_indices_ptr sampled_token_ids_ptr:*i64"
         " | num_sampled_ptr num_rejected_ptr:*i32 | num_nans_ptr:none | max_num_logits_per_req:i32",
         dict(BLOCK_SIZE=_pow2(_K + 1)),
         f"{_BATCH_SHARD}:681 gather_sampler_output ({_MR}:1700 sample)", since=_V33),
    _row("_pack_logprobs_kernel", "sample.batch_shard", "_pack_logprobs_kernel",
         "send_ids_ptr:*i64 | send_ids_stride:i32 | send_logprobs_ptr:*fp32 | send_logprobs_stride:i32"
         " | src_ids_ptr:*i64 | src_ids_stride:i32 | src_logprobs_ptr:*fp32 | src_logprobs_stride:i32"
         " | selected_token_ranks_ptr:*i64 | local_cu_num_logits_ptr:*i32"
         " | max_num_logits_per_req num_logprob_cols num_src_cols:i32",
         dict(BLOCK_SIZE=_pow2(1 + 5)),
         f"{_BATCH_SHARD}:560 _gather_logprobs_tensors (gather_sampler_output, {_MR}:1700 sample)", since=_V33),
    _row("_unpack_logprobs_kernel", "sample.batch_shard", "_unpack_logprobs_kernel",
         "gathered_ids_ptr:*i64 | gathered_ids_stride:i32 | gathered_logprobs_ptr:*fp32"
         " | gathered_logprobs_stride:i32 | gathered_src_indices_ptr:*i64 | cu_num_logits_ptr:*i32"
         " | logprob_token_ids_ptr:*i64 | logprobs_ptr:*fp32 | selected_token_ranks_ptr:*i64"
         " | max_num_logits_per_req num_logprob_cols:i32",
         dict(BLOCK_SIZE=_pow2(1 + 5)),
         f"{_BATCH_SHARD}:589 _gather_logprobs_tensors (gather_sampler_output, {_MR}:1700 sample)", since=_V33),
    # user-provided prompt embeddings (model_config.enable_prompt_embeds) on the dense model's bf16 inputs_embeds:
    # per-request device pointers (uint64) and lengths, hidden size 1024 as a constexpr
    _row("_apply_prompt_embeds_kernel", "model_states.prompt_embeds", "_apply_prompt_embeds_kernel",
         "inputs_embeds_ptr:*bf16 | inputs_embeds_stride:i32 | embeds_ptrs_ptr mask_ptrs_ptr:*u64"
         " | embeds_lens_ptr:*i32 | idx_mapping_ptr:*i64 | query_start_loc_ptr num_computed_tokens_ptr:*i32",
         dict(hidden_size=1024, TOKEN_BLOCK=16, BLOCK_SIZE=1024),
         f"{_F}/model_states/prompt_embeds.py:84 PromptEmbedsState.apply (model_states/default.py:127 "
         f"prepare_inputs_embeds, {_MR}:2005)", since=_V33),
    # trace replay (model_config.enable_trace_replay): the sampler overwrites its int64 samples with a request's
    # trace tokens (int32, one row per request)
    _row("_trace_replay_kernel", "sample.trace_replay", "_trace_replay_kernel",
         "sampled_ptr idx_mapping_ptr:*i64 | trace_token_ids_ptr:*i32 | trace_token_ids_stride:i32"
         " | trace_len_ptr total_len_ptr prompt_len_ptr:*i32", {},
         f"{_F}/sample/trace_replay.py:105 apply_trace_tokens (TraceReplayState.apply_trace, "
         "sample/sampler.py:169 Sampler.__call__)", since=_V33),
    # the GPU n-gram speculator (method ngram_gpu) at its defaults, prompt_lookup_min = max = 5 (speculative.py), on the
    # harness's max_model_len 1024: BLOCK_L 256, so 4 blocks; drafts int64, K per request
    _row("_ngram_scan_kernel", "spec_decode.ngram.speculator", "_ngram_scan_kernel",
         "token_ids_ptr:*i32 | token_ids_stride:i32 | idx_mapping_ptr:*i64 | total_len_ptr num_sampled_ptr:*i32"
         " | scratch_ptr:*i64 | scratch_stride L:i32",
         dict(MIN_N=_NGRAM_N, MAX_N=_NGRAM_N, MAX_N_PO2=_pow2(_NGRAM_N), BLOCK_L=256),
         f"{_F}/spec_decode/ngram/speculator.py:244 NgramGPUSpeculator.propose", options=dict(num_warps=4,
                                                                                            num_stages=2),
         since=_V33),
    _row("_ngram_finalize_kernel", "spec_decode.ngram.speculator", "_ngram_finalize_kernel",
         "token_ids_ptr:*i32 | token_ids_stride:i32 | idx_mapping_ptr:*i64 | total_len_ptr num_sampled_ptr:*i32"
         " | last_sampled_ptr scratch_ptr:*i64 | scratch_stride:i32 | drafts_ptr:*i64 | L N_BLOCKS:i32",
         dict(K=_K, K_PO2=_pow2(_K), N_BLOCKS_PO2=_pow2(1024 // 256)),
         f"{_F}/spec_decode/ngram/speculator.py:261 NgramGPUSpeculator.propose", options=dict(num_warps=2,
                                                                                            num_stages=1),
         since=_V33),
    # adaptive verification's online acceptance estimator (speculative_config.enable_adaptive_verification, a draft
    # model's speculator: DraftModelSpeculator), EAGLE-style: one shared int64 draft step (per_token_step False), the
    # drafter's bf16 logits over vocab 1024 (one 4096-wide block), fp32 state; up to 256 requests (BLOCK_R 256, 1 warp)
    _row("_accumulate_kernel", "spec_decode.acceptance_estimator", "_accumulate_kernel",
         "info_ptr grad_ptr:*fp32 | idx_mapping_ptr:*i64 | num_sampled_ptr num_rejected_ptr:*i32"
         " | features_ptr:*fp32 | features_stride:i32 | pred_ptr:*fp32 | pred_stride:i32 | counts_ptr:*fp32"
         " | num_reqs:i32",
         dict(BLOCK_R=256), f"{_ACCEPT}:413 OnlineAcceptanceEstimator.step (spec_decode/speculator.py:507 "
                            f"observe_verification, {_MR}:2297)", options=dict(num_warps=1), since=_V33),
    _row("_refit_kernel", "spec_decode.acceptance_estimator", "_refit_kernel",
         "slope_ptr intercepts_ptr info_ptr:*fp32 | info_row_stride:i32 | grad_ptr:*fp32 | grad_row_stride:i32"
         " | counts_ptr:*fp32",
         dict(NUM_SPECULATIVE_STEPS=_K, L2=1e-3, DAMPING=50.0, BLOCK=_pow2(_K)),
         f"{_ACCEPT}:436 OnlineAcceptanceEstimator.step (every REFIT_INTERVAL = 100 steps)", since=_V33),
    _row("_local_max_sumexp_kernel", "spec_decode.acceptance_estimator", "_local_max_sumexp_kernel",
         "local_max_ptr:*fp32 | local_max_stride:i32 | local_sumexp_ptr:*fp32 | local_sumexp_stride:i32"
         f" | {_LOGITS} | idx_mapping_ptr:*i64 | idx_mapping_stride:i32 | temperature_ptr:*fp32"
         " | num_tokens vocab_size:i32",
         dict(BLOCK_SIZE=4096), f"{_ACCEPT}:466 OnlineAcceptanceEstimator.predict (spec_decode/speculator.py:487 "
                                "_maybe_predict_acceptance, from :480 sample_draft)", since=_V33),
    _row("_predict_kernel", "spec_decode.acceptance_estimator", "_predict_kernel",
         "features_ptr:*fp32 | features_stride:i32 | pred_ptr:*fp32 | pred_stride:i32 | conf_ptr:*fp32"
         " | conf_stride:i32 | slope_ptr intercepts_ptr local_max_ptr:*fp32 | local_max_stride:i32"
         " | local_sumexp_ptr:*fp32 | local_sumexp_stride:i32 | idx_mapping_ptr:*i64 | idx_mapping_stride:i32"
         " | step_ptr:*i64 | num_tokens vocab_num_blocks:i32",
         dict(per_token_step=False, NUM_SPECULATIVE_STEPS=_K, MAX_LOG_ODDS=40.0, PADDED_VOCAB_NUM_BLOCKS=1),
         f"{_ACCEPT}:480 OnlineAcceptanceEstimator.predict (spec_decode/speculator.py:487 "
         "_maybe_predict_acceptance)", since=_V33),
    # XPress (a Qwen3 XPress draft: spec_decode/xpress/, launched by model_executor/models/qwen3_xpress.py's
    # XPressRefinerHead.jacobi_refine_greedy) at its checkpoint defaults: rank 256, MLP hidden 512, top-C 512, and a
    # block of 1 anchor + 15 slots (_XPRESS_BLOCK, not K + 1: the kernels take B = 1 + K from the block buffer but
    # index the head's [block, block, rank] mixer with it, so an XPress draft is served at K = block - 1; at K = 3 the
    # latent kernel's tl.dot on a 4-row tile is refused by Triton 3.2, "M >= 16"); bf16 weights and logits, int64
    # block tokens, the anchors' int32 input ids. Top-C's
    # candidates come from torch.topk (flashinfer's top-k, int32 there, is CUDA only): int64. xpress_topc = 0 scores
    # the full vocabulary instead (the partial / reduce pair, in 4096-wide chunks: one at vocab 1024)
    _row("_xpress_latent_kernel", "spec_decode.xpress.kernels", "_xpress_latent_kernel",
         "blk_ptr:*i64 | am1_ptr:*i32 | xh_ptr lat_out_ptr w1_ptr wlat_ptr mixl_ptr wg_ptr wu_ptr wd_ptr:*bf16",
         dict(B=_XPRESS_BLOCK, R=256, H=512, BP=_pow2(_XPRESS_BLOCK), HT=64, DO_MLP=True),
         f"{_XPRESS}:210 xpress_latent_pass ({_QWEN3_XPRESS}:165 top-C, :192 full vocabulary)",
         options=dict(num_warps=8, num_stages=3), since=_V33),
    _row("_xpress_topc_argmax_to_blk_kernel", "spec_decode.xpress.kernels", "_xpress_topc_argmax_to_blk_kernel",
         "base_ptr bias_ptr:*bf16 | cand_ptr blk_ptr:*i64 | C:i32", dict(B=_XPRESS_BLOCK, BLOCK_C=512),
         f"{_XPRESS}:373 fused_topc_argmax_to_blk ({_QWEN3_XPRESS}:179, min(topc, vocab) = 512 candidates)",
         options=dict(num_warps=4), since=_V33),
    _row("_xpress_add_argmax_partial_kernel", "spec_decode.xpress.kernels", "_xpress_add_argmax_partial_kernel",
         "base_ptr bias_ptr:*bf16 | out_val_ptr:*fp32 | out_idx_ptr:*i64 | V stride_base_r stride_bias_r stride_ov_r"
         " stride_oi_r:i32", dict(BLOCK_V=4096),
         f"{_XPRESS}:297 fused_add_argmax_to_blk ({_QWEN3_XPRESS}:205, xpress_topc = 0)",
         options=dict(num_warps=8), since=_V33),
    _row("_xpress_add_argmax_reduce_to_blk_kernel", "spec_decode.xpress.kernels",
         "_xpress_add_argmax_reduce_to_blk_kernel",
         "out_val_ptr:*fp32 | out_idx_ptr blk_ptr:*i64 | N Bm1 stride_ov_r stride_oi_r:i32", dict(BLOCK_N=64),
         f"{_XPRESS}:310 fused_add_argmax_to_blk ({_QWEN3_XPRESS}:205, xpress_topc = 0)",
         options=dict(num_warps=1), since=_V33),
    *(_watermark_mask(*variant) for variant in _WATERMARK_MASKS),
    # the watermarked recovery in the resample kernel: every key-half signature, dedup off, and fp64
    *(_watermarked_resample(halves) for halves in _KEY_HALVES),
    _watermarked_resample(dedup=False),
    _watermarked_resample(fp64=True),  # launched by an engine with --use-fp64-gumbel (its ``engine``)
)
"""The kernels vLLM 0.33.0's MRV2 launches that 0.28.0's does not, each row read from 0.33.0's kernel and launch."""


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
         changes=_retyped({"0.28.0": Change("next_prefill_tokens_stride num_lookahead:i32",
                                            constexprs=dict(LOOKAHEAD_BLOCK=_pow2(1)))},
                          {_INPUT_BATCH_INDICES_INT64: "idx_mapping_ptr:*i64"})),
    _row("_prepare_pos_seq_lens_kernel", "input_batch", "_prepare_pos_seq_lens_kernel",
         "pos_ptr:*i64 | seq_lens_ptr idx_mapping_ptr query_start_loc_ptr num_computed_tokens_ptr:*i32"
         " | max_num_reqs:i32",
         dict(BLOCK_SIZE=1024), f"{_F}/input_batch.py:292 prepare_pos_seq_lens ({_MR}:964 prepare_inputs)",
         changes=_retyped({}, {_INPUT_BATCH_INDICES_INT64: "idx_mapping_ptr:*i64"})),
    *(_row(f"_combine_sampled_and_draft_tokens_kernel[{key}]", "input_batch",
           "_combine_sampled_and_draft_tokens_kernel",
           "input_ids_ptr idx_mapping_ptr:*i32 | last_sampled_tokens_ptr:*i64"
           " | query_start_loc_ptr seq_lens_ptr prefill_len_ptr:*i32 | draft_tokens_ptr:*i64"
           " | draft_tokens_stride:i32 | cu_num_logits_ptr:*i32 | logits_indices_ptr:*i64",
           dict(BLOCK_SIZE=_pow2(k + 1), NUM_NEW_SAMPLED_TOKENS=1),
           f"{_F}/input_batch.py:388 combine_sampled_and_draft_tokens ({_MR}:988 prepare_inputs, {what})",
           changes=_retyped({}, {_INPUT_BATCH_INDICES_INT64: "idx_mapping_ptr:*i64"}))
      for key, k, what in (("decode", 0, "no speculation"), (f"spec-k{_K}", _K, f"K = {_K}"))),
    _row("_get_num_sampled_and_rejected_kernel", "input_batch", "_get_num_sampled_and_rejected_kernel",
         "num_sampled_ptr num_rejected_ptr seq_lens_ptr cu_num_logits_ptr idx_mapping_ptr prefill_len_ptr:*i32",
         {}, f"{_F}/input_batch.py:447 get_num_sampled_and_rejected (sample/sampler.py:124 Sampler.__call__, "
             "spec_decode/rejection_sampler.py:148 RejectionSampler.__call__)",
         changes=_retyped({}, {_INPUT_BATCH_INDICES_INT64: "idx_mapping_ptr:*i64"})),
    _row("_post_update_kernel", "input_batch", "_post_update_kernel",
         "idx_mapping_ptr num_computed_tokens_ptr:*i32 | last_sampled_tokens_ptr:*i64"
         " | output_bin_counts_ptr:*i32 | output_bin_counts_stride:i32 | sampled_tokens_ptr:*i64"
         " | sampled_tokens_stride:i32 | num_sampled_ptr num_rejected_ptr query_start_loc_ptr all_token_ids_ptr:*i32"
         " | all_token_ids_stride:i32 | total_len_ptr:*i32",
         {}, f"{_F}/input_batch.py:542 post_update ({_MR}:1133 postprocess_sampled, from :1489 sample_tokens)",
         options=dict(num_warps=1),
         # 0.33.0 also copies the step's draft tokens into the request state (int64, K per request)
         changes=_retyped({"0.33.0": Change("draft_tokens_ptr draft_tokens_out_ptr:*i64 | num_draft_tokens:i32")},
                          {_INPUT_BATCH_INDICES_INT64: "idx_mapping_ptr:*i64"})),
    _row("_post_update_num_computed_tokens_kernel", "input_batch", "_post_update_num_computed_tokens_kernel",
         "idx_mapping_ptr num_computed_tokens_ptr query_start_loc_ptr:*i32", {},
         f"{_F}/input_batch.py:585 post_update_num_computed_tokens ({_MR}:1583 postprocess_num_computed_tokens, "
         "pipeline-parallel ranks)", changes=_retyped({}, {_INPUT_BATCH_INDICES_INT64: "idx_mapping_ptr:*i64"})),
    _row("_expand_idx_mapping_kernel", "input_batch", "_expand_idx_mapping_kernel",
         "idx_mapping_ptr expanded_idx_mapping_ptr expanded_local_pos_ptr cu_num_logits_ptr:*i32",
         dict(BLOCK_SIZE=_pow2(_K + 1)),
         f"{_F}/input_batch.py:623 expand_idx_mapping ({_MR}:930 prepare_inputs, steps with drafts)",
         changes=_retyped({}, {_INPUT_BATCH_INDICES_INT64: "idx_mapping_ptr expanded_idx_mapping_ptr:*i64"})),
    # ---------------------------------------------------------------- block tables (block_table.py)
    _row("_gather_block_tables_kernel", "block_table", "_gather_block_tables_kernel",
         "batch_idx_to_req_idx:*i32 | src_block_table_ptrs dst_block_table_ptrs:*u64 | block_table_strides:*i64"
         " | num_blocks_ptr:*i32 | num_blocks_stride num_reqs:i32",
         dict(BLOCK_SIZE=1024), f"{_F}/block_table.py:149 BlockTables.gather_block_tables ({_MR}:1062 prepare_attn)",
         # 0.33.0 masks blocks behind a sliding window; a dense Llama has none (int32 tensors passed all the same)
         changes=_retyped({"0.33.0": Change("num_computed_tokens_ptr sliding_window_reach_ptr block_sizes_ptr:*i32",
                                            constexprs=dict(MASK_SLIDING_WINDOW=False))},
                          {_INPUT_BATCH_INDICES_INT64: "batch_idx_to_req_idx:*i64"})),
    # the target's slot mappings from the model runner's idx_mapping, the drafts' from the speculator's copy of it:
    # one launch until their request indices' types part (0.28.0), two since
    *(_row(f"_compute_slot_mappings_kernel[{key}]", "block_table", "_compute_slot_mappings_kernel",
           "max_num_tokens:i32 | idx_mapping query_start_loc:*i32 | pos:*i64 | block_table_ptrs:*u64"
           " | block_table_strides:*i64 | block_sizes:*i32 | slot_mappings_ptr:*i64 | slot_mappings_stride cp_rank:i32",
           dict(CP_SIZE=1, CP_INTERLEAVE=1, PAD_ID=-1, TRITON_BLOCK_SIZE=1024),
           f"{_F}/block_table.py:179 BlockTables.compute_slot_mappings ({caller})",
           changes=_retyped({"0.33.0": Change("slot_mapping_enabled dcp_sharded:*i1")},  # per-group bool tensors
                            {indices_int64_at: "idx_mapping:*i64"}))
      for key, caller, indices_int64_at in (
          ("target", f"{_MR}:1068 prepare_attn", _INPUT_BATCH_INDICES_INT64),
          ("draft", "spec_decode/autoregressive/speculator.py:390 _multi_step_decode", _COPIED_INDICES_INT64))),
    # ---------------------------------------------------------------- sampler (sample/)
    _row("_bias_kernel", "sample.logit_bias", "_bias_kernel",
         f"{_LOGITS} | vocab_size:i32 | expanded_idx_mapping_ptr num_allowed_token_ids_ptr allowed_token_ids_ptr:*i32"
         " | allowed_token_ids_stride:i32 | num_logit_bias_ptr bias_token_ids_ptr:*i32 | bias_token_ids_stride:i32"
         " | bias_ptr:*fp32 | bias_stride:i32 | pos_ptr:*i64 | min_lens_ptr num_stop_token_ids_ptr"
         " stop_token_ids_ptr:*i32 | stop_token_ids_stride:i32",
         dict(BLOCK_SIZE=1024, LOGITS_BLOCK_SIZE=8192),
         f"{_F}/sample/logit_bias.py:266 apply_logit_bias (sample/sampler.py:171 apply_sampling_params)",
         changes=_retyped({"0.33.0": Change("restore_when_all_masked_ptr:*i32",  # no request asks for it
                                            constexprs=dict(CHECK_ALL_MASKED_ROWS=False))},
                          {_INPUT_BATCH_INDICES_INT64: "expanded_idx_mapping_ptr:*i64"})),
    _row("_penalties_kernel", "sample.penalties", "_penalties_kernel",
         f"{_LOGITS} | expanded_idx_mapping_ptr token_ids_ptr expanded_local_pos_ptr:*i32"
         " | repetition_penalty_ptr frequency_penalty_ptr presence_penalty_ptr:*fp32 | prompt_bin_mask_ptr:*i32"
         " | prompt_bin_mask_stride:i32 | output_bin_counts_ptr:*i32 | output_bin_counts_stride vocab_size:i32",
         dict(BLOCK_SIZE=8192),
         f"{_F}/sample/penalties.py:200 apply_penalties (sample/sampler.py:176 apply_sampling_params)",
         changes=_retyped({}, {_INPUT_BATCH_INDICES_INT64: "expanded_idx_mapping_ptr:*i64"})),
    _row("_bincount_kernel", "sample.penalties", "_bincount_kernel",
         "expanded_idx_mapping_ptr all_token_ids_ptr:*i32 | all_token_ids_stride:i32 | prompt_len_ptr"
         " prefill_len_ptr prompt_bin_mask_ptr:*i32 | prompt_bin_mask_stride:i32 | output_bin_counts_ptr:*i32"
         " | output_bin_counts_stride:i32",
         dict(BLOCK_SIZE=1024),
         f"{_F}/sample/penalties.py:286 bincount (PenaltiesState.apply_staged_writes, {_MR}:836 add_requests)",
         # the penalties' own list of the new requests' indices, not the model runner's mapping
         changes=_retyped({}, {_COPIED_INDICES_INT64: "expanded_idx_mapping_ptr:*i64"})),
    _row("_bad_words_kernel", "sample.bad_words", "_bad_words_kernel",
         f"{_LOGITS} | expanded_idx_mapping_ptr bad_word_token_ids_ptr:*i32 | bad_word_token_ids_stride:i32"
         " | bad_word_offsets_ptr:*i32 | bad_word_offsets_stride:i32 | num_bad_words_ptr all_token_ids_ptr:*i32"
         " | all_token_ids_stride:i32 | prompt_len_ptr total_len_ptr input_ids_ptr expanded_local_pos_ptr:*i32",
         {}, f"{_F}/sample/bad_words.py:179 apply_bad_words (sample/sampler.py:185 apply_sampling_params)",
         changes=_retyped({}, {_INPUT_BATCH_INDICES_INT64: "expanded_idx_mapping_ptr:*i64"})),
    _row("_temperature_kernel", "sample.gumbel", "_temperature_kernel",
         f"{_LOGITS} | expanded_idx_mapping_ptr:*i32 | temperature_ptr:*fp32 | vocab_size:i32",
         dict(BLOCK_SIZE=8192),
         f"{_F}/sample/gumbel.py:51 apply_temperature (sample/states.py:81, sample/sampler.py:194)",
         changes=_retyped({}, {_INPUT_BATCH_INDICES_INT64: "expanded_idx_mapping_ptr:*i64"})),
    _row("_min_p_kernel", "sample.min_p", "_min_p_kernel",
         f"{_LOGITS} | expanded_idx_mapping_ptr:*i32 | min_p_ptr:*fp32 | vocab_size:i32", dict(BLOCK_SIZE=1024),
         f"{_F}/sample/min_p.py:53 apply_min_p (sample/states.py:92, sample/sampler.py:199)",
         changes=_retyped({}, {_INPUT_BATCH_INDICES_INT64: "expanded_idx_mapping_ptr:*i64"})),
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
    *(row for fp64 in (False, True) for row in (
        _gumbel("target", "none", "none", False, False, "sample/sampler.py:249 Sampler.sample",
                _INPUT_BATCH_INDICES_INT64, fp64),
        _gumbel("draft", "*fp32", "*i64", False, True,
                "spec_decode/speculator.py:284 sample_draft, draft_sample_method='probabilistic', EAGLE",
                _COPIED_INDICES_INT64, fp64),
        _gumbel("draft-per-token", "*fp32", "*i32", True, True,
                "spec_decode/speculator.py:284 sample_draft, draft_sample_method='probabilistic', DFlash",
                _COPIED_INDICES_INT64, fp64))),
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
         f"{_F}/sample/logprob.py:150 compute_topk_scores (logprob_token_ids requested, sample/sampler.py:108)",
         changes=_retyped({}, {_INPUT_BATCH_INDICES_INT64: "expanded_idx_mapping_ptr:*i64"})),
    _row("_prompt_logprobs_token_ids_kernel", "sample.prompt_logprob", "_prompt_logprobs_token_ids_kernel",
         "prompt_logprobs_token_ids_ptr:*i64 | query_start_loc_ptr idx_mapping_ptr num_computed_tokens_ptr"
         " all_token_ids_ptr:*i32 | all_token_ids_stride:i32",
         dict(BLOCK_SIZE=1024),
         f"{_F}/sample/prompt_logprob.py:195 get_prompt_logprobs_token_ids (prompt_logprob.py:74, {_MR}:297)",
         changes=_retyped({}, {_INPUT_BATCH_INDICES_INT64: "idx_mapping_ptr:*i64"})),
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
         changes=_retyped({"0.33.0": _target_dependent_ar("_prepare_prefill_inputs_kernel", 785,
                                                         "prepare_prefill_inputs")},
                          {_INPUT_BATCH_INDICES_INT64: "idx_mapping_ptr:*i64"})),
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
         # (bool) and places KV slots for context parallelism (none here: rank 0 of 1); the request indices it reads
         # are the model runner's, those it writes DFlash's per-sample copy
         changes=_retyped({"0.28.0": Change("out_temperature_ptr:*fp32 | out_seeds_ptr:*i64 | temperature_ptr:*fp32"
                                            " | seeds_ptr:*i64"),
                           "0.33.0": Change("out_is_padding_ptr:*i1 | cp_rank:i32",
                                            constexprs=dict(CP_SIZE=1, CP_INTERLEAVE=1))},
                          {_INPUT_BATCH_INDICES_INT64: "idx_mapping_ptr:*i64",
                           _COPIED_INDICES_INT64: "out_sample_idx_mapping_ptr:*i64"})),
    # ---------------------------------------------------------------- rejection sampling (spec_decode/)
    _stats("greedy-draft", False),
    _stats("draft-logits", True),
    _rejection("greedy-draft", False, False),
    _rejection("draft-logits", True, False),
    _rejection("block-verification", True, True),
    *(_resample(key, has_draft_logits, block, fp64) for fp64 in (False, True)
      for key, has_draft_logits, block in (("greedy-draft", False, False), ("draft-logits", True, False),
                                           ("block-verification", True, True))),
    *(_row(f"_insert_resampled_kernel{'[fp64]' if fp64 else ''}", "spec_decode.rejection_sampler_utils",
           "_insert_resampled_kernel",
           "sampled_ptr:*i64 | sampled_stride:i32 | num_sampled_ptr:*i32 | resampled_local_argmax_ptr:*i64"
           f" | resampled_local_argmax_stride:i32 | resampled_local_max_ptr:{_local_max(fp64)}"
           " | resampled_local_max_stride resample_num_blocks:i32 | cu_num_logits_ptr expanded_idx_mapping_ptr:*i32"
           " | temp_ptr:*fp32",
           dict(PADDED_RESAMPLE_NUM_BLOCKS=1),
           f"{_F}/spec_decode/rejection_sampler_utils.py:1111 rejection_sample "
           f"(spec_decode/rejection_sampler.py:123 RejectionSampler.__call__{_FP64_WHY if fp64 else ''})",
           engine=_FP64_ENGINE if fp64 else (),
           changes=_retyped({}, {_INPUT_BATCH_INDICES_INT64: "expanded_idx_mapping_ptr:*i64"}))
      for fp64 in (False, True)),
    _row("_compute_cumulative_log_p_kernel", "spec_decode.rejection_sampler_utils",
         "_compute_cumulative_log_p_kernel",
         "cumulative_log_p_ptr:*fp32 | target_logits_ptr:*bf16 | target_logits_stride:i32" + _REJECT_STATS
         + " | draft_sampled_ptr:*i32" + _draft_logits(True) + _DRAFT_STATS
         + " | cu_num_logits_ptr idx_mapping_ptr:*i32 | temp_ptr:*fp32 | vocab_num_blocks:i32",
         dict(PADDED_VOCAB_NUM_BLOCKS=1, HAS_DRAFT_LOGITS=True),
         f"{_F}/spec_decode/rejection_sampler_utils.py:959 rejection_sample (rejection_sample_method='block')",
         options=dict(num_warps=1), changes=_retyped({}, {_INPUT_BATCH_INDICES_INT64: "idx_mapping_ptr:*i64"})),
    _row("_compute_local_residual_mass_kernel", "spec_decode.rejection_sampler_utils",
         "_compute_local_residual_mass_kernel",
         "local_residual_mass_ptr:*fp32 | local_residual_mass_stride:i32 | cumulative_log_p_ptr:*fp32"
         " | target_logits_ptr:*bf16 | target_logits_stride:i32" + _REJECT_STATS + _draft_logits(True)
         + _DRAFT_STATS + " | expanded_idx_mapping_ptr expanded_local_pos_ptr:*i32 | temp_ptr:*fp32"
         " | vocab_size num_speculative_steps vocab_num_blocks:i32",
         dict(BLOCK_SIZE=8192, PADDED_VOCAB_NUM_BLOCKS=1),
         f"{_F}/spec_decode/rejection_sampler_utils.py:992 rejection_sample (rejection_sample_method='block', "
         "draft logits)",
         changes=_retyped({"0.28.0": Change("draft_sampled_ptr:*i32"), **_PER_LOGIT},
                          {_INPUT_BATCH_INDICES_INT64: "expanded_idx_mapping_ptr:*i64"})),
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
    # tokens (reasoning_end_str), so the end-prefix loop (static_range(1, END_LEN)) is compiled; the sampler's request
    # indices, the model runner's (int64 from 0.28.0 on: _INPUT_BATCH_INDICES_INT64)
    _row("_update_committed_marker_cache_kernel", "sample.thinking_budget", "_update_committed_marker_cache_kernel",
         "req_ids_ptr:*i64 | thinking_token_budget_ptr all_token_ids_ptr:*i32 | all_token_ids_stride:i32"
         " | total_len_ptr cached_last_start_ptr cached_last_end_ptr cached_scan_pos_ptr"
         " reasoning_start_token_ids_ptr natural_reasoning_end_token_ids_ptr:*i32",
         dict(START_LEN=1, NATURAL_END_LEN=1, MAX_LEN=1, BLOCK=1024),
         f"{_F}/sample/thinking_budget.py:393 apply_thinking_budget (ThinkingBudgetState.apply, "
         "sample/sampler.py:223 apply_sampling_params)", since=_V28),
    _row("_thinking_budget_kernel", "sample.thinking_budget", "_thinking_budget_kernel",
         "logits_ptr:*fp32 | logits_stride:i32 | expanded_idx_mapping_ptr:*i64 | thinking_token_budget_ptr"
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
    # Greedy drafting (no draft logits) passes the helper a temperature of 0.0, a constant: its noise branch is not
    # compiled. Under --use-fp64-gumbel the walk draws fp64 noise (tl_rand64) and compares fp64 scores
    *(_row(f"_selector_walk_kernel{key}", "spec_decode.dflash2.speculator", "_selector_walk_kernel",
           "scores_ptr:*bf16 | candidate_ptr sample_pos_ptr:*i64 | req_state_ptr:*i32 | temperature_ptr:*fp32"
           " | seeds_ptr tokens_ptr:*i64 | realized_scores_ptr:*fp32",
           dict(num_steps=_K, top_k=_TOP_K, BLOCK_K=_pow2(_TOP_K), SAMPLE_PROBABILISTIC=probabilistic,
                USE_FP64=fp64),
           f"{_F}/spec_decode/dflash2/speculator.py:144 DFlash2Speculator._sample_path (speculator.py:213 "
           f"_generate_draft{'' if probabilistic else ', greedy drafting'}"
           f"{'; --use-fp64-gumbel: USE_FP64, fp64 scores and noise' if fp64 else ''})",
           options=dict(num_warps=1), since=_V28, engine=_FP64_ENGINE if fp64 else (),
           # DFlash's per-sample copy of the request indices
           changes=_retyped({}, {_COPIED_INDICES_INT64: "req_state_ptr:*i64"}))
      for key, probabilistic, fp64 in (("", True, False), ("[greedy]", False, False), (f"[{_FP64[1:]}]", True, True),
                                       (f"[greedy{_FP64}]", False, True))),
    _row("_cache_draft_logits_kernel", "spec_decode.dflash2.speculator", "_cache_draft_logits_kernel",
         "draft_logits_ptr:*fp32 | cached_candidate_ptr candidate_ptr:*i64 | scores_ptr:*fp32 | req_state_ptr:*i32"
         " | draft_logits_stride_0 draft_logits_stride_1:i32",
         dict(num_steps=_K, top_k=_TOP_K, BLOCK_K=_pow2(_TOP_K)),
         f"{_F}/spec_decode/dflash2/speculator.py:165 DFlash2Speculator._cache_draft_logits (speculator.py:215 "
         "_generate_draft, probabilistic drafting)", options=dict(num_warps=1), since=_V28,
         changes=_retyped({}, {_COPIED_INDICES_INT64: "req_state_ptr:*i64"})),
    # multi-module MTP (multi_module_mtp/, K MTP modules, one per draft step) on a text model: no input embeddings
    # (None, strides 0, USE_INPUT_EMBEDS=False); hidden states bf16, last_token_indices and cached draft ids int64;
    # request indices the model runner's (int64) where it reads the input batch, the speculator's copy (int32 until
    # 0.33.0) between draft steps
    _row("_prepare_input_buffers_kernel", "spec_decode.multi_module_mtp.speculator", "_prepare_input_buffers_kernel",
         "last_token_indices_ptr:*i64 | draft_input_ids_ptr:*i32 | draft_positions_ptr:*i64"
         " | draft_seq_lens_ptr target_input_ids_ptr:*i32 | target_positions_ptr cached_draft_input_ids_ptr:*i64"
         " | cached_draft_input_ids_stride0:i32 | draft_input_id_overrides_ptr:*i64"
         " | draft_input_id_overrides_stride0:i32 | idx_mapping_ptr:*i64 | last_sampled_ptr:*i64"
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
         " cached_draft_input_embeds_stride1:i32 | idx_mapping_ptr:*i64 | num_rejected_ptr query_start_loc_ptr:*i32"
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
         since=_V28, changes=_retyped({}, {_COPIED_INDICES_INT64: "idx_mapping_ptr:*i64"})),
    _row("_shift_input_ids_kernel", "spec_decode.multi_module_mtp.speculator", "_shift_input_ids_kernel",
         "input_ids_ptr idx_mapping_ptr query_start_loc_ptr:*i32 | last_token_indices_ptr draft_tokens_ptr:*i64",
         dict(BLOCK_SIZE=1024),
         f"{_F}/spec_decode/multi_module_mtp/speculator.py:1069 update_draft_inputs (speculator.py:438 "
         "_generate_drafts, between draft steps)", since=_V28,
         changes=_retyped({}, {_COPIED_INDICES_INT64: "idx_mapping_ptr:*i64"})),
    *_V33_ROWS,
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
    f"{_G}.model_states.recoverssm:_postprocess_recoverssm_align_kernel":
        "Mamba/hybrid models' state only (mamba_hybrid.py's RecoverSSMState, cache_config.use_kda_recoverssm)",
    f"{_G}.sample.watermark:_philox_gumbel_kernel":
        "CUDA-device tensors only: vllm/v1/watermarking/gumbel.py launches it when logits.device.type == 'cuda', "
        "else samples with the PRF in torch (and the warm-up needs is_cuda_alike)",
    f"{_G}.sample.watermark:_draft_step_kernel":
        "CUDA-device tensors only: draft_philox_gumbel_sample, called from gumbel.py's _try_sample_block only "
        "when logits.device.type == 'cuda'",
}
"""MRV2 ``@triton.jit`` kernels not in the table, each with why no dense serving launches it."""

EXCLUDED_SINCE: dict[str, str] = {
    f"{_G}.model_states.mamba_hybrid:_fill_num_accepted_kernel": _V28,
    f"{_G}.spec_decode.multi_module_mtp.speculator:_shift_input_embeds_kernel": _V28,
    f"{_G}.model_states.recoverssm:_postprocess_recoverssm_align_kernel": _V33,
    f"{_G}.sample.watermark:_philox_gumbel_kernel": _V33,
    f"{_G}.sample.watermark:_draft_step_kernel": _V33,
}
"""The first vLLM that launches an excluded kernel, for the kernels newer than vLLM 0.26.0 (``triton_case.launched``;
the coverage test's stale-exclusion check skips them below it)."""

COVERED_THROUGH = _V33
"""The newest vLLM whose MRV2-launched kernels each have a row or an exclusion (the coverage test,
``tests/test_triton_table_span.py``, skips on a newer one)."""
