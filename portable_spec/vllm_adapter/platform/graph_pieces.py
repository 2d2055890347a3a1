"""PIECEWISE graphs one capture size costs a model, the one count the V1 runner's budget (``config_hook``) and Model
Runner V2's (``mrv2_sizes``) both use.

vLLM splits a compiled model at its attention layers, so a size costs layers + 1 pieces; a model vLLM does not compile
costs none, whatever the cudagraph mode: its forward runs eagerly between the graphs. vLLM compiles a model when a
class of its architecture's module carries ``@support_torch_compile`` (which puts ``TorchCompileWithNoGuardsWrapper``
among the class's bases). Most drafts do (EAGLE's, EAGLE-3's, DFlash's, DeepSeek's MTP, any separate draft model);
MiMo's MTP head does not, and counting pieces for it overcounted a musa-sim engine by 18 graphs on the GPU
(``tests/test_graphs_per_target_size.py`` holds the count to those rows).

Where the architecture cannot be resolved the model counts as compiled: under a live-graph cap an overcount prunes a
size too many, an undercount lets the engine pass the cap.
"""

from __future__ import annotations

import functools
import inspect
import logging
import sys
from typing import Any

logger = logging.getLogger("portable_spec.vllm_adapter")


def pieces(model_config: Any, parallel_config: Any) -> int:
    """Layers + 1: the PIECEWISE graphs one size costs a compiled model; 0 for a config without a layer count (the
    callers then count as the target does)."""
    try:
        return int(model_config.get_num_layers(parallel_config)) + 1
    except Exception:  # a draft config without a layer count
        return 0


def draft_pieces(draft_config: Any, parallel_config: Any, *, fallback: int) -> int:
    """The PIECEWISE graphs one size costs the draft model: none when vLLM does not compile it, else its layers + 1,
    or ``fallback`` (the target's pieces) when its config has no layer count."""
    if not compiled_by_vllm(draft_config):
        return 0
    return pieces(draft_config, parallel_config) or fallback


def compiled_by_vllm(model_config: Any) -> bool:
    """Whether vLLM compiles the model this config loads (see the module's docstring); True when it cannot tell."""
    architectures = tuple(getattr(model_config, "architectures", None) or ())
    if not architectures:
        return True
    try:
        from vllm.model_executor.models.registry import ModelRegistry

        model_class, _ = ModelRegistry.resolve_model_cls(list(architectures), model_config)
    except Exception as exc:  # an architecture the registry cannot load here: count it as compiled
        logger.debug("portable_spec: %s not resolved (%s): its pieces are counted", architectures, exc)
        return True
    return _module_compiles(model_class.__module__)


@functools.lru_cache(maxsize=None)
def _module_compiles(module_name: str) -> bool:
    """Whether a class defined in this module is compiled by vLLM (``@support_torch_compile``)."""
    from vllm.compilation.wrapper import TorchCompileWithNoGuardsWrapper

    module = sys.modules.get(module_name)
    if module is None:
        return True
    return any(inspect.isclass(obj) and obj.__module__ == module_name and issubclass(obj, TorchCompileWithNoGuardsWrapper)
               for obj in vars(module).values())
