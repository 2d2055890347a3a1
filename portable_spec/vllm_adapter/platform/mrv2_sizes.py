"""Capture sizes under Model Runner V2: left to MRV2, pruned only to a live-graph budget.

The decision, from what MRV2's speculator needs. Our planner's list (verify sizes rounded to multiples of 1+K,
block-aligned for DFlash) is made for our V1 drafter. MRV2 rounds each graph manager's sizes itself (vLLM PR #45953
exempts it from vLLM's spec-decode rounding): its verify pass and its draft's first pass to multiples of 1+K, while
its EAGLE-style draft decode steps run one token per request and need the small sizes (1, 2, ...) that multiples of
1+K drop (with the planner's list a one-request draft step would be padded to 1+K rows). So under MRV2 the hook
keeps vLLM's list and says so in one line per engine (re-runs on replaced configs stay silent).

With a live-graph limit (MUSA: torchada's cap) it counts what MRV2 captures from that list, its target and
speculator graphs together (``capture_sizes.mrv2``; ``tests/test_mrv2_sizes.py`` holds the count to the installed
vLLM's own managers on 0.26.0, 0.28.0 and 0.33.0), and drops the largest sizes until they fit, with a warning. Where
the mirror does not hold one line says so and no size is dropped: a vLLM outside the gate (``version_gate``:
``mrv2_graph_budget``), or a configuration whose graphs the mirror does not model (``unmodelled``).
"""

from __future__ import annotations

import logging
from typing import Any

from portable_spec.capture_sizes.mrv2 import mrv2_budget
from portable_spec.vllm_adapter.patch import version_gate
from portable_spec.vllm_adapter.platform import plan_state
from portable_spec.vllm_adapter.platform.graph_pieces import draft_pieces, pieces
from portable_spec.logs import share_vllm_log_handlers

logger = logging.getLogger("portable_spec.vllm_adapter")

LEFT_TO_MRV2 = "capture sizes left to Model Runner V2"
"""The one line's marker (what the e2e checks count in an engine log)."""


def unmodelled(vllm_config: Any) -> list[str]:
    """What in ``vllm_config`` makes MRV2 capture graphs the count does not model (each one short phrase): more
    decode graphs per size (dynamic speculative decoding, LoRA cases, micro-batch twins), variable-length decode
    graphs, or graphs captured another way (breakable graphs, data or pipeline parallel ranks)."""
    spec, parallel = vllm_config.speculative_config, vllm_config.parallel_config
    reasons = []
    uses_dynamic = getattr(spec, "uses_dynamic_speculative_decoding", None)
    if callable(uses_dynamic) and uses_dynamic():
        reasons.append("dynamic speculative decoding (a decode graph per draft length)")
    if getattr(spec, "enable_adaptive_verification", False):
        reasons.append("adaptive verification (variable-length decode graphs)")
    if getattr(vllm_config, "lora_config", None) is not None:
        reasons.append("LoRA (graphs per active-LoRA case)")
    if getattr(parallel, "enable_dbo", False) or int(getattr(parallel, "ubatch_size", 1) or 1) > 1:
        reasons.append("micro-batching (a twin per FULL graph)")
    if getattr(vllm_config.cache_config, "use_kda_recoverssm", False):
        reasons.append("recoverSSM (mixed graphs limited to decode sizes)")
    if int(getattr(parallel, "data_parallel_size", 1) or 1) > 1 or \
            int(getattr(parallel, "pipeline_parallel_size", 1) or 1) > 1:
        reasons.append("data or pipeline parallel ranks")
    try:
        from vllm.compilation.breakable_cudagraph import is_breakable_cudagraph_enabled
    except ImportError:  # a vLLM without breakable graphs
        is_breakable_cudagraph_enabled = bool
    if is_breakable_cudagraph_enabled():
        reasons.append("breakable CUDA graphs (VLLM_USE_BREAKABLE_CUDAGRAPH)")
    return reasons


def leave_sizes_to_mrv2(vllm_config: Any, *, live_graph_limit: int | None, platform_name: str) -> dict[str, Any]:
    """Keep vLLM's capture sizes for MRV2 (pruned to ``live_graph_limit`` when one applies); returns what was
    stored (``plan_state``'s ``mrv2``). Logs the decision once per engine and each pruning warning once."""
    spec, cc = vllm_config.speculative_config, vllm_config.compilation_config
    earlier = plan_state.read(vllm_config).mrv2
    if earlier is not None and vllm_config.model_config is getattr(spec, "draft_model_config", None):
        # The draft model's own copy of the engine's config (vLLM 0.33.0's StandaloneARSpeculator.load_draft_model
        # replaces model_config with the draft's and shares additional_config): the engine's count was made on the
        # target's config, and a recount here would count the target's pieces by the draft's layers.
        return earlier
    first = earlier is None
    earlier = earlier or {}
    outside = unmodelled(vllm_config)
    counted = version_gate.has("mrv2_graph_budget") and not outside  # the count mirrors this vLLM's managers
    limit = live_graph_limit if counted else None
    if live_graph_limit is not None and not version_gate.has("mrv2_graph_budget"):
        version_gate.say_unsupported("mrv2_graph_budget", logger)
    elif live_graph_limit is not None and outside and first:
        logger.warning("portable_spec[%s]: Model Runner V2's live graphs not counted against the live-graph limit %d: "
                       "the count does not model %s; no capture size dropped (turn it off, or lower "
                       "max_cudagraph_capture_size to fit the limit)", platform_name, live_graph_limit,
                       "; ".join(outside))
    target_pieces = pieces(vllm_config.model_config, vllm_config.parallel_config) or 1
    draft_config = getattr(spec, "draft_model_config", None)
    draft = (draft_pieces(draft_config, vllm_config.parallel_config, fallback=target_pieces)
             if draft_config is not None else target_pieces)
    budget = mrv2_budget(list(cc.cudagraph_capture_sizes), method=spec.method, num_spec=spec.num_speculative_tokens,
                         max_num_seqs=vllm_config.scheduler_config.max_num_seqs, mode=cc.cudagraph_mode.name,
                         live_graph_limit=limit, target_pieces=target_pieces, draft_pieces=draft)
    if budget.dropped:
        cc.cudagraph_capture_sizes = list(budget.sizes)
        cc.max_cudagraph_capture_size = budget.sizes[-1]
    said = earlier.get("warnings", [])
    new = [w for w in budget.warnings if w not in said]
    # A re-run on a replaced config starts from the pruned list: keep what the first run dropped and said.
    stored = {**budget.to_dict(), "dropped": sorted({*earlier.get("dropped", []), *budget.dropped}),
              "warnings": [*said, *new], "platform": platform_name, "counted": counted}
    if not counted:  # a count mirrored from another vLLM's managers would be a guess: record none
        stored.update(graphs={}, live_graphs=None)
    plan_state.store_mrv2(vllm_config, stored, new)
    share_vllm_log_handlers()  # config time: our lines go where vLLM's go, as the worker's do later
    if first:
        q = 1 + spec.num_speculative_tokens
        graphs = (f"{budget.live_graphs} live graphs: " + ", ".join(f"{k} {v}" for k, v in budget.graphs.items())
                  if counted else "live graphs not counted on this vLLM")
        logger.info("portable_spec[%s]: %s K=%d: %s %s (%s; limit %s). Why: it rounds them per graph kind itself, "
                    "its verify pass and first draft pass to multiples of 1+K=%d, while its draft decode steps run 1 "
                    "token per request and need the sizes below %d that our V1 plan would drop", platform_name,
                    spec.method, spec.num_speculative_tokens, LEFT_TO_MRV2, list(budget.sizes), graphs, limit, q, q)
    for warning in new:
        logger.warning("portable_spec[%s]: %s", platform_name, warning)
    return stored
