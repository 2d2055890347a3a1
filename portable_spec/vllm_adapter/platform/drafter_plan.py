"""The drafter's capture sizes, read from the plan our platform stored in ``additional_config`` or, on a built-in
platform (``PORTABLE_SPEC_DRAFT_GRAPH=full``), planned here from the same config."""

from __future__ import annotations

from typing import Any

from portable_spec.capture_sizes import CapturePlan, plan_capture_sizes
from portable_spec.vllm_adapter.platform.config_hook import ADDITIONAL_CONFIG_KEY


def drafter_plan(vllm_config: Any) -> CapturePlan:
    stored = (vllm_config.additional_config or {}).get(ADDITIONAL_CONFIG_KEY, {}).get("plan")
    if stored:
        return CapturePlan.from_dict(stored)
    spec, cc = vllm_config.speculative_config, vllm_config.compilation_config
    return plan_capture_sizes(spec.method, spec.num_speculative_tokens, vllm_config.scheduler_config.max_num_seqs,
                              max_capture_size=cc.max_cudagraph_capture_size,
                              user_sizes=list(cc.cudagraph_capture_sizes or []) or None)


def draft_graph_budget(plan: CapturePlan) -> int | None:
    """Live graphs the drafter may hold: the platform's limit minus what the target's planned sizes take (None: no
    limit). The planner already pruned sizes to fit; this keeps the runner from exceeding it at run time."""
    if plan.live_graph_limit is None:
        return None
    return max(0, plan.live_graph_limit - len(plan.target_sizes) * plan.graphs_per_target_size)
