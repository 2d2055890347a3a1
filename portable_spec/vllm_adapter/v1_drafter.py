"""FULL graphs for the V1 EAGLE/EAGLE3/MTP drafter's chain steps (query length 1), one graph per batch size.

vLLM 0.26.0's V1 drafter runs its K-1 chain steps PIECEWISE at best: the model forward of every step launches its
kernels one by one. Here each chain-step forward is captured once per padded batch size into the process-wide graph
pool and replayed. What makes a replay correct is that every tensor the captured kernels read lives at the address it
had at capture, and is written in place before the replay:
- inputs: the proposer's persistent ``input_ids``/``positions``/``hidden_states`` buffers (upstream copies into them);
- attention metadata: ``query_start_loc`` is the proposer's ``arange`` (constant for query length 1),
  ``seq_lens`` the runner's persistent ``seq_lens`` buffer (updated in place by upstream's step kernel),
  the block table the runner's persistent table, ``slot_mapping`` the proposer's persistent slot buffer;
  ``max_seq_len`` is baked as ``max_model_len`` (an upper bound, as vLLM does for its own FULL captures).
The first pass (variable query length) stays on vLLM's path; sampling stays eager.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import torch
from vllm.forward_context import set_forward_context
from vllm.platforms import current_platform
from vllm.v1.attention.backend import AttentionCGSupport, CommonAttentionMetadata
from vllm.v1.spec_decode.eagle import EagleProposer

from portable_spec.vllm_adapter.drafter_plan import chain_step_sizes
from portable_spec.vllm_adapter.mixin import device_port

logger = logging.getLogger("portable_spec.vllm_adapter")

PADDING_SLOT = -1
PORT_NAMES = ("cuda", "rocm", "musa")


@dataclass
class CapturedStep:
    """One captured chain-step forward: the graph and the static outputs its replays refill."""

    num_reqs: int
    graph: Any
    outputs: Any


class ChainStepGraphs:
    """Replays a captured graph in place of the draft model's forward for the chain steps it holds.

    Installed as an instance attribute ``forward`` on the draft model (``nn.Module.__call__`` looks ``forward`` up on
    the instance first), so ``proposer.model`` stays the real model for every ``isinstance`` check and attribute;
    ``uninstall()`` restores the class's forward.
    """

    def __init__(self, model: torch.nn.Module, proposer: "FullGraphEagleProposer") -> None:
        self.model = model
        self.proposer = proposer
        self.eager_forward = model.forward
        self.captured: dict[int, CapturedStep] = {}  # num_reqs -> step, ascending
        self.replays = 0

    def install(self) -> None:
        self.model.forward = self

    def uninstall(self) -> None:
        if self.model.__dict__.get("forward") is self:
            del self.model.forward

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        step = self.proposer.pending_chain_step()
        if step is not None:
            self.replays += 1
            step.graph.replay()
            return step.outputs
        return self.eager_forward(*args, **kwargs)


class FullGraphEagleProposer(EagleProposer):
    """``EagleProposer`` whose chain steps replay per-batch-size FULL graphs (see module docstring)."""

    def __init__(self, vllm_config: Any, device: torch.device, runner: Any = None) -> None:
        super().__init__(vllm_config, device, runner)
        # Upstream does not keep the runner; we need its persistent seq_lens buffer and block table.
        self.target_runner = runner
        self._chain_batch: int | None = None  # real batch of the chain step whose metadata was just built
        self._chain_graphs: ChainStepGraphs | None = None
        self.capture_stats: dict[str, Any] = {}

    # -- hooks into upstream's propose loop ------------------------------------------------------------------------
    def build_per_group_and_layer_attn_metadata(self, common_attn_metadata: CommonAttentionMetadata,
                                                draft_index: int = 0):
        # Chain steps build with draft_index >= 1 and query_start_loc = self.arange (query length 1).
        is_chain = draft_index >= 1 and common_attn_metadata.query_start_loc.data_ptr() == self.arange.data_ptr()
        self._chain_batch = common_attn_metadata.num_reqs if is_chain else None
        return super().build_per_group_and_layer_attn_metadata(common_attn_metadata, draft_index)

    def pending_chain_step(self) -> CapturedStep | None:
        """The captured graph to replay for the chain step about to run, or None (eager/PIECEWISE path)."""
        batch, graphs = self._chain_batch, self._chain_graphs
        self._chain_batch = None
        if batch is None or graphs is None:
            return None
        for size, step in graphs.captured.items():  # ascending
            if size >= batch:
                if size > batch:
                    # Rows [batch, size) are padding: never write the KV cache from them.
                    self._slot_mapping_buffer[batch:size].fill_(PADDING_SLOT)
                return step
        return None

    # -- capture at boot -------------------------------------------------------------------------------------------
    def chain_graph_support_ok(self) -> bool:
        for group in self.draft_attn_groups:
            builder = group.get_metadata_builder()
            support = builder.get_cudagraph_support(self.vllm_config, group.kv_cache_spec)
            if support.value < AttentionCGSupport.UNIFORM_SINGLE_TOKEN_DECODE.value:
                logger.warning("portable_spec: draft attention backend %s supports graphs only at %s; chain steps "
                               "stay PIECEWISE/eager", group.backend.get_name(), support.name)
                return False
        return True

    def _capture_metadata(self, num_reqs: int) -> CommonAttentionMetadata:
        runner = self.target_runner
        return CommonAttentionMetadata(
            query_start_loc=self.arange[: num_reqs + 1],
            query_start_loc_cpu=torch.from_numpy(self.token_arange_np[: num_reqs + 1]).clone(),
            seq_lens=runner.seq_lens[:num_reqs],
            num_reqs=num_reqs,
            num_actual_tokens=num_reqs,
            max_query_len=1,
            max_seq_len=self.max_model_len,
            block_table_tensor=runner.input_batch.block_table[0].get_device_tensor(num_reqs),
            slot_mapping=self._slot_mapping_buffer[:num_reqs],
            causal=True,
        )

    def _forward(self, forward: Any, num_reqs: int, per_layer: dict) -> Any:
        kwargs = {"input_ids": self.input_ids[:num_reqs], "positions": self._get_positions(num_reqs),
                  "inputs_embeds": None}
        if self.pass_hidden_states_to_model:
            kwargs["hidden_states"] = self.hidden_states[:num_reqs]
        with set_forward_context(per_layer, self.vllm_config, num_tokens=num_reqs,
                                 slot_mapping=self._get_slot_mapping(num_reqs)):
            return forward(**kwargs)

    @torch.inference_mode()
    def capture_chain_step_graphs(self) -> dict[str, Any]:
        """Capture one FULL graph per chain-step batch size; a size that fails to capture stays eager (warning)."""
        if self.num_speculative_tokens < 2 or self.supports_mm_inputs or not self.chain_graph_support_ok():
            return {}
        if self._chain_graphs is None:
            self._chain_graphs = ChainStepGraphs(self.model, self)
        eager_forward = self._chain_graphs.eager_forward
        port = device_port(current_platform.device_name if current_platform.device_name in PORT_NAMES else "cuda")
        pool = current_platform.get_global_graph_pool()
        sizes = [s for s in chain_step_sizes(self.vllm_config) if s <= self.target_runner.max_num_reqs]
        free_before = torch.cuda.mem_get_info()[0] if torch.cuda.is_available() else None
        captured, failed = {}, {}
        for num_reqs in sizes:
            try:
                self._slot_mapping_buffer[:num_reqs].fill_(PADDING_SLOT)
                self.target_runner.seq_lens[:num_reqs].fill_(1)
                _, per_layer = super().build_per_group_and_layer_attn_metadata(
                    self._capture_metadata(num_reqs), draft_index=1)
                self._forward(eager_forward, num_reqs, per_layer)  # warm-up outside capture
                graph = port.new_graph()
                with port.capture(graph, pool=pool):
                    outputs = self._forward(eager_forward, num_reqs, per_layer)
                captured[num_reqs] = CapturedStep(num_reqs, graph, outputs)
            except Exception as exc:  # one size failing must not take the engine down
                failed[num_reqs] = f"{type(exc).__name__}: {exc}".splitlines()[0]
                logger.warning("portable_spec: drafter chain-step graph for %d requests failed to capture (%s); "
                               "that size stays eager", num_reqs, failed[num_reqs])
        self.target_runner.seq_lens.zero_()
        port.synchronize()
        self._chain_graphs.captured.update(dict(sorted(captured.items())))
        if self._chain_graphs.captured:
            self._chain_graphs.install()
        free_after = torch.cuda.mem_get_info()[0] if torch.cuda.is_available() else None
        self.capture_stats = {
            "sizes": sorted(captured), "failed": failed, "graphs": len(captured),
            "memory_bytes": (free_before - free_after) if free_before is not None else None,
        }
        logger.info("portable_spec: drafter chain-step FULL graphs: %d captured %s, %d failed, %.1f MiB",
                    len(captured), sorted(captured), len(failed),
                    (self.capture_stats["memory_bytes"] or 0) / 2**20)
        return self.capture_stats
