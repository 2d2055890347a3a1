"""Static rules for what MUSA's Triton fork is known to reject beyond upstream Triton 3.2, applied to a kernel and to
every ``@triton.jit`` helper it calls.

Upstream 3.2 compiling a kernel is only a proxy for MUSA's fork: the fork's front end predates triton-lang/triton
PR #4412, and torchada replaces some intrinsics. Each rule cites its evidence. Helpers are resolved the way Triton
resolves them when it compiles a caller: by name in the CALLING function's module globals (``fn.__globals__``), at
the time of the check, so a helper substitute bound on that module is what the rules see. A helper's rejection makes
every caller rejected. Rules read source text (dead constexpr branches included, as Triton's dependency hashing
does); they need no GPU and no particular Triton version.
"""

from __future__ import annotations

import ast
import inspect
import os
import sys
import textwrap
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Rule:
    name: str
    rejects: str
    evidence: str


RULES: dict[str, Rule] = {rule.name: rule for rule in (
    Rule("annotated-assignment",
         "an annotated assignment (x: tl.int32 = 0) or an annotated parameter with a default (s: int = 1) whose "
         "annotation is not tl.constexpr; MUSA's Triton fails with \"'AnnAssign' object has no attribute 'targets'\"",
         "MooreThreads/vllm-musa 0.1.1's patch of find_seq_idx's 'left: tl.int32 = 0'; "
         "triton-lang/triton PR #4412 (visit_Assign learnt AnnAssign; parameter defaults are AnnAssign nodes); "
         "constexpr annotations take a separate path and pass (measured with triton 3.0.0, see "
         "bench/results/2026-11-23-triton32-check/README.md)"),
    Rule("tl-extra-cuda",
         "tl.extra.cuda (torchada aliases it to tl.extra.musa; gdc_wait and gdc_launch_dependents become stubs that "
         "raise NotImplementedError)",
         "torchada's _patch_triton_extra (torchada/_patch.py, applied on MUSA)"),
    Rule("tensor-descriptor",
         "a tensor descriptor (tl.make_tensor_descriptor) not inside an 'if hasattr(..., \"make_tensor_descriptor\")' "
         "guard; Triton 3.2 has none and resolves tl.* attributes while hashing, dead constexpr branches included",
         "Triton 3.2 has no tensor descriptors; torchada's MoE kernel guards it with hasattr"),
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


def _own_findings(fn: Any) -> tuple[list[Finding], list[Finding], list[Any]]:
    """Rule hits in ``fn``'s own source, constexpr notes, and the JIT helpers it calls."""
    func, path, start = _source(fn)
    name = full_name(fn)
    scope = fn.fn.__globals__
    parents = {child: node for node in ast.walk(func) for child in ast.iter_child_nodes(node)}
    local = {a.arg for a in func.args.args} | {n.id for n in ast.walk(func)
                                               if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}

    def at(node: ast.AST) -> str:
        return f"{path}:{start + node.lineno - 1}"

    hits: list[Finding] = []
    notes: list[Finding] = []
    args = func.args.args
    defaults = dict(zip([a.arg for a in args[len(args) - len(func.args.defaults):]], func.args.defaults))
    for arg in args:
        if arg.annotation is not None and arg.arg in defaults:
            code = f"{arg.arg}: {ast.unparse(arg.annotation)} = {ast.unparse(defaults[arg.arg])}"
            (notes if _is_constexpr(arg.annotation) else hits).append(
                Finding("annotated-assignment", name, at(arg), f"parameter {code}"))
    for node in ast.walk(func):
        if isinstance(node, ast.AnnAssign):
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
    helpers = []
    for node in ast.walk(func):
        if isinstance(node, ast.Call):
            target = _resolve(node.func, scope, local)
            if is_jit_function(target) and target not in helpers and not _triton_library(target):
                helpers.append(target)
    return hits, notes, helpers


def scan(kernel: Any) -> Scan:
    """Apply every rule to ``kernel`` and, transitively, to the helpers it calls (each visited once)."""
    result = Scan()
    seen: set[int] = set()

    def visit(fn: Any, via: tuple[str, ...]) -> None:
        if id(fn) in seen:
            return
        seen.add(id(fn))
        hits, notes, helpers = _own_findings(fn)
        result.findings.extend(Finding(h.rule, h.function, h.where, h.code, via) for h in hits)
        result.notes.extend(Finding(n.rule, n.function, n.where, n.code, via) for n in notes)
        for helper in helpers:
            result.helpers.append(full_name(helper))
            visit(helper, via + (helper.fn.__name__,))

    visit(kernel, ())
    return result
