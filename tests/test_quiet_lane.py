"""A green cpu lane prints none of the noises it used to, each removed at its cause; each check has a negative control.

- setuptools' deprecation of the ``project.license`` table: pyproject.toml has the SPDX string (setuptools>=77).
- vLLM's "Current platform cpu does not have '_mock_name' attribute.": pytest reads ``_mock_name`` of every conftest
   global while collecting fixtures, and vLLM's Platform.__getattr__ logs unknown names; conftest no longer holds the
   pinned platform in a module global.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = ROOT / "pyproject.toml"
SPDX_LICENSE = 'license = "Apache-2.0"'
LICENSE_TABLE_WARNING = "`project.license` as a TOML table is deprecated"
MOCK_WARNING = "does not have '_mock_name' attribute"


# The license.

def metadata_build(project: Path, out: Path) -> subprocess.CompletedProcess:
    """setuptools preparing ``project``'s editable metadata (what the lane's `pip install -e` runs), warnings raised."""
    out.mkdir(parents=True, exist_ok=True)
    code = "import setuptools.build_meta as b, sys; b.prepare_metadata_for_build_editable(sys.argv[1])"
    return subprocess.run([sys.executable, "-W", "error", "-c", code, str(out)], cwd=project, capture_output=True,
                          text=True, timeout=120)


def test_license_is_an_spdx_string_that_the_build_requirement_supports():
    pyproject = tomllib.loads(PYPROJECT.read_text())
    assert pyproject["project"]["license"] == "Apache-2.0"
    (setuptools,) = [Requirement(r) for r in pyproject["build-system"]["requires"] if r.startswith("setuptools")]
    assert not setuptools.specifier.contains("76.9"), "SPDX license strings need setuptools>=77"


def test_project_metadata_builds_without_warnings(tmp_path):
    proc = metadata_build(ROOT, tmp_path)
    assert proc.returncode == 0 and "Warning" not in proc.stderr, proc.stderr


def test_license_table_makes_setuptools_warn(tmp_path):
    """Negative control: the same build of the project with the old license table warns (raised here)."""
    project = tmp_path / "project"
    (project / "portable_spec").mkdir(parents=True)
    (project / "portable_spec" / "__init__.py").touch()
    shutil.copy(ROOT / "README.md", project)
    text, count = re.subn(f"^{re.escape(SPDX_LICENSE)}$", 'license = { text = "Apache-2.0" }', PYPROJECT.read_text(),
                          flags=re.M)
    assert count == 1
    (project / "pyproject.toml").write_text(text)
    proc = metadata_build(project, tmp_path / "out")
    assert proc.returncode != 0 and LICENSE_TABLE_WARNING in proc.stderr, proc.stderr


# vLLM's `_mock_name` warning.

def test_collecting_tests_logs_no_platform_warning():
    """conftest pins the platform (importing vLLM) and pytest collects its fixtures: no warning."""
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           "tests/test_envs.py"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert MOCK_WARNING not in proc.stdout + proc.stderr


def test_pytest_reading_a_platform_logs_the_warning():
    """Negative control: pytest's lookup on a vLLM platform (what it did to conftest's old global) logs it."""
    code = ("from _pytest.compat import safe_getattr\n"
            "from portable_spec.vllm_adapter.tools.testing_platform import CpuGraphTestPlatform\n"
            "safe_getattr(CpuGraphTestPlatform(), '_mock_name', None)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert MOCK_WARNING in proc.stdout + proc.stderr, proc.stdout + proc.stderr


def test_no_test_module_holds_a_vllm_platform(vllm_platform):
    """pytest reads test modules' globals the same way: none of those loaded holds a vLLM platform."""
    from vllm.platforms.interface import Platform

    tests = str(ROOT / "tests")
    held = [f"{name}.{attr}" for name, module in list(sys.modules.items())
            if (getattr(module, "__file__", None) or "").startswith(tests)
            for attr, value in vars(module).items() if isinstance(value, Platform)]
    assert not held, held
