"""How often each condition of issue 22 happened on one server during the load: from the engine's own ``/metrics``
where vLLM 0.26.0 exposes it, else from what only the client sees. A value is a count (> 0: it happened), None (the
metric was missing from a scrape: an error, never a zero) or ``UNAVAILABLE`` (the host lacks what the condition
needs; never counted as passed).

| condition | counted from |
|---|---|
| ``queued`` | peak of vLLM's ``vllm:num_requests_waiting`` gauge, sampled during the load |
| ``preempted`` | ``vllm:num_preemptions_total`` (delta over the load) |
| ``prefix_cache_hits`` | ``vllm:prefix_cache_hits_total`` (delta, in tokens) |
| ``chunked_prefill`` | ``vllm:request_prefill_kv_computed_tokens``: requests whose computed prefill exceeded the long-prefill threshold, which the scheduler splits (delta) |
| ``n_gt_1`` | ``vllm:request_params_n``: requests with n > 1 (delta) |
| ``spec_decode_drafts`` | ``vllm:spec_decode_num_drafts_total`` (delta; speculative servers) |
| ``draft_graph_replays`` | our drafter's graph replays during the load (the worker's counters through ``/collective_rpc``; ours) |
| ``aborted`` | client: streams it disconnected after tokens came and before the request finished |
| ``staggered_arrivals`` | client: requests sent while another was between its first and last token |
| ``mixed_sampling_batches`` | client: greedy token chunks that arrived while a sampled request was between its first and last token (the budget lets every running request into every step, so they shared that step) |
| ``structured_output`` | client: completed ``response_format`` requests whose text is valid under the schema |
| ``eos`` | client: choices ended by an end-of-sequence id (``stop_reason`` null, or one of the generation config's EOS ids) |
| ``stop_string`` | client: choices ended by a stop string (``stop_reason`` a string) |
| ``max_tokens_in_window`` | client: greedy choices ended at ``max_tokens`` with ``(max_tokens - 1) % (1 + K) != 0`` |
| ``max_model_len`` | client: choices whose prompt and output fill ``max_model_len`` |
| ``sampled_off_greedy`` | client: seeded sampled choices that left the target's greedy output (sampling really sampled) |
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from portable_spec.draft.dispatcher import CHAIN_KINDS, FIRST_PASS_KINDS
from portable_spec_harness.soak import budget, metrics
from portable_spec_harness.soak.loadgen import Outcome
from portable_spec_harness.soak.metrics import GaugeTrace, Sample
from portable_spec_harness.soak.workload import GREEDY_CLASSES, RequestSpec, valid_structured

UNAVAILABLE = "unavailable on this host"
REQUIRED = ("preempted", "aborted", "queued", "chunked_prefill", "prefix_cache_hits", "mixed_sampling_batches",
            "structured_output")
"""The keys issue 22 names for the report."""
CONDITIONS = (*REQUIRED, "staggered_arrivals", "n_gt_1", "eos", "stop_string", "max_tokens_in_window",
              "max_model_len", "sampled_off_greedy", "spec_decode_drafts", "draft_graph_replays")
"""Every condition; on our drafter's servers each must be > 0."""


def replays_during(before: dict | None, after: dict | None, kinds: Iterable[str] | None = None) -> int | None:
    """Our drafter's graph replays between two probe readings (of ``kinds``, default all); None without readings."""
    if not before or not after or after.get("replays") is None:
        return None
    b, a = before.get("replays") or {}, after["replays"]
    return sum(a.get(k, 0) - b.get(k, 0) for k in (kinds if kinds is not None else a))


def count_during(before: dict | None, after: dict | None, field: str) -> dict[str, int] | None:
    """What one of our drafter's counters (``field``: a dict of counts by key) grew by between two probe readings,
    keys that did not grow left out; None without readings or without the counter (not our drafter)."""
    if not before or not after or after.get(field) is None:
        return None
    b, a = before.get(field) or {}, after[field]
    return {key: n - b.get(key, 0) for key, n in sorted(a.items()) if n - b.get(key, 0)}


def declines_during(before: dict | None, after: dict | None) -> dict[str, int] | None:
    """The steps our fused first pass left to vLLM's path between two probe readings, by reason (why a server's
    first-pass replays stay low)."""
    return count_during(before, after, "prep_declines")


def first_and_chain_replays(before: dict | None, after: dict | None) -> tuple[int | None, int | None]:
    return replays_during(before, after, FIRST_PASS_KINDS), replays_during(before, after, CHAIN_KINDS)


def _inside(t: float, windows: Sequence[tuple[float, float]]) -> bool:
    return any(start < t < end for start, end in windows)


def _token_window(o: Outcome) -> tuple[float, float] | None:
    return (o.chunk_times[0], o.chunk_times[-1]) if o.stream and len(o.chunk_times) >= 2 else None


def client_counts(specs: dict[str, RequestSpec], outcomes: Sequence[Outcome], eos_ids: Iterable[int],
                  greedy_expected: dict[str, list[int]] | None = None) -> dict[str, int]:
    """The conditions only the client sees (see the module table)."""
    eos = set(eos_ids)
    windows_all = [w for o in outcomes if not o.error_kind and (w := _token_window(o))]
    sampled_windows = [w for o in outcomes if not specs[o.rid].greedy and not o.error_kind
                       and (w := _token_window(o))]
    counts = dict.fromkeys(("aborted", "staggered_arrivals", "mixed_sampling_batches", "structured_output", "eos",
                            "stop_string", "max_tokens_in_window", "max_model_len", "sampled_off_greedy"), 0)
    for o in outcomes:
        spec = specs[o.rid]
        counts["aborted"] += o.aborted and bool(o.chunk_times)
        counts["staggered_arrivals"] += _inside(o.t_send, windows_all)
        if spec.greedy and not o.error_kind:
            counts["mixed_sampling_batches"] += sum(_inside(t, sampled_windows) for t in o.chunk_times)
        if not o.ok:
            continue
        prompt_tokens = len(spec.body["prompt"])
        for choice in o.choices.values():
            reason, stop = choice.finish_reason, choice.stop_reason
            counts["eos"] += reason == "stop" and (stop is None or stop in eos)
            counts["stop_string"] += reason == "stop" and isinstance(stop, str)
            if reason == "length" and prompt_tokens + len(choice.token_ids) >= budget.MAX_MODEL_LEN:
                counts["max_model_len"] += 1
            elif (reason == "length" and spec.klass in GREEDY_CLASSES
                  and len(choice.token_ids) == spec.body["max_tokens"]
                  and (spec.body["max_tokens"] - 1) % (1 + budget.K)):
                counts["max_tokens_in_window"] += 1
        if spec.body.get("response_format"):
            counts["structured_output"] += all(valid_structured(c.text) for c in o.choices.values())
        if spec.klass == "sampled_seeded" and greedy_expected and o.rid in greedy_expected:
            counts["sampled_off_greedy"] += sum(c.token_ids != greedy_expected[o.rid] for c in o.choices.values())
    return counts


def engine_counts(before: Sample | None, after: Sample | None, gauges: dict[str, GaugeTrace] | None,
                  speculative: bool) -> dict[str, int | None]:
    """The conditions vLLM's metrics count (None: a scrape or a name was missing)."""
    def d(name: str) -> int | None:
        if before is None or after is None:
            return None
        value = metrics.delta(before, after, name)
        return None if value is None else int(value)

    def above(name: str, bound: float) -> int | None:
        if before is None or after is None:
            return None
        value = metrics.histogram_delta_above(before, after, name, bound)
        return None if value is None else int(value)

    waiting = (gauges or {}).get(metrics.WAITING)
    return {"preempted": d(metrics.PREEMPTIONS), "prefix_cache_hits": d(metrics.PREFIX_CACHE_HITS),
            "queued": int(waiting.peak) if waiting is not None and waiting.samples else None,
            "chunked_prefill": above(metrics.PREFILL_COMPUTED, budget.LONG_PREFILL_TOKEN_THRESHOLD),
            "n_gt_1": above(metrics.PARAM_N, 1),
            "spec_decode_drafts": d(metrics.DRAFTS) if speculative else None}


def count(specs: dict[str, RequestSpec], outcomes: Sequence[Outcome], eos_ids: Iterable[int], *,
          before: Sample | None, after: Sample | None, gauges: dict[str, GaugeTrace] | None, speculative: bool,
          ours: bool, facts_before: dict | None, facts_after: dict | None, structured_available: bool,
          greedy_expected: dict[str, list[int]] | None = None) -> dict[str, Any]:
    """Every condition for one server (``spec_decode_drafts`` only on speculative servers, ``draft_graph_replays``
    only on ours)."""
    out: dict[str, Any] = {**client_counts(specs, outcomes, eos_ids, greedy_expected),
                           **engine_counts(before, after, gauges, speculative)}
    if not speculative:
        del out["spec_decode_drafts"]
    if ours:
        out["draft_graph_replays"] = replays_during(facts_before, facts_after)
    if not structured_available:
        out["structured_output"] = UNAVAILABLE
    return {k: out[k] for k in CONDITIONS if k in out}


def expected(*, speculative: bool, ours: bool) -> tuple[str, ...]:
    """The conditions ``count`` reports for such a server (what a report without one of them never read)."""
    skip = {"spec_decode_drafts"} if not speculative else set()
    skip |= {"draft_graph_replays"} if not ours else set()
    return tuple(name for name in CONDITIONS if name not in skip)


def failing(conditions: dict[str, Any], names: Iterable[str] | None = None) -> dict[str, str]:
    """Conditions that did not happen, with why: a zero count, a missing metric, unavailable here, or (for each of
    ``names``, the conditions the server must count) never counted at all."""
    out = {}
    for name in CONDITIONS if names is None else names:
        if name not in conditions:
            if names is not None:
                out[name] = "never counted: no reading of it reached the judge"
            continue
        value = conditions[name]
        if value == UNAVAILABLE:
            out[name] = UNAVAILABLE
        elif value is None:
            out[name] = "not counted: a metric or probe reading was missing"
        elif value <= 0:
            out[name] = "count 0: the load did not make it happen"
    return out
