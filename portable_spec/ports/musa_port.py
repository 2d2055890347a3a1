"""Moore Threads MUSA: ``torch.musa`` from torch_musa, MCCL, MUSAGraph (no ``keep_graph``), capture under
``inference_mode``, and torchada's ~1900 live-executable rotation cap as the graph budget.

torchada is imported only when this platform loads its device module (it sets ``VLLM_TUNED_CONFIG_FOLDER`` and
``SGLANG_MOE_CONFIG_DIR`` on import); its version and its cap's default are read without importing it
(``torchada_build``). Detection asks whether torch_musa is importable, never ``torch.cuda.is_available()`` (False
under torchada).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
from types import ModuleType

from portable_spec import envs
from portable_spec.ports import torchada_build
from portable_spec.ports.interface import DevicePort

from portable_spec.errors import PortableSpecError


AUTOPROBE_NOTE = (f"{envs.TORCHADA_AUTOPROBE_ENV}=1 has torchada measure its live-graph cap at startup (the driver's "
                  "limit minus a margin), a number no plan can know beforehand: set "
                  f"{envs.TORCHADA_CAP_ENV} to plan with it")


class TorchadaCap:
    """``MusaPort.live_graph_limit``: torchada's cap (``TORCHADA_GRAPH_EXEC_CAP``), read from the environment on each
    access, never at import, so the value a harness or an engine sets for its process is the one its planner and its
    drafter see. A port instance may pin its own (``port.live_graph_limit = n``: the musa-sim harness)."""

    def __get__(self, port: object, owner: type) -> int:
        return envs.torchada_graph_exec_cap(default=default_cap())


def default_cap() -> int:
    """The cap torchada enforces when ``TORCHADA_GRAPH_EXEC_CAP`` is unset or ignored: the installed torchada's
    ``_DEFAULT_CAP`` (read from its source, not imported), else ours, mirrored from torchada 0.1.103."""
    return torchada_build.default_cap() or envs.TORCHADA_DEFAULT_EXEC_CAP


class MusaPort(DevicePort):
    name = "musa"
    device_type = "musa"
    dist_backend = "mccl"
    capture_inference_mode = True
    graph_class_name = "MUSAGraph"
    live_graph_limit = TorchadaCap()

    @classmethod
    def runtime_live_graph_limit(cls) -> tuple[int | None, str | None]:
        """torchada caps at its default where it ignores the setting, and where it measures its own cap
        (``TORCHADA_GRAPH_AUTOPROBE=1``) we plan with the setting or the default: the line says so."""
        try:
            limit = cls.live_graph_limit
        except PortableSpecError as exc:
            return default_cap(), str(exc)
        if envs.torchada_autoprobe():
            return limit, AUTOPROBE_NOTE
        return limit, None

    @classmethod
    def torchada_facts(cls) -> dict[str, object]:
        """What ``probe`` says of torchada: its version (metadata, not imported), the live-graph cap it enforces in
        this environment, and where that cap's default comes from."""
        limit, ignored = cls.runtime_live_graph_limit()
        source = torchada_build.cap_source_path()
        theirs = torchada_build.default_cap()
        return {"version": torchada_build.installed_version() or "not installed",
                "live_graph_cap": limit,
                "cap_from": ignored or (envs.TORCHADA_CAP_ENV if envs.is_set(envs.TORCHADA_CAP_ENV) else
                                        "torchada's default"),
                "rotation": ("on (past the cap torchada frees the least recently replayed executable and "
                             "re-instantiates it on its next replay)" if envs.torchada_rotation() else
                             f"off ({envs.TORCHADA_ROTATION_ENV}=0: torchada enforces no cap; the driver's own limit "
                             "fails a capture past it)"),
                "default_from": (f"{torchada_build.CAP_CONSTANT} in {source}" if theirs is not None else
                                 f"ours ({envs.TORCHADA_DEFAULT_EXEC_CAP}, as {torchada_build.CAP_SOURCE} 0.1.103)")}

    def facts(self) -> dict[str, object]:
        return {**super().facts(), "torchada": self.torchada_facts()}

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
