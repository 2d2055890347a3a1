"""FULL graphs for vLLM's separate draft model (``method: "draft_model"``, vLLM's ``DraftModelProposer``): its first
pass and every chain step replay per-size graphs from the one pool, through the one runner.

A draft model is a whole LLM (16+ layers for a Llama-3.2-1B drafting for an 8B), so each of its forwards is many
kernel launches: PIECEWISE graphs (vLLM 0.26.0's best for this drafter) still launch every attention eagerly and
dispatch every piece from the host, which is where a draft model at low concurrency spends its step.

What differs from EAGLE, and why the graphs are still exact:
- no target hidden states: vLLM keeps each request's 1+K verified tokens and appends the next token
  (``needs_extra_input_slots``), so a verify-shaped first pass brings 2+K tokens per request (the planner sizes it:
  ``capture_sizes.planner.EXTENDING_METHODS``), rejected tokens staying in place with the padding slot;
- upstream builds that pass's ``query_start_loc`` and ``seq_lens`` fresh every step (``extend_all_queries_by_N``)
  and its chain steps then advance that fresh ``seq_lens`` in place. Before the first pass's metadata is built we
  copy both into persistent buffers and point the metadata there (same values, so vLLM's path is unchanged), so the
  first pass's graph and every chain step's graph read where they were captured; a chain step whose ``seq_lens`` is
  not ours (no first pass went through this hook) takes vLLM's path;
- the first pass replays only uniform batches of exactly a captured size; a ragged or prefill-shaped batch, a size
  not captured, or anything unexpected runs vLLM's own forward, and the chain goes on from there.
Sampling (greedy, or probabilistic draft sampling) stays vLLM's own code on the graphs' outputs, so a sampled draft
is the one vLLM would draw; the fused kinds (sample and next inputs inside the graph) are EAGLE's only.
"""

from __future__ import annotations

import logging
from typing import Any

import torch
from vllm.v1.attention.backend import AttentionCGSupport, CommonAttentionMetadata
from vllm.v1.spec_decode.draft_model import DraftModelProposer

from portable_spec.draft.dispatcher import CHAIN, FIRST, DraftKey
from portable_spec.vllm_adapter.spec_decode.proposer import (
    PADDING_SLOT, DrafterGraphMixin, capture_metadata, pad_chain_metadata, same_start, uniform_queries,
)

logger = logging.getLogger("portable_spec.vllm_adapter")


class FullGraphDraftModelProposer(DrafterGraphMixin, DraftModelProposer):
    """vLLM's draft-model proposer whose first pass (2+K tokens per request) and chain steps (1 token per request)
    replay FULL graphs; upstream's ``propose`` runs around them unchanged."""

    def __init__(self, vllm_config: Any, device: torch.device, runner: Any = None) -> None:
        super().__init__(vllm_config, device, runner)
        # Upstream builds the first pass's query_start_loc and seq_lens fresh each step; our graphs read them here.
        self._first_query_start_loc = torch.zeros(self.max_batch_size + 1, dtype=torch.int32, device=device)
        self._draft_seq_lens = torch.zeros(self.max_batch_size, dtype=torch.int32, device=device)

    def _query_len(self, kind: str) -> int:
        return 1 if kind == CHAIN else self.verify_len + 1

    def _max_graph_reqs(self) -> int:
        return min(self.target_runner.max_num_reqs, self.max_batch_size)

    def _graph_kinds(self, plan: Any) -> tuple[str, ...]:
        if self.parallel_drafting:
            logger.info("portable_spec: a parallel-drafting draft model stays on vLLM's path (one pass of 1+2K "
                        "tokens per request, no chain)")
            return ()
        if self._refuse_below(AttentionCGSupport.UNIFORM_SINGLE_TOKEN_DECODE, "every drafter graph"):
            return ()
        first = not self._refuse_below(AttentionCGSupport.UNIFORM_BATCH, "the (2+K)-token first pass")
        chain = plan.chain_step is not None and self.graph_k > 1
        return tuple(kind for kind, want in ((FIRST, first), (CHAIN, chain)) if want)

    def _classify(self, cad: CommonAttentionMetadata, draft_index: int) -> DraftKey | None:
        if draft_index == 0:
            return self._first_pass_key(cad)
        if not (same_start(cad.query_start_loc, self.arange) and same_start(cad.seq_lens, self._draft_seq_lens)):
            return None
        key = self.captured_key(CHAIN, cad.num_reqs)
        if key is not None and key.num_reqs > cad.num_reqs:
            # Rows [num_reqs, padded) are padding: they must never write the KV cache.
            self._slot_mapping_buffer[cad.num_reqs: key.num_reqs].fill_(PADDING_SLOT)
        return key

    def _first_pass_key(self, cad: CommonAttentionMetadata) -> DraftKey | None:
        """Moves the first pass's fresh metadata onto the persistent buffers (whatever this pass replays: the chain
        steps after it read them), then the captured key it replays, or None."""
        num_reqs = cad.num_reqs
        if num_reqs > self._max_graph_reqs():
            return None
        self._first_query_start_loc[: num_reqs + 1].copy_(cad.query_start_loc)
        self._draft_seq_lens[:num_reqs].copy_(cad.seq_lens)
        cad.query_start_loc = self._first_query_start_loc[: num_reqs + 1]
        cad.seq_lens = self._draft_seq_lens[:num_reqs]
        table = self.target_runner.input_batch.block_table[0].get_device_tensor(num_reqs)
        if not (uniform_queries(cad, self._query_len(FIRST)) and same_start(cad.block_table_tensor, table)):
            return None
        key = self.captured_key(FIRST, num_reqs)
        return key if key is not None and key.num_reqs == num_reqs else None

    def _pad_metadata(self, cad: CommonAttentionMetadata, key: DraftKey) -> CommonAttentionMetadata | None:
        # Only chain steps pad (a first pass replays its exact batch).
        return pad_chain_metadata(self, cad, key, self._draft_seq_lens) if key.step == CHAIN else None

    def pending_key(self, kwargs: dict[str, Any]) -> DraftKey | None:
        # Upstream pads each forward to its own (PIECEWISE) size; our graph (chain: >= the batch; first pass: the
        # batch's exact tokens) serves it, since upstream reads only the batch's rows of the outputs.
        key = self._pending
        tokens = kwargs["input_ids"].shape[0] if kwargs.get("input_ids") is not None else -1
        if key is not None and (key.step == CHAIN or tokens >= key.num_tokens):
            self._pending = None
            return key
        return super().pending_key(kwargs)

    def _capture_metadata(self, key: DraftKey) -> CommonAttentionMetadata:
        num_reqs, query_len = key.num_reqs, self._query_len(key.step)
        if key.step == CHAIN:
            query_start_loc = self.arange[: num_reqs + 1]
        else:
            query_start_loc = self._first_query_start_loc[: num_reqs + 1]
            query_start_loc.copy_(self.arange[: num_reqs + 1] * query_len)
        return capture_metadata(self, query_start_loc, self._draft_seq_lens, num_reqs, query_len, causal=True)
