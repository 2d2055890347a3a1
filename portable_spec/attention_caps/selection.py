"""Backend selection from the declared table, for platforms whose vLLM port picks attention itself (MUSA).

vLLM's CUDA/ROCm platforms validate candidates with each class's ``validate_configuration``; an out-of-tree platform
has no classes to ask for some backends (MUSA FLASH_ATTN lives in vllm-musa), so it asks the table. The refusal
lists every candidate with its reasons on one line, so a DFlash draft (non-causal) that cannot run says why.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping, Sequence
from typing import Any

from portable_spec.attention_caps.lookup import check_platform, get_row, rows
from portable_spec.attention_caps.model import DTYPES, MM_PREFIX_TEXT_ONLY, BackendCaps, HostFacts
from portable_spec.errors import PortableSpecError


def _package_missing(name: str) -> bool:
    return importlib.util.find_spec(name) is None


def _missing(name: str, packages: Mapping[str, bool] | None) -> bool:
    """Whether ``name`` is absent: from ``packages`` (a what-if: name -> installed) where it says, else this host."""
    return not packages[name] if packages is not None and name in packages else _package_missing(name)


def rejection_reasons(row: BackendCaps, *, head_size: int, dtype: str, kv_cache_dtype: str = "auto",
                      block_size: int | None = None, use_non_causal: bool = False, has_sink: bool = False,
                      use_mm_prefix: bool = False, use_batch_invariant: bool = False,
                      use_per_head_quant_scales: bool = False, facts: HostFacts | None = None,
                      packages: Mapping[str, bool] | None = None) -> list[str]:
    """Why ``row`` cannot serve this layer (empty: it can). Host-dependent claims are decided with ``facts``,
    package presence with ``packages`` where given (name -> installed), else by looking on this host."""
    caps = row.resolved(facts or HostFacts())
    reasons = [f"{pkg} not installed" for pkg in caps.requires if _missing(pkg, packages)]
    if not caps.head_sizes.accepts(head_size):
        reasons.append(f"head_size {head_size} not supported ({caps.head_sizes.describe()})")
    if dtype not in caps.dtypes:
        reasons.append(f"dtype {dtype} not supported")
    if kv_cache_dtype not in caps.kv_cache_dtypes:
        reasons.append(f"kv_cache_dtype {kv_cache_dtype} not supported")
    if block_size is not None and not caps.kernel_block_sizes.accepts(block_size):
        reasons.append(f"block_size {block_size} not supported ({caps.kernel_block_sizes.describe()})")
    if use_non_causal and not caps.non_causal:
        reasons.append("non-causal attention not supported")
    if has_sink and not caps.sinks:
        reasons.append("attention sinks not supported")
    if use_mm_prefix and caps.mm_prefix is not True:
        reasons.append("mm-prefix is text-only (only causal/window masks validated)"
                       if caps.mm_prefix == MM_PREFIX_TEXT_ONLY else "mm-prefix not supported")
    if use_batch_invariant and not caps.batch_invariance:
        reasons.append("batch invariance not supported")
    if use_per_head_quant_scales and not caps.per_head_quant_scales:
        reasons.append("per-head quant scales not supported")
    return reasons


def select_backend(platform: str, *, head_size: int, dtype: str, kv_cache_dtype: str = "auto",
                   block_size: int | None = None, use_non_causal: bool = False, has_sink: bool = False,
                   use_mm_prefix: bool = False, use_batch_invariant: bool = False,
                   candidates: Sequence[str | BackendCaps] | None = None,
                   facts: HostFacts | None = None, use_per_head_quant_scales: bool = False,
                   packages: Mapping[str, bool] | None = None) -> BackendCaps:
    """The first candidate (default: the platform's rows in vLLM priority order) that fits this layer.

    Raises ``PortableSpecError`` with one line naming each rejected candidate and its reasons.
    """
    key = check_platform(platform)
    if dtype not in DTYPES:
        raise PortableSpecError(f"unknown dtype {dtype!r}; use one of {', '.join(DTYPES)}")
    if candidates is None:
        pool = rows(key)
    else:
        pool = [c if isinstance(c, BackendCaps) else get_row(key, c) for c in candidates]
        if not pool:
            raise PortableSpecError(f"no attention backend candidates given for {key}; pass None to use the table")
    rejected = []
    for row in pool:
        reasons = rejection_reasons(row, head_size=head_size, dtype=dtype, kv_cache_dtype=kv_cache_dtype,
                                    block_size=block_size, use_non_causal=use_non_causal, has_sink=has_sink,
                                    use_mm_prefix=use_mm_prefix, use_batch_invariant=use_batch_invariant,
                                    use_per_head_quant_scales=use_per_head_quant_scales, facts=facts,
                                    packages=packages)
        if not reasons:
            return row
        rejected.append(f"{row.backend} ({', '.join(reasons)})")
    wanted = [f"head_size={head_size}", f"dtype={dtype}", f"kv_cache_dtype={kv_cache_dtype}"]
    if block_size is not None:
        wanted.append(f"block_size={block_size}")
    wanted += [flag for flag, on in (("non-causal (DFlash)", use_non_causal), ("sinks", has_sink),
                                     ("mm-prefix", use_mm_prefix), ("batch-invariant", use_batch_invariant),
                                     ("per-head quant scales", use_per_head_quant_scales)) if on]
    raise PortableSpecError(
        f"no attention backend on {key} fits {', '.join(wanted)}; rejected: {'; '.join(rejected)}. "
        "Fix: install the missing package or change the draft's attention settings to one a candidate supports "
        "(portable-spec caps --platform " + key + " lists them)")


def selector_kwargs(config: Any) -> dict[str, Any]:
    """``select_backend`` keywords from vLLM's ``AttentionSelectorConfig`` (or anything with its attributes).

    MLA and sparse attention are not in the table: asking for them is refused here, with the fix.
    """
    for flag, what in (("use_mla", "MLA"), ("use_sparse", "sparse")):
        if getattr(config, flag, False):
            raise PortableSpecError(f"{what} attention is not in the capability table (portable-spec caps lists "
                                    "what is); select an MLA/sparse backend through vLLM's own selector")
    dtype = config.dtype
    return {
        "head_size": int(config.head_size),
        "dtype": dtype if isinstance(dtype, str) else str(dtype).removeprefix("torch."),
        "kv_cache_dtype": config.kv_cache_dtype or "auto",
        "block_size": config.block_size,
        "use_non_causal": bool(getattr(config, "use_non_causal", False)),
        "has_sink": bool(getattr(config, "has_sink", False)),
        "use_mm_prefix": bool(getattr(config, "use_mm_prefix", False)),
        "use_batch_invariant": bool(getattr(config, "use_batch_invariant", False)),
        "use_per_head_quant_scales": bool(getattr(config, "use_per_head_quant_scales", False)),
    }


def select_for_vllm(platform: str, selected_backend: Any, config: Any,
                    facts: HostFacts | None = None) -> BackendCaps:
    """What a platform's ``get_attn_backend_cls(selected_backend, attn_selector_config)`` needs: the explicitly
    selected backend (an ``AttentionBackendEnum`` member or its name) if it fits, else the first fitting row."""
    candidates = None if selected_backend is None else [getattr(selected_backend, "name", selected_backend)]
    return select_backend(platform, candidates=candidates, facts=facts, **selector_kwargs(config))
