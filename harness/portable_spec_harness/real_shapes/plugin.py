"""Registers the designed-weights loader in every process vLLM starts, without touching what the product installs.

vLLM looks a load format up in ``vllm.model_executor.model_loader``'s registry in the worker that loads the model;
a ``vllm.general_plugins`` entry point runs in every process vLLM starts (API server, engine core, workers). The
product's entry points (``pyproject.toml``) never register the loader: ``write_plugin`` writes a one-entry-point
distribution (``harness.runtime_plugin``, as for musa-sim) that ``plugin_env`` puts first on ``PYTHONPATH``. Its
function, ``portable_spec_harness.vllm_door.designed_loader:register``, registers ``DesignedWeightsLoader`` for
``--load-format portable_spec_designed``. A ``vllm serve`` without that ``PYTHONPATH`` never sees it; with a
``VLLM_PLUGINS`` allow-list, the list must name ``ENTRY_POINT`` too (vLLM filters every plugin group by it).

``python -m portable_spec_harness.real_shapes plugin-env`` prints the ``export`` line for a shell.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

from portable_spec_harness.runtime_plugin import dist_files, pythonpath_first, write_dist_info

ENTRY_POINT = "portable_spec_designed_weights"
GROUP = "vllm.general_plugins"
TARGET = "portable_spec_harness.vllm_door.designed_loader:register"
DIST_INFO = f"{ENTRY_POINT}-0.dist-info"
DEFAULT_ROOT = Path(tempfile.gettempdir()) / "portable_spec_designed_weights_plugin"
FILES = dist_files(ENTRY_POINT, GROUP, TARGET,
                   "portable_spec designed-weights model loader (harness only; written at run time)")


def write_plugin(root: Path | str = DEFAULT_ROOT) -> Path:
    """Write the dist-info under ``root``; returns ``root``, the directory for ``PYTHONPATH``."""
    return write_dist_info(root, DIST_INFO, FILES)


def plugin_env(root: Path | str = DEFAULT_ROOT, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``PYTHONPATH`` with the plugin first (written first)."""
    return {"PYTHONPATH": pythonpath_first(write_plugin(root), os.environ if environ is None else environ)}
