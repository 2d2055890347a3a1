"""Pass/fail of one V1 drafter end-to-end configuration (``ci/gpu/v1_drafter_e2e.py``), from its per-(variant, seed)
result rows: pure Python, so every check is tested on fabricated rows (``tests/test_e2e_harness.py``,
``tests/test_e2e_exactness.py``) and a harness bug cannot hide a failure on the GPU lane.

Two kinds of checks. The run is what it claims (each variant ran, on the V1 runner; ours on our platform, graphs
captured and replayed, no pointer mismatch, no JIT during inference, every rank agreeing); and it is exact
(``exactness``: greedy output = no speculation, every step's drafts = the eager drafter's, acceptance counts = the
eager drafter's, perfect heads at 100%; sampled output and acceptance counts = the eager drafter's, seed by seed). An
exactness check exists when the variant it compares with was asked for (``--variants``); once it exists it fails on
missing, empty or unequal-length input, never passing on nothing.
"""

from __future__ import annotations

from typing import Any

from portable_spec.draft.capture_log import CAPTURE_LOG_PREFIX
from portable_spec.draft.dispatcher import CHAIN_KINDS, FIRST_PASS_KINDS, any_replayed
from portable_spec_harness.e2e import exactness
from portable_spec_harness.e2e.exactness import Verdict
from portable_spec_harness.e2e.parent import no_compile_after_boot

SPECULATIVE = ("upstream_v1", "eager_drafter", "full_drafter")
DRAFT_SAMPLES = ("d2t_gather", "vllm_greedy_sample")
"""How our fused graphs sample (``capture_stats["draft_sample"]``, from ``spec_decode.draft_sample``)."""


class Judgement:
    """Checks by name (``checks``: name -> bool, what the driver prints and exits on) and, for the exactness checks,
    what each compared and where it failed (``evidence``: name -> ``Verdict.as_json()``)."""

    def __init__(self) -> None:
        self.checks: dict[str, bool] = {}
        self.evidence: dict[str, dict[str, Any]] = {}

    def record(self, name: str, verdict: Verdict) -> None:
        self.checks[name] = verdict.ok
        self.evidence[name] = verdict.as_json()


def _usable(row: dict[str, Any] | None) -> dict[str, Any] | None:
    return row if row is not None and "error" not in row else None


def _field(row: dict[str, Any] | None, key: str) -> Any:
    return row.get(key) if row is not None else None


def replay_checks(facts: dict, k: int) -> dict[str, bool]:
    """Which of our graph kinds one worker's facts must show replayed: DFlash's block graphs, else the first pass
    and (with more than one speculative token) the chain steps."""
    replays = facts.get("replays") or {}
    if (facts.get("drafter") or "").endswith("DFlashProposer"):
        return {"block_graphs_replayed": replays.get("dflash_block", 0) > 0}
    checks = {"first_pass_graphs_replayed": any_replayed(replays, FIRST_PASS_KINDS)}
    if k > 1:
        checks["chain_graphs_replayed"] = any_replayed(replays, CHAIN_KINDS)
    return checks


def rank_checks(judged: Judgement, full: dict, seed: int, tp: int, fail_capture: str | None, k: int = 3,
                draft_sample: str | None = None) -> None:
    """At tensor parallel, every rank judged from its own facts (``ranks``; the top level is rank 0's): each rank
    reported, built the same drafter, captured, replayed and agreed on the same graphs, saw no pointer mismatch,
    sampled as asked, and logged its capture line; with an injected failure, every rank dropped the failed key (and
    only keys that failed somewhere). A rank missing from ``ranks`` fails every ``_on_every_rank`` check."""
    ranks = full.get("ranks") or []
    stats = [r.get("capture_stats") or {} for r in ranks]
    prefix = f"full_drafter_s{seed}_"
    every = len(ranks) == tp  # each check below also needs every rank there
    judged.checks[prefix + "facts_from_every_rank"] = every
    judged.record(prefix + "same_graphs_on_every_rank",
                  exactness.same_on_every_rank([s.get("num_tokens") for s in stats], tp))
    judged.record(prefix + "same_drafter_on_every_rank",
                  exactness.same_on_every_rank([r.get("drafter") for r in ranks], tp))
    judged.checks[prefix + "no_pointer_mismatch_on_any_rank"] = every and all(
        r.get("pointer_mismatches") == 0 for r in ranks)
    per_rank = [replay_checks(r, k) for r in ranks]
    for name in replay_checks(full, k):
        judged.checks[prefix + name + "_on_every_rank"] = every and all(c.get(name) for c in per_rank)
    if draft_sample:
        judged.checks[prefix + f"draft_sample_{draft_sample}_on_every_rank"] = every and all(
            s.get("draft_sample") == draft_sample for s in stats)
    judged.checks[prefix + "log_shows_capture_per_rank"] = sum(
        CAPTURE_LOG_PREFIX in line for line in full.get("log_excerpt", [])) >= tp
    if fail_capture:
        _, kind, reqs = fail_capture.split(":")
        judged.checks[prefix + "failed_key_dropped_on_every_rank"] = every and all(
            f"{kind}:{reqs}" in s.get("failed", {}) for s in stats)


def judge(results: list[dict], seeds: list[int], greedy: bool, perfect: bool, *, k: int = 3,
          greedy_continuations: dict[int, list[list[int]]] | None = None, tp: int = 1,
          fail_capture: str | None = None, require_no_jit: bool = True, tolerance_pts: float | None = None,
          inject_bug: str | None = None, design: dict[str, Any] | None = None,
          draft_sample: str | None = None, async_scheduling: bool = False) -> Judgement:
    """Every check of one configuration. ``greedy_continuations`` (sampled runs): each seed's greedy outputs; a
    sampled run whose outputs all equal them did not really sample (a target too peaked for its temperature), and
    fails ``sampled_off_greedy``. ``inject_bug``: the bug our variant ran with (``vllm_door.bug_injection``);
    its wrappers must have fired. ``design`` (greedy runs of a constructed pair): ``outputs`` per seed (the target's
    greedy output by construction, which the no-speculation run must give) and ``acceptance`` (per position, which
    our variant and the eager drafter must give exactly). ``draft_sample``: how our variant's fused graphs must
    sample (one of ``DRAFT_SAMPLES``). ``async_scheduling``: every speculative engine was asked for it, and must
    report it in its facts (an engine that fell back to synchronous steps would not test the asynchronous path)."""
    by = {(r["variant"], r.get("seed")): r for r in results}
    asked = {r["variant"] for r in results}
    judged = Judgement()
    for seed in seeds:
        nospec, eager = _usable(by.get(("nospec", seed))), _usable(by.get(("eager_drafter", seed)))
        if design is not None and "nospec" in asked:
            judged.record(f"nospec_s{seed}_" + exactness.DESIGN_GREEDY, exactness.greedy_equals_design(
                _field(nospec, "outputs"), design["outputs"].get(seed)))
        for name in SPECULATIVE:
            r = by.get((name, seed))
            prefix = f"{name}_s{seed}_"
            if r is None:
                if name in asked:  # a variant of the part with no row for this seed: a truncated run, not a pass
                    judged.checks[prefix + "ran"] = False
                continue
            judged.checks[prefix + "ran"] = "error" not in r
            if "error" in r:
                continue
            judged.checks[prefix + "v1_runner"] = r["use_v2_model_runner"] is False
            if async_scheduling:
                judged.checks[prefix + "async_scheduling"] = r.get("async_scheduling") is True
            if greedy:
                judged.record(prefix + exactness.GREEDY,
                              exactness.greedy_equals_nospec(r.get("outputs"), _field(nospec, "outputs")))
                if name != "eager_drafter" and "eager_drafter" in asked:
                    judged.record(prefix + exactness.DRAFTS, exactness.drafts_equal_per_step(
                        r.get("draft_steps"), _field(eager, "draft_steps")))
                    judged.record(prefix + exactness.ACCEPTANCE, exactness.acceptance_counts_equal(
                        r.get("acceptance_counts"), _field(eager, "acceptance_counts")))
            elif name != "eager_drafter" and "eager_drafter" in asked:
                judged.record(prefix + exactness.SAMPLED, exactness.sampled_equals_eager(
                    r.get("outputs"), _field(eager, "outputs")))
                judged.record(prefix + exactness.ACCEPTANCE, exactness.acceptance_counts_equal(
                    r.get("acceptance_counts"), _field(eager, "acceptance_counts")))
            if design is not None and name != "upstream_v1":
                judged.record(prefix + exactness.DESIGN_ACCEPTANCE, exactness.acceptance_as_designed(
                    r.get("acceptance_counts"), design["acceptance"], len(r.get("outputs") or ())))
            if not greedy and greedy_continuations and seed in greedy_continuations:
                judged.checks[prefix + "sampled_off_greedy"] = r["outputs"] != greedy_continuations[seed]
        full = _usable(by.get(("full_drafter", seed)))
        if full is not None:
            judged.checks[f"full_drafter_s{seed}_worker_facts"] = "runner" in full  # else nothing below is judged
        if full is not None and "runner" in full:
            full_checks(judged, full, seed, perfect=perfect, k=k, tp=tp, fail_capture=fail_capture,
                        require_no_jit=require_no_jit, inject_bug=inject_bug, draft_sample=draft_sample)
    if tolerance_pts is not None:
        judged.record(exactness.TOLERANCE, exactness.within_tolerance(
            mean_acceptance(results, "full_drafter"), mean_acceptance(results, "eager_drafter"), tolerance_pts))
    if not judged.checks:  # no row, or no seed: an empty judgement would read as all checks passed
        judged.checks["anything_judged"] = False
    return judged


def full_checks(judged: Judgement, full: dict, seed: int, *, perfect: bool, k: int, tp: int,
                fail_capture: str | None, require_no_jit: bool, inject_bug: str | None,
                draft_sample: str | None = None) -> None:
    """Our variant is what it claims: our platform, graphs captured and replayed, its log line, and so on."""
    prefix = f"full_drafter_s{seed}_"
    checks = judged.checks
    checks[prefix + "our_platform"] = full["platform"].startswith("portable_spec.")
    checks[prefix + "graphs_captured"] = bool((full.get("capture_stats") or {}).get("graphs"))
    checks.update({prefix + name: ok for name, ok in replay_checks(full, k).items()})
    checks[prefix + "no_pointer_mismatch"] = full.get("pointer_mismatches") == 0
    checks[prefix + "log_shows_capture"] = any(
        CAPTURE_LOG_PREFIX in line and " s, " in line and "MiB" in line for line in full.get("log_excerpt", []))
    checks[prefix + f"tensor_parallel_{tp}"] = full.get("tensor_parallel_size") == tp
    if draft_sample:
        checks[prefix + f"draft_sample_{draft_sample}"] = (full.get("capture_stats") or {}).get(
            "draft_sample") == draft_sample
    if require_no_jit:
        # jit_judge's verdict: no compile after warm-up, with vLLM's JIT monitor armed (a row without both fails)
        checks[prefix + "no_jit_during_inference"] = no_compile_after_boot(full)
    if tp > 1 or fail_capture:
        rank_checks(judged, full, seed, tp, fail_capture, k, draft_sample)
    if perfect:
        judged.record(prefix + exactness.EVERY_POSITION,
                      exactness.every_position_accepted(full.get("acceptance_per_position")))
    if inject_bug:
        injected = full.get("injected_bug") or {}
        checks[prefix + "injected_bug_fired"] = (injected.get("name") == inject_bug
                                                 and sum((injected.get("fired") or {}).values()) > 0)


def checks_for(results: list[dict], seeds: list[int], greedy: bool, perfect: bool, **options: Any) -> dict[str, bool]:
    """``judge(...).checks``: the checks by name."""
    return judge(results, seeds, greedy, perfect, **options).checks


def mean_acceptance(results: list[dict], variant: str) -> list[float] | None:
    """Per-position acceptance averaged over seeds; None when any seed recorded none, or the seeds disagree on the
    number of positions (never truncated)."""
    rows = [r.get("acceptance_per_position") for r in results if r.get("variant") == variant]
    if not rows or not all(rows) or len({len(row) for row in rows}) != 1:
        return None
    return [round(sum(col) / len(col), 4) for col in zip(*rows)]


def bug_outcome(checks: dict[str, bool], bug: str) -> dict[str, Any]:
    """What an injected bug did to the checks: the exactness checks it failed (``caught_by``), those the matrix had
    before the per-step oracle (``caught_by_pre_oracle``), and any other check it failed (``run_checks_failed``:
    the run is then no evidence either way). ``caught``: an exactness check failed on a run that was otherwise what
    it claims (its wrappers fired)."""
    caught = exactness.caught_by(checks)
    others = sorted(name for name, ok in checks.items() if not ok and name not in caught)
    return {"name": bug, "caught": bool(caught) and not others, "caught_by": caught,
            "caught_by_pre_oracle": exactness.caught_by(checks, exactness.PRE_ORACLE_CHECKS),
            "run_checks_failed": others}
