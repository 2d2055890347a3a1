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


def inductor_sees_torch_folder(monkeypatch, tmp_path: Path, release: str) -> Path:
    """Inductor's ``_set_triton_ptxas_path`` made to look at a fake torch folder shipping a ``ptxas`` of ``release``,
    with TRITON_PTXAS_PATH unset and recorded, so what the function sets is undone after the test (a fake ptxas left
    set would break every later Triton compile in the process). Returns the torch folder."""
    from torch._inductor.runtime import compile_tasks

    torch_dir = torch_folder_with_ptxas(tmp_path, release)
    monkeypatch.setattr(compile_tasks, "__file__", str(torch_dir / "_inductor" / "runtime" / "compile_tasks.py"))
    monkeypatch.setenv("TRITON_PTXAS_PATH", "")
    monkeypatch.delenv("TRITON_PTXAS_PATH")
    return torch_dir
