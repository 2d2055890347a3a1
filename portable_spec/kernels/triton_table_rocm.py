"""Every Triton kernel the ROCm serving path runs, for the AMD compile check (``portable-spec kernels --check-triton
--target hip:gfx942 ...``), and the targets it is compiled for.

ROCm binds no substitute (``substitutions.py``: no entry names ``rocm``), so the rows are vLLM's kernels as shipped:
the shared table's vLLM rows (``triton_table.VLLM_KERNELS``: V1 drafter, rejection sampler, TRITON_ATTN, Model Runner
V2), launched with ROCm's options where vLLM picks others on ROCm (``ROCM_OPTIONS``), plus ROCM_ATTN's own kernels
(the ``ROCM_ATTN`` rows) and the fp8 KV-cache variants (``FP8_ROWS``), each compiled once per fp8 type. Which fp8 type a
target serves is vLLM's rule (``vllm/platforms/rocm.py`` ``RocmPlatform.fp8_dtype``: float8_e4m3fnuz, Triton's
``fp8e4b8``, where the arch names gfx94; float8_e4m3fn, ``fp8e4nv``, elsewhere), so an fp8 type a target is not
served with is compiled for the record and its failure reads "not served on this target", never a failed lane.

The rows resolve per installed vLLM as the MUSA check's do (``triton_case.resolved``, the one resolver): each row states
vLLM 0.26.0's launch and what 0.28.0 and 0.33.0 changed (``triton_case.Change``: 0.33.0's interleaved-V constexpr, the
launch lines that moved), the shared table's rows of kernels new after 0.26.0 come in from their version on, and the
kernels a ROCm-path module launches that no row covers are excluded with why (``NOT_ON_ROCM_PATH``; Model Runner V2's
``triton_table_mrv2.EXCLUDED``, except where ROCm reaches what MUSA does not: ``REACHED_ON_ROCM``, with rows in
``WATERMARK_ROWS``).

ROCM_ATTN's rows are at the shared table's layer (32 query heads, 8 KV heads, head size 128, bf16, KV block 16) with
ROCM_ATTN's cache layout (``paged_attn.py`` ``split_kv_cache``: K ``[blocks, kv_heads, head/x, block, x]``, V ``[blocks,
kv_heads, head, block]``, ``x = 16 // element size``: 8 for bf16, 16 for fp8). Like the shared table, importing this
module imports neither vLLM nor Triton.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from portable_spec.kernels.triton_case import Change, KernelCase, resolved, sig
from portable_spec.kernels.triton_table import V1_KERNELS, VLLM_KERNELS, Pick
from portable_spec.kernels.triton_table_mrv2 import _KEY_HALVES
from portable_spec.kernels.triton_table_mrv2 import EXCLUDED as MRV2_EXCLUDED

TARGETS: dict[str, tuple[str, int | str, int]] = {
    "hip:gfx942": ("hip", "gfx942", 64),
    "hip:gfx90a": ("hip", "gfx90a", 64),
    "cuda:90": ("cuda", 90, 32),
}
"""``--target`` name -> Triton's ``GPUTarget`` (backend, arch, warp size): MI300 (gfx942), MI250 (gfx90a), and H100
(sm_90) for comparison."""

SERVED: dict[str, str] = {"hip:gfx942": "fp8e4b8", "hip:gfx90a": "fp8e4nv"}
"""The targets ROCm serves, each with the Triton type of the fp8 KV cache vLLM gives it (``RocmPlatform.fp8_dtype``:
fnuz on gfx94x). A target not here (``cuda:90``) is compiled for comparison only and never fails the check."""

FP8_TYPES = ("fp8e4b8", "fp8e4nv")
"""Every fp8 KV type some ROCm target serves; each fp8 row is compiled with each of them on every target."""

_OPS = "vllm/v1/attention/ops"
_PP = f"{_OPS}/prefix_prefill.py"
_CP = f"{_OPS}/chunked_prefill_paged_decode.py"
_RC = f"{_OPS}/triton_reshape_and_cache_flash.py"
_KV = "fp8kv"  # the placeholder type an fp8 row gives its KV-cache pointers
_V28, _V33 = "0.28.0", "0.33.0"
_NOT_INTERLEAVED = dict(INTERLEAVED_V_PACK_FACTOR=0)
"""vLLM 0.33.0's ROCM_ATTN can interleave its V cache (``RocmAttentionImpl._use_interleaved_v_cache``, set only by the
AITER-fused QK-norm/RoPE/cache update, ``rocm_attn.py:534``); the unfused path this check stands for passes 0."""
_RESHAPE = V1_KERNELS[-1]  # TRITON_ATTN's cache writer, which ROCM_ATTN and the fp8 rows launch too


@dataclass(frozen=True)
class RocmRow:
    """One compile on every target: ``case`` as the shared table describes it, ``fp8_kv`` the Triton type put in place
    of the ``*fp8kv`` placeholder (None: the row has no fp8 KV cache), ``source`` which list the row comes from."""

    case: KernelCase
    source: str
    fp8_kv: str | None = None

    @property
    def key(self) -> str:
        return self.case.key if self.fp8_kv is None else f"{self.case.key}[{self.fp8_kv}]"

    def served(self, target: str) -> bool:
        """Whether ROCm runs this compile on ``target``: a ROCm target, and the fp8 type that target is served with."""
        return target in SERVED and self.fp8_kv in (None, SERVED[target])

    def signature(self) -> dict[str, str]:
        return {n: (f"*{self.fp8_kv}" if ty == f"*{_KV}" else ty) for n, ty in self.case.signature.items()}


ROCM_OPTIONS: dict[str, dict[str, int]] = {
    "reshape_and_cache_kernel_flash": dict(num_warps=8, num_stages=4),
}
"""Shared-table rows vLLM launches with other options on ROCm (``triton_reshape_and_cache_flash.py:418``:
``num_stages = 4; num_warps = 8`` when ``current_platform.is_rocm()``; 16 warps / 10 stages on CUDA)."""

_PA_SIG = (
    "output_ptr query_ptr key_cache_ptr value_cache_ptr:*bf16 | sink_ptr:none | block_tables_ptr seq_lens_ptr:*i32"
    " | alibi_slopes_ptr:none | scale:fp32 | k_scale v_scale:*fp32 | out_scale_inv:fp32"
    " | block_table_stride query_stride_0 query_stride_1 output_stride_0 output_stride_1:i64"
    " | stride_k_cache_0 stride_k_cache_1 stride_k_cache_2 stride_k_cache_3 stride_k_cache_4:i64"
    " | stride_v_cache_0 stride_v_cache_1 stride_v_cache_2 stride_v_cache_3:i64 | query_start_len_ptr:*i32")
_PA_CONST = dict(num_query_heads=32, num_queries_per_kv=4, num_queries_per_kv_padded=16, BLOCK_SIZE=16,
                 PHYSICAL_BLOCK_SIZE=16, HEAD_SIZE=128, HEAD_SIZE_PADDED=128, USE_ALIBI_SLOPES=False,
                 SLIDING_WINDOW=0, filter_by_query_len=True, USE_SINKS=False, USE_FP8=False)
_PP_STRIDES = ("stride_b_loc_b stride_b_loc_s stride_qbs stride_qh stride_qd stride_kbs stride_kh stride_kd stride_vbs"
               " stride_vh stride_vd stride_obs stride_oh stride_od stride_k_cache_bs stride_k_cache_h"
               " stride_k_cache_d")
_FWD_SIG = (
    "Q K V K_cache V_cache:*bf16 | sink_ptr:none | B_Loc:*i32 | sm_scale:fp32 | k_scale v_scale:*fp32"
    f" | out_scale_inv:fp32 | B_Start_Loc B_Seqlen:*i32 | Out:*bf16 | {_PP_STRIDES}"
    " stride_k_cache_x stride_v_cache_bs stride_v_cache_h stride_v_cache_d stride_v_cache_bl:i32")
_FWD_CONST = dict(num_queries_per_kv=4, IN_PRECISION=None, BLOCK_M=128, BLOCK_DMODEL=128, BLOCK_DMODEL_PADDED=128,
                  BLOCK_SIZE=32, PHYSICAL_BLOCK_SIZE=16, BLOCK_N=64, SLIDING_WINDOW=0, num_unroll_cache=4,
                  num_unroll_request=1, SKIP_DECODE=True, USE_SINKS=False, USE_FP8=False, CAUSAL=True)


def _paged_sig(kv: str) -> dict[str, str]:
    """``kernel_paged_attention_2d``'s types: bf16 query and output, KV caches of Triton type ``kv``."""
    return {**sig(_PA_SIG), "key_cache_ptr": kv, "value_cache_ptr": kv}


def _paged_at(line: int, forward_line: int, version: str = "") -> str:
    return (f"{_CP}:{line} chunked_prefill_paged_decode (decode rows, the Triton fallback of paged_attention_rocm; "
            f"RocmAttentionImpl.forward, rocm_attn.py:{forward_line}{f'; vLLM {version}' if version else ''})")


def _fwd_at(line: int, caller_line: int, version: str = "") -> str:
    return (f"{_PP}:{line} context_attention_fwd (max_query_len > 1: prefill and verify; from {_CP}:{caller_line}"
            f"{f'; vLLM {version}' if version else ''})")


def _rocm_attn(kv: str, x: int, suffix: str = "") -> tuple[KernelCase, ...]:
    """ROCM_ATTN's kernels with KV caches of Triton type ``kv`` (``*bf16``, or the fp8 placeholder), ``x`` the
    cache layout's innermost K split."""
    return (
        KernelCase(  # decode rows, when ROCm's custom paged attention (a HIP kernel) does not apply
            f"rocm_attn/kernel_paged_attention_2d{suffix}",
            "vllm.v1.attention.ops.chunked_prefill_paged_decode:kernel_paged_attention_2d",
            _paged_sig(kv), {**_PA_CONST, "x": x}, _paged_at(447, 446),
            changes={_V28: Change(launched_at=_paged_at(461, 446, _V28)),
                     _V33: Change(constexprs=_NOT_INTERLEAVED, launched_at=_paged_at(480, 444, _V33))}),
        KernelCase(  # queries longer than one token: prefill and the spec-decode verify batch
            f"rocm_attn/_fwd_kernel{suffix}", "vllm.v1.attention.ops.prefix_prefill:_fwd_kernel",
            {**sig(_FWD_SIG), "K_cache": kv, "V_cache": kv}, {**_FWD_CONST, "x": x, "stride_k_cache_bl": x},
            _fwd_at(820, 304), options=dict(num_warps=4, num_stages=1),
            changes={_V28: Change(launched_at=_fwd_at(968, 318, _V28)),
                     _V33: Change(constexprs=_NOT_INTERLEAVED, launched_at=_fwd_at(995, 335, _V33))}),
    )


def _relaunched(case: KernelCase, **lines: str) -> dict[str, Change]:
    """``case``'s changes with the launch line of each version in ``lines`` (``v0_33_0="file:line ..."``) set."""
    out = dict(case.changes)
    for name, where in lines.items():
        version = name.removeprefix("v").replace("_", ".")
        out[version] = replace(out.get(version, Change()), launched_at=where)
    return out


ROCM_ATTN: tuple[KernelCase, ...] = _rocm_attn("*bf16", 8) + (
    KernelCase(  # ALiBi models' prefill and verify
        "rocm_attn/_fwd_kernel_alibi", "vllm.v1.attention.ops.prefix_prefill:_fwd_kernel_alibi",
        sig("Q K V K_cache V_cache:*bf16 | B_Loc:*i32 | sm_scale:fp32 | k_scale v_scale:*fp32"
            " | B_Start_Loc B_Seqlen:*i32 | Alibi_slopes:*fp32 | block_size x:i32 | Out:*bf16"
            f" | {_PP_STRIDES} stride_k_cache_bl stride_k_cache_x stride_v_cache_bs stride_v_cache_h"
            " stride_v_cache_d stride_v_cache_bl num_queries_per_kv:i32"),
        dict(IN_PRECISION=None, BLOCK_M=128, BLOCK_DMODEL=128, BLOCK_DMODEL_PADDED=128, BLOCK_N=128,
             SKIP_DECODE=True),
        f"{_PP}:746 context_attention_fwd (alibi_slopes given; NUM_WARPS = 4 on ROCm, prefix_prefill.py:16)",
        options=dict(num_warps=4, num_stages=1),
        changes={_V28: Change(launched_at=f"{_PP}:894 context_attention_fwd (alibi_slopes given; vLLM {_V28})"),
                 _V33: Change(constexprs=_NOT_INTERLEAVED,
                              launched_at=f"{_PP}:930 context_attention_fwd (alibi_slopes given; vLLM {_V33})")}),
    replace(  # ROCM_ATTN's cache update for blocks other than 16/32 or a stride-padded (hybrid) layout
        _RESHAPE, key="rocm_attn/reshape_and_cache_kernel_flash[head-major]",
        constexprs=dict(num_heads=8, head_size=128, block_size=544, x=8, USE_HEAD_MAJOR_LAYOUT=True,
                        FP8_KV_CACHE=False, TILE_SIZE=1024),
        launched_at=f"{_RC}:434 triton_reshape_and_cache_flash (RocmAttentionImpl.do_kv_cache_update, "
                    "rocm_attn.py:508: block size not 16/32, e.g. 544, or a hybrid layout)",
        options=ROCM_OPTIONS["reshape_and_cache_kernel_flash"],
        changes=_relaunched(_RESHAPE, v0_33_0=f"{_RC}:455 triton_reshape_and_cache_flash "
                            f"(RocmAttentionImpl.do_kv_cache_update, rocm_attn.py:516; vLLM {_V33})")),
)
"""ROCM_ATTN's Triton kernels (``vllm/v1/attention/backends/rocm_attn.py``), bf16 KV cache."""

_FP8 = f"*{_KV}"


def _fp8(case: KernelCase, **constexprs) -> KernelCase:
    """A shared-table row with an fp8 KV cache: its cache pointers ``*fp8kv``, its versions' changes kept (each launch
    line marked), ROCm's options where vLLM sets them."""
    mark = ", fp8 KV cache"
    return replace(case, key=f"{case.key}[fp8-kv]", launched_at=case.launched_at + mark,
                   signature={**case.signature, "key_cache_ptr": _FP8, "value_cache_ptr": _FP8},
                   constexprs={**case.constexprs, **constexprs}, options=ROCM_OPTIONS.get(case.key, case.options),
                   changes={v: replace(c, launched_at=c.launched_at + mark) if c.launched_at else c
                            for v, c in case.changes.items()})


FP8_CASES: tuple[KernelCase, ...] = _rocm_attn(_FP8, 16, "[fp8-kv]") + (
    _fp8(_RESHAPE, FP8_KV_CACHE=True),
    *(_fp8(case) for case in V1_KERNELS if case.key in ("kernel_unified_attention[2d]",
                                                        "kernel_unified_attention[3d]")),
)
"""The rows that read or write an fp8 KV cache (``--kv-cache-dtype fp8``), pointers typed ``*fp8kv`` until a row
is made per fp8 type. vLLM views the uint8 cache as ``current_platform.fp8_dtype()`` before each launch
(``triton_reshape_and_cache_flash.py:403``, ``chunked_prefill_paged_decode.py:343``, ``prefix_prefill.py:687``);
the query stays bf16 on ROCm (no fp8 query input there)."""

NOT_ON_ROCM_PATH: dict[str, str] = {
    "vllm.v1.attention.ops.triton_prefill_attention:_fwd_kernel":
        "encoder and encoder-only attention only (RocmAttentionImpl._forward_encoder_attention, rocm_attn.py:351); "
        "decoder serving with a drafter never launches it",
    "vllm.v1.attention.ops.triton_reshape_and_cache_flash:_reshape_cache_per_token_head":
        "per-token-head quantized KV caches only (int8/fp8_per_token_head), a TRITON_ATTN option this check does "
        "not serve",
    "vllm.v1.attention.ops.int4_per_token_head:_attn_packed":
        "int4 per-token-head KV cache only (--kv-cache-dtype int4_per_token_head; unified_attention's int4 branch, "
        "triton_unified_attention.py:862)",
    "vllm.v1.attention.ops.int4_per_token_head:_hadamard_mma_kernel":
        "int4 per-token-head KV cache only (its Hadamard rotation)",
    "vllm.v1.attention.ops.triton_reshape_and_cache_flash:reshape_and_cache_kernel_flash_diffkv":
        "the diff-KV backend only (triton_attn_diffkv.py, models whose K and V head sizes differ)",
}
"""Kernels launched in a ROCm-path module that no row covers, each with why the ROCm serving path this check stands
for (decoder models, bf16 or fp8 KV cache, with or without a drafter) does not launch it."""

ROCM_PATH_MODULES: tuple[str, ...] = (
    "vllm.v1.attention.ops.chunked_prefill_paged_decode", "vllm.v1.attention.ops.prefix_prefill",
    "vllm.v1.attention.ops.triton_reshape_and_cache_flash", "vllm.v1.attention.ops.triton_unified_attention",
    "vllm.v1.attention.ops.triton_prefill_attention", "vllm.v1.spec_decode.utils",
    "vllm.v1.sample.rejection_sampler",
)
"""The modules whose launched kernels the ROCm path runs (ROCM_ATTN's and TRITON_ATTN's ops, the V1 drafter and
rejection sampler; Model Runner V2's are ``triton_table_mrv2``'s). ``tests/test_rocm_compile.py`` derives the ops
modules from ``rocm_attn.py``'s imports and fails on a launched kernel with neither a row nor a reason here."""


_G = "vllm.v1.worker.gpu"
_WM = "vllm/v1/worker/gpu/sample/watermark.py"
_PHILOX_SIG = (
    "local_argmax_ptr:*i64 | local_argmax_stride:i32 | local_max_ptr:*fp32 | local_max_stride:i32"
    " | logits_ptr:{logits} | logits_stride:i32 | contexts_ptr:{contexts} | context_stride:i32 | skip_mask_ptr:{skip}"
    " | expanded_idx_mapping_ptr seeds_ptr pos_ptr:{state} | temp_ptr:{temp} | logits_cache_ptr:{cache}"
    " | logits_cache_stride_0 logits_cache_stride_1:i32 | logits_cache_col_ptr:{col} | logits_cache_source_ptr:{cache}"
    " | logits_cache_source_stride:i32 | key_0_value:{key_0} | key_1_value:{key_1} | vocab_size:i32")


def _philox(key: str, line: int, caller: str, logits: str, contexts: str, state: bool, cache: bool, col: str,
            halves: str = "", fp64: bool = False, **constexprs) -> KernelCase:
    """One launch of the watermark's ``_philox_gumbel_kernel`` (vLLM 0.33.0): logits in the model's head dtype (bf16)
    or divided by the fp32 temperatures (fp32); contexts int32 (the sampler's) or int64 (the draft watermarker's
    state); the sampling state (skip mask, request indices, seeds, positions, temperatures) None in the plain launch;
    the logits cache (bf16, the drafts' ``draft_logits``) and its source only in a draft launch. The key's 32-bit
    halves are typed by value (``_KEY_HALVES[halves]``); under ``--use-fp64-gumbel`` (``fp64``) the launches with a
    sampling state pass ``USE_FP64`` and fp64 block maxima."""
    key_0, key_1 = _KEY_HALVES[halves]
    suffix = "".join(f"-{part}" for part in (halves, "fp64" if fp64 else "") if part)
    return KernelCase(
        f"rocm_mrv2/sample.watermark._philox_gumbel_kernel[{key}{suffix}]",
        f"{_G}.sample.watermark:_philox_gumbel_kernel",
        {**sig(_PHILOX_SIG.format(logits=logits, contexts=contexts, skip="*i1" if state else "none",
                                  state="*i64" if state else "none", temp="*fp32" if state else "none",
                                  cache="*bf16" if cache else "none", col=col, key_0=key_0, key_1=key_1)),
         **({"local_max_ptr": "*fp64"} if fp64 else {})},
        dict(CONTEXT_WIDTH=4, BLOCK_SIZE=1024, USE_FP64=fp64, **constexprs),
        f"{_WM}:{line} ({caller}{'; --use-fp64-gumbel' if fp64 else ''})", since=_V33)


def _draft_step(key: str, sample: bool, prepare_next: bool, fp64: bool = False) -> KernelCase:
    """One launch of ``_draft_step_kernel`` in ``draft_philox_gumbel_sample`` (``finish_step``: step -1 prepares the
    first step, the middle steps sample and prepare, the last only samples), under deduplicate_contexts
    'single_turn' (history 8192, no prompt); K = 3 steps, the draft watermarker's int64 contexts and prior contexts,
    DFlash's int32 sample columns as the next steps; under ``--use-fp64-gumbel`` (``fp64``) the block maxima it reads
    are fp64."""
    return KernelCase(
        f"rocm_mrv2/sample.watermark._draft_step_kernel[{key}{'-fp64' if fp64 else ''}]",
        f"{_G}.sample.watermark:_draft_step_kernel",
        sig("sampled_ptr:*i64 | sampled_stride step:i32 | local_argmax_ptr:*i64"
            f" | local_max_ptr:{'*fp64' if fp64 else '*fp32'}"
            " | num_blocks:i32 | contexts_ptr:*i64 | context_stride:i32 | skip_mask_ptr:*i1 | next_req_indices_ptr:*i64"
            " | next_steps_ptr:*i32 | temp_ptr:*fp32 | enabled_ptr:*i1 | all_token_ids_ptr:*i32"
            " | all_token_ids_stride:i32 | prompt_lens_ptr total_lens_ptr:*i32 | prior_contexts_ptr:*i64"
            " | prior_contexts_stride_0 prior_contexts_stride_1:i32"),
        dict(CONTEXT_WIDTH=4, NUM_SPECULATIVE_STEPS=3, MAX_HISTORY=8192, INCLUDE_PROMPT=False, DEDUPLICATE=True,
             SAMPLE=sample, PREPARE_NEXT=prepare_next, BLOCKS_POW2=4),
        f"{_WM}:984 draft_philox_gumbel_sample's finish_step (gumbel.py:119 _try_sample_block, "
        "watermarking/spec_decode.py:181 sample_block, a parallel drafter's K steps: DFlash"
        f"{'; --use-fp64-gumbel' if fp64 else ''})", since=_V33)


_PHILOX_LAUNCHES: tuple[tuple, ...] = (
    ("sampler", 786, "philox_gumbel_sample, from watermarking/gumbel.py:64 _sample_watermarked: every "
     "request watermarked, no repeated context; logits unprocessed (bf16) as at temperature 1", "*bf16", "*i32",
     False, False, "none", dict(IS_DRAFTING=False, PER_TOKEN_COL=False, APPLY_TEMPERATURE=False)),
    ("sampler-mixed", 786, "philox_gumbel_sample, from gumbel.py:83 _try_sample_mixed "
     "(gpu_sampler.py GPUWatermarkSampler._sample_random: a skip mask for unwatermarked or repeated rows); "
     "logits processed, so fp32 (sample/sampler.py:242)", "*fp32", "*i32", True, False, "none",
     dict(IS_DRAFTING=False, PER_TOKEN_COL=False, APPLY_TEMPERATURE=False)),
    ("draft", 786, "philox_gumbel_sample, from gumbel.py:83 _try_sample_mixed, watermarking/spec_decode.py "
     "DraftWatermarker.sample: one draft step (EAGLE), logits divided by the temperatures, its int64 steps as "
     "the cache columns", "*fp32", "*i64", True, True, "*i64",
     dict(IS_DRAFTING=True, PER_TOKEN_COL=True, APPLY_TEMPERATURE=False)),
    ("draft-block", 1017, "draft_philox_gumbel_sample, from gumbel.py:119 _try_sample_block: a parallel "
     "drafter's K steps (DFlash), DFlash's int32 sample columns", "*bf16", "*i64", True, True, "*i32",
     dict(IS_DRAFTING=True, PER_TOKEN_COL=True, APPLY_TEMPERATURE=True)),
)
"""The four launches of ``_philox_gumbel_kernel`` (key, line, caller, logits, contexts, sampling state, logits cache,
cache columns, constexprs). The plain sampler's launch (gumbel.py:64) passes no ``use_fp64``: fp32 only."""

WATERMARK_ROWS: tuple[KernelCase, ...] = (
    *(_philox(*launch[:-1], **launch[-1]) for launch in _PHILOX_LAUNCHES),
    # every launch with each of the other three key-half signatures, and the fp64 launches (a sampling state)
    *(_philox(*launch[:-1], halves=halves, **launch[-1]) for launch in _PHILOX_LAUNCHES
      for halves in _KEY_HALVES if halves),
    *(_philox(*launch[:-1], fp64=True, **launch[-1]) for launch in _PHILOX_LAUNCHES if launch[5]),
    *(_draft_step(key, sample, prepare_next, fp64) for fp64 in (False, True)
      for key, sample, prepare_next in (("first", False, True), ("middle", True, True), ("last", True, False))),
)
"""vLLM 0.33.0's watermark Philox sampler, which ROCm reaches and MUSA does not (``REACHED_ON_ROCM``), under a
watermark config at its defaults (context width 4) with a Philox PRF, at the shared table's shapes (vocab 1024: one
block of 1024): each launch with every key-half signature (``_KEY_HALVES``), and, under ``--use-fp64-gumbel``, the
launches that sample with a state (and the draft step that reads their fp64 maxima) with ``USE_FP64``."""

REACHED_ON_ROCM: dict[str, str] = {
    f"{_G}.sample.watermark:_philox_gumbel_kernel":
        "vLLM 0.33.0's watermark samples with it when logits.device.type == 'cuda' (vllm/v1/watermarking/gumbel.py:64, "
        ":83, :112), which a ROCm tensor is (torch's HIP build names its device 'cuda'); a MUSA tensor is not",
    f"{_G}.sample.watermark:_draft_step_kernel":
        "the draft watermarker's Philox block sampler (draft_philox_gumbel_sample, from gumbel.py:112 "
        "_try_sample_block when logits.device.type == 'cuda', as a ROCm tensor's is)",
}
"""Model Runner V2 kernels ``triton_table_mrv2.EXCLUDED`` leaves out for a reason that does not hold on ROCm, with why
ROCm reaches them: they have rows here (``WATERMARK_ROWS``)."""


def rocm_exclusions() -> dict[str, str]:
    """Every kernel a ROCm-path module launches that no row compiles, with why: ``NOT_ON_ROCM_PATH`` and Model Runner
    V2's exclusions whose reason holds on ROCm (all but ``REACHED_ON_ROCM``)."""
    return {**NOT_ON_ROCM_PATH, **{k: why for k, why in MRV2_EXCLUDED.items() if k not in REACHED_ON_ROCM}}


def _shared(case: KernelCase) -> KernelCase:
    options = ROCM_OPTIONS.get(case.key)
    return replace(case, options=options) if options else case


def rocm_rows(pick: Pick | None = None) -> tuple[RocmRow, ...]:
    """Every compile of the check, in order: the shared table's vLLM rows with ROCm's options, ROCM_ATTN's, the MRV2
    rows only ROCm reaches (``WATERMARK_ROWS``), then each
    fp8 row once per fp8 type, each as the installed vLLM launches it (``triton_case.resolved``; ``pick`` defaults
    to the installed vLLM's): a kernel new in a later vLLM (``since``) is compiled from that vLLM on."""
    rows = [RocmRow(_shared(c), "table") for c in resolved(VLLM_KERNELS, pick)]
    rows += [RocmRow(c, "rocm_attn") for c in resolved(ROCM_ATTN, pick)]
    rows += [RocmRow(c, "rocm_mrv2") for c in resolved(WATERMARK_ROWS, pick)]
    rows += [RocmRow(c, "fp8_kv", fp8) for c in resolved(FP8_CASES, pick) for fp8 in FP8_TYPES]
    return tuple(rows)
