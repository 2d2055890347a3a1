"""The context targets' greedy rule: the next token is a function of the previous two tokens, known by construction.

Tables (seeded, over the zoo's 1024-token vocabulary and tokenizer):

* ``table[g][c1][c2]``: 8 x 8 x 8 = 512 distinct printable tokens (of the 855 the tokenizer has). A table token ``t``
  has coordinates ``group(t) = g`` and ``klass(t) = (c1, c2)``; special, mask and other printable tokens are never
  produced (they may appear in prompts).
* ``A(t)``: the group of the token that follows ``t`` when ``t`` is the current token. For a table token it is
  ``phi(group(t))``, ``phi`` one seeded 8-cycle on the groups (no fixed point); for any other token it is seeded.
* ``B1(t), B2(t)``: the class of the token after next when ``t`` is the previous token. For a table token it is
  ``sigma[group(t)](klass(t))``, ``sigma[g]`` seeded permutations of the 64 classes chosen so that, along each orbit
  of ``phi^2`` (the groups seen every other position), their product is one 64-cycle: the classes of the even and of
  the odd positions each run through all 64 classes before repeating, so a greedy output repeats only after 512
  tokens (a random ``B`` repeats after 8 to 100). Any other token's ``B1, B2`` are seeded.

The rule, at every position ``p`` (position 0 counts as its own previous token)::

    x[p + 1] = table[A(x[p])][B1(x[p - 1])][B2(x[p - 1])]

Consequences the tests and the heads rely on:

* the group of every generated token is ``phi`` of the group before it, so ``A(x[p]) != A(x[p - 1])`` from the
  second generated token on (``phi`` has no fixed point): reading the previous position where the current one is
  meant (a query position off by one, a key hidden by a short ``seq_lens``) changes the group of the prediction,
  always; a wrong read of the previous position changes its class unless the two tokens share a class (1 in 64 for
  unrelated tokens);
* two steps ahead is still linear in what a drafter sees: ``x[n + 2] = table[phi(A(x[n]))][B(x[n])]`` (the group of
  ``x[n + 1]`` is ``A(x[n])``, so ``A(x[n + 1]) = phi(A(x[n]))``): the DFlash head predicts two positions exactly.

Entry points: :func:`context_function`, :meth:`ContextFunction.continuation` (the greedy output for any prompt),
:func:`simulate_spec_decode`, :func:`draft_proposer`, :func:`context_prompts`.
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from portable_spec.errors import PortableSpecError
from portable_spec_harness import zoo_base

GROUPS = 8
CLASSES = 8  # values of B1 and of B2 each: 64 classes
TABLE_SIZE = GROUPS * CLASSES * CLASSES


@dataclass(frozen=True)
class ContextFunction:
    table: tuple[int, ...]  # flat: table[(g * CLASSES + c1) * CLASSES + c2]
    phi: tuple[int, ...]
    A: tuple[int, ...]
    B1: tuple[int, ...]
    B2: tuple[int, ...]

    def produce(self, group: int, c1: int, c2: int) -> int:
        return self.table[(group * CLASSES + c1) * CLASSES + c2]

    def next_token(self, prev: int, cur: int) -> int:
        """The target's greedy token after ``cur`` when ``prev`` came before it."""
        return self.produce(self.A[cur], self.B1[prev], self.B2[prev])

    def continuation(self, prompt_ids: Sequence[int], max_tokens: int) -> list[int]:
        """The target's greedy output for ``prompt_ids`` (any tokens, at least one)."""
        if not prompt_ids:
            raise PortableSpecError("context_zoo: a continuation needs at least one prompt token")
        seq = [int(t) for t in prompt_ids]
        for _ in range(max_tokens):
            seq.append(self.next_token(seq[-2] if len(seq) > 1 else seq[-1], seq[-1]))
        return seq[len(prompt_ids):]

    def coordinates(self, token: int) -> tuple[int, int, int] | None:
        """(group, c1, c2) of a table token, None for any other token."""
        index = self._index().get(token)
        if index is None:
            return None
        return index // (CLASSES * CLASSES), (index // CLASSES) % CLASSES, index % CLASSES

    def _index(self) -> dict[int, int]:
        return _table_index(self.table)

    def as_json(self) -> dict[str, Any]:
        return {"kind": "context", "groups": GROUPS, "classes": CLASSES, "table": list(self.table),
                "phi": list(self.phi), "A": list(self.A), "B1": list(self.B1), "B2": list(self.B2)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "ContextFunction":
        return cls(tuple(data["table"]), tuple(data["phi"]), tuple(data["A"]), tuple(data["B1"]), tuple(data["B2"]))


@functools.lru_cache(maxsize=8)
def _table_index(table: tuple[int, ...]) -> dict[int, int]:
    return {t: i for i, t in enumerate(table)}


@functools.lru_cache(maxsize=4)
def context_function(seed: int = 0) -> ContextFunction:
    """The seeded tables; the printable tokens are those of the zoo's tokenizer (``model_zoo.zoo_function``)."""
    vocab = zoo_base.VOCAB
    printable = sorted(zoo_base.zoo_function(seed).cycle)
    rng = random.Random(f"context-{seed}")
    table = tuple(rng.sample(printable, TABLE_SIZE))
    order = list(range(GROUPS))
    rng.shuffle(order)
    phi = [0] * GROUPS
    for i, g in enumerate(order):
        phi[g] = order[(i + 1) % GROUPS]
    index = _table_index(table)
    sigma = _class_permutations(phi, rng)
    A, B1, B2 = [], [], []
    for t in range(vocab):
        if t in index:
            g, c = divmod(index[t], CLASSES * CLASSES)
            A.append(phi[g])
            b = sigma[g][c]
        else:
            A.append(rng.randrange(GROUPS))
            b = rng.randrange(CLASSES * CLASSES)
        B1.append(b // CLASSES)
        B2.append(b % CLASSES)
    return ContextFunction(table, tuple(phi), tuple(A), tuple(B1), tuple(B2))


def _class_permutations(phi: Sequence[int], rng: random.Random) -> list[list[int]]:
    """``sigma[g]``: a permutation of the 64 classes per group whose product along each ``phi^2`` orbit (in orbit
    order) is one seeded 64-cycle, so the class of every other position cycles through all 64 classes."""
    n = CLASSES * CLASSES
    sigma: list[list[int] | None] = [None] * GROUPS
    for start in range(GROUPS):
        if sigma[start] is not None:
            continue
        orbit, g = [], start
        while g not in orbit:
            orbit.append(g)
            g = phi[phi[g]]
        for g in orbit[1:]:
            perm = list(range(n))
            rng.shuffle(perm)
            sigma[g] = perm
        order = list(range(n))
        rng.shuffle(order)
        cycle = [0] * n
        for i, c in enumerate(order):
            cycle[c] = order[(i + 1) % n]
        rest = list(range(n))  # sigma[orbit[-1]] o ... o sigma[orbit[1]]
        for g in orbit[1:]:
            rest = [sigma[g][c] for c in rest]
        inverse = [0] * n
        for c, image in enumerate(rest):
            inverse[image] = c
        sigma[orbit[0]] = [inverse[cycle[c]] for c in range(n)]  # rest o sigma[orbit[0]] == cycle
    return sigma  # type: ignore[return-value]


# ------------------------------------------------------------------------------------------- what drafts propose


def dflash_proposal(fn: ContextFunction, history: Sequence[int], k: int) -> list[int]:
    """The context DFlash head's k drafts after ``history`` (prompt + output, the last token the bonus): slot 1 is
    the next token, every later slot the token after it (exact for slot 2, always wrong from slot 3 on)."""
    bonus = history[-1]
    first = fn.next_token(history[-2] if len(history) > 1 else bonus, bonus)
    second = fn.produce(fn.phi[fn.A[bonus]], fn.B1[bonus], fn.B2[bonus])
    return ([first] + [second] * (k - 1))[:k]


def draft_proposer(method: str, seed: int = 0) -> Callable[[Sequence[int], int], list[int]]:
    """``propose(history, k)`` of a context pair's perfect head: EAGLE-1, EAGLE-3 and MTP drafts are the target's own
    continuation (exact from a prompt of 2 tokens, 3 for MTP); DFlash as :func:`dflash_proposal`."""
    fn = context_function(seed)
    if method == "dflash":
        return lambda history, k: dflash_proposal(fn, history, k)
    return lambda history, k: fn.continuation(history, k)


def simulate_spec_decode(fn: ContextFunction, propose: Callable[[Sequence[int], int], list[int]],
                         prompt_ids: Sequence[int], max_tokens: int, k: int) -> dict[str, Any]:
    """Ideal greedy speculative decoding on a context target: drafts, accepted tokens per position, output. vLLM may
    schedule a request's last steps differently (drafts trimmed near ``max_tokens``), so compare counts with vLLM
    only where they cannot depend on that (rates of perfect heads, or ``acceptance_per_position`` below)."""
    seq = [int(t) for t in prompt_ids]
    seq += fn.continuation(seq, 1)  # the prefill step samples one token
    per_pos, drafts = [0] * k, 0
    while len(seq) - len(prompt_ids) < max_tokens:
        proposal = propose(seq, k)
        drafts += 1
        for i, d in enumerate(proposal):
            if d != fn.continuation(seq, 1)[0]:
                break
            per_pos[i] += 1
            seq.append(d)
        seq += fn.continuation(seq, 1)
    output = seq[len(prompt_ids):len(prompt_ids) + max_tokens]
    return {"output": output, "num_drafts": drafts, "num_draft_tokens": drafts * k,
            "num_accepted_tokens": sum(per_pos), "accepted_per_position": per_pos}


def expected_acceptance(method: str, k: int) -> list[float]:
    """Exact per-position acceptance of the perfect context heads (prompts of >= 3 tokens)."""
    if method == "dflash":
        return ([1.0, 1.0] + [0.0] * k)[:k]
    return [1.0] * k


# ----------------------------------------------------------------------------------------------------- prompts

SHARED_PREFIX_TOKENS = 288  # 18 KV blocks of 16: prefix-cache hits leave 1..6-token prefill tails
LONG_PROMPTS = (300, 520)  # more than 16 KV blocks of 16 tokens


def context_prompts(seed: int = 0, *, max_model_len: int = 1024, max_tokens: int = 48) -> list[dict[str, Any]]:
    """Prompts for the context pairs, each with the target's greedy output (``expected_output``, ``max_tokens``
    tokens) and a ``name`` saying what it is for:

    * ``short_<n>``: 3..12 tokens;
    * ``long_<n>``: more than 256 tokens (> 16 KV blocks of 16);
    * ``prefix_<i>``: three prompts sharing a 288-token (18-block) prefix with 1-, 3- and 6-token tails: with prefix
      caching on, their prefills are ragged (query lengths 1, 3, 6 next to decodes of 1 + K);
    * ``near_max_len``: ``max_model_len - max_tokens`` tokens, so the request ends at ``max_model_len`` and vLLM trims
      its last drafts (shorter verify queries in a batch of full ones).

    Every prompt starts with ``<s>`` and has at least 3 tokens (the heads' exactness bound); the other tokens are
    seeded non-special ids. Submitted together they give batches whose query lengths differ.
    """
    fn = context_function(seed)
    rng = random.Random(f"context-prompts-{seed}")
    pool = range(len(zoo_base.SPECIAL_TOKENS), zoo_base.VOCAB)

    def tokens(n: int) -> list[int]:
        return [zoo_base.BOS_ID] + [rng.choice(pool) for _ in range(n - 1)]

    prompts: list[tuple[str, list[int]]] = [(f"short_{n}", tokens(n)) for n in (3, 5, 8, 12)]
    prompts += [(f"long_{n}", tokens(n)) for n in LONG_PROMPTS if n + max_tokens <= max_model_len]
    prefix = tokens(SHARED_PREFIX_TOKENS)
    if SHARED_PREFIX_TOKENS + 6 + max_tokens <= max_model_len:
        prompts += [(f"prefix_{i}", prefix + [rng.choice(pool) for _ in range(tail)])
                    for i, tail in enumerate((1, 3, 6))]
    near = max_model_len - max_tokens
    if near >= 3:
        prompts.append(("near_max_len", tokens(near)))
    return [{"name": name, "prompt_token_ids": ids, "expected_output": fn.continuation(ids, max_tokens)}
            for name, ids in prompts]
