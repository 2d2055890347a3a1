"""Apply the capture-size planner to a ``VllmConfig`` (called from our platforms' hooks).

vLLM keeps ONE capture-size list for target and drafter and has no drafter-mode field, so we write one list valid
for both (verify sizes, multiples of 1+K; block-aligned for DFlash) and keep the drafter's own sizes and modes in
``additional_config["portable_spec"]`` for the drafter to read (``plan_state``: the one reader and writer).

Two hooks, because vLLM runs ``VllmConfig.__post_init__`` again on every ``dataclasses.replace`` (workers do that):
- ``record_user_sizes`` runs from ``apply_config_platform_defaults``, *before* vLLM fills in its default list, and
  records whether the user chose the sizes (only the first time: later runs see our own list);
- ``apply_capture_plan`` runs from ``check_and_update_config``, after vLLM computed the sizes; it is idempotent and
  keeps the list sorted with ``sizes[-1] == max_cudagraph_capture_size``. Under Model Runner V2 it leaves vLLM's
  sizes to MRV2, pruned only to a live-graph budget (``mrv2_sizes``: why, in one log line).

Neither hook ever stops an engine vLLM would boot: with our drafter graphs off the plan does not require the
drafter's FULL sizes, and a plan the planner cannot make leaves vLLM's sizes, says why once, and keeps the drafter on
vLLM's path (``plan_error``).
"""

from __future__ import annotations

import logging
from typing import Any

from portable_spec.capture_sizes import METHODS
from portable_spec.vllm_adapter.patch import version_gate
from portable_spec.vllm_adapter.platform import plan_state
from portable_spec.vllm_adapter.platform.drafter_request import drafter_graphs_wanted
from portable_spec.vllm_adapter.platform.graph_pieces import draft_pieces, pieces
from portable_spec.vllm_adapter.platform.mrv2_sizes import leave_sizes_to_mrv2

logger = logging.getLogger("portable_spec.vllm_adapter")

VLLM_NAMES = (("pass --", "set --"), ("--max-capture-size", "compilation_config.max_cudagraph_capture_size"),
              ("--sizes", "compilation_config.cudagraph_capture_sizes"), ("--num-spec", "num_speculative_tokens"),
              ("--max-num-seqs", "max_num_seqs"), ("--tp", "tensor_parallel_size"),
              ("--sp", "sequence parallelism (compilation_config.pass_config.enable_sp)"))
"""The planner's options (it speaks the ``portable-spec sizes`` CLI) as the vLLM settings they stand for."""


def record_user_sizes(vllm_config: Any) -> None:
    """Remember the user's explicit capture sizes (None: vLLM's default ladder) before vLLM fills the list."""
    plan_state.record_user_sizes(vllm_config, vllm_config.compilation_config.cudagraph_capture_sizes)


def _sequence_parallel(vllm_config: Any) -> bool:
    pass_config = vllm_config.compilation_config.pass_config
    return bool(getattr(pass_config, "enable_sp", False) or getattr(pass_config, "enable_sequence_parallelism", False))


def target_graph_cost(vllm_config: Any) -> tuple[int, bool]:
    """What each target capture size costs in live graphs on vLLM's V1 runner, and whether FULL uniform-decode
    graphs come on top (the planner adds them for the sizes in [1+K, (1+K) * max_num_seqs]), as vLLM's
    ``CudagraphDispatcher`` keys them (``tests/test_graphs_per_target_size.py`` holds this to vLLM's own keys, and to
    the live graphs counted on the GPU):

    - a FULL mixed mode: one FULL graph per size, nothing on top;
    - a PIECEWISE mixed mode: the target's pieces per size, and the draft model's own pieces, because vLLM's V1
      drafter captures PIECEWISE graphs of its model at every capture size beside our FULL ones (unless the
      speculative config runs it eagerly, or vLLM does not compile the draft: ``graph_pieces``);
    - a FULL decode mode beside it (FULL_AND_PIECEWISE, FULL_DECODE_ONLY): the uniform-decode FULL graphs.

    The target's pieces are recorded on the first run: vLLM re-runs this hook on the separate draft model's
    replaced config, whose ``model_config`` is the draft's."""
    from vllm.config.compilation import CUDAGraphMode

    mode = vllm_config.compilation_config.cudagraph_mode
    mixed = mode.mixed_mode()
    per_size = 1 if mixed == CUDAGraphMode.FULL else 0
    if mixed == CUDAGraphMode.PIECEWISE and vllm_config.model_config is not None:
        parallel = vllm_config.parallel_config
        target = plan_state.record_target_pieces(vllm_config, pieces(vllm_config.model_config, parallel) or 1)
        per_size += target
        spec = vllm_config.speculative_config
        draft = getattr(spec, "draft_model_config", None)
        if draft is not None and not getattr(spec, "enforce_eager", False):
            per_size += draft_pieces(draft, parallel, fallback=target)  # none for a draft vLLM does not compile
    full_decode = mode.decode_mode() == CUDAGraphMode.FULL and mode.separate_routine()
    return (per_size, True) if full_decode else (max(per_size, 1), False)


def apply_capture_plan(vllm_config: Any, *, live_graph_limit: int | None, platform_name: str) -> dict | None:
    """Rewrite the capture sizes for speculative decoding; returns the stored plan (None when not applicable, or
    when no plan can be made: then ``plan_error`` says why)."""
    spec = vllm_config.speculative_config
    cc = vllm_config.compilation_config
    if spec is None or spec.method not in METHODS:
        return None
    if vllm_config.use_v2_model_runner:
        # Model Runner V2 captures its own graphs, our drafter does not run: its sizes stay vLLM's (mrv2_sizes).
        if cc.cudagraph_capture_sizes and cc.cudagraph_mode:
            leave_sizes_to_mrv2(vllm_config, live_graph_limit=live_graph_limit, platform_name=platform_name)
        return None
    if not cc.cudagraph_capture_sizes or cc.cudagraph_mode is None or not cc.cudagraph_mode.has_full_cudagraphs():
        logger.info("portable_spec: no FULL graphs configured (mode %s); capture sizes left as they are",
                    cc.cudagraph_mode)
        return None
    from portable_spec.capture_sizes import plan_capture_sizes

    user_sizes = plan_state.read(vllm_config).user_sizes
    before = list(cc.cudagraph_capture_sizes)
    per_size, full_decode = target_graph_cost(vllm_config)
    try:
        plan = plan_capture_sizes(
            spec.method, spec.num_speculative_tokens, vllm_config.scheduler_config.max_num_seqs,
            max_capture_size=cc.max_cudagraph_capture_size,
            tp=vllm_config.parallel_config.tensor_parallel_size, sp=_sequence_parallel(vllm_config),
            live_graph_limit=live_graph_limit, user_sizes=None if user_sizes is None else list(user_sizes),
            graphs_per_target_size=per_size, full_decode_graphs=full_decode, require_full_draft=drafter_graphs_wanted())
    except ValueError as exc:
        _keep_vllm_sizes(vllm_config, platform_name, spec, exc)
        return None
    after = list(plan.target_sizes)
    if user_sizes is None:  # the planner chose from vLLM's default ladder: say where that is not vLLM's
        version_gate.say_unsupported("planner_mirrors_vllm_sizes", logger)
    cc.cudagraph_capture_sizes = after
    cc.max_cudagraph_capture_size = after[-1]
    # Re-runs on a replaced config re-plan from the pruned list and warn no more: the state keeps what was said.
    plan_state.store_plan(vllm_config, plan, platform_name)
    if before != after:
        logger.info("portable_spec[%s]: %s K=%d capture sizes %s -> %s (drafter: %s)", platform_name, spec.method,
                    spec.num_speculative_tokens, before, after, _drafter_summary(plan))
    return plan.to_dict()


def _keep_vllm_sizes(vllm_config: Any, platform_name: str, spec: Any, error: ValueError) -> None:
    """No plan: vLLM's sizes stay, the reason is recorded for the drafter's policy (``plan_error``), and one warning
    says why and what would fix it (vLLM re-runs this hook on every replaced config: warn only the first time)."""
    reason = in_vllm_terms(str(error))
    if plan_state.store_plan_error(vllm_config, reason):
        logger.warning("portable_spec[%s]: %s K=%d: no capture plan (%s); vLLM's capture sizes are kept and the "
                       "drafter stays on vLLM's path", platform_name, spec.method, spec.num_speculative_tokens, reason)


def in_vllm_terms(message: str) -> str:
    """A planner message with its CLI options named as the vLLM settings they stand for."""
    for option, setting in VLLM_NAMES:
        message = message.replace(option, setting)
    return message


def _drafter_summary(plan: Any) -> str:
    steps = [plan.first_step] + ([plan.chain_step] if plan.chain_step is not None else [])
    return "; ".join(f"q={s.query_len} {s.mode} {list(s.sizes)}" for s in steps)
