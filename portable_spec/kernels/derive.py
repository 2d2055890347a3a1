"""Substitutes derived from vLLM's own Triton source by named, counted rewrites, for code too large to copy.

TRITON_ATTN's unified attention (``v1/attention/ops/triton_unified_attention.py``, ~500 lines plus helpers) uses
three constructs older Triton front ends reject; each rewrite below expresses the same program without it:

- ``unannotate-parameters``: ``stride_ks_blk: int | None = None`` -> ``stride_ks_blk=None``. Triton binds parameter
  defaults as annotated assignments; 3.2 evaluates ``int | None`` there and fails ("descriptor '__or__' requires a
  'int' object but received a 'constexpr'"), MUSA's older front end fails on the annotated assignment itself. A
  non-constexpr annotation carries no meaning for either (the parameter stays a runtime argument).
- ``unannotate-assignments``: ``left: tl.int32 = 0`` -> ``left = 0``. MUSA's front end fails with "'AnnAssign'
  object has no attribute 'targets'"; upstream Triton ignores a non-constexpr annotation on an assignment.
- ``split-boolean-chains``: ``A or B or C`` -> ``(A or B) or C``. Triton 3.2 refuses chains of more than two
  operands ("chained boolean operators (A or B or C) are not supported; use parentheses to split the chain").

``unspecialize`` rewrites no source: it names integer parameters Triton must not specialize (``do_not_specialize``),
so one compiled variant serves every value (CUDA's batch-size arguments, ``substitutions.py``).

A derived function is compiled in the ORIGINAL's module globals (its helper calls resolve where vLLM's do, helper
substitutes included) but reports ``portable_spec.derived.<module>`` as its module, so Triton's IR and hashes name
it as ours. Each rewrite must change exactly the expected number of places: if vLLM's source changed, deriving fails
with one line instead of guessing.
"""

from __future__ import annotations

import ast
import inspect
import linecache
import textwrap
from collections.abc import Callable, Mapping
from typing import Any

from portable_spec.errors import PortableSpecError

DERIVED_MARK = "__portable_spec_derived_from__"
DERIVED_MODULE_PREFIX = "portable_spec.derived."


class DerivationError(PortableSpecError):
    """vLLM's kernel source is not what a rewrite expects."""


def _constexpr(annotation: ast.expr) -> bool:
    return ast.unparse(annotation).split(".")[-1] == "constexpr"


def _unannotate_parameters(func: ast.FunctionDef) -> int:
    args = func.args.args
    with_default = {a.arg for a in args[len(args) - len(func.args.defaults):]}
    changed = 0
    for arg in args:
        if arg.annotation is not None and arg.arg in with_default and not _constexpr(arg.annotation):
            arg.annotation = None
            changed += 1
    return changed


class _Unannotate(ast.NodeTransformer):
    changed = 0

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.AST:
        if _constexpr(node.annotation) or node.value is None:
            return node
        self.changed += 1
        return ast.copy_location(ast.Assign(targets=[node.target], value=node.value), node)


class _SplitChains(ast.NodeTransformer):
    changed = 0

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:
        self.generic_visit(node)
        if len(node.values) <= 2:
            return node
        self.changed += 1
        left = node.values[0]
        for value in node.values[1:]:
            left = ast.BoolOp(op=node.op, values=[left, value])
        return ast.copy_location(left, node)


def _unannotate_assignments(func: ast.FunctionDef) -> int:
    visitor = _Unannotate()
    visitor.visit(func)
    return visitor.changed


def _split_boolean_chains(func: ast.FunctionDef) -> int:
    visitor = _SplitChains()
    visitor.visit(func)
    return visitor.changed


REWRITES: dict[str, Callable[[ast.FunctionDef], int]] = {
    "unannotate-parameters": _unannotate_parameters,
    "unannotate-assignments": _unannotate_assignments,
    "split-boolean-chains": _split_boolean_chains,
}


def derive(original: Any, rewrites: Mapping[str, int], unspecialize: tuple[str, ...] = ()) -> Any:
    """A new Triton JIT function from ``original``'s source after ``rewrites`` (name -> exact number of places it
    must change), not specialized on the parameters ``unspecialize`` names (besides those ``original`` already
    leaves alone). ``original`` is a JIT function, or vLLM's plain function where vLLM runs without Triton."""
    import triton

    unknown = sorted(set(rewrites) - set(REWRITES))
    if unknown:
        raise DerivationError(f"unknown rewrite(s) {', '.join(unknown)}; known: {', '.join(REWRITES)}")
    fn = getattr(original, "fn", original)
    qualified = f"{fn.__module__}:{fn.__name__}"
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    func = tree.body[0]
    if not isinstance(func, ast.FunctionDef) or func.name != fn.__name__:
        raise DerivationError(f"cannot read the source of {qualified}; pin vllm==0.26.0")
    func.decorator_list = []
    params = [arg.arg for arg in func.args.args]
    missing = [name for name in unspecialize if name not in params]
    if missing:
        raise DerivationError(f"{qualified} has no parameter {', '.join(missing)}: vLLM changed the kernel; update "
                              "portable_spec/kernels/substitutions.py or pin vllm==0.26.0")
    for name, expected in rewrites.items():
        changed = REWRITES[name](func)
        if changed != expected:
            raise DerivationError(f"{name} changed {changed} place(s) in {qualified}, expected {expected}: vLLM "
                                  "changed the kernel; update portable_spec/kernels/substitutions.py or pin "
                                  "vllm==0.26.0")
    source = ast.unparse(ast.fix_missing_locations(tree)) + "\n"
    filename = f"<portable_spec: derived {qualified}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace: dict[str, Any] = {}
    exec(compile(source, filename, "exec"), fn.__globals__, namespace)  # noqa: S102 - vLLM's own source, rewritten
    new_fn = namespace[fn.__name__]
    new_fn.__module__ = DERIVED_MODULE_PREFIX + fn.__module__
    setattr(new_fn, DERIVED_MARK, qualified)
    options = {k: list(getattr(original, k)) for k in ("do_not_specialize", "do_not_specialize_on_alignment")
               if getattr(original, k, None)}
    if unspecialize:
        kept = options.get("do_not_specialize", [])
        options["do_not_specialize"] = kept + [name for name in unspecialize if name not in kept]
    return triton.jit(new_fn, **options)
