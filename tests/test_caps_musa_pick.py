"""``portable-spec caps --platform musa``: which attention backend VLLM_PLATFORM=musa picks with and without the
vendor attention package, checked against our MUSA vLLM platform class's own ``get_attn_backend_cls``."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from portable_spec.attention_caps import selection
from portable_spec.attention_caps.platform_pick import LAYERS, attention_picks

TRITON = "vllm.v1.attention.backends.triton_attn.TritonAttentionBackend"


def test_caps_names_the_pick_for_each_layer_with_and_without_vendor_attention():
    proc = subprocess.run([sys.executable, "-m", "portable_spec", "caps", "--platform", "musa", "--json"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    picks = json.loads(proc.stdout)["selection"]
    assert picks["vendor_packages"] == ["mate"] and set(picks["layers"]) == set(LAYERS)
    here = "FLASH_ATTN" if importlib.util.find_spec("mate") else "TRITON_ATTN"
    for layer in picks["layers"].values():
        assert layer["with vendor attention"]["backend"] == "FLASH_ATTN"
        assert layer["without vendor attention"] == {"backend": "TRITON_ATTN", "class": TRITON}
        assert layer["on this host"]["backend"] == here
    assert "kernel_unified_attention" in picks["triton_attn_kernel_substitutes"]
    assert "eagle_prepare_next_token_padded_kernel" not in picks["triton_attn_kernel_substitutes"]
    text = subprocess.run([sys.executable, "-m", "portable_spec", "caps", "--platform", "musa"], capture_output=True,
                          text=True, timeout=120).stdout
    assert "VLLM_PLATFORM=musa picks" in text and "without vendor attention: TRITON_ATTN" in text


def test_platforms_where_vllm_selects_get_no_pick():
    assert attention_picks("cuda") is None and attention_picks("rocm") is None


@pytest.mark.parametrize("mate_installed", [True, False])
def test_the_pick_is_what_the_musa_platform_class_returns(vllm_platform, monkeypatch, mate_installed):
    """The same answer from the vLLM entry point itself, for every layer, with the package check decided both ways."""
    import torch
    from vllm.v1.attention.backends.registry import AttentionBackendEnum
    from vllm.v1.attention.selector import AttentionSelectorConfig

    from portable_spec.vllm_adapter.platform.musa import PortableMusaPlatform

    monkeypatch.setattr(selection, "_package_missing", lambda name: name == "mate" and not mate_installed)
    scenario = "with vendor attention" if mate_installed else "without vendor attention"
    for name, layer in attention_picks("musa")["layers"].items():
        config = AttentionSelectorConfig(head_size=layer["settings"]["head_size"], dtype=torch.bfloat16,
                                         kv_cache_dtype="auto", block_size=16,
                                         use_non_causal=layer["settings"].get("use_non_causal", False))
        chosen = PortableMusaPlatform.get_attn_backend_cls(None, config)
        backend = layer[scenario]["backend"]
        assert chosen == (TRITON if backend == "TRITON_ATTN" else AttentionBackendEnum[backend].get_path()), name
