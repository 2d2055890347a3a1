"""A stand-in for a CUDA toolchain binary where the tests need one: a ``ptxas`` that answers ``--version`` as NVIDIA's
does (the ptxas version in Triton's kernel keys: ``worker/triton_builds.py``)."""

from __future__ import annotations

from pathlib import Path


def fake_ptxas(folder: Path, release: str) -> Path:
    """An executable that answers ``--version`` as NVIDIA's ptxas of ``release`` does."""
    folder.mkdir(parents=True, exist_ok=True)
    tool = folder / "ptxas"
    tool.write_text("#!/bin/sh\necho 'ptxas: NVIDIA (R) Ptx optimizing assembler'\n"
                    f"echo 'Cuda compilation tools, release {release}, V{release}.88'\n")
    tool.chmod(0o755)
    return tool
