"""Static rules for what MUSA's Triton fork is known to reject beyond upstream Triton 3.2, applied to a kernel and to
every ``@triton.jit`` helper it calls.

Upstream 3.2 compiling a kernel is only a proxy for MUSA's fork: the fork's front end predates triton-lang/triton
PR #4412, and torchada replaces some intrinsics. Each rule cites its evidence. Helpers are resolved the way Triton
resolves them when it compiles a caller: by name in the CALLING function's module globals (``fn.__globals__``), at
the time of the check, so a helper substitute bound on that module is what the rules see. A helper's rejection makes
every caller rejected. Rules read source text; they need no GPU and no particular Triton version. Two kinds:
``hash`` rules hold wherever the text is, dead constexpr branches included, because Triton resolves ``tl.*``
attributes and helpers while hashing a kernel; ``compile`` rules hold only where the code generator goes, so a
branch the launch's constexpr values make dead (``if MULTI_GROUP:`` with ``MULTI_GROUP=False``) does not count, and
a helper called only from such a branch is checked by the ``hash`` rules alone.
"""

from __future__ import annotations

import ast
import inspect
import os
import sys
import textwrap
from dataclasses import dataclass, field
from typing import Any

from portable_spec.kernels.derive_rewrites import divides_unsigned_by_signed, unsigned_names


@dataclass(frozen=True)
class Rule:
    name: str
    rejects: str
    evidence: str
    when: str = "compile"  # "hash": anywhere in the source; "compile": only where the code generator goes


RULES: dict[str, Rule] = {rule.name: rule for rule in (
    Rule("annotated-assignment",
         "an annotated assignment (x: tl.int32 = 0) or an annotated parameter with a default (s: int = 1) whose "
         "annotation is not tl.constexpr; MUSA's Triton fails with \"'AnnAssign' object has no attribute 'targets'\"",
         "MooreThreads/vllm-musa 0.1.1's patch of find_seq_idx's 'left: tl.int32 = 0'; "
         "triton-lang/triton PR #4412 (visit_Assign learnt AnnAssign; parameter defaults are AnnAssign nodes); "
         "constexpr annotations take a separate path and pass (front ends before that PR, e.g. triton 3.0.0)"),
    Rule("tl-extra-cuda",
         "tl.extra.cuda (torchada aliases it to tl.extra.musa; gdc_wait and gdc_launch_dependents become stubs that "
         "raise NotImplementedError)",
         "torchada's _patch_triton_extra (torchada/_patch.py, applied on MUSA)", when="hash"),
    Rule("dtype-parameter-pointer",
         "tl.pointer_type(elem_dtype) where elem_dtype is a parameter (a dtype the caller passes, as in "
         "_load_ptr(ptr, tl.int32)): front ends before Triton 3.2 receive it as a constexpr and fail with "
         "\"element_ty is a constexpr.\", annotated tl.constexpr or not",
         "MooreThreads/vllm-musa patch 0032 (v1/worker/gpu/block_table: _load_ptr(.., tl.int32) -> a helper with "
         "tl.pointer_type(tl.int32)); front ends before triton-lang/triton PR #4412 (e.g. triton 3.0.0)"),
    Rule("unsigned-division",
         "floor division or modulo of a uint32/uint64 value by an int literal or a signed value "
         "((num_outliers + T - 1) // T with num_outliers = tl.zeros((), dtype=tl.uint32)): front ends before "
         "Triton 3.2 type the literal int32 and refuse (\"Cannot use /, #, or % with triton.language.uint32 and "
         "triton.language.int32 because they have different signedness\")",
         "MooreThreads/vllm-musa patch 0027 (v1/sample/ops/topk_topp_triton: these divisions rewritten on int32 "
         "values); front ends before triton-lang/triton PR #4412 (e.g. triton 3.0.0)"),
    Rule("tensor-descriptor",
         "a tensor descriptor (tl.make_tensor_descriptor) not inside an 'if hasattr(..., \"make_tensor_descriptor\")' "
         "guard; Triton 3.2 has none and resolves tl.* attributes while hashing, dead constexpr branches included",
         "Triton 3.2 has no tensor descriptors; torchada's MoE kernel guards it with hasattr", when="hash"),
)}

_PDL = {"gdc_wait", "gdc_launch_dependents"}
_DESCRIPTOR = {"make_tensor_descriptor", "_experimental_make_tensor_descriptor", "_experimental_descriptor_load",
               "_experimental_descriptor_store", "TensorDescriptor"}


@dataclass(frozen=True)
class Finding:
    rule: str
    function: str
    where: str
    code: str
    via: tuple[str, ...] = ()

    def line(self) -> str:
        """One line: rule, where, the offending code, and the helper chain that leads there."""
        chain = f" via {' -> '.join(self.via)}" if self.via else ""
        return f"{self.rule}: {self.function} ({self.where}){chain}: {self.code}"


@dataclass
class Scan:
    """What the rules found for one kernel: rejections, notes (accepted on evidence), and helpers followed."""

    findings: list[Finding] = field(default_factory=list)
    notes: list[Finding] = field(default_factory=list)
    helpers: list[str] = field(default_factory=list)

    @property
    def rejected(self) -> bool:
        return bool(self.findings)


def is_jit_function(obj: Any) -> bool:
    """A Triton ``JITFunction`` (or, under ``TRITON_INTERPRET=1``, an ``InterpretedFunction``)."""
    return inspect.isfunction(getattr(obj, "fn", None)) and type(obj).__name__ in ("JITFunction",
                                                                                   "InterpretedFunction")


def _triton_library(fn: Any) -> bool:
    """Triton's own ``@jit`` library (``tl.sum`` ...): part of the compiler under test, not of the kernel."""
    return fn.fn.__module__.split(".")[0] == "triton"


def _short_path(path: str) -> str:
    """``.../site-packages/vllm/x.py`` -> ``vllm/x.py`` (the longest ``sys.path`` entry that contains it)."""
    roots = [p for p in sys.path if p and path.startswith(os.path.join(os.path.abspath(p), ""))]
    return os.path.relpath(path, max(roots, key=len)) if roots else path


def full_name(fn: Any) -> str:
    return f"{fn.fn.__module__}.{fn.fn.__qualname__}"


def _source(fn: Any) -> tuple[ast.FunctionDef, str, int]:
    lines, start = inspect.getsourcelines(fn.fn)
    tree = ast.parse(textwrap.dedent("".join(lines)))
    func = next(node for node in tree.body if isinstance(node, ast.FunctionDef))
    return func, _short_path(inspect.getsourcefile(fn.fn) or "<unknown>"), start


def _is_constexpr(annotation: ast.expr) -> bool:
    return ast.unparse(annotation).split(".")[-1] == "constexpr"


def _guarded(node: ast.AST, parents: dict[ast.AST, ast.AST], name: str) -> bool:
    cur = parents.get(node)
    while cur is not None:
        if isinstance(cur, ast.If) and any(
                isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "hasattr"
                and any(isinstance(a, ast.Constant) and a.value == name for a in call.args)
                for call in ast.walk(cur.test)):
            return True
        cur = parents.get(cur)
    return False


def _resolve(node: ast.expr, scope: dict[str, Any], local: set[str]) -> Any:
    if isinstance(node, ast.Name):
        return None if node.id in local else scope.get(node.id)
    if isinstance(node, ast.Attribute):
        base = _resolve(node.value, scope, local)
        return getattr(base, node.attr, None) if base is not None else None
    return None


def _static_truth(test: ast.expr, known: dict[str, Any]) -> bool | None:
    """The value of an ``if`` test from the launch's constexpr values, or None where it is decided at run time."""
    if isinstance(test, ast.Constant):
        return bool(test.value)
    if isinstance(test, ast.Name):
        return bool(known[test.id]) if test.id in known else None
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _static_truth(test.operand, known)
        return None if inner is None else not inner
    if isinstance(test, ast.BoolOp):
        values = [_static_truth(v, known) for v in test.values]
        decisive = isinstance(test.op, ast.Or)  # the operand value that decides the whole expression
        if decisive in values:
            return decisive
        return None if None in values else not decisive
    if (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.left, ast.Name)
            and test.left.id in known and isinstance(test.comparators[0], ast.Constant)
            and isinstance(test.ops[0], (ast.Eq, ast.NotEq))):
        equal = known[test.left.id] == test.comparators[0].value
        return equal if isinstance(test.ops[0], ast.Eq) else not equal
    return None


def _dead_nodes(func: ast.FunctionDef, known: dict[str, Any]) -> set[int]:
    """ids of the AST nodes inside branches the constexpr values in ``known`` rule out."""
    dead: set[int] = set()
    for node in ast.walk(func):
        if isinstance(node, (ast.If, ast.IfExp)) and id(node) not in dead:
            truth = _static_truth(node.test, known)
            if truth is None:
                continue
            branch = node.orelse if truth else node.body
            for part in branch if isinstance(branch, list) else [branch]:
                dead.update(id(n) for n in ast.walk(part))
    return dead


def _own_findings(fn: Any, known: dict[str, Any]) -> tuple[list[Finding], list[Finding], list[Any], list[Any]]:
    """Rule hits in ``fn``'s own source, constexpr notes, and the JIT helpers it calls from live code and from code
    only the constexpr values in ``known`` rule out."""
    func, path, start = _source(fn)
    name = full_name(fn)
    scope = fn.fn.__globals__
    parents = {child: node for node in ast.walk(func) for child in ast.iter_child_nodes(node)}
    local = {a.arg for a in func.args.args} | {n.id for n in ast.walk(func)
                                               if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    dead = _dead_nodes(func, known)

    def at(node: ast.AST) -> str:
        return f"{path}:{start + node.lineno - 1}"

    hits: list[Finding] = []
    notes: list[Finding] = []
    unsigned = unsigned_names(func)
    params = {a.arg for a in func.args.args}
    args = func.args.args
    defaults = dict(zip([a.arg for a in args[len(args) - len(func.args.defaults):]], func.args.defaults))
    for arg in args:
        if arg.annotation is not None and arg.arg in defaults:
            code = f"{arg.arg}: {ast.unparse(arg.annotation)} = {ast.unparse(defaults[arg.arg])}"
            (notes if _is_constexpr(arg.annotation) else hits).append(
                Finding("annotated-assignment", name, at(arg), f"parameter {code}"))
    for node in ast.walk(func):
        live = id(node) not in dead
        if isinstance(node, ast.AnnAssign) and live:
            (notes if _is_constexpr(node.annotation) else hits).append(
                Finding("annotated-assignment", name, at(node), ast.unparse(node)))
        elif isinstance(node, ast.Attribute):
            text = ast.unparse(node)
            if ".extra.cuda" in f".{text}" and not isinstance(parents.get(node), ast.Attribute):
                hits.append(Finding("tl-extra-cuda", name, at(node), text))
            elif node.attr in _DESCRIPTOR and not _guarded(node, parents, node.attr):
                hits.append(Finding("tensor-descriptor", name, at(node), text))
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in local:
            value = scope.get(node.id)
            module = getattr(value, "__module__", "") or ""
            if node.id in _PDL or ".extra.cuda" in module:
                hits.append(Finding("tl-extra-cuda", name, at(node), node.id))
            elif node.id in _DESCRIPTOR and not _guarded(node, parents, node.id):
                hits.append(Finding("tensor-descriptor", name, at(node), node.id))
        elif (live and isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] == "pointer_type"
              and node.args and isinstance(node.args[0], ast.Name) and node.args[0].id in params):
            hits.append(Finding("dtype-parameter-pointer", name, at(node), ast.unparse(node)))
        elif live and divides_unsigned_by_signed(node, unsigned):
            hits.append(Finding("unsigned-division", name, at(node), ast.unparse(node)))
    helpers: dict[bool, list[Any]] = {True: [], False: []}
    for node in ast.walk(func):
        if isinstance(node, ast.Call):
            target = _resolve(node.func, scope, local)
            if is_jit_function(target) and not _triton_library(target):
                bucket = helpers[id(node) not in dead]
                if target not in bucket:
                    bucket.append(target)
    dead_only = [h for h in helpers[False] if h not in helpers[True]]
    return hits, notes, helpers[True], dead_only


def scan(kernel: Any, constexprs: dict[str, Any] | None = None) -> Scan:
    """Apply every rule to ``kernel`` and, transitively, to the helpers it calls (each visited once, or twice when a
    helper first met in dead code is also called from live code). ``constexprs`` are the launch's values for the
    kernel's constexpr parameters (defaults fill the rest); without them every branch counts as live. A helper's
    branches count as live (its constexpr arguments come from its callers)."""
    known = {} if constexprs is None else {**_constexpr_defaults(kernel), **constexprs}
    result = Scan()
    seen: dict[int, bool] = {}  # id -> visited as live code

    def visit(fn: Any, via: tuple[str, ...], live: bool, values: dict[str, Any]) -> None:
        if id(fn) in seen and (seen[id(fn)] or not live):
            return
        upgrade = id(fn) in seen  # met in dead code first: add what only live code adds
        seen[id(fn)] = live
        hits, notes, live_helpers, dead_helpers = _own_findings(fn, values)
        compile_rules = {r.name for r in RULES.values() if r.when == "compile"}
        wanted = compile_rules if upgrade else (set(RULES) - compile_rules) | (compile_rules if live else set())
        result.findings.extend(Finding(h.rule, h.function, h.where, h.code, via) for h in hits if h.rule in wanted)
        if live and not upgrade:
            result.notes.extend(Finding(n.rule, n.function, n.where, n.code, via) for n in notes)
        for helper in live_helpers + dead_helpers:
            if full_name(helper) not in result.helpers:
                result.helpers.append(full_name(helper))
            visit(helper, via + (helper.fn.__name__,), live and helper in live_helpers, {})

    visit(kernel, (), True, known)
    return result


def _constexpr_defaults(kernel: Any) -> dict[str, Any]:
    """Defaults of the parameters annotated ``tl.constexpr`` (a runtime parameter's default says nothing about the
    value a launch passes)."""
    func = _source(kernel)[0]
    constexpr = {a.arg for a in func.args.args if a.annotation is not None and _is_constexpr(a.annotation)}
    return {name: p.default for name, p in inspect.signature(kernel.fn).parameters.items()
            if name in constexpr and p.default is not inspect.Parameter.empty}
