"""Draft-step graph keys that carry the query length, and the dispatcher that maps a batch to one of them.

vLLM's ``BatchDescriptor`` has no query-length field and a ``CudagraphDispatcher`` fixes one
``uniform_decode_query_len``; a FULL drafter needs two (the first step at the target's 1+K, EAGLE chain steps at 1).
So every ``DraftKey`` names its step kind and query length; within one query length the padding is vLLM's own
(``tests/test_draft_dispatcher.py`` checks it against real ``CudagraphDispatcher`` objects). Step kinds: ``first``
(EAGLE/MTP first pass at 1+K), ``first_fused`` (the first pass's forward + greedy sample + the chain's first inputs,
at 1+K), ``chain`` (a chain step's forward, at 1), ``chain_fused`` (a chain step's forward + greedy sample + next
inputs, at 1) and ``dflash_block`` (DFlash's one parallel step, at 1+K); the synthetic harness uses ``first`` and
``chain``. Sizes and modes come from the capture-size planner
(``plan_capture_sizes``): FULL keys are uniform (``num_reqs = size // query_len``, capped at ``max_num_seqs``),
PIECEWISE keys are relaxed (``num_reqs=None``), and a batch above the largest size, or one that no key fits, runs
eagerly (mode ``NONE``, unpadded).
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from portable_spec.errors import PortableSpecError

FIRST = "first"
FIRST_FUSED = "first_fused"
CHAIN = "chain"
CHAIN_FUSED = "chain_fused"
BLOCK = "dflash_block"
STEP_KINDS = (FIRST, FIRST_FUSED, CHAIN, CHAIN_FUSED, BLOCK)
PLAN_STEP = {FIRST: "first_step", FIRST_FUSED: "first_step", BLOCK: "first_step", CHAIN: "chain_step",
             CHAIN_FUSED: "chain_step"}
FIRST_PASS_KINDS = (FIRST, FIRST_FUSED)  # an EAGLE/MTP first pass replays one of these
CHAIN_KINDS = (CHAIN, CHAIN_FUSED)  # a chain step replays one of these


def any_replayed(replays: dict[str, int], kinds: tuple[str, ...]) -> bool:
    """Whether a runner's replay counts (kind -> replays) show a replay of any of ``kinds``."""
    return any(replays.get(kind, 0) > 0 for kind in kinds)
"""Which ``CapturePlan`` step plan sizes each step kind."""
GRAPH_MODES = ("FULL", "PIECEWISE", "NONE")


class StepPlanLike(Protocol):
    """What the dispatcher reads from a planner ``StepPlan`` (``portable_spec.capture_sizes.plan``)."""

    query_len: int
    sizes: tuple[int, ...]
    mode: str

    def num_reqs(self, size: int) -> int: ...


@dataclass(frozen=True, order=True)
class DraftKey:
    """One draft-step graph: step kind, tokens per request, padded tokens and requests, uniformity, graph mode."""

    step: str
    query_len: int
    num_tokens: int
    num_reqs: int | None
    uniform: bool
    mode: str

    @property
    def graphed(self) -> bool:
        """True for keys the runner captures as a FULL graph."""
        return self.mode == "FULL"

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.step, "query_len": self.query_len, "num_tokens": self.num_tokens,
                "num_reqs": self.num_reqs, "uniform": self.uniform, "mode": self.mode}

    def __str__(self) -> str:
        reqs = "*" if self.num_reqs is None else self.num_reqs
        uniform = " uniform" if self.uniform else ""
        return f"{self.step}[q={self.query_len} tokens={self.num_tokens} reqs={reqs}{uniform} {self.mode}]"


@dataclass(frozen=True)
class _Step:
    query_len: int
    mode: str
    sizes: tuple[int, ...]        # ascending padded num_tokens that have a key
    reqs: dict[int, int]          # size -> padded num_reqs (FULL keys)


class DraftDispatcher:
    """Maps ``(step kind, num_reqs, num_tokens, uniform)`` to a ``DraftKey``; no vLLM, no device."""

    def __init__(self, steps: Mapping[str, StepPlanLike | None], max_num_seqs: int) -> None:
        if isinstance(max_num_seqs, bool) or not isinstance(max_num_seqs, int) or max_num_seqs < 1:
            raise PortableSpecError(f"max_num_seqs must be an integer >= 1 (got {max_num_seqs!r}): pass the "
                                    "engine's max_num_seqs")
        unknown = sorted(set(steps) - set(STEP_KINDS))
        if unknown:
            raise PortableSpecError(f"unknown draft step kind(s) {unknown}: use {', '.join(STEP_KINDS)}")
        if all(plan is None for plan in steps.values()):
            raise PortableSpecError("a draft dispatcher needs at least one step plan: build it from a CapturePlan")
        self.max_num_seqs = max_num_seqs
        self._steps: dict[str, _Step] = {}
        for kind, plan in steps.items():
            if plan is not None:
                self._steps[kind] = self._build_step(kind, plan)
        self.keys: frozenset[DraftKey] = frozenset(
            self._key(kind, size) for kind, step in self._steps.items() for size in step.sizes)

    @classmethod
    def from_plan(cls, plan: Any, max_num_seqs: int | None = None,
                  kinds: tuple[str, ...] = (FIRST, CHAIN)) -> DraftDispatcher:
        """Adapter from a ``CapturePlan`` (``first_step``, ``chain_step``, ``max_num_seqs``): one step per kind in
        ``kinds``, sized by the plan's step that ``PLAN_STEP`` names."""
        seqs = max_num_seqs if max_num_seqs is not None else getattr(plan, "max_num_seqs", None)
        if seqs is None:
            raise PortableSpecError("the capture plan has no max_num_seqs: pass max_num_seqs to from_plan")
        unknown = sorted(set(kinds) - set(STEP_KINDS))
        if unknown:
            raise PortableSpecError(f"unknown draft step kind(s) {unknown}: use {', '.join(STEP_KINDS)}")
        return cls({kind: getattr(plan, PLAN_STEP[kind], None) for kind in kinds}, seqs)

    def _build_step(self, kind: str, plan: StepPlanLike) -> _Step:
        q, mode = int(plan.query_len), str(plan.mode)
        if q < 1:
            raise PortableSpecError(f"{kind} step: query_len must be >= 1 (got {q}); fix the capture plan")
        if mode not in GRAPH_MODES:
            raise PortableSpecError(f"{kind} step: unknown graph mode {mode!r}; use one of {', '.join(GRAPH_MODES)}")
        sizes = sorted(set(int(s) for s in plan.sizes))
        if sizes and sizes[0] < 1:
            raise PortableSpecError(f"{kind} step: capture sizes must be >= 1 (got {sizes[0]}); fix the capture plan")
        if mode == "NONE":
            return _Step(q, mode, (), {})
        if mode == "PIECEWISE":
            return _Step(q, mode, tuple(sizes), {})
        bad = [s for s in sizes if s % q]
        if bad:
            raise PortableSpecError(f"{kind} step: FULL sizes {bad} are not multiples of query_len {q}; re-plan with "
                                    "plan_capture_sizes (uniform FULL keys need whole requests)")
        # vLLM keys uniform FULL graphs only for sizes in [q, q * max_num_seqs] (initialize_cudagraph_keys).
        kept = [s for s in sizes if q <= s <= q * self.max_num_seqs]
        reqs = {s: min(int(plan.num_reqs(s)), self.max_num_seqs) for s in kept}
        return _Step(q, mode, tuple(kept), reqs)

    def _key(self, kind: str, size: int) -> DraftKey:
        step = self._steps[kind]
        if step.mode == "FULL":
            return DraftKey(kind, step.query_len, size, step.reqs[size], True, "FULL")
        return DraftKey(kind, step.query_len, size, None, False, "PIECEWISE")

    # ---- queries ---------------------------------------------------------------------------------------------
    @property
    def step_kinds(self) -> tuple[str, ...]:
        return tuple(k for k in STEP_KINDS if k in self._steps)

    def has_step(self, kind: str) -> bool:
        return kind in self._steps

    def query_len(self, kind: str) -> int:
        return self._require(kind).query_len

    def mode(self, kind: str) -> str:
        return self._require(kind).mode

    def keys_for(self, kind: str, mode: str | None = None) -> list[DraftKey]:
        """Keys of one step kind, ascending by size (optionally one mode)."""
        return sorted((k for k in self.keys if k.step == kind and (mode is None or k.mode == mode)),
                      key=lambda k: k.num_tokens)

    def keys_by_query_len(self) -> dict[int, list[DraftKey]]:
        """Keys grouped by query length (each group pads as one vLLM ``CudagraphDispatcher`` would)."""
        groups: dict[int, list[DraftKey]] = {}
        for key in sorted(self.keys, key=lambda k: (k.query_len, k.num_tokens)):
            groups.setdefault(key.query_len, []).append(key)
        return groups

    def _require(self, kind: str) -> _Step:
        if kind not in self._steps:
            if kind in STEP_KINDS:
                raise PortableSpecError(f"this draft method has no {kind!r} step (the capture plan has none); "
                                        "parallel drafters such as DFlash run the first step only")
            raise PortableSpecError(f"unknown draft step kind {kind!r}: use one of {', '.join(STEP_KINDS)}")
        return self._steps[kind]

    # ---- dispatch --------------------------------------------------------------------------------------------
    def dispatch(self, kind: str, num_reqs: int, num_tokens: int | None = None, uniform: bool = True) -> DraftKey:
        """The key a batch of ``num_reqs`` requests / ``num_tokens`` tokens runs under.

        ``num_tokens`` defaults to ``num_reqs * query_len`` (a uniform batch). A batch is uniform only when every
        request brings exactly ``query_len`` tokens; non-uniform batches (a prefill-shaped first step) get a
        PIECEWISE key or run eagerly. FULL keys pad tokens and requests up, never down.
        """
        step = self._require(kind)
        q = step.query_len
        if isinstance(num_reqs, bool) or not isinstance(num_reqs, int) or num_reqs < 1:
            raise PortableSpecError(f"num_reqs must be an integer >= 1 (got {num_reqs!r})")
        if num_reqs > self.max_num_seqs:
            raise PortableSpecError(f"{num_reqs} requests exceed max_num_seqs {self.max_num_seqs}: raise "
                                    "max_num_seqs when planning, or split the batch")
        if num_tokens is None:
            num_tokens = num_reqs * q
        if isinstance(num_tokens, bool) or not isinstance(num_tokens, int) or num_tokens < num_reqs:
            raise PortableSpecError(f"num_tokens must be an integer >= num_reqs {num_reqs} (got {num_tokens!r})")
        uniform = bool(uniform) and num_tokens == num_reqs * q
        eager = DraftKey(kind, q, num_tokens, num_reqs, uniform, "NONE")
        if not step.sizes or num_tokens > step.sizes[-1]:
            return eager
        if step.mode == "FULL":
            if not uniform:
                return eager
            size = step.sizes[bisect.bisect_left(step.sizes, num_tokens)]
            return DraftKey(kind, q, size, step.reqs[size], True, "FULL")
        size = step.sizes[bisect.bisect_left(step.sizes, num_tokens)]
        return DraftKey(kind, q, size, None, False, "PIECEWISE")

    def describe(self) -> dict[str, Any]:
        return {kind: {"query_len": s.query_len, "mode": s.mode, "sizes": list(s.sizes)}
                for kind, s in self._steps.items()} | {"max_num_seqs": self.max_num_seqs}


def dispatcher_from_steps(first: StepPlanLike, chain: StepPlanLike | None, max_num_seqs: int) -> DraftDispatcher:
    """Convenience for tests and tools that hold StepPlan-like objects instead of a ``CapturePlan``."""
    return DraftDispatcher({FIRST: first, CHAIN: chain}, max_num_seqs)
