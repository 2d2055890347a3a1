"""The declared capability table: platform x attention backend, one row each, every row citing its source.

CUDA and ROCm rows transcribe vLLM 0.26.0's backend classes (``vllm/v1/attention/backends/*.py``); the test
``tests/test_attention_agreement.py`` (cpu lane) and ``tests/gpu/test_attention_verify.py`` (cuda lane) compare them
claim by claim with the real classes, so a vLLM upgrade shows up as a failing test instead of silent drift.
MUSA rows come from vllm-musa (``vllm_musa/v1/attention/backends/flash_attn.py``, MUSAFlashAttentionBackend) and
upstream Triton; nobody here can run MUSA or ROCm, so those rows are declared-only. A row whose class a vendor
registers over vLLM's enum member names it (``vendor_class``); the vllm-musa backends the table does not cover are
in ``VENDOR_BACKENDS_NOT_IN_TABLE`` with the reason (``tests/test_vllm_musa_contract.py`` checks both against
``vllm_adapter/platform/vllm_musa_contract.py``).

Row order within a platform is vLLM's selection priority (``ports/cuda_port.py:83``, ``ports/rocm_port.py:407``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from portable_spec.attention_caps.model import (
    MM_PREFIX_TEXT_ONLY,
    BackendCaps,
    BlockSizes,
    Cond,
    HeadSizes,
)

VLLM_VERSION = "0.26.0"
_B = "vllm/v1/attention/backends"
_BASE_KV = ("auto", "float16", "bfloat16")
_FP8_KV = ("fp8", "fp8_e4m3", "fp8_e5m2")
_TRITON_KV = _BASE_KV + _FP8_KV + ("int4_per_token_head", "int8_per_token_head", "fp8_per_token_head")
_HALF = ("float16", "bfloat16")
_HALF_FP32 = ("float16", "bfloat16", "float32")
_MULT16 = BlockSizes(multiple_of=16)


def _triton_row(platform: str, source_prefix: str, extra_notes: tuple[str, ...] = ()) -> BackendCaps:
    return BackendCaps(
        platform=platform, backend="TRITON_ATTN",
        class_path="vllm.v1.attention.backends.triton_attn.TritonAttentionBackend",
        head_sizes=HeadSizes(minimum=32), dtypes=_HALF_FP32, kv_cache_dtypes=_TRITON_KV, kernel_block_sizes=_MULT16,
        non_causal=True, mm_prefix=True, sinks=True, batch_invariance=True, per_head_quant_scales=False,
        graph_support="ALWAYS", requires=("triton",),
        source=f"{source_prefix}vLLM {VLLM_VERSION} {_B}/triton_attn.py TritonAttentionBackend (l.271), "
               "TritonAttentionMetadataBuilder._cudagraph_support (l.102)",
        notes=("fp8_e5m2 is accepted but stored and read as the platform fp8 dtype (e4m3): "
               "triton_reshape_and_cache_flash and TritonAttentionImpl both view the cache as "
               "current_platform.fp8_dtype()",
               "batch invariance needs VLLM_BATCH_INVARIANT=1 at import (it disables the 3D split-softmax "
               "decode kernel)") + extra_notes,
    )


TABLE: tuple[BackendCaps, ...] = (
    # ---------------------------------------------------------------- cuda
    BackendCaps(
        platform="cuda", backend="FLASH_ATTN",
        class_path="vllm.v1.attention.backends.flash_attn.FlashAttentionBackend",
        head_sizes=Cond(HeadSizes(multiple_of=8, maximum=256), "fa4-available", HeadSizes(multiple_of=8, maximum=512)),
        dtypes=_HALF,
        kv_cache_dtypes=Cond(_BASE_KV, "fa3+sm90", _BASE_KV + ("fp8", "fp8_e4m3")),
        kernel_block_sizes=_MULT16,
        non_causal=True,
        mm_prefix=Cond(False, "fa4-available", True),
        sinks=Cond(False, "fa>=3", True),
        batch_invariance=True,
        per_head_quant_scales=Cond(False, "fa>=3", True),
        graph_support=Cond("UNIFORM_BATCH", "fa==3", "ALWAYS"),
        source=f"vLLM {VLLM_VERSION} {_B}/flash_attn.py FlashAttentionBackend (l.71: supports_head_size l.168, "
               "supports_kv_cache_dtype l.178, supports_mm_prefix l.191, supports_sink l.195, "
               "supports_combination l.205), FlashAttentionMetadataBuilder._cudagraph_support (l.341); "
               f"{_B}/fa_utils.py get_flash_attn_version",
        notes=("compute capability >= 8.0; supports_combination refuses sinks below 9.0",
               "head sizes 257-512 and mm-prefix need FA4 (CuTe DSL); vLLM's is_fa_version_supported(4) only checks "
               "that cute/interface.py exists, so a host without the cutlass DSL package still claims them",
               "mm-prefix also needs get_flash_attn_version(head_size) == 4 (supports_combination)",
               "batch invariance: vLLM passes num_splits=1 under VLLM_BATCH_INVARIANT=1; FA4 falls back to FA2 there",
               "graph support is decided at import: ALWAYS with FA3, UNIFORM_BATCH otherwise (FA2)"),
    ),
    BackendCaps(
        platform="cuda", backend="FLASHINFER",
        class_path="vllm.v1.attention.backends.flashinfer.FlashInferBackend",
        head_sizes=HeadSizes(values=(64, 128, 256, 512)),
        dtypes=_HALF,
        kv_cache_dtypes=Cond(_BASE_KV + _FP8_KV, "sm100+trtllm", _BASE_KV + _FP8_KV + ("nvfp4",)),
        kernel_block_sizes=BlockSizes(values=(16, 32, 64)),
        non_causal=True, mm_prefix=False,
        sinks=Cond(False, "sm100+trtllm", True),
        batch_invariance=False, per_head_quant_scales=False,
        graph_support=Cond("UNIFORM_SINGLE_TOKEN_DECODE", "sm100+trtllm", "UNIFORM_BATCH"),
        requires=("flashinfer",),
        source=f"vLLM {VLLM_VERSION} {_B}/flashinfer.py FlashInferBackend (l.342: get_supported_kernel_block_sizes "
               "l.355, supports_kv_cache_dtype l.446, get_supported_head_sizes l.456, supports_sink l.472), "
               "FlashInferMetadataBuilder.get_cudagraph_support (l.893); flashinfer-python 0.6.14",
        notes=("does not import without a GPU (module import initialises CUDA)",
               "compute capability 8.0 to 12.1",
               "SM90 (H100) is UNIFORM_SINGLE_TOKEN_DECODE (XQA decode); UNIFORM_BATCH needs trtllm-gen and causal "
               "layers: a non-causal (DFlash) draft stays UNIFORM_SINGLE_TOKEN_DECODE",
               "block sizes 128-1024 are added on SM100 trtllm-gen for GQA models once a model config exists",
               "kernels are JIT-built by flashinfer at first use (minutes) unless flashinfer-jit-cache is installed"),
    ),
    _triton_row("cuda", "", (
        "fp8_e5m2 on CUDA, read from the source and not run: TritonAttentionImpl takes fp8 queries on CUDA, so "
        "vLLM's Attention layer builds a query quantizer for every fp8* KV dtype and then asserts kv_cache_dtype in "
        "{fp8, fp8_e4m3, nvfp4} at the first forward (model_executor/layers/attention/attention.py:473, :520); "
        "the verifier checks the kernel itself, with bf16 queries",)),
    BackendCaps(
        platform="cuda", backend="FLEX_ATTENTION",
        class_path="vllm.v1.attention.backends.flex_attention.FlexAttentionBackend",
        head_sizes=HeadSizes(), dtypes=_HALF_FP32, kv_cache_dtypes=_BASE_KV, kernel_block_sizes=_MULT16,
        non_causal=True, mm_prefix=True, sinks=False, batch_invariance=True, per_head_quant_scales=False,
        graph_support="ALWAYS",
        source=f"vLLM {VLLM_VERSION} {_B}/flex_attention.py FlexAttentionBackend (l.85), "
               "FlexAttentionMetadataBuilder._cudagraph_support (l.856); torch.nn.attention.flex_attention",
        notes=("get_supported_head_sizes() is [] (any head size)",
               "batch invariance: vLLM forces BLOCK_M = BLOCK_N = 16 and IS_DIVISIBLE=False under "
               "VLLM_BATCH_INVARIANT=1"),
    ),
    # ---------------------------------------------------------------- rocm (declared-only)
    BackendCaps(
        platform="rocm", backend="ROCM_ATTN",
        class_path="vllm.v1.attention.backends.rocm_attn.RocmAttentionBackend",
        head_sizes=HeadSizes(values=(32, 64, 80, 96, 128, 160, 192, 224, 256)),
        dtypes=_HALF_FP32, kv_cache_dtypes=_BASE_KV + _FP8_KV, kernel_block_sizes=_MULT16,
        non_causal=True, mm_prefix=True, sinks=False, batch_invariance=False, per_head_quant_scales=False,
        graph_support="ALWAYS",
        source=f"vLLM {VLLM_VERSION} {_B}/rocm_attn.py RocmAttentionBackend (l.165), "
               "RocmAttentionMetadataBuilder._cudagraph_support (l.77)",
        notes=("native HIP paged kernel for block sizes 16/32, Triton for other multiples of 16",
               "supports_kv_connector() is False: skipped when a KV connector is configured"),
    ),
    BackendCaps(
        platform="rocm", backend="ROCM_AITER_FA",
        class_path="vllm.v1.attention.backends.rocm_aiter_fa.AiterFlashAttentionBackend",
        head_sizes=HeadSizes(values=(64, 128, 256)),
        dtypes=_HALF, kv_cache_dtypes=_BASE_KV + _FP8_KV, kernel_block_sizes=BlockSizes(values=(16, 32)),
        non_causal=True, mm_prefix=False, sinks=True, batch_invariance=False, per_head_quant_scales=False,
        graph_support="UNIFORM_BATCH", requires=("aiter",),
        source=f"vLLM {VLLM_VERSION} {_B}/rocm_aiter_fa.py AiterFlashAttentionBackend (l.713), "
               "AiterFlashAttentionMetadataBuilder._cudagraph_support (l.401)",
        notes=("MI3xx only: supports_compute_capability() asks vllm.platforms.rocm.on_mi3xx()",
               "its get_name() returns 'FLASH_ATTN' although it is registered as ROCM_AITER_FA",
               "selected only when AITER MHA is enabled (VLLM_ROCM_USE_AITER)"),
    ),
    BackendCaps(
        platform="rocm", backend="ROCM_AITER_UNIFIED_ATTN",
        class_path="vllm.v1.attention.backends.rocm_aiter_unified_attn.RocmAiterUnifiedAttentionBackend",
        head_sizes=HeadSizes(minimum=32),
        dtypes=_HALF, kv_cache_dtypes=_BASE_KV + _FP8_KV, kernel_block_sizes=_MULT16,
        non_causal=False, mm_prefix=True, sinks=True, batch_invariance=False, per_head_quant_scales=False,
        graph_support="ALWAYS", requires=("aiter",),
        source=f"vLLM {VLLM_VERSION} {_B}/rocm_aiter_unified_attn.py RocmAiterUnifiedAttentionBackend (l.29; "
               "supports_head_size l.55, supports_non_causal l.67); builder RocmAttentionMetadataBuilder "
               f"({_B}/rocm_attn.py l.77)",
        notes=("vLLM contradicts itself on head sizes: get_supported_head_sizes() is inherited from ROCM_ATTN "
               "[32, 64, 80, 96, 128, 160, 192, 224, 256] but supports_head_size() accepts any size >= 32; "
               "validate_configuration() calls supports_head_size(), so '>= 32' is recorded as the truth",
               "no non-causal attention: a DFlash draft cannot use it"),
    ),
    _triton_row("rocm", "", ("on gfx94x (MI300/MI325) the fp8 dtype is float8_e4m3fnuz",)),
    # ---------------------------------------------------------------- musa (declared-only)
    BackendCaps(
        platform="musa", backend="FLASH_ATTN",
        class_path=None,
        head_sizes=HeadSizes(multiple_of=8, maximum=512),
        dtypes=_HALF, kv_cache_dtypes=_BASE_KV, kernel_block_sizes=_MULT16,
        non_causal=True, mm_prefix=MM_PREFIX_TEXT_ONLY, sinks=True, batch_invariance=True,
        per_head_quant_scales=False, graph_support="ALWAYS", requires=("mate",),
        vendor_class="vllm_musa.v1.attention.backends.flash_attn.MUSAFlashAttentionBackend",
        source="vllm-musa (github.com/MooreThreads/vllm-musa) vllm_musa/v1/attention/backends/flash_attn.py "
               "MUSAFlashAttentionBackend (@register_backend(FLASH_ATTN); kernels from the mate package's "
               "flash_attn_interface)",
        notes=("the class ships with vllm-musa, not here: class_path is None and selection needs the mate package",
               "mm-prefix: the class says True, but only causal, window and chunk masks were validated",
               "fp8 KV cache only if mate's flash_attn_supports_fp8() (False); mate rejects fp8 Q/K",
               "sinks are allowed on MUSA regardless of compute capability",
               "kernel block sizes are [16, 32, 64] for hybrid models with fp32 Mamba state",
               "dtypes are not stated by the source; float16/bfloat16 as the upstream FlashAttentionBackend it "
               "replaces"),
    ),
    _triton_row("musa", "upstream class, unchanged: ",
                ("vLLM 0.26.0's unified-attention kernel does not compile on MUSA's Triton as shipped (find_seq_idx's "
                 "annotated assignment, 'int | None' parameter annotations, a three-operand boolean chain, tensor-"
                 "descriptor helpers); the MUSA worker binds kernel substitutes first (portable-spec kernels lists "
                 "them; kernels --check-triton checks them against triton 3.2.0)",)),
)

_NVFP4_SM100 = _BASE_KV + _FP8_KV + ("nvfp4", "nvfp4_4over6")
CLAIM_CHANGES: dict[str, dict[str, dict[str, Any]]] = {
    "0.26.0": {},  # the table is this release's transcription
    "0.28.0": {"cuda/FLASHINFER": {"kv_cache_dtypes": Cond(_BASE_KV + _FP8_KV, "sm100+trtllm", _NVFP4_SM100)}},
    "0.33.0": {"cuda/FLASHINFER": {"kv_cache_dtypes": Cond(
        Cond(_BASE_KV + _FP8_KV, "sm80/90/120", _BASE_KV + _FP8_KV + ("nvfp4",)), "sm100+trtllm", _NVFP4_SM100)},
               "rocm/ROCM_ATTN": {"mm_prefix": False}},
}
"""Claims whose value moved after vLLM 0.26.0, keyed by the first release with the new value (0.26.0: none); each
entry is the whole set of changes against the table above (not against the previous entry). vLLM 0.33.0's
``FlashInferBackend.supports_kv_cache_dtype`` takes an
NVFP4 KV cache on SM80/SM90/SM120 through its FA2 path ("nvfp4" only: the slot-mapping writer has no scale search)
and both NVFP4 variants on SM100 with trtllm-gen; 0.28.0 added "nvfp4_4over6" to the SM100 set. vLLM 0.33.0's
``RocmAttentionBackend.supports_mm_prefix`` says False ("Not implemented"; the agreement test found it on 0.33.0).
The adapter picks the entry for the installed vLLM (``version_gate.pick``, in
``vllm_adapter/tools/attention_agreement.py``)."""


def table_as_of(changes: dict[str, dict[str, Any]]) -> tuple[BackendCaps, ...]:
    """The table with one ``CLAIM_CHANGES`` entry applied (``{}``: the table as transcribed)."""
    return tuple(dataclasses.replace(row, **changes[row.key]) if row.key in changes else row for row in TABLE)


VENDOR_BACKENDS_NOT_IN_TABLE: dict[str, dict[str, str]] = {
    "musa": {
        "TURBOQUANT": "a KV-cache quantization backend (turboquant_* cache dtypes only, no 'auto'): chosen by the "
                      "cache dtype, not a drafter's attention; vllm-musa's own selection picks it",
        "FLASHMLA": "MLA: the table covers standard attention (MLA is selected by vLLM's or vllm-musa's selector)",
        "FLASHMLA_SPARSE": "sparse MLA: as FLASHMLA",
    },
}
"""Backends a vendor registers that have no row here, and why (vllm-musa: ``register_attention_backends``)."""

PLATFORMS: tuple[str, ...] = tuple(dict.fromkeys(row.platform for row in TABLE))
DEVICES_HERE: tuple[str, ...] = ("cuda",)
"""Platforms whose rows a GPU lane verifies on the device: rows of every other platform are declared-only."""
