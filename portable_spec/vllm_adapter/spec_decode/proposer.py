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
  A batch that replays a larger graph has its metadata built for the graph's batch (``_pad_metadata``), as vLLM's
  runner builds it for its own padded FULL graphs: a backend that plans per batch (FA3's AOT scheduler in
  FLASH_ATTN_MLA) must see the batch the captured kernel runs.
DFlash builds a fresh ``query_start_loc`` and ``seq_lens`` every step; we copy them into persistent buffers (padding
rows: zero-length queries, zero sequence lengths) and point the metadata there before it is built.
Prefill-shaped first passes, ragged ones where the draft attention's graphs need uniform queries
(``_ragged_first_pass_replays``), sizes not captured and anything unexpected run vLLM's own path. Where exact, EAGLE
goes further (``fused_chain``): the first pass is one graph holding the forward, the greedy sample and the chain's
first inputs, and each chain step one graph holding the forward, the greedy sample and the next step's inputs;
otherwise sampling stays eager.

Keys, capture, replay, live-graph budget, per-key fallback, cross-rank agreement and the capture log line are the
one runner's (``portable_spec.draft.runner``); the proposers here implement its ``DraftStepSource`` protocol
(``step_call``) and decide, per forward, which key replays (``_classify``).
"""

from __future__ import annotations

import collections
import functools
import logging
from typing import Any

import torch
from vllm.forward_context import set_forward_context
from vllm.platforms import current_platform
from vllm.v1.attention.backend import AttentionCGSupport, CommonAttentionMetadata
from vllm.v1.attention.backends.utils import NULL_BLOCK_ID
from vllm.v1.spec_decode.dflash import DFlashProposer
from vllm.v1.spec_decode.eagle import EagleProposer

from portable_spec.draft.dispatcher import BLOCK, CHAIN, CHAIN_FUSED, FIRST, FIRST_FUSED, DraftDispatcher, DraftKey
from portable_spec.draft.runner import DraftGraphRunner, StepCall
from portable_spec.vllm_adapter.platform.drafter_plan import draft_graph_budget, drafter_plan
from portable_spec.ports.current import device_port, port_name_of
from portable_spec.vllm_adapter.spec_decode.rank_agreement import first_rank_progress, tensor_parallel_agreement
from portable_spec.vllm_adapter.spec_decode.draft_prep import DraftPrepMixin
from portable_spec.vllm_adapter.spec_decode.fused_chain import FusedChainMixin

logger = logging.getLogger("portable_spec.vllm_adapter")

PADDING_SLOT = -1


def input_pointers(kwargs: dict[str, Any]) -> tuple[int, ...]:
    return tuple(v.data_ptr() if isinstance(v, torch.Tensor) else 0 for _, v in sorted(kwargs.items()))


class ForwardReplay:
    """Replays a captured graph in place of the draft model's call when the proposer announced a captured key.

    Where the draft model's class keeps ``nn.Module.__call__`` (EAGLE heads: vLLM compiles their inner model), it is
    installed as the instance attribute ``forward`` (``nn.Module.__call__`` looks ``forward`` up on the instance
    first). Where vLLM's ``@support_torch_compile`` decorates the draft model's class itself (MTP heads such as
    ``DeepSeekMTP``), the class's ``__call__`` runs the compiled code and never reads ``forward``: there the instance
    gets a subclass whose only change is ``__call__`` (``replaying_class``), because Python looks ``__call__`` up on
    the type. Either way ``proposer.model`` stays the real model for every ``isinstance`` check and attribute, what
    runs without a replay (and what a capture records, ``eager_forward``) is exactly what ``model(...)`` ran before,
    and ``uninstall()`` restores it. The replay itself (and its input-pointer check) is the runner's.
    """

    def __init__(self, model: torch.nn.Module, proposer: "DrafterGraphMixin") -> None:
        self.model = model
        self.proposer = proposer
        self.model_class = type(model)
        self.through_call = calls_bypass_forward(self.model_class)
        self.eager_forward = (functools.partial(self.model_class.__call__, model) if self.through_call
                              else model.forward)
        self.last_output: Any = None  # the latest forward's output (replayed or eager): the fused chain starts there

    def install(self) -> None:
        if self.through_call:
            self.model.__dict__[REPLAY_ATTR] = self
            self.model.__class__ = replaying_class(self.model_class)
        else:
            self.model.forward = self

    def uninstall(self) -> None:
        if self.through_call:
            if self.model.__dict__.get(REPLAY_ATTR) is self:
                self.model.__class__ = self.model_class
                del self.model.__dict__[REPLAY_ATTR]
        elif self.model.__dict__.get("forward") is self:
            del self.model.forward

    @property
    def installed(self) -> bool:
        return self.model.__dict__.get(REPLAY_ATTR if self.through_call else "forward") is self

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        key = self.proposer.pending_key(kwargs)
        step = None if key is None else self.proposer.graph_runner.replay(key, input_pointers(kwargs))
        self.last_output = step.outputs if step is not None else self.eager_forward(*args, **kwargs)
        return self.last_output


REPLAY_ATTR = "_portable_spec_forward_replay"


def calls_bypass_forward(model_class: type) -> bool:
    """Whether ``model(...)`` may run without reading ``forward``: vLLM's ``@support_torch_compile`` replaces the
    decorated class's ``__call__`` with one that calls its compiled (or AOT-loaded) function directly."""
    return model_class.__call__ is not torch.nn.Module.__call__


_REPLAYING_CLASSES: dict[type, type] = {}


def replaying_class(model_class: type) -> type:
    """``model_class`` with ``__call__`` routed through the instance's ``ForwardReplay`` (one subclass per class,
    same name, nothing else changed)."""
    cls = _REPLAYING_CLASSES.get(model_class)
    if cls is None:
        def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:
            return self.__dict__[REPLAY_ATTR](*args, **kwargs)

        cls = type(model_class.__name__, (model_class,), {"__call__": __call__, "__module__": model_class.__module__,
                                                          "__qualname__": model_class.__qualname__})
        _REPLAYING_CLASSES[model_class] = cls
    return cls


class DrafterGraphMixin:
    """Capture at boot, replay in steady state, for any V1 proposer, through the one ``DraftGraphRunner``.
    Subclasses say which step kinds get graphs (``_graph_kinds``), which key the forward about to run replays
    (``_classify``) and what metadata a capture uses (``_capture_metadata``).
    Put it first in the bases: ``class P(DrafterGraphMixin, SomeUpstreamProposer)``."""

    def __init__(self, vllm_config: Any, device: torch.device, runner: Any = None) -> None:
        super().__init__(vllm_config, device, runner)
        # Upstream does not keep the runner; we need its persistent query_start_loc, seq_lens and block table.
        self.target_runner = runner
        # The K our graphs are shaped for (upstream rewrites num_speculative_tokens on every propose call); the
        # one source of K and of the verify query length 1+K (``verify_len``) in every drafter mixin.
        self.graph_k = self.num_speculative_tokens
        self._pending: DraftKey | None = None  # the key announced by the last metadata build
        # Whether a ragged first pass may replay a uniform graph (``_ragged_first_pass_replays``, set at capture);
        # until then, never.
        self.ragged_first_pass = False
        self.graph_runner: DraftGraphRunner | None = None
        self.graphs: ForwardReplay | None = None
        self.capture_stats: dict[str, Any] = {}
        # Forwards whose metadata was built for a larger graph's batch, per step kind: the soak reports how many
        # padded replays its load made (the path the MTP-on-MLA crash took).
        self.padded_metadata_builds: collections.Counter[str] = collections.Counter()

    # -- hooks into upstream's propose -----------------------------------------------------------------------------
    def build_per_group_and_layer_attn_metadata(self, common_attn_metadata: CommonAttentionMetadata,
                                                draft_index: int = 0):
        key = self._classify(common_attn_metadata, draft_index) if self.graph_runner is not None else None
        if key is not None and key.num_reqs > common_attn_metadata.num_reqs:
            # A padded replay reads metadata built for the graph's batch, as vLLM's runner builds it for its own
            # padded FULL graphs (``num_reqs_padded``): backends that schedule per batch (FA3's AOT scheduler in
            # FLASH_ATTN_MLA, FlashMLA's tile plan) would otherwise hand a graph of P requests a plan for fewer.
            padded = self._pad_metadata(common_attn_metadata, key)
            if padded is None:
                key = None  # buffers not where the graph reads them: vLLM's path for this forward
            else:
                common_attn_metadata = padded  # a copy: upstream's own metadata keeps its real batch
                self.padded_metadata_builds[key.step] += 1
        self._pending = key
        return super().build_per_group_and_layer_attn_metadata(common_attn_metadata, draft_index)

    def _pad_metadata(self, cad: CommonAttentionMetadata, key: DraftKey) -> CommonAttentionMetadata | None:
        """``cad`` grown to ``key``'s batch over the persistent buffers the graph reads (padding rows written in
        place), or None where this step's metadata does not lie on them."""
        return None

    def _classify(self, cad: CommonAttentionMetadata, draft_index: int) -> DraftKey | None:
        """The captured key the forward about to run replays, or None (vLLM's path)."""
        raise NotImplementedError

    def _graph_kinds(self, plan: Any) -> tuple[str, ...]:
        """Step kinds to capture for ``plan`` (empty: none)."""
        raise NotImplementedError

    def _capture_metadata(self, key: DraftKey) -> CommonAttentionMetadata:
        """Metadata over the persistent buffers a replay of ``key`` will read."""
        raise NotImplementedError

    def _max_graph_reqs(self) -> int:
        return self.target_runner.max_num_reqs

    def captured_key(self, kind: str, num_reqs: int) -> DraftKey | None:
        """The captured key a batch of ``num_reqs`` requests of step ``kind`` pads to, or None."""
        runner = self.graph_runner
        if runner is None:
            return None
        dispatcher = runner.dispatcher
        if not dispatcher.has_step(kind) or not 1 <= num_reqs <= dispatcher.max_num_seqs:
            return None
        key = dispatcher.dispatch(kind, num_reqs)
        return key if key in runner.captured else None

    def pending_key(self, kwargs: dict[str, Any]) -> DraftKey | None:
        """The key for the forward about to run (consumes the announcement), or None."""
        key, self._pending = self._pending, None
        if key is None:
            return None
        tokens = kwargs["input_ids"].shape[0] if kwargs.get("input_ids") is not None else -1
        return key if key.num_tokens == tokens else None

    # -- the runner's DraftStepSource protocol ----------------------------------------------------------------------
    def step_call(self, key: DraftKey) -> StepCall:
        cad = self._capture_metadata(key)
        num_tokens = cad.num_actual_tokens
        chain = key.step in (CHAIN, CHAIN_FUSED)
        _, per_layer = super().build_per_group_and_layer_attn_metadata(cad, 1 if chain else 0)
        kwargs = self._model_kwargs(num_tokens)
        forward = self.graphs.eager_forward

        def run() -> Any:
            self._set_mtp_skip_topk(chain)
            if key.step == FIRST_FUSED:
                self._draft_prep_body(key.num_reqs)
            with set_forward_context(per_layer, self.vllm_config, num_tokens=num_tokens,
                                     slot_mapping=self._get_slot_mapping(num_tokens)):
                out = forward(**kwargs)
            if key.step == CHAIN_FUSED:
                return self._fused_chain_body(num_tokens, out)
            if key.step == FIRST_FUSED:
                return self._fused_first_body(key.num_reqs, out)
            return out

        return StepCall(run, input_pointers(kwargs))

    def _set_mtp_skip_topk(self, skip: bool) -> None:
        """Set an MTP draft's ``skip_topk`` as vLLM's eager propose does for the step about to run.

        With ``index_share_for_mtp_iteration`` (``_share_mtp_indices``) vLLM calls the draft's
        ``set_skip_topk(False)`` before the first pass (its sparse-attention indexer computes the top-k indices) and
        ``set_skip_topk(True)`` before the chain steps (they reuse them). The flag is a Python attribute the forward
        branches on (``if self.indexer and self.is_sparse and not self.skip_topk``), so a graph keeps the branch of
        its capture: each capture run sets it for its key's step. A replay needs nothing more, since upstream sets
        it around the very forward a replay stands in for (the fused kinds, which skip upstream's loop, decline
        shared indices: ``fused_chain_blockers``)."""
        inner = getattr(self.model, "model", None)
        if self._share_mtp_indices and hasattr(inner, "set_skip_topk"):
            inner.set_skip_topk(skip)

    @property
    def verify_len(self) -> int:
        """Tokens per request in a verify-shaped step: the sampled token and K drafts."""
        return 1 + self.graph_k

    def _query_len(self, kind: str) -> int:
        return 1 if kind in (CHAIN, CHAIN_FUSED) else self.verify_len

    def _graph_support(self) -> AttentionCGSupport:
        return min((group.get_metadata_builder().get_cudagraph_support(self.vllm_config, group.kv_cache_spec)
                    for group in self.draft_attn_groups), key=lambda support: support.value)

    def _ragged_first_pass_replays(self) -> bool:
        """Whether a first pass whose requests bring different query lengths may replay a graph captured for
        uniform (1+K)-token requests: only where every draft attention backend's graphs support mixed batches
        (``AttentionCGSupport.ALWAYS``: FLASH_ATTN on FA3 reads each request's range from the persistent
        ``query_start_loc`` at replay). UNIFORM_BATCH is vLLM's own statement that a backend's graph is exact only
        for uniform batches (vLLM's runner replays its FULL graphs there only for ``_is_uniform_decode`` batches):
        FlashMLA, for one, reshapes the decode queries by the request count
        (``reshape_query_for_spec_decode(q, num_decodes)``), so a ragged batch replayed there attends to the wrong
        tokens."""
        return bool(self.draft_attn_groups) and self._graph_support() is AttentionCGSupport.ALWAYS

    def _model_kwargs(self, num_tokens: int) -> dict[str, Any]:
        kwargs = {"input_ids": self.input_ids[:num_tokens], "positions": self._get_positions(num_tokens),
                  "inputs_embeds": None}
        if self.pass_hidden_states_to_model and not isinstance(self, DFlashProposer):
            kwargs["hidden_states"] = self.hidden_states[:num_tokens]
        return kwargs

    # -- capture at boot -------------------------------------------------------------------------------------------
    @torch.inference_mode()
    def capture_graphs(self) -> dict[str, Any]:
        """Capture every planned key; a key that fails to capture (on any rank) stays on vLLM's path."""
        if self.supports_mm_inputs:
            self.capture_stats = {"graphs": 0, "skipped": "multimodal drafter inputs"}
            return self.capture_stats
        if self.graphs is None:
            self.graphs = ForwardReplay(self.model, self)
        self._before_capture()
        self.ragged_first_pass = self._ragged_first_pass_replays()
        plan = drafter_plan(self.vllm_config)
        kinds = self._graph_kinds(plan)
        if not kinds:
            self.capture_stats = {"graphs": 0, "skipped": "no step kind can run in a FULL graph here"}
            return self.capture_stats
        dispatcher = DraftDispatcher.from_plan(plan, max_num_seqs=self._max_graph_reqs(), kinds=kinds)
        agree, rank = tensor_parallel_agreement()
        port = device_port(port_name_of(current_platform))
        self.graph_runner = DraftGraphRunner(
            port, dispatcher, self, live_graph_limit=draft_graph_budget(plan),
            pool=current_platform.get_global_graph_pool(),
            progress=first_rank_progress("Capturing drafter FULL graphs (portable_spec)"), agree=agree, rank=rank)
        report = self.graph_runner.capture()  # logs one line: graphs, seconds, memory, sizes, failures
        self.target_runner.seq_lens.zero_()
        self._set_mtp_skip_topk(False)  # as vLLM builds MTP layers: they never start skipping the indexer
        if report.captured:
            self.graphs.install()
        self.capture_stats = {**report.stats(), **self._capture_facts()}
        return self.capture_stats

    def _capture_facts(self) -> dict[str, Any]:
        """What a subclass adds to ``capture_stats`` (the e2e checks read it from each worker)."""
        return {}

    def _before_capture(self) -> None:
        """Buffers and decisions a subclass needs before ``_graph_kinds`` (none by default)."""

    def _fused_chain_body(self, num_tokens: int, out: Any) -> Any:
        raise NotImplementedError("only EAGLE chain steps are fused")

    def _fused_first_body(self, num_reqs: int, out: Any) -> Any:
        raise NotImplementedError("only the EAGLE first pass is fused")

    def _draft_prep_body(self, num_reqs: int) -> None:
        raise NotImplementedError("only the EAGLE first pass holds the runner's draft prep")

    def _refuse_below(self, need: AttentionCGSupport, what: str) -> bool:
        """True (with one warning naming the backend) when the draft attention cannot serve ``what`` in a graph."""
        support = self._graph_support()
        if support.value < need.value:
            backends = ", ".join(sorted({group.backend.get_name() for group in self.draft_attn_groups}))
            logger.warning("portable_spec: draft attention backend %s supports graphs only at %s, %s needs %s; it "
                           "stays on vLLM's PIECEWISE/eager path", backends, support.name, what, need.name)
            return True
        return False


class FullGraphEagleProposer(DraftPrepMixin, FusedChainMixin, DrafterGraphMixin, EagleProposer):
    """EAGLE/EAGLE3/MTP: the verify-shaped first pass and every chain step replay per-size FULL graphs; chain steps
    are fused (forward + sample + next inputs) where ``fused_chain`` says that is exact, and then the first pass
    holds the runner's draft prep too (``spec_decode.draft_prep``) where that is exact."""

    def _before_capture(self) -> None:
        max_reqs = self.target_runner.max_num_reqs
        self._init_fused_chain(max_reqs)
        self._init_draft_prep(max_reqs)
        self.draft_prep_off = self.prep_blockers(self.target_runner)
        if self.draft_prep_off:
            logger.info("portable_spec: the runner's draft prep stays on vLLM's path (%s)",
                        "; ".join(self.draft_prep_off))

    def _capture_facts(self) -> dict[str, Any]:
        # How the fused graphs sample (``draft_sample``): vLLM's own greedy sample or the d2t gather.
        return {"draft_sample": self.draft_sample if not self.fused_chain_off else None}

    def _classify(self, cad: CommonAttentionMetadata, draft_index: int) -> DraftKey | None:
        if draft_index >= 1 and same_start(cad.query_start_loc, self.arange):
            key = self.captured_key(CHAIN, cad.num_reqs)
            if key is not None and key.num_reqs > cad.num_reqs:
                # Rows [num_reqs, padded) are padding: they must never write the KV cache.
                self._slot_mapping_buffer[cad.num_reqs: key.num_reqs].fill_(PADDING_SLOT)
            return key
        return self.first_pass_key(FIRST, cad) if draft_index == 0 else None

    def _pad_metadata(self, cad: CommonAttentionMetadata, key: DraftKey) -> CommonAttentionMetadata | None:
        # Only chain steps pad (a first pass replays its exact batch), and ``_classify`` gave them only for the
        # ``arange`` query_start_loc. Padding rows are ordinary one-token requests of length 1 on vLLM's null block,
        # as at capture, whose slots never write the KV cache (``_classify``).
        return pad_chain_metadata(self, cad, key, self.target_runner.seq_lens) if key.step == CHAIN else None

    def first_pass_key(self, kind: str, cad: CommonAttentionMetadata) -> DraftKey | None:
        """The captured ``kind`` key (FIRST or FIRST_FUSED) a verify-shaped first pass replays, or None."""
        return self.first_pass_lookup(kind, cad)[0]

    def first_pass_lookup(self, kind: str, cad: CommonAttentionMetadata) -> tuple[DraftKey | None, str | None]:
        """``first_pass_key``'s key, or None with why (the reason the draft prep counts a decline under).

        The metadata must lie on the runner's persistent buffers, so the graph's view of them is valid for all
        num_reqs rows, and the batch must be exactly a captured size (``num_reqs`` is always the real request count:
        vLLM's runner hands the drafter ``CommonAttentionMetadata.unpadded``, so no row of it is padding)."""
        runner = self.target_runner
        if not (same_start(cad.query_start_loc, runner.query_start_loc.gpu)
                and same_start(cad.seq_lens, runner.seq_lens)):
            return None, "first-pass metadata off the runner's buffers"
        if not self._verify_shaped(cad):
            return None, ("ragged first pass (requests of fewer than 1+K tokens)"
                          if cad.max_query_len == self.verify_len
                          else "first pass not verify-shaped (prefill or longer queries)")
        key = self.captured_key(kind, cad.num_reqs)
        if key is None or key.num_reqs != cad.num_reqs:
            return None, "first-pass batch size not captured"
        return key, None

    def _verify_shaped(self, cad: CommonAttentionMetadata) -> bool:
        """Whether the first pass's queries fit a graph captured for ``num_reqs`` requests of 1+K tokens, decided
        from host integers only (no device read).

        Uniform (every request brings 1+K tokens) fits everywhere. Ragged (the longest query is 1+K but some bring
        fewer: prompt tails, prefix-cache hits, drafts trimmed near max_model_len or by structured output) fits only
        where the draft attention reads each request's range from ``query_start_loc`` at replay
        (``ragged_first_pass``), and only for whole (1+K)-token multiples of tokens."""
        query_len = self.verify_len
        if uniform_queries(cad, query_len):
            return True
        return (self.ragged_first_pass and cad.max_query_len == query_len
                and cad.num_actual_tokens < cad.num_reqs * query_len and cad.num_actual_tokens % query_len == 0)

    def pending_key(self, kwargs: dict[str, Any]) -> DraftKey | None:
        # A chain step's forward gets upstream's own padded size; our graph's (>= the batch) serves it, since
        # upstream reads only the first batch_size rows of the outputs.
        if self._pending is not None and self._pending.step == CHAIN:
            key, self._pending = self._pending, None
            return key
        return super().pending_key(kwargs)

    def _graph_kinds(self, plan: Any) -> tuple[str, ...]:
        if self._refuse_below(AttentionCGSupport.UNIFORM_SINGLE_TOKEN_DECODE, "every drafter graph"):
            return ()
        chain = plan.chain_step is not None and self.graph_k > 1
        fused = chain and not self.fused_chain_off
        prep = fused and not self.draft_prep_off  # the fused first pass (runner's prep inside) serves
        # Upstream's propose runs: always without fusion, for batches that sample from the draft, and with EPLB.
        upstream = not fused or self._enable_probabilistic_draft_probs or self.eplb_state is not None
        first = not self._refuse_below(AttentionCGSupport.UNIFORM_BATCH, "the (1+K)-token first pass")
        wanted = ((FIRST_FUSED, first and prep), (FIRST, first and (upstream or not prep)), (CHAIN_FUSED, fused),
                  (CHAIN, chain and upstream))
        return tuple(kind for kind, want in wanted if want)

    def _capture_metadata(self, key: DraftKey) -> CommonAttentionMetadata:
        runner, num_reqs = self.target_runner, key.num_reqs
        query_len = self._query_len(key.step)
        if key.step in (CHAIN, CHAIN_FUSED):
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

    def _classify(self, cad: CommonAttentionMetadata, draft_index: int) -> DraftKey | None:
        # Upstream builds the block's metadata uniform whatever the target's queries were (its
        # set_inputs_first_pass: 1+K query tokens per request; the ragged context goes to the eager K/V
        # projection), so the uniform test is what keeps a graph exact here on every backend.
        query_len = self.verify_len
        if draft_index != 0 or not uniform_queries(cad, query_len):
            return None
        key = self.captured_key(BLOCK, cad.num_reqs)
        if key is None:
            return None
        size = key.num_reqs
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
        return key

    def _pad_metadata(self, cad: CommonAttentionMetadata, key: DraftKey) -> CommonAttentionMetadata | None:
        # ``_classify`` already moved the metadata onto the block buffers with zero-length padding requests of
        # length 0 (vLLM's own padding rows); here the build sees the graph's batch and its null-block rows.
        num_reqs, padded = cad.num_reqs, key.num_reqs
        table = self.target_runner.input_batch.block_table[0].get_device_tensor(padded)
        if not (same_start(cad.block_table_tensor, table) and same_start(cad.slot_mapping, self._slot_mapping_buffer)):
            return None
        qsl_cpu = cad.query_start_loc_cpu[: num_reqs + 1]
        qsl_cpu = torch.cat([qsl_cpu, qsl_cpu[-1:].expand(padded - num_reqs)])
        meta = padded_metadata(cad, padded, key.num_tokens, query_start_loc=self._block_query_start_loc[: padded + 1],
                               query_start_loc_cpu=qsl_cpu, seq_lens=self._block_seq_lens[:padded],
                               block_table=table, slot_mapping=self._slot_mapping_buffer[: key.num_tokens])
        if meta is not None:  # as for EAGLE: padding rows only for a padded replay
            table[num_reqs:padded].fill_(NULL_BLOCK_ID)
        return meta

    def _graph_kinds(self, plan: Any) -> tuple[str, ...]:
        return () if self._refuse_below(AttentionCGSupport.UNIFORM_BATCH, "the DFlash block step") else (BLOCK,)

    def _max_graph_reqs(self) -> int:
        return min(self.target_runner.max_num_reqs, self.max_batch_size)

    def _capture_metadata(self, key: DraftKey) -> CommonAttentionMetadata:
        num_reqs = key.num_reqs
        query_len = self._query_len(key.step)
        self._block_query_start_loc[: num_reqs + 1].copy_(self.arange[: num_reqs + 1] * query_len)
        return capture_metadata(self, self._block_query_start_loc[: num_reqs + 1], self._block_seq_lens, num_reqs,
                                query_len, causal=self.dflash_causal)


def pad_chain_metadata(proposer: Any, cad: CommonAttentionMetadata, key: DraftKey,
                       seq_lens: torch.Tensor) -> CommonAttentionMetadata | None:
    """A chain step's metadata grown to ``key``'s batch over the persistent buffers its graph reads (``seq_lens``:
    the buffer the drafter's chain advances in place), or None where the step's metadata does not lie on them.
    Padding rows are ordinary one-token requests of length 1 on vLLM's null block, as at capture, whose slots never
    write the KV cache (the caller's ``_classify`` gave them the padding slot)."""
    num_reqs, padded = cad.num_reqs, key.num_reqs
    table = proposer.target_runner.input_batch.block_table[0].get_device_tensor(padded)
    if not (same_start(cad.seq_lens, seq_lens)
            and same_start(cad.block_table_tensor, table)
            and same_start(cad.slot_mapping, proposer._slot_mapping_buffer)):
        return None
    meta = padded_metadata(cad, padded, padded, query_start_loc=proposer.arange[: padded + 1],
                           query_start_loc_cpu=torch.arange(padded + 1, dtype=torch.int32),
                           seq_lens=seq_lens[:padded], block_table=table,
                           slot_mapping=proposer._slot_mapping_buffer[:padded])
    if meta is not None:  # the padding rows are written only for a step that replays the padded graph
        seq_lens[num_reqs:padded].fill_(1)
        table[num_reqs:padded].fill_(NULL_BLOCK_ID)
    return meta


def same_start(view: torch.Tensor, buffer: torch.Tensor) -> bool:
    """Whether ``view`` begins where ``buffer`` does (a leading slice of it, so rows past the view are the buffer's)."""
    return view.data_ptr() == buffer.data_ptr()


UNPADDED_FIELDS = ("dcp_local_seq_lens", "dcp_local_seq_lens_cpu", "encoder_seq_lens", "encoder_seq_lens_cpu",
                   "mm_req_doc_ranges", "rswa_prefix_lens", "logits_indices_padded")
"""Per-request metadata we do not know how to pad: a step that carries any of them is not padded (vLLM's path)."""


def padded_metadata(cad: CommonAttentionMetadata, num_reqs: int, num_tokens: int, *, query_start_loc: torch.Tensor,
                    query_start_loc_cpu: torch.Tensor, seq_lens: torch.Tensor, block_table: torch.Tensor,
                    slot_mapping: torch.Tensor) -> CommonAttentionMetadata | None:
    """A copy of ``cad`` for ``num_reqs`` requests and ``num_tokens`` tokens, the way vLLM's runner builds metadata
    for a padded FULL graph (``num_reqs_padded`` / ``num_tokens_padded``): host shadows of the real rows only are
    dropped (builders then read the device tensors), padding rows are not prefilling. None when ``cad`` carries
    per-request fields we do not pad (``UNPADDED_FIELDS``) or a per-request ``causal``."""
    if any(getattr(cad, name, None) is not None for name in UNPADDED_FIELDS) or isinstance(cad.causal, torch.Tensor):
        return None
    extra = num_reqs - cad.num_reqs

    def grown(rows: torch.Tensor | None, fill: Any) -> torch.Tensor | None:
        return None if rows is None else torch.cat([rows[: cad.num_reqs], rows.new_full((extra,), fill)])

    return cad.replace(query_start_loc=query_start_loc, query_start_loc_cpu=query_start_loc_cpu, seq_lens=seq_lens,
                       num_reqs=num_reqs, num_actual_tokens=num_tokens, block_table_tensor=block_table,
                       slot_mapping=slot_mapping, _seq_lens_cpu=None, _num_computed_tokens_cpu=None,
                       _num_computed_tokens_cache=None, _token_to_req_indices_cache=None,
                       is_prefilling=grown(cad.is_prefilling, False),
                       seq_lens_cpu_upper_bound=grown(cad.seq_lens_cpu_upper_bound, 0))


def uniform_queries(cad: CommonAttentionMetadata, query_len: int) -> bool:
    """Every request brings exactly ``query_len`` tokens, from host integers only: none brings more and together
    they bring requests x ``query_len`` (vLLM's own test of a uniform batch, ``GPUModelRunner._is_uniform_decode``)."""
    return cad.max_query_len == query_len and cad.num_actual_tokens == cad.num_reqs * query_len


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
