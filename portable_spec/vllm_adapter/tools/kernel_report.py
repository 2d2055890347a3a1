"""What ``portable-spec probe`` says about a platform's kernel substitutions: each one bound on this host's vLLM
exactly as the platform's vLLM worker binds it (``MusaWorker.init_device`` -> ``install_substitutions``), which
vLLM attributes now hold it, and why it exists. vLLM's objects are put back afterwards unless they were already
substituted. Lives in the adapter because binding imports vLLM's modules.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
from typing import Any

from portable_spec.errors import PortableSpecError
from portable_spec.kernels import (
    SUBSTITUTIONS,
    Substitution,
    bound,
    install_substitutions,
    installed,
    substitutions_for,
    uninstall,
)
from portable_spec.vllm_adapter.patch import version_gate


def _current(target: str) -> Any:
    module, _, attr = target.rpartition(".")
    return getattr(importlib.import_module(module), attr, None)


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def substitution_report(platform_name: str,
                        substitutions: tuple[Substitution, ...] = SUBSTITUTIONS) -> dict[str, Any]:
    """``{"vllm", "vllm_kernels_are_triton_jit", "substitutions": [{name, replacement, reason, targets, bound,
    error}]}``. ``vllm_kernels_are_triton_jit`` is False where vLLM found no Triton driver (its kernels are then
    plain-Python placeholders, and every Triton path of vLLM is off)."""
    subs = substitutions_for(platform_name, substitutions)
    if importlib.util.find_spec("vllm") is not None:
        subs = [s.at(version_gate.pick) for s in subs]  # this vLLM's counts and binding sites
        subs = [s for s in subs if s.targets]  # an entry whose object this vLLM lacks has nothing to report
    rows = [{"name": s.name, "replacement": s.describe_replacement(), "reason": s.reason, "targets": list(s.targets),
             "bound": False, "error": None} for s in subs]
    report: dict[str, Any] = {"vllm": _version("vllm"), "vllm_kernels_are_triton_jit": None, "substitutions": rows}
    if not subs:
        return report
    if importlib.util.find_spec("vllm") is None:
        for row in rows:
            row["error"] = "vLLM is not installed here, so nothing can be bound: pip install 'portable-spec[vllm]'"
        return report
    was_installed = bool(installed())
    try:
        originals = {t: _current(t) for s in subs for t in s.targets if not was_installed}
        install_substitutions(platform_name, substitutions, pick=version_gate.pick)
        now = bound()
        for sub, row in zip(subs, rows):
            objs = [_current(t) for t in sub.targets]
            row["bound"] = (all(now.get(t) == sub for t in sub.targets) and len({id(o) for o in objs}) == 1
                            and all(o is not originals.get(t) for t, o in zip(sub.targets, objs)))
        if originals:
            report["vllm_kernels_are_triton_jit"] = all(type(o).__name__ == "JITFunction" for o in originals.values())
    except PortableSpecError as exc:
        for row in rows:
            row["error"] = str(exc)
    finally:
        if not was_installed:
            uninstall()
    return report
