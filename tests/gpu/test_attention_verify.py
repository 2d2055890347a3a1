"""cuda lane: the device-dependent attention claims and the kernels behind them, on the live GPU.

1. Agreement: vLLM's real backend classes on this GPU (FlashAttention version, FA4 presence, FlashInfer) against the
   table resolved for this host's facts, every claim including the builders' graph support.
2. Verify: FLASH_ATTN and TRITON_ATTN kernels against the torch reference (``probe --verify`` runs every backend).

Both run in subprocesses with vLLM's own platform resolution (``VLLM_PLUGINS=""``), whatever the test session pinned.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

MUST_IMPORT_ON_GPU = {"FLASH_ATTN", "TRITON_ATTN", "FLEX_ATTENTION"}


def _run(module: str, *args: str, timeout: int = 480) -> tuple[int, dict, str]:
    pytest.importorskip("vllm")
    env = {**os.environ, "VLLM_PLUGINS": "", "VLLM_LOGGING_STREAM": "ext://sys.stderr"}
    proc = subprocess.run([sys.executable, "-m", module, "--json", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert lines, f"no JSON from {module} (rc {proc.returncode}): {proc.stderr[-3000:]}"
    return proc.returncode, json.loads(lines[-1]), proc.stderr


def test_device_dependent_claims_agree_with_vllm_on_this_gpu():
    code, report, err = _run("portable_spec.vllm_adapter.tools.attention_agreement", "--platform", "cuda")
    facts = report["facts"]
    assert facts["capability"] is not None, f"vLLM saw no GPU: {facts}"
    for key, entry in report["rows"].items():
        backend = key.split("/")[1]
        if "import_error" in entry:
            assert backend not in MUST_IMPORT_ON_GPU, f"{key} does not import on this GPU: {entry['import_error']}"
            continue
        assert entry["disagreements"] == [], f"{key} on {facts}: {entry['disagreements']}"
        assert entry["observed"]["graph_support"]["level"] is not None, f"{key}: graph support not observable"
    if facts["fa_version"] == 3:
        fa = report["rows"]["cuda/FLASH_ATTN"]["observed"]
        assert fa["graph_support"]["level"] == "ALWAYS" and fa["sinks"] and "fp8" in fa["kv_cache_dtypes"]
    assert code == 0


def test_flash_attn_and_triton_kernels_hold_their_claims():
    code, report, err = _run("portable_spec.vllm_adapter.tools.attention_verify", "--backend", "FLASH_ATTN",
                             "--backend", "TRITON_ATTN")
    assert report["refuted"] == [], report["refuted"]
    assert code == 0, err[-2000:]
    for backend in ("FLASH_ATTN", "TRITON_ATTN"):
        entry = report["backends"][backend]
        assert entry["status"] == "ran", f"{backend}: {entry.get('reason')}"
        claims = {c["claim"]: c["status"] for c in entry["claims"]}
        for claim in ("non_causal", "batch_invariance", "head_size=128", "head_size=256"):
            assert claims[claim] == "verified", (backend, claim, entry["claims"])
