"""Per-platform kernel substitutions: Triton kernels in the subset MUSA's Triton 3.2 accepts, their torch
references, and the registry that swaps them in for vLLM's on the platforms that need them. Importing this package
imports neither vLLM nor Triton."""

from portable_spec.kernels.registry import (
    SUBSTITUTIONS,
    KernelBindingMissing,
    Substitution,
    install_substitutions,
    installed,
    substitutions_for,
    uninstall,
)

__all__ = ["SUBSTITUTIONS", "KernelBindingMissing", "Substitution", "install_substitutions", "installed",
           "substitutions_for", "uninstall"]
