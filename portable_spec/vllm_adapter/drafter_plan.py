"""The drafter's capture sizes, read from the plan our platform stored in ``additional_config`` or, on a built-in
platform (``PORTABLE_SPEC_DRAFT_GRAPH=full``), planned here from the same config."""

from __future__ import annotations

from typing import Any

from portable_spec.capture_sizes import CapturePlan, plan_capture_sizes
from portable_spec.vllm_adapter.config_hook import ADDITIONAL_CONFIG_KEY


def drafter_plan(vllm_config: Any) -> CapturePlan:
    stored = (vllm_config.additional_config or {}).get(ADDITIONAL_CONFIG_KEY, {}).get("plan")
    if stored:
        return CapturePlan.from_dict(stored)
    spec, cc = vllm_config.speculative_config, vllm_config.compilation_config
    return plan_capture_sizes(spec.method, spec.num_speculative_tokens, vllm_config.scheduler_config.max_num_seqs,
                              max_capture_size=cc.max_cudagraph_capture_size,
                              user_sizes=list(cc.cudagraph_capture_sizes or []) or None)


def chain_step_sizes(vllm_config: Any) -> list[int]:
    """Batch sizes (query length 1) to capture chain-step graphs for; empty when the plan has no chain step."""
    plan = drafter_plan(vllm_config)
    return list(plan.chain_step.sizes) if plan.chain_step is not None else []
