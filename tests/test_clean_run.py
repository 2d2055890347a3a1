"""A fresh install by the README's CPU lines (torch 2.13.0's CPU wheel, then ``pip install -e .``) runs every command
without warnings on stderr.

torch imports NumPy at start-up without requiring it, and warns "Failed to initialize NumPy" on every command when it
is missing; our own dependencies must bring it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NUMPY_WARNING = "Failed to initialize NumPy"


def declared_dependencies() -> set[str]:
    tomllib = pytest.importorskip("tomllib")
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    return {re.split(r"[\s<>=!~;\[(]", dep, maxsplit=1)[0].lower() for dep in deps}


def probe_stderr(pythonpath_first: str | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "VLLM_PLATFORM"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (pythonpath_first, str(ROOT), env.get("PYTHONPATH")) if p)
    proc = subprocess.run([sys.executable, "-m", "portable_spec", "probe", "--json"], capture_output=True, text=True,
                          env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stderr


def test_dependencies_include_what_torch_imports_at_start_up():
    assert {"torch", "numpy"} <= declared_dependencies()


def test_probe_json_writes_no_warning():
    stderr = probe_stderr()
    assert NUMPY_WARNING not in stderr and "UserWarning" not in stderr, stderr


def test_without_numpy_torch_warns_at_import(tmp_path):
    """Why numpy is declared: hide it and importing torch prints the warning. The probe above no longer imports torch
    on a host without graphs (``tests/test_cli_import_budget.py``); any command that does (a GPU probe, the kernel
    checks) would print this warning without numpy."""
    (tmp_path / "numpy").mkdir()
    (tmp_path / "numpy" / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'numpy'\", name='numpy')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH")) if p)}
    proc = subprocess.run([sys.executable, "-c", "import torch"], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert f"UserWarning: {NUMPY_WARNING}: No module named 'numpy'" in proc.stderr, proc.stderr
