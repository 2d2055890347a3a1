"""AMD ROCm: a HIP build of torch exposes HIP through ``torch.cuda``; tensors are device type ``cuda``; RCCL is
``nccl`` to torch.distributed; gfx94x (MI300/MI325) uses the fnuz fp8 variant."""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING

from portable_spec.ports.fork_safe import visible_device_count
from portable_spec.ports.interface import DevicePort
from portable_spec.ports.torch_build import hip_build

if TYPE_CHECKING:
    import torch


class RocmPort(DevicePort):
    name = "rocm"
    device_type = "cuda"
    dist_backend = "nccl"

    @classmethod
    def is_active(cls) -> bool:
        # Detected from the torch build, never from torch.cuda.is_available() alone (true on CUDA too).
        return hip_build()

    @classmethod
    def unavailable_reason(cls) -> str | None:
        if not hip_build():
            return "platform 'rocm' requires a ROCm (HIP) build of torch; install one, or use --platform cuda/cpu"
        if visible_device_count() == 0:
            return "platform 'rocm' selected but no ROCm device is visible (check HIP_VISIBLE_DEVICES and the driver)"
        return None

    def _load_device_module(self) -> ModuleType:
        import torch

        return torch.cuda

    def gcn_arch(self) -> str:
        return str(getattr(self.device_module.get_device_properties(self._current_device()), "gcnArchName", ""))

    def fp8_dtype_name(self) -> str:
        return fp8_dtype_name_for_arch(self.gcn_arch())

    def runtime_versions(self) -> dict[str, str | None]:
        import torch

        return {"torch": torch.__version__, "hip": getattr(torch.version, "hip", None), "arch": self.gcn_arch()}


def fp8_dtype_name_for_arch(gcn_arch: str) -> str:
    """MI300/MI325 (gfx94x) use float8_e4m3fnuz; every other ROCm arch the OCP float8_e4m3fn."""
    return "float8_e4m3fnuz" if "gfx94" in gcn_arch else "float8_e4m3fn"


def fp8_dtype_for_arch(gcn_arch: str) -> torch.dtype:
    """``fp8_dtype_name_for_arch``'s torch dtype."""
    import torch

    return getattr(torch, fp8_dtype_name_for_arch(gcn_arch))
