"""``mrv2_sampling_plan`` for vLLM 0.33.0: which sampled rounds the boot-time warm-up adds under Model Runner V2 so that
no Triton kernel of MRV2's sampler or rejection sampler compiles at the first sampled request (``mrv2_warmup`` picks
this module or the 0.26.0 one with ``version_gate.pick``). Pure Python; the rounds are ``warmup_plan.Round``s turned
into scheduler outputs by ``kernel_warmup.warmup_schedule``, as for 0.26.0.

What vLLM 0.33.0 compiles at boot itself (paths below are under ``vllm/``):

- ``v1/worker/gpu/warmup.py:218-252`` runs ``_warmup_kernels`` twice: one batch of requests with
  ``SamplingParams.for_sampler_warmup()`` (``sampling_params.py:1477-1493``: temperature 0.9, top-k 50 AND top-p 0.9,
  min-p, penalties, logit bias, bad words, ``logprobs=5``, unseeded), then a greedy one; each a prefill of
  ``min(max_num_seqs, budget // prompt)`` requests and decode steps of all of them, two, one (``warmup.py:449-465``).
  That reaches one width of the logprobs kernel (6 columns), both target-logits dtypes of the rejection kernels, at
  the row counts of its batch shapes only. Its unseeded sampled prefill takes FlashInfer's fused sampler where
  FlashInfer samples (``v1/worker/gpu/sample/sampler.py:307-315``), so there the main sampler's Triton Gumbel kernel
  on FP32 logits does not compile.
- vLLM's JIT warm-up registry (``model_executor/warmup/jit_warmup.py``) compiles the top-k/top-p family
  (``_topk_topp_kernel`` and the split top-p ``_topp_sb_*`` kernels, ``v1/sample/ops/topk_topp_triton.py:887-916,
  1054-1098, 1343-1393, 1521-1570``: every mode, batch size and stride class) only where the runner registers them,
  ``v1/worker/gpu/model_runner.py:470-479``: ROCm, and CUDA with speculation. An out-of-tree platform (MUSA) gets
  none of them. Every other sampling kernel below is plain ``triton.jit`` that no registry names.

What serving reaches, per kernel, with the arguments that vary with the request mix (everything else is fixed per
engine: vocab size, logits strides, FP64 Gumbel, draft logits, block verification, watermarking):

- Target-logits dtype, ``MODEL`` or ``FP32``: the sampler copies the logits to a new FP32 tensor only where a request
  of the batch needs processing (``sampler.py:238-242``; ``sample/states.py:67-72``: temperature not 0 and (not 1,
  min-p, top-k or top-p), or a logits processor); a greedy or plain temperature-1 batch keeps the model's dtype.
- ``_temperature_kernel`` (``sample/gumbel.py:22-28``, launched ``gumbel.py:55-62`` by ``states.py:87-92`` for a
  temperature not in {0, 1}) and ``_min_p_kernel`` (``sample/min_p.py:9-16, 53-60``, ``states.py:100-103``): FP32
  logits always, no varying argument: one variant each.
- ``_topk_topp_kernel`` (``topk_topp_triton.py:106-123``): constexprs ``TOPK_ENABLED`` / ``TOPP_ENABLED`` (``k`` /
  ``p`` None or not, ``topk_topp_triton.py:1718``), ``SPLIT_COVERS_PONLY`` (CUDA-alike top-p at most 64 rows,
  ``:946-950``), and ``BATCH_SIZE``, specialized on 1 only (``do_not_specialize_on_alignment``). Rows: one per
  request in the main sampler (steps without drafts) unless FlashInfer takes the batch (no greedy, no seeded request,
  ``sampler.py:307-315``), one per logits row in the rejection sampler, which always filters
  (``spec_decode/rejection_sampler.py:264-273``). Key: (top-k?, top-p?, one row?); the split pipeline and the
  ``SPLIT_COVERS_PONLY`` side are the registry's wherever they run (CUDA, ROCm).
- ``_gumbel_sample_kernel`` in the main sampler (``gumbel.py:282-306``, launched ``sampler.py:350-359`` with
  ``APPLY_TEMPERATURE=False, IS_DRAFTING=False``): the logits' dtype. Key: dtype. (The draft's Gumbel sampling,
  ``spec_decode/speculator.py:459-477``, varies with nothing per request: vLLM's warm-up drafts.)
- Rejection sampler (``spec_decode/rejection_sampler_utils.py``), only in a step with drafts
  (``model_runner.py:1681-1693``): ``_compute_local_logits_stats_kernel`` (target logits ``:1207``, integer
  ``num_logits`` ``:1216``), ``_rejection_kernel`` (``:1312``), ``_resample_kernel`` (``:1365``), with block
  verification ``_compute_cumulative_log_p_kernel`` (``:1234``) and ``_compute_local_residual_mass_kernel``
  (``:1269``, ``num_logits`` ``:1287``); ``_gather_draft_sampled_kernel`` (``rejection_sampler.py:132-143``,
  integer ``num_logits``). Keys: (kernel, dtype[, class of rows]); rows are at least 2 (a request with drafts).
  ``_insert_resampled_kernel`` (``:1397-1410``) takes no logits and no varying integer: one variant, vLLM's.
- Logprobs (``sample/logprob.py``): ``_topk_log_softmax_kernel`` (``:16-27``, launched ``:96-107``): constexpr
  ``TOPK_BLOCK_SIZE = next_power_of_2(1 + logprobs)`` (at most 1024) and the integer ``topk`` (``1 + logprobs``, the
  batch's largest), on the raw logits (model dtype, ``sampler.py:171-186``, ``rejection_sampler.py:364``) or, in a
  processed logprobs mode, on the processed ones; ``_ranks_kernel`` (``:62-68``, ``:174-181``): the logits' dtype. In
  ``raw_logits`` / ``processed_logits`` mode the softmax kernel does not run (a gather). ``_flatten_sampled_kernel``
  (``rejection_sampler.py:57-74``): one variant.

Not modeled (one variant each reached by vLLM's ``for_sampler_warmup`` batch, or opt-in per request): logits
processors (penalties, logit bias, bad words, allowed token ids, min tokens, thinking budget), prompt logprobs,
``logprob_token_ids`` (``logprob.py:192-209``), and engines with batch-sharded sampling, watermarking or adaptive
verification (``mrv2_warmup`` does not run there). Over-approximating (a key costs a round, never a compile); what
the rounds cannot reach within the engine's limits is returned and named by the warm-up's log line. Deterministic.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from portable_spec.kernels.fixed_tile import next_pow2
from portable_spec.vllm_adapter.worker import mrv2_sampling_plan as v026
from portable_spec.vllm_adapter.worker.sampling_plan import (
    GREEDY, MIXED_PROFILE, TOP_K, TOP_K_TOP_P, TOP_P, TOPK_TOPP, Mrv2SamplingPlan, Sampling, SamplingLimits,
    cover_trimming_drafts,
)
from portable_spec.vllm_adapter.worker.warmup_plan import ONE, SIXTEEN, OTHER, Limits, Round, int_class

TEMPERATURE, MIN_P = v026.TEMPERATURE, v026.MIN_P
GUMBEL = "_gumbel_sample_kernel"
STATS, GATHER = "_compute_local_logits_stats_kernel", "_gather_draft_sampled_kernel"
REJECTION, RESAMPLE = "_rejection_kernel", "_resample_kernel"
CUMULATIVE, RESIDUAL = "_compute_cumulative_log_p_kernel", "_compute_local_residual_mass_kernel"
LOG_SOFTMAX, RANKS, FLATTEN = "_topk_log_softmax_kernel", "_ranks_kernel", "_flatten_sampled_kernel"
MODEL, FP32 = "model dtype", "fp32"
MANY = "2+"
MAX_TOPK_BLOCK = 1024  # logprob.py:13
PROCESSED_MODES = ("processed_logprobs", "processed_logits")  # config/model.py:104 PROCESSED_LOGPROBS_MODES
LOGITS_MODES = ("raw_logits", "processed_logits")  # logprob.py: a gather instead of the softmax kernel

GREEDY_PROFILE = "greedy"
TEMPERATURE_ONLY, MIN_P_PROFILE = v026.TEMPERATURE_ONLY, v026.MIN_P_PROFILE
LOGPROBS_MARK = "+logprobs="
BASE_PROFILES = (GREEDY_PROFILE, TEMPERATURE_ONLY, MIN_P_PROFILE, TOP_K, TOP_P, TOP_K_TOP_P)


def logprobs_profile(base: str, count: int) -> str:
    """The profile of a round whose requests ask ``count`` logprobs (``base``: greedy or temperature)."""
    return f"{base}{LOGPROBS_MARK}{count}"


def logprobs_key(count: int) -> tuple[int, str]:
    """How ``_topk_log_softmax_kernel`` specializes on a batch whose largest request asks ``count`` logprobs."""
    cols = 1 + count
    return min(next_pow2(cols), MAX_TOPK_BLOCK), int_class(cols)


def logprobs_counts(sampling: SamplingLimits) -> list[int]:
    """The smallest logprobs count of each ``logprobs_key`` the engine accepts (``max_logprobs``; -1: any, where
    2047 reaches every key)."""
    top = 2047 if sampling.max_logprobs < 0 else sampling.max_logprobs
    seen: dict[tuple[int, str], int] = {}
    for count in range(top + 1):
        seen.setdefault(logprobs_key(count), count)
    return sorted(seen.values())


def profiles(sampling: SamplingLimits) -> tuple[str, ...]:
    """Every round's profile on this engine: each sampling alone, greedy and temperature with each logprobs count,
    greedy requests with a sampled one joining (``mixed``)."""
    counts = logprobs_counts(sampling) if sampling.logprobs else []
    return BASE_PROFILES + tuple(logprobs_profile(b, c) for c in counts for b in (GREEDY_PROFILE, TEMPERATURE_ONLY)) \
        + (MIXED_PROFILE,)


def request_sampling(profile: str, index: int, joined: bool = False, logprobs: bool = True) -> Sampling:
    """The sampling of request ``index`` (or of the one that joins) of a round with ``profile``: as 0.26.0's (even
    requests seeded, so the main sampler takes vLLM's Triton path), greedy rounds, and a logprobs count."""
    base, _, count = profile.partition(LOGPROBS_MARK)
    if base == GREEDY_PROFILE:
        sampling = GREEDY
    else:
        sampling = v026.request_sampling(base, index, joined=joined, logprobs=False)
    return replace(sampling, logprobs=int(count)) if count and logprobs else sampling


def _dtypes(sampling: SamplingLimits) -> tuple[str, ...]:
    """The logprobs kernels' logits dtypes: the raw logits' (the model's) or, in a processed mode, either."""
    return (MODEL, FP32) if sampling.logprobs_mode in PROCESSED_MODES else (MODEL,)


def reachable_keys(limits: Limits, sampling: SamplingLimits) -> frozenset:
    """Every MRV2 sampling-path variant serving can reach on this engine (see the module docstring)."""
    keys: set = {(TEMPERATURE,), (MIN_P,), (GUMBEL, MODEL), (GUMBEL, FP32)}
    keys |= {(TOPK_TOPP, k, p, r) for k, p in ((True, False), (False, True), (True, True)) for r in (ONE, MANY)}
    verify_max = v026.max_rows(limits)
    classes = [OTHER] + ([SIXTEEN] if verify_max >= 16 else [])
    for dtype in (MODEL, FP32):
        keys |= {(REJECTION, dtype), (RESAMPLE, dtype)} | {(STATS, dtype, c) for c in classes}
        if sampling.block_verification:
            keys |= {(CUMULATIVE, dtype)} | {(RESIDUAL, dtype, c) for c in classes}
    keys |= {(GATHER, c) for c in classes}
    if sampling.logprobs:
        for dtype in _dtypes(sampling):
            keys.add((RANKS, dtype))
            if sampling.logprobs_mode not in LOGITS_MODES:
                keys |= {(LOG_SOFTMAX, dtype) + logprobs_key(c) for c in logprobs_counts(sampling)}
        keys.add((FLATTEN,))
    return frozenset(keys)


def _needs_processing(r: Sampling) -> bool:
    """``SamplingStates.add_request``'s answer (``states.py:67-72``): the batch's logits are copied to FP32."""
    return not r.greedy and (r.temperature != 1.0 or bool(r.min_p) or bool(r.top_k) or r.top_p < 1.0)


def _step_keys(reqs: list[Sampling], rows: int, verify: bool, sampling: SamplingLimits) -> set:
    """What one sampler call on ``reqs`` compiles for sure on any platform (``rows``: its logits rows; ``verify``:
    the rejection sampler's, else the main sampler's)."""
    keys: set = set()
    dtype = FP32 if any(_needs_processing(r) for r in reqs) else MODEL
    if dtype == FP32 and any(r.temperature not in (0.0, 1.0) for r in reqs):
        keys.add((TEMPERATURE,))
    if dtype == FP32 and any(r.min_p for r in reqs):
        keys.add((MIN_P,))
    top_k, top_p = any(r.top_k for r in reqs), any(r.top_p < 1.0 for r in reqs)
    logprobs = [r.logprobs for r in reqs if r.logprobs is not None]
    processed_logprobs = bool(logprobs) and sampling.logprobs_mode in PROCESSED_MODES
    # The main sampler hands a filtered batch without greedy or seeded requests to FlashInfer where it samples.
    fused = (top_k or top_p) and not processed_logprobs and not any(r.greedy or r.seed is not None for r in reqs)
    if (top_k or top_p) and (verify or not fused):
        keys.add((TOPK_TOPP, top_k, top_p, ONE if rows == 1 else MANY))
    if verify:
        keys |= {(REJECTION, dtype), (RESAMPLE, dtype), (STATS, dtype, int_class(rows)), (GATHER, int_class(rows))}
        if sampling.block_verification:
            keys |= {(CUMULATIVE, dtype), (RESIDUAL, dtype, int_class(rows))}
    elif not fused:
        keys.add((GUMBEL, dtype))
    if logprobs:
        lp_dtype = dtype if processed_logprobs else MODEL
        keys.add((RANKS, lp_dtype))
        if sampling.logprobs_mode not in LOGITS_MODES:
            keys.add((LOG_SOFTMAX, lp_dtype) + logprobs_key(max(logprobs)))
        if verify:
            keys.add((FLATTEN,))
    return keys


def round_keys(rnd: Round, limits: Limits, sampling: SamplingLimits, step_keys: Callable[..., set] | None = None
               ) -> frozenset:
    """The MRV2 sampling-path variants ``rnd``'s steps compile: its prefill (main sampler) and its verify step
    (``step_keys``: another version's ``_step_keys``, 0.28.0's)."""
    step_keys = step_keys or _step_keys
    n, k = len(rnd.prompts), limits.k
    prompts = [request_sampling(rnd.profile, i, logprobs=sampling.logprobs) for i in range(n)]
    keys = step_keys(prompts, n, False, sampling)
    if rnd.verify:
        joined = [request_sampling(rnd.profile, n, joined=True, logprobs=sampling.logprobs)] if rnd.join else []
        keys |= step_keys(prompts + joined, rnd.drafts(k) + n + len(joined), True, sampling)  # + a bonus row each
    return frozenset(keys)


def plan_rounds(limits: Limits, sampling: SamplingLimits, dropped: tuple[str, ...] = (), *,
                reachable: Callable[[Limits, SamplingLimits], frozenset] | None = None,
                keys_of: Callable[[Round, Limits, SamplingLimits], frozenset] | None = None
                ) -> tuple[list[Round], frozenset]:
    """Rounds covering ``reachable_keys`` (0.26.0's candidates and greedy cover, rounds with trimmed drafts for what
    whole requests leave) and the keys left uncovered. ``dropped`` leaves profiles out (tests drop one to see a key
    left); ``reachable`` / ``keys_of``: another version's model on these profiles (0.28.0's)."""
    reachable, keys_of = reachable or reachable_keys, keys_of or round_keys
    candidates = v026.candidates(limits, tuple(p for p in profiles(sampling) if p not in dropped))
    return cover_trimming_drafts(candidates, lambda rnd: keys_of(rnd, limits, sampling), reachable(limits, sampling),
                                 limits)


PLAN = Mrv2SamplingPlan("0.33.0", plan_rounds, request_sampling)
"""What ``mrv2_warmup`` calls on vLLM 0.33."""
