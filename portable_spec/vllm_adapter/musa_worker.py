"""A vLLM worker that accepts ``device_type == "musa"``.

vLLM 0.26.0's ``gpu_worker.Worker.init_device`` runs its device set-up only when ``device_type == "cuda"`` and
raises "Unsupported device type" otherwise. Under torchada the CUDA branch is exactly what MUSA needs
(``torch.device("cuda:N")`` and ``torch.cuda`` resolve to MUSA), so the worker presents the device type as "cuda"
for the duration of that one call and restores it afterwards, also when the call raises. Everything else, including
our V1 runner with FULL drafter graphs, comes from ``PortableWorker``.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

from portable_spec.kernels import install_substitutions
from portable_spec.vllm_adapter.worker import PortableWorker


@contextlib.contextmanager
def device_type_presented_as(device_config: Any, device_type: str) -> Iterator[None]:
    """Scoped, reversible override of ``device_config.device_type``."""
    original = device_config.device_type
    device_config.device_type = device_type
    try:
        yield
    finally:
        device_config.device_type = original


class MusaWorker(PortableWorker):
    def init_device(self) -> None:
        # MUSA's Triton 3.2 rejects some of vLLM's kernels: bind our substitutes before the drafter is built.
        install_substitutions("musa")
        with device_type_presented_as(self.device_config, "cuda"):
            super().init_device()
