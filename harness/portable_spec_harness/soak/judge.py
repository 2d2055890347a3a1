"""The soak's verdicts, per server, from what the driver collected (``ServerRun``): pure Python, so every rule is
tested on fabricated runs (``tests/test_soak_judge.py``) and a harness bug cannot hide a failure on the GPU lane.

Outputs: every greedy request of every speculative server against the no-speculation server's (``exactness.
greedy_equals_nospec``; stop strings by the ``stop_prefix`` rule, see ``workload.RequestSpec.match``), every seeded
sampled request of our drafter's servers against the eager drafter's server of the same scheduling
(``sampled_equals_eager``); a comparison that compared nothing fails. Errors: any request that failed (5xx, 4xx, an
error event in a stream, a hang, a broken connection), a server that did not boot, died, stopped answering
``/health`` or kept requests after the load (not drained). The run is what it claims: the V1 runner, our platform and
drafter on ours and vLLM's drafter on the eager reference (read in each worker through ``probe.SoakWorkerExtension``), async
scheduling as asked, our capture line logged, no draft key running eagerly, no input-pointer mismatch, our first-pass
and chain graphs (DFlash: block graphs) replayed during the load, no kernel compiled after boot with vLLM's JIT monitor
armed (``portable_spec_harness.jit_judge``'s verdict on the log's scan: a log whose monitor never armed, or a scan that did not
record it, fails), no ERROR line in any server log, and on our servers every condition
counted above zero (``conditions.failing``). At tensor parallel the server runs at the TP asked, and our drafter's
every rank is judged from its own probe reading (``rank_checks``).
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Sequence

from portable_spec.draft.dispatcher import BLOCK
from portable_spec_harness.e2e import exactness
from portable_spec_harness.e2e.exactness import Verdict
from portable_spec_harness import jit_judge
from portable_spec_harness.soak import budget, conditions, metrics
from portable_spec_harness.soak.loadgen import Choice, Outcome
from portable_spec_harness.soak.metrics import GaugeTrace, Sample
from portable_spec_harness.soak.workload import RequestSpec, Workload

V1_RUNNER = "vllm.v1.worker.gpu_model_runner.GPUModelRunner"
OUR_RUNNER = "portable_spec.vllm_adapter.worker.v1_model_runner.PortableV1ModelRunner"
OUR_DRAFTERS = "portable_spec.vllm_adapter.spec_decode."
"""Where every drafter of ours lives: the EAGLE/MTP and DFlash proposers (``proposer``) and the separate draft model's
(``draft_model``); vLLM's own drafters live under ``vllm.``."""
OUR_PLATFORMS = "portable_spec."
SCRAPED = (metrics.PREEMPTIONS, metrics.PREFIX_CACHE_HITS, metrics.WAITING, metrics.RUNNING,
           metrics.PREFILL_COMPUTED + "_count", metrics.PARAM_N + "_count", metrics.ITERATIONS + "_count")
EXAMPLES = 8


@dataclass
class ServerRun:
    """Everything the driver collected about one server of one pair."""

    name: str
    variant: str
    role: str
    async_scheduling: bool
    speculative: bool
    tp: int = 1
    """The tensor parallelism the server was started at (``--tp``); its probe must report the same."""
    boot: dict[str, Any] = field(default_factory=dict)
    outcomes: list[Outcome] = field(default_factory=list)
    solo_outcomes: list[Outcome] = field(default_factory=list)
    """The seeded requests sent again one at a time after the load (``Workload.solo_requests``)."""
    pressure_outcomes: list[Outcome] = field(default_factory=list)
    """The pressure wave, sent after the load (``Workload.pressure``)."""
    before: Sample | None = None
    after: Sample | None = None
    gauges: dict[str, GaugeTrace] = field(default_factory=dict)
    facts_before: dict[str, Any] | None = None
    facts_after: dict[str, Any] | None = None
    facts_after_load: dict[str, Any] | None = None
    """The probe's reading between the load and the pressure wave (what the load alone did to our graphs)."""
    drained: dict[str, Any] = field(default_factory=dict)
    alive_at_end: bool = False
    healthy_at_end: bool = False
    log: dict[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------- comparisons
def _tokens_equal(ours: Sequence[int], ref: Sequence[int], against: str) -> Verdict:
    """Token for token, equal length (``exactness``'s rule and unit, naming the reference)."""
    if not ours or not ref:
        return Verdict(False, 0, "compared_tokens", "no tokens" if not ours else f"no tokens from {against}")
    for j, (a, b) in enumerate(zip(ours, ref)):
        if a != b:
            return Verdict(False, j, "compared_tokens", f"token {j}: {a} vs {b} from {against}")
    if len(ours) != len(ref):
        return Verdict(False, min(len(ours), len(ref)), "compared_tokens",
                       f"{len(ours)} tokens vs {len(ref)} from {against}")
    return Verdict(True, len(ours), "compared_tokens")


def sampled_equals_eager(ours: Sequence[int], eager: Sequence[int]) -> Verdict:
    return _tokens_equal(ours, eager, "the eager drafter")


def stop_prefix_equal(ours: Choice, ref: Choice) -> Verdict:
    """A stop-string request: the same text and stop string, and the reference's ids (one token a step, so it ends
    on the token that completed the string) a prefix of ours, which may carry up to K more tokens of that step."""
    if ours.text != ref.text or ours.stop_reason != ref.stop_reason:
        return Verdict(False, 0, "compared_tokens", f"text {ours.text[-40:]!r} / stop {ours.stop_reason!r} vs "
                                                    f"{ref.text[-40:]!r} / {ref.stop_reason!r} without speculation")
    prefix = exactness.greedy_equals_nospec([ours.token_ids[: len(ref.token_ids)]], [ref.token_ids])
    if not prefix.ok:
        return prefix
    extra = len(ours.token_ids) - len(ref.token_ids)
    if not 0 <= extra <= budget.K:
        return Verdict(False, prefix.count, "compared_tokens",
                       f"{extra} tokens past the stop string's step (0..{budget.K} allowed)")
    return prefix


def compare_choice(ours: Choice, ref: Choice, spec: RequestSpec, against: str) -> Verdict:
    if spec.match == "stop_prefix":
        return stop_prefix_equal(ours, ref)
    verdict = (exactness.greedy_equals_nospec([ours.token_ids], [ref.token_ids]) if against == "nospec"
               else sampled_equals_eager(ours.token_ids, ref.token_ids))
    if verdict.ok and ours.finish_reason != ref.finish_reason:
        return Verdict(False, verdict.count, verdict.unit,
                       f"finish {ours.finish_reason} vs {ref.finish_reason} from {against}")
    return verdict


@dataclass
class Comparison:
    against: str
    requests: int = 0
    tokens: int = 0
    uncompared: int = 0
    """Requests that could not be compared (failed on either side: counted as errors there)."""
    missing: int = 0
    """Requests with no outcome on one side: a truncated run, never an error the error count sees, so it fails here."""
    mismatches: list[dict[str, Any]] = field(default_factory=list)

    def verdict(self) -> Verdict:
        if self.missing:
            return Verdict(False, self.tokens, "compared_tokens",
                           f"{self.missing} request(s) without an outcome on one side against {self.against}")
        if self.mismatches:
            return Verdict(False, self.tokens, "compared_tokens", f"{len(self.mismatches)} mismatching request(s)")
        if not self.tokens:
            return Verdict(False, 0, "compared_tokens", f"nothing compared against {self.against}")
        return Verdict(True, self.tokens, "compared_tokens")

    def as_json(self) -> dict[str, Any]:
        return {"against": self.against, "requests": self.requests, "tokens": self.tokens,
                "uncompared": self.uncompared, "missing": self.missing, "mismatches": len(self.mismatches),
                "examples": self.mismatches[:EXAMPLES]}


def compare(specs: Sequence[RequestSpec], ours: Sequence[Outcome], ref: Sequence[Outcome], against: str) -> Comparison:
    """Every request of ``specs`` whose ``compare`` is ``against`` (``nospec`` or ``eager``), choice by choice."""
    mine, theirs = {o.rid: o for o in ours}, {o.rid: o for o in ref}
    result = Comparison(against)
    for spec in specs:
        if spec.compare != against:
            continue
        a, b = mine.get(spec.rid), theirs.get(spec.rid)
        if a is None or b is None:
            result.missing += 1
            continue
        if not a.ok or not b.ok:
            if any(not o.ok and o.error_kind is None and not o.aborted for o in (a, b)):
                # No error to count it under (no choice, or one without a finish reason): the comparison fails.
                result.mismatches.append({"rid": spec.rid, "class": spec.klass, "choice": None,
                                          "detail": "unfinished without an error (no choice or no finish reason)"})
            else:
                result.uncompared += 1
            continue
        result.requests += 1
        # The request asked for ``n`` choices: each must be on both sides, and none beyond them.
        for index in sorted(set(range(spec.n)) | set(a.choices) | set(b.choices)):
            if index not in a.choices or index not in b.choices or index >= spec.n:
                side = ("beyond the request's n" if index >= spec.n else "missing here" if index not in a.choices
                        else f"missing in {against}")
                result.mismatches.append({"rid": spec.rid, "class": spec.klass, "choice": index,
                                          "detail": f"choice {side}"})
                continue
            verdict = compare_choice(a.choices[index], b.choices[index], spec, against)
            result.tokens += verdict.count
            if not verdict.ok:
                result.mismatches.append({"rid": spec.rid, "class": spec.klass, "choice": index,
                                          "detail": verdict.detail, "ours": a.choices[index].token_ids[:64],
                                          "reference": b.choices[index].token_ids[:64]})
    return result


# ---------------------------------------------------------------------------------------------- per server
def percentiles(values: Sequence[float]) -> dict[str, float | int | None]:
    """p50 and p99 (nearest rank) in milliseconds, and how many values."""
    if not values:
        return {"p50": None, "p99": None, "n": 0}
    ordered = sorted(values)

    def rank(q: float) -> float:
        return round(1000 * ordered[min(len(ordered) - 1, max(0, int(-(-q * len(ordered) // 1)) - 1))], 2)

    return {"p50": round(1000 * statistics.median(ordered), 2), "p99": rank(0.99), "n": len(ordered)}


def _delta(run: ServerRun, name: str) -> int | None:
    if run.before is None or run.after is None:
        return None
    value = metrics.delta(run.before, run.after, name)
    return None if value is None else int(value)


def drafter_facts(run: ServerRun) -> dict[str, Any]:
    after, before = run.facts_after or {}, run.facts_before or {}
    first, chain = conditions.first_and_chain_replays(run.facts_before, run.facts_after)
    mismatched = (None if after.get("pointer_mismatches") is None or before.get("pointer_mismatches") is None
                  else after["pointer_mismatches"] - before["pointer_mismatches"])
    return {key: after.get(key) for key in ("runner", "drafter", "platform", "use_v2_model_runner",
                                            "tensor_parallel_size", "async_scheduling", "scheduling_policy",
                                            "num_gpu_blocks", "long_prefill_token_threshold", "max_num_seqs",
                                            "capture_stats")} | {
        "first_pass_replays": first, "chain_replays": chain,
        "first_pass_replays_in_load": conditions.first_and_chain_replays(run.facts_before, run.facts_after_load)[0],
        "block_replays": conditions.replays_during(run.facts_before, run.facts_after, (BLOCK,)),
        "pointer_mismatches_during_load": mismatched,
        "replays_after_load": after.get("replays"),
        "padded_metadata_builds": conditions.count_during(run.facts_before, run.facts_after,
                                                          "padded_metadata_builds"),
        "fused_first_pass_declines_during_load": conditions.declines_during(run.facts_before, run.facts_after)}


def rank_checks(run: ServerRun) -> dict[str, bool]:
    """Our server at tensor parallel, every rank from its own readings (``ranks`` of the probe's answer, rank 0's at
    the top level): a reading from each rank before and after, the same graphs captured on every rank, no
    input-pointer mismatch and our graphs replayed during the soak on every rank. A missing rank fails each."""
    before = (run.facts_before or {}).get("ranks") or []
    after = (run.facts_after or {}).get("ranks") or []
    every = len(before) == len(after) == run.tp
    pairs = list(zip(before, after)) if every else []
    graphs = exactness.same_on_every_rank([(a.get("capture_stats") or {}).get("num_tokens") for a in after], run.tp)

    def replayed(b: dict, a: dict) -> bool:
        if str(a.get("drafter")).endswith("DFlashProposer"):
            return (conditions.replays_during(b, a, (BLOCK,)) or 0) > 0
        return all((n or 0) > 0 for n in conditions.first_and_chain_replays(b, a))
    return {"facts_from_every_rank": every, "same_graphs_on_every_rank": graphs.ok,
            "no_pointer_mismatch_on_every_rank": every and all(
                a.get("pointer_mismatches") is not None and a.get("pointer_mismatches") == b.get("pointer_mismatches")
                for b, a in pairs),
            "graphs_replayed_on_every_rank": every and all(replayed(b, a) for b, a in pairs)}


def server_checks(run: ServerRun, drafter: dict[str, Any], greedy: Comparison | None, seeded: Comparison | None,
                  conds: dict[str, Any], request_errors: int) -> dict[str, bool]:
    checks = {"booted": bool(run.boot.get("ready")), "alive_at_end": run.alive_at_end,
              "healthy_at_end": run.healthy_at_end, "drained": bool(run.drained.get("drained")),
              "no_request_errors": request_errors == 0, "no_error_lines_in_log": run.log.get("error_lines") == 0,
              "probe_read": run.facts_before is not None and run.facts_after is not None}
    names = SCRAPED + (metrics.SPECULATIVE if run.speculative else ())
    checks["metrics_scraped"] = all(s is not None and all(s.get(n) is not None for n in names)
                                    for s in (run.before, run.after))
    expected_runner = OUR_RUNNER if run.role == "ours" else V1_RUNNER
    checks["v1_runner"] = drafter.get("runner") == expected_runner and drafter.get("use_v2_model_runner") is False
    checks["async_scheduling_as_asked"] = drafter.get("async_scheduling") is run.async_scheduling
    checks["tensor_parallel_as_asked"] = drafter.get("tensor_parallel_size") == run.tp
    checks["scheduler_as_asked"] = ("priority" in str(drafter.get("scheduling_policy")).lower()
                                    and drafter.get("num_gpu_blocks") == budget.NUM_GPU_BLOCKS
                                    and drafter.get("long_prefill_token_threshold")
                                    == budget.LONG_PREFILL_TOKEN_THRESHOLD
                                    and drafter.get("max_num_seqs") == budget.MAX_NUM_SEQS)
    if greedy is not None:
        checks["greedy_equals_nospec"] = greedy.verdict().ok
    if run.variant == "nospec":
        checks["no_drafter"] = drafter.get("drafter") is None
    elif run.role == "reference":
        checks["vllms_eager_drafter"] = str(drafter.get("drafter")).startswith("vllm.")
    if run.role == "ours":
        checks["our_platform"] = str(drafter.get("platform")).startswith(OUR_PLATFORMS)
        checks["our_drafter"] = str(drafter.get("drafter")).startswith(OUR_DRAFTERS)
        checks["capture_logged"] = bool(run.log.get("capture_lines"))
        checks["no_eager_draft_keys"] = run.log.get("eager_keys") == 0
        checks["not_left_to_upstream"] = run.log.get("left_to_upstream") == []  # a log never scanned fails
        checks["no_pointer_mismatch_in_warmup"] = run.log.get("warmup_pointer_mismatches") == 0
        # jit_judge's verdict on the log as logscan recorded it: a compile, an unarmed monitor or no scan fails
        checks["no_compile_after_boot"] = not jit_judge.verdict(run.name, jit_judge.recorded(run.log))
        checks["no_pointer_mismatch"] = drafter.get("pointer_mismatches_during_load") == 0
        if str(drafter.get("drafter")).endswith("DFlashProposer"):  # one block graph a step, no chain
            checks["block_graphs_replayed"] = (drafter.get("block_replays") or 0) > 0
        else:
            checks["first_pass_graphs_replayed"] = (drafter.get("first_pass_replays") or 0) > 0
            checks["chain_graphs_replayed"] = (drafter.get("chain_replays") or 0) > 0
        checks["seeded_solo_equals_eager"] = seeded is not None and seeded.verdict().ok
        if run.tp > 1:
            checks.update(rank_checks(run))
        expected = conditions.expected(speculative=run.speculative, ours=True)
        for name in expected:  # every condition this server must count, present or not: one never read fails
            checks[f"condition_{name}"] = name not in conditions.failing(conds, expected)
    return checks


def judge_server(run: ServerRun, workload: Workload, nospec: ServerRun | None, eager: ServerRun | None,
                 structured_available: bool, greedy_expected: dict[str, list[int]] | None = None) -> dict[str, Any]:
    specs = {r.rid: r for r in workload.requests}
    greedy = None if run.variant == "nospec" else compare(
        workload.judged_requests(), [*run.outcomes, *run.pressure_outcomes],
        [*nospec.outcomes, *nospec.pressure_outcomes] if nospec else [], "nospec")
    # Seeded sampled output is compared where the batches are the same on both servers: one request at a time
    # after the load. Under load it is reported only (vLLM's own servers differ there, see Workload.solo_requests).
    seeded = compare(workload.solo_requests(), run.solo_outcomes, eager.solo_outcomes if eager else [], "eager") \
        if run.role == "ours" else None
    seeded_in_load = compare(workload.requests, run.outcomes, eager.outcomes if eager else [], "eager") \
        if run.role == "ours" else None
    conds = conditions.count(specs, run.outcomes, workload.eos_ids, before=run.before, after=run.after,
                             gauges=run.gauges, speculative=run.speculative, ours=run.role == "ours",
                             facts_before=run.facts_before, facts_after=run.facts_after,
                             structured_available=structured_available, greedy_expected=greedy_expected)
    failed = [o for o in (*run.outcomes, *run.pressure_outcomes) if o.error_kind]
    pressure_sent = len(run.pressure_outcomes) == len(workload.pressure)
    server_errors = sum(not x for x in (run.boot.get("ready", False), run.alive_at_end, run.healthy_at_end,
                                        run.drained.get("drained", False)))
    drafter = drafter_facts(run)
    steps = _delta(run, metrics.ITERATIONS + "_count")
    checks = server_checks(run, drafter, greedy, seeded, conds, len(failed))
    checks["pressure_wave_sent"] = pressure_sent
    mismatches = (len(greedy.mismatches) if greedy else 0) + (len(seeded.mismatches) if seeded else 0)
    return {
        "server": run.name, "variant": run.variant, "role": run.role, "async_scheduling": run.async_scheduling,
        "requests": len(run.outcomes), "completed": sum(o.ok for o in run.outcomes),
        "tokens": sum(o.tokens for o in run.outcomes if not o.error_kind),
        "pressure_wave": {"requests": len(run.pressure_outcomes),
                          "completed": sum(o.ok for o in run.pressure_outcomes),
                          "tokens": sum(o.tokens for o in run.pressure_outcomes if not o.error_kind)},
        "conditions": conds, "mismatches": mismatches, "errors": len(failed) + server_errors,
        "error_kinds": dict(Counter(o.error_kind for o in failed)),
        "error_examples": [{"rid": o.rid, "kind": o.error_kind, "error": o.error} for o in failed[:EXAMPLES]],
        "server_errors": server_errors,
        "compared": {k: c.as_json() for k, c in (("greedy_vs_nospec", greedy), ("seeded_solo_vs_eager", seeded),
                                                  ("seeded_in_load_vs_eager_reported", seeded_in_load)) if c},
        "latency_ms": {"ttft": percentiles([t for o in run.outcomes if o.ok and (t := o.ttft_s) is not None]),
                       "tpot": percentiles([t for o in run.outcomes if o.ok and (t := o.tpot_s) is not None])},
        "spec_decode": {"drafts": _delta(run, metrics.DRAFTS), "draft_tokens": _delta(run, metrics.DRAFT_TOKENS),
                        "accepted": _delta(run, metrics.ACCEPTED)} if run.speculative else None,
        "engine_steps": steps,
        "first_pass_replays_per_step": (round(drafter["first_pass_replays"] / steps, 3)
                                        if steps and drafter.get("first_pass_replays") is not None else None),
        "queued_trace": {k: g.as_json() for k, g in run.gauges.items()},
        "drafter": drafter, "boot": run.boot, "drained": run.drained, "log": run.log,
        "checks": checks, "failures": sorted(k for k, ok in checks.items() if not ok),
    }


def judge_pair(workload: Workload, runs: dict[str, ServerRun], structured_available: bool,
               greedy_expected: dict[str, list[int]] | None = None) -> dict[str, dict[str, Any]]:
    """Every server of one pair; our drafter's seeded requests against the eager drafter of the same scheduling."""
    nospec = runs.get("nospec")
    rows = {}
    for name, run in runs.items():
        eager = runs.get("eager_drafter" + ("" if run.async_scheduling else "_sync"))
        rows[name] = judge_server(run, workload, nospec, eager, structured_available, greedy_expected)
    return rows


def status(pairs: dict[str, dict[str, Any]]) -> tuple[str, list[str]]:
    """``passed``, ``failed`` or ``incomplete`` (every failure is a condition unavailable on this host), and the
    failures as ``pair/server: check``."""
    failures, only_unavailable = [], True
    for pair, entry in pairs.items():
        if not entry.get("servers"):
            failures.append(f"{pair}: no server ran")
            only_unavailable = False
        for name, row in entry.get("servers", {}).items():
            for check in row["failures"]:
                failures.append(f"{pair}/{name}: {check}")
                cond = check.removeprefix("condition_")
                only_unavailable &= check.startswith("condition_") and row["conditions"].get(cond) \
                    == conditions.UNAVAILABLE
    if not failures:
        return "passed", []
    return ("incomplete" if only_unavailable else "failed"), failures
