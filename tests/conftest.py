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
# The pinned platform sits in a dict, not in a module global: pytest reads `_mock_name` of every conftest global while
# collecting fixtures, and vLLM's Platform.__getattr__ answers an unknown name with a logged warning ("Current platform
# cpu does not have '_mock_name' attribute"). tests/test_quiet_lane.py holds that.
_session: dict[str, object] = {}


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get(PIN_ENV, "cpu-graph-test") == "native" or importlib.util.find_spec("vllm") is None:
        return
    import sys

    import vllm.platforms  # `import vllm` itself resolves a platform (UnspecifiedPlatform on a CPU host)

    resolved = vllm.platforms._current_platform
    bound = [name for name, mod in list(sys.modules.items())
             if name.startswith("vllm.") and name != "vllm.platforms"
             and resolved is not None and getattr(mod, "current_platform", None) is resolved]
    assert not bound, f"vLLM modules bound current_platform before conftest could pin it: {bound}"

    from portable_spec_harness.vllm_door.cpu_graph_platform import CpuGraphTestPlatform

    _session["platform"] = vllm.platforms._current_platform = CpuGraphTestPlatform()


@pytest.fixture(scope="session")
def vllm_platform():
    """The vLLM platform pinned for this session (skips where none was pinned, e.g. on the cuda lane)."""
    if "platform" not in _session:
        pytest.skip(f"no pinned vLLM test platform ({PIN_ENV}=native or vLLM missing)")
    return _session["platform"]
