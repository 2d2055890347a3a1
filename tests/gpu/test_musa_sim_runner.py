"""cuda lane, musa-sim: the same draft runner on the MUSA platform class over a simulated torch.musa backed by
torch.cuda (labelled musa-sim — this shows our MUSA code path, not that anything runs on MUSA hardware): MUSAGraph
built without keep_graph, capture under inference_mode, the ONE shared pool, the live-graph cap respected, parity."""

from __future__ import annotations

import os

import pytest
import torch

from portable_spec_harness.musa_sim_harness import musa_sim_evidence, musa_sim_platform
from portable_spec_harness.parity import build_parity_runner, check_parity
from portable_spec.draft.runner import DraftGraphWarning

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

N = int(os.environ.get("PORTABLE_SPEC_PARITY_N", "1000")) // 5


def test_runner_on_musa_sim_keeps_the_musa_rules_and_matches_eager():
    port = musa_sim_platform()
    assert port.label == "musa-sim" and port.capture_inference_mode
    runner = build_parity_runner(port, "eagle", 3)
    try:
        result = check_parity(runner, compositions=N, seed=7)
        evidence = musa_sim_evidence(runner)
    finally:
        runner.close()
    assert result["matched"] == N and result["platform"] == "musa-sim"
    calls = evidence["calls"]
    assert calls["MUSAGraph"] == calls["graph"] == len(runner.graph_keys())   # every capture via torch.musa.graph
    assert calls["MUSAGraph.replay"] == result["graph_steps"]
    assert evidence["pool_handles_created"] == 1 and evidence["inference_mode_capture"]


def test_dflash_on_musa_sim_matches_eager():
    port = musa_sim_platform()
    runner = build_parity_runner(port, "dflash", 8)
    try:
        result = check_parity(runner, compositions=N, seed=9)
    finally:
        runner.close()
    assert result["matched"] == N


def test_the_live_graph_cap_is_respected_not_hit():
    port = musa_sim_platform(live_graph_cap=5)
    with pytest.warns(DraftGraphWarning, match="live-graph limit 5"):
        runner = build_parity_runner(port, "eagle", 2)
    try:
        evidence = musa_sim_evidence(runner)
        assert len(runner.graphs) == 5 and evidence["live_graphs_sim"] == 5 and evidence["cap_respected"]
        result = check_parity(runner, compositions=40, seed=11)
    finally:
        runner.close()
    assert result["matched"] == 40 and result["eager_steps"] > 0 and result["graph_steps"] > 0


def test_a_second_musa_sim_runner_shares_the_pool():
    port = musa_sim_platform()
    a = build_parity_runner(port, "eagle", 2, max_num_seqs=4)
    b = build_parity_runner(port, "dflash", 4, max_num_seqs=4)
    try:
        assert a.pool_ids() == b.pool_ids() == {port.graph_pool()}
        assert port.device_module.call_counts()["graph_pool_handle"] == 1
    finally:
        a.close()
        b.close()
