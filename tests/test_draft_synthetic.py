"""Synthetic draft steps and the runner's host-side logic on the CPU.

The Triton kernels are checked against their torch references under ``TRITON_INTERPRET=1`` (the cpu lane sets it);
the runner's dispatch / in-place copies / padding / eager fallback run with the torch backend on the CPU platform
(no device graphs: every key runs eagerly, with one warning)."""

from __future__ import annotations

import os

import pytest
from lane_tools import import_triton, require_interpreter
import torch

from portable_spec.capture_sizes import StepPlan, plan_capture_sizes
from portable_spec.draft.dispatcher import CHAIN, FIRST, DraftDispatcher, dispatcher_from_steps
from portable_spec_harness.synthetic.ops import Ops, hash32, rope_cache
from portable_spec.draft.runner import DraftGraphWarning
from portable_spec_harness.synthetic.proposer import SyntheticProposer
from portable_spec_harness.synthetic.steps import DFlashDraft, EagleDraft, SyntheticDraftConfig
from portable_spec.errors import PortableSpecError
from portable_spec.ports.cpu_port import CpuPort

TINY = SyntheticDraftConfig(hidden=64, vocab=300, layers=1, head_dim=16, num_heads=4, num_kv_heads=2,
                            max_model_len=96, dtype=torch.float32)

needs_interpreter = pytest.mark.usefixtures("interpreter")


@pytest.fixture
def interpreter():
    """Triton kernels run on the CPU only under the interpreter: fails in the lane without it, skips elsewhere."""
    require_interpreter()


@pytest.fixture(scope="module")
def ops():
    import_triton()
    return Ops("triton"), Ops("torch")


# ---- Triton kernels vs torch references ------------------------------------------------------------------------
@needs_interpreter
def test_rms_norm_and_silu_mul_match_reference(ops):
    tr, tc = ops
    g = torch.Generator().manual_seed(0)
    x, w, y = torch.randn(5, 96, generator=g), torch.randn(96, generator=g), torch.randn(5, 160, generator=g)
    torch.testing.assert_close(tr.rms_norm(x, w), tc.rms_norm(x, w))
    torch.testing.assert_close(tr.silu_mul(y), tc.silu_mul(y))


@needs_interpreter
def test_rope_and_kv_store_match_reference_and_skip_padded_slots(ops):
    tr, tc = ops
    g = torch.Generator().manual_seed(1)
    nh, kvh, hd = 4, 2, 16
    qkv = torch.randn(6, (nh + 2 * kvh) * hd, generator=g)
    pos = torch.tensor([3, 4, 5, 10, 11, 0], dtype=torch.int32)
    slot = torch.tensor([3, 4, 5, 40, 41, -1], dtype=torch.int32)
    cs = rope_cache(64, hd)
    caches = [[torch.zeros(64, kvh, hd), torch.zeros(64, kvh, hd)] for _ in range(2)]
    q1 = tr.rope_store_kv(qkv, pos, slot, cs, *caches[0], nh, kvh, hd)
    q2 = tc.rope_store_kv(qkv, pos, slot, cs, *caches[1], nh, kvh, hd)
    torch.testing.assert_close(q1, q2)
    torch.testing.assert_close(caches[0][0], caches[1][0])
    torch.testing.assert_close(caches[0][1], caches[1][1])
    written = caches[0][0].abs().sum(dim=(1, 2)) > 0
    assert written.nonzero().flatten().tolist() == [3, 4, 5, 40, 41]   # slot -1 wrote nothing


@needs_interpreter
@pytest.mark.parametrize("query_len, causal", [(1, True), (3, True), (5, False)])
def test_paged_attention_matches_reference(ops, query_len, causal):
    tr, tc = ops
    g = torch.Generator().manual_seed(2)
    nh, kvh, hd = 4, 2, 16
    kc, vc = torch.randn(128, kvh, hd, generator=g), torch.randn(128, kvh, hd, generator=g)
    bt = torch.randperm(8, generator=g).view(2, 4).to(torch.int32)
    req = torch.tensor([1, -1, 0], dtype=torch.int32)
    seq = torch.tensor([37, 5, 64], dtype=torch.int32)
    q = torch.randn(3 * query_len, nh, hd, generator=g)
    kw = dict(query_len=query_len, page=16, causal=causal, num_kv_heads=kvh)
    out = tr.attention(q, kc, vc, bt, req, seq, **kw)
    torch.testing.assert_close(out, tc.attention(q, kc, vc, bt, req, seq, **kw), atol=1e-5, rtol=1e-5)
    assert out[query_len:2 * query_len].abs().sum() == 0   # the padded row attends to nothing


@needs_interpreter
def test_sampling_matches_reference_bit_for_bit_and_skips_padded_rows(ops):
    tr, tc = ops
    g = torch.Generator().manual_seed(3)
    vocab, rows, cols, q = 3000, 3, 2, 3
    logits = torch.randn(rows * q, vocab, generator=g)
    req = torch.tensor([2, -1, 0], dtype=torch.int32)
    pos = torch.arange(rows * q, dtype=torch.int32) + 7
    temp, seeds = torch.tensor([0.0, 0.8, 1.3]), torch.tensor([5, 6, 123456789012])
    step = torch.tensor(1)
    results = []
    for impl in (tr, tc):
        tok = torch.full((3, 4), -1, dtype=torch.int64)
        lg = torch.full((3, 4, vocab), float("nan"))
        nxt = torch.zeros(rows * cols, dtype=torch.int32)
        impl.sample_record(logits, req, pos, temp, seeds, step, tok, lg, nxt, rows=rows, cols=cols, query_len=q,
                           offset=1)
        results.append((tok, lg, nxt))
    (t1, l1, n1), (t2, l2, n2) = results
    assert torch.equal(t1, t2) and torch.equal(n1, n2)
    torch.testing.assert_close(l1, l2, equal_nan=True)
    assert (t1[:, [0, 3]] == -1).all() and (t1[1] == -1).all()        # only columns step..step+cols-1, real rows
    assert torch.equal(t1[0, 1:3], logits[[7, 8]].argmax(-1))           # request 0 (row 2) is greedy
    torch.testing.assert_close(l1[2, 1:3], logits[[1, 2]] / 1.3)        # request 2 (row 0): logits / T recorded


def test_gumbel_hash_is_a_32_bit_mix():
    h = hash32(torch.tensor([1, 1, 2]), torch.tensor([5, 6, 5]), torch.tensor([0, 0, 0]))
    assert ((h >= 0) & (h < 2**32)).all() and len(set(h.tolist())) == 3


# ---- runner host logic on the CPU ------------------------------------------------------------------------------
def eagle_runner(k=3, seqs=8, sizes=None, probabilistic=False):
    model = EagleDraft(TINY, num_spec=k, max_reqs=seqs, device="cpu", probabilistic=probabilistic, backend="torch")
    plan = plan_capture_sizes("eagle", k, seqs, user_sizes=sizes)
    return SyntheticProposer(CpuPort(), DraftDispatcher.from_plan(plan), model)


def test_cpu_platform_runs_every_key_eagerly_with_one_warning():
    runner = eagle_runner()
    with pytest.warns(DraftGraphWarning, match="no device graphs") as record:
        report = runner.capture()
    assert len(record) == 1 and not runner.graphs and len(report.eager) == len(runner.graph_keys())


def test_propose_fills_every_column_of_real_rows_and_no_other_row():
    runner = eagle_runner(k=3, probabilistic=True)
    model = runner.model
    comp = model.random_composition(3, torch.Generator().manual_seed(0))
    model.outputs.clear()
    keys = runner.propose(comp.inputs, 3)
    assert [k.step for k in keys] == [FIRST, CHAIN, CHAIN]
    assert keys[0].num_reqs == 4 and keys[1].num_reqs == 4          # 3 requests padded to 4
    tokens, logits = model.outputs.draft_token_ids, model.outputs.draft_logits
    real = torch.tensor(comp.req_slots)
    others = [s for s in range(8) if s not in comp.req_slots]
    assert (tokens[real] >= 0).all() and (tokens[others] == -1).all()
    assert not logits[real].isnan().any() and logits[others].isnan().all()
    assert int(model.outputs.current_draft_step) == 2


def test_prepare_copies_in_place_and_pads_the_tail():
    runner = eagle_runner(k=3)          # 3 requests: first step 12 -> 16 tokens (4 requests), chain 3 -> 4
    model = runner.model
    ptrs = {name: si.buffer.data_ptr() for name, si in model.inputs.items()}
    comp = model.random_composition(3, torch.Generator().manual_seed(1))
    keys = runner.keys_for_batch(3)
    model.row.fill_(7)
    model.chain.fill_(7)
    runner.prepare(comp.inputs, keys, 3, 12)
    assert {name: si.buffer.data_ptr() for name, si in model.inputs.items()} == ptrs
    assert torch.equal(model.row[:, :3], comp.inputs["row"]) and torch.equal(model.tok[:, :12], comp.inputs["tok"])
    assert model.row[:, 3].tolist() == [-1, 0, 0] and model.tok[2, 12:16].tolist() == [-1] * 4
    assert model.chain[2, 3].item() == -1                              # carried chain rows padded too
    assert model.row[0, 4:].eq(7).all()                                # nothing beyond the keys' extent


def test_padding_is_inert_greedy_tokens_equal_an_unpadded_run():
    k, seqs = 3, 8
    padded = eagle_runner(k, seqs)                       # first-step sizes 4, 8, 16, ...: 3 requests run as 4
    twin = EagleDraft(TINY, num_spec=k, max_reqs=seqs, device="cpu", backend="torch")   # same seed, same weights
    exact = SyntheticProposer(CpuPort(), dispatcher_from_steps(StepPlan(4, (12,), "FULL"),
                                                                  StepPlan(1, (3,), "FULL"), seqs), twin)
    comp = padded.model.random_composition(3, torch.Generator().manual_seed(2))
    got = []
    for runner in (padded, exact):
        runner.model.outputs.clear()
        keys = runner.propose(comp.inputs, 3)
        got.append(runner.model.outputs.draft_token_ids.clone())
    assert [key.num_reqs for key in keys] == [3, 3, 3]
    assert [key.num_reqs for key in padded.keys_for_batch(3)] == [4, 4, 4]
    assert (got[0][comp.req_slots] >= 0).all()
    assert torch.equal(got[0], got[1])


def test_dflash_context_kv_is_written_outside_the_step_and_changes_the_drafts():
    model = DFlashDraft(TINY, num_spec=4, max_reqs=4, device="cpu", backend="torch")
    runner = SyntheticProposer(CpuPort(), DraftDispatcher.from_plan(plan_capture_sizes("dflash", 4, 4)), model)
    comp = model.random_composition(2, torch.Generator().manual_seed(3), min_context=20, max_context=20,
                                    fresh_context=20)
    runner.propose(comp.inputs, 2)
    before = model.outputs.draft_token_ids.clone()
    model.apply_context(comp)
    runner.propose(comp.inputs, 2)
    assert runner.keys_for_batch(2) == [runner.dispatcher.dispatch(FIRST, 2)]
    assert not torch.equal(before, model.outputs.draft_token_ids)


def test_bad_inputs_and_mismatched_plans_raise_one_line_errors():
    runner = eagle_runner(k=2)
    keys = runner.keys_for_batch(2)
    with pytest.raises(PortableSpecError, match="unknown draft inputs"):
        runner.prepare({"nope": torch.zeros(1)}, keys, 2, 6)
    with pytest.raises(PortableSpecError, match="expected 6"):
        runner.prepare({"tok": torch.zeros(3, 5, dtype=torch.int32)}, keys, 2, 6)
    model = EagleDraft(TINY, num_spec=2, max_reqs=8, device="cpu", backend="torch")
    with pytest.raises(PortableSpecError, match="plan with the same num_spec"):
        SyntheticProposer(CpuPort(), DraftDispatcher.from_plan(plan_capture_sizes("eagle", 3, 8)), model)
    with pytest.raises(PortableSpecError, match="max_reqs >= max_num_seqs"):
        SyntheticProposer(CpuPort(), DraftDispatcher.from_plan(plan_capture_sizes("eagle", 2, 16)), model)
    with pytest.raises(PortableSpecError, match="no chain steps"):
        model2 = DFlashDraft(TINY, num_spec=2, max_reqs=8, device="cpu", backend="torch")
        model2.query_len(CHAIN)
    with pytest.raises(PortableSpecError, match="kv_layout"):
        SyntheticDraftConfig(kv_layout="ring").resolved()
