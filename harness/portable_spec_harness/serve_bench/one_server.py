"""One benchmark server booted alone for a probe (the join probe, the sampling sweep): started, waited on, its
worker's facts read, and on the way out stopped with the kernels vLLM's JIT monitor saw compile after boot recorded,
whatever the probe did in between."""

from __future__ import annotations

import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator

from portable_spec_harness import vllm_serve
from portable_spec_harness import jit_judge
from portable_spec_harness.serve_bench.servers import FACTS_METHOD, BenchServer, launch

HOST = "127.0.0.1"


@asynccontextmanager
async def booted(server: BenchServer, out: Path, boot_timeout_s: float) -> AsyncIterator[tuple[int | None,
                                                                                               dict[str, Any]]]:
    """Yields ``(port, result)``: ``port`` None when the server never answered ``/health`` (``result["boot"]``
    says why); ``result`` gains ``facts`` on boot and, after the stop, what vLLM's JIT monitor said in the log
    (``jit_judge``: ``jit_after_boot`` / ``jit_monitor_active``, from one read), for the probe to judge."""
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
        result.update(jit_judge.read(log).as_json())
