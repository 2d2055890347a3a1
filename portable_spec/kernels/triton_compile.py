"""Compile one kernel with whatever Triton is importable, for a GPU target, without a GPU.

``triton.compile(ASTSource(fn, signature, constants), target=GPUTarget("cuda", 90, 32))`` runs every stage (TTIR,
TTGIR, LLVM IR, PTX, cubin through the bundled ptxas) on a CPU. The ``ASTSource`` arguments changed shape after
Triton 3.2 (3.2: runtime parameters in ``signature``, constexprs and ``None`` arguments in ``constants``, keyed by
name; 3.3+: every parameter in ``signature``, constexprs keyed by ``(index,)``), so the table's one description is
turned into whichever form the running Triton takes. 3.2 reads the ``signature`` dict's types in order, as the
kernel's parameters, so they are put in the kernel's order here (a row's changes for a later vLLM add parameters
after those of the launch it changes).
"""

from __future__ import annotations

import inspect
import re
from typing import Any


def _uses_constants_keyword(ast_source: Any) -> bool:
    return "constants" in inspect.signature(ast_source.__init__).parameters


def parameter_defaults(fn: Any) -> dict[str, Any]:
    """Python defaults of a JIT function's parameters (Triton needs every constexpr given explicitly)."""
    return {name: p.default for name, p in inspect.signature(fn.fn).parameters.items()
            if p.default is not inspect.Parameter.empty}


def ast_source(fn: Any, signature: dict[str, str], constexprs: dict[str, Any]) -> Any:
    """An ``ASTSource`` for ``fn`` in the running Triton's form. ``signature`` types ``"none"`` mean "passed None"."""
    from triton.compiler import ASTSource

    defaults = parameter_defaults(fn)
    names = list(fn.arg_names)
    missing = [n for n in names if n not in signature and n not in constexprs and n not in defaults]
    if missing:
        raise ValueError(f"no type or value for parameter(s) {', '.join(missing)} of {fn.__name__}")
    values = {n: constexprs[n] if n in constexprs else defaults[n] for n in names if n not in signature}
    values.update({n: None for n, ty in signature.items() if ty == "none"})
    if _uses_constants_keyword(ASTSource):  # Triton 3.2: runtime types in the kernel's parameter order
        sig = {n: ("*i8" if signature[n] == "none" else signature[n]) for n in names if n in signature}
        return ASTSource(fn, sig, constants=values)
    sig = {n: (signature[n] if n in signature and signature[n] != "none" else "constexpr") for n in names}
    return ASTSource(fn, sig, constexprs={(names.index(n),): v for n, v in values.items()})


def compile_for_target(fn: Any, signature: dict[str, str], constexprs: dict[str, Any],
                       options: dict[str, int] | None = None,
                       target: tuple[str, int | str, int] = ("cuda", 90, 32)) -> Any:
    """All compiler stages for ``target`` (backend, arch, warp size: ``("hip", "gfx942", 64)`` for an AMD one);
    raises what Triton raises."""
    import triton
    from triton.backends.compiler import GPUTarget

    return triton.compile(ast_source(fn, signature, constexprs), target=GPUTarget(*target), options=options or None)


_NATIVE_ERROR = re.compile(r"(error:|Assertion|LLVM ERROR|UNREACHABLE)")


def native_error_line(lines: list[str]) -> str | None:
    """The first line of the compiler's native output (what its C++ side wrote to file descriptor 2) that names an
    error, without the source path before it. Triton's AMD passes report a failure there and raise only
    "PassManager::run failed"; an LLVM assertion aborts the process with nothing raised at all."""
    for line in lines:
        found = _NATIVE_ERROR.search(line)
        if found and "Failures have been detected" not in line:
            return line[found.start():].strip()
    return None


def amd_register_use(amdgcn: str) -> dict[str, int]:
    """Registers and spills of an AMD code object, from the metadata notes its assembly carries (``.vgpr_count``,
    ``.vgpr_spill_count``, ...): what ``CompiledKernel.n_spills`` would say once a driver loaded it."""
    found = dict(re.findall(r"^\s*\.(vgpr_count|sgpr_count|vgpr_spill_count|sgpr_spill_count):\s*(\d+)", amdgcn,
                            re.MULTILINE))
    return {name: int(value) for name, value in found.items()}


def _last_line(exc: BaseException) -> str:
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def first_error_line(exc: BaseException) -> str:
    """The line of a Triton error that names the problem, with the kernel location if Triton gave one. A
    ``CompilationError`` raised at a call site carries the callee's error as its cause; that one names it."""
    chain = [exc]
    while chain[-1].__cause__ is not None and len(chain) < 16:
        chain.append(chain[-1].__cause__)
    named = next((e for e in chain if _last_line(e) not in ("", "^")), exc)
    text = _last_line(named) or type(named).__name__
    if not re.match(r"[A-Za-z_.]*(Error|Exception|Construct)\b", text):
        text = f"{type(named).__name__}: {text}"
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{text} [{first.rstrip(':')}]" if first.startswith("at ") else text


def ttir(fn: Any, signature: dict[str, str], constexprs: dict[str, Any],
         target: tuple[str, int, int] = ("cuda", 90, 32)) -> str:
    """Triton's front end only (AST -> TTIR, before inlining): the IR still names every helper it called."""
    from triton._C.libtriton import ir
    from triton.backends.compiler import GPUTarget
    from triton.compiler.compiler import make_backend

    gpu = GPUTarget(*target)
    backend = make_backend(gpu)
    src = ast_source(fn, signature, constexprs)
    options = backend.parse_options({})
    context = ir.context()
    ir.load_dialects(context)
    backend.load_dialects(context)
    codegen = backend.get_codegen_implementation
    codegen_fns = codegen(options) if inspect.signature(codegen).parameters else codegen()  # 3.2 takes none
    args = (options, codegen_fns, backend.get_module_map(), context)
    if _uses_constants_keyword(type(src)):  # Triton 3.2: make_ir takes no target
        return str(src.make_ir(*args))
    return str(src.make_ir(gpu, *args))
