"""The boot warm-ups build their Triton kernels in the folder the process had when our V1 runner was built
(``worker/triton_cache.py``), read through Triton's own cache knob, and the folder is put back after; a model inductor
compiles gets inductor's ``ptxas`` from the runner's start, so compiling and loading boots key kernels alike."""

from __future__ import annotations

import inspect
import os
from pathlib import Path

import pytest
from fake_toolchain import inductor_sees_torch_folder

from portable_spec.vllm_adapter.worker import v1_model_runner
from portable_spec.envs import TRITON_CACHE_ENV, TRITON_PTXAS_ENV, triton_cache_dir, triton_ptxas_path
from portable_spec.vllm_adapter.worker.triton_cache import pin_inductors_ptxas, triton_cache_as
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


@pytest.fixture
def torchs_ptxas(monkeypatch, tmp_path):
    """Inductor's ``_set_triton_ptxas_path`` looking at a torch folder that ships a ``ptxas`` (a CUDA wheel's), its
    once-per-process cache cleared before and after; TRITON_PTXAS_PATH unset. Yields the torch folder."""
    from torch._inductor.runtime import compile_tasks

    torch_dir = inductor_sees_torch_folder(monkeypatch, tmp_path, "13.0")
    compile_tasks._set_triton_ptxas_path.cache_clear()
    yield torch_dir
    compile_tasks._set_triton_ptxas_path.cache_clear()


def compilation(mode_name: str, backend: str = ""):
    from vllm.config import CompilationConfig, CompilationMode

    return CompilationConfig(mode=getattr(CompilationMode, mode_name), backend=backend)


@pytest.mark.parametrize("backend", ["", "inductor"])
def test_a_model_inductor_compiles_gets_torchs_ptxas_when_the_runner_is_built(torchs_ptxas, backend):
    assert triton_ptxas_path() is None
    pinned = pin_inductors_ptxas(compilation("VLLM_COMPILE", backend))
    assert pinned == os.environ[TRITON_PTXAS_ENV] and Path(pinned).is_relative_to(torchs_ptxas)
    assert triton.knobs.nvidia.ptxas.path == pinned  # what Triton's cache key reads the version of
    assert triton.knobs.nvidia.ptxas.version == "13.0"


@pytest.mark.parametrize("mode_name, backend", [("NONE", ""), ("VLLM_COMPILE", "eager")])
def test_an_eager_model_keeps_tritons_own_ptxas(torchs_ptxas, mode_name, backend):
    assert pin_inductors_ptxas(compilation(mode_name, backend)) is None
    assert TRITON_PTXAS_ENV not in os.environ


def test_a_callers_ptxas_is_kept(torchs_ptxas, monkeypatch, tmp_path):
    monkeypatch.setenv(TRITON_PTXAS_ENV, str(tmp_path / "callers_ptxas"))
    assert pin_inductors_ptxas(compilation("VLLM_COMPILE")) == str(tmp_path / "callers_ptxas")


def test_the_runner_pins_ptxas_once_vllm_built_it_before_anything_compiles():
    """``GPUModelRunner.__init__`` compiles nothing (the model loads and compiles in ``load_model``), so right after it
    is before any Triton or inductor build."""
    init = inspect.getsource(PortableV1ModelRunner.__init__)
    assert init.index("super().__init__(") < init.index("pin_inductors_ptxas(self.compilation_config)")
    assert "load_model" not in init and "capture_model" not in init

