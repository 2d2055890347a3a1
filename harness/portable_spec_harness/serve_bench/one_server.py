"""One benchmark server booted alone for a probe (the join probe, the sampling sweep, the first-batches probe):
started, waited on, its worker's facts read, and on the way out stopped with the kernels vLLM's JIT monitor saw
compile after boot recorded, whatever the probe did in between."""

from __future__ import annotations

import signal
import tempfile
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, AsyncIterator

from portable_spec_harness import vllm_serve
from portable_spec_harness import jit_judge
from portable_spec_harness.serve_bench import memory, plan
from portable_spec_harness.serve_bench.driver import exit_on_term
from portable_spec_harness.serve_bench.pairs import BenchPair, read_config, resolve
from portable_spec_harness.serve_bench.servers import FACTS_METHOD, BenchServer, launch

HOST = "127.0.0.1"


@dataclass(frozen=True)
class ProbeServers:
    """What a probe's servers share: the pair, its target's vocabulary (for random prompts), and the shape every
    server is booted for (``server``)."""

    pair: BenchPair
    vocab: int
    max_len: int
    width: int
    kv_bytes: int

    def server(self, variant: str) -> BenchServer:
        return BenchServer(variant, self.pair, self.max_len, self.width, self.kv_bytes)


def probe_servers(pair: str, mode: str | None, input_len: int, output_len: int, width: int,
                  work_name: str) -> ProbeServers:
    """A probe's pair (built under the temporary folder ``work_name``, not in its OUT) and server shape: prompts of
    ``input_len`` with ``output_len`` tokens, ``width`` sequences at once, the KV cache they need. Also prepares the
    process as every probe needs: the open-file limit raised for the server, and SIGTERM turned into ``SystemExit``
    so an outer timeout still stops the server and keeps what ran."""
    bench_pair = resolve(pair, mode, None, Path(tempfile.gettempdir()) / work_name)
    target, draft = read_config(bench_pair.target), read_config(bench_pair.draft)
    max_len = plan.max_model_len(input_len, output_len, bench_pair.k)
    kv = memory.kv_cache_bytes(target, draft, max_len, width)
    vllm_serve.raise_open_file_limit()
    signal.signal(signal.SIGTERM, exit_on_term)
    return ProbeServers(bench_pair, int(target["vocab_size"]), max_len, width, kv)


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


def runner_name(facts: Any) -> str | None:
    """The runner a server's worker built (the facts' ``use_v2_model_runner``), as the probes' reports name it:
    ``mrv2``, ``v1``, or None where the facts do not say."""
    first = facts[0] if isinstance(facts, list) and facts else facts
    if not isinstance(first, dict) or first.get("use_v2_model_runner") is None:
        return None
    return "mrv2" if first["use_v2_model_runner"] else "v1"
