"""The drafter's capture sizes: the plan our platform's config hook stored (``plan_state``), and the live-graph
budget the drafter's runner keeps to at run time."""

from __future__ import annotations

from typing import Any

from portable_spec.capture_sizes import CapturePlan
from portable_spec.vllm_adapter.platform import plan_state


def drafter_plan(vllm_config: Any) -> CapturePlan:
    """The stored plan. Our drafter runs only where the drafter policy found one (``policy.draft_graph_mode``: no
    plan, vLLM's drafter), so none here is a broken invariant, not a reason to re-plan with fewer inputs than the
    config hook had (the live-graph limit, TP, sequence parallelism, the graphs per size)."""
    state = plan_state.read(vllm_config)
    if state.plan is None:
        raise RuntimeError("portable_spec: our drafter asked for its capture plan, but none is stored "
                           f"({state.plan_error or 'no planner ran for this config'}); the drafter policy should "
                           "have left the drafter to vLLM")
    return state.plan


def draft_graph_budget(plan: CapturePlan) -> int | None:
    """Live graphs the drafter may hold: the platform's limit minus what the target's planned sizes take (None: no
    limit). The planner already pruned sizes to fit; this keeps the runner from exceeding it at run time."""
    if plan.live_graph_limit is None:
        return None
    return max(0, plan.live_graph_limit - plan.target_live_graphs)
