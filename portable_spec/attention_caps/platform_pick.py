"""Which attention backend ``VLLM_PLATFORM=musa`` picks, with and without the vendor attention package installed.

Our MUSA vLLM platform chooses from this table (``PortableMusaPlatform.get_attn_backend_cls`` ->
``select_for_vllm``), so the choice can be stated without a device: for the two layers speculative decoding serves
(a causal decoder layer; a non-causal DFlash draft block) with the vendor package present, absent, and as this host
has it. Triton is assumed present on a MUSA host (torch_musa ships MUSA's Triton). Pure Python, no vLLM import.
"""

from __future__ import annotations

from typing import Any

from portable_spec.attention_caps.lookup import rows
from portable_spec.attention_caps.selection import select_backend
from portable_spec.errors import PortableSpecError

SELECTS_FROM_TABLE = {"musa": "portable_spec.vllm_adapter.platform.musa.PortableMusaPlatform.get_attn_backend_cls"}
LAYERS: dict[str, dict[str, Any]] = {
    "decoder layer": {"head_size": 128, "dtype": "bfloat16", "kv_cache_dtype": "auto", "block_size": 16},
    "DFlash draft block (non-causal)": {"head_size": 128, "dtype": "bfloat16", "kv_cache_dtype": "auto",
                                        "block_size": 16, "use_non_causal": True},
}


def _pick(platform: str, layer: dict[str, Any], packages: dict[str, bool] | None) -> dict[str, Any]:
    try:
        row = select_backend(platform, packages=packages, **layer)
    except PortableSpecError as exc:
        return {"backend": None, "error": str(exc)}
    return {"backend": row.backend,
            "class": row.class_path or f"registered over vLLM's AttentionBackendEnum.{row.backend} by the vendor "
                                       "package's plugin"}


def attention_picks(platform: str) -> dict[str, Any] | None:
    """The picks for a platform whose vLLM port selects from this table; None for the others (vLLM selects)."""
    key = platform.strip().lower()
    if key not in SELECTS_FROM_TABLE:
        return None
    from portable_spec.kernels.substitutions import SUBSTITUTIONS

    vendor = sorted({p for r in rows(key) for p in r.requires if p != "triton"})
    scenarios = {"with vendor attention": {**{p: True for p in vendor}, "triton": True},
                 "without vendor attention": {**{p: False for p in vendor}, "triton": True},
                 "on this host": None}
    return {
        "selected_by": SELECTS_FROM_TABLE[key], "vendor_packages": vendor,
        "layers": {name: {"settings": layer, **{s: _pick(key, layer, pk) for s, pk in scenarios.items()}}
                   for name, layer in LAYERS.items()},
        "triton_attn_kernel_substitutes": [s.name for s in SUBSTITUTIONS if key in s.platforms
                                           and any(t.startswith("vllm.v1.attention.") for t in s.targets)],
    }


def render_picks(platform: str, picks: dict[str, Any]) -> str:
    lines = [f"VLLM_PLATFORM={platform} picks ({picks['selected_by']}; vendor attention: "
             f"{', '.join(picks['vendor_packages'])}):"]
    for name, layer in picks["layers"].items():
        lines.append(f"  {name}:")
        for scenario, pick in layer.items():
            if scenario != "settings":
                lines.append(f"    {scenario}: {pick['backend'] or 'none'} "
                             f"({pick.get('class') or pick.get('error')})")
    if picks["triton_attn_kernel_substitutes"]:
        lines.append("  TRITON_ATTN runs there with these kernel substitutes bound by the MUSA worker: "
                     + ", ".join(picks["triton_attn_kernel_substitutes"]))
    return "\n".join(lines)
