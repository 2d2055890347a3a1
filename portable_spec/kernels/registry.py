"""Binds the kernel substitutions of ``substitutions.py`` on vLLM's modules, reversibly.

vLLM binds its spec-decode Triton kernels with ``from vllm.v1.spec_decode.utils import ...``, so a substitute has to
be assigned on the defining module AND on every module that imported it (vLLM's own CPU runner does the same,
``v1/worker/cpu_model_runner.py``). Installing checks that every site still has the attribute, so a vLLM upgrade that
moves a kernel fails with one line instead of silently running the upstream kernel. Originals are kept so
``uninstall()`` can restore them.

Triton memoizes a kernel's hash (which covers the helpers it calls) and keeps compiled kernels per JIT function, so
after any rebinding every loaded vLLM JIT function forgets both: each recompiles at its next launch with whatever is
bound then. Install before graphs are captured (the MUSA worker installs in ``init_device``).

No vLLM import here at module level: target modules are imported inside ``install_substitutions``, and
replacements are named lazily ("module:attr") so importing this registry does not need Triton.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

from portable_spec.errors import PortableSpecError
from portable_spec.kernels.substitutions import SUBSTITUTIONS, Pick, Substitution

__all__ = ["SUBSTITUTIONS", "KernelBindingMissing", "Substitution", "bound", "forget_compiled_kernels",
           "install_substitutions", "installed", "substitutions_for", "uninstall"]


class KernelBindingMissing(PortableSpecError):
    """A vLLM attribute a substitution replaces is gone: vLLM moved it."""


_ORIGINALS: dict[str, Any] = {}
"""target -> the object vLLM had there before we installed (present only while installed)."""
_BOUND: dict[str, Substitution] = {}
"""target -> the entry that bound it (present only while installed)."""
_DERIVED: dict[str, tuple[Any, Any]] = {}
"""entry name -> (vLLM's original, the replacement derived from it): derived once per original, compiled once."""


def _split(target: str) -> tuple[str, str]:
    module, _, attr = target.rpartition(".")
    return module, attr


def _owner(path: str) -> Any:
    """The object at dotted ``path``: a module, or an attribute of one (``pkg.module.dispatcher``: vLLM >= 0.33
    launches some kernels through a dispatcher object that holds the kernel as its ``kernel`` attribute)."""
    try:
        return importlib.import_module(path)
    except ModuleNotFoundError as exc:
        parent, _, attr = path.rpartition(".")
        if not parent or exc.name != path:
            raise
        owner = _owner(parent)
        if not hasattr(owner, attr):
            raise
        return getattr(owner, attr)


def _check_platform(platform_name: str) -> str:
    from portable_spec.ports.registry import platform_names

    key = platform_name.strip().lower()
    if key not in platform_names():
        raise PortableSpecError(f"unknown platform {platform_name!r} for kernel substitutions; "
                                f"valid choices: {', '.join(platform_names())}")
    return key


def substitutions_for(platform_name: str,
                      substitutions: tuple[Substitution, ...] = SUBSTITUTIONS) -> list[Substitution]:
    """The entries that apply to ``platform_name``."""
    key = _check_platform(platform_name)
    return [sub for sub in substitutions if key in sub.platforms]


def _replacement(sub: Substitution, original: Any) -> Any:
    if not sub.derived:
        return sub.load_replacement()
    cached = _DERIVED.get(sub.name)
    if cached is None or cached[0] is not original:
        _DERIVED[sub.name] = cached = (original, sub.load_replacement(original))
    return cached[1]


def install_substitutions(platform_name: str, substitutions: tuple[Substitution, ...] = SUBSTITUTIONS, *,
                          pick: Pick | None = None) -> list[str]:
    """Assign each replacement for ``platform_name`` on all its binding sites; returns the targets installed.
    ``pick`` (``version_gate.pick``) resolves what an entry states per vLLM version (``Substitution.at``); an entry
    that states something per version cannot bind without it.

    Every site is checked before any is assigned, so a missing attribute leaves vLLM unchanged. Installing twice
    is harmless (the first original is kept)."""
    planned: list[tuple[Any, str, str, Substitution]] = []
    for sub in (s.at(pick) for s in substitutions_for(platform_name, substitutions)):
        for target in sub.targets:
            module_name, attr = _split(target)
            try:
                module = _owner(module_name)
            except ImportError as exc:
                raise KernelBindingMissing(
                    f"cannot import {module_name} ({exc}); update the {sub.name!r} entry in "
                    "portable_spec/kernels/substitutions.py or pin vllm==0.26.0") from None
            if not hasattr(module, attr):
                raise KernelBindingMissing(
                    f"{module_name} has no attribute {attr!r} (vLLM moved it); update the {sub.name!r} entry in "
                    "portable_spec/kernels/substitutions.py or pin vllm==0.26.0")
            planned.append((module, attr, target, sub))
    replacements = {}
    for module, attr, target, sub in planned:
        if sub.name not in replacements:
            replacements[sub.name] = _replacement(sub, _ORIGINALS.get(target, getattr(module, attr)))
    for module, attr, target, sub in planned:
        if target not in _ORIGINALS:
            _ORIGINALS[target] = getattr(module, attr)
        setattr(module, attr, replacements[sub.name])
        _BOUND[target] = sub
    if planned:
        forget_compiled_kernels()
    return [target for _, _, target, _ in planned]


def forget_compiled_kernels() -> int:
    """Make every loaded vLLM Triton JIT function recompute its hash and recompile at its next launch (so a helper
    substitute, or its removal, reaches kernels compiled before); returns how many were reset."""
    count = 0
    for name, module in list(sys.modules.items()):
        if module is None or not name.startswith("vllm."):
            continue
        for value in list(vars(module).values()):
            if type(value).__name__ == "JITFunction":
                value.hash = None
                caches = getattr(value, "device_caches", None)
                if caches is not None:
                    caches.clear()
                count += 1
    return count


def bound() -> dict[str, Substitution]:
    """target -> the entry currently bound there."""
    return dict(_BOUND)


def installed() -> list[str]:
    """Targets currently substituted."""
    return list(_ORIGINALS)


def uninstall() -> list[str]:
    """Put every original back; returns the targets restored."""
    restored = []
    for target, original in list(_ORIGINALS.items()):
        module_name, attr = _split(target)
        setattr(_owner(module_name), attr, original)
        del _ORIGINALS[target]
        _BOUND.pop(target, None)
        restored.append(target)
    if restored:
        forget_compiled_kernels()
    return restored
