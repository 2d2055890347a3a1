"""Our vLLM worker: binds our platform's kernel substitutes, then builds our V1 model runner (FULL drafter graphs) in
place of vLLM's, for the V1 runner only.

vLLM 0.26.0's (and 0.28.0's) ``Worker.init_device`` imports ``GPUModelRunner`` from ``vllm.v1.worker.gpu_model_runner`` inside the
method, so swapping that module attribute for the duration of the one call reaches exactly that construction and
nothing else. Model Runner V2 (``vllm.v1.worker.gpu``) keeps its runner (it already has FULL draft graphs, except for
the standalone draft model, whose speculator class ``worker/mrv2_speculator.py`` swaps the same way); its boot
warm-up gains our sampled rounds (``compile_or_warm_up_model``, ``mrv2_warmup``). Substitutes
(``portable_spec.kernels``: MUSA's Triton-3.2 rewrites, CUDA's unspecialized spec-decode kernels) are bound before
any model or drafter is built, so every kernel compiles once, as bound.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import vllm.v1.worker.gpu_model_runner as v1_runner_module
import vllm.v1.worker.gpu_worker as vllm_worker_module
from vllm.platforms import current_platform
from vllm.v1.worker.gpu_worker import Worker

from portable_spec.envs import triton_cache_dir
from portable_spec.errors import PortableSpecError
from portable_spec.kernels import Substitution, bound, install_substitutions, substitutions_for
from portable_spec.vllm_adapter.spec_decode.policy import draft_graph_mode
from portable_spec.logs import share_vllm_log_handlers
from portable_spec.ports.current import platform_label, port_name_of
from portable_spec.vllm_adapter.patch import version_gate
from portable_spec.vllm_adapter.patch.overrides import overridden

logger = logging.getLogger("portable_spec.vllm_adapter")


def log_bound_substitutes(platform_name: str, label: str) -> list[str]:
    """One line per kernel substitute bound for ``platform_name``; returns their names."""
    now = bound()
    names = []
    for sub in substitutions_for(platform_name):
        sites = [target for target, entry in now.items() if entry.name == sub.name]  # entry: resolved for this vLLM
        if sites:
            names.append(sub.name)
            logger.info("portable_spec[%s]: kernel substitute %s bound at %d vLLM site(s) (%s)", label, sub.name,
                        len(sites), now[sites[0]].describe_replacement())
    return names


def engine_substitutes(port: str, label: str, vllm_config: Any) -> tuple[Substitution, ...]:
    """The port's substitutes this engine binds: each that its configuration declines (``Substitution.kept_when``)
    is left out with one line saying why."""
    kept = []
    for sub in substitutions_for(port):
        why = sub.declines(vllm_config)
        if why is None:
            kept.append(sub)
        else:
            logger.info("portable_spec[%s]: kernel substitute %s not bound, vLLM's kept (%s)", label, sub.name, why)
    return tuple(kept)


def bind_kernel_substitutes(vllm_config: Any = None) -> list[str]:
    """Install and log the substitutes of the port this process's platform uses; returns their names. Where the
    installed vLLM has no substitutes of that port (``version_gate``), one line says why and none are bound; an
    entry the engine's configuration declines (``engine_substitutes``) is not bound. On a platform stack that
    patches kernels itself (``substitutes_left_to_stack``, vllm-musa) see ``bind_over_stack``."""
    port, label = port_name_of(current_platform), platform_label(current_platform)
    gated = f"kernel_substitutes_{port}"
    if gated in version_gate.FEATURES and version_gate.say_unsupported(gated, logger):
        return []
    subs = engine_substitutes(port, label, vllm_config)
    # Read on the class: vLLM's Platform.__getattr__ logs a warning for a name an instance lacks.
    left = getattr(type(current_platform), "substitutes_left_to_stack", None)
    if left:
        return bind_over_stack(port, label, type(current_platform).stack, left, subs)
    install_substitutions(port, subs, pick=version_gate.pick)
    return log_bound_substitutes(port, label)


def bind_over_stack(port: str, label: str, stack: str, left: Mapping[str, str],
                    subs: tuple[Substitution, ...]) -> list[str]:
    """Our substitutes on a stack that patches kernels itself: each one whose kernel the stack patches is left to it
    (one line), every other is bound on its own. One that cannot bind on the stack's vLLM (a kernel moved, or a
    derived rewrite finds the stack's source changed) logs one warning and leaves the stack's kernel running: on a
    stack that brings its own kernels, a substitute is an addition, never a reason to stop an engine."""
    for sub in subs:
        if sub.name in left:
            logger.info("portable_spec[%s]: kernel substitute %s left to %s (%s)", label, sub.name, stack,
                        left[sub.name])
            continue
        try:
            install_substitutions(port, (sub,), pick=version_gate.pick)
        except PortableSpecError as exc:
            logger.warning("portable_spec[%s]: kernel substitute %s not bound, %s's kernel stays (%s)", label,
                           sub.name, stack, exc)
    return log_bound_substitutes(port, label)


class PortableWorker(Worker):
    def init_device(self) -> None:
        share_vllm_log_handlers()  # the worker process logs our capture lines: put them where vLLM's go
        bind_kernel_substitutes(self.vllm_config)
        # On a vLLM without our V1 drafter (version_gate) one line says so wherever a drafter is configured, the
        # runner vLLM picks (Model Runner V2 for every model from 0.29) or V1 alike.
        spec = self.vllm_config.speculative_config is not None
        if ((spec and version_gate.say_unsupported("v1_full_drafter", logger))
                or self.vllm_config.use_v2_model_runner or draft_graph_mode(self.vllm_config) != "full"):
            # Under Model Runner V2 its standalone draft model gets our decode graphs (worker/mrv2_speculator.py says
            # where and why); nothing is swapped for any other runner or method. Before vLLM builds the runner (the
            # model compiles after): the Triton folder the warm-up builds in (worker/triton_cache.py).
            from portable_spec.vllm_adapter.worker import mrv2_speculator

            self.triton_cache_at_start = triton_cache_dir()

            with mrv2_speculator.installed(self.vllm_config):
                super().init_device()
            return
        from portable_spec.vllm_adapter.worker.v1_model_runner import PortableV1ModelRunner

        with overridden(v1_runner_module, "GPUModelRunner", PortableV1ModelRunner):
            super().init_device()

    def compile_or_warm_up_model(self) -> Any:
        # Under Model Runner V2 our sampled rounds run right after MRV2's own warm-up, inside this one call: before
        # vLLM activates its JIT monitor (worker/mrv2_warmup.py says what they cover and why).
        if not self.vllm_config.use_v2_model_runner:
            return super().compile_or_warm_up_model()
        from portable_spec.vllm_adapter.worker.mrv2_warmup import with_sampled_rounds

        warm_up = with_sampled_rounds(vllm_worker_module.warmup_kernels, self.triton_cache_at_start)
        with overridden(vllm_worker_module, "warmup_kernels", warm_up):
            return super().compile_or_warm_up_model()
