"""The CLI's import budget: ``--help``, ``--version`` and the commands that need no device (``sizes``, ``caps``, the
``kernels`` listing, ``probe`` of a platform without graphs) never import torch, vLLM, numpy or Triton, which cost
seconds before the first line prints. Auto-detection reads the torch build from its version file: on a host whose
torch is no GPU build (the cpu lane's), ``sizes`` and ``probe`` without ``--platform`` stay light too.

Each case runs the real console entry (``python -m portable_spec``) under ``-X importtime`` in a fresh interpreter and
reads every module it imported; a generous wall-clock bound backs the structural check."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from portable_spec.ports.torch_build import cuda_build, hip_build

HEAVY = ("torch", "vllm", "numpy", "triton")
"""Top-level packages none of these commands uses; each one alone takes seconds to import on a loaded CPU host."""

CASES = [
    (("--help",), 3.0),
    (("--version",), 3.0),
    (("sizes", "--method", "eagle3", "--num-spec", "3", "--max-num-seqs", "64", "--platform", "musa"), 4.0),
    (("sizes", "--method", "eagle", "--num-spec", "2", "--max-num-seqs", "8", "--platform", "cuda", "--json"), 4.0),
    (("sizes", "--method", "eagle3", "--num-spec", "3", "--max-num-seqs", "64"), 4.0),  # auto-detection
    (("sizes", "--method", "dflash", "--num-spec", "4", "--max-num-seqs", "16", "--platform", "cpu", "--json"), 4.0),
    (("probe", "--platform", "cpu"), 4.0),
    (("probe", "--platform", "cpu", "--json"), 4.0),
    (("probe", "--json"), 4.0),  # auto-detection
    (("caps",), 4.0),
    (("caps", "--platform", "musa", "--json"), 4.0),
    (("census", "--platform", "musa"), 4.0),
    (("kernels",), 4.0),
    (("kernels", "--platform", "rocm", "--json"), 4.0),
]
DETECTS = {("sizes", "--method", "eagle3", "--num-spec", "3", "--max-num-seqs", "64"), ("probe", "--json")}
"""The cases without ``--platform`` (``VLLM_PLATFORM`` is dropped): light only where torch is no GPU build: a CUDA
build's detection asks torch for the visible device count (NVML through ``torch.cuda``), and probe opens the device."""
GPU_BUILD = cuda_build() or hip_build()


def imported_modules(args: tuple[str, ...]) -> tuple[list[str], float, subprocess.CompletedProcess]:
    """Every module the command imported (``-X importtime``'s names), its wall time, and the finished process."""
    env = {k: v for k, v in os.environ.items() if k != "VLLM_PLATFORM"}
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "portable_spec", *args], capture_output=True,
                          text=True, env=env, timeout=120)
    wall = time.monotonic() - start
    names = [line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")]
    return names[1:], wall, proc  # the first line is importtime's header ("package")


@pytest.mark.parametrize("args,budget_s", CASES, ids=[" ".join(c[0]) for c in CASES])
def test_command_imports_no_heavy_package(args, budget_s):
    if args in DETECTS and GPU_BUILD:
        pytest.skip("torch here is a GPU build: detection counts its devices, and probe opens one, through torch")
    names, wall, proc = imported_modules(args)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip(), "the command printed nothing"
    # The check compared something: the CLI itself was imported, so importtime's listing is the real one.
    assert "portable_spec.cli" in names, f"no importtime listing ({len(names)} modules read)"
    heavy = [name for name in names if name.split(".")[0] in HEAVY]
    roots = sorted({name.split(".")[0] for name in heavy})
    assert not heavy, f"{' '.join(args)} imported {roots} ({len(heavy)} of its {len(names)} modules)"
    assert wall < budget_s, f"{' '.join(args)} took {wall:.2f} s (budget {budget_s} s)"
