"""One run of vLLM's own client, ``vllm bench serve``, against one server, and what it saved.

The client runs in this process (``portable_spec_harness.vllm_door.bench_client``) on a thread of its own, so a server
that stops answering costs ``timeout_s`` and not the whole benchmark; what it prints goes to the run's own text file
(the numbers a person would read on the console), and the numbers the report uses come from the JSON it writes with
``--save-result`` (read by ``read_result``, which refuses a run with failed requests or a missing metric).
"""

from __future__ import annotations

import io
import json
import math
import shlex
import statistics
import sys
import threading
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from portable_spec_harness.serve_bench.plan import SAMPLING

LATENCIES = ("ttft", "tpot", "itl", "e2el")
STATISTICS = ("mean", "median", "p99")
METRICS = ("output_throughput", "request_throughput", "total_token_throughput", "duration",
           *(f"{s}_{m}_ms" for m in LATENCIES for s in STATISTICS))
"""What every run must have saved (``vllm/benchmarks/serve.py``: ``benchmark`` and ``process_one_metric``, with
``--percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 99``)."""
COUNTS = ("completed", "failed", "num_prompts", "max_concurrency", "total_input_tokens", "total_output_tokens")
SPECULATION = ("spec_decode_acceptance_length", "spec_decode_acceptance_rate", "spec_decode_num_drafts",
               "spec_decode_draft_tokens", "spec_decode_accepted_tokens", "spec_decode_per_position_acceptance_rates")
"""Present when the server's ``/metrics`` had spec-decode counters that moved during the run."""
DETAILED = ("input_lens", "output_lens", "start_times", "ttfts", "itls", "generated_texts", "errors")
"""What ``--save-detailed`` adds per request (``vllm/benchmarks/serve.py``): read once by ``condense``, then dropped
from the saved file (hundreds of kB per run), which says so in ``detailed_fields_dropped``."""
STALL_FACTOR = 3.0
"""An inter-token latency over this many times the run's median ITL counts as a stall."""
STALLS_KEPT = 5
STALL_THRESHOLD_MS = 100.0
"""An inter-token gap at or over this many ms counts into the run's stall total (``gap_ms_over_threshold``): a fixed
threshold, unlike ``STALL_FACTOR``, so runs of different variants and cells add up the same kind of gap."""
TAIL_EDGES_MS = (50.0, 100.0, 150.0, 200.0)
"""The run's gaps are counted at or over each of these (``gaps_at_least_ms``): edges coarse enough to tell decode gaps
from steps that hold one or two long prompts' prefills at the prompt lengths issue 41 varies."""
P99 = 0.99
"""The percentile of the client's ``p99_itl_ms``, which ``p99_neighbours`` brackets."""


@dataclass(frozen=True)
class ClientRun:
    host: str
    port: int
    model: str
    """The target's path: the name ``vllm serve TARGET`` serves it under, and the client's default tokenizer."""
    tokenizer: str
    input_len: int
    output_len: int
    num_prompts: int
    concurrency: int
    seed: int
    sampling: str
    """A name of ``plan.SAMPLING``; a sampled run's requests carry ``seed`` too (``sampling_args``)."""
    result_dir: str
    result_name: str
    label: str
    metadata: tuple[str, ...] = ()


def sampling_args(sampling: str, seed: int) -> list[str]:
    """``vllm bench serve``'s sampling flags for ``plan.SAMPLING[sampling]`` (``--temperature``, ``--top-p``; the
    client sends each in every request's body). A sampled run also puts ``seed`` into every request's body
    (``--extra-body``): the client's ``--seed`` seeds only its random prompts, and an unseeded request samples
    differently on every run."""
    params = SAMPLING[sampling]
    args = [a for key, value in params.items() for a in (f"--{key.replace('_', '-')}", f"{value:g}")]
    if params["temperature"] > 0:
        args += ["--extra-body", json.dumps({"seed": seed})]
    return args


def client_args(run: ClientRun) -> list[str]:
    """``vllm bench serve`` arguments: the random dataset at fixed lengths (range ratio 0), every request sent at
    once behind ``--max-concurrency``, EOS ignored, the run's sampling, the result saved as JSON with every
    request's latencies (``condense`` keeps their stalls; ``tests/test_serve_bench.py`` parses the arguments with
    vLLM's own parser)."""
    args = ["--backend", "openai", "--endpoint", "/v1/completions", "--host", run.host, "--port", str(run.port),
            "--model", run.model, "--tokenizer", run.tokenizer, "--dataset-name", "random",
            "--random-input-len", str(run.input_len), "--random-output-len", str(run.output_len),
            "--random-range-ratio", "0", "--num-prompts", str(run.num_prompts),
            "--max-concurrency", str(run.concurrency), "--request-rate", "inf", "--seed", str(run.seed),
            *sampling_args(run.sampling, run.seed), "--ignore-eos", "--disable-tqdm",
            "--percentile-metrics", ",".join(LATENCIES), "--metric-percentiles", "99",
            "--save-result", "--save-detailed", "--result-dir", run.result_dir, "--result-filename", run.result_name,
            "--label", run.label]
    if run.metadata:
        args += ["--metadata", *run.metadata]
    return args


def command_line(argv: list[str]) -> str:
    """The run as a person would type it."""
    return "vllm bench serve " + shlex.join(argv)


def itl_stalls(saved: dict[str, Any]) -> dict[str, Any]:
    """The run's inter-token latencies over ``STALL_FACTOR`` x their median: how many of how many, their excess over
    the median in ms, and the largest few with the request, the token and when it came (s after the first request
    started). Why: a run's mean ITL can sit well above its median from a handful of long gaps (issue 24's EAGLE-3
    dummy pair at c=2); this says where they were. Beside them, the gaps at or over ``STALL_THRESHOLD_MS``: how many
    and their sum (the run's stall total, comparable across runs); how many gaps reach each of ``TAIL_EDGES_MS``; and
    the two gaps the client's p99 ITL interpolates between (``p99_neighbours``). Why the last two: at long prompts
    the p99 can sit on the edge between decode gaps and the steps that hold a prefill (issue 41's missed cell), and
    which side it fell on, and how many gaps were on the far side, is then the run's whole story. No ITLs: ``itls``
    0 and nothing else."""
    itls = saved.get("itls") or []
    flat = [gap for request in itls for gap in (request or [])]
    if not flat:
        return {"itls": 0}
    ordered = sorted(flat)  # the median's and the p99's neighbours' order, sorted once
    median = ordered[len(flat) // 2]
    starts, ttfts = saved.get("start_times") or [], saved.get("ttfts") or []
    origin = min(starts) if starts else 0.0
    found = []
    for i, request in enumerate(itls):
        at = (starts[i] - origin + ttfts[i]) if i < len(starts) and i < len(ttfts) else None
        for j, gap in enumerate(request or []):
            at = at + gap if at is not None else None
            if gap > STALL_FACTOR * median:
                found.append({"request": i, "token": j + 1, "ms": round(1000 * gap, 2),
                              "at_s": round(at, 3) if at is not None else None})
    largest = sorted(found, key=lambda stall: stall["ms"], reverse=True)[:STALLS_KEPT]
    long_gaps = [1000 * gap for gap in flat if 1000 * gap >= STALL_THRESHOLD_MS]
    return {"itls": len(flat), "median_itl_ms": round(1000 * median, 3), "stalls": len(found),
            "stall_excess_ms": round(sum(stall["ms"] for stall in found) - 1000 * median * len(found), 1),
            "largest": largest, "threshold_ms": STALL_THRESHOLD_MS, "gaps_over_threshold": len(long_gaps),
            "gap_ms_over_threshold": round(sum(long_gaps), 1),
            "gaps_at_least_ms": {str(int(edge)): sum(1000 * gap >= edge for gap in flat) for edge in TAIL_EDGES_MS},
            "p99_neighbours": p99_neighbours(ordered)}


def request_times(saved: dict[str, Any]) -> dict[str, list[float]] | None:
    """Per request, in the client's order: when it started (s after the first request started) and its time to first
    token (ms); None without a start and a TTFT for every request. Why: two servers' median TTFTs can part at a cell
    where one decodes as fast or faster (issue 41's MoE pair at 4096 in, c=8: ours' median TTFT the higher in all six
    rounds, its median TPOT the lower), and whether the late first tokens are the run's opening burst or prompts that
    arrive together as others finish (the prefills queued at each start, ``prefills_ahead``) is in these times alone
    once ``condense`` drops the per-request fields."""
    starts, ttfts = saved.get("start_times") or [], saved.get("ttfts") or []
    if not starts or len(ttfts) != len(starts):
        return None
    origin = min(starts)
    return {"start_s": [round(start - origin, 3) for start in starts],
            "ttft_ms": [round(1000 * ttft, 1) for ttft in ttfts]}


def prefills_ahead(times: dict[str, list[float]]) -> list[int]:
    """For each request of ``request_times``, how many requests started before it (or at the same instant, earlier in
    the client's order) had no first token yet when it started: the prefills its own prompt queued behind. At a fixed
    concurrency every start but the opening burst's finds the same number of requests in flight, so that count says
    nothing; this one tells a prompt that arrived alone from one that arrived with others."""
    starts, ttfts = times["start_s"], times["ttft_ms"]
    return [sum(1 for j in range(len(starts)) if (starts[j], j) < (starts[i], i)
                and starts[j] + ttfts[j] / 1000 > starts[i]) for i in range(len(starts))]


def ttft_by_prefills_ahead(times: dict[str, list[float]]) -> dict[str, dict[str, float]]:
    """The run's requests grouped by ``prefills_ahead``: per count, how many requests and their median TTFT (ms)."""
    groups: dict[int, list[float]] = {}
    for ahead, ttft in zip(prefills_ahead(times), times["ttft_ms"]):
        groups.setdefault(ahead, []).append(ttft)
    return {str(k): {"requests": len(v), "median_ttft_ms": round(statistics.median(v), 1)}
            for k, v in sorted(groups.items())}


def p99_ranks(n: int) -> tuple[int, int]:
    """The ranks, counted from the longest (1 = the longest), of the two of ``n`` gaps whose linear interpolation is
    the client's 99th percentile, the lower gap first: vLLM's bench takes ``numpy.percentile``'s default, position
    0.99 x (n - 1) in the sorted gaps."""
    low = math.floor(P99 * (n - 1))
    return n - low, n - min(low + 1, n - 1)


def p99_neighbours(ordered: list[float]) -> list[dict[str, Any]]:
    """The two gaps (seconds in, ms out) at ``p99_ranks`` of ``ordered`` (the gaps sorted shortest first, as
    ``itl_stalls`` holds them), the lower first, each with its rank."""
    return [{"rank": rank, "ms": round(1000 * ordered[len(ordered) - rank], 2)} for rank in p99_ranks(len(ordered))]


def condense(path: str | Path) -> None:
    """Replace a saved result's per-request fields (``DETAILED``) by their ``itl_stalls`` and ``request_times`` (with
    ``ttft_by_prefills_ahead``); the file says which fields it dropped. A file without them (or none at all) is left as
    it is: ``read_result`` judges it."""
    try:
        saved = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return
    dropped = [key for key in DETAILED if key in saved]
    if not dropped:
        return
    saved["itl_stalls"] = itl_stalls(saved)
    times = request_times(saved)
    if times is not None:
        saved["request_times"] = times
        saved["ttft_by_prefills_ahead"] = ttft_by_prefills_ahead(times)
    for key in dropped:
        del saved[key]
    saved["detailed_fields_dropped"] = dropped
    Path(path).write_text(json.dumps(saved, indent=1))


class ResultError(ValueError):
    """A saved client result that cannot be used: missing, failed requests, a metric absent."""


def read_result(path: str | Path, speculative: bool = True) -> dict[str, Any]:
    """The saved JSON's counts, metrics and (``speculative``) acceptance; raises ``ResultError`` naming the first
    problem: no file, a failed or missing request, a metric absent or not a number."""
    try:
        saved = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ResultError(f"no client result at {path}: {type(exc).__name__}") from None
    missing = [k for k in (*COUNTS, *METRICS) if not isinstance(saved.get(k), (int, float))]
    if missing:
        raise ResultError(f"{Path(path).name} lacks {', '.join(missing)}")
    if saved["failed"] or saved["completed"] != saved["num_prompts"]:
        raise ResultError(f"{saved['failed']} of {saved['num_prompts']} requests failed "
                          f"({saved['completed']} completed)")
    out = {k: saved[k] for k in (*COUNTS, *METRICS)}
    for key in SPECULATION:
        out[key] = saved.get(key)
    if "itl_stalls" in saved:  # condense() wrote it from the run's per-token latencies
        out["itl_stalls"] = saved["itl_stalls"]
        out.update(stall_total(saved["itl_stalls"]))
    if "ttft_by_prefills_ahead" in saved:  # condense() wrote it from the run's per-request times
        out["ttft_by_prefills_ahead"] = saved["ttft_by_prefills_ahead"]
    if speculative and not isinstance(saved.get("spec_decode_acceptance_length"), (int, float)):
        raise ResultError(f"{Path(path).name} has no acceptance length: the server's /metrics showed no "
                          "spec-decode counters moving")
    return out


def stall_total(stalls: dict[str, Any]) -> dict[str, Any]:
    """The run's stall total for the report's cells (``stats.OPTIONAL_METRICS``): ``stall_total_ms`` (the ITL gaps at
    or over the threshold, summed) and ``stall_gaps`` (how many). Empty when ``itl_stalls`` has no such count (no
    ITLs saved, or a result condensed before the threshold existed)."""
    if "gap_ms_over_threshold" not in stalls:
        return {}
    return {"stall_total_ms": stalls["gap_ms_over_threshold"], "stall_gaps": stalls["gaps_over_threshold"]}


class _RoutedStdout(io.TextIOBase):
    """``sys.stdout`` while clients run: a thread that registered a buffer writes there, any other to ``fallback``."""

    def __init__(self, fallback: Any) -> None:
        self.fallback = fallback
        self.buffers: dict[int, io.StringIO] = {}

    def write(self, text: str) -> int:
        return self.buffers.get(threading.get_ident(), self.fallback).write(text)

    def flush(self) -> None:
        self.fallback.flush()


def run_client(argv: list[str], log: Path, timeout_s: float,
               bench: Callable[[list[str]], dict[str, Any]] | None = None) -> dict[str, Any]:
    """Run ``vllm bench serve ARGV`` on a thread; its printed text goes to ``log``. Returns ``{"seconds": s}`` or,
    when it raised or did not finish within ``timeout_s``, ``{"error": ..., "seconds": s}``."""
    import time

    if bench is None:
        from portable_spec_harness.vllm_door.bench_client import bench_serve as bench
    routed = sys.stdout if isinstance(sys.stdout, _RoutedStdout) else _RoutedStdout(sys.stdout)
    previous, sys.stdout = sys.stdout, routed
    outcome: dict[str, Any] = {}
    buffer = io.StringIO()

    def target() -> None:
        routed.buffers[threading.get_ident()] = buffer
        try:
            bench(argv)
        except BaseException as exc:  # the client's SystemExit on a bad flag included: report, never exit
            outcome["error"] = f"{type(exc).__name__}: {exc}".strip()
            buffer.write(traceback.format_exc())

    started = time.monotonic()
    thread = threading.Thread(target=target, name="vllm-bench-serve", daemon=True)
    thread.start()
    thread.join(timeout_s)
    seconds = round(time.monotonic() - started, 2)
    if thread.is_alive():
        outcome["error"] = f"no result within {timeout_s:.0f} s (the client still waits on the server)"
    else:
        routed.buffers.pop(thread.ident, None)
        sys.stdout = previous
    log.write_text(buffer.getvalue())
    return {**outcome, "seconds": seconds}
