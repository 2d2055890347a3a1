"""A one-entry-point distribution written at run time: how the harness hands vLLM a plugin the product never installs.

vLLM discovers plugins through entry points, i.e. through the dist-info directories on ``sys.path``. Writing one
such directory under a root and putting that root first on ``PYTHONPATH`` makes every process vLLM starts see the
entry point, without a reinstall, and a process started without that ``PYTHONPATH`` never does. Used by the
musa-sim platform plugin (``musa_sim_plugin``) and the designed-weights loader (``real_shapes.plugin``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path


def dist_files(name: str, group: str, target: str, summary: str) -> dict[str, str]:
    """The two files of a distribution ``name`` with one entry point ``name = target`` in ``group``."""
    return {"METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 0\nSummary: {summary}\n",
            "entry_points.txt": f"[{group}]\n{name} = {target}\n"}


def _written(directory: Path, files: Mapping[str, str]) -> bool:
    try:
        return all((directory / name).read_text() == text for name, text in files.items())
    except OSError:
        return False


def write_dist_info(root: Path | str, dist_info: str, files: Mapping[str, str]) -> Path:
    """Write ``root/dist_info`` (idempotent; parts starting at once never see half a directory); returns ``root``,
    the directory to put on ``PYTHONPATH``."""
    root = Path(root)
    target = root / dist_info
    if _written(target, files):
        return root
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=root))
    staging.chmod(0o755)  # mkdtemp makes it private; the dist-info is read by whoever runs vLLM
    for name, text in files.items():
        (staging / name).write_text(text)
    shutil.rmtree(target, ignore_errors=True)
    try:
        staging.rename(target)
    except OSError:  # another process renamed its copy first
        shutil.rmtree(staging, ignore_errors=True)
        if not _written(target, files):
            raise
    return root


def pythonpath_first(path: Path | str, environ: Mapping[str, str]) -> str:
    """``environ``'s ``PYTHONPATH`` with ``path`` first (and only once)."""
    path = str(path)
    rest = [p for p in environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != path]
    return os.pathsep.join([path, *rest])
