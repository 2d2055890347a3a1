"""The soak's servers: which ones a pair gets, their ``vllm serve`` command lines and environments, and the processes.

Per pair: the no-speculation reference, vLLM's eager drafter (``speculative_config.enforce_eager``) and ours, all with
async scheduling (vLLM's default for EAGLE); per pair in ``sync_pairs`` also the eager drafter and ours with
``--no-async-scheduling``. Greedy output is the same under any schedule, so one no-speculation server serves both.
The environments are the e2e harness's variants (``harness/e2e/configs.py``: ``VLLM_PLATFORM=cuda`` for the eager
drafter and ours, the V1 runner forced except for MoE pairs, where vLLM picks it) plus a compile cache per server
(servers boot together) and ``VLLM_SERVER_DEV_MODE=1``, which gives ``/collective_rpc``: the judge reads each
worker's runner, drafter and graph counters through the ``probe.SoakWorkerExtension`` extension every server loads.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from portable_spec_harness import vllm_serve
from portable_spec_harness.parallel import Parallel
from portable_spec_harness.soak import budget

SERVED_MODEL = "soak"
WORKER_EXTENSION = "portable_spec_harness.soak.worker_extension.SoakWorkerExtension"
PROBE_METHOD = "portable_spec_soak_facts"
STRUCTURED_OUTPUTS = {"backend": "xgrammar", "disable_any_whitespace": True}
STRUCTURED_BACKEND_MODULE = "xgrammar"
"""What the backend imports; the GPU host has it staged (``shared/gpu-host/vllm-0.26.0-deps-cp312.txt``)."""


@dataclass(frozen=True)
class ServerSpec:
    pair: str
    variant: str
    """A ``harness/e2e/configs.py`` variant: ``nospec``, ``eager_drafter`` or ``full_drafter``."""
    async_scheduling: bool
    target: str
    draft: str | None
    method: str
    runner: str
    """``v1`` (force the V1 runner) or ``auto`` (vLLM's choice: MoE targets pick V1)."""
    generation_config: str
    parallel: Parallel = Parallel()
    """Tensor parallelism, the same for every server of a soak (``--tp``): a server spans GPUs 0..tp-1, so every
    server of the soak shares those GPUs, each rank with the fixed KV cache below (``budget``: per GPU, as vLLM's
    ``--kv-cache-memory-bytes`` is)."""

    @property
    def name(self) -> str:
        return self.variant + ("" if self.async_scheduling else "_sync")

    @property
    def role(self) -> str:
        """``ours`` (judged on every condition) or ``reference``."""
        return "ours" if self.variant == "full_drafter" else "reference"

    @property
    def speculative(self) -> dict[str, Any] | None:
        if self.variant == "nospec":
            return None
        return {"method": self.method, "model": self.draft, "num_speculative_tokens": budget.K,
                "enforce_eager": self.variant == "eager_drafter"}


def server_specs(pair: dict[str, Any], generation_config: str, sync: bool, runner: str,
                 parallel: Parallel = Parallel()) -> list[ServerSpec]:
    """The servers of one pair (``pair``: ``model_zoo.build_pair``'s result)."""
    base = dict(pair=pair["pair"], target=pair["target"], draft=pair["draft"], method=pair["method"], runner=runner,
                generation_config=generation_config, parallel=parallel)
    specs = [ServerSpec(variant=v, async_scheduling=True, **base) for v in ("nospec", "eager_drafter", "full_drafter")]
    if sync:
        specs += [ServerSpec(variant=v, async_scheduling=False, **base) for v in ("eager_drafter", "full_drafter")]
    return specs


def serve_args(spec: ServerSpec, port: int) -> list[str]:
    """The arguments after ``vllm serve`` (``tests/test_soak_vllm_shapes.py`` parses them with vLLM's own parser)."""
    args = [spec.target, "--host", "127.0.0.1", "--port", str(port), "--served-model-name", SERVED_MODEL,
            "--seed", "0", "--max-model-len", str(budget.MAX_MODEL_LEN), "--max-num-seqs", str(budget.MAX_NUM_SEQS),
            "--max-num-batched-tokens", str(budget.MAX_NUM_BATCHED_TOKENS),
            "--enable-chunked-prefill", "--long-prefill-token-threshold", str(budget.LONG_PREFILL_TOKEN_THRESHOLD),
            "--enable-prefix-caching", "--block-size", str(budget.BLOCK_SIZE),
            "--num-gpu-blocks-override", str(budget.NUM_GPU_BLOCKS),
            "--kv-cache-memory-bytes", str(budget.KV_CACHE_MEMORY_BYTES),
            "--gpu-memory-utilization", str(budget.GPU_MEMORY_UTILIZATION),
            "--scheduling-policy", "priority",
            "--async-scheduling" if spec.async_scheduling else "--no-async-scheduling",
            "--generation-config", spec.generation_config,
            "--structured-outputs-config", json.dumps(STRUCTURED_OUTPUTS),
            "--enable-prompt-tokens-details", "--worker-extension-cls", WORKER_EXTENSION, "--disable-uvicorn-access-log"]
    if spec.speculative is not None:
        args += ["--speculative-config", json.dumps(spec.speculative)]
    return args + spec.parallel.serve_args()


def serve_command(spec: ServerSpec, port: int) -> list[str]:
    """``vllm serve`` as this interpreter runs it (``vllm_serve.serve_command``)."""
    return vllm_serve.serve_command(serve_args(spec, port))


def server_env(spec: ServerSpec) -> dict[str, str]:
    """The e2e variant's server environment (``vllm_serve.server_env``) with a compile cache per soak server."""
    return vllm_serve.server_env(spec.variant, spec.runner, f"soak-{spec.pair}-{spec.name}")


def launch(spec: ServerSpec, port: int, log: Path) -> vllm_serve.ServerProcess:
    return vllm_serve.ServerProcess(serve_command(spec, port), server_env(spec), log)


def structured_backend_available() -> tuple[bool, str]:
    """Whether this interpreter (the servers') can import the structured-output backend, and its version."""
    import importlib.metadata
    import importlib.util

    if importlib.util.find_spec(STRUCTURED_BACKEND_MODULE) is None:
        return False, "not installed"
    try:
        return True, importlib.metadata.version(STRUCTURED_BACKEND_MODULE)
    except importlib.metadata.PackageNotFoundError:
        return True, "unknown version"

