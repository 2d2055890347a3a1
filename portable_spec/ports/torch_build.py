"""What this host's torch was built for (``torch.version``: ``__version__``, ``cuda``, ``hip``), without importing
torch.

Importing torch costs seconds; detection (is this a CUDA or a ROCm build?) and the CLI's facts (the torch version
``probe`` reports) need only the constants of ``torch/version.py``, a file torch's build generates. Where torch is
already imported its own ``torch.version`` answers; otherwise that one file is loaded on its own, under a private
name, so the ``torch`` package is not imported. None: torch is not installed.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import sys
from types import ModuleType


def torch_build() -> ModuleType | None:
    """``torch.version`` (the imported one, else ``torch/version.py`` read alone); None where torch is absent."""
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "version"):
        return torch.version
    return _version_file()


@functools.lru_cache(maxsize=1)
def _version_file() -> ModuleType | None:
    spec = importlib.util.find_spec("torch")  # finds the package; importing it is what this module avoids
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for location in locations:
        path = os.path.join(location, "version.py")
        if os.path.isfile(path):
            file_spec = importlib.util.spec_from_file_location("_portable_spec_torch_version", path)
            module = importlib.util.module_from_spec(file_spec)
            file_spec.loader.exec_module(module)
            return module
    return None


def torch_version() -> str | None:
    """``torch.__version__`` as a string; None where torch is absent."""
    build = torch_build()
    return None if build is None else str(build.__version__)


def cuda_build() -> bool:
    """A CUDA build of torch (``torch.version.cuda`` set)."""
    build = torch_build()
    return build is not None and getattr(build, "cuda", None) is not None


def hip_build() -> bool:
    """A ROCm (HIP) build of torch (``torch.version.hip`` set)."""
    build = torch_build()
    return build is not None and bool(getattr(build, "hip", None))
