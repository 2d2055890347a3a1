"""The ``vllm.general_plugins`` entry point: installs portable_spec's vLLM integrations in every vLLM process.

vLLM calls ``register()`` once per process (engine core, each worker) before the worker class is resolved. It is a
no-op unless our platform is selected (``VLLM_PLATFORM``) or ``PORTABLE_SPEC_DRAFT_GRAPH=full`` asks for our drafter
on a built-in platform. It decides from the environment only: resolving ``current_platform`` here would be too early.
"""

from __future__ import annotations

import logging

from portable_spec import envs as our_envs
from portable_spec.envs import DRAFT_GRAPH_ENV, PLATFORM_ENV, requested_platform
from portable_spec.vllm_adapter.plugin.platform_plugin import leaves_musa_to_vllm_musa, vllm_platform_qualname


logger = logging.getLogger("portable_spec.vllm_adapter")

INSTALLED: list[str] = []
"""What ``register()`` installed in this process, in order (read by tests and ``probe``)."""


def portable_spec_active() -> bool:
    """True when our platform is selected (not left to vllm-musa alone) or our drafter graphs are requested
    explicitly."""
    name = requested_platform()
    ours = (name is not None and (vllm_platform_qualname(name) or "").startswith("portable_spec.")
            and not leaves_musa_to_vllm_musa(name))
    # Compared, not validated: a bad value must not stop an engine on vLLM's own platform (our policy names it
    # where our drafter would run).
    return ours or our_envs.raw(DRAFT_GRAPH_ENV).lower() == "full"


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
    if requested_platform() is not None:
        declare_platform_env()
    if "general_plugin" not in INSTALLED:
        INSTALLED.append("general_plugin")
        logger.info("portable_spec general plugin registered (platform %s)", requested_platform() or "built-in")
        if requested_platform() is None:
            from portable_spec.vllm_adapter.platform.base import PORTABLE_WORKER

            # On a built-in platform our worker is not chosen for the user; vLLM's own flag chooses it.
            logger.info("portable_spec: %s=full on a built-in platform needs --worker-cls %s (or VLLM_PLATFORM=cuda)",
                        DRAFT_GRAPH_ENV, PORTABLE_WORKER)
