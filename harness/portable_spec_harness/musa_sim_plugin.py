"""Switches a real vLLM 0.26.0 engine onto musa-sim from the environment, in every process it starts.

vLLM picks its platform from the ``vllm.platform_plugins`` entry points, in each process it starts (engine core,
workers, its model-inspection subprocess). The product's probe answers ``VLLM_PLATFORM=musa`` with our MUSA class,
which needs torch_musa; the simulation needs a second probe, and vLLM refuses two out-of-tree plugins that answer at
once. So:

- this module's ``probe`` answers only when ``VLLM_PLATFORM=musa`` and ``PORTABLE_SPEC_SIM_DEVICE=musa`` are both set,
  with ``musa_sim_platform.MusaSimPlatform``; the product's probe steps aside exactly then (and fails in one line when
  this plugin is not on the path, rather than falling back to CUDA under musa-sim's name);
- its entry point is not in pyproject.toml: ``write_plugin`` writes a one-entry-point distribution (a dist-info
  directory) that ``plugin_env`` puts first on ``PYTHONPATH``. A ``vllm serve`` outside the harness never sees it,
  so nothing the product installs loads harness code, and no reinstall is needed to switch the simulation on.

``python -m portable_spec_harness.musa_sim_plugin`` prints the ``export`` lines for a shell (e.g. ``vllm serve``
under musa-sim). Whatever runs this way is labelled musa-sim: the MUSA code path on a CUDA device, never MUSA.
"""

from __future__ import annotations

import os
import shlex
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

from portable_spec.envs import PLATFORM_ENV as ENV_VAR, SIM_DEVICE_ENV, requested_platform, simulated_device
from portable_spec_harness.runtime_plugin import dist_files, pythonpath_first, write_dist_info
from portable_spec.vllm_adapter.platform.selection import PLATFORM_PLUGINS_GROUP, sim_plugin_name

DEVICE = "musa"
ENTRY_POINT = sim_plugin_name(DEVICE)
PLATFORM_QUALNAME = "portable_spec_harness.musa_sim_platform.MusaSimPlatform"
DIST_INFO = f"{ENTRY_POINT}-0.dist-info"
DEFAULT_ROOT = Path(tempfile.gettempdir()) / "portable_spec_musa_sim_plugin"
FILES = dist_files(ENTRY_POINT, PLATFORM_PLUGINS_GROUP, "portable_spec_harness.musa_sim_plugin:probe",
                   "portable_spec musa-sim platform plugin (harness only; written at run time)")


def probe() -> str | None:
    """The musa-sim platform's qualname when both switches say musa, else None (vLLM calls this in every process)."""
    return PLATFORM_QUALNAME if requested_platform() == DEVICE and simulated_device() == DEVICE else None


def write_plugin(root: Path | str = DEFAULT_ROOT) -> Path:
    """Write the plugin's dist-info under ``root`` (idempotent; parts starting at once never see half a directory);
    returns ``root``, the directory to put on ``PYTHONPATH``."""
    return write_dist_info(root, DIST_INFO, FILES)


def plugin_env(root: Path | str = DEFAULT_ROOT, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables that switch musa-sim on in every process vLLM starts (the plugin is written first)."""
    env = os.environ if environ is None else environ
    return {ENV_VAR: DEVICE, SIM_DEVICE_ENV: DEVICE, "PYTHONPATH": pythonpath_first(write_plugin(root), env)}


def main() -> int:
    for name, value in plugin_env().items():
        print(f"export {name}={shlex.quote(value)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
