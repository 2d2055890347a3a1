"""A green cpu lane prints none of the noises it used to, each removed at its cause; each check has a negative control.

- setuptools' deprecation of the ``project.license`` table: pyproject.toml has the SPDX string (setuptools>=77).
- pip's "ERROR: ... vllm 0.26.0 requires torch==2.11.0": pip checks the installed set for conflicts after every
   install that resolves dependencies, and vLLM's torch pin (for CUDA) conflicts with the CPU torch on purpose; the
   lane installs vLLM last and --no-deps, and fails its build on any "ERROR:" line pip prints.
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
from pip_machine import machine, run_pip, stub_wheel, write_installed

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = ROOT / "pyproject.toml"
LANE = ROOT / "ci" / "lanes" / "cpu.sh"
VENV_BUILD = ROOT / "ci" / "lanes" / "cpu_venv.sh"
"""Builds each virtualenv of the lane (every vLLM of the span); the lane then installs the project into it."""
SPDX_LICENSE = 'license = "Apache-2.0"'
LICENSE_TABLE_WARNING = "`project.license` as a TOML table is deprecated"
VLLM_CONFLICT = "vllm 0.26.0 requires torch==2.11.0"
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


# pip's conflict report.

def lane_pip_installs() -> list[str]:
    """The lane's pip install commands in order: the virtualenv's build, then the lane's own (continued lines joined;
    the helper's definition left out)."""
    text = (VENV_BUILD.read_text() + LANE.read_text()).replace("\\\n", " ")
    return [ln.strip() for ln in text.splitlines() if not ln.lstrip().startswith("#") and "pip_install()" not in ln
            and (re.match(r"\s*pip_install\s", ln) or re.search(r"-m pip install\s", ln))]


def test_lane_installs_vllm_last_and_nothing_after_resolves_dependencies():
    steps = lane_pip_installs()
    (at,) = [i for i, step in enumerate(steps) if '"$vllm_pin"' in step and "--dry-run" not in step]
    assert all("--no-deps" in step for step in steps[at:]), steps[at:]


def test_lane_pytest_prints_skip_reasons():
    """A green log says why each test skipped (issue 36: 5, 40 and 95 skips went unexplained), and a red one still
    names each failure (``-rs`` alone would replace pytest's default ``-rfE`` summary): every pytest run of the lane
    has ``-rfEs``."""
    runs = [line for line in LANE.read_text().splitlines() if "-m pytest" in line and not line.lstrip().startswith("#")]
    assert runs and all(" -rfEs " in line for line in runs), runs


def test_lane_build_fails_on_pip_errors():
    text = VENV_BUILD.read_text()
    guard = """grep -n '^ERROR:' "$venv/install.log\""""
    assert guard in text and text.index(guard) < text.index('touch "$venv/.complete"')


def install_in_order(tmp_path: Path, steps: list[list[str]]) -> str:
    """What pip prints installing ``steps`` in order on a machine with the CPU torch, from stand-ins of vLLM (its
    torch pin and one other requirement) and of that requirement."""
    wheels = tmp_path / "wheels"
    stub_wheel(wheels, "vllm", "0.26.0", ["torch==2.11.0", "regex"])
    stub_wheel(wheels, "regex", "1.0")
    python, site = machine(tmp_path / "venv")
    write_installed(site, "torch", "2.13.0+cpu")
    log = ""
    for args in steps:
        proc = run_pip(python, ["-q", "--no-index", "--find-links", str(wheels), *args])
        assert proc.returncode == 0, proc.stderr
        log += proc.stdout + proc.stderr
    return log


def errors(log: str) -> list[str]:
    return [ln for ln in log.splitlines() if ln.startswith("ERROR:")]


def test_vllm_installed_last_makes_pip_report_nothing(tmp_path):
    log = install_in_order(tmp_path, [["regex"], ["--no-deps", "vllm==0.26.0"]])
    assert not errors(log) and VLLM_CONFLICT not in log, log


def test_vllm_installed_first_makes_pip_report_its_torch_pin(tmp_path):
    """Negative control: the old order (vLLM --no-deps, then its requirements) prints the conflict report."""
    log = install_in_order(tmp_path, [["--no-deps", "vllm==0.26.0"], ["regex"]])
    assert errors(log) and VLLM_CONFLICT in log, log


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
            "from portable_spec_harness.vllm_door.cpu_graph_platform import CpuGraphTestPlatform\n"
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


# pip's advice at every step of a cold build (the machine's pip configuration: "Location ... is ignored").

PIP_ADVICE = "WARNING: Location '/opt/pypi' is ignored: it is either a non-existing path or lacks a specific scheme."


def run_pip_install(tmp_path: Path, exit_code: int) -> subprocess.CompletedProcess:
    """The build's ``pip_install`` (its ``log`` helper beside it), as the script defines them, driving a stand-in
    interpreter that prints pip's advice and exits with ``exit_code``."""
    text = VENV_BUILD.read_text()
    functions = "\n".join(re.search(rf"^{name}\(\) {{.*?^}}$|^{name}\(\) {{.*?}}$", text, re.M | re.S).group(0)
                          for name in ("log", "pip_install"))
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    python.write_text(f"#!/bin/sh\necho \"{PIP_ADVICE}\" >&2\nexit {exit_code}\n")
    python.chmod(0o755)
    script = f"set -euo pipefail\nvenv={venv}\n{functions}\npip_install torch==2.13.0\necho after >&2\n"
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)


def test_a_pip_step_that_succeeds_prints_nothing_and_logs_everything(tmp_path):
    proc = run_pip_install(tmp_path, 0)
    assert proc.returncode == 0 and proc.stderr == "after\n" and proc.stdout == "", proc
    assert PIP_ADVICE in (tmp_path / "venv" / "install.log").read_text()


def test_a_pip_step_that_fails_prints_its_output_and_stops_the_build(tmp_path):
    proc = run_pip_install(tmp_path, 1)
    assert proc.returncode == 1 and PIP_ADVICE in proc.stderr and "after" not in proc.stderr, proc
    assert "pip install torch==2.13.0 failed" in proc.stderr


# pip's own output in the lane scripts.

def pip_commands(script: str) -> list[str]:
    """Each ``-m pip install`` command of a bash script, continuation lines joined."""
    joined = re.sub(r"\\\n\s*", " ", script)
    return [line.strip() for line in joined.splitlines() if "-m pip install" in line and not line.strip().startswith("#")]


def unredirected(command: str) -> bool:
    """A pip command whose output reaches the console: no ``>`` / ``>>`` of its stdout to a file."""
    return re.search(r"(?<![<&0-9])>>?\s*\S", command.split("||")[0]) is None


def test_every_pip_install_of_the_lane_writes_to_a_log_not_the_console():
    """A host's pip configuration may print warnings about its own index (seen on a fresh CI machine: "Location
    'file:///opt/pypi-more/simple/triton/' is ignored"); the lane's pip runs keep that in their install logs."""
    scripts = sorted((ROOT / "ci" / "lanes").glob("*.sh"))
    commands = [(s.name, c) for s in scripts for c in pip_commands(s.read_text())]
    assert len(commands) >= 4, commands
    assert [(name, c) for name, c in commands if unredirected(c)] == []


def test_a_pip_install_printing_to_the_console_is_caught():
    script = 'x() {\n  "$venv/bin/python" -m pip install -q --no-deps \\\n    -r "$root/req.txt"\n}\n'
    (command,) = pip_commands(script)
    assert unredirected(command)
    assert not unredirected(command + ' >>"$venv/install.log" 2>&1 || failed "pip"')
    assert unredirected('python -m pip install x || { cat "$log" >&2; }')
