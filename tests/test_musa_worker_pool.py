"""MusaWorker skips vLLM's sleep-mode memory pool unless sleep mode is on (vLLM 0.26.0 asks for it on every
non-CUDA-alike platform and MUSA has none: found by the musa-sim engine lane on the H100)."""

from __future__ import annotations

import contextlib
import inspect
from types import SimpleNamespace

from vllm.v1.worker.gpu_worker import Worker

from portable_spec.vllm_adapter.worker.musa_worker import MusaWorker


def test_vllm_worker_still_has_the_pool_hook():
    assert list(inspect.signature(Worker._maybe_get_memory_pool_context).parameters) == ["self", "tag"]
    assert "get_mem_allocator_instance" in inspect.getsource(Worker._maybe_get_memory_pool_context)


def test_no_pool_without_sleep_mode():
    worker = SimpleNamespace(vllm_config=SimpleNamespace(model_config=SimpleNamespace(enable_sleep_mode=False)))
    assert isinstance(MusaWorker._maybe_get_memory_pool_context(worker, "weights"), contextlib.nullcontext)
