"""The soak's report: one JSON object (device, versions, date, sizes, per pair and server the counts and verdicts)
and a short table for the console. ``REQUIRED_KEYS`` are the keys issue 22 asks every row for;
``missing_keys`` is how a test (and the driver, before writing) holds the report to them."""

from __future__ import annotations

import datetime
import importlib.metadata
import platform
import subprocess
from pathlib import Path
from typing import Any

from portable_spec_harness.soak import budget, conditions

REQUIRED_KEYS = ("requests", "tokens", "conditions", "mismatches", "errors", "latency_ms")
COLUMNS = (("preempted", "preempt"), ("aborted", "abort"), ("queued", "queue"), ("chunked_prefill", "chunk"),
           ("prefix_cache_hits", "prefix"), ("mixed_sampling_batches", "mixed"), ("structured_output", "json"),
           ("n_gt_1", "n>1"), ("eos", "eos"), ("stop_string", "stop"), ("max_tokens_in_window", "maxtok"),
           ("max_model_len", "maxlen"), ("draft_graph_replays", "replay"))


def _version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


ENVIRONMENT_KEYS = ("date", "python", "vllm", "torch", "triton", "xgrammar", "device", "device_count", "cuda", "commit",
                    "tree_changes")
"""What ``environment`` gives a report (``device_count`` and ``cuda`` where torch imports): a report assembled on
another machine (``serve_bench.finalize``) takes these from one written on the host."""


def environment() -> dict[str, Any]:
    """Device, versions and commit, as the other ``bench/results`` JSON carry them."""
    info: dict[str, Any] = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                            "python": platform.python_version(), "vllm": _version("vllm"),
                            "torch": _version("torch"), "triton": _version("triton"),
                            "xgrammar": _version("xgrammar")}
    try:
        import torch

        info["device"] = torch.cuda.get_device_name() if torch.cuda.is_available() else None
        info["device_count"] = torch.cuda.device_count()
        info["cuda"] = torch.version.cuda
    except Exception as exc:  # the report is still written on a host without torch/CUDA (the CPU tests)
        info["device"] = f"unknown ({type(exc).__name__})"
    info["commit"], info["tree_changes"] = git_state(Path(__file__).resolve().parents[3])
    return info


def git_state(root: Path) -> tuple[str | None, int | None]:
    """The checkout's HEAD and how many paths differ from it (``git status --porcelain``: changed, added or untracked
    files that are not ignored). Why the count: a GPU host may run a working tree whose HEAD is older than the code it
    holds, so a result's ``commit`` alone can name code that did not run; ``tree_changes`` > 0 says so. None, None
    where git or the repository is missing."""
    def git(*args: str) -> str | None:
        try:
            proc = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        return proc.stdout if proc.returncode == 0 else None

    head = git("rev-parse", "HEAD")
    if not head or not head.strip():
        return None, None
    status = git("status", "--porcelain")
    return head.strip(), (None if status is None else len(status.splitlines()))


def missing_keys(report: dict[str, Any]) -> list[str]:
    """Required keys absent anywhere in ``report`` (``pair/server.key``), and required conditions absent."""
    missing = [key for key in ("status", "pairs", "budget") if key not in report]
    for pair, entry in report.get("pairs", {}).items():
        for name, row in entry.get("servers", {}).items():
            missing += [f"{pair}/{name}.{key}" for key in REQUIRED_KEYS if key not in row]
            missing += [f"{pair}/{name}.conditions.{key}" for key in conditions.REQUIRED
                        if key not in row.get("conditions", {})]
    return missing


def assemble(pairs: dict[str, Any], status: str, failures: list[str], extra: dict[str, Any]) -> dict[str, Any]:
    return {**environment(), **extra, "budget": budget.as_json(), "status": status, "failures": failures,
            "pairs": pairs}


def _cell(value: Any) -> str:
    if value == conditions.UNAVAILABLE:
        return "n/a"
    return "-" if value is None else str(value)


def padded_builds(row: dict[str, Any]) -> int | None:
    """Our drafter's forwards that built their metadata for a larger graph's batch during the load (all step kinds);
    None for servers without our drafter or readings."""
    counts = (row.get("drafter") or {}).get("padded_metadata_builds")
    return None if counts is None else sum(counts.values())


def table(report: dict[str, Any]) -> str:
    """One line per pair and server: counts, mismatches, errors, our padded metadata builds, TTFT/TPOT p50/p99 (ms),
    and what failed."""
    head = ["pair/server", "reqs", "tokens", "mism", "err", *(short for _, short in COLUMNS), "padded",
            "ttft50", "ttft99", "tpot50", "tpot99"]
    rows = [head]
    for pair, entry in report.get("pairs", {}).items():
        for name, row in entry.get("servers", {}).items():
            conds, lat = row.get("conditions", {}), row.get("latency_ms", {})
            rows.append([f"{pair}/{name}", str(row.get("requests")), str(row.get("tokens")),
                         str(row.get("mismatches")), str(row.get("errors")),
                         *(_cell(conds.get(key)) for key, _ in COLUMNS), _cell(padded_builds(row)),
                         *(_cell(lat.get(k, {}).get(p)) for k in ("ttft", "tpot") for p in ("p50", "p99"))])
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["  ".join(cell.rjust(w) if i else cell.ljust(w) for i, (cell, w) in enumerate(zip(r, widths)))
             for r in rows]
    tp = (report.get("tensor_parallel") or {}).get("tensor_parallel_size", 1)
    lines.append(f"soak: {report.get('status')}, TP={tp}" + (f" ({len(report['failures'])} failures)"
                                                    if report.get("failures") else ""))
    lines += [f"  {f}" for f in report.get("failures", [])[:40]]
    return "\n".join(lines)
