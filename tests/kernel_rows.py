"""A Triton check row against the installed vLLM's kernel source, read without importing vLLM: whether the row gives
every parameter of the kernel a type or a value, types no constexpr and names no parameter the kernel lacks. Shared by
``test_triton_check.py`` (0.26.0's full check) and ``test_triton_table_span.py`` (each vLLM of the span)."""

from __future__ import annotations

import ast
import importlib.util
import os

VLLM_ROOT = os.path.dirname(os.path.dirname(importlib.util.find_spec("vllm").origin))


def vllm_function(module: str, attr: str) -> ast.FunctionDef:
    path = os.path.join(VLLM_ROOT, *module.split(".")) + ".py"
    return next(n for n in ast.parse(open(path, encoding="utf-8").read()).body
                if isinstance(n, ast.FunctionDef) and n.name == attr)


def params(func: ast.FunctionDef) -> tuple[list[str], set[str], set[str]]:
    """The parameters in order, those with a default, those annotated ``tl.constexpr``."""
    args = func.args.args
    defaults = {a.arg for a in args[len(args) - len(func.args.defaults):]}
    constexpr = {a.arg for a in args if a.annotation is not None and "constexpr" in ast.unparse(a.annotation)}
    return [a.arg for a in args], defaults, constexpr


def check_row(case, names: list[str], defaults: set[str], constexpr: set[str]) -> None:
    given = set(case.signature) | set(case.constexprs)
    assert given <= set(names), (case.key, given - set(names))
    assert set(names) - defaults <= given, (case.key, set(names) - defaults - given)
    assert not set(case.signature) & constexpr, (case.key, set(case.signature) & constexpr)
    assert set(case.constexprs) <= constexpr, (case.key, set(case.constexprs) - constexpr)
    assert not set(case.signature) & set(case.constexprs), case.key


def check_against_vllm(case) -> None:
    """``check_row`` against the kernel the row names in the installed vLLM's source."""
    check_row(case, *params(vllm_function(case.module, case.attr)))
