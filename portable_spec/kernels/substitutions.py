"""What we substitute in vLLM 0.26.0, on which platforms, and why: one entry per replaced object.

Each entry lists every vLLM module attribute that holds the object (a kernel imported with ``from ... import`` has
one binding site per importing module; a ``@triton.jit`` helper is looked up in its CALLER's module globals when the
caller compiles, so its binding sites are the modules whose kernels call it). Replacements are named lazily
("module:attr") so this table imports neither vLLM nor Triton. An entry with ``rewrites`` has no replacement module:
its substitute is derived from vLLM's own source by those named rewrites, each changing exactly the given number of
places (``derive.py``).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

_ATTN = "vllm.v1.attention.ops"
_NO_ANN = ("MUSA's Triton fails on an annotated assignment ('AnnAssign' object has no attribute 'targets'; "
           "vllm-musa patches the same line)")


@dataclass(frozen=True)
class Substitution:
    """One replacement object, assigned on every vLLM module attribute (``"pkg.module.attr"``) in ``targets``."""

    name: str
    targets: tuple[str, ...]
    platforms: tuple[str, ...]
    reason: str
    replacement: str | None = None  # "module:attr", imported on install
    rewrites: tuple[tuple[str, int], ...] = ()

    def load_replacement(self, original: Any = None) -> Any:
        """The replacement object (for a derived entry: derived from ``original``, vLLM's object)."""
        if self.rewrites:
            from portable_spec.kernels.derive import derive

            return derive(original, dict(self.rewrites))
        module, _, attr = (self.replacement or "").partition(":")
        return getattr(importlib.import_module(module), attr)

    def describe_replacement(self) -> str:
        if self.rewrites:
            return "vLLM's source with " + ", ".join(f"{name} x{n}" for name, n in self.rewrites)
        return self.replacement or ""


SUBSTITUTIONS: tuple[Substitution, ...] = (
    Substitution(
        name="eagle_prepare_next_token_padded_kernel",
        targets=(
            "vllm.v1.spec_decode.utils.eagle_prepare_next_token_padded_kernel",
            "vllm.v1.spec_decode.llm_base_proposer.eagle_prepare_next_token_padded_kernel",
        ),
        platforms=("musa",),
        reason=("vLLM 0.26.0 assigns valid_count a uint32 in one branch and tl.sum(bool) in the other; "
                "MUSA's Triton 3.2 rejects it ('mismatched type for valid_count')"),
        replacement="portable_spec.kernels.eagle_prepare_next_token:eagle_prepare_next_token_padded_kernel",
    ),
    Substitution(
        name="find_seq_idx",
        targets=(f"{_ATTN}.triton_attention_helpers.find_seq_idx", f"{_ATTN}.triton_unified_attention.find_seq_idx",
                 f"{_ATTN}.triton_unified_attention_diffkv.find_seq_idx"),
        platforms=("musa",),
        reason=f"TRITON_ATTN's sequence lookup declares 'left: tl.int32 = 0'; {_NO_ANN}",
        rewrites=(("unannotate-assignments", 1),),
    ),
    Substitution(
        name="compute_tile_loop_bounds",
        targets=tuple(f"{_ATTN}.{m}.compute_tile_loop_bounds" for m in (
            "triton_attention_helpers", "triton_unified_attention", "triton_unified_attention_diffkv",
            "int4_per_token_head")),
        platforms=("musa",),
        reason=("TRITON_ATTN's tile-loop bounds test 'USE_MM_PREFIX or USE_PER_SEQ_CAUSAL or (not USE_CAUSAL)'; "
                "Triton 3.2 refuses boolean chains of more than two operands"),
        rewrites=(("split-boolean-chains", 1),),
    ),
    *(Substitution(
        name=helper,
        targets=(f"{_ATTN}.triton_unified_attention.{helper}",),
        platforms=("musa",),
        reason=("calls tl.make_tensor_descriptor, which Triton 3.2 lacks; 3.2 resolves it while hashing the kernel "
                "even with tensor descriptors off, so kernel_unified_attention does not compile"),
        replacement=f"portable_spec.kernels.attention_td_stubs:{helper}",
    ) for helper in ("_load_q_td", "_load_kv_tile_td", "_store_output_td")),
    Substitution(
        name="kernel_unified_attention",
        targets=(f"{_ATTN}.triton_unified_attention.kernel_unified_attention",),
        platforms=("musa",),
        reason=("declares 'stride_ks_blk: int | None = None' (6 such parameters): Triton 3.2 fails evaluating the "
                f"annotation; {_NO_ANN}"),
        rewrites=(("unannotate-parameters", 6),),
    ),
)
