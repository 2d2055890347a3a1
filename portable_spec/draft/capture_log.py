"""The one log line a drafter capture leaves, in a module without vLLM imports so the e2e checks that look for it in
engine logs (``ci/gpu/v1_drafter_e2e.py``) use the same text."""

from __future__ import annotations

from typing import Any

CAPTURE_LOG_PREFIX = "portable_spec: drafter FULL graphs:"


def capture_summary(stats: dict[str, Any]) -> str:
    """The one log line a capture leaves: how many graphs, in how long, how much memory, which sizes, what failed."""
    mib = (stats.get("memory_bytes") or 0) / 2**20
    return (f"{CAPTURE_LOG_PREFIX} {stats['graphs']} captured in {stats['seconds']:.2f} s, {mib:.1f} MiB, sizes "
            f"{stats['num_tokens']}, {len(stats['failed'])} failed")
