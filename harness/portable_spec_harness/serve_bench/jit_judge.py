"""The one judge of "no Triton kernel compiled after boot" for the serving checks: the serving benchmark's driver, the
join probe and the sampling sweep all read a server's log through ``read`` and decide through ``problems``.

Why one: each check used to judge its own way, and they disagreed. Only the sweep required vLLM's "Kernel JIT monitor
activated" line, although zero compile lines from a server whose monitor never armed prove nothing; the join probe
judged variants by their raw name, so ``ours@async`` went unjudged there. Here a variant is judged by its kind
(``plan.kind_of``), and one of ours fails when it compiled after boot or when its monitor was not armed.

A result written before the monitor was read (session 18's join probes, serve-bench JSON written before the driver
recorded it) has no ``jit_monitor_active``: ``recorded`` reads that as "not recorded", which fails the judge as well,
so such a result never passes by silence; re-judge its committed server log (``read`` takes a ``.log.gz``) instead.
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from portable_spec_harness.e2e.parent import jit_events_in
from portable_spec_harness.serve_bench import plan

JUDGED_KINDS = ("ours", "ours_mrv2")
"""Kinds whose servers must compile nothing after boot (our warm-up covers greedy and sampled requests); every other
variant's compiles are recorded as the baseline that shows the check can see a compile."""

MONITOR_ACTIVATED = "Kernel JIT monitor activated"
"""The line vLLM's worker logs when it arms the JIT monitor after its warm-up (``vllm/utils/jit_monitor.py``,
``activate``): without it in a log, no compile line proves nothing."""

COMPILES_KEY, MONITOR_KEY = "jit_after_boot", "jit_monitor_active"
"""The result keys the checks write and the committed results and tests read."""


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


def recorded(result: dict[str, Any]) -> JitLog:
    """A check's result read back (its ``COMPILES_KEY`` / ``MONITOR_KEY``); a result without ``MONITOR_KEY`` says
    ``monitor_active`` None: the monitor was not recorded."""
    return JitLog(tuple(result.get(COMPILES_KEY) or ()), result.get(MONITOR_KEY))


def judged(variant: str) -> bool:
    """Whether ``variant`` is one of ours (``ours@async``, ``ours_mrv2@sync`` are), judged rather than a baseline."""
    return plan.kind_of(variant) in JUDGED_KINDS


def problems(variant: str, jit: JitLog, see: str = "", ready: bool = True) -> list[str]:
    """Why ``variant``'s server does not show "no compile after boot" (empty: it does, or it is a baseline); ``see``
    names the log to read. A server that never got ready (``ready`` False) is not judged: its failed boot is the
    problem already, and it never reached the warm-up after which vLLM arms the monitor."""
    if not judged(variant) or not ready:
        return []
    where = f"; see {see}" if see else ""
    found = []
    if jit.monitor_active is None:
        found.append(f"{variant}: vLLM's JIT monitor not recorded (no {MONITOR_KEY!r} in the result): its zero "
                     "compile lines prove nothing")
    elif not jit.monitor_active:
        found.append(f"{variant}: vLLM's JIT monitor never logged {MONITOR_ACTIVATED!r}: zero compile lines prove "
                     f"nothing{where}")
    if jit.compiles:
        found.append(f"{variant}: {len(jit.compiles)} kernel JIT compile(s) after boot: "
                     f"{', '.join(sorted(set(jit.compiles)))}{where}")
    return found


def result_problems(result: dict[str, Any]) -> list[str]:
    """``problems`` of a probe's result read back (``one_server.booted``'s: ``variant``, ``boot``, the JIT keys); a
    result without a boot record is judged as booted."""
    return problems(result["variant"], recorded(result), ready=(result.get("boot") or {}).get("ready") is not False)
