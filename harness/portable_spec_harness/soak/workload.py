"""The soak's requests: one seeded plan per pair, sent identically to every server of that pair.

Each request belongs to a class that makes one condition of issue 22 happen; a class says what it aims at
(``aims``) and what its output must equal (``compare``: the no-speculation server for greedy requests, the eager
drafter's server for seeded sampled ones, nothing for unseeded or aborted ones). What actually happened is counted
from the responses and the engine's metrics (``conditions``), never from the aims.

The construction of the zoo's pairs (``greedy``: the target's greedy output for any prompt,
``model_zoo.expected_output``) is used only to aim: the end-of-sequence ids are tokens the greedy output of an
``eos`` request reaches mid-generation, and a ``stop_string`` request's stop string is text its greedy output
produces mid-generation. Bodies are OpenAI ``/v1/completions`` requests with vLLM's extra fields
(``return_token_ids``, ``priority``, ``ignore_eos``, ``top_k``, ``repetition_penalty``, ``response_format``), as
vLLM 0.26.0's ``CompletionRequest`` takes them (``tests/test_soak_vllm_shapes.py`` validates every class's body).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from portable_spec_harness.soak import budget

BOS_ID, EOS_ID, FIRST_ORDINARY_ID, VOCAB = 1, 2, 8, 1024
"""The zoo's tokenizer (``model_zoo.SPECIAL_TOKENS``: 8 special ids first, 1,024 ids)."""
PRIORITY_PROTECTED, PRIORITY_DEFAULT = 0, 1
"""``--scheduling-policy priority``: lower runs first and is preempted last (see ``budget``)."""

STRUCTURED_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"color": {"type": "string", "enum": ["red", "green", "blue"]},
                   "size": {"type": "string", "enum": ["S", "M", "L"]}},
    "required": ["color", "size"], "additionalProperties": False}
"""Small and closed: the grammar ends the object after a few tokens and then allows only the tokenizer's EOS, so
a structured request also ends on a real EOS (``finish_reason`` stop, ``stop_reason`` null)."""

# class -> share of the requests, in a fixed order (the plan's counts follow it)
CLASSES: dict[str, float] = {
    "greedy": 0.25, "length_window": 0.06, "max_model_len": 0.03, "eos": 0.08, "stop_string": 0.06,
    "structured": 0.08, "sampled_seeded": 0.23, "sampled_unseeded": 0.09, "abort": 0.12}
GREEDY_CLASSES = ("greedy", "length_window", "max_model_len", "eos", "stop_string", "structured")


def structured_outputs() -> list[str]:
    """Every text the schema allows with compact JSON (the servers run xgrammar with ``disable_any_whitespace``)."""
    props = STRUCTURED_SCHEMA["properties"]
    return [json.dumps({"color": c, "size": s}, separators=(",", ":"))
            for c in props["color"]["enum"] for s in props["size"]["enum"]]


def valid_structured(text: str) -> bool:
    try:
        value = json.loads(text)
    except ValueError:
        return False
    props = STRUCTURED_SCHEMA["properties"]
    return (isinstance(value, dict) and set(value) == set(props)
            and all(value[k] in props[k]["enum"] for k in props))


SOLO_SUFFIX = ":solo"


@dataclass(frozen=True)
class RequestSpec:
    rid: str
    klass: str
    body: dict[str, Any]
    """The ``/v1/completions`` body without ``model`` and ``stream_options`` (the load generator adds them)."""
    arrival_s: float
    compare: str | None
    """``nospec``, ``eager`` or None: which server's output this request's must equal."""
    match: str = "exact"
    """``exact`` (every token id) or ``stop_prefix`` (a stop string: vLLM ends the request on the step whose tokens
    complete the string and keeps that step's later tokens, ``v1/engine/detokenizer.py``; so the text must be equal
    and the reference's ids a prefix of ours with at most K more)."""
    abort_after_chunks: int = 0
    """> 0: the client disconnects after this many streamed chunks with tokens."""
    deadline_s: float = budget.REQUEST_DEADLINE_S
    aims: tuple[str, ...] = ()

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream"))

    @property
    def greedy(self) -> bool:
        return self.body.get("temperature") == 0

    @property
    def n(self) -> int:
        return int(self.body.get("n", 1))


@dataclass
class Workload:
    pair: str
    seed: int
    requests: list[RequestSpec]
    eos_ids: list[int]
    """Extra end-of-sequence ids: the servers' ``--generation-config`` lists them beside the tokenizer's EOS."""
    notes: list[str] = field(default_factory=list)
    pressure: list[RequestSpec] = field(default_factory=list)
    """Sent all at once after the load (``pressure_wave``): greedy requests that together need twice the KV cache,
    so every server preempts whatever the load's timing did."""

    def judged_requests(self) -> list[RequestSpec]:
        """The load's requests and the pressure wave's: what the greedy comparison and the error count cover."""
        return [*self.requests, *self.pressure]

    def generation_config(self) -> dict[str, Any]:
        return {"bos_token_id": BOS_ID, "eos_token_id": [EOS_ID, *self.eos_ids], "pad_token_id": 0}

    def solo_requests(self) -> list[RequestSpec]:
        """The seeded sampled requests again, for one at a time after the load (``SOLO_SUFFIX`` on the id, a
        ``cache_salt`` of their own so no prefix-cache hit changes the prefill's shape, never aborted): under load
        a sampled token depends on what else shares the step (the target's logits are not batch-invariant; vLLM's
        own eager drafter with and without async scheduling gave different seeded outputs on the H100), so our
        drafter's sampled output can equal the eager drafter's only where both see the same batches."""
        return [RequestSpec(r.rid + SOLO_SUFFIX, r.klass, {**r.body, "stream": False, "cache_salt": r.rid + SOLO_SUFFIX},
                            0.0, "eager", r.match, 0, r.deadline_s, ("seeded_solo",))
                for r in self.requests if r.compare == "eager"]

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.requests:
            out[r.klass] = out.get(r.klass, 0) + 1
        return out


def class_counts(n: int) -> dict[str, int]:
    """How many requests of each class for ``n`` requests: at least one each, the rest by share."""
    counts = {k: max(1, round(n * share)) for k, share in CLASSES.items()}
    while sum(counts.values()) > n and max(counts.values()) > 1:
        counts[max(counts, key=counts.get)] -= 1
    counts["greedy"] += n - sum(counts.values())
    return counts


class _Prompts:
    """Seeded prompts: every one starts with ``<s>`` and has at least 3 tokens (the context heads' bound)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.prefixes = [self.tokens(288), self.tokens(160)]  # 18 and 10 KV blocks: prefix-cache hits when shared

    def tokens(self, n: int) -> list[int]:
        return [BOS_ID] + [self.rng.randrange(FIRST_ORDINARY_ID, VOCAB) for _ in range(max(n, 3) - 1)]

    def short(self) -> list[int]:
        return self.tokens(self.rng.randint(3, 24))

    def medium(self) -> list[int]:
        return self.tokens(self.rng.randint(40, budget.SAMPLED_MAX_PROMPT))

    def long(self) -> list[int]:
        return self.tokens(self.rng.randint(budget.LONG_PREFILL_TOKEN_THRESHOLD + 50, 520))

    def shared(self) -> list[int]:
        prefix = self.rng.choice(self.prefixes)
        return prefix + [self.rng.randrange(FIRST_ORDINARY_ID, VOCAB) for _ in range(self.rng.randint(1, 8))]

    def any_greedy(self) -> tuple[str, list[int]]:
        kind = self.rng.choices(("short", "medium", "long", "shared"), weights=(3, 2, 3, 3))[0]
        return kind, getattr(self, kind)()


def window_max_tokens(rng: random.Random, low: int, high: int) -> int:
    """A ``max_tokens`` that a full window cannot end on: after the prefill's token each verify step of a fully
    accepted window adds 1 + K, so ``(max_tokens - 1) % (1 + K) != 0`` ends inside one."""
    while True:
        value = rng.randint(low, high)
        if (value - 1) % (1 + budget.K):
            return value


def build(pair: str, seed: int, n_requests: int, greedy: Callable[[Sequence[int], int], list[int]],
          detokenize: Callable[[Sequence[int]], str]) -> Workload:
    """The plan for ``pair``: ``n_requests`` requests in seeded order, the first ``budget.BURST`` at once, the rest
    with exponential gaps. ``greedy(prompt, n)`` is the target's construction, ``detokenize(ids)`` the zoo tokenizer's
    decode (both only aim the ``eos`` and ``stop_string`` requests)."""
    rng = random.Random(f"soak-{pair}-{seed}")
    prompts = _Prompts(rng)
    forbidden_eos = {t for t in range(VOCAB) if detokenize([t]) and any(
        detokenize([t]) in text for text in structured_outputs())}
    eos_ids: list[int] = []
    notes: list[str] = []
    specs: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
    for klass, count in class_counts(n_requests).items():
        for _ in range(count):
            body, extra = _make(klass, rng, prompts, greedy, detokenize, eos_ids, forbidden_eos, notes)
            specs.append((klass, body, extra))
    rng.shuffle(specs)
    requests, t = [], 0.0
    for i, (klass, body, extra) in enumerate(specs):
        if i >= budget.BURST:
            t += rng.expovariate(1.0 / budget.MEAN_GAP_S)
        rid = f"{pair}-{seed}-{i:03d}-{klass}"
        requests.append(RequestSpec(rid=rid, klass=klass, body={**body, "request_id": f"soak-{rid}"},
                                    arrival_s=round(t, 4), **extra))
    return Workload(pair, seed, requests, sorted(set(eos_ids)), notes, pressure_wave(pair, seed))


def pressure_wave(pair: str, seed: int) -> list[RequestSpec]:
    """``MAX_NUM_SEQS`` greedy requests of ``PRESSURE_PROMPT`` + ``PRESSURE_MAX_TOKENS`` tokens (``budget``), from
    their own seeded stream (the load's plan does not move), each with a ``cache_salt`` of its own so no
    prefix-cache hit shrinks it; compared with the no-speculation server like every greedy request."""
    rng = random.Random(f"soak-{pair}-{seed}-pressure")
    prompts = _Prompts(rng)
    specs = []
    for i in range(budget.MAX_NUM_SEQS):
        rid = f"{pair}-{seed}-p{i:02d}-pressure"
        body = {"prompt": prompts.tokens(budget.PRESSURE_PROMPT), "max_tokens": budget.PRESSURE_MAX_TOKENS,
                "temperature": 0.0, "ignore_eos": True, "stream": False, "priority": PRIORITY_DEFAULT,
                "return_token_ids": True, "cache_salt": rid, "request_id": f"soak-{rid}"}
        specs.append(RequestSpec(rid=rid, klass="pressure", body=body, arrival_s=0.0, compare="nospec",
                                 aims=("preempted",)))
    return specs


def _greedy_body(prompt: list[int], max_tokens: int, rng: random.Random, **more: Any) -> dict[str, Any]:
    return {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0.0, "ignore_eos": True,
            "stream": rng.random() < 0.5, "priority": PRIORITY_DEFAULT, "return_token_ids": True, **more}


def _make(klass: str, rng: random.Random, prompts: _Prompts, greedy: Callable, detokenize: Callable,
          eos_ids: list[int], forbidden_eos: set[int], notes: list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """One request of ``klass``: its body and its ``RequestSpec`` fields besides id and arrival."""
    if klass == "greedy":
        kind, prompt = prompts.any_greedy()
        more: dict[str, Any] = {}
        if rng.random() < 0.3:
            more["logprobs"] = 2
        if rng.random() < 0.3:
            more.update(repetition_penalty=1.1, presence_penalty=0.3, frequency_penalty=0.2)
        aims = {"long": ("chunked_prefill",), "shared": ("prefix_cache_hits",)}.get(kind, ())
        return (_greedy_body(prompt, rng.randint(16, 64), rng, **more),
                {"compare": "nospec", "aims": ("preempted", "queued", *aims)})
    if klass == "length_window":
        prompt = rng.choice((prompts.short, prompts.medium, prompts.shared))()
        return (_greedy_body(prompt, window_max_tokens(rng, 9, 60), rng),
                {"compare": "nospec", "aims": ("max_tokens_in_window",)})
    if klass == "max_model_len":
        room = rng.choice([m for m in range(5, 13) if (m - 1) % (1 + budget.K)])
        prompt = prompts.tokens(budget.MAX_MODEL_LEN - room)
        return (_greedy_body(prompt, room, rng), {"compare": "nospec", "aims": ("max_model_len", "chunked_prefill")})
    if klass == "eos":
        prompt = prompts.short() if rng.random() < 0.5 else prompts.medium()
        max_tokens = rng.randint(32, 64)
        out = greedy(prompt, max_tokens)
        choices = [p for p in range(4, len(out) - 1) if out[p] not in out[:p] and out[p] not in forbidden_eos]
        if choices:
            eos_ids.append(out[rng.choice(choices)])
        else:
            notes.append(f"eos: no aim in {len(out)} greedy tokens")
        return (_greedy_body(prompt, max_tokens, rng, ignore_eos=False), {"compare": "nospec", "aims": ("eos",)})
    if klass == "stop_string":
        prompt = prompts.short() if rng.random() < 0.5 else prompts.medium()
        max_tokens = rng.randint(32, 64)
        stop = _stop_string(greedy(prompt, max_tokens), detokenize, rng)
        if stop is None:
            notes.append("stop_string: no aim found")
        return (_greedy_body(prompt, max_tokens, rng, stop=[stop or "\u2603"]),
                {"compare": "nospec", "match": "stop_prefix", "aims": ("stop_string",)})
    if klass == "structured":
        prompt = prompts.short()
        rf = {"type": "json_schema", "json_schema": {"name": "soak", "schema": STRUCTURED_SCHEMA}}
        return (_greedy_body(prompt, 48, rng, ignore_eos=False, response_format=rf),
                {"compare": "nospec", "aims": ("structured_output", "eos")})
    if klass in ("sampled_seeded", "sampled_unseeded"):
        seeded = klass == "sampled_seeded"
        body: dict[str, Any] = {
            "prompt": prompts.short() if rng.random() < 0.6 else prompts.medium(),
            "max_tokens": rng.randint(12, budget.SAMPLED_MAX_TOKENS), "temperature": rng.choice((0.6, 0.8, 1.0)),
            "ignore_eos": True, "stream": rng.random() < 0.5, "return_token_ids": True,
            "priority": PRIORITY_PROTECTED if seeded else PRIORITY_DEFAULT}
        if rng.random() < 0.5:
            body["top_p"] = rng.choice((0.8, 0.9, 0.95))
        if rng.random() < 0.5:
            body["top_k"] = rng.choice((5, 20, 50))
        if rng.random() < 0.3:
            body.update(repetition_penalty=1.2, presence_penalty=0.4)
        if rng.random() < 0.3:
            body["logprobs"] = 1
        aims: tuple[str, ...] = ("mixed_sampling_batches",)
        if seeded:
            body["seed"] = rng.randrange(1, 2**31)
            if rng.random() < 0.3:
                body["n"] = budget.SAMPLED_MAX_N
                aims += ("n_gt_1",)
        return body, {"compare": "eager" if seeded else None, "aims": aims}
    if klass == "abort":
        kind, prompt = prompts.any_greedy()
        body = _greedy_body(prompt, 400 if len(prompt) < 500 else 200, rng, stream=True)
        if rng.random() < 0.4:  # aborts hit sampled requests too
            body.update(temperature=1.0, top_k=20)
        return body, {"compare": None, "abort_after_chunks": rng.randint(1, 4), "aims": ("aborted",)}
    raise ValueError(f"unknown request class {klass!r}")


def _stop_string(out: list[int], detokenize: Callable, rng: random.Random) -> str | None:
    """Text the greedy output first completes at a token mid-generation (>= 2 characters, none of it seen before)."""
    positions = list(range(3, len(out) - budget.K - 2))
    rng.shuffle(positions)
    for p in positions:
        before, upto = detokenize(out[:p]), detokenize(out[: p + 1])
        piece = upto[len(before):].strip()
        if len(piece) >= 2 and upto.startswith(before) and piece not in before:
            return piece
    return None
