"""vLLM's requirements for a cpu-lane virtualenv: its requires_dist minus torch and what only serves CUDA (issue 36).

vLLM's wheel metadata is its CUDA build's: installed as such on a machine without a GPU, it pulled ~2.5 GB of
packages no CPU test loads (flashinfer and its CUDA Python stack, the CUTLASS DSL with its cu12 and cu13 libraries,
nvcc, nvrtc, cuda-python, cuDNN's frontend, NVIDIA's video codec, CUDA kernel packages with their own Triton fork).
``ci/lanes/cpu_venv.sh`` installs what this keeps, writes what it dropped to ``$venv/skipped.txt``, and after the
install fails the build (an ``ERROR:`` line) when a kept requirement still brought in a distribution that
``cuda_only`` names. vLLM imports each dropped package lazily, on a CUDA code path.

Usage: python ci/vllm_cpu_requirements.py REPORT.json OUT.txt SKIPPED.txt   (REPORT: pip's --report of vLLM)
       python ci/vllm_cpu_requirements.py --check-installed                  (this interpreter's distributions)
"""

from __future__ import annotations

import json
import re
import sys

TORCH = {"torch", "torchvision", "torchaudio", "torchcodec"}
"""vLLM's torch pin is for CUDA: the lane installs the CPU torch of its requirements file instead."""

CUDA_ONLY = {
    "fastsafetensors": "GPU Direct Storage weight loader (load_format=fastsafetensors only)",
    "humming-kernels": "CUDA quantized-GEMM kernels (humming quantization)",
    "instanttensor": "GPU weight loader",
    "nvtx": "NVIDIA's profiler ranges (vLLM imports it only when a CUDA profile asks)",
    "pynvvideocodec": "NVIDIA's hardware video decoder",
    "quack-kernels": "CuTe DSL kernels (Hopper/Blackwell)",
    "tilelang": "GPU kernel DSL (vLLM's mHC kernels); brings z3-solver and its own TVM",
    "tokenspeed-mla": "Blackwell MLA kernels; brings tokenspeed-triton, a second Triton build (~290 MB)",
    "tokenspeed-triton": "tokenspeed-mla's Triton fork",
    "torch-c-dlpack-ext": "tvm-ffi's DLPack bridge for torch, required by tilelang and quack-kernels",
}
"""CUDA-only distributions named exactly (normalized names), each with why it is CUDA-only. Not apache-tvm-ffi:
flashinfer and tilelang use it, but so does xgrammar (structured output, on CPU too), and vLLM's pin of it keeps
xgrammar at the version the CUDA install resolves."""

CUDA_ONLY_PREFIXES = {
    "nvidia-": "NVIDIA's CUDA wheels: nvidia-cutlass-dsl (and -libs-base/-core/-cu12/-cu13), nvidia-cudnn-frontend, "
               "nvidia-cuda-nvcc/-nvrtc/-runtime/-cccl/-crt, nvidia-nvvm, nvidia-ml-py",
    "cuda-": "CUDA's Python stack: cuda-python, cuda-bindings, cuda-core, cuda-pathfinder, cuda-tile",
    "flashinfer": "flashinfer-python, flashinfer-cubin, flashinfer-jit-cache: CUDA attention kernels",
}
"""CUDA-only distributions named by the start of their normalized name."""


def normalize(name: str) -> str:
    """PEP 503's normalized distribution name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def cuda_only(name: str) -> bool:
    """Whether the distribution ``name`` serves only CUDA (the lane's CPU virtualenvs never hold it)."""
    name = normalize(name)
    return name in CUDA_ONLY or name.startswith(tuple(CUDA_ONLY_PREFIXES))


def requirement_name(req: str) -> str:
    return normalize(re.split(r"[\s<>=!~;\[(]", req.strip(), maxsplit=1)[0])


def split_requirements(requires_dist: list[str]) -> tuple[list[str], list[str]]:
    """(kept, skipped) of vLLM's requires_dist: extras' lines are left out of both; torch and the CUDA-only ones
    are skipped."""
    kept, skipped = [], []
    for req in requires_dist:
        if "extra ==" in req:
            continue
        name = requirement_name(req)
        (skipped if name in TORCH or cuda_only(name) else kept).append(req)
    return kept, skipped


def installed_cuda_only() -> list[str]:
    """The distributions installed for this interpreter that ``cuda_only`` names."""
    from importlib.metadata import distributions

    return sorted({f"{d.metadata['Name']}=={d.version}" for d in distributions() if cuda_only(d.metadata["Name"])})


def main(argv: list[str]) -> int:
    if argv == ["--check-installed"]:
        found = installed_cuda_only()
        for dist in found:
            print(f"ERROR: CUDA-only distribution installed in a cpu-lane virtualenv: {dist} (a kept requirement "
                  "depends on it: name that requirement in ci/vllm_cpu_requirements.py)")
        return 1 if found else 0
    report, out, skipped_out = argv
    (vllm,) = json.load(open(report))["install"]
    kept, skipped = split_requirements(vllm["metadata"].get("requires_dist", []))
    open(out, "w").write("\n".join(kept) + "\n")
    open(skipped_out, "w").write("\n".join(skipped) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
