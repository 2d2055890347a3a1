"""Subprocess side of ``portable-spec kernels --check-triton``: loads every kernel of the table and runs one layer of
the check on it, first as vLLM ships it, then with the MUSA substitutes bound; prints one JSON object.

This module imports vLLM (it runs only in the check's own subprocess, never inside the product): it pins a
CPU-importable vLLM platform and turns vLLM's Triton switch on, which vLLM leaves off on a host without a GPU driver
(its kernels would otherwise be placeholders). ``--layer compile`` compiles with the running Triton for a CUDA
target (the 3.2.0 virtualenv's interpreter runs it), ``--layer compile-amd`` for an AMD one (``AMD_TARGET``; each
compile in a forked child, as the ROCm layer's: an LLVM assertion ends the process); ``--layer static`` applies ``triton_rules``; ``--layer rocm``
compiles the ROCm path's rows (``triton_table_rocm``) for each ``--target`` with the running Triton (3.3+, whose
AMD backend links in-process), as vLLM ships them: ROCm binds no substitute.

    python -m portable_spec.vllm_adapter.tools.triton_check_worker --layer compile|compile-amd|static|rocm [--only KEY ...]
        [--cases MODULE:ATTR ...] [--target hip:gfx942 ...]
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import json
import os
import signal
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
    stand_in_gluon()
    stand_in_autotune_bench()
    importlib.reload(vllm.triton_utils)


def stand_in_autotune_bench() -> bool:
    """Where no Triton driver is active (this GPU-less check) and this Triton's ``Autotuner`` asks the driver for a
    benchmarker when it is built (3.2 does, at decoration), give it one that raises when called: vLLM >= 0.33
    imports ``@triton.autotune`` kernels (Mamba's, via Model Runner V2's modules) that the check never launches.
    Returns whether it stood in."""
    import inspect

    from triton.backends import backends
    from triton.runtime import autotuner

    init = autotuner.Autotuner.__init__
    signature = inspect.signature(init)
    if "do_bench" not in signature.parameters or any(b.driver.is_active() for b in backends.values()):
        return False

    def no_bench(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError("no Triton driver here: the compile-only check does not autotune")

    def build(self: Any, *args: Any, **kwargs: Any) -> None:
        bound = signature.bind(self, *args, **kwargs)
        if bound.arguments.get("do_bench") is None:
            bound.arguments["do_bench"] = no_bench
        init(*bound.args, **bound.kwargs)

    autotuner.Autotuner.__init__ = build  # type: ignore[method-assign]
    return True


def stand_in_gluon() -> list[str]:
    """Where this Triton predates Gluon (3.2), stand-ins for what vLLM >= 0.28's ``vllm.triton_utils`` imports from
    it (``triton.experimental.gluon`` and its ``language``, ``triton.language.core._aggregate``); returns the names
    stood in. Only vLLM's Gluon kernels (AMD gfx950 model ops, off the MUSA path) use them: a MUSA stack on Triton
    3.2 has to do the same for vLLM's kernel modules to import at all, and no kernel this check compiles reaches
    them (a stand-in raises when called)."""
    import importlib.util
    import types

    import triton.language.core as core

    def absent(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError("Gluon stand-in (Triton 3.2 has no Gluon): a kernel on the checked path reached it")

    stood = []
    if importlib.util.find_spec("triton.experimental") is None:
        experimental = types.ModuleType("triton.experimental")
        gluon = types.ModuleType("triton.experimental.gluon")
        language = types.ModuleType("triton.experimental.gluon.language")
        gluon.jit = absent  # type: ignore[attr-defined]
        gluon.language = language  # type: ignore[attr-defined]

        def attribute(name: str) -> Any:
            if name.startswith("__"):
                raise AttributeError(name)
            return absent

        language.__getattr__ = attribute  # type: ignore[method-assign]
        experimental.gluon = gluon  # type: ignore[attr-defined]
        sys.modules.update({m.__name__: m for m in (experimental, gluon, language)})
        stood.append("triton.experimental.gluon")
    if not hasattr(core, "_aggregate"):
        core._aggregate = lambda cls: cls  # type: ignore[attr-defined]
        stood.append("triton.language.core._aggregate")
    return stood


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def _bound_name(obj: Any) -> str:
    fn = getattr(obj, "fn", None)
    return f"{fn.__module__}.{fn.__qualname__}" if fn is not None else repr(obj)


def _load(case: Any) -> tuple[Any, dict[str, Any] | None]:
    """The JIT function a row names, or the error row saying why there is none."""
    from portable_spec.kernels.triton_rules import is_jit_function

    try:
        obj = getattr(importlib.import_module(case.module), case.attr)
    except (ImportError, AttributeError) as exc:
        return None, {"verdict": "error", "first_error": f"cannot load {case.ref}: {exc}"}
    if not is_jit_function(obj):
        return None, {"verdict": "error",
                      "first_error": f"{case.ref} is {type(obj).__name__}, not a Triton JIT function"}
    return obj, None


AMD_TARGET = ("hip", "gfx942", 64)
"""The second backend of the Triton 3.2 check's compile (``--layer compile-amd``): MI300's, whose passes reject
what the NVIDIA target's accept (a pointer chosen in a run-time branch: "operand #0 does not dominate this use")."""


def _one(case: Any, layer: str) -> dict[str, Any]:
    from portable_spec.kernels.triton_compile import compile_for_target, first_error_line
    from portable_spec.kernels.triton_rules import scan

    start = time.perf_counter()
    obj, error = _load(case)
    if error:
        return error
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
            compile_for_target(obj, case.signature, case.constexprs, case.options,
                               AMD_TARGET if layer == "compile-amd" else ("cuda", 90, 32))
            out.update(verdict="ok", first_error=None)
        except Exception as exc:  # the compiler's own error is the result
            out.update(verdict="rejected", first_error=first_error_line(exc))
    out["seconds"] = round(time.perf_counter() - start, 3)
    return out


def _layer(cases: list[Any], layer: str) -> dict[str, dict[str, Any]]:
    """One pass of ``layer`` over ``cases``; the AMD compile runs each kernel in a forked child (``isolated``), so a
    compile that aborts the process is that kernel's rejection (with the native line that names it), not the run's
    end."""
    if layer != "compile-amd":
        return {c.key: _one(c, layer) for c in cases}
    for case in cases:  # imported once here, not once per child
        _load(case)
    results = isolated([(_one, case, layer) for case in cases])
    return {c.key: {**r, "verdict": "rejected" if r["verdict"] == "failed" else r["verdict"]}
            for c, r in zip(cases, results)}


def run(layer: str, only: list[str] | None = None, case_sources: tuple[str, ...] = ()) -> dict[str, Any]:
    import triton

    from portable_spec.kernels.triton_table import kernel_cases

    cases = [c for c in kernel_cases(case_sources) if not only or c.key in only]
    if any(c.owner == "vllm" for c in cases):
        enable_vllm_triton()
    report: dict[str, Any] = {"layer": layer, "triton": triton.__version__, "python": sys.executable,
                              "vllm": _version("vllm"), "raw": _layer(cases, layer)}
    if layer == "compile-amd":
        report["target"] = ":".join(map(str, AMD_TARGET[:2]))
    report["bound_targets"], report["substituted"] = _substituted(cases, layer)
    return report


def _substituted(cases: list[Any], layer: str) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """``cases`` compiled with the MUSA substitutes bound, as the engine that launches each binds them: a row an
    engine flag launches (``KernelCase.engine``, e.g. ``--use-fp64-gumbel``) with the substitutes such an engine's
    configuration declines left vLLM's (``Substitution.declines``); the sites bound for a plain engine, and the
    results in ``cases``' order."""
    from portable_spec.kernels import registry
    from portable_spec.vllm_adapter.patch import version_gate

    every = registry.substitutions_for("musa")
    groups: dict[tuple[str, ...], list[Any]] = {}
    for case in cases:
        groups.setdefault(tuple(getattr(case, "engine", ())), []).append(case)
    bound: list[str] = []
    results: dict[str, dict[str, Any]] = {}
    for flags, group in sorted(groups.items()):
        config = group[0].engine_config()
        subs = tuple(s for s in every if s.declines(config) is None)
        try:
            targets = registry.install_substitutions("musa", subs, pick=version_gate.pick)
            results.update(_layer(group, layer))
        finally:
            registry.uninstall()
        if not flags:
            bound = targets
    if not bound:  # no plain row checked: the sites a plain engine binds
        try:
            bound = registry.install_substitutions("musa", pick=version_gate.pick)
        finally:
            registry.uninstall()
    return bound, {c.key: results[c.key] for c in cases}


def _compile_on(obj: Any, row: Any, target: tuple) -> dict[str, Any]:
    """One row on one target: ok or failed with the line that names why, and the AMD code object's registers."""
    from portable_spec.kernels.triton_compile import amd_register_use, compile_for_target, first_error_line

    try:
        compiled = compile_for_target(obj, row.signature(), row.case.constexprs, row.case.options, target)
    except Exception as exc:  # the compiler's own error is the result
        return {"verdict": "failed", "first_error": first_error_line(exc), "registers": None}
    amdgcn = compiled.asm.get("amdgcn")
    return {"verdict": "ok", "first_error": None, "registers": amd_register_use(amdgcn) if amdgcn else None}


def _child(jobs: list[tuple], start: int, write_end: int, native: str) -> None:
    """A forked child: compiles ``jobs[start:]`` in order, file descriptor 2 appending to the file ``native``,
    writing one JSON line per compile to ``write_end`` before (``begin``: where its native output starts) and after
    it (``result``)."""
    os.dup2(os.open(native, os.O_WRONLY | os.O_APPEND), 2)
    for index in range(start, len(jobs)):
        os.write(write_end, (json.dumps({"begin": index, "at": os.fstat(2).st_size}) + "\n").encode())
        began = time.perf_counter()
        try:
            result = jobs[index][0](*jobs[index][1:])
        except BaseException as exc:  # noqa: BLE001 - reported as the compile's result
            result = {"verdict": "failed", "first_error": f"{type(exc).__name__}: {exc}", "registers": None}
        result["seconds"] = round(time.perf_counter() - began, 3)
        os.write(write_end, (json.dumps({"result": index, **result, "at": os.fstat(2).st_size})
                             + "\n").encode())
    os._exit(0)


def isolated(jobs: list[tuple]) -> list[dict[str, Any]]:
    """Each job ``(compile_one, *args)`` run as ``compile_one(*args)`` in a forked child, one child for as many jobs
    as it survives: an LLVM assertion in Triton's AMD backend aborts the process (it raises nothing) and writes its
    message to file descriptor 2. The job that ended a child becomes a failed result with that message, and a new
    child goes on with the next job; a raised error gets the native line that names it, when there is one."""
    results: list[dict[str, Any]] = []
    fd, path = tempfile.mkstemp(prefix="portable-spec-compile-", suffix=".log")
    os.close(fd)
    try:
        while len(results) < len(jobs):
            _one_child(jobs, results, path)
    finally:
        os.unlink(path)
    return results


def _one_child(jobs: list[tuple], results: list[dict[str, Any]], path: str) -> None:
    """Forks one child for the jobs after ``results``; appends what it reports (and the job it ended in)."""
    sys.stdout.flush()
    sys.stderr.flush()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        _child(jobs, len(results), write_end, path)
    os.close(write_end)
    began, at, started = False, 0, time.perf_counter()
    with os.fdopen(read_end, "r") as fh, open(path, "rb") as native:
        for line in fh:
            message = json.loads(line)
            if "begin" in message:
                began, at, started = True, message["at"], time.perf_counter()
                continue
            native.seek(at)
            segment = native.read(message.pop("at") - at).decode("utf-8", "replace").splitlines()
            results.append(_with_native(message, segment))
            began = False
        _, status = os.waitpid(pid, 0)
        native.seek(at)
        segment = native.read().decode("utf-8", "replace").splitlines()
    if began:  # the child ended inside this job
        results.append(_with_native({"verdict": "failed", "registers": None,
                                     "first_error": f"the compiler ended the process ({_ended(status)})",
                                     "seconds": round(time.perf_counter() - started, 3)}, segment))
    elif len(results) < len(jobs):
        raise RuntimeError(f"the compile child ended ({_ended(status)}) between jobs")


def _with_native(result: dict[str, Any], lines: list[str]) -> dict[str, Any]:
    from portable_spec.kernels.triton_compile import native_error_line

    result.pop("result", None)
    detail = native_error_line(lines) if result["verdict"] != "ok" else None
    if detail and detail not in result["first_error"]:
        result["first_error"] = f"{result['first_error']}: {detail}"
    return result


def _ended(status: int) -> str:
    if os.WIFSIGNALED(status):
        return signal.Signals(os.WTERMSIG(status)).name
    return f"exit {os.WEXITSTATUS(status)}"


def run_rocm(targets: list[str], only: list[str] | None = None) -> dict[str, Any]:
    """Every ROCm-path row compiled for each target, vLLM's kernels as shipped (the ROCm substitutions are bound
    first, and there are none: the report says how many sites that bound)."""
    import triton

    from portable_spec.kernels import registry
    from portable_spec.kernels.triton_table_rocm import TARGETS, rocm_rows
    from portable_spec.vllm_adapter.patch import version_gate

    rows = [r for r in rocm_rows() if not only or r.key in only]
    enable_vllm_triton()
    report: dict[str, Any] = {"layer": "rocm", "triton": triton.__version__, "python": sys.executable,
                              "vllm": _version("vllm"), "targets": targets, "rows": {}}
    try:
        report["bound_targets"] = registry.install_substitutions("rocm", pick=version_gate.pick)
        loaded = {row.key: _load(row.case) for row in rows}
        for row in rows:
            report["rows"][row.key] = {t: loaded[row.key][1] for t in targets}
        compiled = [row for row in rows if loaded[row.key][1] is None]
        # One process per target (``isolated`` forks): Triton 3.6's AMD backend keeps state across compiles in a
        # process; after gfx942 compiles, a gfx90a compile of an fp8e4b8 kernel took gfx942's hardware conversion
        # and failed where a fresh process's compile of it did not (measured), so no target follows another in one.
        for target in targets:
            jobs = [(_compile_on, loaded[row.key][0], row, TARGETS[target]) for row in compiled]
            for row, result in zip(compiled, isolated(jobs)):
                report["rows"][row.key][target] = result
    finally:
        registry.uninstall()
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layer", choices=("compile", "compile-amd", "static", "rocm"), required=True)
    parser.add_argument("--only", action="append", metavar="KEY", help="only this table row (repeatable)")
    parser.add_argument("--cases", action="append", default=[], metavar="MODULE:ATTR",
                        help="more rows: a tuple of KernelCase (repeatable)")
    parser.add_argument("--target", action="append", default=[], metavar="T",
                        help="--layer rocm: a target of triton_table_rocm.TARGETS (repeatable)")
    args = parser.parse_args(argv)
    os.environ.pop("TRITON_INTERPRET", None)
    # A cache of its own, so no earlier compile answers for this one; removed with the run (each run left up to
    # 16 MB in the temporary folder before). A caller's TRITON_CACHE_DIR is used and kept.
    with tempfile.TemporaryDirectory(prefix="portable-spec-triton-check-") as own_cache:
        os.environ.setdefault("TRITON_CACHE_DIR", own_cache)
        if args.layer == "rocm":
            print(json.dumps(run_rocm(args.target, args.only)))
        else:
            print(json.dumps(run(args.layer, args.only, tuple(args.cases))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
