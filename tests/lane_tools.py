"""What a test does when a tool the cpu lane provides is missing: the Triton interpreter (``TRITON_INTERPRET=1`` and
an importable ``triton``) or the Triton 3.2 Python (``PORTABLE_SPEC_TRITON32_PYTHON``).

Under the lane (``PORTABLE_SPEC_LANE`` set by ``ci/lanes/cpu.sh``) the test fails: a lane that skipped it would no
longer check what it exists to check. Elsewhere (a developer's pytest) it skips, saying what is missing. Nothing here
depends on where the clone sits."""

from __future__ import annotations

import importlib.util
import os

import pytest

LANE_ENV = "PORTABLE_SPEC_LANE"
TRITON32_ENV = "PORTABLE_SPEC_TRITON32_PYTHON"


def in_lane() -> bool:
    return bool(os.environ.get(LANE_ENV))


def missing(why: str) -> None:
    """Fail under the lane, skip elsewhere."""
    (pytest.fail if in_lane() else pytest.skip)(f"{why} (the cpu lane provides it)")


def require_interpreter() -> None:
    """Triton's interpreter, which runs Triton kernels on a CPU."""
    if importlib.util.find_spec("triton") is None:
        missing("needs triton installed")
    if os.environ.get("TRITON_INTERPRET") != "1":
        missing("needs TRITON_INTERPRET=1 to run Triton kernels on a CPU")


def require_triton32_python() -> str:
    """The Python of the triton==3.2.0 virtualenv (``ci/lanes/triton32_venv.sh``)."""
    python = os.environ.get(TRITON32_ENV)
    if not python or not os.path.exists(python):
        missing(f"needs {TRITON32_ENV} naming the triton==3.2.0 virtualenv's Python (got {python!r})")
    return python


def import_triton():
    """``triton``, imported; a missing one fails under the lane (at collection, where a module imports it) and skips
    the module elsewhere."""
    if in_lane():
        import triton

        return triton
    return pytest.importorskip("triton")


def triton32_python_for_this_vllm() -> str:
    """The Python of a triton==3.2.0 virtualenv that sees THIS interpreter's vLLM: ``$PORTABLE_SPEC_TRITON32_PYTHON``
    where it does (the lane's, built from vLLM 0.26.0's virtualenv), else the one ``ci/lanes/triton32_venv.sh`` builds
    (or reuses) for this interpreter, as the lane builds 0.26.0's. None to be had fails under the lane."""
    import subprocess
    import sys
    from importlib.metadata import version

    here = version("vllm")
    probe = "from importlib.metadata import version; print(version('vllm'))"
    python = os.environ.get(TRITON32_ENV)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    if python and os.path.exists(python):
        seen = subprocess.run([python, "-c", probe], capture_output=True, text=True, env=env, timeout=120)
        if seen.returncode == 0 and seen.stdout.strip() == here:
            return python
    script = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "ci", "lanes",
                          "triton32_venv.sh")
    built = subprocess.run(["bash", script, sys.executable], capture_output=True, text=True, env=env, timeout=900)
    if built.returncode != 0 or not built.stdout.strip():
        missing(f"no triton==3.2.0 virtualenv for vLLM {here}: {script} {sys.executable} failed "
                f"({(built.stderr.strip().splitlines() or ['no output'])[-1]})")
    return built.stdout.strip().splitlines()[-1]

