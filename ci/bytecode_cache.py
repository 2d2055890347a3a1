"""Keeps a cpu-lane virtualenv's bytecode cache (``PYTHONPYCACHEPREFIX``) to sources that still exist (issue 36).

The lane installs packages without bytecode and lets Python cache the bytecode of what the tests import under
``$venv/bytecode`` (``ci/lanes/cpu.sh``): about a third of what pip would compile. The cache mirrors each source's
folder, the checkout's included, and CI checks out into a new temporary folder every run: each run would leave its
checkout's few MB behind. ``prune`` removes every mirrored folder whose source folder is gone.

Usage: python ci/bytecode_cache.py PREFIX
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path


def prune(prefix: Path) -> list[Path]:
    """Removes the folders under ``prefix`` that mirror a folder no longer on disk; returns them."""
    gone = []
    for folder, subfolders, _ in os.walk(prefix):
        mirrored = Path("/") / Path(folder).relative_to(prefix)
        kept = []
        for name in subfolders:
            if (mirrored / name).is_dir():
                kept.append(name)
            else:
                gone.append(Path(folder) / name)
                shutil.rmtree(Path(folder) / name, ignore_errors=True)  # another lane process may prune it too
        subfolders[:] = kept
    return gone


if __name__ == "__main__":
    (prefix,) = sys.argv[1:]
    if Path(prefix).is_dir():
        prune(Path(prefix))
