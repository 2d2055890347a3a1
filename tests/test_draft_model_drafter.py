"""Our FULL-graph draft-model drafter (``FullGraphDraftModelProposer``) against vLLM 0.26.0's own
``DraftModelProposer``, step by step, on CPU.

Both run through vLLM's own runner method (``GPUModelRunner.propose_draft_token_ids``) and its own Triton kernels,
run by the interpreter (``interpreted_vllm``), on the same proposer, runner buffers and inputs; ours with its graphs
installed (a recording 'graph' replays by rerunning what its capture recorded, over the same persistent buffers and
the metadata built at capture, which is what a device graph replays), vLLM's with them removed. The draft stand-in
reads what a real draft model's kernels read: token ids and positions, the attention metadata its graph holds
(``query_start_loc``, ``seq_lens``, the block table) and a KV cache written at the forward context's slots and read
back through the block table, so a wrong position, slot or sequence length changes the drafts.
"""

from __future__ import annotations

import types

import pytest
import torch

from portable_spec.draft.dispatcher import CHAIN, FIRST
from portable_spec.vllm_adapter.spec_decode.draft_model import FullGraphDraftModelProposer
from portable_spec.vllm_adapter.spec_decode.proposer import PADDING_SLOT
from test_v1_drafter_logic import (  # noqa: F401 - vllm_kernels is a fixture
    MAX_REQS, VOCAB, DeviceLaunch, RecordingBuilder, make_proposer, runner_for, verify_step, vllm_kernels,
)

PAIR = "llama_ctx_draft_model"
LAYER = "draft_model.layers.3.attn"
BLOCK = 16


class KvDraft(torch.nn.Module):
    """A draft model's forward as its kernels see the step: each token's K/V goes to its slot (the forward
    context's slot mapping; padding slots write nothing), and each token reads the K/V at its previous position
    through the block table of its request (found from ``query_start_loc``), and its request's ``seq_lens``. Its
    hidden state (and so its greedy token, ``compute_logits``) depends on all of them. Records what every forward
    read, per real row."""

    def __init__(self, hidden: int, slots: int = 4096) -> None:
        super().__init__()
        self.hidden = hidden
        self.cache = torch.zeros(slots, dtype=torch.int64)
        self.seen: list[dict[str, list[int]]] = []

    def forward(self, input_ids, positions, inputs_embeds=None):
        from vllm.forward_context import get_forward_context

        ctx = get_forward_context()
        meta = ctx.attn_metadata[LAYER]
        n = input_ids.shape[0]
        slots = ctx.slot_mapping[LAYER][:n].long()
        qsl, seq_lens, table = meta.query_start_loc.long(), meta.seq_lens.long(), meta.block_table_tensor.long()
        req = torch.searchsorted(qsl[1:], torch.arange(n), right=True).clamp(max=seq_lens.shape[0] - 1)
        written = slots >= 0
        self.cache[slots[written]] = input_ids.long()[written] * 1000 + positions[written]
        prev = (positions - 1).clamp(min=0)
        prev_slot = table[req, prev // BLOCK] * BLOCK + prev % BLOCK
        ctx_value = self.cache[prev_slot]
        h = 3 * input_ids.long() + 5 * positions + 7 * seq_lens[req] + ctx_value
        self.seen.append({"input_ids": input_ids.tolist(), "positions": positions.tolist(), "slots": slots.tolist(),
                          "seq_lens": seq_lens[req].tolist(), "context": ctx_value.tolist()})
        return h.float()[:, None].expand(n, self.hidden).contiguous()

    def compute_logits(self, hidden):
        return torch.nn.functional.one_hot(hidden[:, 0].long() % VOCAB, VOCAB).float()


class BoolAsIntLaunch(DeviceLaunch):
    """``DeviceLaunch`` for a kernel vLLM passes a Python bool scalar (``shift_input_ids``): Triton's interpreter
    cannot convert a bool scalar argument (it packs it as 32 bits into an int1), a compiled launch can. Passed as
    0/1, the kernel's ``if`` takes the same branch."""

    def __getitem__(self, grid):
        launch = super().__getitem__(grid)
        return lambda *args, **kwargs: launch(*args, **{k: int(v) if isinstance(v, bool) else v
                                                        for k, v in kwargs.items()})


class RecordingExpandLaunch(BoolAsIntLaunch):
    """Also records each launch's tile and token count: what the warm-up's model of the kernel predicts."""

    def __init__(self, kernel) -> None:
        super().__init__(kernel)
        self.launches: list[dict] = []

    def __getitem__(self, grid):
        launch = super().__getitem__(grid)

        def recorded(*args, **kwargs):
            self.launches.append({"grid": tuple(grid), "BLOCK_SIZE_TOKENS": kwargs["BLOCK_SIZE_TOKENS"],
                                  "total_input_tokens": int(kwargs["total_input_tokens"]),
                                  "max_query_len": int((kwargs["query_start_loc_ptr"][1:]
                                                        - kwargs["query_start_loc_ptr"][:-1]).max())})
            return launch(*args, **kwargs)

        return recorded


class MetadataBuilder(RecordingBuilder):
    """A draft attention builder whose per-layer metadata is the common metadata itself, so the draft reads the
    very tensors a graph captured with it reads at replay."""

    def build_for_drafting(self, common_attn_metadata, draft_index):
        super().build_for_drafting(common_attn_metadata, draft_index)
        return common_attn_metadata


@pytest.fixture
def drafter(vllm_platform, tmp_path_factory, monkeypatch, vllm_kernels):
    """Our draft-model proposer for the zoo's 4-layer draft model, ready for ``capture_graphs`` on a recording
    device installed as our 'cuda' port; vLLM's kernels bound where vLLM's proposer calls them, the first pass's
    ``copy_and_expand_eagle_inputs_kernel`` included."""
    import vllm.v1.spec_decode.llm_base_proposer as base
    from interpreted_vllm import spec_decode_utils

    import portable_spec.ports.current as current
    from recording_device import RecordingDevice, RecordingPort

    for name, kernel in vllm_kernels.items():
        monkeypatch.setattr(base, name, kernel)
    expand = RecordingExpandLaunch(spec_decode_utils().copy_and_expand_eagle_inputs_kernel)
    monkeypatch.setattr(base, "copy_and_expand_eagle_inputs_kernel", expand)
    proposer = make_proposer(FullGraphDraftModelProposer, PAIR, tmp_path_factory, monkeypatch)
    proposer._test_expand_launches = expand.launches
    assert proposer.method == "draft_model" and not proposer.pass_hidden_states_to_model
    proposer.graphs = proposer.graph_runner = None
    proposer.model = KvDraft(proposer.hidden_states.shape[1])
    proposer.block_size = BLOCK
    proposer._draft_attn_layer_names = {LAYER}
    builder = MetadataBuilder()
    proposer.draft_attn_groups = [types.SimpleNamespace(
        get_metadata_builder=lambda: builder, kv_cache_spec=None, layer_names=[LAYER],
        backend=types.SimpleNamespace(get_name=lambda: "FLASH_ATTN"))]
    port = RecordingPort(device_module=RecordingDevice())
    monkeypatch.setitem(current._INSTALLED_PORTS, "cuda", port)
    monkeypatch.setattr(type(vllm_platform), "get_global_graph_pool", lambda self: port.graph_pool(), raising=False)
    return proposer


def sampling(all_greedy: bool, num_reqs: int):
    temperature = None if all_greedy else torch.full((num_reqs,), 0.7)
    return types.SimpleNamespace(all_greedy=all_greedy, all_random=not all_greedy, temperature=temperature)


def draft_both_ways(proposer, num_reqs, *, ragged=False, all_greedy=True, drop=()):
    """One step's drafting through vLLM's runner method with our graphs, then without them (vLLM's own forwards),
    on the same runner, proposer and inputs. ``drop``: captured keys removed (those batches fit no graph)."""
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    runner = runner_for(proposer)
    proposer.capture_graphs()
    graphs = proposer.graph_runner
    for key in [key for key in graphs.captured if (key.step, key.num_reqs) in drop]:
        del graphs.captured[key]
    for key, step in graphs.captured.items():  # a device graph's replay writes its captured output tensor
        step.graph.body = lambda step=step, run=proposer.step_call(key).run: step.outputs.copy_(run())
    buffers = ("input_ids", "positions", "_slot_mapping_buffer", "_draft_seq_lens", "_first_query_start_loc")
    fresh = {name: getattr(proposer, name).clone() for name in buffers}

    def run():
        for name in buffers:
            getattr(proposer, name).copy_(fresh[name])
        proposer.model.cache.zero_()
        proposer.model.seen = []
        args = list(verify_step(runner, proposer, num_reqs, ragged))
        args[2] = sampling(all_greedy, num_reqs)
        torch.manual_seed(7)  # probabilistic draft sampling draws its noise from the global generator
        with torch.inference_mode():
            drafts = GPUModelRunner.propose_draft_token_ids(runner, *args)
        return types.SimpleNamespace(drafts=drafts, seen=proposer.model.seen, probs=proposer.take_last_draft_probs(),
                                     cache=proposer.model.cache.clone(), seq_lens=runner.seq_lens[:num_reqs].clone())

    ours = run()
    ours.replays = dict(graphs.replays)
    proposer.graphs.uninstall()
    proposer.graph_runner = None  # vLLM's propose, unhooked: every forward its own
    upstream = run()
    return ours, upstream


def assert_same_drafting(ours, upstream, num_reqs):
    """Same drafts (and draft probabilities), the same KV cache left behind, and every forward reading the same
    inputs in its real rows: count what was compared, fail on nothing compared."""
    assert ours.drafts.shape == upstream.drafts.shape and ours.drafts.numel() > 0
    assert ours.drafts.tolist() == upstream.drafts.tolist()
    assert (ours.probs is None) == (upstream.probs is None)
    if ours.probs is not None:
        assert torch.equal(ours.probs, upstream.probs)
    assert torch.equal(ours.cache, upstream.cache) and bool(ours.cache.ne(0).any())
    assert ours.seq_lens.tolist() == upstream.seq_lens.tolist()
    assert len(ours.seen) == len(upstream.seen) > 1
    compared = 0
    for mine, theirs in zip(ours.seen, upstream.seen):
        real = len(theirs["input_ids"])
        for field in theirs:
            assert mine[field][:real] == theirs[field], field
            compared += real
    assert compared > 0
    return compared


@pytest.mark.parametrize("num_reqs", [4, 2])
def test_first_pass_and_chain_replay_and_draft_what_vllms_draft_model_proposer_drafts(drafter, num_reqs):
    """A verify-shaped step (2+K tokens per request in the first pass, rejected drafts in place with the padding
    slot, a discarded prompt chunk): one first-pass replay and K-1 chain replays, drafting what vLLM drafts."""
    ours, upstream = draft_both_ways(drafter, num_reqs)
    k = drafter.graph_k
    assert ours.replays == {FIRST: 1, CHAIN: k - 1}
    assert len(ours.seen[0]["input_ids"]) == num_reqs * (k + 2)  # the first pass's 2+K tokens per request
    assert PADDING_SLOT in ours.seen[0]["slots"]  # rejected tokens stay in place and write nothing
    assert_same_drafting(ours, upstream, num_reqs)
    assert len({tuple(row) for row in ours.drafts.tolist()}) > 1  # rows differ


def test_a_batch_no_first_graph_fits_runs_vllms_first_pass_and_the_chain_replays_padded(drafter):
    """3 requests: no first-pass graph of 3 (vLLM's forward runs it), chain steps replay the 4-request graph with
    the padding row on the padding slot."""
    ours, upstream = draft_both_ways(drafter, 3)
    assert ours.replays == {CHAIN: drafter.graph_k - 1}
    assert_same_drafting(ours, upstream, 3)
    assert ours.seen[1]["slots"][3] == PADDING_SLOT and len(ours.seen[1]["slots"]) == 4


def test_a_ragged_first_pass_runs_vllms_forward_and_the_chain_replays(drafter):
    """Requests of [1+K, 1+K, K, 1] verified tokens (a shorter prompt chunk, a decode without drafts)."""
    ours, upstream = draft_both_ways(drafter, 4, ragged=True)
    assert ours.replays == {CHAIN: drafter.graph_k - 1}
    assert_same_drafting(ours, upstream, 4)


@pytest.mark.parametrize("ragged", [False, True], ids=["uniform", "ragged"])
def test_vllms_expand_launch_is_what_the_warm_up_plan_models(drafter, ragged):
    """The warm-up plans the expand kernel's variants from a model of vLLM's launch (``warmup_plan.tile_block`` of
    the longest query plus the drafter's new slots per request; the step's scheduled tokens): here vLLM's own
    ``set_inputs_first_pass`` launches it, and every launch is what the model says."""
    from portable_spec.vllm_adapter.worker.warmup_plan import tile_block

    draft_both_ways(drafter, 4, ragged=ragged)
    launches = drafter._test_expand_launches
    assert launches and drafter.needs_extra_input_slots and drafter.net_num_new_slots_per_request == 1
    for launch in launches:
        assert launch["BLOCK_SIZE_TOKENS"] == tile_block(launch["max_query_len"], 1), launch
        assert launch["grid"][0] == 4, launch


def test_with_no_graph_for_the_batch_every_forward_is_vllms(drafter):
    ours, upstream = draft_both_ways(drafter, 4, drop={(FIRST, 4), (CHAIN, 4)})
    assert ours.replays == {}
    assert_same_drafting(ours, upstream, 4)


def test_probabilistic_draft_sampling_draws_what_vllm_draws(drafter):
    """Sampled drafts: vLLM's own sampling on the graphs' outputs, same noise: same drafts and draft probabilities."""
    drafter._enable_probabilistic_draft_probs = True
    ours, upstream = draft_both_ways(drafter, 4, all_greedy=False)
    assert ours.replays == {FIRST: 1, CHAIN: drafter.graph_k - 1} and ours.probs is not None
    assert_same_drafting(ours, upstream, 4)


def chain_position_off_by_one(proposer, monkeypatch):
    """Chain steps run one position ahead of where vLLM's step kernel put them."""
    step = proposer._update_positions_dependent_metadata

    def ahead(*args, **kwargs):
        positions = step(*args, **kwargs)
        if proposer.graph_runner is not None:  # ours only: vLLM's path runs with no graph runner
            proposer.positions[: positions.shape[0]] += 1
        return positions
    monkeypatch.setattr(proposer, "_update_positions_dependent_metadata", ahead)


def after_first_pass_classify(proposer, monkeypatch, effect):
    """Runs ``effect(cad)`` after our first pass's classification (ours only: vLLM's path never classifies)."""
    classify = proposer._first_pass_key

    def mutated(cad):
        key = classify(cad)
        effect(cad)
        return key
    monkeypatch.setattr(proposer, "_first_pass_key", mutated)


def first_pass_slot_off_by_one(proposer, monkeypatch):
    """Request 1's first-pass tokens write their KV one slot off (in the persistent slot buffer the graph reads)."""
    def misplace(cad):
        q = proposer.verify_len + 1
        cad.slot_mapping = cad.slot_mapping.clone()
        cad.slot_mapping[q: 2 * q] += 1
    after_first_pass_classify(proposer, monkeypatch, misplace)


def stale_first_pass_seq_lens(proposer, monkeypatch):
    """The persistent ``seq_lens`` the graphs read is one behind upstream's fresh one."""
    after_first_pass_classify(proposer, monkeypatch,
                              lambda cad: proposer._draft_seq_lens[: cad.num_reqs].sub_(1))


@pytest.mark.parametrize("mutation", [chain_position_off_by_one, first_pass_slot_off_by_one,
                                      stale_first_pass_seq_lens], ids=lambda m: m.__name__)
def test_the_comparison_catches_each_bug_planted_in_our_path(drafter, mutation, monkeypatch):
    """Each bug, put into our path only (vLLM's runs unchanged), makes ``assert_same_drafting`` fail, with the
    mutated path replaying."""
    mutation(drafter, monkeypatch)
    ours, upstream = draft_both_ways(drafter, 4)
    monkeypatch.undo()
    assert ours.replays == {FIRST: 1, CHAIN: drafter.graph_k - 1}
    with pytest.raises(AssertionError):
        assert_same_drafting(ours, upstream, 4)


def test_the_e2e_harness_draft_position_bug_fires_on_our_path_only_and_is_caught(drafter):
    """The GPU matrix's ``draft_position_off_by_one`` (``vllm_door/bug_injection.py``, the part
    ``bug_draft_position_off_by_one_ctx_draft_model``), installed as the e2e child installs it: it perturbs our
    chain only (vLLM's path here runs with no graph runner, as vLLM's own proposer would), fires once per chain step,
    and the comparison with vLLM's drafting fails."""
    from portable_spec_harness.vllm_door import bug_injection

    with bug_injection.injected("draft_position_off_by_one") as injection:
        ours, upstream = draft_both_ways(drafter, 4)
        fired = injection.report()["fired"]
    assert ours.replays == {FIRST: 1, CHAIN: drafter.graph_k - 1}
    assert fired == {"draft_position_off_by_one": drafter.graph_k - 1}
    with pytest.raises(AssertionError):
        assert_same_drafting(ours, upstream, 4)


def test_capture_keys_the_first_pass_at_two_plus_k_tokens_per_request(drafter):
    from portable_spec.vllm_adapter.platform.drafter_plan import drafter_plan

    runner_for(drafter)
    plan = drafter_plan(drafter.vllm_config)
    k = drafter.graph_k
    assert plan.method == "draft_model" and plan.first_step.query_len == k + 2
    stats = drafter.capture_graphs()
    assert stats["failed"] == {} and stats["num_tokens"][FIRST] == [s for s in plan.first_step.sizes
                                                                     if s // (k + 2) <= MAX_REQS]
    assert stats["num_tokens"][CHAIN] == list(plan.chain_step.sizes)
    assert drafter.model.forward is drafter.graphs  # installed: the draft model's calls reach the runner
