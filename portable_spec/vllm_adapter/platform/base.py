"""Hooks shared by our vLLM platform classes, kept in mixins so CPU tests can apply them to a CPU-importable base
(vLLM's ``CudaPlatform``/``RocmPlatform`` modules do not import without a GPU). The port behind them is
``portable_spec.ports.current``'s, the one per process."""

from __future__ import annotations

import logging
from typing import Any, ClassVar

from portable_spec.ports import platform_class
from portable_spec.ports.current import device_port
from portable_spec.vllm_adapter.platform.config_hook import apply_capture_plan, record_user_sizes
from portable_spec.vllm_adapter.platform.qualnames import PORTABLE_WORKER

logger = logging.getLogger("portable_spec.vllm_adapter")
_SAID: set[str] = set()
"""Ignored live-graph settings already logged in this process (vLLM re-runs the config hook on replaced configs)."""


class PortableSpecPlatformMixin:
    """Put first in the bases: ``class P(PortableSpecPlatformMixin, SomeVllmPlatform)``."""

    port_name: ClassVar[str]
    """Our registry name for this platform (``cuda``, ``rocm``, ``musa``)."""
    worker_cls: ClassVar[str] = PORTABLE_WORKER
    """Set as ``parallel_config.worker_cls`` when the user left it on "auto" (builds our V1 runner)."""

    @classmethod
    def live_graph_limit(cls) -> int | None:
        """The port's limit as the device's runtime applies it, read when vLLM's config is planned (so a limit set
        for one engine reaches its planner and, through the plan, its drafter). A setting the runtime ignores is
        logged once and the runtime's own value planned with: the engine runs where the runtime would."""
        limit, ignored = platform_class(cls.port_name).runtime_live_graph_limit()
        if ignored is not None and ignored not in _SAID:
            _SAID.add(ignored)
            logger.warning("portable_spec[%s]: %s; planning with %s", cls.label(), ignored, limit)
        return limit

    @classmethod
    def label(cls) -> str:
        """How log lines and results name this platform (a simulation says so: ``musa-sim``)."""
        return cls.port_name

    @classmethod
    def apply_config_platform_defaults(cls, vllm_config: Any) -> None:
        super().apply_config_platform_defaults(vllm_config)  # type: ignore[misc]
        record_user_sizes(vllm_config)

    @classmethod
    def check_and_update_config(cls, vllm_config: Any) -> None:
        if vllm_config.parallel_config.worker_cls == "auto":
            vllm_config.parallel_config.worker_cls = cls.worker_cls
        super().check_and_update_config(vllm_config)  # type: ignore[misc]
        apply_capture_plan(vllm_config, live_graph_limit=cls.live_graph_limit(), platform_name=cls.port_name)


class SharedPoolMixin:
    """vLLM's graph pool comes from our port, so vLLM's graphs and ours share ONE pool per device."""

    port_name: ClassVar[str]

    def get_global_graph_pool(self) -> Any:
        return device_port(self.port_name).graph_pool()
