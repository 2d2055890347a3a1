"""Moore Threads MUSA: ``torch.musa`` from torch_musa, MCCL, MUSAGraph (no ``keep_graph``), capture under
``inference_mode``, and torchada's ~1900 live-executable rotation cap as the graph budget.

torchada is imported only when this platform is constructed for real (it sets ``VLLM_TUNED_CONFIG_FOLDER`` on
import). Detection asks whether torch_musa is importable, never ``torch.cuda.is_available()`` (False under torchada).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
from types import ModuleType

from portable_spec import envs
from portable_spec.ports.interface import DevicePort

from portable_spec.errors import PortableSpecError


class TorchadaCap:
    """``MusaPort.live_graph_limit``: torchada's cap (``TORCHADA_GRAPH_EXEC_CAP``), read from the environment on each
    access, never at import, so the value a harness or an engine sets for its process is the one its planner and its
    drafter see. A port instance may pin its own (``port.live_graph_limit = n``: the musa-sim harness)."""

    def __get__(self, port: object, owner: type) -> int:
        return envs.torchada_graph_exec_cap()


class MusaPort(DevicePort):
    name = "musa"
    device_type = "musa"
    dist_backend = "mccl"
    capture_inference_mode = True
    graph_class_name = "MUSAGraph"
    live_graph_limit = TorchadaCap()

    @classmethod
    def runtime_live_graph_limit(cls) -> tuple[int | None, str | None]:
        """torchada caps at its default where it ignores the setting; the line says so."""
        try:
            return cls.live_graph_limit, None
        except PortableSpecError as exc:
            return envs.TORCHADA_DEFAULT_EXEC_CAP, str(exc)

    @classmethod
    def is_active(cls) -> bool:
        return importlib.util.find_spec("torch_musa") is not None

    @classmethod
    def unavailable_reason(cls) -> str | None:
        if importlib.util.find_spec("torch_musa") is None:
            return ("platform 'musa' requires torch_musa, which is not installed: it comes with the MUSA SDK, "
                    "not from a public package index; install vllm-musa as its instructions say (its vLLM build, "
                    "torch_musa, torchada), then pip install --no-deps portable-spec; or choose another platform")
        return None

    def _load_device_module(self) -> ModuleType:
        import torch

        importlib.import_module("torch_musa")
        if importlib.util.find_spec("torchada") is not None:
            importlib.import_module("torchada")  # aliases torch.cuda to torch.musa for vLLM's hard-coded calls
        return torch.musa  # type: ignore[attr-defined]

    def runtime_versions(self) -> dict[str, str | None]:
        import torch

        versions: dict[str, str | None] = {"torch": torch.__version__,
                                           "musa": getattr(torch.version, "musa", None)}
        for pkg in ("torch_musa", "torchada"):
            try:
                versions[pkg] = importlib.metadata.version(pkg.replace("_", "-")) if not self.injected else None
            except importlib.metadata.PackageNotFoundError:
                versions[pkg] = None
        return versions
