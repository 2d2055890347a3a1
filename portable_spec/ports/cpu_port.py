"""CPU: always available, no device graphs (probe and planning still work; capture raises a clear error)."""

from __future__ import annotations

import platform as _host
from types import ModuleType
from typing import TYPE_CHECKING

from portable_spec.ports.interface import DevicePort

if TYPE_CHECKING:
    import torch


class CpuPort(DevicePort):
    name = "cpu"
    device_type = "cpu"
    dist_backend = "gloo"
    supports_graphs = False

    @classmethod
    def is_active(cls) -> bool:
        return True

    @classmethod
    def unavailable_reason(cls) -> str | None:
        return None

    def _load_device_module(self) -> ModuleType:
        import torch

        return torch.cpu

    def device_name(self) -> str:
        return _host.processor() or _host.machine()

    def device(self, index: int | None = None) -> torch.device:
        import torch

        return torch.device("cpu")
