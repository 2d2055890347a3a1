"""Subprocess side of ``portable-spec kernels --check-triton``: loads every kernel of the table and runs one layer of
the check on it, first as vLLM ships it, then with the MUSA substitutes bound; prints one JSON object.

This module imports vLLM (it runs only in the check's own subprocess, never inside the product): it pins a
CPU-importable vLLM platform and turns vLLM's Triton switch on, which vLLM leaves off on a host without a GPU driver
(its kernels would otherwise be placeholders). ``--layer compile`` compiles with the running Triton for a CUDA
target (the 3.2.0 virtualenv's interpreter runs it); ``--layer static`` applies ``triton_rules``.

    python -m portable_spec.vllm_adapter.tools.triton_check_worker --layer compile|static [--only KEY ...]
        [--cases MODULE:ATTR ...]
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import json
import os
import sys
import tempfile
import time
from typing import Any


def enable_vllm_triton() -> None:
    """Pin a vLLM platform that imports on CPU and make vLLM build real Triton kernels (no GPU needed to compile)."""
    import vllm.platforms
    from vllm.platforms.interface import Platform, PlatformEnum

    class CompileOnlyPlatform(Platform):
        """Lets vLLM's kernel modules import on a host without a GPU; nothing runs on it."""

        _enum = PlatformEnum.OOT
        device_name = device_type = "cpu"
        dispatch_key = "CPU"

    vllm.platforms._current_platform = CompileOnlyPlatform()
    import vllm.triton_utils
    import vllm.triton_utils.importing as importing

    importing.HAS_TRITON = True
    importlib.reload(vllm.triton_utils)


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def _bound_name(obj: Any) -> str:
    fn = getattr(obj, "fn", None)
    return f"{fn.__module__}.{fn.__qualname__}" if fn is not None else repr(obj)


def _one(case: Any, layer: str) -> dict[str, Any]:
    from portable_spec.kernels.triton_compile import compile_for_target, first_error_line
    from portable_spec.kernels.triton_rules import is_jit_function, scan

    start = time.perf_counter()
    try:
        obj = getattr(importlib.import_module(case.module), case.attr)
    except (ImportError, AttributeError) as exc:
        return {"verdict": "error", "first_error": f"cannot load {case.ref}: {exc}"}
    if not is_jit_function(obj):
        return {"verdict": "error", "first_error": f"{case.ref} is {type(obj).__name__}, not a Triton JIT function"}
    out: dict[str, Any] = {"bound": _bound_name(obj),
                           "derived_from": getattr(obj.fn, "__portable_spec_derived_from__", None)}
    if layer == "static":
        found = scan(obj, case.constexprs)
        out.update(verdict="rejected" if found.rejected else "ok",
                   first_error=found.findings[0].line() if found.findings else None,
                   findings=[f.line() for f in found.findings], notes=[n.line() for n in found.notes],
                   helpers=found.helpers)
    else:
        try:
            compile_for_target(obj, case.signature, case.constexprs, case.options)
            out.update(verdict="ok", first_error=None)
        except Exception as exc:  # the compiler's own error is the result
            out.update(verdict="rejected", first_error=first_error_line(exc))
    out["seconds"] = round(time.perf_counter() - start, 3)
    return out


def run(layer: str, only: list[str] | None = None, case_sources: tuple[str, ...] = ()) -> dict[str, Any]:
    import triton

    from portable_spec.kernels import registry
    from portable_spec.kernels.triton_table import kernel_cases

    cases = [c for c in kernel_cases(case_sources) if not only or c.key in only]
    if any(c.owner == "vllm" for c in cases):
        enable_vllm_triton()
    report: dict[str, Any] = {"layer": layer, "triton": triton.__version__, "python": sys.executable,
                              "vllm": _version("vllm"), "raw": {c.key: _one(c, layer) for c in cases}}
    try:
        report["bound_targets"] = registry.install_substitutions("musa")
        report["substituted"] = {c.key: _one(c, layer) for c in cases}
    finally:
        registry.uninstall()
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layer", choices=("compile", "static"), required=True)
    parser.add_argument("--only", action="append", metavar="KEY", help="only this table row (repeatable)")
    parser.add_argument("--cases", action="append", default=[], metavar="MODULE:ATTR",
                        help="more rows: a tuple of KernelCase (repeatable)")
    args = parser.parse_args(argv)
    os.environ.pop("TRITON_INTERPRET", None)
    os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="portable-spec-triton-check-"))
    print(json.dumps(run(args.layer, args.only, tuple(args.cases))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
