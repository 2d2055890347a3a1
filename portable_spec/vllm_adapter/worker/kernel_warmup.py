"""Boot-time kernel warm-up for our V1 runner: real ``execute_model`` + ``sample_tokens`` steps on dummy scheduler
outputs, so the drafter/verify-path Triton kernels compile at boot, before vLLM activates its JIT monitor (end of
``Worker.compile_or_warm_up_model``), not on the first requests. Model Runner V2 does the same in
``v1/worker/gpu/warmup.py::warmup_kernels``; vLLM's V1 runner has nothing like it.

``PortableV1ModelRunner.capture_model`` calls ``warm_up_kernels`` after the drafter captured its graphs. The steps
(``warmup_plan``: which batch sizes and prompt lengths reach every specialization serving can reach) are built from
vLLM's own ``SchedulerOutput``/``NewRequestData``/``CachedRequestData``, the way its scheduler builds them: requests
prefill, verify K drafts (``scheduled_spec_decode_tokens``) and are finished (``finished_req_ids``); greedy ones
first, then sampled ones (``sampling_plan``: top-k, top-p, seeded and not, logprobs, mixed with greedy), each with
vLLM's own ``SamplingParams``.
Exact by construction: no request exists at boot, so the KV blocks written (ids from 1; 0 is the null block) are ones
the scheduler has not handed out, and its prefix cache knows none of them. Afterwards the runner's step bookkeeping
(the last drafts, sampled-token handles, the drafter's per-step state and replay counters, ``seq_lens``) is put back
as boot left it. Every tensor-parallel rank plans and runs the same steps. Pipeline/data parallel, KV/EC transfer,
EPLB, first-forward KV scales and non-attention KV groups skip the warm-up (one log line says why);
``PORTABLE_SPEC_WARMUP=off`` turns it off. Its log line names the slowest steps (requests, tokens, sampled or greedy,
Triton compiles, seconds), so that where a boot's warm-up time goes reads from the server log alone.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterator
from math import ceil
from typing import Any

import torch
from vllm.sampling_params import SamplingParams, SamplingType
from vllm.v1.core.sched.output import CachedRequestData, NewRequestData, SchedulerOutput
from vllm.v1.kv_cache_interface import (
    ChunkedLocalAttentionSpec, FullAttentionSpec, HiddenStateCacheSpec, SinkFullAttentionSpec, SlidingWindowSpec,
    UniformTypeKVCacheSpecs,
)

from portable_spec.envs import WARMUP_ENV, warmup_enabled
from portable_spec.kernels import registry
from portable_spec.vllm_adapter.patch.overrides import overridden
from portable_spec.vllm_adapter.spec_decode.proposer import DrafterGraphMixin, FullGraphDFlashProposer
from portable_spec.vllm_adapter.worker.batch_change_warmup import warm_batch_change
from portable_spec.vllm_adapter.worker.sampling_plan import Sampling, SamplingLimits, plan_v1_warmup, request_sampling
from portable_spec.vllm_adapter.worker.triton_builds import builds_summary, counted_triton_builds, keys_line
from portable_spec.vllm_adapter.worker.warmup_plan import Limits, Round, batch_agnostic_kernels

logger = logging.getLogger("portable_spec.vllm_adapter")

LOG_PREFIX = "portable_spec: kernel warm-up"
REQ_PREFIX = "_portable_spec_warmup_"
WARMABLE_SPECS = (FullAttentionSpec, SlidingWindowSpec, ChunkedLocalAttentionSpec)
UNWARMABLE_SPECS = (SinkFullAttentionSpec, HiddenStateCacheSpec)
# What one step leaves behind that a fresh boot does not have (vLLM 0.26.0; tests/test_vllm_hook_points.py checks
# these are all the attributes the step path rebinds).
RUNNER_STEP_STATE = ("execute_model_state", "kv_connector_output", "_draft_token_ids", "_draft_token_req_ids",
                     "_draft_probs", "_draft_prob_req_ids", "valid_sampled_token_count_gpu", "prev_num_spec_tokens")
INPUT_BATCH_STEP_STATE = ("prev_sampled_token_ids", "prev_req_id_to_index", "sampled_token_ids_cpu",
                          "async_copy_ready_event")
DRAFTER_STEP_STATE = ("num_speculative_tokens", "_last_draft_probs", "_dflash_num_context", "_dflash_hidden_states",
                      "_pending", "_first_pass_cad", "_first_pass_token_indices")
_ABSENT = object()


def any_warmup_blockers(runner: Any) -> list[tuple[bool, str]]:
    """What keeps every boot-time warm-up of ours off an engine, the structured-output one included: (blocked?, why)."""
    return [
        (not warmup_enabled(), f"{WARMUP_ENV}=off"),
        (runner.vllm_config.parallel_config.pipeline_parallel_size > 1,
         "pipeline parallel (the worker coordinates the stages; only the last has logits)"),
        (bool(runner.is_pooling_model), "pooling model"),
    ]


def engine_blockers(runner: Any) -> list[tuple[bool, str]]:
    """What keeps a warm-up that runs engine steps off an engine, V1 runner or Model Runner V2: (blocked?, why)."""
    cfg = runner.vllm_config
    parallel = cfg.parallel_config
    return any_warmup_blockers(runner) + [
        (parallel.data_parallel_size > 1, "data parallel (engines coordinate every batch)"),
        (cfg.kv_transfer_config is not None or cfg.ec_transfer_config is not None,
         "a KV/EC transfer connector would see the warm-up's requests"),
        (parallel.enable_eplb or getattr(runner, "eplb_state", None) is not None,
         "EPLB would count the warm-up's expert load"),
        (bool(getattr(runner, "calculate_kv_scales", False)), "KV-cache scales come from the first forward's data"),
    ]


def unwarmable_groups(groups: Any) -> list[str]:
    """The KV-cache spec types of ``groups`` the warm-up does not allocate blocks for."""
    return sorted({type(spec).__name__ for g in groups for spec in layer_specs(g.kv_cache_spec)
                   if not isinstance(spec, WARMABLE_SPECS) or isinstance(spec, UNWARMABLE_SPECS)})


def warmup_blockers(runner: Any) -> list[str]:
    """Why the warm-up must not run on this runner (empty: it runs)."""
    cfg = runner.vllm_config
    spec = cfg.speculative_config
    odd = unwarmable_groups(runner.kv_cache_config.kv_cache_groups)
    checks = engine_blockers(runner) + [
        (cfg.use_v2_model_runner, "Model Runner V2 warms its own kernels"),
        (not isinstance(getattr(runner, "drafter", None), DrafterGraphMixin), "our FULL drafter is off"),
        (spec is not None and bool(getattr(spec, "num_speculative_tokens_per_batch_size", None)),
         "dynamic speculative token counts"),
        (bool(odd), f"KV-cache groups the warm-up does not allocate for ({', '.join(odd)})"),
    ]
    return [reason for blocked, reason in checks if blocked]


def layer_specs(spec: Any) -> list[Any]:
    """The per-layer specs a KV-cache group holds: vLLM merges attention layers of one type but different shapes
    (a separate draft model's head size next to its target's) into one ``UniformTypeKVCacheSpecs`` group, whose
    layers share the group's block size and block table, so the warm-up allocates for it as for one spec."""
    return list(spec.kv_cache_specs.values()) if isinstance(spec, UniformTypeKVCacheSpecs) else [spec]


def failure_reason(exc: BaseException) -> str:
    """A failed warm-up's reason in the one line its warning and its statistics carry: the exception's type and first
    line, at most 300 characters."""
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:300]


def max_step_tokens(sched: Any) -> int:
    """The most tokens one step schedules: the batched-token budget, or the scheduled-token cap where lower."""
    return min(sched.max_num_batched_tokens, getattr(sched, "max_num_scheduled_tokens", None) or 1 << 62)


def warmup_limits(runner: Any) -> Limits:
    """What one step may hold on this engine, read from vLLM's config and KV cache."""
    sched, drafter, kv = runner.vllm_config.scheduler_config, runner.drafter, runner.kv_cache_config
    max_tokens = max_step_tokens(sched)
    max_len = min(runner.max_model_len, getattr(runner, "effective_drafter_max_model_len", runner.max_model_len))
    dflash = isinstance(drafter, FullGraphDFlashProposer)
    # vLLM's expand kernel runs where the drafter adds input slots per request (the draft model, parallel drafting).
    expand = 0 if dflash or not getattr(drafter, "needs_extra_input_slots", False) else \
        int(drafter.net_num_new_slots_per_request)
    return Limits(max_reqs=runner.max_num_reqs, max_tokens=max_tokens, max_len=max_len, k=runner.num_spec_tokens,
                  dflash=dflash, expand_slots=expand,
                  parallel_drafting=bool(getattr(drafter, "parallel_drafting", False)),
                  block_sizes=tuple(g.kv_cache_spec.block_size for g in kv.kv_cache_groups),
                  free_blocks=kv.num_blocks - 1,
                  batch_agnostic=batch_agnostic_kernels(registry.bound().values()))


class _BlockIds:
    """A round's block ids: from 1 (0 is the null block), one range over every KV-cache group (groups share the
    block pool), as many per request as the scheduler would give it for its length plus its lookahead slots."""

    def __init__(self, block_sizes: tuple[int, ...]) -> None:
        self.block_sizes = block_sizes
        self.next = 1

    def grow(self, tokens_before: int, tokens_after: int) -> tuple[list[int], ...]:
        out = []
        for size in self.block_sizes:
            count = ceil(tokens_after / size) - ceil(tokens_before / size)
            out.append(list(range(self.next, self.next + count)))
            self.next += count
        return tuple(out)


def sampling_limits(runner: Any) -> SamplingLimits:
    """What this engine's config decides about sampling: draft probabilities, logprobs accepted (how many, on which
    logits), block verification."""
    spec, model = runner.vllm_config.speculative_config, runner.model_config
    rejection = getattr(spec, "rejection_sample_method", "standard")
    probabilistic = rejection == "standard" and getattr(spec, "draft_sample_method", "greedy") == "probabilistic"
    return SamplingLimits(probabilistic_drafts=probabilistic, logprobs=model.max_logprobs != 0,
                          max_logprobs=model.max_logprobs,
                          logprobs_mode=str(getattr(model, "logprobs_mode", "raw_logprobs")),
                          block_verification=rejection == "block")


def sampling_params(sampling: Sampling, vocab_size: int) -> SamplingParams:
    """vLLM's ``SamplingParams`` for one warm-up request (a top-k stays below the vocab, or vLLM drops it)."""
    top_k = min(sampling.top_k, vocab_size - 1) if sampling.top_k else 0
    return SamplingParams(temperature=sampling.temperature, top_k=top_k, top_p=sampling.top_p, min_p=sampling.min_p,
                          seed=sampling.seed, logprobs=sampling.logprobs)


def warmup_schedule(rounds: list[Round], limits: Limits, vocab_size: int, logprobs: bool = True,
                    sampler: Callable[..., Sampling] = request_sampling,
                    req_prefix: str = REQ_PREFIX) -> list[SchedulerOutput]:
    """The scheduler outputs, in order: per round a prefill step (finishing the previous round's requests) and,
    if it verifies, a step where each request verifies K drafts (the last ones fewer in a ``trimmed`` round; one
    more may join with its prompt); then a clean-up step that finishes the last round's requests. ``sampler`` gives
    each request's sampling from its round's profile (``sampling_plan.request_sampling``; Model Runner V2's:
    ``mrv2_sampling_plan``'s)."""
    k, ahead = limits.k, limits.lookahead
    outputs: list[SchedulerOutput] = []
    finished: set[str] = set()

    def step(finishing: set[str]) -> SchedulerOutput:
        out = SchedulerOutput.make_empty()
        out.finished_req_ids = finishing
        out.num_common_prefix_blocks = [0] * len(limits.block_sizes)
        out.num_spec_tokens_to_schedule = k  # what the scheduler sends every step; the drafter proposes this many
        return out

    def new(req_id: str, prompt: int, blocks: tuple[list[int], ...], sampling: Sampling) -> NewRequestData:
        tokens = [i % vocab_size for i in range(prompt)]
        # prefill_token_ids as the scheduler's from_request sets them (Model Runner V2 reads them).
        return NewRequestData(req_id=req_id, prompt_token_ids=tokens, mm_features=[],
                              sampling_params=sampling_params(sampling, vocab_size), pooling_params=None,
                              block_ids=blocks, num_computed_tokens=0, lora_request=None,
                              prefill_token_ids=list(tokens))

    for index, rnd in enumerate(rounds):
        blocks = _BlockIds(limits.block_sizes)
        ids = [f"{req_prefix}{index}_{i}" for i in range(len(rnd.prompts))]
        prefill = step(finished)
        prefill.scheduled_new_reqs = [new(r, p, blocks.grow(0, p + ahead),
                                          sampler(rnd.profile, i, logprobs=logprobs))
                                      for i, (r, p) in enumerate(zip(ids, rnd.prompts))]
        prefill.num_scheduled_tokens = dict(zip(ids, rnd.prompts))
        prefill.total_num_scheduled_tokens = sum(rnd.prompts)
        outputs.append(prefill)
        finished = set(ids)
        if not rnd.verify:
            continue
        verify = step(set())
        cached = CachedRequestData.make_empty()
        cached.req_ids = list(ids)
        cached.num_computed_tokens = list(rnd.prompts)
        cached.num_output_tokens = [1] * len(ids)
        grown = [blocks.grow(p + ahead, p + k + 1 + ahead) for p in rnd.prompts]
        cached.new_block_ids = [g if any(g) else None for g in grown]
        verify.scheduled_cached_reqs = cached
        drafts = rnd.drafts_per_request(k)  # K each, fewer in the last ones of a trimmed round
        verify.num_scheduled_tokens = {r: d + 1 for r, d in zip(ids, drafts)}
        verify.scheduled_spec_decode_tokens = {r: [0] * d for r, d in zip(ids, drafts)}
        if rnd.join:
            joined = f"{req_prefix}{index}_join"
            verify.scheduled_new_reqs = [new(joined, rnd.join, blocks.grow(0, rnd.join + ahead), sampler(
                rnd.profile, len(ids), joined=True, logprobs=logprobs))]
            verify.num_scheduled_tokens[joined] = rnd.join
            finished.add(joined)
        verify.total_num_scheduled_tokens = sum(verify.num_scheduled_tokens.values())
        outputs.append(verify)
    outputs.append(step(finished))
    return outputs


class StepState:
    """The step bookkeeping of the runner, its input batch and the drafter, saved before the warm-up and put back
    after it (attributes that did not exist are removed again)."""

    def __init__(self, runner: Any) -> None:
        drafter = runner.drafter
        owners = [(runner, RUNNER_STEP_STATE), (runner.input_batch, INPUT_BATCH_STEP_STATE),
                  (drafter, DRAFTER_STEP_STATE), (getattr(drafter, "graphs", None), ("last_output",))]
        self.saved = [(owner, {name: vars(owner).get(name, _ABSENT) for name in names})
                      for owner, names in owners if owner is not None]

    def restore(self) -> None:
        for owner, values in self.saved:
            for name, value in values.items():
                if value is _ABSENT:
                    vars(owner).pop(name, None)
                else:
                    vars(owner)[name] = value


@contextlib.contextmanager
def counted_triton_compiles() -> Iterator[Counter]:
    """Counts Triton JIT compilations by kernel name while the block runs (Triton's post-compile hook, chained to
    any hook already set and restored after; an empty count where this Triton has no such hook)."""
    counts: Counter = Counter()
    try:
        from triton import knobs

        runtime = knobs.runtime
        previous = runtime.jit_post_compile_hook
    except (ImportError, AttributeError):
        yield counts
        return

    def hook(**kwargs: Any) -> Any:
        counts[getattr(kwargs.get("fn"), "name", "?")] += 1
        return previous(**kwargs) if previous is not None else None

    with overridden(runtime, "jit_post_compile_hook", hook):
        yield counts


def compile_summary(counts: Counter | dict) -> str:
    """The one-line form every warm-up log gives counts by kernel name: "name xN, ..." in name order, or "none"."""
    return ", ".join(f"{name} x{n}" for name, n in sorted(counts.items())) or "none"


def run_steps(outputs: list[SchedulerOutput], execute_model: Callable[[Any], Any],
              sample_tokens: Callable[[Any], Any], log_prefix: str = LOG_PREFIX,
              after_step: Callable[[], Any] | None = None) -> list[float]:
    """Each output through the step functions as the engine core sends it: ``execute_model``, then
    ``sample_tokens`` when it returned None for a step with tokens (on the last pipeline rank; Model Runner V2
    returns None for a step without tokens too, and has nothing to sample then); then waits for the device, and
    calls ``after_step`` (where given). Returns each step's wall seconds, the device's work for it included.
    The wait is per step, not once at the end, so that what a step costs (compiles, first launches, lazy
    allocations) is its own and not the next step's: this runs at boot only, where attributing time is worth more
    than overlapping steps. A step's output (async ones copy to the host on a side stream) is kept until that wait.
    A failing step logs one line naming it and the switch that boots without the warm-up, then raises. The V1
    runner passes its own step functions, Model Runner V2 its worker's."""
    seconds = []
    for index, output in enumerate(outputs):
        started = time.perf_counter()
        try:
            result = execute_model(output)
            if result is None and output.total_num_scheduled_tokens:
                result = sample_tokens(None)
            _synchronize()
        except Exception:
            logger.error("%s failed at step %d of %d; %s=off boots without it", log_prefix, index + 1, len(outputs),
                         WARMUP_ENV)
            raise
        seconds.append(time.perf_counter() - started)
        if after_step is not None:
            after_step()
    return seconds


def _synchronize() -> None:
    if torch.accelerator.is_available():
        torch.accelerator.synchronize()


def sampled_steps(outputs: list[SchedulerOutput]) -> list[bool]:
    """Per output: does it schedule a request vLLM samples (``SamplingParams.sampling_type`` not greedy)? Read from
    the requests themselves, as a mixed round's prefill holds greedy requests only and its verify step a sampled
    one that joins. A request's params come with its first step (``scheduled_new_reqs``); later steps name it. A
    request with no params seen counts as greedy: a log label must never stop a boot."""
    params: dict[str, SamplingParams] = {}
    sampled = []
    for output in outputs:
        params.update((new.req_id, new.sampling_params) for new in output.scheduled_new_reqs)
        sampled.append(any(params[r].sampling_type != SamplingType.GREEDY
                           for r in output.num_scheduled_tokens if params.get(r) is not None))
    return sampled


def per_step(totals: list[int]) -> list[int]:
    """Per-step counts from the running totals taken after each step."""
    return [after - before for before, after in zip([0] + totals, totals)]


def slowest_steps(outputs: list[SchedulerOutput], seconds: list[float], compiles: list[int], count: int = 3) -> str:
    """The ``count`` slowest steps, slowest first, for the log line: "7 (16 requests, 2,048 tokens, sampled,
    compiles 2) 9.84 s, ..." (1-based step index), so a slow warm-up says which step costs and whether compiling."""
    sampled = sampled_steps(outputs)
    order = sorted(range(len(outputs)), key=lambda i: -seconds[i])[:count]
    return ", ".join(f"{i + 1} ({_step_label(outputs[i], sampled[i])}, compiles {compiles[i]}) {seconds[i]:.2f} s"
                     for i in order)


def _step_label(output: SchedulerOutput, sampled: bool) -> str:
    reqs = len(output.num_scheduled_tokens)
    return (f"{reqs} request{'' if reqs == 1 else 's'}, {output.total_num_scheduled_tokens:,} tokens, "
            f"{'sampled' if sampled else 'greedy'}")


@torch.inference_mode()
def warm_up_kernels(runner: Any) -> dict[str, Any]:
    """Run the planned steps on ``runner`` (our V1 runner, after capture), log one line, return the statistics
    (also kept as ``runner.warmup_stats``)."""
    blockers = warmup_blockers(runner)
    if blockers:
        logger.info("%s skipped (%s)", LOG_PREFIX, "; ".join(blockers))
        runner.warmup_stats = {"skipped": blockers}
        return runner.warmup_stats
    limits, sampling = warmup_limits(runner), sampling_limits(runner)
    plan = plan_v1_warmup(limits, sampling)
    rounds, sampled, uncovered = plan.rounds, plan.sampled, plan.left
    left = f"; {len(uncovered)} kernel variants left to the first requests: {_names(uncovered)}" if uncovered else ""
    if not rounds:
        logger.warning("%s skipped: %d KV-cache blocks are too few for any warm-up step%s", LOG_PREFIX,
                       limits.free_blocks + 1, left)
        runner.warmup_stats = {"skipped": ["KV-cache blocks"], "uncovered": sorted(map(str, uncovered))}
        return runner.warmup_stats
    outputs = warmup_schedule(rounds, limits, runner.model_config.get_vocab_size(), sampling.logprobs)
    state = StepState(runner)
    started = time.perf_counter()
    compile_totals: list[int] = []
    with counted_triton_compiles() as compiles, counted_triton_builds() as builds:
        step_seconds = run_steps(outputs, runner.execute_model, runner.sample_tokens,
                                 after_step=lambda: compile_totals.append(sum(compiles.values())))
    seconds = time.perf_counter() - started
    step_compiles = per_step(compile_totals)
    batch_change = warm_batch_change(runner, getattr(runner, "valid_sampled_token_count_gpu", None))
    batch_change_s = time.perf_counter() - started - seconds
    state.restore()
    runner.seq_lens.zero_()  # as the drafter's capture leaves it
    graphs = runner.drafter.graph_runner
    replays = dict(graphs.replays) if graphs is not None else {}
    mismatches = graphs.pointer_mismatches if graphs is not None else 0
    if graphs is not None:  # serving's counts start at zero, as after a boot without warm-up
        graphs.replays.clear()
        graphs.pointer_mismatches = 0
    num_reqs = sorted({step.num_reqs for rnd in rounds for step in rnd.steps(limits.k)})
    stats = {"steps": len(outputs), "rounds": len(rounds), "sampled_rounds": [r.profile for r in sampled],
             "num_reqs": num_reqs, "k": limits.k,
             "batch_agnostic": sorted(limits.batch_agnostic),
             "seconds": round(seconds, 3), "step_seconds": [round(t, 3) for t in step_seconds],
             "triton_compiles": dict(compiles), "step_triton_compiles": step_compiles, "triton_builds": dict(builds),
             "drafter_replays": replays,
             "batch_change_pairs": [list(p) for p in batch_change], "batch_change_seconds": round(batch_change_s, 3),
             "pointer_mismatches": mismatches, "uncovered": sorted(map(str, uncovered))}
    level = logging.WARNING if uncovered or mismatches else logging.INFO
    logger.log(level, "%s: %d steps (%d rounds, %d of them sampled, batches of %s requests, K=%d) in %.2f s; "
               "%d Triton compiles (%s)%s; drafter replays %s, %d pointer mismatches; vLLM's batch-change "
               "correction compiled for %d (requests, previous requests) classes in %.2f s; slowest steps: %s%s",
               LOG_PREFIX, len(outputs), len(rounds), len(sampled), ",".join(map(str, num_reqs)), limits.k, seconds,
               sum(compiles.values()), compile_summary(compiles), builds_summary(builds), replays, mismatches,
               len(batch_change), batch_change_s, slowest_steps(outputs, step_seconds, step_compiles), left)
    if (keys := keys_line(builds)) is not None:
        logger.info("%s: %s", LOG_PREFIX, keys)
    runner.warmup_stats = stats
    return stats


def _names(keys: frozenset) -> str:
    return compile_summary(Counter(key[0] for key in keys))
