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
