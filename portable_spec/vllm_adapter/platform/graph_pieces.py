"""PIECEWISE graphs one capture size costs a model, the one count the V1 runner's budget (``config_hook``) and Model
Runner V2's (``mrv2_sizes``) both use.

vLLM splits a compiled model at its attention layers, so a size costs layers + 1 pieces; a model vLLM does not compile
costs none, whatever the cudagraph mode: its forward runs eagerly between the graphs. vLLM compiles a model when a
class of its architecture's module carries ``@support_torch_compile`` (which puts ``TorchCompileWithNoGuardsWrapper``
among the class's bases). Most drafts do (EAGLE's, EAGLE-3's, DFlash's, DeepSeek's MTP, any separate draft model);
MiMo's MTP head does not, and counting pieces for it overcounted a musa-sim engine by 18 graphs on the GPU
(``tests/test_graphs_per_target_size.py`` holds the count to those rows).

The config hook runs in the front-end process, where vLLM itself keeps model modules unimported (it inspects them in
a subprocess, so that no import initialises the device before the engine's processes start). So a module not yet
imported is read, not imported: its syntax tree's class decorators (``tests/test_graph_pieces.py`` holds that reading
to the imported classes of every module vLLM registers). Where the architecture or its module cannot be found the
model counts as compiled: under a live-graph cap an overcount prunes a size too many, an undercount lets the engine
pass the cap.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import inspect
import logging
import sys
from pathlib import Path
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
    module = model_module(tuple(getattr(model_config, "architectures", None) or ()))
    return True if module is None else module_compiles(module)


def model_module(architectures: tuple[str, ...]) -> str | None:
    """The module vLLM's registry loads the first registered of ``architectures`` from (None: none registered)."""
    try:
        from vllm.model_executor.models.registry import ModelRegistry

        entry = next((ModelRegistry.models[a] for a in architectures if a in ModelRegistry.models), None)
    except Exception as exc:  # a registry without the mapping: count as compiled
        logger.debug("portable_spec: no model registry to read (%s): pieces counted", exc)
        return None
    if entry is None:
        return None
    model_class = getattr(entry, "model_cls", None)  # registered as a class (out of tree) or lazily, by module
    return model_class.__module__ if model_class is not None else getattr(entry, "module_name", None)


@functools.lru_cache(maxsize=None)
def module_compiles(module_name: str) -> bool:
    """Whether a class of this module is compiled by vLLM: its classes if imported, else its source's decorators."""
    module = sys.modules.get(module_name)
    if module is not None:
        return classes_compile(module)
    compiles = source_compiles(module_name)
    return True if compiles is None else compiles


def classes_compile(module: Any) -> bool:
    """An imported module: does a class defined in it have vLLM's compile wrapper among its bases?"""
    from vllm.compilation.wrapper import TorchCompileWithNoGuardsWrapper

    return any(inspect.isclass(obj) and obj.__module__ == module.__name__
               and issubclass(obj, TorchCompileWithNoGuardsWrapper) for obj in vars(module).values())


def source_compiles(module_name: str) -> bool | None:
    """A module not imported: does a class in its source carry ``@support_torch_compile``, or derive from a class that
    does (here or in the vLLM module it was imported from)? None: no source found."""
    classes = compiled_classes(module_name)
    return None if classes is None else any(classes.values())


@functools.lru_cache(maxsize=None)
def compiled_classes(module_name: str) -> dict[str, bool] | None:
    """Each top-level class of a module's source: is it compiled (decorated, or a subclass of a compiled class)?"""
    try:
        spec = importlib.util.find_spec(module_name)
        tree = ast.parse(Path(spec.origin).read_text())
    except Exception as exc:  # no source to read
        logger.debug("portable_spec: %s not read (%s): pieces counted", module_name, exc)
        return None
    package = module_name.rpartition(".")[0]
    imported = {alias.asname or alias.name: (source_module(node, package), alias.name)
                for node in tree.body if isinstance(node, ast.ImportFrom) for alias in node.names}
    classes: dict[str, bool] = {}

    def base_compiled(base: ast.expr) -> bool:
        if not isinstance(base, ast.Name):
            return False
        if base.id in classes:
            return classes[base.id]
        source, name = imported.get(base.id, (None, None))
        if not source or not source.startswith("vllm."):  # torch's nn.Module and the like
            return False
        if source in _READING:  # an import cycle, not followed: counted as compiled, the safe side
            return True
        found = compiled_classes(source)
        return bool(found and found.get(name))

    _READING.add(module_name)
    try:
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                classes[node.name] = (any(decorator_name(d) == COMPILE_DECORATOR for d in node.decorator_list)
                                      or any(base_compiled(b) for b in node.bases))
    finally:
        _READING.discard(module_name)
    return classes


def source_module(node: ast.ImportFrom, package: str) -> str | None:
    """The absolute module a ``from ... import`` names (relative ones resolved against ``package``)."""
    if not node.level:
        return node.module
    return importlib.util.resolve_name("." * node.level + (node.module or ""), package)


_READING: set[str] = set()
"""The modules whose source is being read (a base imported from one of them is a cycle, not followed)."""


COMPILE_DECORATOR = "support_torch_compile"


def decorator_name(node: ast.expr) -> str | None:
    """``@name``, ``@name(...)``, ``@module.name`` and ``@module.name(...)`` all name ``name``."""
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else None
