"""Capture-size planner for speculative decoding under FULL graphs (pure Python; never imports vLLM).

- ``vllm_rules``: vLLM 0.26.0's own size rules (default ladder, default max, spec-decode rounding, SP filter).
- ``planner``: ``plan_capture_sizes`` — target verify sizes plus drafter first/chain step sizes.
- ``budget``: pruning to a platform's live-graph limit.
- ``plan``: the ``CapturePlan``/``StepPlan`` result types (JSON round-trip for ``additional_config``).
"""

from portable_spec.capture_sizes.plan import GRAPH_MODES, CapturePlan, StepPlan
from portable_spec.capture_sizes.planner import CHAIN_METHODS, METHODS, plan_capture_sizes
from portable_spec.capture_sizes.vllm_rules import (
    vllm_default_ladder,
    vllm_default_max_capture_size,
    vllm_spec_decode_sizes,
)

__all__ = ["CHAIN_METHODS", "GRAPH_MODES", "METHODS", "CapturePlan", "StepPlan", "plan_capture_sizes",
           "vllm_default_ladder", "vllm_default_max_capture_size", "vllm_spec_decode_sizes"]
