"""Boot-time sampled warm-up under Model Runner V2 (our platforms only): after MRV2's own ``warmup_kernels`` (one
batch, one sampling variant), rounds of sampled requests (``mrv2_sampling_plan`` on vLLM 0.26,
``mrv2_sampling_plan_028`` on 0.28, ``mrv2_sampling_plan_033`` on 0.33, each module's ``PLAN``, a
``sampling_plan.Mrv2SamplingPlan``: ``installed_plan``) run through the worker's
``execute_model`` / ``sample_tokens``, so that no Triton kernel of MRV2's sampler or rejection sampler compiles at
the first sampled request, before vLLM activates its JIT monitor.

``PortableWorker.compile_or_warm_up_model`` swaps ``vllm.v1.worker.gpu_worker.warmup_kernels`` for
``with_sampled_rounds(original, folder)`` for that one call (``patch.overrides.overridden``); the swap calls vLLM's
warm-up first, unchanged, both in the Triton folder the worker started with (``triton_cache``). The scheduler outputs
are ``kernel_warmup.warmup_schedule``'s (vLLM's own ``SchedulerOutput``,
``NewRequestData``, ``CachedRequestData``, ``SamplingParams``), run by ``kernel_warmup.run_steps`` as for the V1
runner (a failing step: the same one line naming it and ``PORTABLE_SPEC_WARMUP=off``). Then, as our layer never
stops an engine vLLM would boot, the warm-up's requests are finished and the engine boots on with one warning; only
where that clean-up fails, or leaves a request behind, the step's error is raised.
Exact by construction: no request exists at boot, the KV blocks written are ids from 1 the scheduler has not handed
out; the KV connector is disabled for the steps (as MRV2's warm-up does), and the last step finishes every request,
so MRV2's request states (``req_states``: the runner removes a finished request from its sampler, block tables and
model state) are empty again; the warm-up checks that and fails loudly otherwise. Blockers: the V1 warm-up's
(``kernel_warmup.engine_blockers``: ``PORTABLE_SPEC_WARMUP=off``, pipeline/data parallel, KV/EC transfer, EPLB, ...),
no speculative decoding, KV-cache groups it does not allocate for, what the 0.28 and 0.33 plans do not model (adaptive
verification, which vLLM's warm-up switches off and calibrates after it; batch-sharded sampling; watermarking), and a
vLLM whose MRV2 this was not derived from (``version_gate``: ``mrv2_sampled_warmup``). One log line says what ran or
why not.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import torch
from vllm.v1.core.sched.output import SchedulerOutput

from portable_spec.vllm_adapter.patch import version_gate
from portable_spec.vllm_adapter.worker import mrv2_sampling_plan, mrv2_sampling_plan_028, mrv2_sampling_plan_033
from portable_spec.vllm_adapter.worker.kernel_warmup import (
    compile_summary, counted_triton_compiles, engine_blockers, failure_reason, max_step_tokens, run_steps,
    sampling_limits, unwarmable_groups, warmup_schedule,
)
from portable_spec.vllm_adapter.worker.sampling_plan import Mrv2SamplingPlan
from portable_spec.vllm_adapter.worker.triton_cache import serve_in_start_folder
from portable_spec.vllm_adapter.worker.warmup_plan import Limits

logger = logging.getLogger("portable_spec.vllm_adapter")

LOG_PREFIX = "portable_spec: Model Runner V2 sampled warm-up"
REQ_PREFIX = "_portable_spec_mrv2_warmup_"
FEATURE = "mrv2_sampled_warmup"


def mrv2_blockers(runner: Any) -> list[str]:
    """Why the sampled warm-up must not run on this MRV2 runner (empty: it runs)."""
    cfg = runner.vllm_config
    odd = unwarmable_groups(runner.kv_cache_config.kv_cache_groups)
    checks = engine_blockers(runner) + [
        (not cfg.use_v2_model_runner, "not Model Runner V2"),
        (cfg.speculative_config is None or not getattr(runner, "num_speculative_steps", 0),
         "no speculative decoding (its rounds verify drafts)"),
        (getattr(runner, "sampler", None) is None, "no sampler on this rank"),
        (bool(odd), f"KV-cache groups the warm-up does not allocate for ({', '.join(odd)})"),
        (getattr(runner, "adaptive_verification", None) is not None, "adaptive verification"),
        (getattr(runner, "batch_sharder", None) is not None, "batch-sharded sampling"),
        (getattr(getattr(runner, "rejection_sampler", None), "watermark_key", None) is not None, "watermarking"),
    ]
    return [reason for blocked, reason in checks if blocked]


def mrv2_limits(runner: Any) -> Limits:
    """What one step may hold on this MRV2 engine, read from vLLM's config and KV cache."""
    sched, kv, spec = runner.scheduler_config, runner.kv_cache_config, runner.vllm_config.speculative_config
    max_tokens = max_step_tokens(sched)
    return Limits(max_reqs=runner.max_num_reqs, max_tokens=max_tokens, max_len=runner.max_model_len,
                  k=runner.num_speculative_steps, dflash=getattr(spec, "method", "") == "dflash",
                  block_sizes=tuple(g.kv_cache_spec.block_size for g in kv.kv_cache_groups),
                  free_blocks=kv.num_blocks - 1)


PLANS = (mrv2_sampling_plan.PLAN, mrv2_sampling_plan_028.PLAN, mrv2_sampling_plan_033.PLAN)
"""Every version's plan of the sampled rounds (``Mrv2SamplingPlan``: ``plan_rounds``, ``request_sampling``)."""


def installed_plan() -> Mrv2SamplingPlan:
    """The plan derived from the installed vLLM's MRV2 sampler: the newest derived at or below it (the gate keeps the
    versions none was derived for out)."""
    return version_gate.pick({plan.vllm: plan for plan in PLANS})


def live_requests(runner: Any) -> int:
    """Requests MRV2's ``req_states`` holds (0 at boot, and again after the warm-up)."""
    return len(runner.req_states.req_id_to_index)


@torch.inference_mode()
def run_sampled_rounds(runner: Any, execute_model: Callable[[Any], Any],
                       sample_tokens: Callable[[Any], Any]) -> dict[str, Any]:
    """Plan and run the sampled rounds on ``runner`` through the worker's step functions; log one line; return the
    statistics (also ``runner.portable_spec_sampled_warmup``)."""
    if version_gate.say_unsupported(FEATURE, logger):
        stats: dict[str, Any] = {"skipped": [version_gate.why_not(FEATURE)]}
    elif blockers := mrv2_blockers(runner):
        logger.info("%s skipped (%s)", LOG_PREFIX, "; ".join(blockers))
        stats = {"skipped": blockers}
    else:
        stats = _run(runner, execute_model, sample_tokens)
    runner.portable_spec_sampled_warmup = stats
    return stats


def _run(runner: Any, execute_model: Callable[[Any], Any], sample_tokens: Callable[[Any], Any]) -> dict[str, Any]:
    limits, sampling, plan = mrv2_limits(runner), sampling_limits(runner), installed_plan()
    rounds, uncovered = plan.plan_rounds(limits, sampling)
    left = f"; {len(uncovered)} kernel variants left to the first requests: {sorted(map(str, uncovered))}" \
        if uncovered else ""
    if not rounds:
        logger.warning("%s skipped: %d KV-cache blocks are too few for any round%s", LOG_PREFIX,
                       limits.free_blocks + 1, left)
        return {"skipped": ["KV-cache blocks"], "uncovered": sorted(map(str, uncovered))}
    if live_requests(runner):  # never at boot; if ever, leave the engine as vLLM built it rather than stop it
        logger.warning("%s skipped: %d requests live before it", LOG_PREFIX, live_requests(runner))
        return {"skipped": ["requests live before the warm-up"]}
    outputs = warmup_schedule(rounds, limits, runner.model_config.get_vocab_size(), sampling.logprobs,
                              sampler=plan.request_sampling, req_prefix=REQ_PREFIX)
    started = time.perf_counter()
    runner.kv_connector.set_disabled(True)
    try:
        with counted_triton_compiles() as compiles:
            run_steps(outputs, execute_model, sample_tokens, LOG_PREFIX)
    except Exception as exc:
        return _recovered(runner, execute_model, exc)
    finally:
        runner.kv_connector.set_disabled(False)
    if (zeroer := getattr(runner, "kv_block_zeroer", None)) is not None:
        # The null block as vLLM 0.33's warm-up leaves it (v1/worker/gpu/warmup.py:475). vLLM 0.28's runner has the
        # zeroer too (its own warm-up does not zero block 0); zeroed there as well, nothing reads the null block's data.
        zeroer.zero_block_ids([0])
    seconds = time.perf_counter() - started
    if live_requests(runner):
        raise RuntimeError(f"{LOG_PREFIX}: {live_requests(runner)} warm-up requests left in the runner")
    stats = {"steps": len(outputs), "rounds": len(rounds), "profiles": [r.profile for r in rounds],
             "num_reqs": sorted({len(r.prompts) for r in rounds}), "k": limits.k, "seconds": round(seconds, 3),
             "triton_compiles": dict(compiles), "uncovered": sorted(map(str, uncovered))}
    logger.log(logging.WARNING if uncovered else logging.INFO,
               "%s: %d steps (%d rounds: %s; batches of %s requests, K=%d) in %.2f s; %d Triton compiles (%s)%s",
               LOG_PREFIX, len(outputs), len(rounds), ",".join(stats["profiles"]),
               ",".join(map(str, stats["num_reqs"])), limits.k, seconds, sum(compiles.values()),
               compile_summary(compiles), left)
    return stats


def _recovered(runner: Any, execute_model: Callable[[Any], Any], exc: Exception) -> dict[str, Any]:
    """After a failed step (``run_steps`` logged which): finish every warm-up request still in the runner, as vLLM's
    own warm-up ends (a step whose only content is ``finished_req_ids``), and boot on as vLLM would have, with one
    warning; the engine's first sampled requests may then compile. Raises the step's error where that cannot be made
    clean (the clean-up fails, or requests are left): our warm-up never leaves its requests in a serving engine."""
    left = [req_id for req_id in runner.req_states.req_id_to_index if str(req_id).startswith(REQ_PREFIX)]
    try:
        cleanup = SchedulerOutput.make_empty()
        cleanup.finished_req_ids = set(left)
        execute_model(cleanup)
        if torch.accelerator.is_available():
            torch.accelerator.synchronize()
    except Exception as cleanup_error:
        raise exc from cleanup_error
    if live_requests(runner):
        raise exc
    reason = failure_reason(exc)
    logger.warning("%s stopped (%s); its %d requests finished, the engine boots as vLLM would and its first sampled "
                   "requests may compile sampling kernels", LOG_PREFIX, reason, len(left))
    return {"skipped": [f"error: {reason}"], "finished_after_error": len(left)}


def with_sampled_rounds(original: Callable[..., Any], triton_cache_at_start: str | None) -> Callable[..., Any]:
    """vLLM's ``warmup_kernels`` followed by our sampled rounds (what ``PortableWorker`` swaps in for one call), both
    building their Triton kernels in ``triton_cache_at_start``, the folder the worker had before the model compiled,
    and the engine serving in it after them (``worker/triton_cache.py``: a restart that loads the compiled model finds
    the kernels on disk, and a kernel first launched while serving finds the launcher the warm-ups built)."""

    def warmup_kernels(model_runner: Any, worker_execute_model: Callable[[Any], Any],
                       worker_sample_tokens: Callable[[Any], Any]) -> Any:
        serve_in_start_folder(triton_cache_at_start)
        result = original(model_runner, worker_execute_model, worker_sample_tokens)
        run_sampled_rounds(model_runner, worker_execute_model, worker_sample_tokens)
        return result

    return warmup_kernels
