"""Per-platform kernel substitutions: which vLLM module attributes we replace, on which platforms, and why.

vLLM binds its spec-decode Triton kernels with ``from vllm.v1.spec_decode.utils import ...``, so a substitute has to
be assigned on the defining module AND on every module that imported it (vLLM's own CPU runner does the same,
``v1/worker/cpu_model_runner.py``). Each entry lists all those binding sites. Installing checks that every site
still has the attribute, so a vLLM upgrade that moves a kernel fails with one line instead of silently running the
upstream kernel. Originals are kept so ``uninstall()`` can restore them.

No vLLM import here at module level: target modules are imported inside ``install_substitutions``, and
replacements are named lazily ("module:attr") so importing this registry does not need Triton.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from portable_spec.errors import PortableSpecError


class KernelBindingMissing(PortableSpecError):
    """A vLLM attribute a substitution replaces is gone: vLLM moved it."""


@dataclass(frozen=True)
class Substitution:
    """One replacement object, assigned on every vLLM module attribute (``"pkg.module.attr"``) in ``targets``."""

    name: str
    targets: tuple[str, ...]
    platforms: tuple[str, ...]
    reason: str
    replacement: str  # "module:attr", imported on install

    def load_replacement(self) -> Any:
        module, _, attr = self.replacement.partition(":")
        return getattr(importlib.import_module(module), attr)


SUBSTITUTIONS: tuple[Substitution, ...] = (
    Substitution(
        name="eagle_prepare_next_token_padded_kernel",
        targets=(
            "vllm.v1.spec_decode.utils.eagle_prepare_next_token_padded_kernel",
            "vllm.v1.spec_decode.llm_base_proposer.eagle_prepare_next_token_padded_kernel",
        ),
        platforms=("musa",),
        reason=("vLLM 0.26.0 assigns valid_count a uint32 in one branch and tl.sum(bool) in the other; "
                "MUSA's Triton 3.2 rejects it ('mismatched type for valid_count')"),
        replacement="portable_spec.kernels.eagle_prepare_next_token:eagle_prepare_next_token_padded_kernel",
    ),
)

_ORIGINALS: dict[str, Any] = {}
"""target -> the object vLLM had there before we installed (present only while installed)."""


def _split(target: str) -> tuple[str, str]:
    module, _, attr = target.rpartition(".")
    return module, attr


def _check_platform(platform_name: str) -> str:
    from portable_spec.platforms.registry import platform_names

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


def install_substitutions(platform_name: str,
                          substitutions: tuple[Substitution, ...] = SUBSTITUTIONS) -> list[str]:
    """Assign each replacement for ``platform_name`` on all its binding sites; returns the targets installed.

    Every site is checked before any is assigned, so a missing attribute leaves vLLM unchanged. Installing twice
    is harmless (the first original is kept)."""
    planned: list[tuple[Any, str, str, Any]] = []
    for sub in substitutions_for(platform_name, substitutions):
        replacement = sub.load_replacement()
        for target in sub.targets:
            module_name, attr = _split(target)
            module = importlib.import_module(module_name)
            if not hasattr(module, attr):
                raise KernelBindingMissing(
                    f"{module_name} has no attribute {attr!r} (vLLM moved it); update the {sub.name!r} entry in "
                    "portable_spec/kernels/registry.py or pin vllm==0.26.0")
            planned.append((module, attr, target, replacement))
    for module, attr, target, replacement in planned:
        if target not in _ORIGINALS:
            _ORIGINALS[target] = getattr(module, attr)
        setattr(module, attr, replacement)
    return [target for _, _, target, _ in planned]


def installed() -> list[str]:
    """Targets currently substituted."""
    return list(_ORIGINALS)


def uninstall() -> list[str]:
    """Put every original back; returns the targets restored."""
    restored = []
    for target, original in list(_ORIGINALS.items()):
        module_name, attr = _split(target)
        setattr(importlib.import_module(module_name), attr, original)
        del _ORIGINALS[target]
        restored.append(target)
    return restored
