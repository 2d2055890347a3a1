"""Test-session set-up.

vLLM modules bind ``current_platform`` when they are imported, so the platform must be pinned before any test module
imports vllm (``import vllm`` itself resolves one, but binds it nowhere else; the hook checks that): ``pytest_configure`` pins ``CpuGraphTestPlatform`` (a CPU-importable vLLM platform carrying our hooks,
static graph mode on). The cuda lane sets ``PORTABLE_SPEC_TEST_VLLM_PLATFORM=native`` to let vLLM (and
``VLLM_PLATFORM``) resolve the real platform instead. Per-platform behaviour (e.g. the MUSA class) is tested in
subprocesses, each with its own pinned platform.
"""

from __future__ import annotations

import importlib.util
import os

import pytest

PIN_ENV = "PORTABLE_SPEC_TEST_VLLM_PLATFORM"
_pinned = None


def pytest_configure(config: pytest.Config) -> None:
    global _pinned
    if os.environ.get(PIN_ENV, "cpu-graph-test") == "native" or importlib.util.find_spec("vllm") is None:
        return
    import sys

    import vllm.platforms  # `import vllm` itself resolves a platform (UnspecifiedPlatform on a CPU host)

    resolved = vllm.platforms._current_platform
    bound = [name for name, mod in list(sys.modules.items())
             if name.startswith("vllm.") and name != "vllm.platforms"
             and resolved is not None and getattr(mod, "current_platform", None) is resolved]
    assert not bound, f"vLLM modules bound current_platform before conftest could pin it: {bound}"

    from portable_spec.vllm_adapter.tools.testing_platform import CpuGraphTestPlatform

    _pinned = CpuGraphTestPlatform()
    vllm.platforms._current_platform = _pinned


@pytest.fixture(scope="session")
def vllm_platform():
    """The vLLM platform pinned for this session (skips where none was pinned, e.g. on the cuda lane)."""
    if _pinned is None:
        pytest.skip(f"no pinned vLLM test platform ({PIN_ENV}=native or vLLM missing)")
    return _pinned
