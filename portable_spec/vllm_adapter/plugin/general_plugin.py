"""The ``vllm.general_plugins`` entry point: installs portable_spec's vLLM integrations in every vLLM process.

vLLM calls ``register()`` once per process (engine core, each worker) before the worker class is resolved. It is a
no-op unless our platform is selected (the process's platform ``Selection``: ``VLLM_PLATFORM`` names one of our
classes, not left to vllm-musa alone) or ``PORTABLE_SPEC_DRAFT_GRAPH=full`` asks for our drafter on a built-in
platform. It decides from the environment only: resolving ``current_platform`` here would be too early.
"""

from __future__ import annotations

import logging

from portable_spec.envs import DRAFT_GRAPH_ENV, PLATFORM_ENV, requested_platform
from portable_spec.vllm_adapter.platform import qualnames, selection
from portable_spec.vllm_adapter.platform.drafter_request import asked_for_explicitly

logger = logging.getLogger("portable_spec.vllm_adapter")

INSTALLED: list[str] = []
"""What ``register()`` installed in this process, in order (read by tests and ``probe``)."""


def portable_spec_active() -> bool:
    """True when our platform is selected (not left to vllm-musa alone) or our drafter graphs are requested
    explicitly."""
    return selection.current().ours or asked_for_explicitly()


def declare_platform_env() -> None:
    """Make ``VLLM_PLATFORM`` a known vLLM variable, so ``envs.validate_environ`` (run in ``create_engine_config``,
    after this plugin) stops warning "Unknown vLLM environment variable" about the variable our platform plugin reads
    (and stops failing under ``fail_on_environ_validation``).

    Only adds the key, never replaces one vLLM defines; idempotent. Known variables also feed vLLM's compile-cache
    key (``envs.compile_factors``), which is right here: the platform changes the compiled code. The getter returns
    the normalised name, so ``CUDA`` and ``cuda`` share a cache entry. Called only while portable_spec is active:
    ``VLLM_PLATFORM=cpu`` (vLLM's own platform) gets nothing from us, this included.
    """
    import vllm.envs as envs

    envs.environment_variables.setdefault(PLATFORM_ENV, requested_platform)


def register() -> None:
    if not portable_spec_active():
        return
    platform = selection.current().name
    if platform is not None:
        declare_platform_env()
    if "general_plugin" not in INSTALLED:
        INSTALLED.append("general_plugin")
        logger.info("portable_spec general plugin registered (platform %s)", platform or "built-in")
        if platform is None:
            # A built-in platform runs no capture planner: our worker (vLLM's --worker-cls) keeps vLLM's drafter.
            logger.info("portable_spec: %s=full on a built-in platform: our drafter graphs need our platform's capture "
                        "plan: set VLLM_PLATFORM=cuda (with --worker-cls %s alone, vLLM's drafter runs)",
                        DRAFT_GRAPH_ENV, qualnames.PORTABLE_WORKER)
