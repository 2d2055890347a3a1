"""Helpers the subcommands share: the ``--platform`` flag, output paths checked up front, and a plain rendering
(``--json`` and printing live in ``portable_spec.output``)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from portable_spec.errors import PortableSpecError
from portable_spec.ports import platform_names
from portable_spec.ports.registry import checked_platform_name

INSTALL_VLLM = "pip install -e '.[vllm]'"
"""How README.md installs vLLM 0.26.0 with the project on a GPU host (from the clone); errors quote it as is."""


def add_platform_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--platform", metavar="P", type=platform_flag,
                        help=f"one of {', '.join(platform_names())} (default: $VLLM_PLATFORM, else auto-detect)")


def platform_flag(value: str) -> str:
    """``--platform`` as given (each command names an unknown one in its own terms); an empty one is refused here,
    for every command, since commands read an empty value as "not given" and would silently auto-detect."""
    if not value.strip():
        checked_platform_name(value, source="--platform")  # raises the one line naming the fix
    return value


def render_mapping(payload: dict[str, Any], indent: int = 0) -> str:
    """A plain ``key: value`` rendering, nested mappings indented."""
    lines = []
    for key, value in payload.items():
        if isinstance(value, dict):
            lines.append(" " * indent + f"{key}:")
            lines.append(render_mapping(value, indent + 2))
        else:
            lines.append(" " * indent + f"{key}: {value}")
    return "\n".join(lines)


# -- output paths: checked before any long work, since results are written at its end --------------------------------
def _unusable(flag: str, path: str, why: str, fix: str) -> PortableSpecError:
    return PortableSpecError(f"cannot use {flag} {path!r}: {why}: pass {fix}")


def _nearest_existing(path: str) -> str:
    """``path`` or its closest ancestor that exists (what creating ``path`` depends on)."""
    current = os.path.abspath(path)
    while not os.path.lexists(current):
        current = os.path.dirname(current)
    return current


def check_out_dir(path: str, flag: str = "--out") -> None:
    """Fail in one line unless ``path`` is, or can be created as, a writable directory. Creates nothing: a run that
    fails later for another reason leaves no empty folder behind."""
    fix = "a writable directory (created if missing)"
    existing = _nearest_existing(path)
    if existing == os.path.abspath(path) and not os.path.isdir(existing):
        raise _unusable(flag, path, "it is a file, not a directory", fix)
    if not os.path.isdir(existing):
        raise _unusable(flag, path, f"{existing!r} is a file, not a directory", fix)
    if not os.access(existing, os.W_OK | os.X_OK):
        raise _unusable(flag, path, f"{existing!r} is not writable", fix)


def check_out_file(path: str, flag: str) -> None:
    """Fail in one line unless a file can be written at ``path``: its directory exists (nothing creates it) and
    is writable, and ``path`` is not itself a directory."""
    fix = "a file path in an existing writable directory"
    parent = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise _unusable(flag, path, "it is a directory", fix)
    if not os.path.isdir(parent):
        what = "is a file, not a directory" if os.path.lexists(parent) else "does not exist"
        raise _unusable(flag, path, f"{parent!r} {what}", fix)
    if not os.access(parent, os.W_OK | os.X_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise _unusable(flag, path, "it is not writable", fix)


def ensure_out_dir(path: str, flag: str = "--out") -> None:
    """Create the output directory when the work starts (``check_out_dir`` vetted it before)."""
    check_out_dir(path, flag)
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise _unusable(flag, path, exc.strerror or str(exc), "a writable directory") from None
