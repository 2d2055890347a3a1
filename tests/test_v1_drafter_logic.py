"""Replay selection of our V1 drafters, on CPU, with vLLM 0.26.0's real proposer classes and metadata.

Which forward replays which graph decides correctness (a wrong pick is a stale-pointer bug), so the rules are
tested here without a GPU: the graphs are recording stand-ins (no capture happens on CPU) and the target runner is
reduced to the persistent buffers the drafter reads from it. The real replays run on the cuda lane.
"""

from __future__ import annotations

import types

import pytest
import torch

from portable_spec.testing.model_zoo import build_pair
from portable_spec.vllm_adapter.v1_drafter import (
    BLOCK, CHAIN, FIRST, PADDING_SLOT, CapturedStep, DrafterGraphs, FullGraphDFlashProposer, FullGraphEagleProposer,
    input_pointers,
)

MAX_REQS = 8


class RecordingGraph:
    def __init__(self) -> None:
        self.replays = 0

    def replay(self) -> None:
        self.replays += 1


class EagerDraft(torch.nn.Module):
    """Stands for the draft model's eager forward: says it ran and on how many tokens."""

    def forward(self, input_ids, positions, inputs_embeds=None, hidden_states=None):
        return ("eager", input_ids.shape[0])


def runner_buffers() -> types.SimpleNamespace:
    """The target runner's persistent buffers the drafter reads (query_start_loc, seq_lens, block table)."""
    table = torch.zeros(MAX_REQS, 4, dtype=torch.int32)
    return types.SimpleNamespace(
        query_start_loc=types.SimpleNamespace(gpu=torch.zeros(MAX_REQS + 1, dtype=torch.int32)),
        seq_lens=torch.zeros(MAX_REQS, dtype=torch.int32), max_num_reqs=MAX_REQS,
        input_batch=types.SimpleNamespace(block_table=[types.SimpleNamespace(get_device_tensor=lambda n: table[:n])]))


def make_proposer(cls, pair_name, tmp_path_factory, monkeypatch):
    import vllm.v1.spec_decode.llm_base_proposer as base
    from vllm.config import set_current_vllm_config
    from vllm.engine.arg_utils import EngineArgs

    monkeypatch.setattr(base, "PIN_MEMORY", False)  # no pinned-memory allocator on a CPU-only host
    pair = build_pair(pair_name, tmp_path_factory.mktemp("zoo"), variant="perfect")
    cfg = EngineArgs(model=pair["target"], skip_tokenizer_init=True, max_num_seqs=MAX_REQS, max_model_len=512,
                     speculative_config=pair["speculative_config"]).create_engine_config()
    with set_current_vllm_config(cfg):
        proposer = cls(cfg, torch.device("cpu"), runner=None)
    proposer.target_runner = runner_buffers()
    proposer.graphs = DrafterGraphs(EagerDraft(), proposer)
    return proposer


def cad(query_start_loc, seq_lens, num_reqs, num_tokens, max_query_len, slot_mapping):
    from vllm.v1.attention.backend import CommonAttentionMetadata

    return CommonAttentionMetadata(
        query_start_loc=query_start_loc, query_start_loc_cpu=query_start_loc.clone(), seq_lens=seq_lens,
        num_reqs=num_reqs, num_actual_tokens=num_tokens, max_query_len=max_query_len, max_seq_len=64,
        block_table_tensor=torch.zeros(num_reqs, 4, dtype=torch.int32), slot_mapping=slot_mapping)


def capture(proposer, kind, num_reqs, query_len):
    tokens = num_reqs * query_len
    kwargs = proposer._model_kwargs(tokens)
    step = CapturedStep(kind, num_reqs, tokens, RecordingGraph(), input_pointers(kwargs), outputs=("static", kind))
    proposer.graphs.captured[(kind, num_reqs)] = step
    return step


@pytest.fixture
def eagle(vllm_platform, tmp_path_factory, monkeypatch):
    proposer = make_proposer(FullGraphEagleProposer, "llama_eagle", tmp_path_factory, monkeypatch)
    for n in (1, 2, 4, 8):
        capture(proposer, CHAIN, n, 1)
    for n in (1, 2, 4):
        capture(proposer, FIRST, n, 4)
    proposer.graphs.captured = dict(sorted(proposer.graphs.captured.items()))
    return proposer


def test_chain_step_replays_the_smallest_graph_that_fits_and_pads_its_slots(eagle):
    eagle._slot_mapping_buffer[:8].fill_(7)
    meta = cad(eagle.arange[:4], eagle.target_runner.seq_lens[:3], 3, 3, 1, eagle._slot_mapping_buffer[:3])
    assert eagle._classify(meta, draft_index=1) == (CHAIN, 3)
    eagle._pending = (CHAIN, 3)
    step = eagle.pending_step(eagle.graphs.captured, eagle._model_kwargs(4))
    assert (step.kind, step.num_reqs) == (CHAIN, 4)
    assert eagle._slot_mapping_buffer[:4].tolist() == [7, 7, 7, PADDING_SLOT]  # the padded row never writes KV


def test_chain_step_without_the_arange_query_start_loc_is_not_a_chain_step(eagle):
    other = torch.arange(4, dtype=torch.int32)
    meta = cad(other, eagle.target_runner.seq_lens[:3], 3, 3, 1, eagle._slot_mapping_buffer[:3])
    assert eagle._classify(meta, draft_index=1) is None


@pytest.mark.parametrize("num_tokens", [16, 12])  # 4 requests of 1+K=4 tokens; or 3 real + 1 padded request
def test_verify_shaped_first_pass_replays_its_graph(eagle, num_tokens):
    runner = eagle.target_runner
    meta = cad(runner.query_start_loc.gpu[:5], runner.seq_lens[:4], 4, num_tokens, 4, eagle._slot_mapping_buffer[:16])
    assert eagle._classify(meta, draft_index=0) == (FIRST, 4)
    eagle._pending = (FIRST, 4)
    assert eagle.pending_step(eagle.graphs.captured, eagle._model_kwargs(16)).num_tokens == 16


def test_first_pass_is_not_replayed_when_shapes_disagree(eagle):
    runner = eagle.target_runner
    prefill = cad(runner.query_start_loc.gpu[:3], runner.seq_lens[:2], 2, 9, 7, eagle._slot_mapping_buffer[:9])
    assert eagle._classify(prefill, draft_index=0) is None
    foreign = cad(torch.arange(5, dtype=torch.int32) * 4, runner.seq_lens[:4], 4, 16, 4, eagle._slot_mapping_buffer)
    assert eagle._classify(foreign, draft_index=0) is None
    eagle._pending = (FIRST, 4)  # announced, but upstream padded to another size: no graph for that size
    assert eagle.pending_step(eagle.graphs.captured, eagle._model_kwargs(20)) is None
    assert eagle._pending is None  # an announcement is consumed exactly once


def test_replay_only_with_the_captured_input_pointers(eagle):
    graphs = eagle.graphs
    step = graphs.captured[(CHAIN, 2)]
    eagle._pending = (CHAIN, 2)
    assert graphs(**eagle._model_kwargs(2)) == ("static", CHAIN)
    assert step.graph.replays == 1 and graphs.replays[CHAIN] == 1
    eagle._pending = (CHAIN, 2)
    moved = dict(eagle._model_kwargs(2), input_ids=eagle.input_ids[:2].clone())  # same shape, other storage
    assert graphs(**moved) == ("eager", 2)
    assert graphs.pointer_mismatches == 1 and step.graph.replays == 1
    assert graphs(**eagle._model_kwargs(2)) == ("eager", 2)  # nothing announced: the model runs


def test_dflash_block_step_moves_fresh_metadata_into_persistent_buffers(vllm_platform, tmp_path_factory, monkeypatch):
    dflash = make_proposer(FullGraphDFlashProposer, "qwen3_dflash", tmp_path_factory, monkeypatch)
    for n in (1, 2, 4):
        capture(dflash, BLOCK, n, 4)
    dflash.graphs.captured = dict(sorted(dflash.graphs.captured.items()))
    dflash._slot_mapping_buffer.fill_(5)
    fresh_qsl = torch.arange(4, dtype=torch.int32) * 4  # what upstream builds each step
    fresh_seq = torch.tensor([10, 20, 30], dtype=torch.int32)
    meta = cad(fresh_qsl, fresh_seq, 3, 12, 4, dflash._slot_mapping_buffer[:12])
    assert dflash._classify(meta, draft_index=0) == (BLOCK, 4)
    assert dflash._block_query_start_loc[:5].tolist() == [0, 4, 8, 12, 12]  # padded request: zero-length query
    assert dflash._block_seq_lens[:4].tolist() == [10, 20, 30, 0]
    assert meta.query_start_loc.data_ptr() == dflash._block_query_start_loc.data_ptr()
    assert meta.seq_lens.data_ptr() == dflash._block_seq_lens.data_ptr()
    assert dflash._slot_mapping_buffer[12:16].tolist() == [PADDING_SLOT] * 4
    assert dflash._slot_mapping_buffer[:12].tolist() == [5] * 12
    too_big = cad(torch.arange(10, dtype=torch.int32) * 4, torch.ones(9, dtype=torch.int32), 9, 36, 4,
                  dflash._slot_mapping_buffer[:36])
    assert dflash._classify(too_big, draft_index=0) is None


def test_a_backend_below_the_needed_graph_level_is_refused_with_its_name(eagle, caplog):
    from vllm.v1.attention.backend import AttentionCGSupport

    class SingleTokenBuilder:
        @classmethod
        def get_cudagraph_support(cls, vllm_config, kv_cache_spec):
            return AttentionCGSupport.UNIFORM_SINGLE_TOKEN_DECODE

    group = types.SimpleNamespace(get_metadata_builder=lambda: SingleTokenBuilder, kv_cache_spec=None,
                                  backend=types.SimpleNamespace(get_name=lambda: "FLASHINFER"))
    eagle.draft_attn_groups = [group]
    plan = types.SimpleNamespace(first_step=types.SimpleNamespace(sizes=(4, 8), num_reqs=lambda s: s // 4),
                                 chain_step=types.SimpleNamespace(sizes=(1, 2)))
    with caplog.at_level("WARNING", logger="portable_spec.vllm_adapter"):
        todo = eagle._todo(plan, MAX_REQS)
    assert todo == [(CHAIN, 1), (CHAIN, 2)]  # chain steps fit SINGLE_TOKEN_DECODE; the (1+K)-token pass does not
    assert "backend FLASHINFER supports graphs only at UNIFORM_SINGLE_TOKEN_DECODE" in caplog.text
