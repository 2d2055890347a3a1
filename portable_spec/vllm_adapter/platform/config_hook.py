"""Apply the capture-size planner to a ``VllmConfig`` (called from our platforms' hooks).

vLLM keeps ONE capture-size list for target and drafter and has no drafter-mode field, so we write one list valid
for both (verify sizes, multiples of 1+K; block-aligned for DFlash) and keep the drafter's own sizes and modes in
``additional_config["portable_spec"]`` for the drafter to read.

Two hooks, because vLLM runs ``VllmConfig.__post_init__`` again on every ``dataclasses.replace`` (workers do that):
- ``record_user_sizes`` runs from ``apply_config_platform_defaults``, *before* vLLM fills in its default list, and
  records whether the user chose the sizes (only the first time: later runs see our own list);
- ``apply_capture_plan`` runs from ``check_and_update_config``, after vLLM computed the sizes; it is idempotent and
  keeps the list sorted with ``sizes[-1] == max_cudagraph_capture_size``.
"""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger("portable_spec.vllm_adapter")

ADDITIONAL_CONFIG_KEY = "portable_spec"
PLANNED_METHODS = ("eagle", "eagle3", "mtp", "dflash")


def _state(vllm_config: Any) -> dict[str, Any]:
    if vllm_config.additional_config is None:
        vllm_config.additional_config = {}
    return vllm_config.additional_config.setdefault(ADDITIONAL_CONFIG_KEY, {})


def record_user_sizes(vllm_config: Any) -> None:
    """Remember the user's explicit capture sizes (None: vLLM's default ladder) before vLLM fills the list."""
    state = _state(vllm_config)
    if "user_sizes" not in state:
        sizes = vllm_config.compilation_config.cudagraph_capture_sizes
        state["user_sizes"] = sorted(set(sizes)) if sizes else None


def _sequence_parallel(vllm_config: Any) -> bool:
    pass_config = vllm_config.compilation_config.pass_config
    return bool(getattr(pass_config, "enable_sp", False) or getattr(pass_config, "enable_sequence_parallelism", False))


def graphs_per_target_size(vllm_config: Any) -> int:
    """Live graph executables one target capture size costs: one FULL graph and/or one per piecewise piece."""
    mode = vllm_config.compilation_config.cudagraph_mode
    graphs = 1 if mode.has_full_cudagraphs() else 0
    if mode.has_piecewise_cudagraphs() and vllm_config.model_config is not None:
        graphs += vllm_config.model_config.get_num_layers(vllm_config.parallel_config) + 1
    return max(graphs, 1)


def apply_capture_plan(vllm_config: Any, *, live_graph_limit: int | None, platform_name: str) -> dict | None:
    """Rewrite the capture sizes for speculative decoding; returns the stored plan (None when not applicable)."""
    spec = vllm_config.speculative_config
    cc = vllm_config.compilation_config
    if spec is None or spec.method not in PLANNED_METHODS:
        return None
    if not cc.cudagraph_capture_sizes or cc.cudagraph_mode is None or not cc.cudagraph_mode.has_full_cudagraphs():
        logger.info("portable_spec: no FULL graphs configured (mode %s); capture sizes left as they are",
                    cc.cudagraph_mode)
        return None
    from portable_spec.capture_sizes import plan_capture_sizes

    state = _state(vllm_config)
    before = list(cc.cudagraph_capture_sizes)
    plan = plan_capture_sizes(
        spec.method, spec.num_speculative_tokens, vllm_config.scheduler_config.max_num_seqs,
        max_capture_size=cc.max_cudagraph_capture_size,
        tp=vllm_config.parallel_config.tensor_parallel_size, sp=_sequence_parallel(vllm_config),
        live_graph_limit=live_graph_limit, user_sizes=state.get("user_sizes"),
        graphs_per_target_size=graphs_per_target_size(vllm_config))
    after = list(plan.target_sizes)
    cc.cudagraph_capture_sizes = after
    cc.max_cudagraph_capture_size = after[-1]
    state["plan"] = plan.to_dict()
    state["platform"] = platform_name
    # Re-runs on a replaced config re-plan from the pruned list and warn no more: keep what the first run said.
    state["warnings"] = list(dict.fromkeys([*state.get("warnings", []), *plan.warnings]))
    if before != after:
        logger.info("portable_spec[%s]: %s K=%d capture sizes %s -> %s (drafter: %s)", platform_name, spec.method,
                    spec.num_speculative_tokens, before, after, _drafter_summary(plan))
    return state["plan"]


def _drafter_summary(plan: Any) -> str:
    steps = [plan.first_step] + ([plan.chain_step] if plan.chain_step is not None else [])
    return "; ".join(f"q={s.query_len} {s.mode} {list(s.sizes)}" for s in steps)
