"""Per-platform kernel substitutions: Triton kernels in the subset MUSA's Triton 3.2 accepts, their torch
references, the registry that swaps them in for vLLM's on the platforms that need them, and the Triton 3.2 check
that says which kernels need one. Importing this package imports neither vLLM nor Triton."""

from portable_spec.kernels.registry import (
    SUBSTITUTIONS,
    KernelBindingMissing,
    Substitution,
    bound,
    install_substitutions,
    installed,
    substitutions_for,
    uninstall,
)

__all__ = ["SUBSTITUTIONS", "KernelBindingMissing", "Substitution", "bound", "install_substitutions", "installed",
           "substitutions_for", "uninstall"]
