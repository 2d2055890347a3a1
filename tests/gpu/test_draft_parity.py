"""cuda lane: graph replay reproduces an eager run at the same padded shape bit for bit (tokens and draft logits)
over random batch compositions: EAGLE K=1..5 (1,000 compositions split across K) and DFlash K=8 (1,000).
``PORTABLE_SPEC_PARITY_N`` scales the counts down for quick local runs."""

from __future__ import annotations

import os

import pytest
import torch

from portable_spec_harness.parity import build_parity_runner, check_parity

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

TOTAL = int(os.environ.get("PORTABLE_SPEC_PARITY_N", "1000"))


@pytest.fixture(scope="module")
def port():
    from portable_spec.ports.cuda_port import CudaPort

    return CudaPort()


def assert_parity(result):
    assert result["first_mismatch"] is None, result["first_mismatch"]
    assert result["matched"] == result["compositions"]
    assert result["graph_steps"] > 0 and not result["eager_keys"]


@pytest.mark.parametrize("k", [1, 2, 3, 4, 5])
def test_eagle_parity(port, k):
    runner = build_parity_runner(port, "eagle", k, kv_layout="paged" if k % 2 else "contiguous", seed=k)
    try:
        result = check_parity(runner, compositions=TOTAL // 5, seed=100 + k)
    finally:
        runner.close()
    assert_parity(result)
    assert result["padded_compositions"] > 0


def test_dflash_k8_parity(port):
    runner = build_parity_runner(port, "dflash", 8, seed=8)
    try:
        result = check_parity(runner, compositions=TOTAL, seed=108)
    finally:
        runner.close()
    assert_parity(result)
