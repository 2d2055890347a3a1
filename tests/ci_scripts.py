"""One loader for the repository's scripts that are no package (``ci/*.py``, ``ci/gpu/*.py``): tests import them by
path, as a module registered under its own name (dataclasses and pickles look their module up there); each script
guards its ``main``, so importing one runs nothing."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def load_ci_script(relative: str, name: str | None = None) -> ModuleType:
    """The script at ``ROOT / relative`` (``"ci/gpu/vllm_boot.py"``), imported as ``name`` (its stem where None)."""
    path = ROOT / relative
    module_name = name or path.stem
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module
