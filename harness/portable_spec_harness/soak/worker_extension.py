"""A vLLM worker extension every soak server loads (``--worker-extension-cls``): vLLM 0.26.0 adds this class to its
worker's bases (``v1/worker/worker_base.py``, ``WorkerWrapperBase.init_worker``), so ``POST /collective_rpc
{"method": "portable_spec_soak_facts"}`` (dev mode) runs the method on the worker and returns its dict.

Why: a ``vllm serve`` process keeps our drafter's counters (graph replays per step kind, input-pointer mismatches)
and the runner and drafter classes it built in its worker, where no log line reports them at run time. Reading them
before and after the load gives what the load did to our graphs. The method only reads; the class has one attribute
so that vLLM's check for name clashes with the worker class passes. Imports happen in the call (vLLM resolves the
class by name in every worker). The core reading (classes, counters, the scheduler and cache configuration) never
depends on the e2e harness's richer ``worker_facts``: if that one raises, its error is reported beside the core.
"""

from __future__ import annotations

import json
from typing import Any


def _qualname(obj: Any) -> str | None:
    return None if obj is None else f"{type(obj).__module__}.{type(obj).__qualname__}"


class SoakWorkerExtension:
    def portable_spec_soak_facts(self) -> dict[str, Any]:
        runner = self.model_runner  # type: ignore[attr-defined]
        drafter = getattr(runner, "drafter", None)
        graphs = getattr(drafter, "graph_runner", None)
        config = self.vllm_config  # type: ignore[attr-defined]
        scheduler, cache = config.scheduler_config, config.cache_config
        facts: dict[str, Any] = {
            "runner": _qualname(runner), "drafter": _qualname(drafter),
            "replays": dict(graphs.replays) if graphs is not None else None,
            "pointer_mismatches": graphs.pointer_mismatches if graphs is not None else None,
            "eager_keys": {str(k): why for k, why in graphs.eager_keys.items()} if graphs is not None else None,
            "capture_stats": getattr(drafter, "capture_stats", None),
            "prep_declines": dict(getattr(drafter, "prep_declines", None) or {}) if drafter is not None else None,
            "padded_metadata_builds": (dict(getattr(drafter, "padded_metadata_builds", None) or {})
                                       if drafter is not None else None),
            "use_v2_model_runner": getattr(config, "use_v2_model_runner", None),
            "tensor_parallel_size": getattr(getattr(config, "parallel_config", None), "tensor_parallel_size", None),
            "async_scheduling": scheduler.async_scheduling, "scheduling_policy": str(scheduler.policy),
            "max_num_seqs": scheduler.max_num_seqs, "max_num_batched_tokens": scheduler.max_num_batched_tokens,
            "long_prefill_token_threshold": scheduler.long_prefill_token_threshold,
            "enable_chunked_prefill": scheduler.enable_chunked_prefill,
            "enable_prefix_caching": cache.enable_prefix_caching, "num_gpu_blocks": cache.num_gpu_blocks,
            "block_size": cache.block_size,
            "speculative_method": getattr(config.speculative_config, "method", None)}
        try:
            from portable_spec_harness.vllm_door.offline import resolved_platform_qualname

            facts["platform"] = resolved_platform_qualname()
            from portable_spec_harness.e2e.child import worker_facts

            facts = {**worker_facts(self), **facts}
        except Exception as exc:  # diagnostics beyond the core: report, keep the core
            facts["facts_error"] = f"{type(exc).__name__}: {exc}"
        return json.loads(json.dumps(_jsonable(facts), default=str))


def _jsonable(value: Any) -> Any:
    """Dict keys as strings (the capture statistics key some dicts by draft key), tuples and sets as lists."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v) for v in value]
    return value
