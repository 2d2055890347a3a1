"""Helpers every subcommand shares: the ``--platform``/``--json`` flags and one way to print results."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Callable

from portable_spec.platforms import platform_names


def add_platform_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--platform", metavar="P",
                        help=f"one of {', '.join(platform_names())} (default: $VLLM_PLATFORM, else auto-detect)")


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")


def emit(args: argparse.Namespace, payload: dict[str, Any], render: Callable[[dict[str, Any]], str]) -> None:
    """Print ``payload`` as one JSON object (``--json``) or as the human rendering."""
    if getattr(args, "json", False):
        json.dump(payload, sys.stdout, default=str)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render(payload).rstrip("\n") + "\n")


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
