"""Timing for the cuda lane's kernel-substitute tests: per-launch times from CUDA graphs of many launches (no Python
or launch overhead), replayed in interleaved rounds (host and clock drift hit every variant alike), medians; the bar
a substitute must meet against vLLM's kernel; and the lane's JSON report of it."""

from __future__ import annotations

import datetime
import json
import math
import os
import statistics
from collections.abc import Callable

import torch

BAR, SHAPE_CAP = 1.05, 1.15
"""Substitute/vLLM time: the geometric mean over a kernel's shapes must be <= BAR, and no shape above SHAPE_CAP
(microsecond kernels jitter by a few percent)."""


def graph(fn: Callable[[], object], launches: int) -> torch.cuda.CUDAGraph:
    """A CUDA graph of ``launches`` calls of ``fn`` (called once before, to compile and warm up)."""
    fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(launches):
            fn()
    torch.cuda.synchronize()
    return g


def per_launch_us(g: torch.cuda.CUDAGraph, launches: int, replays: int = 5) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(replays):
        g.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1000.0 / (replays * launches)


def compare_graphs(vllm_graph: torch.cuda.CUDAGraph, ours_graph: torch.cuda.CUDAGraph, launches: int,
                   rounds: int = 7) -> dict:
    """Median per-launch microseconds of both graphs over interleaved rounds, and their ratio."""
    samples: dict[str, list[float]] = {"vllm": [], "ours": []}
    for _ in range(rounds):
        samples["vllm"].append(per_launch_us(vllm_graph, launches))
        samples["ours"].append(per_launch_us(ours_graph, launches))
    vllm_us, ours_us = statistics.median(samples["vllm"]), statistics.median(samples["ours"])
    return {"vllm_us": round(vllm_us, 3), "substitute_us": round(ours_us, 3), "ratio": round(ours_us / vllm_us, 4)}


def compare_times(fn_vllm: Callable[[], object], fn_ours: Callable[[], object], launches: int,
                  rounds: int = 7) -> dict:
    return compare_graphs(graph(fn_vllm, launches), graph(fn_ours, launches), launches, rounds)


def check_bar(rows: list[dict], name: str, results: dict) -> None:
    """Record ``name``'s geometric-mean ratio in ``results`` and assert the bar."""
    ratios = [r["ratio"] for r in rows]
    geomean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    results[f"{name}_geomean_ratio"] = round(geomean, 4)
    assert geomean <= BAR, f"{name}: substitute/vLLM time {geomean:.3f}x over {len(rows)} shapes: {ratios}"
    assert max(ratios) <= SHAPE_CAP, f"{name}: a shape runs {max(ratios):.3f}x vLLM's time: {rows}"


def write_report(results: dict, filename: str) -> None:
    """Add the device, versions and date to ``results`` and write them to ``$PORTABLE_SPEC_GPU_OUT/filename`` (when
    the lane sets that variable)."""
    out = os.environ.get("PORTABLE_SPEC_GPU_OUT")
    if not out:
        return
    import triton
    import vllm

    os.makedirs(out, exist_ok=True)
    results.update(device=torch.cuda.get_device_name(), torch=torch.__version__, triton=triton.__version__,
                   vllm=vllm.__version__, date=datetime.date.today().isoformat())
    with open(os.path.join(out, filename), "w") as fh:
        json.dump(results, fh, indent=1)
