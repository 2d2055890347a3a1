"""One benchmark server booted alone for a probe (the join probe, the sampling sweep): started, waited on, its
worker's facts read, and on the way out stopped with the kernels vLLM's JIT monitor saw compile after boot recorded,
whatever the probe did in between."""

from __future__ import annotations

import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator

from portable_spec_harness import vllm_serve
from portable_spec_harness.serve_bench.driver import jit_after_boot
from portable_spec_harness.serve_bench.servers import FACTS_METHOD, BenchServer, launch

HOST = "127.0.0.1"

MONITOR_ACTIVATED = "Kernel JIT monitor activated"
"""The line vLLM's worker logs when it arms the JIT monitor after its warm-up (``vllm/utils/jit_monitor.py``,
``activate``): without it in a log, no compile line proves nothing."""


def monitor_active(log: Path) -> bool:
    try:
        return MONITOR_ACTIVATED in log.read_text(errors="replace")
    except OSError:
        return False


@asynccontextmanager
async def booted(server: BenchServer, out: Path, boot_timeout_s: float) -> AsyncIterator[tuple[int | None,
                                                                                               dict[str, Any]]]:
    """Yields ``(port, result)``: ``port`` None when the server never answered ``/health`` (``result["boot"]``
    says why); ``result`` gains ``facts`` on boot and ``jit_after_boot`` / ``jit_monitor_active`` after the stop."""
    port = vllm_serve.free_port()
    log = out / f"server_{server.variant}.log"
    handle = launch(server, port, log)
    result: dict[str, Any] = {"variant": server.variant}
    try:
        boot = await vllm_serve.wait_healthy(handle, HOST, port, log.name, time.monotonic() + boot_timeout_s)
        result["boot"] = boot
        if boot.get("ready"):
            result["facts"] = await vllm_serve.collective_rpc(HOST, port, FACTS_METHOD, timeout_s=60)
        yield (port if boot.get("ready") else None), result
    finally:
        handle.stop()
        result["jit_after_boot"] = jit_after_boot(server.variant, log)[0]
        result["jit_monitor_active"] = monitor_active(log)
