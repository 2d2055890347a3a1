"""The cpu lane's virtualenvs hold no CUDA-only distribution (issue 36): vLLM's requirements go through
ci/vllm_cpu_requirements.py, which leaves out what serves only CUDA, and the build fails when one gets in anyway.
Each check has a negative control."""

from __future__ import annotations

import subprocess
from importlib.metadata import PackageNotFoundError, requires
from pathlib import Path

import pytest
from pip_machine import machine, write_installed
from ci_scripts import load_ci_script

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "ci" / "vllm_cpu_requirements.py"
VENV_BUILD = ROOT / "ci" / "lanes" / "cpu_venv.sh"

reqs = load_ci_script("ci/vllm_cpu_requirements.py")

# What vLLM 0.26.0-0.33.0 (and the packages they pull) name that serves only CUDA, as their metadata spells it.
CUDA_REQUIREMENTS = [
    "flashinfer-python==0.6.14", "flashinfer-cubin==0.6.14", "flashinfer_jit_cache==0.6.14",
    "nvidia-cutlass-dsl[cu13]==4.6.0", "nvidia-cutlass-dsl-libs-cu12", "nvidia-cudnn-frontend>=1.19.1",
    "nvidia-cuda-nvcc", "nvidia-cuda-nvrtc", "nvidia-ml-py",
    "cuda-python>=13.0", "cuda-bindings", "cuda_tile>=1.4.0", "tilelang==0.1.9",
    "PyNvVideoCodec==2.0.4", "nvtx==0.2.15", "fastsafetensors>=0.3.2", "quack-kernels>=0.4.0",
    'tokenspeed-mla==0.1.8; platform_system == "Linux"', "tokenspeed-triton", "humming-kernels[cu13]==0.1.10",
    "instanttensor>=0.2.2", "torch-c-dlpack-ext",
]
# What the CPU tests need of vLLM's requirements (numba: the n-gram proposer; ninja, triton: kernels on CPU;
# apache-tvm-ffi: xgrammar's, though flashinfer's too).
CPU_REQUIREMENTS = [
    "transformers>=5.5.3", "numba==0.65.0", "ninja", "xgrammar<1.0.0,>=0.2.1", "compressed-tensors==0.17.0",
    "opencv-python-headless>=4.13.0", "mistral_common[image]>=1.11.5", "triton==3.6.0", "regex",
    'llguidance<1.8.0,>=1.7.0; platform_machine == "x86_64"', "numpy", "pyzmq>=25.0.0", "apache-tvm-ffi==0.1.10",
]


def test_cuda_only_requirements_are_skipped_and_cpu_ones_kept():
    kept, skipped = reqs.split_requirements(CPU_REQUIREMENTS + CUDA_REQUIREMENTS + ["torch==2.11.0"])
    assert kept == CPU_REQUIREMENTS
    assert skipped == CUDA_REQUIREMENTS + ["torch==2.11.0"]


def test_extras_lines_are_neither_kept_nor_skipped():
    kept, skipped = reqs.split_requirements(['pytest; extra == "test"', 'flashinfer-python; extra == "fi"'])
    assert kept == skipped == []


@pytest.mark.parametrize("entry", sorted(reqs.CUDA_ONLY) + sorted(reqs.CUDA_ONLY_PREFIXES))
def test_each_entry_is_what_skips_its_requirements(entry, monkeypatch):
    """Negative control: without any one entry of the lists, a CUDA requirement of the sample is kept."""
    if entry in reqs.CUDA_ONLY:
        monkeypatch.setattr(reqs, "CUDA_ONLY", {k: v for k, v in reqs.CUDA_ONLY.items() if k != entry})
    else:
        monkeypatch.setattr(reqs, "CUDA_ONLY_PREFIXES",
                            {k: v for k, v in reqs.CUDA_ONLY_PREFIXES.items() if k != entry})
    kept, _ = reqs.split_requirements(CUDA_REQUIREMENTS)
    assert kept and all(reqs.requirement_name(r).startswith(entry) for r in kept), kept


def test_the_installed_vllms_cuda_requirements_are_skipped():
    """vLLM's own metadata (this virtualenv's vLLM, installed --no-deps so its requires_dist is the CUDA build's):
    every requirement that the sample calls CUDA-only is skipped, and the CPU ones are kept."""
    try:
        requires_dist = requires("vllm") or []
    except PackageNotFoundError:
        pytest.skip("vLLM is not installed")
    kept, skipped = reqs.split_requirements(requires_dist)
    kept_names = {reqs.requirement_name(r) for r in kept}
    cuda_names = {reqs.requirement_name(r) for r in CUDA_REQUIREMENTS}
    assert not kept_names & cuda_names, kept_names & cuda_names
    assert {"transformers", "numba"} <= kept_names
    assert "flashinfer-python" in {reqs.requirement_name(r) for r in skipped}


def check_installed(tmp_path: Path, dists: list[tuple[str, str]]) -> subprocess.CompletedProcess:
    python, site = machine(tmp_path / "venv")
    for name, version in dists:
        write_installed(site, name, version)
    return subprocess.run([python, str(SCRIPT), "--check-installed"], capture_output=True, text=True, timeout=60)


def test_check_installed_passes_a_cpu_set(tmp_path):
    proc = check_installed(tmp_path, [("transformers", "5.5.3"), ("numba", "0.65.0"), ("triton", "3.6.0")])
    assert proc.returncode == 0 and "ERROR:" not in proc.stdout, proc.stdout + proc.stderr


def test_check_installed_fails_on_a_cuda_only_distribution(tmp_path):
    """Negative control: a kept requirement that drags in cuda-bindings makes the build's log hold an ERROR: line."""
    proc = check_installed(tmp_path, [("transformers", "5.5.3"), ("cuda_bindings", "13.0.0")])
    assert proc.returncode == 1 and proc.stdout.startswith("ERROR: ") and "cuda_bindings==13.0.0" in proc.stdout, \
        proc.stdout + proc.stderr


def test_the_build_uses_the_list_and_checks_before_completing():
    text = VENV_BUILD.read_text()
    split = '"$root/ci/vllm_cpu_requirements.py" "$venv/vllm-report.json" "$venv/vllm-reqs.txt"'
    check = '"$root/ci/vllm_cpu_requirements.py" --check-installed'
    guard = """grep -n '^ERROR:' "$venv/install.log\""""
    assert split in text and '"$venv/skipped.txt"' in text
    assert text.index(split) < text.index('-r "$venv/vllm-reqs.txt"')
    assert text.index('pip_install --no-deps "$vllm_pin"') < text.index(check) < text.index(guard)
    assert text.index(guard) < text.index('touch "$venv/.complete"')
