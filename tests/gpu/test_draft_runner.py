"""cuda lane: the per-step FULL draft runner on the CUDA platform — step columns written inside replay, in-place inputs,
no allocation or sync per step, one shared pool across runners, capture-failure and live-graph-budget fallbacks."""

from __future__ import annotations

import warnings

import pytest
import torch

from portable_spec.capture_sizes import plan_capture_sizes
from portable_spec.draft.dispatcher import CHAIN, FIRST, DraftDispatcher
from portable_spec_harness.parity import PARITY_MODEL, check_parity
from portable_spec.draft.runner import DraftGraphWarning, StepCall, live_graphs
from portable_spec_harness.synthetic.proposer import SyntheticProposer
from portable_spec_harness.synthetic.steps import EagleDraft, SyntheticDraftConfig, build_synthetic

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

CFG = SyntheticDraftConfig(**PARITY_MODEL)


@pytest.fixture(scope="module")
def port():
    from portable_spec.ports.cuda_port import CudaPort

    return CudaPort()


def make_runner(port, method="eagle", k=4, seqs=8, probabilistic=True, model=None, **kwargs):
    model = model or build_synthetic(method, CFG, num_spec=k, max_reqs=seqs, device="cuda",
                                     probabilistic=probabilistic)
    return SyntheticProposer(port, DraftDispatcher.from_plan(plan_capture_sizes(method, k, seqs)), model, **kwargs)


def test_each_replay_writes_its_own_step_column_of_tokens_and_logits(port):
    runner = make_runner(port, k=4)
    runner.capture()
    model, out = runner.model, runner.model.outputs
    comp = model.random_composition(3, torch.Generator().manual_seed(0))
    keys = runner.keys_for_batch(3)
    assert all(key in runner.graphs for key in keys)
    out.clear()
    runner.prepare(comp.inputs, keys, 3, 3 * 5)
    rows = torch.tensor(comp.req_slots, device="cuda")
    for i, key in enumerate(keys):
        runner.run_step(key, i, 3)
        torch.cuda.synchronize()
        assert (out.draft_token_ids[rows, : i + 1] >= 0).all() and (out.draft_token_ids[rows, i + 1:] == -1).all()
        assert not out.draft_logits[rows, : i + 1].isnan().any()
        assert out.draft_logits[rows, i + 1:].isnan().all()
    others = [s for s in range(8) if s not in comp.req_slots]
    assert (out.draft_token_ids[others] == -1).all() and out.draft_logits[others].isnan().all()
    runner.close()


def test_inputs_are_copied_in_place_and_replays_track_new_inputs(port):
    runner = make_runner(port, k=3)
    runner.capture()
    model = runner.model
    ptrs = {name: si.buffer.data_ptr() for name, si in model.inputs.items()}
    gen = torch.Generator().manual_seed(1)
    seen = []
    for _ in range(3):
        comp = model.random_composition(5, gen)
        model.outputs.clear()
        runner.propose(comp.inputs, 5, eager=True)
        ref = model.outputs.draft_token_ids.clone()
        model.outputs.clear()
        runner.propose(comp.inputs, 5)
        assert torch.equal(ref, model.outputs.draft_token_ids)
        seen.append(ref)
    assert {name: si.buffer.data_ptr() for name, si in model.inputs.items()} == ptrs
    assert not torch.equal(seen[0], seen[1])
    runner.close()


def test_the_per_step_host_path_neither_allocates_nor_syncs(port):
    runner = make_runner(port, k=5, seqs=16)
    runner.capture()
    comp = runner.model.random_composition(16, torch.Generator().manual_seed(2))
    runner.propose(comp.inputs, 16)
    torch.cuda.synchronize()
    before = torch.cuda.memory_stats()["allocation.all.allocated"]
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(5):
            keys = runner.propose(comp.inputs, 16)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()
    assert all(key in runner.graphs for key in keys)
    assert torch.cuda.memory_stats()["allocation.all.allocated"] == before
    runner.close()


def test_one_pool_is_shared_with_a_second_runner(port):
    first = make_runner(port, k=2)
    second = make_runner(port, method="dflash", k=8)
    first.capture()
    second.capture()
    assert first.pool_ids() == second.pool_ids() == {port.graph_pool()}
    first.close()
    second.close()


class FailsToCapture:
    """Delegates to a real drafter but raises while capturing one key (as an uncapturable op would)."""

    def __init__(self, inner: EagleDraft, port, bad_tokens: int) -> None:
        self.inner, self.port, self.bad_tokens = inner, port, bad_tokens

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def step_call(self, key):
        return StepCall(lambda: self.step(key.step, key.num_tokens, key.num_reqs))

    def step(self, kind, num_tokens, num_reqs):
        if kind == FIRST and num_tokens == self.bad_tokens and self.port.is_capturing():
            raise RuntimeError("operation not permitted when stream is capturing")
        self.inner.step(kind, num_tokens, num_reqs)


def test_a_capture_failure_degrades_that_key_to_eager_with_a_warning(port):
    inner = build_synthetic("eagle", CFG, num_spec=3, max_reqs=8, device="cuda", probabilistic=True)
    bad = DraftDispatcher.from_plan(plan_capture_sizes("eagle", 3, 8)).dispatch(FIRST, 3)
    runner = make_runner(port, k=3, model=FailsToCapture(inner, port, bad.num_tokens))
    with pytest.warns(DraftGraphWarning, match="capture failed: RuntimeError"):
        report = runner.capture()
    assert list(report.eager) == [bad] and bad not in runner.graphs
    assert len(runner.graphs) == len(runner.graph_keys()) - 1
    result = check_parity(runner, compositions=40, batch_sizes=[3, 5], seed=3)
    assert result["matched"] == 40 and result["eager_steps"] > 0 and result["graph_steps"] > 0
    runner.close()


def test_keys_beyond_the_live_graph_budget_run_eagerly(port):
    already = live_graphs(port)
    runner = make_runner(port, k=2, live_graph_limit=already + 3)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        runner.capture()
    smallest = sorted(runner.graph_keys(), key=lambda k: (k.num_tokens, k.step))[:3]
    assert set(runner.graphs) == set(smallest)          # the launch-bound small batches keep their graphs
    budget_warnings = [w for w in record if issubclass(w.category, DraftGraphWarning) and "live-graph limit" in
                       str(w.message)]
    assert len(budget_warnings) == len(runner.graph_keys()) - 3
    assert check_parity(runner, compositions=30, seed=4)["matched"] == 30
    runner.close()
    assert live_graphs(port) == already


def test_chain_keys_are_separate_graphs_from_first_step_keys(port):
    runner = make_runner(port, k=3)
    runner.capture()
    firsts = {k for k in runner.graphs if k.step == FIRST}
    chains = {k for k in runner.graphs if k.step == CHAIN}
    assert firsts and chains and all(k.query_len == 4 for k in firsts) and all(k.query_len == 1 for k in chains)
    runner.close()


def test_bench_draft_cli_reports_the_ratio_as_json(capsys):
    import json

    from portable_spec.cli import main

    rc = main(["bench", "draft", "--platform", "cuda", "--hidden", "256", "--vocab", "4096", "--num-spec", "2",
               "--batch-sizes", "1,2", "--iters", "5", "--warmup", "1", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert rc == 0 and report["platform"] == "cuda" and [r["batch_size"] for r in report["results"]] == [1, 2]
    for row in report["results"]:
        assert row["graphed_steps"] == row["steps"] == 2
        assert row["kernel_us_per_step"] > 0 and row["ratio"] > 0 and row["eager_us_per_step"] > 0
