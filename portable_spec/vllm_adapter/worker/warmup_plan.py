"""Which scheduler steps the boot-time kernel warm-up runs (``kernel_warmup`` runs them through vLLM's V1 runner), so that
no drafter/verify-path Triton kernel compiles on a request. Pure Python: a model of how those kernels specialize,
the classes serving can reach, and rounds of steps that reach every one of them.

Why a model: Triton compiles one variant per specialization of a launch. Each integer argument is specialized as
``== 1``, divisible by 16, or neither; each pointer on 16-byte alignment; each ``tl.constexpr`` by value. One batch
size warms one variant of each kernel, while serving reaches up to three per integer argument. The pointers below
are fresh tensors or a persistent buffer's start, so alignment never varies; what varies with the batch (vLLM 0.26.0,
``v1/spec_decode/utils.py``, ``v1/sample/rejection_sampler.py``, ``v1/spec_decode/dflash.py``):

- ``eagle_prepare_next_token_padded_kernel`` (every step): ``num_reqs``; ``num_tokens``, the row stride and the
  constexpr ``BLOCK_SIZE_TOKENS`` are 1 in steps without drafts and 1+K in steps that verify drafts.
  Key: (verify step?, class of num_reqs).
- ``eagle_prepare_inputs_padded_kernel`` (steps that verify drafts): ``num_reqs``. Key: class of num_reqs.
- ``rejection_greedy_sample_kernel`` (steps that verify drafts): ``max_spec_len`` is not specialized;
  ``is_greedy_ptr`` is None only when every request is greedy (the mixed case is compiled by vLLM's own sampler
  warm-up, ``_dummy_sampler_run``). Key: one.
- ``eagle_step_slot_mapping_metadata_kernel`` (EAGLE/MTP chains, K >= 2, every step): ``batch_size``. Key: class of
  num_reqs.
- ``copy_and_expand_dflash_inputs_kernel`` (DFlash, every step): ``total_input_tokens`` (the step's scheduled
  tokens), constexpr ``BLOCK_SIZE = min(256, next_pow2(max query len + 1 + K))`` and constexpr ``HAS_NUM_REJECTED``
  (the step verifies drafts). Key: (verify step?, BLOCK_SIZE, class of tokens).
- ``copy_and_expand_eagle_inputs_kernel`` (drafters that add input slots per request: vLLM's separate draft model
  and EAGLE's parallel drafting, every step): ``total_input_tokens`` (the step's scheduled tokens) and constexpr
  ``BLOCK_SIZE_TOKENS = min(256, next_pow2(max query len + new slots per request))``; nothing else varies with the
  batch (the rejected counts only change a fresh tensor). Key: (BLOCK_SIZE_TOKENS, class of tokens); the verify
  flag of DFlash's key is ``ANY`` here.

On CUDA our platform binds these kernels unspecialized on their batch arguments, and DFlash's at one tile size
(``portable_spec/kernels/substitutions.py``). ``Limits.batch_agnostic`` names the kernels bound so
(``batch_agnostic_kernels`` reads the bound substitutes): their keys keep only what still specializes (whether the
step verifies drafts), so DFlash no longer needs a round per tile bucket and token class. Kernels outside this model
may still specialize on the batch, so every request class keeps its round (key ``UNMODELLED``). The launchers of the
next-token and DFlash kernels also fold the with/without-drafts variant into one; the plan still counts two (an
over-approximation: it may plan a step more, never one less).

So the request classes need batches of 1, of a non-multiple of 16 and (max_num_seqs >= 16) of 16 requests, each
once without and once with drafts; DFlash (and the expand kernel of a drafter that adds input slots) adds every tile
bucket (the longest query of a step: a prompt, or a prompt chunk that joins decoding requests) times the token
classes, unless its substitute is bound (one tile, tokens unspecialized). ``reachable_keys`` lists what serving can reach
under the engine's limits; ``plan_rounds`` builds rounds (one prefill step, then optionally one step where those
requests verify K drafts while one more request may join with its prompt) until every reachable key is covered.
Kernels outside this model run in the same steps (at these batch classes) but are not planned for; the sampling
path at temperature > 0 (top-k/top-p, probabilistic rejection, logprobs) is planned by ``sampling_plan``, whose
rounds ``kernel_warmup`` runs after these.

Cost: EAGLE/MTP needs at most 3 rounds (7 steps with the clean-up); DFlash about 14 (29 steps at K=3) for vLLM's own
kernels, its prompts up to ~250 tokens, and at most 3 rounds with the substitutes bound; all within the engine's
token, length and KV-block limits (``Round.fits``).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil
from typing import Any

from portable_spec.kernels.fixed_tile import next_pow2

ONE, SIXTEEN, OTHER = "1", "16", "n"
NEXT_TOKEN = "eagle_prepare_next_token_padded_kernel"
INPUTS_PADDED = "eagle_prepare_inputs_padded_kernel"
REJECTION = "rejection_greedy_sample_kernel"
CHAIN_STEP = "eagle_step_slot_mapping_metadata_kernel"
DFLASH_INPUTS = "copy_and_expand_dflash_inputs_kernel"
EXPAND_INPUTS = "copy_and_expand_eagle_inputs_kernel"
UNMODELLED = "kernels outside this model (batch classes)"
ANY = "any"  # an argument a bound substitute does not specialize on
# The integer arguments (and, for DFlash, the tile size) each modelled kernel's key depends on: a substitute that
# unspecializes all of them (DFlash: and launches at one tile size) makes the kernel batch-agnostic.
BATCH_PARAMS = {
    NEXT_TOKEN: ("num_sampled_tokens_per_req", "num_reqs", "stride_sampled_token_ids"),
    INPUTS_PADDED: ("num_reqs",),
    CHAIN_STEP: ("batch_size",),
    DFLASH_INPUTS: ("total_input_tokens",),
    EXPAND_INPUTS: ("total_input_tokens",),
}
TILED = (DFLASH_INPUTS, EXPAND_INPUTS)  # input kernels whose tile constexpr follows the step's longest query
NEEDS_FIXED_TILE = frozenset(TILED)
MAX_DFLASH_BLOCK = 256
MAX_ROUNDS = 48  # a bound on boot time; what it leaves out is reported, never silently dropped


def int_class(value: int) -> str:
    """How Triton specializes an integer argument."""
    return ONE if value == 1 else SIXTEEN if value % 16 == 0 else OTHER


def dflash_block(max_query_len: int, k: int) -> int:
    """DFlash's ``BLOCK_SIZE`` constexpr for a step whose longest query has ``max_query_len`` tokens."""
    return tile_block(max_query_len, k + 1)


def tile_block(max_query_len: int, extra: int) -> int:
    """A tiled input kernel's tile constexpr: the power of two of the longest query plus the slots its kernel adds
    per request (DFlash: 1+K; the expand kernel: the drafter's new slots per request), at most 256."""
    return min(MAX_DFLASH_BLOCK, next_pow2(max_query_len + extra))


@dataclass(frozen=True)
class Limits:
    """What the engine allows a step (``kernel_warmup.warmup_limits`` reads it from vLLM's config and KV cache)."""

    max_reqs: int
    max_tokens: int  # tokens one step may schedule
    max_len: int  # the longest sequence, target and drafter
    k: int
    dflash: bool  # DFlash's parallel step, else EAGLE/EAGLE3/MTP
    parallel_drafting: bool = False  # one forward drafts all K (DFlash always): no chain steps
    block_sizes: tuple[int, ...] = (16,)  # one per KV-cache group
    free_blocks: int | None = None  # block ids a round may hold (1 .. num_blocks - 1); None: unlimited
    batch_agnostic: frozenset = frozenset()  # modelled kernels bound without batch specialization
    expand_slots: int = 0  # new input slots per request the drafter's expand kernel adds (0: it never runs)

    @property
    def lookahead(self) -> int:
        """Slots the scheduler allocates beyond the scheduled tokens (``Scheduler.num_lookahead_tokens``)."""
        return self.k + 1 if self.dflash else self.k

    def max_sampler_rows(self, rows_per_verifying_request: int) -> int:
        """The most rows one sampler-kernel launch can get: a request each (the main sampler), or
        ``rows_per_verifying_request`` per request a step can verify within its token budget (the rejection sampler:
        K on the V1 runner, 1+K under Model Runner V2)."""
        verifying = min(self.max_reqs, self.max_tokens // (self.k + 1))
        return max(min(self.max_reqs, self.max_tokens), verifying * rows_per_verifying_request)

    def tile_extra(self, kernel: str) -> int:
        """What a tiled input kernel adds to the longest query before rounding up to its tile."""
        return self.k + 1 if kernel == DFLASH_INPUTS else self.expand_slots

    def tiled(self) -> tuple[str, ...]:
        """The tiled input kernels this engine's drafter launches."""
        return tuple(kernel for kernel, runs in ((DFLASH_INPUTS, self.dflash), (EXPAND_INPUTS, self.expand_slots > 0))
                     if runs)

    @property
    def chain(self) -> bool:
        return not (self.dflash or self.parallel_drafting) and self.k >= 2

    @property
    def longest_query(self) -> int:
        """The longest query whose step still runs the drafter (vLLM skips it where the drafts would not fit)."""
        return min(self.max_tokens, self.max_len - self.lookahead)

    def blocks(self, tokens: int) -> int:
        """Block ids a request of ``tokens`` positions holds, summed over the KV-cache groups."""
        return sum(ceil(tokens / size) for size in self.block_sizes)


@dataclass(frozen=True)
class Step:
    query_lens: tuple[int, ...]  # scheduled tokens per request
    verify: bool  # requests verify K drafts in this step

    @property
    def num_reqs(self) -> int:
        return len(self.query_lens)

    @property
    def tokens(self) -> int:
        return sum(self.query_lens)


def batch_agnostic_kernels(bound: Any) -> frozenset:
    """The modelled kernels whose bound substitute (``kernels.registry.bound()``'s entries) unspecializes every
    argument in ``BATCH_PARAMS`` (and launches DFlash's kernel at one tile size)."""
    out = set()
    for sub in bound:
        kernel = sub.name.split(":")[0]
        params = BATCH_PARAMS.get(kernel)
        if params and set(params) <= set(sub.unspecialize) and (kernel not in NEEDS_FIXED_TILE or sub.launcher):
            out.add(kernel)
    return frozenset(out)


def _collapsed(key: tuple, limits: Limits) -> tuple:
    """``key`` with the parts a kernel does not specialize on replaced by ``ANY`` (the expand kernel has no verify
    flag; a batch-agnostic kernel none of its batch parts)."""
    if key[0] == EXPAND_INPUTS:
        key = (EXPAND_INPUTS, ANY) + key[2:]
    if key[0] not in limits.batch_agnostic:
        return key
    if key[0] == NEXT_TOKEN:
        return key[:2] + (ANY,)
    if key[0] in TILED:
        return key[:2] + (ANY, ANY)
    return (key[0], ANY)


def kernel_keys(step: Step, limits: Limits) -> frozenset:
    """The variants of the modelled kernels that ``step`` compiles (see the module docstring)."""
    reqs = int_class(step.num_reqs)
    keys = {(NEXT_TOKEN, step.verify, reqs), (UNMODELLED, step.verify, reqs)}
    if step.verify:
        keys |= {(INPUTS_PADDED, reqs), (REJECTION,)}
    if limits.chain:
        keys.add((CHAIN_STEP, reqs))
    for kernel in limits.tiled():
        block = tile_block(max(step.query_lens), limits.tile_extra(kernel))
        keys.add((kernel, step.verify, block, int_class(step.tokens)))
    return frozenset(_collapsed(key, limits) for key in keys)


@dataclass(frozen=True)
class Round:
    """Requests that prefill together (no drafts scheduled in that step), then, if ``verify``, verify K drafts each
    in one more step, where one more request may ``join`` with a prompt of that many tokens. The next round's first
    step (or the final clean-up step) finishes them.

    ``trimmed`` leaves that many drafts out of the verify step, taken from its last requests (each keeps one at
    least), as vLLM's scheduler trims a request's drafts at ``max_model_len`` or at the end of the step's token
    budget: the samplers then get draft-row counts no batch of whole requests gives (with K=3 and at most 15
    requests, never a multiple of 16)."""

    prompts: tuple[int, ...]
    verify: bool
    join: int = 0
    profile: str = "greedy"  # how its requests sample (``sampling_plan.PROFILES``); greedy: the drafter's rounds
    trimmed: int = 0  # drafts its verify step leaves out (from the last requests); 0: K for every request

    def drafts_per_request(self, k: int) -> tuple[int, ...]:
        """The drafts each request verifies in the verify step (() without one): K, less what ``trimmed`` takes
        from the last requests, each keeping one at least."""
        if not self.verify:
            return ()
        drafts, left = [k] * len(self.prompts), self.trimmed
        for i in reversed(range(len(drafts))):
            taken = min(left, k - 1)
            drafts[i], left = drafts[i] - taken, left - taken
        return tuple(drafts)

    def drafts(self, k: int) -> int:
        """The drafts its verify step verifies, over all its requests (0 without a verify step)."""
        return sum(self.drafts_per_request(k))

    def steps(self, k: int) -> tuple[Step, ...]:
        prefill = Step(self.prompts, verify=False)
        if not self.verify:
            return (prefill,)
        verifying = tuple(d + 1 for d in self.drafts_per_request(k))
        return prefill, Step(verifying + ((self.join,) if self.join else ()), verify=True)

    def blocks(self, limits: Limits) -> int:
        """Block ids the round's requests hold at its end (each as many as the scheduler would give it)."""
        grown = limits.k + 1 if self.verify else 0
        held = sum(limits.blocks(p + grown + limits.lookahead) for p in self.prompts)
        return held + (limits.blocks(self.join + limits.lookahead) if self.join else 0)

    def fits(self, limits: Limits) -> bool:
        if not self.prompts or min(self.prompts) < 1 or (self.join and not self.verify):
            return False
        if self.trimmed and not (self.verify and 0 < self.trimmed <= len(self.prompts) * (limits.k - 1)):
            return False
        reqs = len(self.prompts) + (1 if self.join else 0)
        tokens = max(step.tokens for step in self.steps(limits.k))
        # A request's drafts must fit behind its sequence, or vLLM skips the drafter (``_input_fits_in_drafter``).
        longest = max(self.prompts) + (limits.k + 1 if self.verify else 0) + limits.lookahead
        return (reqs <= limits.max_reqs and tokens <= limits.max_tokens and longest <= limits.max_len
                and self.join + limits.lookahead <= limits.max_len
                and (limits.free_blocks is None or self.blocks(limits) <= limits.free_blocks))


def round_keys(rnd: Round, limits: Limits) -> frozenset:
    return frozenset().union(*(kernel_keys(step, limits) for step in rnd.steps(limits.k)))


def request_classes(max_reqs: int) -> list[str]:
    return [ONE] + ([OTHER] if max_reqs >= 2 else []) + ([SIXTEEN] if max_reqs >= 16 else [])


def dflash_buckets(limits: Limits) -> dict[int, tuple[int, int]]:
    """DFlash's ``BLOCK_SIZE`` -> the range of longest-query lengths that select it."""
    return tile_buckets(limits, DFLASH_INPUTS)


def tile_buckets(limits: Limits, kernel: str) -> dict[int, tuple[int, int]]:
    """A tiled input kernel's tile -> the range of longest-query lengths that select it (within what a step can
    schedule)."""
    extra, top = limits.tile_extra(kernel), limits.longest_query
    out, block = {}, tile_block(1, extra)
    while block <= MAX_DFLASH_BLOCK:
        lo = 1 if block == tile_block(1, extra) else block // 2 - extra + 1
        hi = top if block == MAX_DFLASH_BLOCK else min(block - extra, top)
        if lo <= hi:
            out[block] = (lo, hi)
        block *= 2
    return out


def interval_classes(lo: int, hi: int) -> set[str]:
    """The integer classes of the values in ``[lo, hi]``."""
    if lo > hi:
        return set()
    out = {ONE} if lo <= 1 <= hi else set()
    if hi // 16 * 16 >= max(lo, 16):
        out.add(SIXTEEN)
    low = max(lo, 2)
    if low < hi or (low == hi and low % 16):
        out.add(OTHER)
    return out


def reachable_keys(limits: Limits) -> frozenset:
    """Every modelled kernel variant serving can reach under ``limits`` (a step holds any mix of prompt chunks and
    requests verifying K drafts, up to ``max_reqs`` requests and ``max_tokens`` tokens)."""
    keys = {(REJECTION,)}
    for reqs in request_classes(limits.max_reqs):
        keys |= {(NEXT_TOKEN, False, reqs), (NEXT_TOKEN, True, reqs), (INPUTS_PADDED, reqs),
                 (UNMODELLED, False, reqs), (UNMODELLED, True, reqs)}
        if limits.chain:
            keys.add((CHAIN_STEP, reqs))
    for kernel in limits.tiled():
        keys |= _tiled_reachable(limits, kernel)
    return frozenset(_collapsed(key, limits) for key in keys)


def _tiled_reachable(limits: Limits, kernel: str) -> set:
    k, n, cap = limits.k, limits.max_reqs, limits.max_tokens
    keys = set()
    for block, (lo, hi) in tile_buckets(limits, kernel).items():
        # Prefill-only steps: the longest prompt (chunk) picks the bucket, the others are no longer than it.
        keys |= {(kernel, False, block, c) for c in interval_classes(lo, min(cap, n * hi))}
        # Steps that verify drafts: requests of 1+K tokens, plus prompt chunks (a longer one picks the bucket).
        if lo <= k + 1 <= hi:
            top = min(cap, n * (k + 1)) if n >= 2 else k + 1
            keys |= {(kernel, True, block, c) for c in interval_classes(k + 1, top)}
        longest = min(hi, cap - k - 1)
        shortest = max(lo, k + 2)
        if n >= 2 and shortest <= longest:
            keys |= {(kernel, True, block, c)
                     for c in interval_classes(shortest + k + 1, min(cap, k + 1 + (n - 1) * longest))}
    return keys


def class_values(lo: int, hi: int, cls: str):
    """Values of class ``cls`` in ``[lo, hi]``, smallest first (lazily; a few are ever looked at)."""
    if cls == ONE:
        yield from ([1] if lo <= 1 <= hi else [])
    elif cls == SIXTEEN:
        yield from range(max(16, ceil(lo / 16) * 16), hi + 1, 16)
    else:
        yield from (v for v in range(max(lo, 2), hi + 1) if v % 16)


def prompts_summing_to(count: int, total: int, lo: int, hi: int) -> tuple[int, ...] | None:
    """``count`` prompt lengths summing to ``total`` whose longest lies in ``[lo, hi]`` (None: impossible)."""
    longest = max(lo, ceil(total / count)) if count >= 1 else 0
    if count < 1 or longest > hi or total - longest < count - 1:
        return None
    rest, extra = divmod(total - longest, count - 1) if count > 1 else (0, 0)
    return (longest,) + tuple(rest + (1 if i < extra else 0) for i in range(count - 1))


def plan_rounds(limits: Limits, max_rounds: int = MAX_ROUNDS) -> tuple[list[Round], frozenset]:
    """Rounds that cover ``reachable_keys(limits)``, and the keys they leave uncovered (empty unless a bound or the
    KV cache forbids a round). Deterministic: every tensor-parallel rank plans the same steps."""
    goal = reachable_keys(limits)
    rounds: list[Round] = []
    covered: set = set()

    def add(count: int, verify: bool, join: int = 0) -> None:
        """A round of ``count`` requests whose prompts also cover a tiled kernel's prefill key still wanted, if any can."""
        plain = Round((limits.k + 2,) * count, verify, join)  # longer than a verify query: never a uniform decode
        rnd = _covering_prefill(limits, count, verify, join, goal - covered) or plain
        if verify and not rnd.fits(limits) and not join:  # too many tokens to verify: at least prefill them
            rnd = _covering_prefill(limits, count, False, 0, goal - covered) or Round(plain.prompts, False)
        if rnd.fits(limits) and len(rounds) < max_rounds and round_keys(rnd, limits) - covered:
            rounds.append(rnd)
            covered.update(round_keys(rnd, limits))

    for count in _request_counts(limits.max_reqs):
        add(count, verify=True)
    for key in sorted(goal - covered, key=_order):
        if key not in covered and key[0] == DFLASH_INPUTS and key[1] is True:
            found = _verify_step_for(limits, key)
            if found is not None:
                add(*found)
    for key in sorted(goal - covered, key=_order):
        if key not in covered and key[0] in TILED:
            for count in range(1, min(limits.max_reqs, 17) + 1):
                rnd = _covering_prefill(limits, count, False, 0, {key})
                if rnd is not None:
                    add(count, verify=False)
                    break
    return rounds, goal - covered


def _order(key: tuple) -> tuple:
    return tuple((type(part).__name__, part) for part in key)


def _request_counts(max_reqs: int) -> list[int]:
    """One batch per request class: 1, a non-multiple of 16, 16."""
    counts = {ONE: 1, OTHER: min(3, max_reqs), SIXTEEN: 16}
    return [counts[c] for c in request_classes(max_reqs)]


def _covering_prefill(limits: Limits, count: int, verify: bool, join: int, wanted: set) -> Round | None:
    """A round of ``count`` requests whose prefill step compiles one of the ``wanted`` prefill keys of a tiled input
    kernel (the expand kernel's keys, having no verify flag, are all prefill keys: a prefill of the same lengths
    compiles what a verify step would)."""
    for key in sorted(wanted, key=_order):
        if key[0] not in TILED or key[1] is True or key[2] not in (buckets := tile_buckets(limits, key[0])):
            continue
        lo, hi = buckets[key[2]]
        # The smallest total of the class: the likeliest to fit (a larger one holds more tokens and blocks).
        total = next(class_values(lo + count - 1, min(limits.max_tokens, count * hi), key[3]), None)
        prompts = None if total is None else prompts_summing_to(count, total, lo, hi)
        if prompts is not None and Round(prompts, verify, join).fits(limits):
            return Round(prompts, verify, join)
    return None


def _verify_step_for(limits: Limits, key: tuple) -> tuple[int, bool, int] | None:
    """(requests, True, join prompt length) of a round whose verify step compiles DFlash ``key``."""
    _, _, block, cls = key
    k = limits.k
    lo, hi = dflash_buckets(limits).get(block, (1, 0))
    joins = [0, *range(1, k + 2)] if lo <= k + 1 <= hi else []
    joins += range(max(lo, k + 2), hi + 1)
    for count in range(1, min(limits.max_reqs, 17) + 1):
        for join in joins:
            step = Step((k + 1,) * count + ((join,) if join else ()), verify=True)
            if (dflash_block(max(step.query_lens), k) == block and int_class(step.tokens) == cls
                    and Round((k + 2,) * count, True, join).fits(limits)):
                return count, True, join
    return None
