"""The boot warm-ups build their Triton kernels in the folder the process had when our V1 runner was built
(``worker/triton_cache.py``), named in the variable even where it was unset (inductor sets it where unset), read
through Triton's own cache knob, and the engine serves in that folder after them: a kernel first launched while
serving finds the launcher the warm-ups built."""

from __future__ import annotations

import inspect
import os

import pytest
from autotuner_probe import tritons_default_folder_seen

from portable_spec.vllm_adapter.worker import v1_model_runner
from portable_spec.envs import TRITON_CACHE_ENV, triton_cache_dir
from portable_spec.vllm_adapter.worker.triton_cache import serve_in_start_folder
from portable_spec.vllm_adapter.worker.v1_model_runner import PortableV1ModelRunner

triton = pytest.importorskip("triton")


@pytest.fixture
def inductors_folder(monkeypatch, tmp_path):
    """TRITON_CACHE_DIR as a compiling boot leaves it: inductor's folder for the compiled model."""
    folder = str(tmp_path / "torch_aot_compile" / "hash" / "inductor_cache" / "triton" / "0")
    monkeypatch.setenv(TRITON_CACHE_ENV, folder)
    return folder


def test_unset_at_start_means_tritons_default_folder_named_from_then_on(monkeypatch, inductors_folder):
    default = tritons_default_folder_seen(monkeypatch)
    assert default != inductors_folder
    assert serve_in_start_folder(None) == triton_cache_dir() == str(triton.knobs.cache.dir) == default
    assert os.environ[TRITON_CACHE_ENV] == default  # not inductor's again: the engine serves here


def test_an_inductor_kernel_built_in_the_warm_up_moves_no_later_build(monkeypatch, tmp_path):
    """The restart's seven misses: a boot that compiled the model leaves TRITON_CACHE_DIR unset with our runner
    recording None; a warm-up kernel built after inductor built an autotuner of its own (it sets the variable where
    unset) went to inductor's folder, where a loading boot never looks. Every build after the runner named the folder,
    before and after inductor's autotuner, must resolve Triton's cache manager to Triton's default folder."""
    from autotuner_probe import build_an_inductor_autotuner
    from triton.runtime.cache import get_cache_manager

    monkeypatch.setenv("TRITON_HOME", str(tmp_path / "home"))  # Triton's default folder, here under tmp_path
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "hash" / "inductor_cache"))
    monkeypatch.delenv(TRITON_CACHE_ENV, raising=False)
    default = tritons_default_folder_seen(monkeypatch)
    assert default.startswith(str(tmp_path / "home"))
    serve_in_start_folder(None)
    folders = [get_cache_manager("aa" * 32).cache_dir]  # keys are hex digests
    build_an_inductor_autotuner()
    folders.append(get_cache_manager("bb" * 32).cache_dir)
    assert len(folders) == 2 and all(folder.startswith(default + os.sep) for folder in folders), folders
    assert os.environ[TRITON_CACHE_ENV] == default


def test_a_callers_folder_is_kept(monkeypatch, inductors_folder, tmp_path):
    callers = str(tmp_path / "callers")
    assert serve_in_start_folder(callers) == callers == str(triton.knobs.cache.dir) == os.environ[TRITON_CACHE_ENV]


def test_the_same_folder_changes_nothing(monkeypatch, inductors_folder):
    assert serve_in_start_folder(inductors_folder) == inductors_folder == os.environ[TRITON_CACHE_ENV]
    default = tritons_default_folder_seen(monkeypatch)
    monkeypatch.setenv(TRITON_CACHE_ENV, default)
    assert serve_in_start_folder(None) == default == os.environ[TRITON_CACHE_ENV]


def test_the_runner_reads_the_folder_before_vllm_builds_it_and_serves_in_it_after_its_warm_ups(
        monkeypatch, inductors_folder, tmp_path):
    """Our runner's ``capture_model`` (vLLM's own capture stubbed: no GPU here) runs its three warm-ups with the
    folder its ``__init__`` read, and serving after it keeps that folder: a launcher a warm-up built is found on disk
    at a later first launch of a sibling kernel (one C build in all); ``__init__`` reads the folder before vLLM's."""
    from launcher_probe import build_launcher, c_builds

    init = inspect.getsource(PortableV1ModelRunner.__init__)
    assert init.index("triton_cache_dir()") < init.index("super().__init__(")
    monkeypatch.setenv("TRITON_HOME", str(tmp_path / "home"))
    seen, builds = [], c_builds(monkeypatch)
    for name in ("warm_up_moe_sizes", "warm_up_kernels", "warm_up_structured_output"):
        monkeypatch.setattr(v1_model_runner, name, lambda runner, name=name: seen.append((name, triton_cache_dir())))
    monkeypatch.setattr(v1_model_runner, "warm_up_kernels",
                        lambda runner: seen.append(("warm_up_kernels", triton_cache_dir())) or build_launcher())
    monkeypatch.setattr(v1_model_runner.GPUModelRunner, "capture_model", lambda self: 7)
    runner = object.__new__(PortableV1ModelRunner)
    runner.triton_cache_at_start = None
    default = tritons_default_folder_seen(monkeypatch)
    assert runner.capture_model() == 7
    assert seen == [("warm_up_moe_sizes", default), ("warm_up_kernels", default),
                    ("warm_up_structured_output", default)]
    assert os.environ[TRITON_CACHE_ENV] == default != inductors_folder
    build_launcher()  # serving: the first launch of a kernel whose launcher source the warm-up built
    assert builds == [default]
