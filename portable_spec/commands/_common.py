"""Helpers the subcommands share: the ``--platform`` flag and a plain rendering (``--json`` and printing live in
``portable_spec.output``)."""

from __future__ import annotations

import argparse
from typing import Any

from portable_spec.platforms import platform_names


def add_platform_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--platform", metavar="P",
                        help=f"one of {', '.join(platform_names())} (default: $VLLM_PLATFORM, else auto-detect)")


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
