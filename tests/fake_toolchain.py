"""A stand-in for a CUDA toolchain binary where the tests need one: a ``ptxas`` that answers ``--version`` as NVIDIA's
does, placed in a torch folder where inductor looks for it (the Triton-cache tests: ``worker/triton_cache.py``)."""

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


def torch_folder_with_ptxas(tmp_path: Path, release: str) -> Path:
    """A torch folder shipping ``ptxas`` where inductor looks for it: ``bin/`` (torch 2.11's wheels, where the GPU host
    found it) and ``_inductor/bin/`` (where 2.13's function looks, two folders above its own file)."""
    torch_dir = tmp_path / "torch"
    for folder in (torch_dir / "bin", torch_dir / "_inductor" / "bin"):
        fake_ptxas(folder, release)
    return torch_dir
