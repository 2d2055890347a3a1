"""The boot warm-ups build their Triton kernels in the folder the process had when our V1 runner was built
(``worker/triton_cache.py``), read through Triton's own cache knob, and the folder is put back after."""

from __future__ import annotations

import inspect
import os

import pytest

from portable_spec.vllm_adapter.worker import v1_model_runner
from portable_spec.envs import TRITON_CACHE_ENV, triton_cache_dir
from portable_spec.vllm_adapter.worker.triton_cache import triton_cache_as
from portable_spec.vllm_adapter.worker.v1_model_runner import PortableV1ModelRunner

triton = pytest.importorskip("triton")


@pytest.fixture
def inductors_folder(monkeypatch, tmp_path):
    """TRITON_CACHE_DIR as a compiling boot leaves it: inductor's folder for the compiled model."""
    folder = str(tmp_path / "torch_aot_compile" / "hash" / "inductor_cache" / "triton" / "0")
    monkeypatch.setenv(TRITON_CACHE_ENV, folder)
    return folder


def tritons_default(monkeypatch) -> str:
    with monkeypatch.context() as m:
        m.delenv(TRITON_CACHE_ENV, raising=False)
        return str(triton.knobs.cache.dir)


def test_unset_at_start_means_tritons_default_folder_then_inductors_again(monkeypatch, inductors_folder):
    default = tritons_default(monkeypatch)
    assert default != inductors_folder
    with triton_cache_as(None):
        assert triton_cache_dir() is None and str(triton.knobs.cache.dir) == default
    assert os.environ[TRITON_CACHE_ENV] == inductors_folder == str(triton.knobs.cache.dir)


def test_a_callers_folder_is_kept_and_put_back_after_a_raise(monkeypatch, inductors_folder, tmp_path):
    callers = str(tmp_path / "callers")
    with pytest.raises(RuntimeError, match="warm-up broke"):
        with triton_cache_as(callers):
            assert str(triton.knobs.cache.dir) == callers
            raise RuntimeError("warm-up broke")
    assert os.environ[TRITON_CACHE_ENV] == inductors_folder


def test_the_same_folder_changes_nothing(monkeypatch, inductors_folder):
    with triton_cache_as(inductors_folder) as used:
        assert used == inductors_folder == os.environ[TRITON_CACHE_ENV]
    monkeypatch.delenv(TRITON_CACHE_ENV)
    with triton_cache_as(None):
        assert TRITON_CACHE_ENV not in os.environ
    assert TRITON_CACHE_ENV not in os.environ


def test_the_runner_reads_the_folder_before_vllm_builds_it_and_warms_up_inside_it(monkeypatch, inductors_folder):
    """Our runner's ``capture_model`` (vLLM's own capture stubbed: no GPU here) runs its three warm-ups with the
    folder its ``__init__`` read, and leaves inductor's folder set after; ``__init__`` reads it before vLLM's."""
    init = inspect.getsource(PortableV1ModelRunner.__init__)
    assert init.index("triton_cache_dir()") < init.index("super().__init__(")
    seen = []
    for name in ("warm_up_moe_sizes", "warm_up_kernels", "warm_up_structured_output"):
        monkeypatch.setattr(v1_model_runner, name, lambda runner, name=name: seen.append((name, triton_cache_dir())))
    monkeypatch.setattr(v1_model_runner.GPUModelRunner, "capture_model", lambda self: 7)
    runner = object.__new__(PortableV1ModelRunner)
    runner.triton_cache_at_start = None
    assert runner.capture_model() == 7
    assert seen == [("warm_up_moe_sizes", None), ("warm_up_kernels", None), ("warm_up_structured_output", None)]
    assert os.environ[TRITON_CACHE_ENV] == inductors_folder

