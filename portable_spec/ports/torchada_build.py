"""What this host's torchada is (its version, its live-graph cap default), without importing it.

Importing torchada is not free of effects: it imports torch, on a MUSA host torch_musa and its patches, and it sets
``SGLANG_MOE_CONFIG_DIR`` and ``VLLM_TUNED_CONFIG_FOLDER`` (``torchada/__init__.py`` calls
``set_default_moe_config_dir``, 0.1.103). So the version comes from the distribution's metadata and the cap's default
from torchada's own source: ``_DEFAULT_CAP`` in ``torchada/_graph_rotation.py``, the value its ``_read_cap`` and
``_resolve_cap`` fall back to, read as a literal from the file (found with ``find_spec("torchada")``, which locates the
package without running it). None where torchada is absent, or its file no longer holds that literal.
"""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import importlib.util
import os

DISTRIBUTION = "torchada"
CAP_SOURCE = "torchada/_graph_rotation.py"
CAP_CONSTANT = "_DEFAULT_CAP"


def installed_version() -> str | None:
    """torchada's version from its distribution metadata; None where it is not installed."""
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return None


def cap_source_path() -> str | None:
    """The installed ``torchada/_graph_rotation.py``, found without importing torchada; None where absent."""
    try:
        spec = importlib.util.find_spec("torchada")
    except (ImportError, ValueError):
        return None
    for location in list(spec.submodule_search_locations or []) if spec is not None else []:
        path = os.path.join(location, os.path.basename(CAP_SOURCE))
        if os.path.isfile(path):
            return path
    return None


@functools.lru_cache(maxsize=8)
def _default_cap_in(path: str) -> int | None:
    try:
        tree = ast.parse(open(path, encoding="utf-8").read(), path)
    except (OSError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == CAP_CONSTANT for t in node.targets)
                and isinstance(node.value, ast.Constant) and type(node.value.value) is int):
            return node.value.value
    return None


def default_cap() -> int | None:
    """torchada's ``_DEFAULT_CAP`` (the live-graph cap it enforces when ``TORCHADA_GRAPH_EXEC_CAP`` is unset or not
    a positive integer), read from the installed source; None where torchada or the literal is absent."""
    path = cap_source_path()
    return None if path is None else _default_cap_in(path)
