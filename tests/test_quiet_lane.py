"""A green cpu lane prints none of the noises it used to, each removed at its cause; each check has a negative control.

- setuptools' deprecation of the ``project.license`` table: pyproject.toml has the SPDX string (setuptools>=77).
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
