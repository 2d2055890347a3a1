"""Model Runner V2's standalone draft model (``method: draft_model``) with FULL graphs for its draft decode steps.

Why: vLLM 0.33.0's ``StandaloneARSpeculator`` (``v1/worker/gpu/spec_decode/standalone_ar/speculator.py``) captures
nothing (its ``init_cudagraph_manager`` and ``capture`` are ``pass``) and forwards every draft step eagerly, so each
of the K-1 decode steps launches every kernel of every layer of the draft model from the host: at low concurrency
the draft model is launch-bound. Its EAGLE-style siblings (``TargetDependentARSpeculator``) record their decode step
through MRV2's own ``SpeculatorCudaGraphManager`` (``FULL_DECODE_ONLY``, one token per request); this subclass does
the same for the standalone draft model:

- steps 1..K-1 (uniform, one token per request): the draft forward and ``sample_draft`` (vLLM's, greedy or
  probabilistic, the same call with the same arguments) are one FULL graph per captured size, captured by
  ``SpeculatorCudaGraphManager.capture`` into the pool every MRV2 manager takes from the platform
  (``current_platform.get_global_graph_pool()``: our port's one pool). Everything vLLM's eager loop does around the
  forward (the next inputs, the slot mapping, the attention metadata) runs as vLLM runs it, eagerly before each
  replay, into the persistent buffers the graph reads; the only additions are the padding rows a larger graph needs
  (``query_start_loc`` held at ``num_reqs``, ``seq_lens`` 0, ``idx_mapping`` -1: vLLM's own padding convention, which
  its sampler and slot mapping skip) and the copy of the graph's sampled tokens into ``draft_tokens``.
- a batch size with no captured graph, a dummy run that skips attention, a profile run (nothing captured yet) or a
  graph mode without FULL decode graphs run vLLM's eager ``_multi_step_decode`` unchanged.
- step 0 (the expanded prefill/extend pass: accepted tokens + correction token + rejected slots, ``query_len + 1``
  per request) stays vLLM's, eager: its token count varies with every request's query length, and MRV2's prefill
  manager is keyed on ``1+K`` tokens per request where this pass has ``2+K`` (a graph for it needs its own manager
  and sizes; not done here).

Installed only by ``worker.mrv2_speculator`` (one scoped override while the worker builds MRV2's runner); the
census (``patch/manifest.py``) lists it.
"""

from __future__ import annotations

from typing import Any

import torch
from vllm.config.compilation import CUDAGraphMode
from vllm.logger import init_logger
from vllm.v1.worker.gpu.cudagraph_utils import BatchExecutionDescriptor
from vllm.v1.worker.gpu.input_batch import InputBatch
from vllm.v1.worker.gpu.spec_decode.standalone_ar.speculator import StandaloneARSpeculator
from vllm.v1.worker.gpu.spec_decode.target_dependent_ar.cudagraph_utils import SpeculatorCudaGraphManager

logger = init_logger(__name__)

EAGER = BatchExecutionDescriptor(cg_mode=CUDAGraphMode.NONE, num_tokens=0, num_reqs=0)


class GraphedStandaloneARSpeculator(StandaloneARSpeculator):
    """vLLM's standalone draft model speculator whose decode steps replay FULL graphs where one is captured."""

    def __init__(self, vllm_config: Any, device: torch.device):
        super().__init__(vllm_config, device)
        self.decode_cudagraph_manager: SpeculatorCudaGraphManager | None = None
        # What the decode graph samples, per row; copied into draft_tokens[:, step] after each replay (the column
        # differs per step, the graph is one per size).
        self.graph_draft_tokens = torch.zeros(self.max_num_reqs, dtype=torch.int64, device=device)
        # What ran, for the e2e checks and the serving bench's identity check (a "graphed" speculator that never
        # replays is vLLM's eager one with another name): graph replays per captured size, and decode loops that
        # ran vLLM's eager steps instead.
        self.decode_replays: dict[int, int] = {}
        self.eager_decode_loops = 0

    # ------------------------------------------------------------------------------------------------ graphs
    def init_cudagraph_manager(self, cudagraph_mode: CUDAGraphMode) -> None:
        """The decode manager as ``TargetDependentARSpeculator`` builds it: FULL_DECODE_ONLY at one token per request
        where the runner's decode mode is FULL, else none (vLLM's eager steps). None with one speculative step (no
        decode steps) or data parallelism (the dispatch would need a cross-rank agreement vLLM's eager path here
        does not make)."""
        if (self.num_speculative_steps < 2 or self.dp_size > 1
                or cudagraph_mode.decode_mode() != CUDAGraphMode.FULL):
            return
        self.decode_cudagraph_manager = SpeculatorCudaGraphManager(
            self.vllm_config, self.device, CUDAGraphMode.FULL_DECODE_ONLY, decode_query_len=1)

    def capture(self) -> None:
        """Record the decode step for every FULL size the manager derives from vLLM's capture sizes. The manager
        builds each size's dummy attention metadata and slot mapping itself (``prepare_inputs_to_capture``)."""
        if self.decode_cudagraph_manager is None or not self.decode_cudagraph_manager.needs_capture():
            return
        logger.info("portable_spec: capturing the standalone draft model's decode steps (FULL graphs)")
        # Stale indices from earlier dummy runs must not index out of range during capture (as vLLM's does).
        self.idx_mapping.zero_()
        self.decode_cudagraph_manager.capture(
            self._decode_step, self.model_state, self.input_buffers, self.block_tables, self.attn_groups,
            self.kv_cache_config, progress_bar_desc="Capturing standalone draft decode CUDA graphs")

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

    def decode_batch(self, num_reqs: int, skip_attn: bool) -> BatchExecutionDescriptor:
        """The captured FULL graph this batch's decode steps replay, or a NONE descriptor (vLLM's eager steps)."""
        manager = self.decode_cudagraph_manager
        if manager is None or skip_attn or num_reqs == 0:
            return EAGER
        return manager.dispatch(num_reqs, num_reqs, uniform_token_count=1, num_active_loras=0)

    def replay(self, batch_desc: BatchExecutionDescriptor) -> None:
        """One captured decode step (the test stands the eager body in for it on a host without graphs)."""
        assert self.decode_cudagraph_manager is not None
        self.decode_cudagraph_manager.run_fullgraph(batch_desc)
        self.decode_replays[batch_desc.num_tokens] = self.decode_replays.get(batch_desc.num_tokens, 0) + 1

    # ------------------------------------------------------------------------------------------------ the steps
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
            self.replay(batch_desc)
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
