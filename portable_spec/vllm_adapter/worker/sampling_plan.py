"""Which sampled requests the boot-time warm-up adds (``kernel_warmup`` runs them after ``warmup_plan``'s greedy
rounds), so that no Triton kernel of vLLM's V1 sampler or rejection sampler compiles on a sampled request. Pure
Python: the kernels, how each specializes, what serving can reach, and rounds that reach all of it.

The kernels (vLLM 0.26.0: ``v1/sample/sampler.py``, ``v1/sample/ops/topk_topp_sampler.py``,
``v1/sample/ops/topk_topp_triton.py``, ``v1/sample/rejection_sampler.py``; ``V1_SAMPLER_KERNELS`` lists every
argument of each, and ``tests/test_sampling_plan.py`` reads vLLM's source so that a new kernel, argument or constexpr
fails until it is modelled here):

- ``_topk_topp_kernel``: constexprs ``TOPK_ENABLED`` / ``TOPP_ENABLED`` (some request of the batch has a top-k /
  a top-p) and the integer ``BATCH_SIZE`` (rows), specialized as ``== 1``, a multiple of 16, or neither. vLLM sends
  logits here only from 8 rows on (``TRITON_MIN_ROWS``; fewer rows take a torch sort). Two callers reach it: the
  rejection sampler's ``apply_sampling_constraints`` on the draft rows (requests x K) whenever a non-greedy batch
  has a top-k or top-p, and the main/bonus sampler on one row per request where it does not hand the batch to
  FlashInfer (on CUDA: a batch with a seeded request; ROCm without aiter and MUSA: always). So a seeded request is in
  every sampled round: the plan then holds on every platform. vLLM's own sampler warm-up (``_dummy_sampler_run``)
  compiles only top-k AND top-p at one batch size: a top-p-only request (temperature 0.8, top-p 0.95) compiled
  ``TOPP_ENABLED`` alone at its first request. Key: (top-k?, top-p?, class of rows).
- ``expand_kernel`` (rejection sampler, non-greedy verify steps): the dtype of the per-request value it expands:
  float32 for temperature and top-p, int32 for the top-k the input batch holds (vLLM's warm-up expands an int64
  top-k, so it never compiled the int32 variant serving uses). ``replace_from``/``replace_to`` are not specialized.
  Key: dtype.
- ``rejection_greedy_sample_kernel``: ``is_greedy_ptr`` and ``uniform_probs_ptr`` are None for an all-greedy batch
  and tensors for a mixed one (greedy and sampled requests); an all-random batch does not launch it. Key: batch kind.
- ``rejection_random_sample_kernel`` and ``sample_recovered_tokens_kernel`` (non-greedy verify steps): constexpr
  ``NO_DRAFT_PROBS``. The drafter gives draft probabilities only with ``draft_sample_method='probabilistic'`` and
  only after a step that was not all greedy; a sampled request verifying drafts proposed in an all-greedy step (it
  joined while greedy requests decoded) runs without them. Key: draft probabilities present?
- ``batched_count_greater_than`` (logprobs): not Triton-JIT but ``torch.compile``d on first use (dynamic rows), so
  a request with logprobs compiles it once. Key: one.

Fixed for one engine, so any launch compiles them: vocab size and logits strides, tile sizes, ``MASK_VALUE``,
``MAX_NUM_TOKENS``, ``SYNTHETIC_MODE``, ``USE_FP64_GUMBEL``; pointers are fresh tensors or a persistent buffer's
start (16-byte aligned); logits are float32 in both samplers. Temperature and min-p run as torch ops in V1; min-p and
logit bias do nothing with speculation (vLLM builds only the min-tokens processor then), so no min-p round.

The rounds (``plan_sampled_rounds``): ``warmup_plan.Round``s with a ``profile`` (``PROFILES``: the sampling of their
requests): top-k only, top-p only, top-k with top-p and logprobs, each at a batch whose rows are a non-multiple of 16
and one whose rows are 16-divisible, then a mixed round (greedy requests verify while a sampled one joins). Greedy
choice of the fewest rounds covering ``sampled_reachable_keys``; where whole requests cannot give a row count serving
reaches (16 draft rows with K=3 and at most 15 requests: serving gets there when the scheduler trims a request's
drafts at ``max_model_len``), a round whose last requests verify fewer drafts (``Round.trimmed``) does; what no
round can reach within the engine's limits is returned (the warm-up's log line names it). Deterministic: every
tensor-parallel rank plans the same.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from portable_spec.vllm_adapter.worker.warmup_plan import Limits, Round, int_class, interval_classes, plan_rounds

TOPK_TOPP = "_topk_topp_kernel"
EXPAND = "expand_kernel"
GREEDY_REJECT = "rejection_greedy_sample_kernel"
RANDOM_REJECT = "rejection_random_sample_kernel"
RECOVERED = "sample_recovered_tokens_kernel"
LOGPROBS = "batched_count_greater_than"
TRITON_MIN_ROWS = 8  # ``apply_top_k_top_p``: fewer rows take the torch sort on a GPU
ALL_GREEDY, MIXED = "all greedy", "mixed"

CONFIG = "fixed for one engine"
POINTER = "pointer: fresh tensor or buffer start"
V1_SAMPLER_KERNELS: dict[str, dict[str, str]] = {
    TOPK_TOPP: {
        "LOGITS": POINTER, "LOGITS_STRIDE_0": CONFIG, "BUFFER": POINTER, "PERCENTILE_TO_STD_TABLE": POINTER,
        "NORMAL_CDF_TO_SIGMA_TABLE": POINTER, "K": POINTER + " (int32, or LOGITS when top-k is off)",
        "P": POINTER + " (float32, or LOGITS when top-p is off)", "BATCH_SIZE": "key: class of rows",
        "VOCAB_SIZE": CONFIG, "MASK_VALUE": CONFIG, "BLOCK_SIZE": CONFIG, "BLOCK_SIZE_TRUNC": CONFIG,
        "TOPK_ENABLED": "key: top-k", "TOPP_ENABLED": "key: top-p",
    },
    EXPAND: {
        "output_ptr": "key: dtype", "input_ptr": "key: dtype", "cu_num_tokens_ptr": POINTER,
        "replace_from": "not specialized", "replace_to": "not specialized", "MAX_NUM_TOKENS": CONFIG,
    },
    GREEDY_REJECT: {
        "output_token_ids_ptr": POINTER, "cu_num_draft_tokens_ptr": POINTER, "draft_token_ids_ptr": POINTER,
        "target_argmax_ptr": POINTER, "bonus_token_ids_ptr": POINTER, "is_greedy_ptr": "key: batch kind",
        "max_spec_len": "not specialized", "uniform_probs_ptr": "key: batch kind",
        "synthetic_conditional_rates_ptr": CONFIG, "SYNTHETIC_MODE": CONFIG,
    },
    RANDOM_REJECT: {
        "output_token_ids_ptr": POINTER, "cu_num_draft_tokens_ptr": POINTER, "draft_token_ids_ptr": POINTER,
        "draft_probs_ptr": "key: draft probabilities", "target_probs_ptr": POINTER, "bonus_token_ids_ptr": POINTER,
        "recovered_token_ids_ptr": POINTER, "uniform_probs_ptr": POINTER, "is_greedy_ptr": POINTER,
        "max_spec_len": "not specialized", "vocab_size": CONFIG, "synthetic_conditional_rates_ptr": CONFIG,
        "NO_DRAFT_PROBS": "key: draft probabilities", "SYNTHETIC_MODE": CONFIG,
    },
    RECOVERED: {
        "output_token_ids_ptr": POINTER, "cu_num_draft_tokens_ptr": POINTER, "draft_token_ids_ptr": POINTER,
        "draft_probs_ptr": "key: draft probabilities", "target_probs_ptr": POINTER, "inv_q_ptr": POINTER,
        "vocab_size": CONFIG, "BLOCK_SIZE": CONFIG, "NO_DRAFT_PROBS": "key: draft probabilities",
        "USE_FP64_GUMBEL": CONFIG,
    },
}
"""Every argument of every Triton kernel vLLM's V1 sampling path launches, and how the plan models it."""


@dataclass(frozen=True)
class Sampling:
    """One warm-up request's sampling (``kernel_warmup`` turns it into vLLM's ``SamplingParams``)."""

    temperature: float = 0.0
    top_k: int = 0  # 0: off (vLLM's default); a value is clipped below the vocab size when built
    top_p: float = 1.0
    min_p: float = 0.0  # Model Runner V2's rounds only (the V1 runner ignores min-p with speculation)
    seed: int | None = None
    logprobs: int | None = None

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


GREEDY = Sampling()
TOP_K, TOP_P, TOP_K_TOP_P, MIXED_PROFILE = "top_k", "top_p", "top_k_top_p", "mixed"


def _sampled(index: int, top_k: bool, top_p: bool, logprobs: bool) -> Sampling:
    # Even requests seeded (the first always: the main sampler then runs vLLM's Triton path on every platform),
    # odd ones not: both kinds of request in one batch.
    return Sampling(temperature=0.8, top_k=20 if top_k else 0, top_p=0.95 if top_p else 1.0,
                    seed=1000 + index if index % 2 == 0 else None, logprobs=2 if logprobs else None)


PROFILES = (TOP_K, TOP_P, TOP_K_TOP_P, MIXED_PROFILE)


def request_sampling(profile: str, index: int, joined: bool = False, logprobs: bool = True) -> Sampling:
    """The sampling of request ``index`` (or of the request that joins) of a round with ``profile``."""
    if profile == "greedy":
        return GREEDY
    if profile == MIXED_PROFILE:  # greedy requests verify, a sampled one (top-k and top-p, seeded) joins
        return _sampled(0, True, True, False) if joined else GREEDY
    top_k, top_p = {TOP_K: (True, False), TOP_P: (False, True), TOP_K_TOP_P: (True, True)}[profile]
    return _sampled(index, top_k, top_p, logprobs and profile == TOP_K_TOP_P)


@dataclass(frozen=True)
class SamplingLimits:
    """What the engine's config decides about sampling (``kernel_warmup`` reads it)."""

    probabilistic_drafts: bool = False  # rejection 'standard' with draft_sample_method 'probabilistic'
    logprobs: bool = True  # the engine accepts logprobs (max_logprobs != 0)
    max_logprobs: int = 20  # the most a request may ask (-1: any); Model Runner V2's 0.33 plan
    logprobs_mode: str = "raw_logprobs"  # which logits logprobs are computed on; Model Runner V2's 0.33 plan
    block_verification: bool = False  # rejection_sample_method 'block'; Model Runner V2's 0.33 plan


@dataclass(frozen=True)
class Mrv2SamplingPlan:
    """What ``mrv2_warmup`` calls of one vLLM version's Model Runner V2 sampled warm-up plan: each plan module
    (``mrv2_sampling_plan`` for 0.26.0, ``mrv2_sampling_plan_028``, ``mrv2_sampling_plan_033``) exposes one as
    ``PLAN``, and ``mrv2_warmup.installed_plan`` picks the installed vLLM's by ``vllm``."""

    vllm: str
    """The vLLM version whose MRV2 sampler the plan was derived from (``version_gate.pick``'s key)."""
    plan_rounds: Callable[[Limits, SamplingLimits], tuple[list[Round], frozenset]]
    """The rounds covering every sampling-path variant serving reaches on this engine, and the variants left."""
    request_sampling: Callable[..., Sampling]
    """A round's request sampling (``profile, index, joined=False, logprobs=True``), for ``warmup_schedule``."""


def max_rows(limits: Limits) -> int:
    """The most rows one launch of ``_topk_topp_kernel`` can get: one per request (main sampler) or K per verifying
    request (rejection sampler), within the step's token budget."""
    return limits.max_sampler_rows(limits.k)


def sampled_reachable_keys(limits: Limits, sampling: SamplingLimits) -> frozenset:
    """Every sampling-path variant serving can reach on this engine (see the module docstring)."""
    keys = {(EXPAND, "float32"), (EXPAND, "int32"), (GREEDY_REJECT, ALL_GREEDY)}
    if sampling.logprobs:
        keys.add((LOGPROBS,))
    if limits.max_reqs >= 2:
        keys.add((GREEDY_REJECT, MIXED))
    probs = {True} if sampling.probabilistic_drafts else set()
    if not sampling.probabilistic_drafts or limits.max_reqs >= 2:
        probs.add(False)
    keys |= {(kernel, p) for kernel in (RANDOM_REJECT, RECOVERED) for p in probs}
    for cls in interval_classes(TRITON_MIN_ROWS, max_rows(limits)):
        keys |= {(TOPK_TOPP, True, False, cls), (TOPK_TOPP, False, True, cls), (TOPK_TOPP, True, True, cls)}
    return frozenset(keys)


def _batch_keys(reqs: list[Sampling], rows: int) -> set:
    """``_topk_topp_kernel``'s variant for ``rows`` rows of a batch of ``reqs`` (none below 8 rows, or without a
    top-k or top-p)."""
    top_k, top_p = any(r.top_k for r in reqs), any(r.top_p < 1.0 for r in reqs)
    if rows < TRITON_MIN_ROWS or not (top_k or top_p):
        return set()
    return {(TOPK_TOPP, top_k, top_p, int_class(rows))}


def sampled_round_keys(rnd: Round, limits: Limits, sampling: SamplingLimits) -> frozenset:
    """The sampling-path variants ``rnd``'s steps compile (greedy rounds: the all-greedy rejection kernel only)."""
    k, n = limits.k, len(rnd.prompts)
    prompts = [request_sampling(rnd.profile, i, logprobs=sampling.logprobs) for i in range(n)]
    keys: set = set()

    def main_sampler(reqs: list[Sampling]) -> None:
        if all(r.greedy for r in reqs):
            return
        if any(r.seed is not None for r in reqs):  # FlashInfer on CUDA otherwise: no Triton
            keys.update(_batch_keys(reqs, len(reqs)))
        if any(r.logprobs for r in reqs):
            keys.add((LOGPROBS,))

    main_sampler(prompts)
    if not rnd.verify:
        return frozenset(keys)
    joined = [request_sampling(rnd.profile, n, joined=True, logprobs=sampling.logprobs)] if rnd.join else []
    batch = prompts + joined
    main_sampler(batch)  # the bonus tokens: one row per request
    if all(r.greedy for r in batch):
        keys.add((GREEDY_REJECT, ALL_GREEDY))
        return frozenset(keys)
    if not all(not r.greedy for r in batch):
        keys.add((GREEDY_REJECT, MIXED))
    probs = sampling.probabilistic_drafts and not all(r.greedy for r in prompts)
    keys |= {(RANDOM_REJECT, probs), (RECOVERED, probs), (EXPAND, "float32")}
    if any(r.top_k for r in batch):
        keys.add((EXPAND, "int32"))
    keys.update(_batch_keys(batch, rnd.drafts(k)))  # the draft rows of the verifying requests
    return frozenset(keys)


def _candidates(limits: Limits) -> list[Round]:
    """Sampled rounds worth considering: each profile at 1..16 verifying requests (prompts of K+2 tokens: longer
    than a verify query), the mixed one with a request joining."""
    prompt, out = limits.k + 2, []
    for count in range(1, min(limits.max_reqs, 16) + 1):
        for profile in (TOP_K, TOP_P, TOP_K_TOP_P):
            out.append(Round((prompt,) * count, True, profile=profile))
        if count + 1 <= limits.max_reqs:
            out.append(Round((prompt,) * count, True, join=prompt, profile=MIXED_PROFILE))
    return [rnd for rnd in out if rnd.fits(limits)]


def plan_sampled_rounds(limits: Limits, sampling: SamplingLimits, covered: frozenset = frozenset()
                        ) -> tuple[list[Round], frozenset]:
    """Sampled rounds that cover ``sampled_reachable_keys`` beyond ``covered`` (what the greedy rounds reach), and
    the keys left uncovered. Each pick is the candidate adding the most keys, the smallest batch on a tie."""
    return cover_trimming_drafts(_candidates(limits), lambda rnd: sampled_round_keys(rnd, limits, sampling),
                                 sampled_reachable_keys(limits, sampling), limits, covered)


@dataclass(frozen=True)
class V1Plan:
    """The V1 warm-up's whole plan (``plan_v1_warmup``): its greedy rounds, the sampled rounds after them, and the
    kernel variants neither reaches (left to the first requests, named in the warm-up's log line)."""

    greedy: list[Round]
    sampled: list[Round]
    left: frozenset

    @property
    def rounds(self) -> list[Round]:
        """The rounds in the order the warm-up runs them: greedy first."""
        return self.greedy + self.sampled


def plan_v1_warmup(limits: Limits, sampling: SamplingLimits) -> V1Plan:
    """The greedy rounds (``warmup_plan.plan_rounds``), then sampled rounds for the sampler variants their steps do
    not already reach (``plan_sampled_rounds``). Where no step fits (a KV cache too small for any) neither kind
    plans a round, and ``left`` names the sampler's variants beside the rest, so the warm-up's warning names every
    kernel it leaves. One composition, so the warm-up and the tests that rebuild a server's plan from its report
    (the grids, the results read-backs) plan the same rounds."""
    greedy, left = plan_rounds(limits)
    covered = frozenset().union(*(sampled_round_keys(r, limits, sampling) for r in greedy))
    sampled, sampled_left = plan_sampled_rounds(limits, sampling, covered)
    return V1Plan(greedy, sampled, left | sampled_left)


MAX_TRIMMED = 15
"""The most drafts a trimmed round leaves out: enough to bring any row count down to the multiple of 16 below it."""


def trimmed_rounds(candidates: list[Round], limits: Limits) -> list[Round]:
    """Each verifying candidate again with 1..15 of its drafts left out (``Round.trimmed``), where it fits."""
    out = [replace(rnd, trimmed=t) for rnd in candidates if rnd.verify for t in range(1, MAX_TRIMMED + 1)]
    return [rnd for rnd in out if rnd.fits(limits)]


def cover_trimming_drafts(candidates: list[Round], keys_of: Callable[[Round], frozenset], goal: frozenset,
                          limits: Limits, covered: frozenset = frozenset()) -> tuple[list[Round], frozenset]:
    """``greedy_cover`` of ``goal`` by ``candidates`` (whole requests: each verifies K drafts), then, for what they
    leave, by the same rounds with drafts of their last requests trimmed (``trimmed_rounds``): the row counts serving
    reaches only with trimmed requests (a multiple of 16 that no count of whole requests within the engine's limit
    gives), so plans that whole requests cover stay as they were."""
    rounds, left = greedy_cover([(rnd, keys_of(rnd) & goal) for rnd in candidates], goal, covered)
    if not left:
        return rounds, left
    more, left = greedy_cover([(rnd, keys_of(rnd) & left) for rnd in trimmed_rounds(candidates, limits)], left)
    return rounds + more, left


def greedy_cover(candidates: list[tuple[Round, frozenset]], goal: frozenset, covered: frozenset = frozenset()
                 ) -> tuple[list[Round], frozenset]:
    """Rounds picked from ``candidates`` (each with the keys of ``goal`` it reaches) until nothing more of ``goal``
    is reached: each pick the candidate adding the most keys, the smallest batch on a tie; and the keys left."""
    have = set(covered) & goal
    rounds: list[Round] = []
    while True:
        best = max(candidates, key=lambda c: (len(c[1] - have), -len(c[0].prompts)), default=None)
        if best is None or not best[1] - have:
            break
        rounds.append(best[0])
        have |= best[1]
    return rounds, frozenset(goal - have)

