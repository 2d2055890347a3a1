"""NVIDIA CUDA: ``torch.cuda`` with the NCCL backend."""

from __future__ import annotations

from types import ModuleType

from portable_spec.ports.fork_safe import visible_device_count
from portable_spec.ports.interface import DevicePort
from portable_spec.ports.torch_build import cuda_build, hip_build


class CudaPort(DevicePort):
    name = "cuda"
    device_type = "cuda"
    dist_backend = "nccl"

    @classmethod
    def is_active(cls) -> bool:
        # The build first (no torch import): only a CUDA build of torch asks for its device count.
        return cuda_build() and visible_device_count() > 0

    @classmethod
    def unavailable_reason(cls) -> str | None:
        if hip_build():
            return "platform 'cuda' selected but this torch is a ROCm build; use --platform rocm"
        if not cuda_build() or visible_device_count() == 0:
            return ("platform 'cuda' selected but no CUDA device is visible "
                    "(check the driver and CUDA_VISIBLE_DEVICES, or use --platform cpu)")
        return None

    def _load_device_module(self) -> ModuleType:
        import torch

        return torch.cuda

    def runtime_versions(self) -> dict[str, str | None]:
        import torch

        return {"torch": torch.__version__, "cuda": torch.version.cuda,
                "capability": ".".join(map(str, torch.cuda.get_device_capability()))}
