"""The parent side: start one child per variant (bounded in time), collect its RESULT, keep its log."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from portable_spec.envs import INJECT_BUG_ENV
from portable_spec_harness.e2e.configs import VARIANTS
from portable_spec_harness import jit_judge
from portable_spec_harness.vllm_door.offline import MULTICAST_OFF_ENV

ISOLATION_ENV = {"VLLM_ALLOW_INSECURE_SERIALIZATION": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
                 "PYTHONUNBUFFERED": "1", **MULTICAST_OFF_ENV,
                 # vLLM logs to stdout by default; our protocol lines own stdout, the log file gets vLLM's lines.
                 "VLLM_LOGGING_STREAM": "ext://sys.stderr"}


def own_compile_cache(name: str) -> dict[str, str]:
    """Environment giving an engine its own vLLM compile cache: engines that boot at the same time must not write
    one cache entry together (torch's inductor cache, shared, is safe for that)."""
    return {"VLLM_CACHE_ROOT": f"/tmp/portable_spec_vllm_cache/{name}"}


def variant_env(variant: str, runner: str = "v1") -> dict[str, str]:
    """The child's environment: ours minus anything a variant chooses (platform, runner, drafter switches), plus
    the variant's (a simulated device's plugin first on ``PYTHONPATH``), plus isolation.
    ``runner="auto"`` leaves the V1/V2 choice to vLLM (e.g. MoE targets pick V1 by themselves)."""
    chosen_by_variants = {name for v in VARIANTS.values() for name in v.env}
    # An injected bug reaches one child only, through the driver's extra_env: never inherited by every variant.
    env = {k: v for k, v in os.environ.items() if k not in chosen_by_variants and k != INJECT_BUG_ENV}
    env.update(VARIANTS[variant].env)
    if VARIANTS[variant].simulated_device == "musa":
        from portable_spec_harness.musa_sim_plugin import plugin_env

        env.update(plugin_env(environ=env))
    if runner == "auto" and env.get("VLLM_USE_V2_MODEL_RUNNER") == "0":
        del env["VLLM_USE_V2_MODEL_RUNNER"]
    env.update(ISOLATION_ENV)
    return env


def run_variant(variant: str, child_args: list[str], log: Path, timeout_s: int,
                runner: str = "v1", extra_env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``python -m portable_spec_harness.e2e.child --variant VARIANT ...``; stderr goes to ``log``."""
    env = {**variant_env(variant, runner), **(extra_env or {})}
    cmd = [sys.executable, "-m", "portable_spec_harness.e2e.child", "--variant", variant, *child_args]
    print(f"[e2e] {variant}: {' '.join(child_args)}", flush=True)
    try:
        with open(log, "w") as fh:
            proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=fh, text=True, env=env, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"variant": variant, "error": f"timed out after {timeout_s} s, see {log.name}", "log": log.name}
    result = next((json.loads(line[7:]) for line in proc.stdout.splitlines() if line.startswith("RESULT ")), None)
    if result is None:
        return {"variant": variant, "error": f"exit {proc.returncode}, see {log.name}", "log": log.name}
    result["log"] = log.name
    jit = jit_judge.read(log)  # one read: the compiles and whether vLLM's JIT monitor armed, judged by jit_judge
    result[COMPILES_KEY], result[jit_judge.MONITOR_KEY] = list(jit.compiles), jit.monitor_active
    return result


def part_parser(default_variants: str) -> argparse.ArgumentParser:
    """The flags every e2e part driver takes: where results go, the zoo pair and its variant, K, seeds, variants."""
    parser = argparse.ArgumentParser()
    parser.add_argument("outdir")
    parser.add_argument("--pair", default="llama_eagle")
    parser.add_argument("--variant", default="perfect")
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--variants", default=default_variants)
    return parser


def run_variants(run_one: Callable[[str], dict[str, Any]], variants: list[str], concurrent: bool) -> list[dict]:
    """``run_one(variant)`` for each variant, in order: all at once (``concurrent``, a thread each: the engines boot
    together) or one after another."""
    if not concurrent:
        return [run_one(variant) for variant in variants]
    with ThreadPoolExecutor(max_workers=max(len(variants), 1)) as pool:
        return list(pool.map(run_one, variants))


def per_seed_rows(result: dict, seeds: list[int]) -> list[dict]:
    """One row per (variant, seed) from a child that ran every seed in one boot; engine facts are shared by the
    rows, per-seed outputs and acceptance are not. A child that failed yields a failed row for every seed."""
    runs = {run["seed"]: run for run in result.get("runs", [])}
    shared = {k: v for k, v in result.items() if k != "runs"}
    rows = []
    for seed in seeds:
        if "error" in result or seed not in runs:
            rows.append({**shared, "seed": seed, "error": result.get("error", f"no run for seed {seed}")})
        else:
            rows.append({**shared, **runs[seed]})
    return rows


COMPILES_KEY = "jit_during_inference"
"""Where a child's result keeps the kernels vLLM's JIT monitor saw compile after warm-up (``jit_judge.read``); beside
it ``jit_judge.MONITOR_KEY`` says whether the monitor armed."""


def no_compile_after_boot(row: dict) -> bool:
    """``jit_judge``'s verdict on an engine row of ours, for every e2e judge: vLLM's JIT monitor armed and no Triton
    kernel compiled after boot (a row that did not record the monitor fails)."""
    return not jit_judge.verdict(str(row.get("variant")), jit_judge.recorded(row, COMPILES_KEY))


EXCERPT_NEEDLES = ("portable_spec:", "Platform plugin", "Available plugins for group", "Capturing CUDA graphs",
                   "Capturing drafter", "capture sizes", "live-graph limit", "Model Runner", "SpecDecoding")
OUR_LINE = re.compile(r"portable_spec(\[[\w-]+\])?:")
"""Our adapter's log lines: ``portable_spec: ...`` and, naming the platform, ``portable_spec[musa-sim]: ...``."""


def log_excerpt(log: Path, needles: tuple[str, ...] = EXCERPT_NEEDLES, limit: int = 40) -> list[str]:
    """The log lines that say which platform, runner and graphs an engine got (our own lines always kept)."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return []
    ours = [line for line in lines if OUR_LINE.search(line)]
    other = [line for line in lines if not OUR_LINE.search(line) and any(n in line for n in needles)]
    return [clipped(line) for line in ours + other[: max(limit - len(ours), 0)]]


def clipped(line: str, head: int = 400, tail: int = 200) -> str:
    """A long line's head (what the line is: our prefix, the worker, the platform) and tail (its counts)."""
    return line if len(line) <= head + tail else f"{line[:head]} ... {line[-tail:]}"
