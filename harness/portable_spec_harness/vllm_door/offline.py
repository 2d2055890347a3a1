"""The slice of vLLM's offline API the harness drives (``LLM``, ``SamplingParams``, ``TokensPrompt``, the resolved
platform, vLLM's profiler scopes and the ones we add, ``profile_scopes``), so that harness code never imports vllm
itself: the adapter stays the one layer that touches vLLM, and a vLLM upgrade is mended here."""

from __future__ import annotations

import importlib.metadata
from types import SimpleNamespace
from typing import Any

MULTICAST_OFF_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
"""NVLink multicast off (NCCL, PyTorch symmetric memory, NVSHMEM): on hosts that share GPUs with others (the project's
2xH200 host), a program using it can put the GPUs out of service."""


def engine_api() -> SimpleNamespace:
    """``LLM``, ``SamplingParams`` and ``TokensPrompt`` (imported on demand: vLLM's import resolves a platform)."""
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    return SimpleNamespace(LLM=LLM, SamplingParams=SamplingParams, TokensPrompt=TokensPrompt)


def resolved_platform_qualname() -> str:
    from vllm.platforms import current_platform

    return f"{type(current_platform).__module__}.{type(current_platform).__qualname__}"


def resolved_platform_label() -> str:
    """How the resolved platform names itself (``musa-sim`` under the simulation; ``platforms.current.platform_label``)."""
    from vllm.platforms import current_platform

    from portable_spec.ports.current import platform_label

    return platform_label(current_platform)


def _jsonable(pool: Any) -> Any:
    return list(pool) if isinstance(pool, tuple) else repr(pool)


def vllm_graph_facts(drafter_pools: set | None = None) -> dict[str, Any]:
    """In this process: how many graphs vLLM's own wrappers hold (target FULL/PIECEWISE, the upstream drafter's
    PIECEWISE), the platform's graph pool, and whether every wrapper (and every pool in ``drafter_pools``) uses it."""
    from vllm.compilation.cuda_graph import CUDAGraphWrapper
    from vllm.platforms import current_platform

    wrappers = list(CUDAGraphWrapper._all_instances)
    pool = current_platform.get_global_graph_pool()
    return {"vllm_graphs": sum(entry.cudagraph is not None for w in wrappers
                               for entry in w.concrete_cudagraph_entries.values()),
            "platform_pool": _jsonable(pool),
            "one_pool": all(w.graph_pool == pool for w in wrappers) and set(drafter_pools or ()) <= {pool}}


def vllm_version() -> str | None:
    try:
        return importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        return None


def parallel_engine_args(tp: int, *, disable_custom_all_reduce: bool = False,
                         fuse_allreduce_rms: bool | None = None) -> dict[str, Any]:
    """``LLM(...)`` keyword arguments for tensor parallelism ``tp``. On hosts without NVLink multicast vLLM 0.26.0 at
    TP >= 2 dies (CUBLAS_STATUS_INTERNAL_ERROR / illegal address in FlashInfer's mnnvl all-reduce) unless the custom
    all-reduce is off and the all-reduce + RMSNorm fusion is off: the two switches."""
    args: dict[str, Any] = {"tensor_parallel_size": tp}
    if disable_custom_all_reduce:
        args["disable_custom_all_reduce"] = True
    if fuse_allreduce_rms is not None:
        args["compilation_config"] = {"pass_config": {"fuse_allreduce_rms": fuse_allreduce_rms}}
    return args


class runner_scopes:
    """Turns on vLLM's ``record_function`` scopes in its model runner for one block (its switch is cached in
    ``vllm.v1.utils._PROFILER_FUNC`` at first use) and adds ours where vLLM has none (``profile_scopes``: MRV2's
    phases, V1's drafter first pass vs chain steps, the scheduler); restores everything afterwards. ``with`` yields
    which of our hooks were installed and which skipped. Diagnostics only: if vLLM moves the switch or a hooked
    method, the profile simply lacks those scopes (and says which)."""

    def __init__(self, factory: Any = None, details: bool = False, extra: tuple[Any, ...] = ()) -> None:
        self.factory = factory  # makes each scope (default: torch's record_function); see profile_scopes.installed
        self.details = details  # also the detail scopes (``profile_scopes.DETAIL_HOOKS``: for the phase clock)
        self.extra = extra  # more ``ScopeHook``s (``profile_scopes.SERVED_HOOKS`` in a served engine core)

    def __enter__(self) -> dict[str, list[str]]:
        import torch

        from portable_spec_harness.vllm_door.profile_scopes import DETAIL_HOOKS, HOOKS, installed

        self.module = None
        try:
            import vllm.v1.utils as vllm_utils
        except ImportError:
            vllm_utils = None
        if vllm_utils is not None and hasattr(vllm_utils, "_PROFILER_FUNC"):
            self.module = vllm_utils
            self.saved = self.module._PROFILER_FUNC
            self.module._PROFILER_FUNC = self.factory or torch.profiler.record_function
        hooks = HOOKS + DETAIL_HOOKS if self.details else HOOKS
        self.hooks = installed(hooks + tuple(self.extra), factory=self.factory)
        return self.hooks.__enter__()

    def __exit__(self, *exc: Any) -> None:
        self.hooks.__exit__(*exc)
        if self.module is not None:
            self.module._PROFILER_FUNC = self.saved
