"""vLLM 0.26.0's Prometheus names the soak reads, the text format, and what a count is made of.

Each name is the exposition name: ``prometheus_client`` adds ``_total`` to a Counter's name and ``_bucket``, ``_count``
and ``_sum`` to a Histogram's (``tests/test_soak_vllm_shapes.py`` reads vLLM's source for each base name and its
metric class, and renders one through ``prometheus_client``). A name missing from a server's ``/metrics`` is an
error, never a zero: ``Sample.get`` returns None and the judge fails the condition.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

# name -> (vLLM's base name, metric class, where vLLM defines it)
SOURCES: dict[str, tuple[str, str, str]] = {}


def _metric(base: str, kind: str, where: str = "v1/metrics/loggers.py") -> str:
    exposed = base + "_total" if kind == "Counter" else base
    SOURCES[exposed] = (base, kind, where)
    return exposed


PREEMPTIONS = _metric("vllm:num_preemptions", "Counter")
"""Requests the scheduler preempted (``scheduler._preempt_request``; ``iteration_stats.num_preempted_reqs``)."""
PREFIX_CACHE_HITS = _metric("vllm:prefix_cache_hits", "Counter")
"""Prompt tokens served from the prefix cache."""
PREFIX_CACHE_QUERIES = _metric("vllm:prefix_cache_queries", "Counter")
WAITING = _metric("vllm:num_requests_waiting", "Gauge")
"""Requests in the scheduler's waiting queue now (set every engine step)."""
RUNNING = _metric("vllm:num_requests_running", "Gauge")
PREFILL_COMPUTED = _metric("vllm:request_prefill_kv_computed_tokens", "Histogram")
"""Per finished request, prompt tokens computed (not cached) in its prefill: above the long-prefill threshold, the
scheduler split them into chunks."""
PARAM_N = _metric("vllm:request_params_n", "Histogram")
"""Per request, its ``n``."""
ITERATIONS = _metric("vllm:iteration_tokens_total", "Histogram")
"""One observation per engine step (its token count): ``_count`` is the number of steps."""
GENERATION_TOKENS = _metric("vllm:generation_tokens", "Counter")
REQUEST_SUCCESS = _metric("vllm:request_success", "Counter")
"""Finished requests by ``finished_reason`` (stop, length, abort, error, repetition)."""
DRAFTS = _metric("vllm:spec_decode_num_drafts", "Counter", "v1/spec_decode/metrics.py")
DRAFT_TOKENS = _metric("vllm:spec_decode_num_draft_tokens", "Counter", "v1/spec_decode/metrics.py")
ACCEPTED = _metric("vllm:spec_decode_num_accepted_tokens", "Counter", "v1/spec_decode/metrics.py")
SPECULATIVE = (DRAFTS, DRAFT_TOKENS, ACCEPTED)
"""Only a speculating server has these."""


@dataclass
class Sample:
    """One scrape of ``/metrics``: sample name -> [(labels, value)]."""

    series: dict[str, list[tuple[dict[str, str], float]]] = field(default_factory=dict)

    def get(self, name: str, **labels: str) -> float | None:
        """The sum over the series of ``name`` whose labels include ``labels``; None when ``name`` is absent."""
        rows = self.series.get(name)
        if rows is None:
            return None
        return sum(v for lab, v in rows if all(lab.get(k) == want for k, want in labels.items()))

    def histogram_above(self, name: str, bound: float) -> float | None:
        """Observations of histogram ``name`` above ``bound`` (which must be one of its bucket bounds): ``_count``
        minus the ``le=bound`` bucket; None when the histogram or that bucket is absent."""
        count = self.get(name + "_count")
        rows = self.series.get(name + "_bucket")
        if count is None or rows is None:
            return None
        at = [v for lab, v in rows if _le(lab.get("le")) == float(bound)]
        return None if not at else count - sum(at)


def _le(text: str | None) -> float:
    if text is None:
        return math.nan
    return math.inf if text in ("+Inf", "Inf") else float(text)


def parse(text: str) -> Sample:
    """The Prometheus text format (``# HELP``/``# TYPE`` lines and comments skipped)."""
    sample = Sample()
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if "{" in line:
            name, rest = line.split("{", 1)
            label_text, _, value_text = rest.rpartition("}")
            labels = _labels(label_text)
        else:
            name, _, value_text = line.partition(" ")
            labels = {}
        value = value_text.split()[0]
        sample.series.setdefault(name.strip(), []).append((labels, float(value)))
    return sample


def _labels(text: str) -> dict[str, str]:
    """``a="x",b="y, z"`` -> dict (quoted values may hold commas and escaped quotes)."""
    labels, i = {}, 0
    while i < len(text):
        eq = text.index("=", i)
        key = text[i:eq].strip().lstrip(",").strip()
        j, value = eq + 2, []
        while text[j] != '"':
            if text[j] == "\\":
                j += 1
                value.append({"n": "\n"}.get(text[j], text[j]))
            else:
                value.append(text[j])
            j += 1
        labels[key] = "".join(value)
        i = j + 1
    return labels


def delta(before: Sample, after: Sample, name: str, **labels: str) -> float | None:
    """``after - before`` for a counter; None if either scrape lacks it."""
    a, b = after.get(name, **labels), before.get(name, **labels)
    return None if a is None or b is None else a - b


def histogram_delta_above(before: Sample, after: Sample, name: str, bound: float) -> float | None:
    a, b = after.histogram_above(name, bound), before.histogram_above(name, bound)
    return None if a is None or b is None else a - b


@dataclass
class GaugeTrace:
    """What the client saw of a gauge during the load: its peak, how often it was sampled and was above 0, and
    scrapes that failed or lacked it (then the peak is no evidence)."""

    name: str
    peak: float = 0.0
    samples: int = 0
    above_zero: int = 0
    missing: int = 0

    def add(self, sample: Sample | None) -> None:
        value = None if sample is None else sample.get(self.name)
        if value is None:
            self.missing += 1
            return
        self.samples += 1
        self.peak = max(self.peak, value)
        self.above_zero += value > 0

    def as_json(self) -> dict[str, float | int]:
        return {"peak": self.peak, "samples": self.samples, "above_zero": self.above_zero, "missing": self.missing}
