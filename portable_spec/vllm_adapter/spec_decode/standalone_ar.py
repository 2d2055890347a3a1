"""Model Runner V2's standalone draft model (``method: draft_model``) with FULL graphs for its draft steps.

Why: vLLM 0.33.0's ``StandaloneARSpeculator`` (``v1/worker/gpu/spec_decode/standalone_ar/speculator.py``) captures
nothing (its ``init_cudagraph_manager`` and ``capture`` are ``pass``) and forwards every draft step eagerly, so each
of the K draft forwards launches every kernel of every layer of the draft model from the host: at low concurrency
the draft model is launch-bound. Its EAGLE-style siblings (``TargetDependentARSpeculator``) record a first pass and
a decode step through MRV2's own ``SpeculatorCudaGraphManager``; this subclass does the same for the standalone
draft model, with two managers of that class, each capturing into the pool every MRV2 manager takes from the
platform (``current_platform.get_global_graph_pool()``: our port's one pool):

- step 0, the expanded prefill/extend pass (per request: the accepted tokens, the correction token and the rejected
  slots, ``query_len + 1`` tokens): where every request of the batch decodes (vLLM's own test,
  ``get_uniform_decode_token_count``: 1 + K tokens each), the pass has a uniform 2 + K tokens per request and
  replays one FULL graph per captured size (``FULL_DECODE_ONLY`` at ``decode_query_len = 2 + K``): the draft forward
  over the expanded buffers and ``sample_draft`` at the last accepted token, vLLM's call with vLLM's arguments.
  vLLM's input kernel (``prepare_prefill_inputs``) runs as vLLM runs it, eagerly before the replay; the slot mapping
  goes to the block tables' persistent one (the one the graph reads) instead of vLLM's expanded copy, and the
  attention metadata is built for the graph's batch as vLLM builds it for this pass. A batch with a prefill, a
  ragged query or a size with no graph runs vLLM's eager ``_prefill`` unchanged.
- steps 1..K-1 (uniform, one token per request): the draft forward and ``sample_draft`` are one FULL graph per
  captured size (``FULL_DECODE_ONLY``, one token per request). Everything vLLM's eager loop does around the forward
  (the next inputs, the slot mapping, the attention metadata) runs as vLLM runs it, eagerly before each replay, into
  the persistent buffers the graph reads; the only additions are the padding rows a larger graph needs
  (``query_start_loc`` held at ``num_reqs``, ``seq_lens`` 0, ``idx_mapping`` -1: vLLM's own padding convention, which
  its sampler and slot mapping skip) and the copy of the graph's sampled tokens into ``draft_tokens``.
- a dummy run that skips attention, a profile run (nothing captured yet), a batch size with no captured graph, or a
  graph mode without FULL decode graphs run vLLM's eager steps unchanged.

Installed only by ``worker.mrv2_speculator`` (one scoped override while the worker builds MRV2's runner); the
census (``patch/manifest.py``) lists it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from vllm.config.compilation import CUDAGraphMode
from vllm.logger import init_logger
from vllm.v1.worker.gpu.cudagraph_utils import BatchExecutionDescriptor
from vllm.v1.worker.gpu.input_batch import InputBatch
from vllm.v1.worker.gpu.spec_decode.standalone_ar.speculator import StandaloneARSpeculator, prepare_prefill_inputs
from vllm.v1.worker.gpu.spec_decode.target_dependent_ar.cudagraph_utils import SpeculatorCudaGraphManager
from vllm.v1.worker.utils import get_uniform_decode_token_count

logger = init_logger(__name__)

EAGER = BatchExecutionDescriptor(cg_mode=CUDAGraphMode.NONE, num_tokens=0, num_reqs=0)


class GraphedStandaloneARSpeculator(StandaloneARSpeculator):
    """vLLM's standalone draft model speculator whose draft steps replay FULL graphs where one is captured."""

    def __init__(self, vllm_config: Any, device: torch.device):
        super().__init__(vllm_config, device)
        self.prefill_cudagraph_manager: SpeculatorCudaGraphManager | None = None
        self.decode_cudagraph_manager: SpeculatorCudaGraphManager | None = None
        # What a graph samples, per row; copied into draft_tokens[:, step] after each replay (the column differs per
        # step, the graph is one per size).
        self.graph_draft_tokens = torch.zeros(self.max_num_reqs, dtype=torch.int64, device=device)
        # What ran, for the e2e checks and the serving bench's identity check (a "graphed" speculator that never
        # replays is vLLM's eager one with another name): graph replays per captured size, and the passes that ran
        # vLLM's eager steps instead.
        self.prefill_replays: dict[int, int] = {}
        self.decode_replays: dict[int, int] = {}
        self.eager_prefills = 0
        self.eager_decode_loops = 0

    @property
    def prefill_query_len(self) -> int:
        """Step 0's tokens per request in a decode batch: the 1 + K the target verified, plus the correction slot."""
        return self.num_speculative_steps + 1 + self.num_extra_query_per_req

    # ------------------------------------------------------------------------------------------------ graphs
    def init_cudagraph_manager(self, cudagraph_mode: CUDAGraphMode) -> None:
        """Two managers as ``TargetDependentARSpeculator`` builds its decode one, FULL_DECODE_ONLY where the runner's
        decode mode is FULL, else none (vLLM's eager steps): step 0 at ``prefill_query_len`` tokens per request and,
        with K > 1, the decode step at one. None with data parallelism (the dispatch would need a cross-rank agreement
        vLLM's eager path here does not make)."""
        if self.dp_size > 1 or cudagraph_mode.decode_mode() != CUDAGraphMode.FULL:
            return
        self.prefill_cudagraph_manager = SpeculatorCudaGraphManager(
            self.vllm_config, self.device, CUDAGraphMode.FULL_DECODE_ONLY, decode_query_len=self.prefill_query_len)
        if self.num_speculative_steps > 1:
            self.decode_cudagraph_manager = SpeculatorCudaGraphManager(
                self.vllm_config, self.device, CUDAGraphMode.FULL_DECODE_ONLY, decode_query_len=1)

    def capture(self) -> None:
        """Record step 0 and the decode step for every FULL size each manager derives from vLLM's capture sizes. The
        manager builds each size's dummy attention metadata and slot mapping itself (``prepare_inputs_to_capture``)."""
        managers = [(manager, step, what) for manager, step, what in (
            (self.prefill_cudagraph_manager, self._prefill_step, "prefill"),
            (self.decode_cudagraph_manager, self._decode_step, "decode")) if manager is not None and
            manager.needs_capture()]
        if not managers:
            return
        logger.info("portable_spec: capturing the standalone draft model's %s steps (FULL graphs)",
                    " and ".join(what for _, _, what in managers))
        # Stale indices from earlier dummy runs must not index out of range during capture (as vLLM's does).
        self.last_token_indices.zero_()
        self.idx_mapping.zero_()
        for manager, step, what in managers:
            manager.capture(step, self.model_state, self.input_buffers, self.block_tables, self.attn_groups,
                            self.kv_cache_config, progress_bar_desc=f"Capturing standalone draft {what} CUDA graphs")

    def _prefill_step(self, num_reqs: int, num_tokens: int, attn_metadata: dict[str, Any] | None,
                      slot_mappings: dict[str, torch.Tensor] | None, num_tokens_across_dp: torch.Tensor | None,
                      cudagraph_runtime_mode: CUDAGraphMode) -> None:
        """What one step-0 graph holds: vLLM's draft forward over the expanded buffers (``_prefill``'s call, attention
        on), then ``sample_draft`` at each request's last accepted token with the arguments ``_prefill`` passes, into
        ``graph_draft_tokens``. ``num_reqs`` is the graph's (padded) row count; padding rows carry idx_mapping -1 and
        last_token_indices 0 (vLLM's input kernel zeroes them)."""
        hidden_states = self._run_model(self.expanded_input_ids[:num_tokens], self.expanded_positions[:num_tokens],
                                        attn_metadata, slot_mappings, num_tokens_across_dp)
        last_indices = self.last_token_indices[:num_reqs]
        self.graph_draft_tokens[:num_reqs] = self.sample_draft(
            hidden_states[last_indices], self.expanded_positions[last_indices], self.idx_mapping[:num_reqs],
            self.temperature, self.seeds, self.current_draft_step, self.draft_logits)

    def _decode_step(self, num_reqs: int, num_tokens: int, attn_metadata: dict[str, Any] | None,
                     slot_mappings: dict[str, torch.Tensor] | None, num_tokens_across_dp: torch.Tensor | None,
                     cudagraph_runtime_mode: CUDAGraphMode, num_speculative_steps: int | None = None) -> None:
        """What one graph holds: vLLM's draft forward (``_run_model``, as its eager loop calls it) on the persistent
        input buffers, then vLLM's ``sample_draft`` with the arguments its eager loop passes, into
        ``graph_draft_tokens``. ``num_reqs`` is the graph's (padded) row count; padding rows carry idx_mapping -1."""
        hidden_states = self._run_model(self.input_buffers.input_ids[:num_tokens],
                                        self.input_buffers.positions[:num_tokens], attn_metadata, slot_mappings,
                                        num_tokens_across_dp)
        self.graph_draft_tokens[:num_reqs] = self.sample_draft(
            hidden_states[:num_reqs], self.input_buffers.positions[:num_reqs], self.idx_mapping[:num_reqs],
            self.temperature, self.seeds, self.current_draft_step, self.draft_logits)

    def prefill_batch(self, input_batch: InputBatch, num_reqs: int, skip_attn: bool) -> BatchExecutionDescriptor:
        """The captured step-0 graph this batch replays, or a NONE descriptor (vLLM's eager ``_prefill``): a graph only
        where every request decodes with 1 + K tokens (vLLM's own uniform-decode test, as its EAGLE speculator asks
        it), so the expanded pass is uniform at ``prefill_query_len``."""
        manager = self.prefill_cudagraph_manager
        if manager is None or skip_attn or num_reqs == 0:
            return EAGER
        uniform = get_uniform_decode_token_count(num_reqs, input_batch.num_tokens,
                                                 int(input_batch.num_scheduled_tokens.max()),
                                                 input_batch.decode_graph_eligible)
        if uniform != self.num_speculative_steps + 1:
            return EAGER
        num_tokens = num_reqs * self.prefill_query_len
        return manager.dispatch(num_reqs, num_tokens, uniform_token_count=self.prefill_query_len, num_active_loras=0)

    def decode_batch(self, num_reqs: int, skip_attn: bool) -> BatchExecutionDescriptor:
        """The captured FULL graph this batch's decode steps replay, or a NONE descriptor (vLLM's eager steps)."""
        manager = self.decode_cudagraph_manager
        if manager is None or skip_attn or num_reqs == 0:
            return EAGER
        return manager.dispatch(num_reqs, num_reqs, uniform_token_count=1, num_active_loras=0)

    def replay(self, manager: SpeculatorCudaGraphManager, batch_desc: BatchExecutionDescriptor,
               counts: dict[int, int]) -> None:
        """One captured step (the test stands the recorded body in for it on a host without graphs)."""
        manager.run_fullgraph(batch_desc)
        counts[batch_desc.num_tokens] = counts.get(batch_desc.num_tokens, 0) + 1

    # ------------------------------------------------------------------------------------------------ the steps
    def _prefill(self, input_batch: InputBatch, num_rejected: torch.Tensor, last_sampled: torch.Tensor,
                 num_reqs: int, skip_attn: bool, num_tokens_across_dp: torch.Tensor | None) -> None:
        batch_desc = self.prefill_batch(input_batch, num_reqs, skip_attn)
        if batch_desc.cg_mode != CUDAGraphMode.FULL:
            self.eager_prefills += 1
            return super()._prefill(input_batch, num_rejected, last_sampled, num_reqs, skip_attn,
                                    num_tokens_across_dp)
        self.prepare_prefill(input_batch, num_rejected, last_sampled, num_reqs, batch_desc)
        self.current_draft_step.fill_(0)
        self.replay(self.prefill_cudagraph_manager, batch_desc, self.prefill_replays)
        self.draft_tokens[:num_reqs, 0] = self.graph_draft_tokens[:num_reqs]

    def prepare_prefill(self, input_batch: InputBatch, num_rejected: torch.Tensor, last_sampled: torch.Tensor,
                        num_reqs: int, batch_desc: BatchExecutionDescriptor) -> dict[str, Any] | None:
        """vLLM's step-0 preparation (``StandaloneARSpeculator._prefill``, attention on) for the graph's batch: vLLM's
        input kernel (the expanded ids and positions, last_token_indices, the expanded query starts and seq_lens,
        their padding rows held at the total and 0), the slot mapping into the block tables' persistent one padded
        with vLLM's PAD slot to the graph's tokens, and the attention metadata from vLLM's builder with vLLM's
        arguments for this pass. Returns the metadata."""
        total = prepare_prefill_inputs(
            input_buffers=self.input_buffers, input_batch=input_batch, last_sampled=last_sampled,
            num_rejected=num_rejected, expanded_input_ids=self.expanded_input_ids,
            expanded_positions=self.expanded_positions, last_token_indices=self.last_token_indices,
            max_num_reqs=self.max_num_reqs, max_model_len=self.max_model_len)
        self.block_tables.compute_slot_mappings(
            input_batch.idx_mapping, self.input_buffers.query_start_loc[: num_reqs + 1],
            self.expanded_positions[:total], batch_desc.num_tokens)
        expanded_query_start_loc = (input_batch.query_start_loc_np[: num_reqs + 1]
                                    + self.arange_np[: num_reqs + 1]).astype(np.int32)
        return self._build_attn_metadata(
            batch_desc=batch_desc, num_reqs=num_reqs, query_start_loc_np=expanded_query_start_loc,
            seq_lens_cpu_upper_bound=input_batch.seq_lens_cpu_upper_bound, step=0)

    def _multi_step_decode(self, input_batch: InputBatch, num_rejected: torch.Tensor, num_reqs: int,
                           skip_attn: bool, num_tokens_across_dp: torch.Tensor | None) -> None:
        batch_desc = self.decode_batch(num_reqs, skip_attn)
        if batch_desc.cg_mode != CUDAGraphMode.FULL:
            self.eager_decode_loops += 1
            return super()._multi_step_decode(input_batch, num_rejected, num_reqs, skip_attn, num_tokens_across_dp)
        self.prepare_decode(input_batch, num_rejected, num_reqs, batch_desc)
        for step in range(1, self.num_speculative_steps):
            self.prepare_step(input_batch, num_reqs, step, batch_desc)
            self.current_draft_step.fill_(step)
            self.replay(self.decode_cudagraph_manager, batch_desc, self.decode_replays)
            self.draft_tokens[:num_reqs, step] = self.graph_draft_tokens[:num_reqs]

    def prepare_decode(self, input_batch: InputBatch, num_rejected: torch.Tensor, num_reqs: int,
                       batch_desc: BatchExecutionDescriptor) -> None:
        """vLLM's loop preamble (``StandaloneARSpeculator._multi_step_decode``, attention on), then the padding rows
        of the graph's batch: no tokens (``query_start_loc`` held at ``num_reqs``) and no context (``seq_lens`` 0),
        as MRV2's other speculators pad theirs."""
        last_positions = self.expanded_positions[self.last_token_indices[:num_reqs]]
        self.input_buffers.positions[:num_reqs].copy_(last_positions)
        self.input_buffers.seq_lens[:num_reqs].copy_(torch.clamp(
            input_batch.seq_lens[:num_reqs] - num_rejected[:num_reqs].int() + 1, max=self.max_model_len))
        self.input_buffers.query_start_loc[: num_reqs + 1].copy_(self.arange_gpu[: num_reqs + 1])
        padded = batch_desc.num_tokens
        self.input_buffers.query_start_loc[num_reqs + 1: padded + 1].fill_(num_reqs)
        self.input_buffers.seq_lens[num_reqs:padded].fill_(0)

    def prepare_step(self, input_batch: InputBatch, num_reqs: int, step: int,
                     batch_desc: BatchExecutionDescriptor) -> dict[str, Any] | None:
        """vLLM's per-step inputs, in its order: the previous draft as input id, position and seq_lens one further
        (clamped), the slot mapping (padded to the graph's rows with vLLM's PAD slot) and the attention metadata,
        built for the graph's batch as vLLM's graphed speculators build theirs (their builders fill the persistent
        buffers the graph reads). Returns the metadata."""
        buffers = self.input_buffers
        buffers.input_ids[:num_reqs].copy_(self.draft_tokens[:num_reqs, step - 1].int())
        torch.clamp(buffers.positions[:num_reqs] + 1, max=self.max_model_len - 1, out=buffers.positions[:num_reqs])
        torch.clamp(buffers.seq_lens[:num_reqs] + 1, max=self.max_model_len, out=buffers.seq_lens[:num_reqs])
        # Into the block tables' persistent slot mapping, the one the graph's layers read (the views captured by
        # prepare_inputs_to_capture): no per-layer dict to hand over.
        self.block_tables.compute_slot_mappings(
            input_batch.idx_mapping, buffers.query_start_loc[: num_reqs + 1], buffers.positions[:num_reqs],
            batch_desc.num_tokens)
        return self._build_uniform_attn_metadata(
            batch_desc=batch_desc, num_reqs=num_reqs, num_query_per_req=1,
            seq_lens_cpu_upper_bound=input_batch.seq_lens_cpu_upper_bound,
            # Include the correction token inserted during prefill (as vLLM's loop does).
            step=step + 1)
