"""The boot warm-ups build their Triton kernels in the folder the process had when our V1 runner was built
(``worker/triton_cache.py``), named in the variable even where it was unset (inductor sets it where unset), read
through Triton's own cache knob, and the folder is put back after."""

from __future__ import annotations

import inspect
import os

import pytest
from autotuner_probe import tritons_default_folder_seen

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


def test_unset_at_start_means_tritons_default_folder_named_then_inductors_again(monkeypatch, inductors_folder):
    default = tritons_default_folder_seen(monkeypatch)
    assert default != inductors_folder
    with triton_cache_as(None) as used:
        assert used == triton_cache_dir() == str(triton.knobs.cache.dir) == default
    assert os.environ[TRITON_CACHE_ENV] == inductors_folder == str(triton.knobs.cache.dir)


def test_an_inductor_kernel_built_in_the_warm_up_moves_no_later_build(monkeypatch, tmp_path):
    """The restart's seven misses: a boot that compiled the model leaves TRITON_CACHE_DIR unset with our runner
    recording None; a warm-up kernel built after inductor built an autotuner of its own (it sets the variable where
    unset) went to inductor's folder, where a loading boot never looks. Every build in the block, before and after
    inductor's autotuner, must resolve Triton's cache manager to Triton's default folder."""
    from autotuner_probe import build_an_inductor_autotuner
    from triton.runtime.cache import get_cache_manager

    monkeypatch.setenv("TRITON_HOME", str(tmp_path / "home"))  # Triton's default folder, here under tmp_path
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "hash" / "inductor_cache"))
    monkeypatch.delenv(TRITON_CACHE_ENV, raising=False)
    default = tritons_default_folder_seen(monkeypatch)
    assert default.startswith(str(tmp_path / "home"))
    folders = []
    with triton_cache_as(None):
        folders.append(get_cache_manager("aa" * 32).cache_dir)  # keys are hex digests
        build_an_inductor_autotuner()
        folders.append(get_cache_manager("bb" * 32).cache_dir)
    assert len(folders) == 2 and all(folder.startswith(default + os.sep) for folder in folders), folders
    assert TRITON_CACHE_ENV not in os.environ  # put back: unset, as the process had it


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
    assert os.environ[TRITON_CACHE_ENV] == inductors_folder
    default = tritons_default_folder_seen(monkeypatch)
    monkeypatch.setenv(TRITON_CACHE_ENV, default)
    with triton_cache_as(None) as used:
        assert used == default == os.environ[TRITON_CACHE_ENV]
    assert os.environ[TRITON_CACHE_ENV] == default


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
    default = tritons_default_folder_seen(monkeypatch)
    assert runner.capture_model() == 7
    assert seen == [("warm_up_moe_sizes", default), ("warm_up_kernels", default),
                    ("warm_up_structured_output", default)]
    assert os.environ[TRITON_CACHE_ENV] == inductors_folder

