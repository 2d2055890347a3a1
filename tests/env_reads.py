"""Where this repository's modules and scripts read environment variables, found by reading their text.

Two checks stand on it: ``tests/test_envs.py`` (in the product only ``portable_spec/envs.py`` reads the environment)
and ``tests/test_environment_doc.py`` (every variable any module or script reads is in ``docs/environment.md``). A
variable a script reads without the docs naming it is a switch a user cannot find; reading the source, not a list
kept by hand, is what makes a new read show up.

Python: ``os.environ.get(N)``, ``os.getenv(N)``, ``os.environ[N]`` loads, ``N in os.environ`` and
``envs.recorded((N, ...))``, with ``N`` a string, a module-level string constant of the file, or a name of
``portable_spec.envs``. Bash: ``$N`` and ``${N...}`` reads of upper-case names outside comments, unless the script
assigns ``N`` itself before reading it (``N="${N:-x}"`` still reads the caller's ``N``).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from portable_spec import envs

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ("portable_spec", "harness", "ci", ".ci", "tests")
"""Every tree whose code runs in this repository: the product, the harness, the lanes and the tests."""


def _is_environ(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ" and getattr(node.value, "id", None) == "os"


def _read_key(node: ast.AST) -> ast.AST | None:
    """The expression naming the variable, when ``node`` reads one from ``os.environ``; else None."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if node.func.attr == "get" and _is_environ(node.func.value) and node.args:
            return node.args[0]
        if node.func.attr == "getenv" and getattr(node.func.value, "id", None) == "os" and node.args:
            return node.args[0]
    elif isinstance(node, ast.Subscript) and _is_environ(node.value) and isinstance(node.ctx, ast.Load):
        return node.slice
    elif isinstance(node, ast.Compare) and any(_is_environ(c) for c in node.comparators):
        return node.left
    return None


def environment_reads(path: Path) -> list[tuple[int, str]]:
    """``os.environ.get(...)``, ``os.getenv(...)``, ``os.environ[...]`` loads and ``... in os.environ`` in ``path``.
    Copies handed to a child process (``os.environ.items()``, ``dict(os.environ)``) and writes are not reads."""
    return [(node.lineno, ast.unparse(node)) for node in ast.walk(ast.parse(path.read_text(), str(path)))
            if _read_key(node) is not None]


def _constants(tree: ast.Module) -> dict[str, str]:
    """The file's module-level ``NAME = "text"`` constants and the names it imports from ``portable_spec.envs``."""
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            found.update({t.id: node.value.value for t in node.targets if isinstance(t, ast.Name)})
        elif isinstance(node, ast.ImportFrom) and node.module == "portable_spec.envs":
            found.update({a.asname or a.name: getattr(envs, a.name) for a in node.names
                          if isinstance(getattr(envs, a.name, None), str)})
    return found


def _name_of(key: ast.AST, constants: dict[str, str]) -> str | None:
    if isinstance(key, ast.Constant) and isinstance(key.value, str):
        return key.value
    if isinstance(key, ast.Name):
        return constants.get(key.id)
    if isinstance(key, ast.Attribute) and getattr(key.value, "id", None) == "envs":
        value = getattr(envs, key.attr, None)
        return value if isinstance(value, str) else None
    return None


def _written(tree: ast.Module) -> set[str]:
    """Names the file itself puts into an environment (``env["N"] = ...``, a dict key ``"N": ...``,
    ``monkeypatch.setenv("N", ...)``): a variable a file hands to its own child is no switch of anyone else's."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
            key = node.slice
        elif isinstance(node, ast.Dict):
            names.update(k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str))
            continue
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "setenv" and node.args:
            key = node.args[0]
        else:
            continue
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            names.add(key.value)
    return names


def python_reads(path: Path) -> tuple[dict[str, list[int]], list[tuple[int, str]]]:
    """``({name: [line, ...]}, [(line, expression) read under a name this scan cannot resolve]``) for one file."""
    tree = ast.parse(path.read_text(), str(path))
    constants, written = _constants(tree), _written(tree)
    names: dict[str, list[int]] = {}
    unresolved = []
    for node in ast.walk(tree):
        key = _read_key(node)
        keys = [key] if key is not None else []
        if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) == "recorded":
            keys = [e for arg in node.args if isinstance(arg, ast.Tuple) for e in arg.elts]
        for key in keys:
            name = _name_of(key, constants)
            if name is None:
                unresolved.append((node.lineno, ast.unparse(node)))
            elif name not in written:
                names.setdefault(name, []).append(node.lineno)
    return names, unresolved


_BASH_READ = re.compile(r"\$\{?([A-Z_][A-Z0-9_]*)")
_BASH_COMMENT = re.compile(r"(^|\s)#.*$")


def bash_reads(path: Path) -> dict[str, list[int]]:
    """``{name: [line, ...]}`` of the upper-case variables a bash script reads that it did not assign first."""
    lines = [_BASH_COMMENT.sub("", line) for line in path.read_text().splitlines()]
    reads: dict[str, list[int]] = {}
    for number, line in enumerate(lines, 1):
        for name in _BASH_READ.findall(line):
            reads.setdefault(name, []).append(number)
    own = {}
    for number, line in enumerate(lines, 1):
        for match in re.finditer(r"(?:^|[\s;(])(?:export\s+|local\s+|readonly\s+)?([A-Z_][A-Z0-9_]*)=(\S*)", line):
            name, value = match.groups()
            # ``N="${N:-x}"`` reads the caller's N; ``N=x cmd`` sets N for cmd only, and reads nothing.
            starts_statement = line[:match.start(1)].strip() in ("", "export", "local", "readonly")
            if starts_statement and name not in value and line.rstrip().endswith(value) and name not in own:
                own[name] = number
    return {name: at for name, at in reads.items() if name not in own or at[0] < own[name]}


def bash_scripts() -> list[Path]:
    """The shell scripts of the scanned trees: ``*.sh`` and extension-less files that start with a bash shebang."""
    found = []
    for top in SCANNED:
        for path in (ROOT / top).rglob("*"):
            if path.is_file() and (path.suffix == ".sh" or (not path.suffix and path.read_bytes()[:32].startswith(
                    b"#!/usr/bin/env bash"))):
                found.append(path)
    return sorted(found)


def python_files() -> list[Path]:
    return sorted(p for top in SCANNED for p in (ROOT / top).rglob("*.py") if "__pycache__" not in p.parts)


def every_read() -> tuple[dict[str, set[str]], list[tuple[str, int, str]], int]:
    """``({name: {file, ...}}, unresolved reads, files scanned)`` over every module and script of the repository."""
    readers: dict[str, set[str]] = {}
    unresolved = []
    files = python_files() + bash_scripts()
    for path in files:
        rel = str(path.relative_to(ROOT))
        if path.suffix == ".py":
            names, missed = python_reads(path)
            unresolved += [(rel, line, text) for line, text in missed]
        else:
            names = bash_reads(path)
        for name in names:
            readers.setdefault(name, set()).add(rel)
    return readers, unresolved, len(files)
