"""The exactness comparisons of a V1 end-to-end run, each a ``Verdict`` with the count of what it compared.

Why a module of its own: these decide whether "our FULL drafter is exact" holds, so none of them may pass on
nothing. Each fails when its input is missing (None), empty, or of unequal length on the two sides (never
truncated as ``zip`` would), and says in ``detail`` where it failed; a verdict whose count is 0 is false. Pure
Python: ``tests/test_e2e_exactness.py`` feeds each one missing, empty, unequal and one-token-off inputs.

- ``greedy_equals_nospec``: per prompt, the output tokens equal the run without speculation (``compared_tokens``).
- ``sampled_equals_eager``: a sampled run (seeded requests) gives, per prompt, the eager drafter's output tokens
  (``compared_tokens``). The same seeds and the same draws in the same order give the same tokens; a drafter that
  sampled from other probabilities, handed the rejection sampler other draft probabilities, or drew a different amount
  of noise moves them (and usually the acceptance counts, compared beside it).
- ``drafts_equal_per_step``: per prompt, the ordered ``[position, drafts]`` steps the drafter returned equal the
  eager drafter's, position and every draft token (``compared_drafts``); the position is where the step's first
  draft goes (``vllm_door.draft_recorder``), so a step that drafted for the wrong place fails even when its
  tokens happen to agree.
- ``acceptance_counts_equal``: vLLM's spec-decode counters (drafts, draft tokens, accepted, accepted per position)
  equal the eager drafter's (``compared_drafts``: the draft tokens whose acceptance was counted).
- ``every_position_accepted``: every per-position acceptance rate is 1.0 (``compared_positions``).
- ``within_tolerance``: per position, |ours - eager| acceptance within a tolerance in points (``compared_positions``).
- ``every_one_is`` / ``same_list``: every recorded value is the expected one (each captured graph's pool is our
  port's), and a list equals another run's (the capture sizes Model Runner V2 ended with on vLLM's platform).
- ``greedy_equals_design`` / ``acceptance_as_designed``: against the zoo's construction instead of another run —
  the target's greedy output is what its weights were built to give (``model_zoo.expected_output``), and the
  per-position acceptance is the designed one (the context DFlash head: ``[1, 1, 0, ...]``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

GREEDY = "greedy_equals_nospec"
SAMPLED = "sampled_equals_eager"
DRAFTS = "drafts_equal_eager_per_step"
ACCEPTANCE = "acceptance_counts_equal_eager"
EVERY_POSITION = "every_position_100pct"
TOLERANCE = "full_vs_eager_acceptance_within_tolerance"
DESIGN_GREEDY = "greedy_equals_design"
DESIGN_ACCEPTANCE = "acceptance_as_designed"
EXACTNESS_CHECKS = (GREEDY, SAMPLED, DRAFTS, ACCEPTANCE, EVERY_POSITION, TOLERANCE, DESIGN_GREEDY, DESIGN_ACCEPTANCE)
"""Check-name suffixes that judge exactness (the rest say the run was what it claims: ran, graphs, platform...)."""
PRE_ORACLE_CHECKS = (GREEDY, ACCEPTANCE, EVERY_POSITION, TOLERANCE)
"""The exactness checks the matrix had before the per-step oracle (what "the old checks" caught)."""


@dataclass(frozen=True)
class Verdict:
    ok: bool
    count: int
    """How many items were compared (tokens, draft tokens or positions; see ``unit``); 0 makes ``ok`` false."""
    unit: str
    detail: str = ""
    """Where it failed (empty when it passed)."""

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ok": self.ok, self.unit: self.count}
        if self.detail:
            out["detail"] = self.detail
        return out


def _fail(unit: str, detail: str, count: int = 0) -> Verdict:
    return Verdict(False, count, unit, detail)


def _passed(unit: str, count: int) -> Verdict:
    return Verdict(True, count, unit) if count > 0 else _fail(unit, "nothing compared")


def _unread(values: Sequence[Any]) -> list[int]:
    """Indices of values that are no count or rate (None, a bool, a string): a counter that was never read must fail
    its comparison, never equal another unread one."""
    return [i for i, v in enumerate(values) if isinstance(v, bool) or not isinstance(v, (int, float))]


def _unequal_lengths(what: str, ours: Sequence, ref: Sequence) -> str:
    return f"{what}: {len(ours)} here vs {len(ref)} in the reference"


def _per_prompt(ours: Sequence[Sequence[Any]] | None, ref: Sequence[Sequence[Any]] | None, unit: str, what: str,
                item: str, check: Callable[[Any, Any], tuple[int, str]]) -> Verdict:
    """Two per-prompt lists of ``what`` (e.g. tokens), item by item: ``check(ours, ref)`` returns how many it
    compared and, where they differ, the rest of the failure's description. Missing, empty and unequal-length
    lists fail, at every level."""
    if not ours or not ref:
        return _fail(unit, f"no {what}" if not ours else f"no {what} in the reference to compare with")
    if len(ours) != len(ref):
        return _fail(unit, _unequal_lengths("prompts", ours, ref))
    compared = 0
    for i, (mine, theirs) in enumerate(zip(ours, ref)):
        if not mine or not theirs:
            return _fail(unit, f"prompt {i}: no {what}", compared)
        for j, (a, b) in enumerate(zip(mine, theirs)):
            count, differs = check(a, b)
            if differs:
                return _fail(unit, f"prompt {i}, {item} {j}{differs}", compared + count)
            compared += count
        if len(mine) != len(theirs):  # after the common items matched: say which side has more
            return _fail(unit, f"prompt {i}: " + _unequal_lengths(what, mine, theirs), compared)
    return _passed(unit, compared)


def greedy_equals_nospec(outputs: Sequence[Sequence[int]] | None,
                         nospec: Sequence[Sequence[int]] | None) -> Verdict:
    """Every prompt's output tokens equal those of the run without speculation."""
    def token(a: int, b: int) -> tuple[int, str]:
        return (1, "") if a == b else (0, f": {a} vs {b} without speculation")

    return _per_prompt(outputs, nospec, "compared_tokens", "tokens", "token", token)


def sampled_equals_eager(outputs: Sequence[Sequence[int]] | None,
                         eager: Sequence[Sequence[int]] | None) -> Verdict:
    """Every prompt's sampled output tokens equal the eager drafter's run of the same seed."""
    def token(a: int, b: int) -> tuple[int, str]:
        return (1, "") if a == b else (0, f": {a} vs {b} in the eager run")

    return _per_prompt(outputs, eager, "compared_tokens", "tokens", "token", token)


def drafts_equal_per_step(steps: Sequence[Sequence[Any]] | None, eager: Sequence[Sequence[Any]] | None) -> Verdict:
    """Per prompt, the ordered steps ``[position, [draft, ...]]`` equal the eager drafter's, one for one."""
    def step(ours: Sequence[Any], ref: Sequence[Any]) -> tuple[int, str]:
        (position, drafts), (ref_position, ref_drafts) = ours, ref
        if position != ref_position:
            return 0, f": drafts for position {position} vs {ref_position} in the eager run"
        if not drafts or not ref_drafts or len(drafts) != len(ref_drafts):
            return 0, f" (position {position}): " + _unequal_lengths("drafts", drafts or [], ref_drafts or [])
        for k, (a, b) in enumerate(zip(drafts, ref_drafts)):
            if a != b:
                return k, f" (position {position}), draft {k}: {a} vs {b} in the eager run"
        return len(drafts), ""

    return _per_prompt(steps, eager, "compared_drafts", "draft steps", "step", step)


COUNTERS = ("drafts", "draft_tokens", "accepted")


def acceptance_counts_equal(counts: dict[str, Any] | None, eager: dict[str, Any] | None,
                            reference: str = "eager") -> Verdict:
    """vLLM's spec-decode counter deltas equal the reference run's (the eager drafter's; ``reference`` names another,
    e.g. MRV2 on vLLM's platform): drafts, draft tokens, accepted, and accepted per position (whole lists, equal
    length)."""
    unit = "compared_drafts"
    if not counts or not eager:
        return _fail(unit, "no acceptance counts" if not counts else f"no {reference} acceptance counts to compare "
                                                                      "with")
    missing = [k for k in (*COUNTERS, "accepted_per_position") if counts.get(k) is None or eager.get(k) is None]
    if missing:
        return _fail(unit, f"counter(s) missing: {', '.join(missing)}")
    unread = [f"{side} {k}" for side, run in (("ours", counts), (reference, eager)) for k in COUNTERS
              if _unread([run[k]])]
    unread += [f"{side} accepted_per_position[{i}]" for side, run in (("ours", counts), (reference, eager))
               for i in _unread(run["accepted_per_position"])]
    if unread:
        return _fail(unit, f"counter(s) not read as counts: {', '.join(unread)}")
    compared = int(eager["draft_tokens"])
    if not eager["drafts"] or not compared:
        return _fail(unit, "no drafts counted")
    ours, ref = counts["accepted_per_position"], eager["accepted_per_position"]
    if not ours or len(ours) != len(ref):
        return _fail(unit, _unequal_lengths("positions", ours or [], ref))
    differ = [f"{k}: {counts[k]} vs {eager[k]}" for k in (*COUNTERS, "accepted_per_position") if counts[k] != eager[k]]
    if differ:
        return _fail(unit, "; ".join(differ) + f" in the {reference} run")
    return _passed(unit, compared)


def every_one_is(values: Sequence[Any] | None, expected: Any, unit: str, what: str) -> Verdict:
    """Every one of ``values`` equals ``expected`` (e.g. each captured graph's pool is our port's pool); fails when
    there are no values, or nothing to compare them with."""
    if expected is None:
        return _fail(unit, f"no expected {what} to compare with")
    if not values:
        return _fail(unit, f"no {what} recorded")
    off = [(i, v) for i, v in enumerate(values) if v != expected]
    if off:
        return _fail(unit, f"{len(off)} of {len(values)} differ from {expected!r}, e.g. (index, {what}) {off[:3]}",
                     len(values) - len(off))
    return _passed(unit, len(values))


def same_list(ours: Sequence[Any] | None, reference: Sequence[Any] | None, unit: str, what: str,
              reference_name: str) -> Verdict:
    """``ours`` equals ``reference`` item by item (e.g. the capture sizes an engine ended with); fails on a missing
    or empty side."""
    if not ours or not reference:
        return _fail(unit, f"no {what}" if not ours else f"no {what} in the {reference_name} run to compare with")
    if list(ours) != list(reference):
        return _fail(unit, f"{what} {list(ours)} vs {list(reference)} in the {reference_name} run")
    return _passed(unit, len(ours))


def every_position_accepted(acceptance_per_position: Sequence[float] | None) -> Verdict:
    """Every position's acceptance rate is exactly 1.0 (a perfect head under greedy decoding)."""
    unit = "compared_positions"
    if not acceptance_per_position:
        return _fail(unit, "no acceptance recorded")
    below = [(i, a) for i, a in enumerate(acceptance_per_position) if a != 1.0]
    if below:
        return _fail(unit, f"position(s) below 100%: {below}", len(acceptance_per_position))
    return _passed(unit, len(acceptance_per_position))


def greedy_equals_design(outputs: Sequence[Sequence[int]] | None,
                         designed: Sequence[Sequence[int]] | None) -> Verdict:
    """Every prompt's output tokens equal the target's designed greedy output."""
    def token(a: int, b: int) -> tuple[int, str]:
        return (1, "") if a == b else (0, f": {a} vs {b} by construction")

    return _per_prompt(outputs, designed, "compared_tokens", "tokens", "token", token)


def acceptance_as_designed(counts: dict[str, Any] | None, designed: Sequence[float] | None,
                           requests: int) -> Verdict:
    """vLLM's accepted-token counts per position against the head's design (greedy decoding of a constructed head).

    vLLM counts ``accepted_per_position[i]`` over ``drafts`` (every verified draft window), so a window that a
    request's end cuts short (``max_tokens`` reached inside it, or drafts trimmed at ``max_model_len``: the context
    prompt set has both) lowers a position's count although nothing was drafted wrong. The design holds for every
    other window, so per position ``i``: a designed rate of 1 allows at most ``requests`` windows short of ``drafts``
    (one cut window per request), a designed rate of 0 allows no accepted token. Measured on the H100 (2026-11-25):
    vLLM's own eager drafter on the context pairs reaches [120, 120, 119] of 120 windows (EAGLE, K=3, 10 requests)
    and [158, 158, 0] of 160 (DFlash [1, 1, 0]); an injected drafter bug costs far more (e.g. [108, 108, 107] of
    155). The per-step oracle (``drafts_equal_per_step``) is the exact check; this one ties the runs to the design."""
    unit = "compared_positions"
    if not counts or not designed:
        return _fail(unit, "no acceptance counts recorded" if not counts else "no designed acceptance")
    drafts, per_position = counts.get("drafts") or 0, counts.get("accepted_per_position") or []
    if drafts <= 0 or requests <= 0:
        return _fail(unit, f"nothing drafted ({drafts} draft windows over {requests} requests)")
    if len(per_position) != len(designed):
        return _fail(unit, _unequal_lengths("positions", per_position, designed))
    if _unread(per_position) or _unread([drafts]):
        return _fail(unit, f"position(s) {_unread(per_position)} not read as counts")
    off = []
    for i, (accepted, rate) in enumerate(zip(per_position, designed)):
        if rate not in (0.0, 1.0):
            return _fail(unit, f"position {i}: designed rate {rate} is neither 0 nor 1 (no exact bound)")
        low, high = (max(0, drafts - requests), drafts) if rate == 1.0 else (0, 0)
        if not low <= accepted <= high:
            off.append((i, accepted, f"{low}..{high}"))
    if off:
        return _fail(unit, f"position(s) off the design (position, accepted, designed range over {drafts} windows): "
                           f"{off}", len(designed) - len(off))
    return _passed(unit, len(designed))


def within_tolerance(ours: Sequence[float] | None, eager: Sequence[float] | None, tolerance_pts: float) -> Verdict:
    """Per position, |ours - eager| <= ``tolerance_pts`` percentage points (mean acceptance over seeds)."""
    unit = "compared_positions"
    if not ours or not eager:
        return _fail(unit, "no acceptance recorded" if not ours else "no eager acceptance to compare with")
    if len(ours) != len(eager):
        return _fail(unit, _unequal_lengths("positions", ours, eager))
    if _unread(ours) or _unread(eager):
        return _fail(unit, f"position(s) {sorted(set(_unread(ours)) | set(_unread(eager)))} not read as rates")
    off = [(i, a, b) for i, (a, b) in enumerate(zip(ours, eager)) if abs(a - b) * 100 > tolerance_pts]
    if off:
        return _fail(unit, f"beyond {tolerance_pts:g} points at (position, ours, eager) {off}", len(ours))
    return _passed(unit, len(ours))


def same_on_every_rank(values: Sequence[Any], ranks: int) -> Verdict:
    """Every one of ``ranks`` ranks reported the same, non-empty value (a rank reporting nothing fails)."""
    unit = "compared_ranks"
    if len(values) != ranks:
        return _fail(unit, f"{len(values)} rank(s) reported, {ranks} expected")
    if any(v is None or v == {} or v == [] for v in values):
        return _fail(unit, "a rank reported nothing")
    if any(v != values[0] for v in values[1:]):
        return _fail(unit, "ranks differ", len(values))
    return _passed(unit, len(values))


def caught_by(checks: dict[str, bool], among: tuple[str, ...] = EXACTNESS_CHECKS) -> list[str]:
    """The failed checks (by full name) whose suffix is one of ``among``: what an injected bug was caught by."""
    return sorted(name for name, ok in checks.items() if not ok and name.endswith(among))
