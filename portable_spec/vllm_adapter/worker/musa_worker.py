"""A vLLM worker that accepts ``device_type == "musa"``.

vLLM 0.26.0's ``gpu_worker.Worker.init_device`` runs its device set-up only when ``device_type == "cuda"`` and
raises "Unsupported device type" otherwise. Under torchada the CUDA branch is exactly what MUSA needs
(``torch.device("cuda:N")`` and ``torch.cuda`` resolve to MUSA), so the worker presents the device type as "cuda"
for the duration of that one call and restores it afterwards, also when the call raises. Everything else, including
our V1 runner with FULL drafter graphs, comes from ``PortableWorker``.

It logs what it set up, one line each (the evidence a MUSA or musa-sim engine log must show): the worker, the
platform class and its live-graph budget, and every kernel substitute it bound.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any, Iterator

from vllm.platforms import current_platform

from portable_spec.vllm_adapter.platform import plan_state
from portable_spec.logs import share_vllm_log_handlers
from portable_spec.ports.current import platform_label
from portable_spec.vllm_adapter.worker.gpu_worker import PortableWorker

logger = logging.getLogger("portable_spec.vllm_adapter")


@contextlib.contextmanager
def device_type_presented_as(device_config: Any, device_type: str) -> Iterator[None]:
    """Scoped, reversible override of ``device_config.device_type``."""
    original = device_config.device_type
    device_config.device_type = device_type
    try:
        yield
    finally:
        device_config.device_type = original


class MusaWorker(PortableWorker):
    def _maybe_get_memory_pool_context(self, tag: str) -> contextlib.AbstractContextManager:
        """No sleep-mode memory pool unless sleep mode is on. vLLM 0.26.0 asks for its sleep-mode allocator on every
        platform that is not CUDA-alike, XPU or CPU, sleep mode on or off, and MUSA has none: ``load_model`` raised
        "Sleep mode allocator is not available" (found by the musa-sim engine lane). CUDA skips the pool the same
        way when sleep mode is off."""
        if not self.vllm_config.model_config.enable_sleep_mode:
            return contextlib.nullcontext()
        return super()._maybe_get_memory_pool_context(tag)

    def init_device(self) -> None:
        share_vllm_log_handlers()
        label = platform_label(current_platform)
        state = plan_state.read(self.vllm_config)
        # Our drafter's plan on the V1 runner; what Model Runner V2 was left (mrv2_sizes) under MRV2.
        if state.plan is None and state.mrv2:
            what, limit, graphs, sizes = ("Model Runner V2", state.mrv2.get("live_graph_limit"),
                                          state.mrv2.get("live_graphs"), state.mrv2.get("sizes"))
        else:
            plan = state.plan
            what, limit, graphs, sizes = ("capture plan", plan and plan.live_graph_limit, plan and plan.live_graphs,
                                          plan and list(plan.target_sizes))
        platform = type(current_platform)
        logger.info("portable_spec[%s]: MusaWorker on %s.%s, live-graph limit %s (%s: %s live graphs, "
                    "target sizes %s%s)", label, platform.__module__, platform.__qualname__, limit, what, graphs,
                    sizes, "".join(f"; {w}" for w in state.warnings))
        # MUSA's Triton 3.2 rejects some of vLLM's kernels: PortableWorker binds our substitutes before the drafter
        # is built.
        with device_type_presented_as(self.device_config, "cuda"):
            super().init_device()
