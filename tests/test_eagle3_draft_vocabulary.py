"""An EAGLE-3 draft vocabulary (``draft_vocab_size`` < the target's, with a ``d2t`` map) in our fused graphs, on CPU.

vLLM 0.26.0 samples such a head by scattering its logits into the target vocabulary (``compute_logits``) and taking
the argmax; our fused graphs take the argmax over the draft's logits and gather the target id through ``d2t``
(``spec_decode.draft_sample``). Shown the same here in two ways:
- the sample alone, against every vLLM head whose ``compute_logits`` is that scatter, on logits built to tie, to be
  -inf throughout, NaN or +inf;
- per step, drafting through our runner (fused first pass and chain) against vLLM's own runner and eager propose,
  with vLLM's real ``Eagle3LlamaForCausalLM`` loaded by vLLM's loader from the zoo's ``d2t`` head (855 draft ids of
  1024, non-zero offsets): its real lm_head, logits processor, d2t map, ``combine_hidden_states`` and
  ``compute_logits``. Only its forward is a stand-in (this CPU platform has no attention; the stand-in reads token
  ids, positions and hidden states, and makes tied logits on a third of the rows).
Each comparison counts what it compared and fails on nothing; each is shown to fail on a wrong map.
"""

from __future__ import annotations

import socket
import types

import pytest
import torch

from portable_spec.draft.dispatcher import CHAIN_FUSED, FIRST_FUSED
from portable_spec_harness import model_zoo as zoo
from portable_spec.vllm_adapter.spec_decode import draft_sample
from portable_spec.vllm_adapter.spec_decode.draft_sample import GATHER, VLLM, greedy_draft_tokens
from test_v1_drafter_logic import (  # noqa: F401 (vllm_kernels: a fixture, requested by name)
    MAX_REQS, assert_same_drafting, capturing_proposer, device_work, draft_both_ways, vllm_kernels,
)
from shared_zoo import shared_zoo
from vllm_configs import pair_config

DRAFT_IDS = zoo.draft_vocabulary(0)
D2T = torch.tensor(zoo.d2t_offsets(DRAFT_IDS))


# ---- the sample alone, against vLLM's scatter -------------------------------------------------------------------
def random_vocabulary(size, vocab, seed):
    """A draft vocabulary of ``size`` rising target ids out of ``vocab``, as published heads pick theirs."""
    return sorted(torch.randperm(vocab, generator=torch.Generator().manual_seed(seed))[:size].tolist())


MAPS = {"zoo": (DRAFT_IDS, zoo.VOCAB), "random_1000_of_4096": (random_vocabulary(1000, 4096, 1), 4096)}


def crafted_logits(dtype, size=len(DRAFT_IDS)):
    """Draft logits whose argmax is hard: small integers (most rows tie at the maximum), rows of -inf throughout,
    rows with -inf entries, NaN and +inf (twice in a row); and which rows tie."""
    gen = torch.Generator().manual_seed(0)
    rows = torch.randint(-3, 4, (64, size), generator=gen).to(dtype)
    rows[1] = float("-inf")
    rows[2, ::2] = float("-inf")
    rows[3, [5, 400]] = float("nan")
    rows[4, [7, 700]] = float("inf")
    rows[5] = float("-inf")
    rows[5, size - 1] = 0.0
    top = rows.float().nan_to_num(nan=float("inf")).max(-1, keepdim=True).values
    ties = (rows.float() == top).sum(-1) > 1
    return rows, ties


def head_stub(logits, d2t, vocab=zoo.VOCAB):
    """What ``compute_logits`` reads of an EAGLE-3 head, with the logits processor returning ``logits``."""
    model = types.SimpleNamespace(
        config=types.SimpleNamespace(draft_vocab_size=len(d2t), vocab_size=vocab),
        draft_id_to_target_id=d2t, lm_head=None, logits_processor=lambda lm_head, hidden: logits)
    return types.SimpleNamespace(model=model)


def vllm_tokens(head, stub, rows):
    return head.compute_logits(stub.model, torch.zeros(rows.shape[0], 1)).argmax(dim=-1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("vocabulary", list(MAPS))
def test_the_gather_gives_the_token_of_each_vllm_heads_scatter_and_argmax(vllm_platform, dtype, vocabulary):
    """Every vLLM class whose ``compute_logits`` scatters through d2t (``scatter_heads``), on the zoo's map and on a
    random one: the gather's token is vLLM's on every row, ties, -inf rows, NaN and +inf included."""
    ids, vocab = MAPS[vocabulary]
    rows, ties = crafted_logits(dtype, len(ids))
    stub = head_stub(rows, torch.tensor(zoo.d2t_offsets(ids)), vocab)
    ours = greedy_draft_tokens(stub, GATHER, torch.zeros(rows.shape[0], 1))
    compared = 0
    for head in draft_sample.scatter_heads():
        theirs = vllm_tokens(head, stub, rows)
        assert ours.tolist() == theirs.tolist(), head.__name__
        compared += len(theirs)
    assert compared == 3 * 64 and int(ties.sum()) > 32  # three heads; most rows tie
    assert ours[1].item() == 0 and ours[5].item() == ids[-1]  # -inf throughout: vLLM's argmax is 0


def gather_skipped(stub, hidden):
    return stub.model.logits_processor(None, hidden).argmax(-1)


def offset_off_by_one(stub, hidden):
    best = stub.model.logits_processor(None, hidden).argmax(-1)
    return best + stub.model.draft_id_to_target_id[(best + 1).clamp(max=len(DRAFT_IDS) - 1)]


def last_of_the_tied(stub, hidden):
    logits = stub.model.logits_processor(None, hidden)
    best = logits.shape[-1] - 1 - logits.flip(-1).argmax(-1)
    return best + stub.model.draft_id_to_target_id[best]


def inf_row_not_zero(stub, hidden):
    best = stub.model.logits_processor(None, hidden).argmax(-1)
    return best + stub.model.draft_id_to_target_id[best]


@pytest.mark.parametrize("wrong", [gather_skipped, offset_off_by_one, last_of_the_tied, inf_row_not_zero],
                         ids=lambda f: f.__name__)
def test_the_sample_comparison_catches_each_wrong_gather(vllm_platform, wrong):
    rows, _ = crafted_logits(torch.float32)
    stub = head_stub(rows, D2T)
    theirs = vllm_tokens(draft_sample.scatter_heads()[0], stub, rows)
    assert wrong(stub, torch.zeros(rows.shape[0], 1)).tolist() != theirs.tolist()


def test_a_map_that_does_not_rise_strictly_keeps_vllms_scatter(vllm_platform):
    """Why the gather needs a strictly rising map: with two draft ids' targets swapped, a tie between them breaks
    to the other token in the target vocabulary; with a duplicate target, the scatter keeps one of two logits.
    ``gather_problem`` sees both (and a map of the wrong length) and leaves vLLM's sample in the graph."""
    from vllm.model_executor.models.llama_eagle3 import Eagle3LlamaForCausalLM

    swapped = D2T.clone()
    swapped[0], swapped[1] = DRAFT_IDS[1], DRAFT_IDS[0] - 1  # targets of draft ids 0 and 1 swapped
    rows = torch.zeros(2, len(DRAFT_IDS))
    rows[:, :2] = 1.0  # draft ids 0 and 1 tie
    stub = head_stub(rows, swapped)
    hidden = torch.zeros(2, 1)
    assert (greedy_draft_tokens(stub, GATHER, hidden).tolist()
            != vllm_tokens(Eagle3LlamaForCausalLM, stub, rows).tolist())

    class Head(Eagle3LlamaForCausalLM):
        def __init__(self, d2t):  # no vLLM config: only what gather_problem reads
            torch.nn.Module.__init__(self)
            self.config = types.SimpleNamespace(draft_vocab_size=len(DRAFT_IDS), vocab_size=zoo.VOCAB)
            self.draft_id_to_target_id = d2t

    def problem(d2t, **flags):
        flags = {"use_local_argmax_reduction": False, "use_heterogeneous_vocab": False, **flags}
        proposer = types.SimpleNamespace(model=Head(d2t), **flags)
        return draft_sample.gather_problem(proposer)

    duplicate = D2T.clone()
    duplicate[1] = DRAFT_IDS[0] - 1
    assert problem(D2T) is None
    assert "does not rise strictly" in problem(swapped) and "does not rise strictly" in problem(duplicate)
    assert "rise strictly" in problem(D2T + zoo.VOCAB)  # outside the target vocabulary
    assert "draft_vocab_size" in problem(D2T[:-1].clone())
    assert problem(D2T, use_local_argmax_reduction=True) == "vLLM samples with its own vocabulary switch"
    other = types.SimpleNamespace(model=types.SimpleNamespace(compute_logits=None), use_local_argmax_reduction=False,
                                  use_heterogeneous_vocab=False)
    assert "is not vLLM's EAGLE-3 d2t scatter" in draft_sample.gather_problem(other)


# ---- per step: our runner against vLLM's, with vLLM's real EAGLE-3 head ------------------------------------------
@pytest.fixture(scope="module")
def d2t_head(vllm_platform, tmp_path_factory):
    """vLLM's ``Eagle3LlamaForCausalLM`` for the zoo's ``d2t`` head, built and loaded by vLLM's ``get_model`` (a
    1-rank gloo group stands for tensor parallelism, as vLLM's lm_head and logits processor need one), with its
    forward swapped for ``StandInForward``'s. Torn down with the module."""
    from vllm.config import set_current_vllm_config
    from vllm.distributed import ensure_model_parallel_initialized, init_distributed_environment
    from vllm.distributed.parallel_state import destroy_distributed_environment, destroy_model_parallel
    from vllm.model_executor.model_loader import get_model

    pair = zoo.build_pair("llama_eagle3", shared_zoo(tmp_path_factory), variant="d2t")
    config = pair_config(pair, max_num_seqs=MAX_REQS, max_model_len=512)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.MonkeyPatch.context() as patch, set_current_vllm_config(config):
        # The draft's attention layer needs a backend class at construction; its forward never runs here.
        patch.setattr(type(vllm_platform), "get_attn_backend_cls", classmethod(
            lambda cls, *args, **kwargs: "vllm.v1.attention.backends.flex_attention.FlexAttentionBackend"),
            raising=False)
        init_distributed_environment(world_size=1, rank=0, local_rank=0, backend="gloo",
                                     distributed_init_method=f"tcp://127.0.0.1:{port}")
        ensure_model_parallel_initialized(1, 1)
        model = get_model(vllm_config=config, model_config=config.speculative_config.draft_model_config)
    try:
        yield pair, model
    finally:
        destroy_model_parallel()
        destroy_distributed_environment()


def test_vllm_loads_the_zoo_d2t_head_as_published_heads_load(d2t_head):
    """vLLM's loader reads the checkpoint's ``d2t`` (int64) into ``draft_id_to_target_id`` and its own lm_head of
    855 rows; its ``compute_logits`` maps into the 1024-token target vocabulary."""
    from vllm.model_executor.models.llama_eagle3 import Eagle3LlamaForCausalLM

    pair, model = d2t_head
    assert type(model) is Eagle3LlamaForCausalLM and model.has_own_lm_head
    assert model.config.draft_vocab_size == len(DRAFT_IDS) < model.config.vocab_size == zoo.VOCAB
    assert torch.equal(model.draft_id_to_target_id.cpu(), D2T) and len(set(D2T.tolist())) > 1 and D2T.min() > 0
    emb = zoo.embeddings(0).to(torch.bfloat16)
    f = pair["expected"]["f"]
    every = [t for t in range(zoo.VOCAB) if t != zoo.MASK_ID]
    with torch.inference_mode():
        assert model.compute_logits(emb[every]).argmax(-1).tolist() == [f[t] for t in every]


EMB = zoo.embeddings(0)


def stand_in_forward(model, input_ids, positions, hidden_states, inputs_embeds=None):
    """A forward whose output depends on every input the graphs read (token ids with every earlier row's, as
    attention would; positions; hidden states): the embedding of a mixed token u, plus on a third of the rows a
    second token's, so two draft ids tie at the maximum (one-hot logits 16 each through the zoo's lm_head). The
    hidden state carried on is e_u. Records the KV slots each forward writes and how many rows tied."""
    from vllm.forward_context import get_forward_context

    with device_work():
        slots = get_forward_context().slot_mapping
        model.slots.append(next(iter(slots.values()))[: input_ids.shape[0]].tolist() if slots else [])
        mix = hidden_states.float().sum(-1) + 3 * torch.cumsum(input_ids, 0).float() + positions.float()
        u = mix.long() % zoo.VOCAB
        tie = u % 3 == 0
        emb = EMB.to(hidden_states.dtype)
        last = emb[u] + tie[:, None].to(emb.dtype) * emb[(7 * u + 3) % zoo.VOCAB]
        model.tied_rows.append(int(tie.sum()))
        return last, emb[u]


@pytest.fixture
def d2t_capturing(vllm_platform, tmp_path_factory, monkeypatch, vllm_kernels, d2t_head):
    """An EAGLE-3 proposer of the zoo's ``d2t`` pair ready for capture, its draft vLLM's real head (``d2t_head``)
    with the stand-in forward (a subclass that adds only ``forward``: ``compute_logits`` stays vLLM's)."""
    from vllm.model_executor.models.llama_eagle3 import Eagle3LlamaForCausalLM

    class StandInForward(Eagle3LlamaForCausalLM):
        forward = stand_in_forward

    _, model = d2t_head
    monkeypatch.setattr(model, "__class__", StandInForward)
    model.slots, model.tied_rows = [], []
    return capturing_proposer(vllm_platform, tmp_path_factory, monkeypatch, vllm_kernels, "llama_eagle3", "d2t"), model


@pytest.mark.parametrize("local_argmax", [False, True], ids=["d2t_gather", "local_argmax_reduction"])
@pytest.mark.parametrize("num_reqs", [4, 2])
def test_our_fused_drafting_of_an_eagle3_draft_vocabulary_is_vllms(d2t_capturing, num_reqs, local_argmax):
    """Our runner (the fused first pass with the draft prep, then fused chain steps, sampling by the d2t gather)
    drafts per step what vLLM's runner and eager propose draft (sampling by the scatter and argmax): the same
    target ids, hand-off and state. With vLLM's local argmax reduction both sample with the head's own
    ``get_top_tokens`` (argmax, then d2t), which our graphs record as vLLM calls it."""
    capturing, model = d2t_capturing
    proposer = capturing[0]
    proposer.use_local_argmax_reduction = local_argmax
    ours, upstream = draft_both_ways(capturing, num_reqs, model=model)
    k = proposer.graph_k
    assert proposer.method == "eagle3" and proposer.fused_chain_off == []
    assert proposer.draft_sample == (VLLM if local_argmax else GATHER)
    assert proposer.capture_stats["draft_sample"] == proposer.draft_sample
    assert ours.replays == {FIRST_FUSED: 1, CHAIN_FUSED: k - 1}  # the fused path is the one compared
    assert_same_drafting(ours, upstream, num_reqs, num_reqs * (1 + k))
    drafts = ours.drafts.flatten().tolist()
    assert ours.drafts.shape == (num_reqs, k) and len(set(drafts)) > 1
    # Target ids of the draft vocabulary, each away from its draft id (offsets 8 to 169).
    assert set(drafts) <= set(DRAFT_IDS) and all(DRAFT_IDS.index(t) != t for t in drafts)
    assert sum(model.tied_rows[-k:]) > 0  # vLLM's own forwards of this step had tied rows


def skip_the_gather(proposer, monkeypatch):
    """The fused graphs sample draft ids and never map them."""
    import portable_spec.vllm_adapter.spec_decode.fused_chain as fused_chain

    def unmapped(owner, mode, hidden):
        return owner.model.logits_processor(owner.model.lm_head, hidden).argmax(-1)
    monkeypatch.setattr(fused_chain, "greedy_draft_tokens", unmapped)


def offset_one_too_far(proposer, monkeypatch):
    """The gather's target id is one past the map's."""
    import portable_spec.vllm_adapter.spec_decode.fused_chain as fused_chain

    def shifted(owner, mode, hidden):
        logits = owner.model.logits_processor(owner.model.lm_head, hidden)
        best = logits.argmax(-1)
        return best + 1 + owner.model.draft_id_to_target_id[best]
    monkeypatch.setattr(fused_chain, "greedy_draft_tokens", shifted)


def ties_to_the_last(proposer, monkeypatch):
    """The gather breaks ties to the highest draft id."""
    import portable_spec.vllm_adapter.spec_decode.fused_chain as fused_chain

    def last(owner, mode, hidden):
        logits = owner.model.logits_processor(owner.model.lm_head, hidden)
        best = logits.shape[-1] - 1 - logits.flip(-1).argmax(-1)
        return best + owner.model.draft_id_to_target_id[best]
    monkeypatch.setattr(fused_chain, "greedy_draft_tokens", last)


@pytest.mark.parametrize("mutation", [skip_the_gather, offset_one_too_far, ties_to_the_last],
                         ids=lambda m: m.__name__)
def test_the_per_step_comparison_catches_a_wrong_map_in_ours(d2t_capturing, mutation, monkeypatch):
    """Each wrong gather, put into our fused graphs only (vLLM's path runs unchanged), fails the comparison."""
    capturing, model = d2t_capturing
    mutation(capturing[0], monkeypatch)
    ours, upstream = draft_both_ways(capturing, 4, model=model)
    assert ours.replays == {FIRST_FUSED: 1, CHAIN_FUSED: capturing[0].graph_k - 1}
    with pytest.raises(AssertionError):
        assert_same_drafting(ours, upstream, 4, 4 * capturing[0].verify_len)


def test_the_injected_d2t_bug_fires_on_our_path_and_the_comparison_catches_it(d2t_capturing):
    """``d2t_unmapped`` (``vllm_door.bug_injection``, what the GPU matrix's ``bug_d2t_unmapped_eagle3_d2t`` part
    runs): it fires in our fused graphs only and changes the drafts; the e2e check names agree with the driver's."""
    from portable_spec_harness.e2e.v1_checks import DRAFT_SAMPLES
    from portable_spec_harness.vllm_door import bug_injection

    assert set(DRAFT_SAMPLES) == {GATHER, VLLM}
    capturing, model = d2t_capturing
    with bug_injection.injected("d2t_unmapped") as injection:
        ours, upstream = draft_both_ways(capturing, 4, model=model)
    # The recording 'graphs' rerun the wrapper from Python at every fused replay (a device graph would not).
    assert injection.fired["d2t_unmapped"] >= capturing[0].graph_k
    with pytest.raises(AssertionError):
        assert_same_drafting(ours, upstream, 4, 4 * capturing[0].verify_len)
    assert set(ours.drafts.flatten().tolist()) <= set(range(len(DRAFT_IDS)))  # draft ids, never mapped


def test_the_d2t_bug_baked_into_graphs_at_capture_fires_when_they_replay(d2t_capturing):
    """On a device the wrapper runs once, while a fused graph is recorded, and never at replay: the injection marks
    the kinds captured with it, and only their replays after boot count as fires (the e2e child's
    ``injected_bug_fired``; the H100 run of ``bug_d2t_unmapped_eagle3_d2t`` reported it unfired)."""
    from portable_spec_harness.vllm_door import bug_injection

    capturing, model = d2t_capturing
    proposer = capturing[0]
    proposer.model, proposer.block_size = model, 16
    with bug_injection.injected("d2t_unmapped") as injection:
        proposer.capture_graphs()
        injection.start_counting()  # as the e2e child does after boot
        runner = proposer.graph_runner
        for step in runner.captured.values():
            step.graph.body = lambda: None  # a device graph replays its kernels, not the Python that recorded them
        assert injection.report()["fired"] == {}  # captured with the bug, never replayed: no evidence yet
        first = next(key for key in runner.captured if key.step == FIRST_FUSED)
        assert runner.replay(first) is not None
        runner.count_replays(CHAIN_FUSED, proposer.graph_k - 1)
    report = injection.report()
    assert report["replays_with_bug"] == {FIRST_FUSED: 1, CHAIN_FUSED: proposer.graph_k - 1}
    assert report["fired"] == {"d2t_unmapped": proposer.graph_k} and injection.fired == {}
