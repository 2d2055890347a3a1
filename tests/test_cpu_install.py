"""The README's CPU install lines pull no CUDA wheels on an ordinary machine.

Each ``pip install`` line between the ``cpu-install`` markers of README.md is resolved by pip (``--dry-run --report``)
offline, in order, in an empty virtualenv standing for an ordinary machine: after each line the planned distributions'
metadata is written into it as installed, so the next line resolves against the first's result. pip's configuration
and ``PIP_*`` variables are ignored. Remote indexes become local ones: PyTorch's CPU index a page holding the CPU
wheel on this machine's disk (everything else from the local PyPI mirror), PyPI the local mirrors, which hold PyPI's
CUDA torch and its nvidia packages. A negative control resolves the old set-up the same way and must want CUDA wheels.

The mirrors are part of the CI machine's image: the cpu lane sets ``PORTABLE_SPEC_CPU_INSTALL_MIRRORS=required`` and
the test fails where they are missing (a lane that silently skipped would no longer check the README). Elsewhere it
skips, saying what is missing.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

import pytest
from pip_machine import machine, run_pip, write_installed

ROOT = Path(__file__).resolve().parents[1]
BEGIN, END = "<!-- cpu-install:begin -->", "<!-- cpu-install:end -->"
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
PYPI = "https://pypi.org/simple"
CPU_WHEEL = Path("/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl")
PYPI_MIRRORS = (Path("/opt/pypi-more/simple"), Path("/opt/pypi/simple"))
MIRRORS_ENV = "PORTABLE_SPEC_CPU_INSTALL_MIRRORS"
# The old set-up on a machine without torch: torch comes from PyPI. (The old `pip install torch==2.13.0 -e .` does not
# resolve here at all: the mirrors hold only PyPI's torch 2.14.1.)
OLD_LINE = "pip install -e ."
CUDA_NAME = re.compile(r"^(nvidia|cuda)[-_.]|^(pytorch-)?triton$")  # triton: CUDA torch's companion; CPU torch has none


@dataclass
class Outcome:
    """One line's resolution: the plan (None where pip found none) and pip's output."""
    line: str
    plan: list[dict] | None
    log: str


@pytest.fixture(scope="module")
def mirrors():
    """The local wheel and mirrors; fails under the lane (which expects them), skips elsewhere."""
    missing = [str(p) for p in (CPU_WHEEL, *PYPI_MIRRORS) if not p.exists()]
    if sys.version_info[:2] != (3, 11):
        missing.append(f"Python 3.11 for {CPU_WHEEL.name} (this is {sys.version_info[0]}.{sys.version_info[1]})")
    if missing:
        say = pytest.fail if os.environ.get(MIRRORS_ENV) == "required" else pytest.skip
        say(f"local wheel/mirrors missing: {', '.join(missing)}")


@pytest.fixture(scope="module")
def indexes(mirrors, tmp_path_factory) -> dict[str, list[str]]:
    """Remote index URL -> local index URLs."""
    return {TORCH_CPU_INDEX: [cpu_index(tmp_path_factory.mktemp("cpu-index"))],
            PYPI: [p.as_uri() for p in PYPI_MIRRORS]}


def cpu_index(root: Path) -> str:
    """PyTorch's CPU index: its torch page holds the CPU wheel on disk; other projects come from the local PyPI mirror
    (a superset of what the real index mirrors, so a CUDA dependency would be found and flagged, not missed)."""
    pypi = PYPI_MIRRORS[-1]
    (root / "simple" / "torch").mkdir(parents=True)
    (root / "simple" / "torch" / "index.html").write_text(f'<a href="{CPU_WHEEL.as_uri()}">{CPU_WHEEL.name}</a>\n')
    for project in pypi.iterdir():
        if project.is_dir() and project.name != "torch":
            (root / "simple" / project.name).symlink_to(project)
    (root / "files").symlink_to(pypi.parent / "files")  # the pages' links are relative: ../../files/NAME.whl
    return (root / "simple").as_uri()


def readme_lines() -> list[str]:
    """The commands between the cpu-install markers (inside the bash fence)."""
    text = (ROOT / "README.md").read_text()
    assert text.count(BEGIN) == 1 and text.count(END) == 1, f"README.md needs one {BEGIN} ... {END} block"
    block = text.split(BEGIN)[1].split(END)[0]
    return [ln.strip() for ln in block.splitlines() if ln.strip() and not ln.strip().startswith(("```", "#"))]


def local_args(line: str, indexes: dict[str, list[str]]) -> list[str]:
    """pip install's arguments for ``line`` with its indexes (none given: PyPI) swapped for the local stand-ins."""
    words = shlex.split(line)
    assert words[:2] == ["pip", "install"], f"the test resolves only `pip install ...` lines, not {line!r}"
    primary, extras, rest, it = PYPI, [], [], iter(words[2:])
    for word in it:
        option, _, value = word.partition("=")
        if option in ("-i", "--index-url"):
            primary = (value or next(it)).rstrip("/")
        elif option == "--extra-index-url":
            extras.append((value or next(it)).rstrip("/"))
        else:
            rest.append(word)
    unknown = [url for url in (primary, *extras) if url not in indexes]
    assert not unknown, f"{line!r}: no local stand-in for {unknown}"
    urls = [local for url in (primary, *extras) for local in indexes[url]]
    return ["--index-url", urls[0], *[a for u in urls[1:] for a in ("--extra-index-url", u)], *rest]


def resolve(line: str, python: str, indexes: dict[str, list[str]], report: Path) -> Outcome:
    """pip's plan for ``line`` on the machine ``python`` belongs to, offline and with no pip configuration."""
    proc = run_pip(python, ["--dry-run", "--report", str(report), *local_args(line, indexes)], cwd=ROOT)
    plan = json.loads(report.read_text())["install"] if proc.returncode == 0 else None
    return Outcome(line, plan, proc.stdout + proc.stderr)


def install_plan(site: Path, plan: list[dict]) -> None:
    """Each planned distribution installed by its metadata: what the next line's resolver reads."""
    for item in plan:
        md = item["metadata"]
        write_installed(site, md["name"], md["version"], requires=md.get("requires_dist", []),
                        requires_python=md.get("requires_python"), extras=md.get("provides_extra", []))


def cuda_builds(dists: list[tuple[str, str]]) -> list[str]:
    """The (name, version) pairs built for CUDA: nvidia-*/cuda-*/triton, or a torch that is not the CPU build."""
    return [f"{name}=={version}" for name, version in dists
            if CUDA_NAME.search(name.lower()) or (name.lower() == "torch" and not version.endswith("+cpu"))]


def planned(plan: list[dict]) -> list[tuple[str, str]]:
    return [(item["metadata"]["name"], item["metadata"]["version"]) for item in plan]


def attempted(log: str) -> list[tuple[str, str]]:
    """Where pip found no plan: the wheels it took before stopping, and the CUDA distributions it stopped for (the
    local mirrors lack one PyPI has)."""
    wheels = [unquote(f).split("-")[:2] for f in re.findall(r"^Processing \S*?([^/\s]+\.whl)", log, re.M)]
    missing = re.findall(r"No matching distribution found for ([A-Za-z0-9._-]+)", log)
    return [(n, v) for n, v in wheels] + [(n, "(none on the mirrors)") for n in missing if CUDA_NAME.search(n.lower())]


def cuda_wanted(outcome: Outcome) -> list[str]:
    """The CUDA distributions a line wants: those planned, else those pip took or stopped for."""
    return cuda_builds(planned(outcome.plan) if outcome.plan is not None else attempted(outcome.log))


@pytest.fixture(scope="module")
def readme_outcomes(indexes, tmp_path_factory) -> list[Outcome]:
    """Each README line resolved in order on one machine that gets each plan installed; stops at a line without
    a plan (the lines after it would resolve against a machine that cannot exist)."""
    root = tmp_path_factory.mktemp("machine")
    python, site = machine(root / "venv")
    outcomes = []
    for i, line in enumerate(readme_lines()):
        outcomes.append(resolve(line, python, indexes, root / f"report-{i}.json"))
        if outcomes[-1].plan is None:
            break
        install_plan(site, outcomes[-1].plan)
    return outcomes


def test_readme_block_is_the_two_line_cpu_install():
    lines = readme_lines()
    assert len(lines) >= 2 and any(TORCH_CPU_INDEX in ln and "torch==" in ln for ln in lines), lines
    assert lines[-1] == "pip install -e .", lines


def test_readme_lines_pull_no_cuda_wheel(readme_outcomes):
    cuda = {o.line: cuda_wanted(o) for o in readme_outcomes}
    assert not any(cuda.values()), cuda


def test_readme_lines_resolve_torch_cpu(readme_outcomes):
    unresolved = {o.line: o.log[-3000:] for o in readme_outcomes if o.plan is None}
    assert not unresolved, unresolved
    torches = [item["metadata"]["version"] for o in readme_outcomes for item in o.plan
               if item["metadata"]["name"].lower() == "torch"]
    assert torches and all(v.endswith("+cpu") for v in torches), torches


def test_second_line_keeps_the_cpu_torch(readme_outcomes):
    """The project's `pip install -e .` after the CPU torch: torch is satisfied, the project and numpy come."""
    planned = {item["metadata"]["name"].lower() for item in readme_outcomes[-1].plan or []}
    assert "torch" not in planned and "portable-spec" in planned, planned


def test_old_setup_line_pulls_cuda_wheels(indexes, tmp_path):
    """Negative control: the check above sees CUDA wheels. The old set-up resolves torch from PyPI: its CUDA build.
    The local mirrors lack one of that build's dependencies (cuda-bindings), so pip stops there instead of writing a
    plan; stopping for want of a CUDA distribution counts as wanting CUDA wheels."""
    python, _ = machine(tmp_path / "venv")
    outcome = resolve(OLD_LINE, python, indexes, tmp_path / "report.json")
    assert cuda_wanted(outcome), f"{OLD_LINE!r} resolved without CUDA wheels:\n{outcome.log}"
