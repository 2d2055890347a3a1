"""FULL graphs for the V1 drafters: EAGLE/EAGLE3/MTP (one graph per padded size for the first pass at the target's
verify shape, query length 1+K, and for the chain steps, query length 1) and DFlash (one graph per block-aligned
size for its single parallel step, query length 1+K, context K/V written outside the graph).

vLLM 0.26.0's V1 drafter runs PIECEWISE at best: every forward dispatches its pieces and runs attention eagerly.
Here each forward the drafter makes in steady-state decoding is captured once per size into the process-wide graph
pool and replayed. What makes a replay correct is that every tensor the captured kernels read lives at the address it
had at capture and is written in place before the replay:
- inputs: the proposer's persistent ``input_ids``/``positions``/``hidden_states`` buffers (upstream copies into them;
  each replay checks the pointers and falls back to the model when they differ);
- attention metadata: chain steps use the proposer's ``arange`` as ``query_start_loc`` (constant for query length 1),
  the first pass the runner's persistent ``query_start_loc``; ``seq_lens`` is the runner's persistent buffer (updated
  in place by upstream's step kernel), the block table the runner's persistent table, ``slot_mapping`` the proposer's
  persistent slot buffer; ``max_seq_len`` is baked as ``max_model_len`` (an upper bound, as vLLM's own FULL captures).
DFlash builds a fresh ``query_start_loc`` and ``seq_lens`` every step; we copy them into persistent buffers (padding
rows: zero-length queries, zero sequence lengths) and point the metadata there before it is built.
Prefill-shaped first passes, sizes not captured and anything unexpected run vLLM's own path. Where exact, EAGLE chain
steps go further: one fused graph per step holds the forward, the greedy sample and the next step's inputs
(``v1_fused_chain``); otherwise sampling stays eager.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

import torch
from vllm.forward_context import set_forward_context
from vllm.platforms import current_platform
from vllm.v1.attention.backend import AttentionCGSupport, CommonAttentionMetadata
from vllm.v1.spec_decode.dflash import DFlashProposer
from vllm.v1.spec_decode.eagle import EagleProposer

from portable_spec.vllm_adapter.capture_log import capture_summary
from portable_spec.vllm_adapter.drafter_plan import drafter_plan
from portable_spec.vllm_adapter.mixin import device_port
from portable_spec.vllm_adapter.v1_fused_chain import CHAIN_FUSED, FusedChainMixin

logger = logging.getLogger("portable_spec.vllm_adapter")

PADDING_SLOT = -1
PORT_NAMES = ("cuda", "rocm", "musa")
FIRST, CHAIN, BLOCK = "first", "chain", "dflash_block"


@dataclass
class CapturedStep:
    """One captured drafter forward: the graph, the input pointers it was captured with, its static outputs."""

    kind: str
    num_reqs: int
    num_tokens: int
    graph: Any
    input_ptrs: tuple[int, ...]
    outputs: Any


def progress(todo: list[tuple[str, int]]) -> Any:
    """A progress bar on the first rank (as vLLM shows its own captures); the plain list elsewhere."""
    try:
        from tqdm import tqdm
        from vllm.distributed.parallel_state import is_global_first_rank
    except ImportError:
        return todo
    return tqdm(todo, desc="Capturing drafter FULL graphs (portable_spec)", disable=not is_global_first_rank())


def memory_snapshot() -> dict[str, int] | None:
    """Device memory as the driver sees it (free) and as torch's caching allocator does (reserved, allocated)."""
    if not torch.cuda.is_available():
        return None
    return {"free": torch.cuda.mem_get_info()[0], "reserved": torch.cuda.memory_reserved(),
            "allocated": torch.cuda.memory_allocated()}


def memory_deltas(before: dict[str, int] | None, after: dict[str, int] | None) -> dict[str, int | None]:
    """What capturing cost: ``memory_bytes`` (drop in free device memory, the headline), and how much of it torch's
    allocator reserved and still holds allocated (static outputs) — the rest is outside the allocator (workspaces,
    graph objects)."""
    if before is None or after is None:
        return {"memory_bytes": None}
    return {"memory_bytes": before["free"] - after["free"],
            "reserved_bytes": after["reserved"] - before["reserved"],
            "allocated_bytes": after["allocated"] - before["allocated"]}


def input_pointers(kwargs: dict[str, Any]) -> tuple[int, ...]:
    return tuple(v.data_ptr() if isinstance(v, torch.Tensor) else 0 for _, v in sorted(kwargs.items()))


class DrafterGraphs:
    """Replays a captured graph in place of the draft model's forward when the proposer announced a captured shape.

    Installed as an instance attribute ``forward`` on the draft model (``nn.Module.__call__`` looks ``forward`` up on
    the instance first), so ``proposer.model`` stays the real model for every ``isinstance`` check and attribute;
    ``uninstall()`` restores the class's forward.
    """

    def __init__(self, model: torch.nn.Module, proposer: "DrafterGraphMixin") -> None:
        self.model = model
        self.proposer = proposer
        self.eager_forward = model.forward
        self.captured: dict[tuple[str, int], CapturedStep] = {}
        self.replays = {FIRST: 0, CHAIN: 0, CHAIN_FUSED: 0, BLOCK: 0}
        self.pointer_mismatches = 0
        self.last_output: Any = None  # the latest forward's output (replayed or eager): the fused chain starts there

    def install(self) -> None:
        self.model.forward = self

    def uninstall(self) -> None:
        if self.model.__dict__.get("forward") is self:
            del self.model.forward

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        step = self.proposer.pending_step(self.captured, kwargs)
        if step is not None:
            if input_pointers(kwargs) == step.input_ptrs:
                self.replays[step.kind] += 1
                step.graph.replay()
                self.last_output = step.outputs
                return step.outputs
            self.pointer_mismatches += 1
        self.last_output = self.eager_forward(*args, **kwargs)
        return self.last_output


class DrafterGraphMixin:
    """Capture at boot, replay in steady state, for any V1 proposer. Subclasses say which forwards qualify
    (``_classify``), what metadata a capture uses (``_capture_metadata``) and which sizes to capture (``_todo``).
    Put it first in the bases: ``class P(DrafterGraphMixin, SomeUpstreamProposer)``."""

    def __init__(self, vllm_config: Any, device: torch.device, runner: Any = None) -> None:
        super().__init__(vllm_config, device, runner)
        # Upstream does not keep the runner; we need its persistent query_start_loc, seq_lens and block table.
        self.target_runner = runner
        # The K our graphs are shaped for (upstream rewrites num_speculative_tokens on every propose call).
        self.graph_k = self.num_speculative_tokens
        self._pending: tuple[str, int] | None = None  # (kind, num_reqs) announced by the last metadata build
        self.graphs: DrafterGraphs | None = None
        self.capture_stats: dict[str, Any] = {}

    # -- hooks into upstream's propose -----------------------------------------------------------------------------
    def build_per_group_and_layer_attn_metadata(self, common_attn_metadata: CommonAttentionMetadata,
                                                draft_index: int = 0):
        self._pending = self._classify(common_attn_metadata, draft_index) if self.graphs is not None else None
        return super().build_per_group_and_layer_attn_metadata(common_attn_metadata, draft_index)

    def _classify(self, cad: CommonAttentionMetadata, draft_index: int) -> tuple[str, int] | None:
        """``(kind, num_reqs)`` of the captured family the forward about to run belongs to, or None."""
        raise NotImplementedError

    def _capture_metadata(self, kind: str, num_reqs: int) -> CommonAttentionMetadata:
        """Metadata over the persistent buffers a replay of ``(kind, num_reqs)`` will read."""
        raise NotImplementedError

    def _todo(self, plan: Any, max_reqs: int) -> list[tuple[str, int]]:
        """``(kind, num_reqs)`` to capture, from the capture plan."""
        raise NotImplementedError

    def capture_order(self, plan: Any, max_reqs: int) -> list[tuple[str, int]]:
        """``_todo`` with the most tokens first. The graphs share one pool and each keeps its outputs allocated
        there; captured smallest first, each larger graph found only holes too small for its intermediates and took
        new segments (H100, 44 graphs of the tiny pair: 1,022 MiB; largest first: 138 MiB). vLLM captures its own
        graphs in this order too."""
        todo = self._todo(plan, max_reqs)
        return sorted(todo, key=lambda item: item[1] * self._query_len(item[0]), reverse=True)

    def _query_len(self, kind: str) -> int:
        return 1 if kind in (CHAIN, CHAIN_FUSED) else 1 + self.graph_k

    def pending_step(self, captured: dict[tuple[str, int], CapturedStep],
                     kwargs: dict[str, Any]) -> CapturedStep | None:
        """The captured step for the forward about to run (consumes the announcement), or None."""
        pending, self._pending = self._pending, None
        if pending is None:
            return None
        step = captured.get(pending)
        tokens = kwargs["input_ids"].shape[0] if kwargs.get("input_ids") is not None else -1
        return step if step is not None and step.num_tokens == tokens else None

    # -- capture at boot -------------------------------------------------------------------------------------------
    def _graph_support(self) -> AttentionCGSupport:
        return min((group.get_metadata_builder().get_cudagraph_support(self.vllm_config, group.kv_cache_spec)
                    for group in self.draft_attn_groups), key=lambda support: support.value)

    def _model_kwargs(self, num_tokens: int) -> dict[str, Any]:
        kwargs = {"input_ids": self.input_ids[:num_tokens], "positions": self._get_positions(num_tokens),
                  "inputs_embeds": None}
        if self.pass_hidden_states_to_model and not isinstance(self, DFlashProposer):
            kwargs["hidden_states"] = self.hidden_states[:num_tokens]
        return kwargs

    def _capture_one(self, port: Any, pool: Any, kind: str, num_reqs: int) -> CapturedStep:
        cad = self._capture_metadata(kind, num_reqs)
        num_tokens = cad.num_actual_tokens
        _, per_layer = super().build_per_group_and_layer_attn_metadata(cad, 1 if kind in (CHAIN, CHAIN_FUSED) else 0)
        kwargs = self._model_kwargs(num_tokens)
        forward = self.graphs.eager_forward

        def run() -> Any:
            with set_forward_context(per_layer, self.vllm_config, num_tokens=num_tokens,
                                     slot_mapping=self._get_slot_mapping(num_tokens)):
                out = forward(**kwargs)
            return self._fused_chain_body(num_tokens, out) if kind == CHAIN_FUSED else out

        with port.on_capture_stream():
            run()  # warm-up outside capture (lazy initialisation, autotuning, per-stream workspaces)
        graph = port.new_graph()
        with port.capture(graph, pool=pool):
            outputs = run()
        return CapturedStep(kind, num_reqs, num_tokens, graph, input_pointers(kwargs), outputs)

    @torch.inference_mode()
    def capture_graphs(self) -> dict[str, Any]:
        """Capture every planned size; a size that fails to capture stays on vLLM's path (one warning each)."""
        if self.supports_mm_inputs:
            self.capture_stats = {"graphs": 0, "skipped": "multimodal drafter inputs"}
            return self.capture_stats
        if self.graphs is None:
            self.graphs = DrafterGraphs(self.model, self)
        self._before_capture()
        todo = self.capture_order(drafter_plan(self.vllm_config), self.target_runner.max_num_reqs)
        port = device_port(current_platform.device_name if current_platform.device_name in PORT_NAMES else "cuda")
        pool = current_platform.get_global_graph_pool()
        before, started = memory_snapshot(), time.perf_counter()
        captured: dict[tuple[str, int], CapturedStep] = {}
        failed: dict[str, str] = {}
        for kind, num_reqs in progress(todo):
            try:
                captured[(kind, num_reqs)] = self._capture_one(port, pool, kind, num_reqs)
            except Exception as exc:  # one size failing must not take the engine down
                failed[f"{kind}:{num_reqs}"] = f"{type(exc).__name__}: {exc}".splitlines()[0]
                logger.warning("portable_spec: drafter %s graph for %d requests failed to capture (%s); that size "
                               "stays on vLLM's path", kind, num_reqs, failed[f"{kind}:{num_reqs}"])
        self.target_runner.seq_lens.zero_()
        port.synchronize()
        self.graphs.captured = dict(sorted(captured.items()))
        if self.graphs.captured:
            self.graphs.install()
        after = memory_snapshot()
        sizes: dict[str, list[int]] = {}
        for step in self.graphs.captured.values():  # sorted by (kind, requests), not in capture order
            sizes.setdefault(step.kind, []).append(step.num_tokens)
        self.capture_stats = {"graphs": len(captured), "num_tokens": sizes, "failed": failed,
                              "seconds": round(time.perf_counter() - started, 3), **memory_deltas(before, after)}
        logger.info(capture_summary(self.capture_stats))
        return self.capture_stats

    def _before_capture(self) -> None:
        """Buffers and decisions a subclass needs before ``_todo`` (none by default)."""

    def _fused_chain_body(self, num_tokens: int, out: Any) -> Any:
        raise NotImplementedError("only EAGLE chain steps are fused")

    def _refuse_below(self, need: AttentionCGSupport, what: str) -> bool:
        """True (with one warning naming the backend) when the draft attention cannot serve ``what`` in a graph."""
        support = self._graph_support()
        if support.value < need.value:
            backends = ", ".join(sorted({group.backend.get_name() for group in self.draft_attn_groups}))
            logger.warning("portable_spec: draft attention backend %s supports graphs only at %s, %s needs %s; it "
                           "stays on vLLM's PIECEWISE/eager path", backends, support.name, what, need.name)
            return True
        return False


class FullGraphEagleProposer(FusedChainMixin, DrafterGraphMixin, EagleProposer):
    """EAGLE/EAGLE3/MTP: the verify-shaped first pass and every chain step replay per-size FULL graphs; chain steps
    are fused (forward + sample + next inputs) where ``v1_fused_chain`` says that is exact."""

    def _before_capture(self) -> None:
        self._init_fused_chain(self.target_runner.max_num_reqs)

    def _classify(self, cad: CommonAttentionMetadata, draft_index: int) -> tuple[str, int] | None:
        qsl = cad.query_start_loc.data_ptr()
        if draft_index >= 1 and qsl == self.arange.data_ptr():
            return (CHAIN, cad.num_reqs)
        query_len = 1 + self.graph_k
        # Verify-shaped first pass: every real request has 1+K tokens; requests the target padded have 0
        # (query_start_loc repeats its last value there), so the runner's buffer is valid for all num_reqs rows.
        if (draft_index == 0 and cad.max_query_len == query_len and cad.num_actual_tokens <= cad.num_reqs * query_len
                and cad.num_actual_tokens % query_len == 0
                and qsl == self.target_runner.query_start_loc.gpu.data_ptr()):
            return (FIRST, cad.num_reqs)
        return None

    def pending_step(self, captured: dict[tuple[str, int], CapturedStep],
                     kwargs: dict[str, Any]) -> CapturedStep | None:
        pending = self._pending
        if pending is None or pending[0] != CHAIN:
            return super().pending_step(captured, kwargs)
        self._pending = None
        num_reqs = pending[1]
        for (kind, size), step in captured.items():  # ascending within each kind
            if kind == CHAIN and size >= num_reqs:
                if size > num_reqs:
                    # Rows [num_reqs, size) are padding: they must never write the KV cache.
                    self._slot_mapping_buffer[num_reqs:size].fill_(PADDING_SLOT)
                return step
        return None

    def _todo(self, plan: Any, max_reqs: int) -> list[tuple[str, int]]:
        if self._refuse_below(AttentionCGSupport.UNIFORM_SINGLE_TOKEN_DECODE, "every drafter graph"):
            return []
        todo: list[tuple[str, int]] = []
        if not self._refuse_below(AttentionCGSupport.UNIFORM_BATCH, "the (1+K)-token first pass"):
            todo += [(FIRST, plan.first_step.num_reqs(s)) for s in plan.first_step.sizes
                     if plan.first_step.num_reqs(s) <= max_reqs]
        if plan.chain_step is not None and self.graph_k > 1:
            chain_sizes = [s for s in plan.chain_step.sizes if s <= max_reqs]
            if not self.fused_chain_off:
                todo += [(CHAIN_FUSED, s) for s in chain_sizes]
            if self.fused_chain_off or self._enable_probabilistic_draft_probs:
                # Upstream's loop runs the chain: always without fusion, or for batches that sample from the draft.
                todo += [(CHAIN, s) for s in chain_sizes]
        return todo

    def _capture_metadata(self, kind: str, num_reqs: int) -> CommonAttentionMetadata:
        runner = self.target_runner
        query_len = self._query_len(kind)
        if kind in (CHAIN, CHAIN_FUSED):
            query_start_loc = self.arange[: num_reqs + 1]
        else:
            query_start_loc = runner.query_start_loc.gpu[: num_reqs + 1]
            query_start_loc.copy_(self.arange[: num_reqs + 1] * query_len)
        return capture_metadata(self, query_start_loc, runner.seq_lens, num_reqs, query_len, causal=True)


class FullGraphDFlashProposer(DrafterGraphMixin, DFlashProposer):
    """DFlash: its one parallel step (a non-causal block of 1+K query tokens per request) replays FULL graphs at
    block-aligned sizes. The context K/V projection stays eager, outside the graph, as upstream does it."""

    def __init__(self, vllm_config: Any, device: torch.device, runner: Any = None) -> None:
        super().__init__(vllm_config, device, runner)
        # Upstream builds these two fresh every step; replays read them from here.
        self._block_query_start_loc = torch.zeros(self.max_batch_size + 1, dtype=torch.int32, device=device)
        self._block_seq_lens = torch.zeros(self.max_batch_size, dtype=torch.int32, device=device)

    def _classify(self, cad: CommonAttentionMetadata, draft_index: int) -> tuple[str, int] | None:
        query_len = 1 + self.graph_k
        if draft_index != 0 or cad.max_query_len != query_len or cad.num_actual_tokens != cad.num_reqs * query_len:
            return None
        size = next((n for kind, n in self.graphs.captured if kind == BLOCK and n >= cad.num_reqs), None)
        if size is None:
            return None
        # Copy this step's metadata into the persistent buffers, padding rows as zero-length requests, and point the
        # metadata there (the object is the fresh one upstream made this step; its old tensors are only read here).
        num_reqs = cad.num_reqs
        self._block_query_start_loc[: num_reqs + 1].copy_(cad.query_start_loc)
        self._block_query_start_loc[num_reqs + 1: size + 1].fill_(cad.num_actual_tokens)
        self._block_seq_lens[:num_reqs].copy_(cad.seq_lens)
        self._block_seq_lens[num_reqs:size].zero_()
        self._slot_mapping_buffer[cad.num_actual_tokens: size * query_len].fill_(PADDING_SLOT)
        cad.query_start_loc = self._block_query_start_loc[: num_reqs + 1]
        cad.seq_lens = self._block_seq_lens[:num_reqs]
        return (BLOCK, size)

    def _todo(self, plan: Any, max_reqs: int) -> list[tuple[str, int]]:
        if self._refuse_below(AttentionCGSupport.UNIFORM_BATCH, "the DFlash block step"):
            return []
        return [(BLOCK, plan.first_step.num_reqs(s)) for s in plan.first_step.sizes
                if plan.first_step.num_reqs(s) <= min(max_reqs, self.max_batch_size)]

    def _capture_metadata(self, kind: str, num_reqs: int) -> CommonAttentionMetadata:
        query_len = self._query_len(kind)
        self._block_query_start_loc[: num_reqs + 1].copy_(self.arange[: num_reqs + 1] * query_len)
        return capture_metadata(self, self._block_query_start_loc[: num_reqs + 1], self._block_seq_lens, num_reqs,
                                query_len, causal=self.dflash_causal)


def capture_metadata(proposer: Any, query_start_loc: torch.Tensor, seq_lens: torch.Tensor, num_reqs: int,
                     query_len: int, *, causal: bool) -> CommonAttentionMetadata:
    """Capture-time metadata over persistent buffers; KV writes disabled (padding slots), lengths = query length."""
    num_tokens = num_reqs * query_len
    seq_lens[:num_reqs].fill_(query_len)
    proposer._slot_mapping_buffer[:num_tokens].fill_(PADDING_SLOT)
    return CommonAttentionMetadata(
        query_start_loc=query_start_loc,
        query_start_loc_cpu=torch.arange(num_reqs + 1, dtype=torch.int32) * query_len,
        seq_lens=seq_lens[:num_reqs],
        num_reqs=num_reqs,
        num_actual_tokens=num_tokens,
        max_query_len=query_len,
        max_seq_len=proposer.max_model_len,
        block_table_tensor=proposer.target_runner.input_batch.block_table[0].get_device_tensor(num_reqs),
        slot_mapping=proposer._slot_mapping_buffer[:num_tokens],
        causal=causal,
    )
