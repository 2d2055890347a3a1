"""Every vLLM-facing class of ours that vLLM (or our probe) names by qualname, in one table.

The probe answers vLLM with a qualname and must never import it (vLLM's platform modules do not import without
their device); our platform classes hand vLLM their worker by qualname (vLLM imports it in the worker process); and
``portable-spec probe`` prints them. So the names live here, importing nothing, and a new accelerator adds its row
to ``PLATFORM_CLASSES`` beside its port in ``portable_spec.ports``. ``tests/test_vllm_plugin.py`` checks that every
name resolves to a class in our source.
"""

from __future__ import annotations

_PLATFORM = "portable_spec.vllm_adapter.platform"
_WORKER = "portable_spec.vllm_adapter.worker"

PLATFORM_CLASSES: dict[str, str] = {
    "cuda": f"{_PLATFORM}.cuda.PortableCudaPlatform",
    "rocm": f"{_PLATFORM}.rocm.PortableRocmPlatform",
    "musa": f"{_PLATFORM}.musa.PortableMusaPlatform",
    "cpu": "vllm.platforms.cpu.CpuPlatform",  # vLLM's own: we add nothing to it (no graphs)
}
"""The vLLM platform class ``VLLM_PLATFORM=<port name>`` selects (MUSA: without vllm-musa)."""
COMPOSED_MUSA_PLATFORM = f"{_PLATFORM}.vllm_musa_platform.PortableVllmMusaPlatform"
"""``VLLM_PLATFORM=musa`` with vllm-musa installed: our hooks on vllm-musa's platform class."""
ERROR_CLASS = "portable_spec.vllm_adapter.plugin.platform_error.PlatformSelectionError"
"""What the probe answers for a value it cannot honour: importing it raises the one-line reason."""

PORTABLE_WORKER = f"{_WORKER}.gpu_worker.PortableWorker"
"""Our worker (our V1 runner, FULL drafter graphs) on CUDA and ROCm, and on a built-in platform by ``--worker-cls``."""
MUSA_WORKER = f"{_WORKER}.musa_worker.MusaWorker"
"""Our standalone MUSA class's worker (vLLM 0.26.0's ``gpu_worker.Worker`` rejects any device type but "cuda")."""
COMPOSED_MUSA_WORKER = f"{_WORKER}.vllm_musa_worker.PortableVllmMusaWorker"
"""Ours on vllm-musa's ``MTGPUWorker``."""

ALL: tuple[str, ...] = (*PLATFORM_CLASSES.values(), COMPOSED_MUSA_PLATFORM, ERROR_CLASS, PORTABLE_WORKER, MUSA_WORKER,
                        COMPOSED_MUSA_WORKER)


def ours(qualname: str | None) -> bool:
    """Whether a qualname is one of our classes (not vLLM's own)."""
    return (qualname or "").startswith("portable_spec.")
