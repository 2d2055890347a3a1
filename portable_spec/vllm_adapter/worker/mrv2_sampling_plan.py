"""Which sampled rounds the boot-time warm-up adds under Model Runner V2 (``mrv2_warmup`` runs them right after
MRV2's own ``warmup_kernels``), so that no Triton kernel of MRV2's sampler or rejection sampler compiles on a sampled
request. Pure Python, as ``sampling_plan`` is for the V1 runner; the rounds are ``warmup_plan.Round``s with a
``profile`` and are turned into scheduler outputs by ``kernel_warmup.warmup_schedule``.

MRV2's own warm-up (vLLM 0.26.0, ``v1/worker/gpu/warmup.py``) runs ONE batch of requests that all carry
``SamplingParams.for_sampler_warmup()`` (temperature, top-k AND top-p, min-p, penalties, logit bias, bad words,
logprobs): one variant of each kernel, at one batch size, on logits that were cloned for raw logprobs. Serving reaches
more (vLLM 0.26.0, ``v1/worker/gpu/sample/{sampler,states,gumbel,min_p,logprob}.py``,
``v1/worker/gpu/spec_decode/rejection_sampler{,_utils}.py``, ``v1/sample/ops/topk_topp_triton.py``):

- ``_topk_topp_kernel``: constexprs ``TOPK_ENABLED`` / ``TOPP_ENABLED`` and the integer ``BATCH_SIZE`` (its rows,
  from 8: ``TRITON_MIN_ROWS``). Rows: one per request in the main sampler where it does not hand the batch to
  FlashInfer (a seeded or greedy request in the batch, so every sampled round has a seeded request); 1+K per
  verifying request (plus one per request that joins with its prompt) in the rejection sampler, which always
  filters through it. Key: (top-k?, top-p?, class of rows).
- ``_temperature_kernel`` and ``_min_p_kernel`` (a request with a temperature other than 0 and 1, one with a min-p):
  their logits are the model's, or a clone where a request of the batch wants raw logprobs. Key: (kernel, cloned?).
- ``_compute_local_logits_stats_kernel``, ``_rejection_kernel``, ``_resample_kernel``, ``_insert_resampled_kernel``
  (every verify step): ``HAS_DRAFT_LOGITS`` is fixed per engine (the speculator's ``draft_logits`` buffer); the
  target logits are the model's, a raw-logprobs clone, or the top-k/top-p filter's output. Key: (kernel, logits).
- logprobs (``_topk_log_softmax_kernel``, ``_ranks_kernel``; ``_flatten_sampled_kernel`` in a verify step): key
  (verify step?).

The model over-approximates (a key that names the logits' origin costs a round, never a compile); what it cannot
reach within the engine's limits is returned and named by the warm-up's log line. Min-p: MRV2 applies it with
speculation (its own warm-up sets one), so it has rounds here, unlike the V1 runner. Deterministic: every
tensor-parallel rank plans the same rounds.
"""

from __future__ import annotations

from portable_spec.vllm_adapter.worker.sampling_plan import (
    GREEDY, MIXED_PROFILE, TOP_K, TOP_K_TOP_P, TOP_P, TOPK_TOPP, TRITON_MIN_ROWS, Mrv2SamplingPlan, Sampling,
    SamplingLimits, cover_trimming_drafts,
)
from portable_spec.vllm_adapter.worker.warmup_plan import Limits, Round, int_class, interval_classes

TEMPERATURE = "_temperature_kernel"
MIN_P = "_min_p_kernel"
REJECTION_KERNELS = ("_compute_local_logits_stats_kernel", "_rejection_kernel", "_resample_kernel",
                     "_insert_resampled_kernel")
LOGPROBS = "_topk_log_softmax_kernel"
MODEL, CLONE, FILTERED = "model logits", "raw-logprobs clone", "top-k/top-p output"
TEMPERATURE_ONLY, MIN_P_PROFILE = "temperature", "min_p"
LOGPROBS_SUFFIX = "+logprobs"
BASE_PROFILES = (TEMPERATURE_ONLY, MIN_P_PROFILE, TOP_K, TOP_P, TOP_K_TOP_P)
PROFILES = BASE_PROFILES + tuple(p + LOGPROBS_SUFFIX for p in BASE_PROFILES) + (MIXED_PROFILE,)
"""Every MRV2 round's profile: each sampling with and without logprobs, and greedy requests with a sampled one
joining (``mixed``)."""


def request_sampling(profile: str, index: int, joined: bool = False, logprobs: bool = True) -> Sampling:
    """The sampling of request ``index`` (or of the one that joins) of an MRV2 round with ``profile``. Even requests
    seeded (the first always: the main sampler then takes vLLM's Triton path), odd ones not."""
    if profile == "greedy":
        return GREEDY
    if profile == MIXED_PROFILE:
        return Sampling(temperature=0.8, top_k=20, top_p=0.95, seed=1000) if joined else GREEDY
    base = profile.removesuffix(LOGPROBS_SUFFIX)
    wants_logprobs = logprobs and profile.endswith(LOGPROBS_SUFFIX)
    return Sampling(temperature=0.8, top_k=20 if base in (TOP_K, TOP_K_TOP_P) else 0,
                    top_p=0.95 if base in (TOP_P, TOP_K_TOP_P) else 1.0, min_p=0.1 if base == MIN_P_PROFILE else 0.0,
                    seed=1000 + index if index % 2 == 0 else None, logprobs=2 if wants_logprobs else None)


def max_rows(limits: Limits) -> int:
    """The most rows one ``_topk_topp_kernel`` launch can get: a request each (main sampler) or 1+K per verifying
    request (rejection sampler), within the step's token budget."""
    return limits.max_sampler_rows(limits.k + 1)


def reachable_keys(limits: Limits, sampling: SamplingLimits) -> frozenset:
    """Every MRV2 sampling-path variant serving can reach on this engine (see the module docstring)."""
    origins = (MODEL, CLONE) if sampling.logprobs else (MODEL,)
    keys = {(kernel, origin) for kernel in (TEMPERATURE, MIN_P) for origin in origins}
    keys |= {(kernel, origin) for kernel in REJECTION_KERNELS for origin in origins + (FILTERED,)}
    if sampling.logprobs:
        keys |= {(LOGPROBS, False), (LOGPROBS, True)}
    for cls in interval_classes(TRITON_MIN_ROWS, max_rows(limits)):
        keys |= {(TOPK_TOPP, True, False, cls), (TOPK_TOPP, False, True, cls), (TOPK_TOPP, True, True, cls)}
    return frozenset(keys)


def _step_keys(reqs: list[Sampling], rows: int, verify: bool) -> set:
    """What one sampler call on ``reqs`` compiles (``rows``: its logits rows)."""
    keys: set = set()
    sampled = [r for r in reqs if not r.greedy]
    logprobs = any(r.logprobs for r in reqs)
    origin = CLONE if logprobs else MODEL
    if any(r.temperature not in (0.0, 1.0) for r in reqs):
        keys.add((TEMPERATURE, origin))
    if any(r.min_p for r in reqs):
        keys.add((MIN_P, origin))
    top_k, top_p = any(r.top_k for r in reqs), any(r.top_p < 1.0 for r in reqs)
    # The main sampler hands a batch without greedy or seeded requests to FlashInfer; the rejection sampler never.
    triton_filter = verify or any(r.greedy for r in reqs) or any(r.seed is not None for r in reqs)
    if sampled and (top_k or top_p) and triton_filter and rows >= TRITON_MIN_ROWS:
        keys.add((TOPK_TOPP, top_k, top_p, int_class(rows)))
    if verify:
        target = FILTERED if top_k or top_p else origin
        keys |= {(kernel, target) for kernel in REJECTION_KERNELS}
    if logprobs:
        keys.add((LOGPROBS, verify))
    return keys


def round_keys(rnd: Round, limits: Limits, sampling: SamplingLimits) -> frozenset:
    """The MRV2 sampling-path variants ``rnd``'s steps compile."""
    n, k = len(rnd.prompts), limits.k
    prompts = [request_sampling(rnd.profile, i, logprobs=sampling.logprobs) for i in range(n)]
    keys = _step_keys(prompts, n, verify=False)
    if rnd.verify:
        joined = [request_sampling(rnd.profile, n, joined=True, logprobs=sampling.logprobs)] if rnd.join else []
        keys |= _step_keys(prompts + joined, rnd.drafts(k) + n + len(joined), verify=True)  # + a bonus row each
    return frozenset(keys)


def candidates(limits: Limits, profiles: tuple[str, ...]) -> list[Round]:
    """Rounds worth considering: each profile at 1..16 verifying requests (prompts of K+2 tokens, longer than a
    verify query), the mixed one with a request joining."""
    prompt, out = limits.k + 2, []
    for count in range(1, min(limits.max_reqs, 16) + 1):
        for profile in profiles:
            if profile == MIXED_PROFILE:
                if count + 1 <= limits.max_reqs:
                    out.append(Round((prompt,) * count, True, join=prompt, profile=profile))
            else:
                out.append(Round((prompt,) * count, True, profile=profile))
    return [rnd for rnd in out if rnd.fits(limits)]


def plan_rounds(limits: Limits, sampling: SamplingLimits, profiles: tuple[str, ...] = PROFILES
                ) -> tuple[list[Round], frozenset]:
    """Rounds covering ``reachable_keys`` (greedy choice: the candidate adding the most keys, the smallest batch on
    a tie; rounds with trimmed drafts for what whole requests leave), and the keys left uncovered. ``profiles``
    narrows the candidates (tests drop one to see a key left)."""
    return cover_trimming_drafts(candidates(limits, profiles), lambda rnd: round_keys(rnd, limits, sampling),
                                 reachable_keys(limits, sampling), limits)


PLAN = Mrv2SamplingPlan("0.26.0", plan_rounds, request_sampling)
"""What ``mrv2_warmup`` calls on vLLM 0.26."""
