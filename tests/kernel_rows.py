"""A Triton check row against the installed vLLM's kernel source, read without importing vLLM: whether the row gives
every parameter of the kernel a type or a value, types no constexpr and names no parameter the kernel lacks, and the
source walk that lists the ``@triton.jit`` kernels a vLLM package launches. Shared by ``test_triton_check.py`` (0.26.0's
full check), ``test_rocm_compile.py`` and ``test_triton_table_span.py`` (each vLLM of the span)."""

from __future__ import annotations

import ast
import importlib.util
import os

VLLM_ROOT = os.path.dirname(os.path.dirname(importlib.util.find_spec("vllm").origin))


def vllm_function(module: str, attr: str) -> ast.FunctionDef:
    path = os.path.join(VLLM_ROOT, *module.split(".")) + ".py"
    func = next((n for n in ast.parse(open(path, encoding="utf-8").read()).body
                 if isinstance(n, ast.FunctionDef) and n.name == attr), None)
    assert func is not None, f"{module} has no {attr}"
    return func


def jit_names(path: str) -> set[str]:
    """The module-level ``@triton.jit`` functions of one source file."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef)
            and any("jit" in ast.unparse(d) for d in n.decorator_list)}


MRV2_ROOT = os.path.join(VLLM_ROOT, "vllm", "v1", "worker", "gpu")


def launched_jit_kernels(root: str) -> dict[str, str]:
    """``"module:name"`` -> file for every ``@triton.jit`` function under ``root`` that its own module launches
    (``name[grid](...)``); a jit function nobody launches is a helper, which the check follows from its callers."""
    found = {}
    for dirpath, _, files in os.walk(root):
        for file in (f for f in files if f.endswith(".py")):
            path = os.path.join(dirpath, file)
            tree = ast.parse(open(path, encoding="utf-8").read())
            launched = {n.value.id for n in ast.walk(tree) if isinstance(n, ast.Subscript)
                        and isinstance(n.value, ast.Name)}
            module = os.path.relpath(path, VLLM_ROOT)[:-3].replace(os.sep, ".")
            found.update({f"{module}:{name}": path for name in jit_names(path) & launched})
    return found


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
