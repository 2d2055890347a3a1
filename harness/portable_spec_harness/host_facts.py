"""The benchmark host's CPU: its model and signature, how many CPUs this process may use, its load and two speed
probes.

Why: every GPU lease is a fresh machine, and a serving benchmark pools rounds from several leases. A variant whose
decode steps are host-bound (upstream V1's EAGLE drafter runs PIECEWISE graphs, Python and torch's dispatcher
between its launches) runs slower on a slower host CPU, while one that replays a FULL graph per step hardly moves;
so the same GPU and code can give another ratio on another lease. The probes make two leases' hosts comparable in
the reports: the best of a few passes of a fixed pure-Python loop, and of a fixed run of torch CPU ops (the
dispatcher's cost per op, what a host-bound step pays per launch), asked in a child process so this one imports
no torch. A probe that cannot run is None with the reason beside it, never a made-up number.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

PYTHON_LOOP = 200_000
"""Iterations of the pure-Python probe (about 10 ms on a 2020s server core)."""
TORCH_OPS = 5_000
"""In-place CPU ops of the torch probe."""
PASSES = 5
"""Each probe's best of this many passes: the best pass is the host's speed, the others its noise."""

TORCH_PROBE = f"""
import json, time, torch
x = torch.zeros(8)
best = None
for _ in range({PASSES}):
    t = time.perf_counter()
    for _ in range({TORCH_OPS}):
        x.add_(1)
    dt = time.perf_counter() - t
    best = dt if best is None else min(best, dt)
print(json.dumps({{"torch_cpu_op_us": best / {TORCH_OPS} * 1e6}}))
"""


def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str | None:
    """The first ``model name`` line of ``cpuinfo`` (x86 Linux), else its ``Hardware`` / ``CPU part`` line (Arm),
    else None."""
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:
        return None
    for field in ("model name", "Hardware", "CPU part"):
        for line in text.splitlines():
            name, sep, value = line.partition(":")
            if sep and name.strip() == field and value.strip():
                return value.strip()
    return None


def cpu_signature(cpuinfo: Path = Path("/proc/cpuinfo")) -> str | None:
    """``family F model M stepping S`` of the first CPU in ``cpuinfo`` (x86 Linux), with its ``cache size`` where
    given, else None. Why beside the model: a virtual machine may show a generic model name ("Intel(R) Xeon(R)
    Processor", as the H200 hosts do), while family, model and stepping still tell one CPU generation from another."""
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:
        return None
    first: dict[str, str] = {}
    for line in text.splitlines():
        name, sep, value = line.partition(":")
        if sep and name.strip() not in first:
            first[name.strip()] = value.strip()
    if not all(first.get(key) for key in ("cpu family", "model", "stepping")):
        return None
    cache = f", cache {first['cache size']}" if first.get("cache size") else ""
    return f"family {first['cpu family']} model {first['model']} stepping {first['stepping']}{cache}"


def python_loop_ms(iterations: int = PYTHON_LOOP, passes: int = PASSES) -> float:
    """The best of ``passes`` timings, in ms, of summing ``i * i`` over ``iterations`` integers in Python."""
    if iterations < 1 or passes < 1:
        raise ValueError(f"iterations ({iterations}) and passes ({passes}) must be at least 1")
    best = float("inf")
    for _ in range(passes):
        t = time.perf_counter()
        total = 0
        for i in range(iterations):
            total += i * i
        best = min(best, time.perf_counter() - t)
    return best * 1e3


def torch_cpu_op_us(timeout_s: float = 120.0) -> tuple[float | None, str | None]:
    """(µs per in-place torch CPU op, the best of ``PASSES``; None) or (None, why it could not be measured)."""
    try:
        done = subprocess.run([sys.executable, "-c", TORCH_PROBE], capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"{type(exc).__name__}: {exc}"
    if done.returncode != 0:
        return None, (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
    try:
        return float(json.loads(done.stdout.strip().splitlines()[-1])["torch_cpu_op_us"]), None
    except (ValueError, IndexError, KeyError) as exc:
        return None, f"unreadable probe output ({type(exc).__name__}): {done.stdout[-200:]!r}"


def host_facts() -> dict[str, Any]:
    """What a report records of its host (see the module's note)."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        usable = os.cpu_count()
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    op_us, op_error = torch_cpu_op_us()
    return {"cpu_model": cpu_model(), "cpu_signature": cpu_signature(), "logical_cpus": os.cpu_count(),
            "usable_cpus": usable, "loadavg": load, "python_loop_ms": round(python_loop_ms(), 3),
            "torch_cpu_op_us": None if op_us is None else round(op_us, 3),
            **({"torch_cpu_op_error": op_error} if op_error else {})}


def describe(host: dict[str, Any] | None) -> str:
    """One line for a report's header: model, CPUs, load and probes; what is missing is said, not left out."""
    if not host:
        return "host: not recorded"
    op = host.get("torch_cpu_op_us")
    op_text = f"{op:.2f} us/torch CPU op" if isinstance(op, (int, float)) else \
        f"torch CPU op probe failed ({host.get('torch_cpu_op_error') or 'no reason recorded'})"
    load = host.get("loadavg")
    signature = f" ({host['cpu_signature']})" if host.get("cpu_signature") else ""
    return (f"host: {host.get('cpu_model') or 'CPU model unknown'}{signature}, {host.get('usable_cpus')} of "
            f"{host.get('logical_cpus')} CPUs, load {load[0] if load else '?'}, "
            f"{host.get('python_loop_ms', float('nan')):.1f} ms/Python loop, {op_text}")
