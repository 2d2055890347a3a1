"""Several booted engines measured in turns: each variant's child boots once (all at the same time, fixed KV cache
so they can share the GPU), then the parent asks for one timed pass at a time, rotating through the variants. A
host whose speed drifts (other tenants, clocks) then shifts every variant alike instead of whichever booted last."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from portable_spec_harness.e2e.parent import own_compile_cache, variant_env

KV_CACHE_BYTES = 2 << 30


class ServedEngine:
    """One ``portable_spec_harness.e2e.child --serve`` process: READY once booted, then one REPLY per command."""

    def __init__(self, variant: str, child_args: list[str], log: Path, extra_env: dict[str, str] | None = None,
                 module: str = "portable_spec_harness.e2e.child"):
        self.variant = variant
        self.log = log
        env = {**variant_env(variant), **(extra_env or {})}
        cmd = [sys.executable, "-m", module, "--variant", variant, "--serve",
               "--kv-cache-bytes", str(KV_CACHE_BYTES), *child_args]
        self._log_file = open(log, "w")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log_file,
                                     text=True, env=env)
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self.proc.stdout:
            if line.startswith(("READY ", "REPLY ")):
                self._lines.put(line.rstrip("\n"))
        self._lines.put(None)  # the child's stdout closed: it exited

    def _next(self, prefix: str, timeout_s: float) -> dict[str, Any]:
        try:
            line = self._lines.get(timeout=timeout_s)
        except queue.Empty:
            return {"error": f"no {prefix.strip()} within {timeout_s:.0f} s, see {self.log.name}"}
        if line is None:
            return {"error": f"exit {self.proc.wait()}, see {self.log.name}"}
        return json.loads(line[len(prefix):])

    def ready(self, timeout_s: float) -> dict[str, Any]:
        return self._next("READY ", timeout_s)

    def ask(self, command: dict[str, Any], timeout_s: float = 300) -> dict[str, Any]:
        if self.proc.poll() is not None:
            return {"error": f"exit {self.proc.returncode}, see {self.log.name}"}
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()
        return self._next("REPLY ", timeout_s)

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write(json.dumps({"job": "exit"}) + "\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=60)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
        self._log_file.close()


def rotation(items: list[Any], turn: int) -> list[Any]:
    """``items`` starting at position ``turn``: every variant goes first, second, ... equally often."""
    k = turn % len(items) if items else 0
    return items[k:] + items[:k]


def measure_interleaved(engines: list[ServedEngine], concurrency: tuple[int, ...], repeats: int,
                        progress: Any = None) -> dict[str, dict[int, dict[str, Any]]]:
    """Warm every engine at every concurrency, then ``repeats`` rounds: per concurrency, one timed pass per
    engine, the engines' order rotating each round. Returns variant -> concurrency -> {"warm", "passes"}."""
    out: dict[str, dict[int, dict[str, Any]]] = {e.variant: {} for e in engines}
    for c in concurrency:
        for engine in engines:
            out[engine.variant][c] = {"warm": engine.ask({"job": "warm", "concurrency": c}), "passes": []}
    for turn in range(repeats):
        for c in concurrency:
            for engine in rotation(engines, turn):
                reply = engine.ask({"job": "pass", "concurrency": c})
                out[engine.variant][c]["passes"].append(reply)
                if progress is not None:
                    progress.update(1)
    return out


def boot_all(variants: tuple[str, ...], child_args: list[str], outdir: Path, timeout_s: float,
             progress: Any = None) -> tuple[list[ServedEngine], dict[str, dict[str, Any]]]:
    """Start every variant at once, each with its own vLLM compile cache, and wait for each to be ready. Returns
    the ready engines and each variant's boot facts (or its error)."""
    engines = [ServedEngine(v, child_args, outdir / f"bench_e2e_{v}.log", own_compile_cache(f"bench-{v}"))
               for v in variants]
    deadline = time.monotonic() + timeout_s
    facts, ready = {}, []
    for engine in engines:
        facts[engine.variant] = engine.ready(max(deadline - time.monotonic(), 1.0))
        if "error" in facts[engine.variant]:
            engine.close()
        else:
            ready.append(engine)
        if progress is not None:
            progress.update(1)
    return ready, facts
