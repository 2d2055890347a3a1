"""The one judge of "no Triton kernel compiled after boot": the serving benchmark's driver, the join probe and the
sampling sweep read a server's log through ``read`` and decide through ``problems``; the soak (``soak/logscan.py``,
``soak/judge.py``) and the e2e drivers (``e2e/parent.py``, ``e2e/v1_checks.py``) read their server's or engine's log
through ``scan`` / ``read`` too and decide through ``verdict``.

Why one: each check used to judge its own way, and they disagreed. Only the sweep required vLLM's "Kernel JIT monitor
activated" line, although zero compile lines from a server whose monitor never armed prove nothing; the join probe
judged variants by their raw name, so ``ours@async`` went unjudged there; the soak and the e2e drivers counted the
compile lines alone. Here a variant is judged by its kind (``serve_bench.variant_names.kind_of``; the soak and the
e2e drivers judge their servers of ours by role), and one of ours fails when it compiled after boot or when its
monitor was not armed.

A result written before the monitor was read (session 18's join probes, serve-bench JSON written before the driver
recorded it) has no ``jit_monitor_active``: ``recorded`` reads that as "not recorded", which fails the judge as well,
so such a result never passes by silence; re-judge its committed server log (``read`` takes a ``.log.gz``) instead.
"""

from __future__ import annotations

import gzip
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from portable_spec_harness.serve_bench.variant_names import kind_of

JUDGED_KINDS = ("ours", "ours_mrv2")
"""Kinds whose servers must compile nothing after boot (our warm-up covers greedy and sampled requests); every other
variant's compiles are recorded as the baseline that shows the check can see a compile."""

MONITOR_ACTIVATED = "Kernel JIT monitor activated"
"""The line vLLM's worker logs when it arms the JIT monitor after its warm-up (``vllm/utils/jit_monitor.py``,
``activate``): without it in a log, no compile line proves nothing."""

COMPILES_KEY, MONITOR_KEY = "jit_after_boot", "jit_monitor_active"
"""The result keys the checks write and the committed results and tests read (the e2e drivers keep their older name
for the compiles, ``e2e.parent.COMPILES_KEY``)."""

JIT_EVENT = re.compile(r"([A-Za-z]+ [^\]]*?) during inference: ([\w.]+?)[ .(]")


def jit_events_in(text: str) -> list[str]:
    """Kernels vLLM's JIT monitor saw compile after warm-up ("Triton jit compile during inference: NAME ..."), one
    entry per (rank, kernel) line: each is a latency spike a serving user would see."""
    return [f"{m.group(1)}: {m.group(2)}" for line in text.splitlines()
            if "during inference:" in line and (m := JIT_EVENT.search(line))]


@dataclass(frozen=True)
class JitLog:
    """What vLLM's JIT monitor said in one server log: the kernels it saw compile after boot, and whether it was
    armed (None: the result this was read back from did not record it)."""

    compiles: tuple[str, ...]
    monitor_active: bool | None

    def as_json(self) -> dict[str, Any]:
        return {COMPILES_KEY: list(self.compiles), MONITOR_KEY: self.monitor_active}


def scan(text: str) -> JitLog:
    """A server log's text, judged from one pass over it."""
    return JitLog(tuple(jit_events_in(text)), MONITOR_ACTIVATED in text)


def read(log: Path) -> JitLog:
    """One read of a server log (a committed ``.log.gz`` too); a log that cannot be read has no armed monitor."""
    try:
        text = (gzip.open(log, "rt", errors="replace").read() if log.suffix == ".gz"
                else log.read_text(errors="replace"))
    except OSError:
        return JitLog((), False)
    return scan(text)


def recorded(result: dict[str, Any], compiles_key: str = COMPILES_KEY) -> JitLog:
    """A check's result read back (its ``compiles_key`` / ``MONITOR_KEY``, written together from one read); a result
    without either says ``monitor_active`` None: the monitor (or the log's read) was not recorded."""
    return JitLog(tuple(result.get(compiles_key) or ()),
                  result.get(MONITOR_KEY) if compiles_key in result else None)


def judged(variant: str) -> bool:
    """Whether ``variant`` is one of ours (``ours@async``, ``ours_mrv2@sync`` are), judged rather than a baseline."""
    return kind_of(variant) in JUDGED_KINDS


def problems(variant: str, jit: JitLog, see: str = "", ready: bool = True) -> list[str]:
    """Why ``variant``'s server does not show "no compile after boot" (empty: it does, or it is a baseline); ``see``
    names the log to read. A server that never got ready (``ready`` False) is not judged: its failed boot is the
    problem already, and it never reached the warm-up after which vLLM arms the monitor."""
    if not judged(variant) or not ready:
        return []
    return verdict(variant, jit, see)


def verdict(name: str, jit: JitLog, see: str = "") -> list[str]:
    """Why a server (or engine) of ours, ``name``, does not show "no compile after boot" (empty: it does): a compile
    after boot, a monitor that never armed, or a result that did not record the monitor; ``see`` names the log.
    ``problems`` asks it for the serving checks' variants of ours; the soak and the e2e drivers for their servers
    of ours."""
    where = f"; see {see}" if see else ""
    found = []
    if jit.monitor_active is None:
        found.append(f"{name}: vLLM's JIT monitor not recorded (no {MONITOR_KEY!r} in the result): its zero "
                     "compile lines prove nothing")
    elif not jit.monitor_active:
        found.append(f"{name}: vLLM's JIT monitor never logged {MONITOR_ACTIVATED!r}: zero compile lines prove "
                     f"nothing{where}")
    if jit.compiles:
        found.append(f"{name}: {len(jit.compiles)} kernel JIT compile(s) after boot: "
                     f"{', '.join(sorted(set(jit.compiles)))}{where}")
    return found


def result_problems(result: dict[str, Any]) -> list[str]:
    """``problems`` of a probe's result read back (``one_server.booted``'s: ``variant``, ``boot``, the JIT keys); a
    result without a boot record is judged as booted."""
    return problems(result["variant"], recorded(result), ready=(result.get("boot") or {}).get("ready") is not False)
