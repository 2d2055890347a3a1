"""The benchmark's servers: one ``vllm serve`` per variant, identical but for the variant's environment (platform,
runner) and with the same fixed KV cache, so a difference between them is the drafter and runner alone."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from portable_spec_harness import vllm_serve
from portable_spec_harness.parallel import Parallel
from portable_spec_harness.serve_bench.pairs import BenchPair
from portable_spec_harness.serve_bench.plan import VARIANTS, kind_of

WORKER_EXTENSION = "portable_spec_harness.serve_bench.worker_extension.ServeBenchWorkerExtension"
FACTS_METHOD = "portable_spec_soak_facts"
ASYNC_SCHEDULING = {"default": (), "on": ("--async-scheduling",), "off": ("--no-async-scheduling",)}
"""``--async-scheduling``: vLLM's choice, or the same choice forced on every variant without a scheduling suffix
(``plan.SCHEDULING_SUFFIXES``: ``ours@async`` asks its own server). vLLM 0.26.0 leaves async scheduling off by
default for ``draft_model`` (it accepts it when asked; 0.28.0 turns it on by default), and with it off the host waits
for every step to end before it prepares the next one."""
GPU_MEMORY_UTILIZATION = 0.05
"""Only vLLM's start-up check reads it (``--kv-cache-memory-bytes`` sizes the cache and skips profiling): servers
that boot side by side each find the device partly taken."""


@dataclass(frozen=True)
class BenchServer:
    variant: str
    """A bench variant: a key of ``plan.VARIANTS`` (upstream_v1, ours, mrv2, ours_mrv2), perhaps with a scheduling
    suffix (``ours@async``), which ``async_scheduling`` then carries out."""
    pair: BenchPair
    max_model_len: int
    max_num_seqs: int
    kv_cache_bytes: int
    async_scheduling: str = "default"
    """A key of ``ASYNC_SCHEDULING``: what this server is asked (``plan.scheduling_of`` its name)."""
    parallel: Parallel = Parallel()
    """Tensor parallelism (and a host's switches for it), the same on every variant."""

    @property
    def name(self) -> str:
        return self.variant

    @property
    def kind(self) -> str:
        """What the server runs (``plan.kind_of``): ``ours@async`` is ``ours``."""
        return kind_of(self.variant)

    @property
    def e2e_variant(self) -> str:
        return VARIANTS[self.kind]

    @property
    def role(self) -> str:
        return "ours" if self.kind in ("ours", "ours_mrv2") else "reference"

    @property
    def speculative(self) -> dict[str, Any]:
        return {"method": self.pair.method, "model": self.pair.draft, "num_speculative_tokens": self.pair.k}


def serve_args(server: BenchServer, port: int) -> list[str]:
    """The arguments after ``vllm serve`` (parsed by vLLM's own parser in ``tests/test_serve_bench.py``). vLLM's
    defaults stay where a user would keep them (async scheduling, prefix caching, chunked prefill, the step's token
    budget); ``--max-num-seqs`` is the highest concurrency, so no variant captures graphs it never replays, unless
    ``--server-max-num-seqs`` names a chain's widest (``plan.server_shape``: the same arguments, so a kept server is
    reused)."""
    args = [server.pair.target, "--host", "127.0.0.1", "--port", str(port), "--seed", "0",
            "--max-model-len", str(server.max_model_len), "--max-num-seqs", str(server.max_num_seqs),
            "--kv-cache-memory-bytes", str(server.kv_cache_bytes),
            "--gpu-memory-utilization", str(GPU_MEMORY_UTILIZATION),
            "--speculative-config", json.dumps(server.speculative),
            "--worker-extension-cls", WORKER_EXTENSION, "--disable-uvicorn-access-log"]
    if server.pair.tokenizer != server.pair.target:
        args += ["--tokenizer", server.pair.tokenizer]
    return (args + list(ASYNC_SCHEDULING[server.async_scheduling]) + server.parallel.serve_args()
            + list(server.pair.serve_args))


def server_env(server: BenchServer) -> dict[str, str]:
    """The variant's server environment (``vllm_serve.server_env``) and the pair's, over the environment this process
    was started with, not the one its own imports (vLLM's, torch's) have written since (``vllm_serve.without_drift``):
    a server boots the same whatever this process imported before its launch, and a kept server's fingerprint taken
    at one call's end equals the one the next call takes at its boot (``kept_servers.fingerprint``)."""
    cache_name = f"serve-bench-{server.variant}"
    env = vllm_serve.server_env(server.e2e_variant, server.pair.runner, cache_name)
    env.update(server.pair.env)
    return vllm_serve.without_drift(env, vllm_serve.harness_env_keys(cache_name) | set(server.pair.env))


def launch(server: BenchServer, port: int, log: Path) -> vllm_serve.ServerProcess:
    return vllm_serve.ServerProcess(vllm_serve.serve_command(serve_args(server, port)), server_env(server), log)
