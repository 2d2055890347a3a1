"""A capture failure on demand, for the tests that show what a failed capture does (above all at tensor parallel:
one rank failing must not make the ranks replay different graphs).

``PORTABLE_SPEC_FAIL_CAPTURE="RANK:KIND:REQS[,...]"`` (``RANK`` may be ``*``) makes the runner's capture of that key
raise on that rank, inside the capture, where a real uncapturable operation would. Unset (always, in production)
it costs one environment lookup per captured key at boot and nothing at run time.
"""

from __future__ import annotations

from typing import Any

from portable_spec import envs
from portable_spec.envs import FAIL_CAPTURE_ENV
from portable_spec.errors import PortableSpecError


def failing_keys(value: str | None = None) -> set[tuple[str, str, int]]:
    """``{(rank, kind, num_reqs)}`` parsed from ``PORTABLE_SPEC_FAIL_CAPTURE``; a malformed entry raises one line."""
    raw = envs.fail_capture() if value is None else value
    entries = set()
    for item in filter(None, (part.strip() for part in raw.split(","))):
        rank, _, rest = item.partition(":")
        kind, _, reqs = rest.partition(":")
        if not (rank == "*" or rank.isdigit()) or not kind or not reqs.isdigit():
            raise PortableSpecError(f"{FAIL_CAPTURE_ENV} entry {item!r} is not RANK:KIND:REQS (e.g. 1:chain_fused:4 "
                                    "or *:first:2); fix or unset it")
        entries.add((rank, kind, int(reqs)))
    return entries


def maybe_fail_capture(key: Any, rank: int) -> None:
    """Raise inside the capture of ``key`` on ``rank`` when the environment asks for it."""
    if not envs.fail_capture():
        return
    for want_rank, kind, reqs in failing_keys():
        if kind == key.step and reqs == key.num_reqs and want_rank in ("*", str(rank)):
            raise RuntimeError(f"injected capture failure ({FAIL_CAPTURE_ENV}) for {key} on rank {rank}")
