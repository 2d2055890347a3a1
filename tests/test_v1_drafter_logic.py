"""Replay selection of our V1 drafters, on CPU, with vLLM 0.26.0's real proposer classes and metadata.

Which forward replays which graph decides correctness (a wrong pick is a stale-pointer bug), so the rules are
tested here without a GPU: the graphs are recording stand-ins (no capture happens on CPU) and the target runner is
reduced to the persistent buffers the drafter reads from it. The real replays run on the cuda lane. Where our drafting
is compared with vLLM's, both run vLLM's own Triton kernels, run by the interpreter (``interpreted_vllm``; the cpu
lane sets ``TRITON_INTERPRET=1``), so no port of a kernel stands on both sides of a comparison.
"""

from __future__ import annotations

import copy
import types

import numpy as np
import pytest
import torch

from portable_spec.capture_sizes import StepPlan
from portable_spec.draft.dispatcher import BLOCK, CHAIN, CHAIN_FUSED, FIRST, FIRST_FUSED, DraftDispatcher
from portable_spec.draft.runner import CapturedStep, DraftGraphRunner
from portable_spec_harness.model_zoo import build_pair
from portable_spec.ports.cpu_port import CpuPort
from portable_spec.vllm_adapter.spec_decode.proposer import (
    PADDING_SLOT, ForwardReplay, FullGraphDFlashProposer, FullGraphEagleProposer, input_pointers,
)
from portable_spec.vllm_adapter.spec_decode.fused_chain import CHAIN_ENV
from shared_zoo import shared_zoo
from vllm_configs import pair_config

MAX_REQS = 8
STEPS = {FIRST: StepPlan(4, (4, 8, 16), "FULL"), FIRST_FUSED: StepPlan(4, (4, 8, 16), "FULL"),
         BLOCK: StepPlan(4, (4, 8, 16), "FULL"),
         CHAIN: StepPlan(1, (1, 2, 4, 8), "FULL"), CHAIN_FUSED: StepPlan(1, (1, 2, 4, 8), "FULL")}


class RecordingGraph:
    def __init__(self) -> None:
        self.replays = 0

    def replay(self) -> None:
        self.replays += 1


class EagerDraft(torch.nn.Module):
    """Stands for the draft model's eager forward: says it ran and on how many tokens."""

    def forward(self, input_ids, positions, inputs_embeds=None, hidden_states=None):
        return ("eager", input_ids.shape[0])


MAX_TOKENS = 64
VOCAB = 32


def runner_buffers() -> types.SimpleNamespace:
    """The target runner's persistent buffers the drafter reads (query_start_loc, seq_lens, block table; the token
    ids, positions and discard mask the draft prep reads) and the facts it checks once."""
    table = torch.zeros(MAX_REQS, 4, dtype=torch.int32)
    positions = torch.zeros(MAX_TOKENS, dtype=torch.int64)
    return types.SimpleNamespace(
        query_start_loc=types.SimpleNamespace(gpu=torch.zeros(MAX_REQS + 1, dtype=torch.int32)),
        seq_lens=torch.zeros(MAX_REQS, dtype=torch.int32), max_num_reqs=MAX_REQS,
        input_ids=types.SimpleNamespace(gpu=torch.zeros(MAX_TOKENS, dtype=torch.int32)), positions=positions,
        _get_positions=lambda n: positions[:n], uses_mrope=False, uses_xdrope_dim=0, supports_mm_inputs=False,
        discard_request_mask=types.SimpleNamespace(gpu=torch.zeros(MAX_REQS, dtype=torch.bool)),
        get_model=lambda: types.SimpleNamespace(),
        input_batch=types.SimpleNamespace(block_table=[types.SimpleNamespace(get_device_tensor=lambda n: table[:n])],
                                          vocab_size=VOCAB))


def make_proposer(cls, pair_name, tmp_path_factory, monkeypatch, variant="perfect"):
    import vllm.v1.spec_decode.llm_base_proposer as base
    from vllm.config import set_current_vllm_config

    monkeypatch.setattr(base, "PIN_MEMORY", False)  # no pinned-memory allocator on a CPU-only host
    pair = build_pair(pair_name, shared_zoo(tmp_path_factory), variant=variant)
    cfg = pair_config(pair, max_num_seqs=MAX_REQS, max_model_len=512)
    with set_current_vllm_config(cfg):
        proposer = cls(cfg, torch.device("cpu"), runner=None)
    proposer.target_runner = runner_buffers()
    proposer.graphs = ForwardReplay(EagerDraft(), proposer)
    kinds = (BLOCK,) if cls is FullGraphDFlashProposer else (FIRST, FIRST_FUSED, CHAIN, CHAIN_FUSED)
    # The one runner, on the CPU platform: no capture happens here, keys are marked captured by ``capture`` below.
    proposer.graph_runner = DraftGraphRunner(CpuPort(), DraftDispatcher({k: STEPS[k] for k in kinds}, MAX_REQS),
                                             proposer)
    return proposer


def cad(query_start_loc, seq_lens, num_reqs, num_tokens, max_query_len, slot_mapping):
    from vllm.v1.attention.backend import CommonAttentionMetadata

    return CommonAttentionMetadata(
        query_start_loc=query_start_loc, query_start_loc_cpu=query_start_loc.clone(), seq_lens=seq_lens,
        num_reqs=num_reqs, num_actual_tokens=num_tokens, max_query_len=max_query_len, max_seq_len=64,
        block_table_tensor=torch.zeros(num_reqs, 4, dtype=torch.int32), slot_mapping=slot_mapping)


def capture(proposer, kind, num_reqs):
    """Mark the key of ``kind`` at ``num_reqs`` requests captured, with a recording graph and static outputs."""
    key = proposer.graph_runner.dispatcher.dispatch(kind, num_reqs)
    assert key.num_reqs == num_reqs, "capture only planned sizes"
    kwargs = proposer._model_kwargs(key.num_tokens)
    step = CapturedStep(key, RecordingGraph(), input_pointers(kwargs), outputs=("static", kind))
    proposer.graph_runner.captured[key] = step
    return step


@pytest.fixture
def eagle(vllm_platform, tmp_path_factory, monkeypatch):
    proposer = make_proposer(FullGraphEagleProposer, "llama_eagle", tmp_path_factory, monkeypatch)
    for n in (1, 2, 4, 8):
        capture(proposer, CHAIN, n)
    for n in (1, 2, 4):
        capture(proposer, FIRST, n)
    return proposer


def test_chain_step_replays_the_smallest_graph_that_fits_and_pads_its_slots(eagle):
    eagle._slot_mapping_buffer[:8].fill_(7)
    meta = cad(eagle.arange[:4], eagle.target_runner.seq_lens[:3], 3, 3, 1, eagle._slot_mapping_buffer[:3])
    key = eagle._classify(meta, draft_index=1)
    assert (key.step, key.num_reqs) == (CHAIN, 4)
    assert eagle._slot_mapping_buffer[:4].tolist() == [7, 7, 7, PADDING_SLOT]  # the padded row never writes KV
    eagle._pending = key
    assert eagle.pending_key(eagle._model_kwargs(6)) == key  # upstream's own padded size: our graph serves it


def test_chain_step_without_the_arange_query_start_loc_is_not_a_chain_step(eagle):
    other = torch.arange(4, dtype=torch.int32)
    meta = cad(other, eagle.target_runner.seq_lens[:3], 3, 3, 1, eagle._slot_mapping_buffer[:3])
    assert eagle._classify(meta, draft_index=1) is None


def test_verify_shaped_first_pass_replays_its_graph(eagle):
    runner = eagle.target_runner
    meta = cad(runner.query_start_loc.gpu[:5], runner.seq_lens[:4], 4, 16, 4, eagle._slot_mapping_buffer[:16])
    key = eagle._classify(meta, draft_index=0)
    assert (key.step, key.num_reqs, key.num_tokens) == (FIRST, 4, 16)
    eagle._pending = key
    assert eagle.pending_key(eagle._model_kwargs(16)) == key


def ragged_first_pass(proposer):
    """The first pass of 4 requests whose queries bring [4, 4, 3, 1] tokens (two verify-shaped requests, a prompt
    tail, a decode without drafts), as vLLM's runner hands it to the drafter: unpadded metadata, so 4 real requests
    and 12 real tokens (never "3 requests and a padded one": ``CommonAttentionMetadata.unpadded``)."""
    runner = proposer.target_runner
    runner.query_start_loc.gpu[:5] = torch.tensor([0, 4, 8, 11, 12], dtype=torch.int32)
    return cad(runner.query_start_loc.gpu[:5], runner.seq_lens[:4], 4, 12, 4, proposer._slot_mapping_buffer[:12])


@pytest.mark.parametrize("support,replays", [("ALWAYS", True), ("UNIFORM_BATCH", False)])
def test_a_ragged_first_pass_replays_only_where_the_backend_reads_query_start_loc(eagle, support, replays):
    """A graph captured for 4 uniform requests serves the ragged batch only on a backend whose graphs take mixed
    batches (ALWAYS: FLASH_ATTN on FA3 reads each request's range from query_start_loc); a UNIFORM_BATCH backend
    (FlashMLA, FlashAttnMLA) reshapes queries by the captured length, so the batch takes vLLM's path there."""
    from vllm.v1.attention.backend import AttentionCGSupport

    eagle.draft_attn_groups = [attention_group("FLASH_ATTN", AttentionCGSupport[support])]
    eagle.ragged_first_pass = eagle._ragged_first_pass_replays()
    key = eagle._classify(ragged_first_pass(eagle), draft_index=0)
    assert (key is not None) == replays
    if replays:
        assert (key.step, key.num_reqs, key.num_tokens) == (FIRST, 4, 16)
    runner = eagle.target_runner
    uniform = cad(runner.query_start_loc.gpu[:5], runner.seq_lens[:4], 4, 16, 4, eagle._slot_mapping_buffer[:16])
    assert eagle._classify(uniform, draft_index=0).num_reqs == 4  # uniform: every backend


def test_first_pass_is_not_replayed_when_shapes_disagree(eagle):
    runner = eagle.target_runner
    prefill = cad(runner.query_start_loc.gpu[:3], runner.seq_lens[:2], 2, 9, 7, eagle._slot_mapping_buffer[:9])
    assert eagle._classify(prefill, draft_index=0) is None
    foreign = cad(torch.arange(5, dtype=torch.int32) * 4, runner.seq_lens[:4], 4, 16, 4, eagle._slot_mapping_buffer)
    assert eagle._classify(foreign, draft_index=0) is None
    three = cad(runner.query_start_loc.gpu[:4], runner.seq_lens[:3], 3, 12, 4, eagle._slot_mapping_buffer[:12])
    assert eagle._classify(three, draft_index=0) is None  # 3 requests: the target never pads to an uncaptured size
    eagle._pending = eagle.graph_runner.dispatcher.dispatch(FIRST, 4)  # announced, but upstream padded elsewhere
    assert eagle.pending_key(eagle._model_kwargs(20)) is None
    assert eagle._pending is None  # an announcement is consumed exactly once


def test_replay_only_with_the_captured_input_pointers(eagle):
    graphs, runner = eagle.graphs, eagle.graph_runner
    key = runner.dispatcher.dispatch(CHAIN, 2)
    step = runner.captured[key]
    eagle._pending = key
    assert graphs(**eagle._model_kwargs(2)) == ("static", CHAIN)
    assert step.graph.replays == 1 and runner.replays[CHAIN] == 1
    eagle._pending = key
    moved = dict(eagle._model_kwargs(2), input_ids=eagle.input_ids[:2].clone())  # same shape, other storage
    assert graphs(**moved) == ("eager", 2)
    assert runner.pointer_mismatches == 1 and step.graph.replays == 1
    assert graphs(**eagle._model_kwargs(2)) == ("eager", 2)  # nothing announced: the model runs


def test_dflash_block_step_moves_fresh_metadata_into_persistent_buffers(vllm_platform, tmp_path_factory, monkeypatch):
    dflash = make_proposer(FullGraphDFlashProposer, "qwen3_dflash", tmp_path_factory, monkeypatch)
    for n in (1, 2, 4):
        capture(dflash, BLOCK, n)
    dflash._slot_mapping_buffer.fill_(5)
    fresh_qsl = torch.arange(4, dtype=torch.int32) * 4  # what upstream builds each step
    fresh_seq = torch.tensor([10, 20, 30], dtype=torch.int32)
    meta = cad(fresh_qsl, fresh_seq, 3, 12, 4, dflash._slot_mapping_buffer[:12])
    key = dflash._classify(meta, draft_index=0)
    assert (key.step, key.num_reqs, key.num_tokens) == (BLOCK, 4, 16)
    assert dflash._block_query_start_loc[:5].tolist() == [0, 4, 8, 12, 12]  # padded request: zero-length query
    assert dflash._block_seq_lens[:4].tolist() == [10, 20, 30, 0]
    assert meta.query_start_loc.data_ptr() == dflash._block_query_start_loc.data_ptr()
    assert meta.seq_lens.data_ptr() == dflash._block_seq_lens.data_ptr()
    assert dflash._slot_mapping_buffer[12:16].tolist() == [PADDING_SLOT] * 4
    assert dflash._slot_mapping_buffer[:12].tolist() == [5] * 12
    too_big = cad(torch.arange(10, dtype=torch.int32) * 4, torch.ones(9, dtype=torch.int32), 9, 36, 4,
                  dflash._slot_mapping_buffer[:36])
    assert dflash._classify(too_big, draft_index=0) is None
    # Upstream's block is uniform by construction; were it ever ragged, no backend's block graph would take it.
    ragged = cad(torch.tensor([0, 4, 8, 11, 12], dtype=torch.int32), fresh_seq.repeat(2)[:4], 4, 12, 4,
                 dflash._slot_mapping_buffer[:12])
    dflash.ragged_first_pass = True
    assert dflash._classify(ragged, draft_index=0) is None


class MetadataRecorder:
    """A draft attention group whose builder records the common metadata of every build (the per-layer metadata
    it returns says it is non-causal, which DFlash's own build asserts)."""

    def __init__(self) -> None:
        self.built = []

    def group(self):
        def build_for_drafting(common_attn_metadata, draft_index):
            self.built.append(common_attn_metadata)
            return types.SimpleNamespace(causal=False)

        builder = types.SimpleNamespace(build_for_drafting=build_for_drafting)
        return types.SimpleNamespace(get_metadata_builder=lambda: builder, kv_cache_spec=None,
                                     layer_names=["draft.layers.0.attn"])


def persistent_cad(proposer, qsl, qsl_cpu, seq_lens, num_reqs, num_tokens, max_query_len, table=None):
    """Metadata over the runner's block table and the proposer's slot buffer, as upstream's steps hand it over."""
    from vllm.v1.attention.backend import CommonAttentionMetadata

    if table is None:
        table = proposer.target_runner.input_batch.block_table[0].get_device_tensor(num_reqs)
    return CommonAttentionMetadata(
        query_start_loc=qsl, query_start_loc_cpu=qsl_cpu, seq_lens=seq_lens, num_reqs=num_reqs,
        num_actual_tokens=num_tokens, max_query_len=max_query_len, max_seq_len=300, block_table_tensor=table,
        slot_mapping=proposer._slot_mapping_buffer[:num_tokens])


def test_a_padded_chain_replay_builds_its_metadata_for_the_graphs_batch(eagle):
    """The MTP-on-MLA soak's crash (an 11 s stall, then an illegal address): a chain step of 6 requests replayed the
    8-request graph with metadata built for 6, and FLASH_ATTN_MLA's FA3 scheduler plan (built per batch into the
    builder's persistent buffer) then disagreed with the graph's kernel. As vLLM's runner does for its own padded
    graphs, the build sees the graph's batch: padding rows are one-token requests of length 1 on the null block
    whose slots write nothing; upstream's own metadata keeps its real batch."""
    from vllm.v1.attention.backends.utils import NULL_BLOCK_ID

    recorder = MetadataRecorder()
    eagle.draft_attn_groups = [recorder.group()]
    runner = eagle.target_runner
    runner.input_batch.block_table[0].get_device_tensor(MAX_REQS).fill_(9)  # stale rows past the batch
    runner.seq_lens[:MAX_REQS] = torch.tensor([290, 36, 24, 77, 77, 77, 77, 77], dtype=torch.int32)
    eagle._slot_mapping_buffer[:MAX_REQS].fill_(7)
    meta = persistent_cad(eagle, eagle.arange[:4], torch.arange(4, dtype=torch.int32), runner.seq_lens[:3], 3, 3, 1)
    eagle.build_per_group_and_layer_attn_metadata(meta, draft_index=1)
    (built,) = recorder.built
    assert (built.num_reqs, built.num_actual_tokens, eagle._pending.num_reqs) == (4, 4, 4)
    assert built.query_start_loc.tolist() == built.query_start_loc_cpu.tolist() == [0, 1, 2, 3, 4]
    assert built.seq_lens.tolist() == [290, 36, 24, 1] and built.seq_lens.data_ptr() == runner.seq_lens.data_ptr()
    assert built.block_table_tensor[:3].eq(9).all() and built.block_table_tensor[3].eq(NULL_BLOCK_ID).all()
    assert built.slot_mapping.tolist() == [7, 7, 7, PADDING_SLOT]
    assert built.block_table_tensor.data_ptr() == meta.block_table_tensor.data_ptr()
    assert (meta.num_reqs, meta.num_actual_tokens, meta.seq_lens.shape[0]) == (3, 3, 3)  # upstream's, unchanged
    assert eagle.padded_metadata_builds == {eagle._pending.step: 1}  # counted, so a soak can say it took this path

    # A batch of a captured size builds from upstream's metadata itself.
    recorder.built.clear()
    exact = persistent_cad(eagle, eagle.arange[:5], torch.arange(5, dtype=torch.int32), runner.seq_lens[:4], 4, 4, 1)
    eagle.build_per_group_and_layer_attn_metadata(exact, draft_index=1)
    assert recorder.built == [exact] and eagle._pending.num_reqs == 4
    assert sum(eagle.padded_metadata_builds.values()) == 1  # an exact batch is no padded build

    # Metadata off the persistent buffers the graph reads cannot be padded there: vLLM's path, built as it came.
    recorder.built.clear()
    off = persistent_cad(eagle, eagle.arange[:4], torch.arange(4, dtype=torch.int32), runner.seq_lens[:3], 3, 3, 1,
                         table=torch.zeros(3, 4, dtype=torch.int32))
    eagle.build_per_group_and_layer_attn_metadata(off, draft_index=1)
    assert recorder.built == [off] and eagle._pending is None
    assert sum(eagle.padded_metadata_builds.values()) == 1  # nor is a forward left to vLLM's path

    # Per-request metadata we do not pad: vLLM's path, and the runner's rows past the batch are left as they were.
    recorder.built.clear()
    runner.seq_lens[3:MAX_REQS] = 77
    runner.input_batch.block_table[0].get_device_tensor(MAX_REQS)[3:].fill_(9)
    unpaddable = persistent_cad(eagle, eagle.arange[:4], torch.arange(4, dtype=torch.int32), runner.seq_lens[:3], 3,
                                3, 1).replace(encoder_seq_lens=torch.ones(3, dtype=torch.int32))
    eagle.build_per_group_and_layer_attn_metadata(unpaddable, draft_index=1)
    assert recorder.built == [unpaddable] and eagle._pending is None
    assert runner.seq_lens[3:MAX_REQS].eq(77).all()
    assert runner.input_batch.block_table[0].get_device_tensor(MAX_REQS)[3:].eq(9).all()


def test_a_padded_dflash_block_builds_its_metadata_for_the_graphs_batch(vllm_platform, tmp_path_factory,
                                                                         monkeypatch):
    """DFlash's padded block step likewise: the build sees the graph's 4 requests (the padding request's query and
    sequence are empty, vLLM's own padding rows; its block-table row is the null block) and all 16 tokens."""
    from vllm.v1.attention.backends.utils import NULL_BLOCK_ID

    dflash = make_proposer(FullGraphDFlashProposer, "qwen3_dflash", tmp_path_factory, monkeypatch)
    for n in (1, 2, 4):
        capture(dflash, BLOCK, n)
    recorder = MetadataRecorder()
    dflash.draft_attn_groups = [recorder.group()]
    dflash.target_runner.input_batch.block_table[0].get_device_tensor(MAX_REQS).fill_(9)
    fresh_qsl = torch.arange(4, dtype=torch.int32) * 4
    meta = persistent_cad(dflash, fresh_qsl, fresh_qsl.clone(), torch.tensor([10, 20, 30], dtype=torch.int32), 3, 12,
                          4)
    dflash.build_per_group_and_layer_attn_metadata(meta, draft_index=0)
    (built,) = recorder.built
    assert (built.num_reqs, built.num_actual_tokens, dflash._pending.num_tokens) == (4, 16, 16)
    assert built.query_start_loc.tolist() == built.query_start_loc_cpu.tolist() == [0, 4, 8, 12, 12]
    assert built.seq_lens.tolist() == [10, 20, 30, 0]
    assert built.block_table_tensor[3].eq(NULL_BLOCK_ID).all() and built.block_table_tensor[:3].eq(9).all()
    assert built.slot_mapping.shape[0] == 16 and built.slot_mapping[12:].eq(PADDING_SLOT).all()
    assert meta.num_reqs == 3
    assert dflash.padded_metadata_builds == {BLOCK: 1}


def test_a_backend_below_the_needed_graph_level_is_refused_with_its_name(eagle, caplog):
    from vllm.v1.attention.backend import AttentionCGSupport

    class SingleTokenBuilder:
        @classmethod
        def get_cudagraph_support(cls, vllm_config, kv_cache_spec):
            return AttentionCGSupport.UNIFORM_SINGLE_TOKEN_DECODE

    group = types.SimpleNamespace(get_metadata_builder=lambda: SingleTokenBuilder, kv_cache_spec=None,
                                  backend=types.SimpleNamespace(get_name=lambda: "FLASHINFER"))
    eagle.draft_attn_groups = [group]
    eagle._init_fused_chain(MAX_REQS)
    assert any("FLASHINFER needs its metadata built every step" in r for r in eagle.fused_chain_off)
    with caplog.at_level("WARNING", logger="portable_spec.vllm_adapter"):
        kinds = eagle._graph_kinds(PLAN)
    assert kinds == (CHAIN,)  # chain steps fit SINGLE_TOKEN_DECODE; the (1+K)-token pass does not
    assert "backend FLASHINFER supports graphs only at UNIFORM_SINGLE_TOKEN_DECODE" in caplog.text


PLAN = types.SimpleNamespace(first_step=STEPS[FIRST], chain_step=STEPS[CHAIN])


def attention_group(name: str, support=None):
    from vllm.v1.attention.backend import AttentionCGSupport

    class Builder:
        @classmethod
        def get_cudagraph_support(cls, vllm_config, kv_cache_spec):
            return support or AttentionCGSupport.UNIFORM_BATCH

    return types.SimpleNamespace(get_metadata_builder=lambda: Builder, kv_cache_spec=None,
                                 backend=types.SimpleNamespace(get_name=lambda: name))


def test_fused_chain_graphs_replace_chain_graphs_for_a_build_free_backend(eagle):
    eagle.draft_attn_groups = [attention_group("FLASH_ATTN")]
    eagle._init_fused_chain(MAX_REQS)
    assert eagle.fused_chain_off == []
    assert eagle._graph_kinds(PLAN) == (FIRST_FUSED, CHAIN_FUSED)
    # Batches that sample from the draft run upstream's propose: its per-forward graphs are captured too.
    eagle._enable_probabilistic_draft_probs = True
    assert eagle._graph_kinds(PLAN) == (FIRST_FUSED, FIRST, CHAIN_FUSED, CHAIN)
    eagle._enable_probabilistic_draft_probs = False
    eagle.eplb_state = object()  # EPLB keeps upstream's propose (our fused path refuses it per batch)
    assert eagle._graph_kinds(PLAN) == (FIRST_FUSED, FIRST, CHAIN_FUSED, CHAIN)


def test_tensor_parallel_does_not_block_fused_chain_steps(eagle, monkeypatch):
    """At TP > 1 the fused graph holds the draft's logits all-gather; it is no longer a reason to stay unfused."""
    eagle.draft_attn_groups = [attention_group("FLASH_ATTN")]
    monkeypatch.setattr(eagle.vllm_config.parallel_config, "tensor_parallel_size", 2)
    eagle._init_fused_chain(MAX_REQS)
    assert eagle.fused_chain_off == []


def test_fused_chain_is_switched_off_by_env_and_bad_values_are_one_line_errors(eagle, monkeypatch):
    from portable_spec.errors import PortableSpecError

    eagle.draft_attn_groups = [attention_group("FLASH_ATTN")]
    monkeypatch.setenv(CHAIN_ENV, "forward")
    eagle._init_fused_chain(MAX_REQS)
    assert eagle.fused_chain_off == [f"{CHAIN_ENV}=forward"]
    assert eagle._graph_kinds(PLAN) == (FIRST, CHAIN)
    monkeypatch.setenv(CHAIN_ENV, "sideways")
    with pytest.raises(PortableSpecError, match=f"^{CHAIN_ENV}='sideways' is not one of fused, forward; unset it"):
        eagle._init_fused_chain(MAX_REQS)


@pytest.fixture
def fused(eagle):
    eagle.draft_attn_groups = [attention_group("FLASH_ATTN")]
    eagle._init_fused_chain(MAX_REQS)
    for n in (1, 2, 4, 8):
        capture(eagle, CHAIN_FUSED, n)
    return eagle


def propose_kwargs(eagle, num_reqs, all_greedy=True):
    meta = cad(eagle.target_runner.query_start_loc.gpu[: num_reqs + 1], eagle.target_runner.seq_lens[:num_reqs],
               num_reqs, num_reqs * 4, 4, eagle._slot_mapping_buffer[: num_reqs * 4])
    return {"common_attn_metadata": meta, "sampling_metadata": types.SimpleNamespace(all_greedy=all_greedy),
            "mm_embed_inputs": None, "num_rejected_tokens_gpu": None}


def test_fused_chain_picks_the_smallest_graph_that_fits_and_only_when_exact(fused):
    k = fused.graph_k
    step = fused._fused_step_for(k, (), propose_kwargs(fused, 3))
    assert (step.step, step.num_reqs) == (CHAIN_FUSED, 4)
    assert fused._fused_step_for(k, (), propose_kwargs(fused, MAX_REQS)).num_reqs == MAX_REQS
    assert fused._fused_step_for(k - 1, (), propose_kwargs(fused, 3)) is None  # another K than captured
    assert fused._fused_step_for(k, ("positional",), propose_kwargs(fused, 3)) is None
    fused._enable_probabilistic_draft_probs = True
    assert fused._fused_step_for(k, (), propose_kwargs(fused, 3, all_greedy=False)) is None  # samples from the draft
    assert fused._fused_step_for(k, (), propose_kwargs(fused, 3, all_greedy=True)) is not None
    fused.eplb_state = object()
    assert fused._fused_step_for(k, (), propose_kwargs(fused, 3)) is None


class FusedBodyGraph:
    """Stands for a captured fused chain step on CPU: what its kernels do to the persistent buffers (next token =
    input token + 100, written at column current_draft_step; hidden states carried forward)."""

    def __init__(self, proposer, size):
        self.proposer, self.size, self.steps = proposer, size, []

    def replay(self):
        p, n = self.proposer, self.size
        step = int(p.current_draft_step.item())
        self.steps.append((step, p.positions[:n].tolist(), p._slot_mapping_buffer[:n].tolist()))
        tokens = p.input_ids[:n].long() + 100
        p.draft_tokens[:n, step] = tokens
        p.input_ids[:n] = tokens


def test_fused_chain_loop_moves_every_step_through_persistent_buffers(fused, monkeypatch):
    k, batch = fused.graph_k, 3
    key = fused.graph_runner.dispatcher.dispatch(CHAIN_FUSED, 4)
    step = fused.graph_runner.captured[key]
    step.graph = FusedBodyGraph(fused, 4)
    kwargs = propose_kwargs(fused, batch)
    meta = kwargs["common_attn_metadata"]
    fused.target_runner.seq_lens[:batch] = torch.tensor([20, 30, 40], dtype=torch.int32)
    fused._first_pass_cad, fused._first_pass_token_indices = meta, torch.tensor([3, 7, 11])
    fused.positions[:12] = torch.arange(12) + 50
    hidden = torch.arange(12, dtype=torch.float32)[:, None].expand(12, fused.hidden_states.shape[1])
    fused.graphs.last_output = (hidden, hidden * 2)

    def step_kernel(positions, common_attn_metadata, batch_size, input_batch_size, block_size):
        # vLLM's step kernel, as it acts on the buffers: next position, one more KV entry, padding rows' slots.
        fused.positions[:batch_size] = positions + 1
        common_attn_metadata.seq_lens[:batch_size] += 1
        fused._slot_mapping_buffer[:batch_size] = 1000 + positions + 1
        fused._slot_mapping_buffer[batch_size:input_batch_size] = PADDING_SLOT
        return fused.positions[:batch_size]
    monkeypatch.setattr(fused, "_update_positions_dependent_metadata", step_kernel)
    fused.num_speculative_tokens = k
    rejected = torch.tensor([1, 0, 2], dtype=torch.int32)
    positions = fused._chain_inputs_from(torch.tensor([5, 6, 7]))
    drafts = fused._run_fused_chain(key, batch, positions, meta, rejected)

    assert drafts.tolist() == [[t + 100 * i for i in range(k)] for t in (5, 6, 7)]
    assert [s for s, _, _ in step.graph.steps] == list(range(1, k))  # current_draft_step, one replay per step
    assert step.graph.steps[0][1][:batch] == [54, 58, 62]  # gathered first-pass positions, advanced once
    assert step.graph.steps[0][2] == [1054, 1058, 1062, PADDING_SLOT]  # the padded row never writes KV
    assert fused.hidden_states[:batch, 0].tolist() == [6.0, 14.0, 22.0]  # the first pass's hidden at its samples
    assert fused.target_runner.seq_lens[:batch].tolist() == [20 - 1 + k - 1, 30 + k - 1, 40 - 2 + k - 1]
    assert (meta.num_actual_tokens, meta.max_query_len) == (batch, 1)
    assert meta.query_start_loc.data_ptr() == fused.arange.data_ptr()
    assert fused.graph_runner.replays[CHAIN_FUSED] == k - 1


def test_propose_delegates_whole_when_no_fused_graph_applies_and_refuses_stale_first_pass_state(fused, monkeypatch):
    from vllm.v1.spec_decode.llm_base_proposer import SpecDecodeBaseProposer

    calls = []

    def upstream_propose(self, num_speculative_tokens, **kwargs):  # stands for vLLM's GPU-only propose
        calls.append(num_speculative_tokens)
        return torch.zeros(kwargs["common_attn_metadata"].num_reqs, num_speculative_tokens, dtype=torch.int64)
    monkeypatch.setattr(SpecDecodeBaseProposer, "propose", upstream_propose)
    k = fused.graph_k
    # A batch that samples from the draft: no fused graph applies, upstream's whole propose runs with the caller's K.
    fused._enable_probabilistic_draft_probs = True
    assert fused.propose(k, **propose_kwargs(fused, 3, all_greedy=False)).shape == (3, k) and calls == [k]
    # A fused graph applies: upstream runs the first pass alone (K=1); if that left no forward output or metadata
    # behind, the chain refuses to start from stale state.
    fused.graphs.last_output = ("stale", "stale")
    with pytest.raises(RuntimeError, match="first draft pass bypassed our hooks"):
        fused.propose(k, **propose_kwargs(fused, 3, all_greedy=True))
    assert calls == [k, 1] and fused.graphs.last_output is None


def test_fused_chain_names_each_reason_it_cannot_apply(eagle, monkeypatch):
    from vllm.config import ModelConfig

    eagle.draft_attn_groups = [attention_group("FLASH_ATTN"), attention_group("TRITON_ATTN")]
    monkeypatch.setattr(ModelConfig, "rswa_window", property(lambda self: 128))
    eagle._enable_probabilistic_draft_probs = False
    eagle.parallel_drafting = True
    eagle._init_fused_chain(MAX_REQS)
    assert eagle.fused_chain_off == [
        "parallel drafting",
        "R-SWA attention (FLASH_ATTN's build copies its prefix lengths into persistent buffers)",
        "draft attention FLASH_ATTN, TRITON_ATTN needs its metadata built every step"]
    assert CHAIN_FUSED not in eagle._graph_kinds(PLAN)


def test_capture_memory_is_split_into_allocator_and_other():
    from portable_spec.draft.runner import memory_deltas

    before = {"free": 10_000, "reserved": 1_000, "allocated": 500}
    after = {"free": 7_000, "reserved": 3_000, "allocated": 600}
    assert memory_deltas(before, after) == {"memory_bytes": 3_000, "reserved_bytes": 2_000, "allocated_bytes": 100}
    assert memory_deltas(None, None) == {"memory_bytes": None}


# ---- capture_graphs end to end on the CPU: real proposer, real plan and metadata, recording device -------------
class TensorDraft(torch.nn.Module):
    """A draft stand-in with tensor outputs (EAGLE: ``(last_hidden, hidden)``), and logits whose argmax is known."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.hidden = hidden

    def forward(self, input_ids, positions, inputs_embeds=None, hidden_states=None):
        h = torch.zeros(input_ids.shape[0], self.hidden) if hidden_states is None else hidden_states.float()
        h = h + input_ids[:, None].float()
        return h, h

    def compute_logits(self, hidden):
        logits = torch.zeros(hidden.shape[0], 32)
        logits[torch.arange(hidden.shape[0]), hidden[:, 0].long() % 32] = 1.0
        return logits


class RecordingBuilder:
    """Stands for a FLASH_ATTN metadata builder: records the common metadata each build got. Its graphs need
    uniform batches unless a test says otherwise (``support``: FA2's level; FA3's is ALWAYS)."""

    def __init__(self) -> None:
        from vllm.v1.attention.backend import AttentionCGSupport

        self.built = []
        self.support = AttentionCGSupport.UNIFORM_BATCH

    def get_cudagraph_support(self, vllm_config, kv_cache_spec):
        return self.support

    def build_for_drafting(self, common_attn_metadata, draft_index):
        self.built.append((draft_index, common_attn_metadata))
        return ("metadata", draft_index)


class HostReads(torch.overrides.TorchFunctionMode):
    """Records every read of a tensor's values into Python (``item``, ``tolist``, ``int()``, ``bool()``, ``cpu``,
    ``numpy``...) made by host code: on a GPU each is a device-to-host sync. Work that stands for device work here
    (a kernel launch, which the Triton interpreter runs on the host; a draft model's forward) runs inside
    ``device_work()`` and is not counted."""

    READS = frozenset({"item", "tolist", "__int__", "__float__", "__bool__", "__index__", "cpu", "numpy"})
    depth = 0  # > 0 while device work runs

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if HostReads.depth == 0 and name in self.READS:
            self.reads.append(name)
        return func(*args, **(kwargs or {}))


class device_work:
    def __enter__(self):
        HostReads.depth += 1

    def __exit__(self, *exc):
        HostReads.depth -= 1


class DeviceLaunch:
    """``kernel[grid](*args, **kwargs)`` as vLLM launches it, with the launch marked as device work: the Triton
    interpreter reads and writes the tensors on the host, where a device would not."""

    def __init__(self, kernel) -> None:
        self.kernel, self.grids = kernel, []

    def __getitem__(self, grid):
        self.grids.append(tuple(grid))
        launch = self.kernel[grid]

        def on_device(*args, **kwargs):
            with device_work():
                return launch(*args, **kwargs)
        return on_device


@pytest.fixture(scope="module")
def vllm_kernels():
    """vLLM's own draft-prep and step kernels (its Triton source, run by the interpreter: no port of ours on either
    side of a comparison), each launch marked as device work. The step kernel is launched by vLLM's own wrapper,
    ``eagle_step_update_slot_mapping_and_metadata``, which finds it in its module."""
    from interpreted_vllm import spec_decode_utils

    utils = spec_decode_utils()
    utils.eagle_step_slot_mapping_metadata_kernel = DeviceLaunch(utils.eagle_step_slot_mapping_metadata_kernel)
    return {"eagle_prepare_next_token_padded_kernel": DeviceLaunch(utils.eagle_prepare_next_token_padded_kernel),
            "eagle_prepare_inputs_padded_kernel": DeviceLaunch(utils.eagle_prepare_inputs_padded_kernel),
            "eagle_step_update_slot_mapping_and_metadata": utils.eagle_step_update_slot_mapping_and_metadata}


@pytest.fixture
def capturing(vllm_platform, tmp_path_factory, monkeypatch, vllm_kernels):
    """An EAGLE proposer ready for ``capture_graphs`` on a recording device installed as our 'cuda' port; vLLM's
    draft-prep and step kernels (``vllm_kernels``) bound to the names vLLM's proposer calls them by, where our
    draft prep finds them too."""
    return capturing_proposer(vllm_platform, tmp_path_factory, monkeypatch, vllm_kernels, "llama_eagle")


def capturing_proposer(vllm_platform, tmp_path_factory, monkeypatch, vllm_kernels, pair, variant="perfect"):
    """``capturing`` for the zoo's ``pair`` / ``variant``: (proposer, its draft attention builder, the device)."""
    import vllm.v1.spec_decode.llm_base_proposer as base

    import portable_spec.ports.current as mixin
    from recording_device import RecordingDevice, RecordingPort

    for name, kernel in vllm_kernels.items():
        monkeypatch.setattr(base, name, kernel)

    proposer = make_proposer(FullGraphEagleProposer, pair, tmp_path_factory, monkeypatch, variant)
    proposer.graphs, proposer.graph_runner = None, None
    proposer.model = TensorDraft(proposer.hidden_states.shape[1])
    proposer._draft_attn_layer_names = {"draft.layers.0.attn"}  # what load_model records
    builder = RecordingBuilder()
    proposer.draft_attn_groups = [types.SimpleNamespace(
        get_metadata_builder=lambda: builder, kv_cache_spec=None, layer_names=["draft.layers.0.attn"],
        backend=types.SimpleNamespace(get_name=lambda: "FLASH_ATTN"))]
    device = RecordingDevice()
    port = RecordingPort(device_module=device)
    monkeypatch.setitem(mixin._INSTALLED_PORTS, "cuda", port)
    # Our platform classes take vLLM's pool from our port (SharedPoolMixin); the CPU test platform has no pool.
    monkeypatch.setattr(type(vllm_platform), "get_global_graph_pool", lambda self: port.graph_pool(), raising=False)
    return proposer, builder, device


def test_capture_graphs_keys_every_planned_step_through_the_one_runner(capturing, caplog):
    from portable_spec.draft.capture_log import CAPTURE_LOG_PREFIX
    from portable_spec.vllm_adapter.platform.drafter_plan import drafter_plan

    proposer, builder, device = capturing
    plan = drafter_plan(proposer.vllm_config)
    with caplog.at_level("INFO", logger="portable_spec"):
        stats = proposer.capture_graphs()
    first = [s for s in plan.first_step.sizes if s // 4 <= MAX_REQS]
    assert stats["num_tokens"] == {"chain_fused": list(plan.chain_step.sizes), "first_fused": first}
    assert stats["graphs"] == len(first) + len(plan.chain_step.sizes) and stats["failed"] == {}
    assert device.captures == [] and any(CAPTURE_LOG_PREFIX in r.getMessage() for r in caplog.records)
    assert proposer.model.forward is proposer.graphs  # installed: replays go through the runner from now on
    for key, step in proposer.graph_runner.captured.items():
        assert step.input_ptrs == input_pointers(proposer._model_kwargs(key.num_tokens))
    # Each capture built its metadata over the persistent buffers: chain steps on the proposer's arange, the first
    # pass on the target runner's query_start_loc; KV writes off (padding slots).
    chain = [cad for index, cad in builder.built if index == 1]
    firsts = [cad for index, cad in builder.built if index == 0]
    assert {cad.query_start_loc.data_ptr() for cad in chain} == {proposer.arange.data_ptr()}
    assert {cad.query_start_loc.data_ptr() for cad in firsts} == {proposer.target_runner.query_start_loc.gpu.data_ptr()}
    assert all((cad.slot_mapping == PADDING_SLOT).all() for cad in chain + firsts)
    assert (proposer.target_runner.seq_lens == 0).all()  # capture-time lengths are not left behind


def test_capture_graphs_drops_on_every_rank_a_key_one_rank_failed(capturing, monkeypatch):
    """At tensor parallel, the ranks' agreement decides: here rank 1 (this process) had a key fail by injection,
    and its agreement (standing in for the gloo group) reports what every rank keeps."""
    import portable_spec.vllm_adapter.spec_decode.proposer as proposer_module
    from portable_spec.draft.fault_injection import FAIL_CAPTURE_ENV

    proposer, _, _ = capturing
    seen = []

    def agree(flags):
        seen.append(flags)
        return flags  # the other rank captured everything: the AND is this rank's flags
    monkeypatch.setattr(proposer_module, "tensor_parallel_agreement", lambda: (agree, 1))
    monkeypatch.setenv(FAIL_CAPTURE_ENV, "1:chain_fused:4")
    with pytest.warns(Warning, match="injected capture failure"):
        stats = proposer.capture_graphs()
    assert list(stats["failed"]) == ["chain_fused:4"] and 4 not in stats["num_tokens"]["chain_fused"]
    assert seen and seen[0].count(False) == 1
    assert proposer.captured_key(CHAIN_FUSED, 3) is None  # 3 requests pad to 4: that size now runs upstream's path
    assert proposer.captured_key(CHAIN_FUSED, 2) is not None


class SharedTopkIndices:
    """Stands for an MTP draft's inner model under ``index_share_for_mtp_iteration`` (vLLM's
    ``DeepSeekMultiTokenPredictor``): ``set_skip_topk`` sets the flag its layers' attention branches on."""

    def __init__(self) -> None:
        self.skip_topk = False

    def set_skip_topk(self, skip: bool) -> None:
        self.skip_topk = skip


class SharedIndicesDraft(TensorDraft):
    """An MTP draft sharing its sparse-attention top-k indices across draft steps: each forward records the step
    it ran for (the draft index of the metadata built for it) and the ``skip_topk`` it branched on."""

    def __init__(self, hidden: int, builder: RecordingBuilder) -> None:
        super().__init__(hidden)
        self.model, self.builder, self.seen = SharedTopkIndices(), builder, []

    def forward(self, input_ids, positions, inputs_embeds=None, hidden_states=None):
        self.seen.append((self.builder.built[-1][0], self.model.skip_topk))
        return super().forward(input_ids, positions, inputs_embeds, hidden_states)


def test_mtp_graphs_record_the_indexer_branch_vllms_eager_step_takes(capturing):
    """vLLM's eager propose runs an MTP first pass with ``skip_topk`` False (the indexer computes the shared top-k
    indices) and its chain steps with True (they reuse them); a graph keeps the branch of its capture, so every
    capture runs its step as vLLM would, and the flag is left as vLLM builds MTP layers (False)."""
    proposer, builder, _ = capturing
    proposer._share_mtp_indices = True
    proposer.model = SharedIndicesDraft(proposer.hidden_states.shape[1], builder)
    stats = proposer.capture_graphs()
    assert set(stats["num_tokens"]) == {FIRST, CHAIN}  # shared indices: the per-forward graphs, upstream's loop
    seen = proposer.model.seen
    assert {skip for index, skip in seen if index == 0} == {False}  # first pass: the indexer runs
    assert {skip for index, skip in seen if index == 1} == {True}  # chain steps: step 0's indices reused
    assert proposer.model.model.skip_topk is False


# ---- the fused first pass against vLLM's own propose, on the CPU ------------------------------------------------
class PositionalDraft(TensorDraft):
    """A draft whose outputs depend on every input the graphs read (token ids, positions, hidden states), so a wrong
    position, a stale hidden state or a wrong sample row changes the drafted tokens."""

    def forward(self, input_ids, positions, inputs_embeds=None, hidden_states=None):
        h = hidden_states.float() + 3 * input_ids[:, None].float() + positions[:, None].float()
        return h.to(hidden_states.dtype), (h / 2).to(hidden_states.dtype)


class MixingDraft(PositionalDraft):
    """Like ``PositionalDraft``, and each token also sees every earlier token's id (a stand-in for attention), so a
    wrong token at any row of the first pass changes the drafts; records the KV slots each forward writes."""

    def __init__(self, hidden: int) -> None:
        super().__init__(hidden)
        self.slots: list[list[int]] = []

    def forward(self, input_ids, positions, inputs_embeds=None, hidden_states=None):
        from vllm.forward_context import get_forward_context

        with device_work():
            slots = get_forward_context().slot_mapping
            self.slots.append(next(iter(slots.values()))[: input_ids.shape[0]].tolist() if slots else [])
            h = hidden_states.float() + 3 * torch.cumsum(input_ids, 0)[:, None].float() + positions[:, None].float()
            return h.to(hidden_states.dtype), (h / 2).to(hidden_states.dtype)


def runner_for(proposer):
    """Our V1 runner class around the stand-in's buffers (``__new__``: no engine), so vLLM's
    ``propose_draft_token_ids`` and ours run on the same object; the hand-off to the host is recorded."""
    from portable_spec.vllm_adapter.worker.v1_model_runner import PortableV1ModelRunner

    runner = PortableV1ModelRunner.__new__(PortableV1ModelRunner)
    vars(runner).update(vars(proposer.target_runner))
    runner.drafter, runner.speculative_config = proposer, proposer.vllm_config.speculative_config
    runner.use_aux_hidden_state_outputs = False
    # vLLM's hand-off (its method switches CUDA streams, so the upstream path records what it was handed) and the
    # state ours writes instead (``hand_off_counts``): read back as the same record.
    runner.handed_off = []
    runner._copy_valid_sampled_token_count = lambda ids, counts: runner.handed_off.append(
        (ids.tolist(), counts.tolist()))
    runner.use_async_spec_decode, runner.valid_sampled_token_count_gpu = True, None
    runner.valid_sampled_token_count_cpu = torch.zeros(MAX_REQS, dtype=torch.int32)
    runner.valid_sampled_token_count_event = types.SimpleNamespace(records=0)
    runner.valid_sampled_token_count_event.record = lambda: setattr(
        runner.valid_sampled_token_count_event, "records", runner.valid_sampled_token_count_event.records + 1)
    runner.input_batch.prev_sampled_token_ids = None
    proposer.target_runner = runner
    return runner


def hand_off_of(runner):
    """What ``hand_off_counts`` left on the runner, as (next token ids, valid counts); checks the three agree."""
    batch = runner.input_batch
    if batch.prev_sampled_token_ids is None:
        return None
    ids, counts = batch.prev_sampled_token_ids.squeeze(1).tolist(), runner.valid_sampled_token_count_gpu.tolist()
    assert runner.valid_sampled_token_count_cpu[: len(counts)].tolist() == counts
    assert runner.valid_sampled_token_count_event.records == 1
    return ids, counts


def verify_step(runner, proposer, n, ragged=False):
    """One step as vLLM's V1 runner reaches drafting (unpadded metadata): ``n`` requests of 1+K tokens; row 1
    accepts everything, rows 0 and 3 reject some drafts, row 2 is a prompt chunk of 1+K tokens (no drafts) whose
    sampled token is discarded (its backup token is used). ``ragged``: the 4 requests bring [1+K, 1+K, K, 1]
    tokens (row 2 a shorter prompt chunk, row 3 a decode without drafts)."""
    from vllm.v1.spec_decode.metadata import SpecDecodeMetadata

    k, q, real = proposer.graph_k, 1 + proposer.graph_k, n
    gen = torch.Generator().manual_seed(1)
    seq_lens = [20, 37, 40, 52][:n]
    query_lens = [q, q, k, 1] if ragged else [q] * n
    qsl = torch.tensor(np.cumsum([0] + query_lens), dtype=torch.int32)
    runner.query_start_loc.gpu[: n + 1] = qsl
    runner.seq_lens[:n] = torch.tensor(seq_lens, dtype=torch.int32)
    table = runner.input_batch.block_table[0].get_device_tensor(MAX_REQS)
    table[:] = torch.arange(table.numel(), dtype=torch.int32).view_as(table) + 7
    tokens = sum(query_lens)
    runner.input_ids.gpu[:MAX_TOKENS] = torch.randint(0, VOCAB, (MAX_TOKENS,), generator=gen, dtype=torch.int32)
    runner.positions[:tokens] = torch.cat([torch.arange(s - length, s) for s, length in zip(seq_lens, query_lens)])
    runner.discard_request_mask.gpu[:] = False
    runner.discard_request_mask.gpu[2] = n > 2
    drafts = [k, k, 0, 0 if ragged else k][:real]
    accepted = [1, k, 0, 0 if ragged else 2][:real]
    sampled = torch.full((real, q), -1, dtype=torch.int32)
    for row, count in enumerate(accepted):
        sampled[row, : count + 1] = torch.randint(0, VOCAB, (count + 1,), generator=gen, dtype=torch.int32)
    ids = [f"req{i}" for i in range(real)]
    runner.requests = {rid: types.SimpleNamespace(get_token_id=lambda idx, i=i: (idx * 7 + i) % VOCAB)
                       for i, rid in enumerate(ids)}
    runner.input_batch.num_reqs, runner.input_batch.req_ids = real, ids
    runner.input_batch.num_tokens_no_spec = np.array(seq_lens[:real], dtype=np.int32) - k
    meta = SpecDecodeMetadata(
        draft_token_ids=torch.zeros(sum(drafts), dtype=torch.int32), num_draft_tokens=drafts,
        cu_num_draft_tokens=torch.tensor(np.cumsum(drafts), dtype=torch.int32),
        cu_num_sampled_tokens=torch.tensor(np.cumsum([d + 1 for d in drafts]), dtype=torch.int32),
        target_logits_indices=torch.zeros(sum(drafts), dtype=torch.int32),
        bonus_logits_indices=torch.zeros(real, dtype=torch.int32),
        logits_indices=torch.zeros(sum(drafts) + real, dtype=torch.int32))
    from vllm.v1.attention.backend import CommonAttentionMetadata

    cad = CommonAttentionMetadata(
        query_start_loc=runner.query_start_loc.gpu[: n + 1], query_start_loc_cpu=qsl, seq_lens=runner.seq_lens[:n],
        num_reqs=n, num_actual_tokens=tokens, max_query_len=max(query_lens), max_seq_len=max(seq_lens),
        block_table_tensor=table[:n], slot_mapping=torch.arange(MAX_TOKENS, dtype=torch.int64) + 500)
    hidden = torch.randint(0, 4, (MAX_TOKENS, proposer.hidden_states.shape[1]),
                           generator=gen).to(proposer.hidden_states.dtype)
    # EAGLE-3: the target's aux hidden states (three layers), which the runner concatenates for the draft.
    runner.use_aux_hidden_state_outputs = proposer.method == "eagle3"
    aux = [hidden + layer for layer in range(3)] if runner.use_aux_hidden_state_outputs else None
    scheduler_output = types.SimpleNamespace(total_num_scheduled_tokens=tokens, num_spec_tokens_to_schedule=k)
    return (scheduler_output, sampled, types.SimpleNamespace(all_greedy=True), hidden, None, aux, meta, cad, None)


def draft_both_ways(capturing, num_reqs, ragged=False, model=None):
    """One step's drafting through our runner (the draft prep, the first pass and its sample in one replay, then
    fused chain replays) and then through vLLM's own ``GPUModelRunner.propose_draft_token_ids``, eager, on the same
    runner, proposer and inputs. A recording 'graph' replays by rerunning what was recorded over the same persistent
    buffers, which is what a device graph replays. Returns, per path, what it drafted, handed off and left behind,
    and the replays and host reads of ours."""
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    from portable_spec.vllm_adapter.worker.v1_model_runner import PortableV1ModelRunner

    proposer, _, _ = capturing
    proposer.model = model or MixingDraft(proposer.hidden_states.shape[1])
    proposer.block_size = 16
    runner = runner_for(proposer)
    proposer.capture_graphs()
    graphs = proposer.graph_runner
    for key, step in graphs.captured.items():
        step.graph.body = proposer.step_call(key).run
    buffers = ("input_ids", "positions", "hidden_states", "_slot_mapping_buffer")
    fresh = {name: getattr(proposer, name).clone() for name in buffers}
    host_reads = {}

    def run(propose_draft_token_ids):
        for name in buffers:
            getattr(proposer, name).copy_(fresh[name])
        runner.handed_off.clear()
        runner.input_batch.prev_sampled_token_ids, runner.valid_sampled_token_count_event.records = None, 0
        args = verify_step(runner, proposer, num_reqs, ragged)
        before = kernel_launches()
        with torch.inference_mode(), HostReads() as watch:  # as vLLM's worker runs every step
            drafts = propose_draft_token_ids(runner, *args)
        host_reads[propose_draft_token_ids.__qualname__] = watch.reads
        if not runner.handed_off:  # ours: read back what hand_off_counts left
            runner.handed_off.append(hand_off_of(runner))
        state = {name: getattr(proposer, name)[:4].clone() for name in ("positions", "_slot_mapping_buffer")}
        first_pass_slots, proposer.model.slots = proposer.model.slots[-proposer.graph_k], []
        return types.SimpleNamespace(drafts=drafts, handed_off=list(runner.handed_off), state=state,
                                     seq_lens=runner.seq_lens[:4].clone(), first_pass_slots=first_pass_slots,
                                     launches=kernel_launches() - before)

    ours = run(PortableV1ModelRunner.propose_draft_token_ids)
    ours.replays, ours.host_reads = dict(graphs.replays), host_reads["PortableV1ModelRunner.propose_draft_token_ids"]
    proposer.graphs.uninstall()
    proposer.graph_runner = None  # vLLM's runner path and propose, unhooked: every kernel, forward and sample eager
    upstream = run(GPUModelRunner.propose_draft_token_ids)
    upstream.host_reads = host_reads["GPUModelRunner.propose_draft_token_ids"]
    return ours, upstream


def kernel_launches():
    """How often each of vLLM's kernels (``vllm_kernels``) was launched so far, through the names vLLM calls them."""
    import collections

    import vllm.v1.spec_decode.llm_base_proposer as base

    step = base.eagle_step_update_slot_mapping_and_metadata.__globals__["eagle_step_slot_mapping_metadata_kernel"]
    return collections.Counter({"next_token": len(base.eagle_prepare_next_token_padded_kernel.grids),
                                "inputs_padded": len(base.eagle_prepare_inputs_padded_kernel.grids),
                                "step": len(step.grids)})


def assert_same_drafting(ours, upstream, num_reqs, num_tokens):
    """Same drafts, same next tokens and valid counts handed to the host, the same persistent state left behind
    (positions, slot mapping, the runner's seq_lens), the first pass's KV written at the target's slots."""
    n = num_reqs
    assert ours.drafts.tolist() == upstream.drafts.tolist()
    assert ours.handed_off == upstream.handed_off and len(ours.handed_off) == 1
    for name in ("positions", "_slot_mapping_buffer"):
        assert ours.state[name][:n].tolist() == upstream.state[name][:n].tolist(), name
    assert ours.seq_lens[:n].tolist() == upstream.seq_lens[:n].tolist()
    expected_slots = list(range(500, 500 + num_tokens))
    assert ours.first_pass_slots[:num_tokens] == upstream.first_pass_slots[:num_tokens] == expected_slots


@pytest.mark.parametrize("num_reqs,ragged", [(4, False), (2, False), (4, True)], ids=["4", "2", "ragged"])
def test_fused_first_pass_with_the_draft_prep_drafts_what_vllms_runner_drafts(capturing, num_reqs, ragged):
    """Our runner's drafting against vLLM's own (``draft_both_ways``): same drafts, hand-off and state. Both paths
    run vLLM's own kernels (``vllm_kernels``), through the names vLLM calls them by. ``ragged``: requests
    of [1+K, 1+K, K, 1] tokens on a draft attention whose graphs take mixed batches (ALWAYS), replayed on the
    uniform 4-request graph."""
    from vllm.v1.attention.backend import AttentionCGSupport

    proposer, builder, _ = capturing
    if ragged:
        builder.support = AttentionCGSupport.ALWAYS
    ours, upstream = draft_both_ways(capturing, num_reqs, ragged)
    k, n = proposer.graph_k, num_reqs
    assert ours.replays == {FIRST_FUSED: 1, CHAIN_FUSED: k - 1}  # nothing else ran
    # Each path launched vLLM's kernels (ours inside the first pass's graph): one prep pair, one step per chain step.
    assert ours.launches == upstream.launches == {"next_token": 1, "inputs_padded": 1, "step": k - 1}
    assert_same_drafting(ours, upstream, n, 3 * (1 + k) if ragged else n * (1 + k))
    assert ours.drafts.shape == (n, k) and len({tuple(row) for row in ours.drafts.tolist()}) > 1  # rows differ
    assert ours.handed_off[0][1] == ([2, 4, 0, 1] if ragged else [2, 4, 0, 3][:n])  # valid counts
    if n > 2:  # the discarded row's next token is its backup token, vLLM's get_token_id(num_tokens_no_spec - 1)
        assert ours.handed_off[0][0][2] == ((40 - k - 1) * 7 + 2) % VOCAB
    # No device-to-host read in our host path (async scheduling stays async); vLLM's reads its CPU metadata only,
    # and the watch sees those (``.item()`` in prepare_inputs_padded), so it is watching.
    assert ours.host_reads == [] and "item" in upstream.host_reads


def position_off_by_one(proposer, monkeypatch):
    """The positions the fused first pass records before its forward are one ahead."""
    body = proposer._draft_prep_body

    def shifted(num_reqs):
        body(num_reqs)
        proposer.positions[: num_reqs * proposer.verify_len] += 1
    monkeypatch.setattr(proposer, "_draft_prep_body", shifted)


def wrong_sample_row(proposer, monkeypatch):
    """The fused first pass samples each request's row before the one vLLM's kernel chose."""
    body = proposer._fused_first_body

    def earlier(num_reqs, out):
        proposer.sample_indices[:num_reqs] -= 1
        return body(num_reqs, out)
    monkeypatch.setattr(proposer, "_fused_first_body", earlier)


def wrong_slot_for_one_request(proposer, monkeypatch):
    """Request 1's first-pass tokens write their KV one slot off."""
    body = proposer._draft_prep_body

    def misplaced(num_reqs):
        body(num_reqs)
        q = proposer.verify_len
        proposer._slot_mapping_buffer[q: 2 * q] += 1
    monkeypatch.setattr(proposer, "_draft_prep_body", misplaced)


def stale_seq_lens(proposer, monkeypatch):
    """The chain starts without taking each request's rejected drafts off its sequence length."""
    chain = proposer._run_fused_chain
    monkeypatch.setattr(proposer, "_run_fused_chain",
                        lambda key, batch, positions, cad, num_rejected: chain(key, batch, positions, cad, None))


def wrong_count_handed_off(proposer, monkeypatch):
    """The runner's next step is handed one valid token too many per request (its num_computed_tokens drift)."""
    import portable_spec.vllm_adapter.spec_decode.draft_prep as draft_prep

    hand_off = draft_prep.hand_off_counts
    monkeypatch.setattr(draft_prep, "hand_off_counts",
                        lambda runner, next_tokens, counts: hand_off(runner, next_tokens, counts + 1))


@pytest.mark.parametrize("mutation", [position_off_by_one, wrong_sample_row, wrong_slot_for_one_request,
                                      stale_seq_lens, wrong_count_handed_off], ids=lambda m: m.__name__)
def test_the_comparison_with_vllms_drafting_catches_each_bug_in_ours(capturing, mutation, monkeypatch):
    """Each bug, put into our path only (vLLM's runs unchanged), makes ``assert_same_drafting`` fail."""
    proposer = capturing[0]
    mutation(proposer, monkeypatch)
    ours, upstream = draft_both_ways(capturing, 4)
    assert ours.replays == {FIRST_FUSED: 1, CHAIN_FUSED: proposer.graph_k - 1}  # the mutated path is the one tested
    with pytest.raises(AssertionError):
        assert_same_drafting(ours, upstream, 4, 4 * proposer.verify_len)


class DraftVocabularyDraft(MixingDraft):
    """An EAGLE-3 draft with a draft vocabulary, as vLLM models it: ``Eagle3LlamaForCausalLM.compute_logits`` itself
    (vLLM's code) scatters the logits over the draft's 16 ids into the target's vocabulary through its ``d2t`` map
    (``draft_id_to_target_id``: draft id j is target id 2j+1, so a lost map shows as an even id). Not a subclass of
    vLLM's head, so our graphs record vLLM's sample (the d2t gather: ``tests/test_eagle3_draft_vocabulary.py``)."""

    DRAFT_VOCAB = 16

    def __init__(self, hidden: int) -> None:
        super().__init__(hidden)
        self.config = types.SimpleNamespace(draft_vocab_size=self.DRAFT_VOCAB, vocab_size=VOCAB)
        self.draft_id_to_target_id = torch.arange(self.DRAFT_VOCAB) + 1
        self.lm_head = None
        self.logits_processor = lambda lm_head, hidden_states: torch.nn.functional.one_hot(
            hidden_states[:, 0].long() % self.DRAFT_VOCAB, self.DRAFT_VOCAB).float()

    def compute_logits(self, hidden):
        from vllm.model_executor.models.llama_eagle3 import Eagle3LlamaForCausalLM

        return Eagle3LlamaForCausalLM.compute_logits(self, hidden)


def test_an_eagle3_draft_vocabulary_is_exact_in_the_fused_graphs(capturing):
    """The d2t map is inside ``compute_logits``, which the fused graphs record as vLLM's greedy sample calls it: the
    fused first pass and chain (no blocker for it) draft what vLLM's runner drafts, in the target's vocabulary."""
    proposer, _, _ = capturing
    ours, upstream = draft_both_ways(capturing, 4, model=DraftVocabularyDraft(proposer.hidden_states.shape[1]))
    assert proposer.draft_sample == "vllm_greedy_sample"
    assert proposer.fused_chain_off == [] and ours.replays == {FIRST_FUSED: 1, CHAIN_FUSED: proposer.graph_k - 1}
    assert_same_drafting(ours, upstream, 4, 4 * (1 + proposer.graph_k))
    assert {t % 2 for t in ours.drafts.flatten().tolist()} == {1}  # every draft went through the map


def test_heterogeneous_vocabularies_keep_their_sample_out_of_our_graphs(eagle, caplog):
    """vLLM maps ids into and out of a draft vocabulary each step (heterogeneous vocabularies): the fused graphs,
    which feed the sampled id back as the next input id, decline (one log line); the per-forward graphs, exact under
    any mapping, serve. vLLM's local argmax reduction does not decline: the graphs record its ``get_top_tokens``
    (``draft_sample``; drafted against vLLM's in ``tests/test_eagle3_draft_vocabulary.py``)."""
    eagle.draft_attn_groups = [attention_group("FLASH_ATTN")]
    eagle.use_local_argmax_reduction = True
    eagle._init_fused_chain(MAX_REQS)
    assert eagle.fused_chain_off == [] and eagle.draft_sample == "vllm_greedy_sample"
    eagle.use_heterogeneous_vocab = True
    caplog.clear()  # the first call's line is captured too where an earlier test left the logger at INFO
    with caplog.at_level("INFO", logger="portable_spec.vllm_adapter"):
        eagle._init_fused_chain(MAX_REQS)
    flag = "use_heterogeneous_vocab"
    assert eagle.fused_chain_off == [f"draft vocabulary mapping ({flag})"]
    assert [r.getMessage() for r in caplog.records] == [
        f"portable_spec: chain steps replay the forward only (draft vocabulary mapping ({flag}))"]
    eagle.draft_prep_off = eagle.prep_blockers(eagle.target_runner)
    assert eagle._graph_kinds(PLAN) == (FIRST, CHAIN)


def test_the_draft_prep_declines_before_touching_anything_where_it_is_not_exact(capturing):
    proposer, _, _ = capturing
    proposer.model = PositionalDraft(proposer.hidden_states.shape[1])
    runner = runner_for(proposer)
    proposer.capture_graphs()
    args = list(verify_step(runner, proposer, 4))
    before = proposer.backup_next_token_ids.np.copy(), proposer.prep_sampled.clone()

    def declined(**changes):
        """The reason the step was counted under, or None where it was not declined (or not counted)."""
        call = dict(zip(("scheduler_output", "sampled_token_ids", "sampling_metadata", "hidden_states",
                         "sample_hidden_states", "aux_hidden_states", "spec_decode_metadata",
                         "common_attn_metadata"), args))
        call.update(changes)
        call.pop("sample_hidden_states")
        proposer.prep_declines.clear()
        if proposer.propose_with_prep(runner, **call) is not None:
            return None
        assert sum(proposer.prep_declines.values()) <= 1
        return next(iter(proposer.prep_declines), "uncounted")

    assert declined(spec_decode_metadata=None) == "no drafts verified this step"
    # host-side sampled tokens (padded drafter batch off)
    assert declined(sampled_token_ids=[[1, 2]]) == "sampled tokens on the host"
    assert declined(sampled_token_ids=args[1][:, :2]) == "fewer than K drafts scheduled for every request"
    proposer._enable_probabilistic_draft_probs = True
    assert declined(sampling_metadata=types.SimpleNamespace(all_greedy=False)).startswith("chain step not fused")
    proposer._enable_probabilistic_draft_probs = False
    assert declined(scheduler_output=types.SimpleNamespace(
        num_spec_tokens_to_schedule=proposer.graph_k - 1)) == "the scheduler asks for another K"
    assert declined(sampled_token_ids=args[1][:3]) == "sampled rows != requests"
    wide = copy.copy(args[7])
    wide.num_reqs = 3  # not an exactly captured size of verify-shaped rows on the runner's buffers
    assert declined(common_attn_metadata=wide, sampled_token_ids=args[1][:3]) is not None
    moved = copy.copy(args[7])
    moved.seq_lens = moved.seq_lens.clone()
    assert declined(common_attn_metadata=moved) == "first-pass metadata off the runner's buffers"
    ragged = verify_step(runner, proposer, 4, ragged=True)  # on a UNIFORM_BATCH draft attention: vLLM's path
    assert declined(sampled_token_ids=ragged[1], spec_decode_metadata=ragged[6],
                    common_attn_metadata=ragged[7]).startswith("ragged first pass")
    assert (proposer.backup_next_token_ids.np == before[0]).all() and torch.equal(proposer.prep_sampled, before[1])
    assert proposer.graph_runner.replays == {}
    proposer.prep_declines.clear()
    for _ in range(3):
        proposer.propose_with_prep(runner, scheduler_output=args[0], sampled_token_ids=args[1][:, :2],
                                   sampling_metadata=args[2], hidden_states=args[3], aux_hidden_states=args[5],
                                   spec_decode_metadata=args[6], common_attn_metadata=args[7])
    assert proposer.prep_declines == {"fewer than K drafts scheduled for every request": 3}  # counts accumulate
    proposer.draft_prep_off = ["multimodal draft inputs"]
    assert declined() == "uncounted"  # decided at boot and logged there, not counted per step


def test_each_reason_the_draft_prep_stays_on_vllms_path_is_named(eagle):
    eagle.draft_attn_groups = [attention_group("FLASH_ATTN")]
    eagle._init_fused_chain(MAX_REQS)
    runner = eagle.target_runner
    assert eagle.prep_blockers(runner) == []
    runner.uses_mrope = True
    runner.get_model = lambda: types.SimpleNamespace(get_mtp_target_hidden_states=lambda: None)
    assert eagle.prep_blockers(runner) == ["M-RoPE/XD-RoPE target positions",
                                           "the target overrides the drafter's hidden states"]
    eagle.draft_prep_off = ["M-RoPE/XD-RoPE target positions"]
    assert eagle._graph_kinds(PLAN) == (FIRST, CHAIN_FUSED)  # upstream's first pass keeps its per-forward graph


def test_fused_first_pass_only_for_exact_verify_shaped_batches_on_the_runners_buffers(fused):
    for n in (1, 2, 4):
        capture(fused, FIRST_FUSED, n)
    runner = fused.target_runner
    four = cad(runner.query_start_loc.gpu[:5], runner.seq_lens[:4], 4, 16, 4, fused._slot_mapping_buffer[:16])
    assert fused.first_pass_key(FIRST_FUSED, four).num_reqs == 4
    assert fused.first_pass_key(FIRST_FUSED, ragged_first_pass(fused)) is None  # UNIFORM_BATCH draft attention
    three = cad(runner.query_start_loc.gpu[:4], runner.seq_lens[:3], 3, 12, 4, fused._slot_mapping_buffer[:12])
    assert fused.first_pass_key(FIRST_FUSED, three) is None  # 3 would replay the 4-request graph: never padded
    moved = cad(runner.query_start_loc.gpu[:5], runner.seq_lens[:4].clone(), 4, 16, 4, fused._slot_mapping_buffer)
    assert fused.first_pass_key(FIRST_FUSED, moved) is None  # seq_lens not on the runner's buffer
    prefill = cad(runner.query_start_loc.gpu[:3], runner.seq_lens[:2], 2, 9, 7, fused._slot_mapping_buffer[:9])
    assert fused.first_pass_key(FIRST_FUSED, prefill) is None
