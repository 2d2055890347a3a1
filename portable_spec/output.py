"""One way to print a result, shared by the CLI and the scripts beside it: ``--json`` gives one JSON object, otherwise
a human rendering. It sits below every layer so that vLLM-side scripts (``vllm_adapter.tools.attention_verify``) print the
same way without importing the CLI."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Callable


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    """``--json`` on a command or a command group. Unset stays absent (SUPPRESS) so that a group's ``--json``
    (``bench --json e2e``) is not reset by its subcommand's default; readers use ``wants_json``."""
    parser.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="print one JSON object instead of text (errors too)")


def wants_json(args: argparse.Namespace | None) -> bool:
    return bool(getattr(args, "json", False))


def emit(args: argparse.Namespace, payload: dict[str, Any], render: Callable[[dict[str, Any]], str]) -> None:
    """Print ``payload`` as one JSON object (``--json``) or as the human rendering."""
    if wants_json(args):
        json.dump(payload, sys.stdout, default=str)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render(payload).rstrip("\n") + "\n")


READER_GONE_EXIT = 141
"""Exit code when the reader closed stdout (``| head``): 128 + SIGPIPE, what a shell reports for any tool so cut."""


def reader_gone() -> int:
    """End a command whose reader closed stdout, quietly: no traceback (the output was wanted only up to there).
    stdout is pointed at /dev/null first, because Python flushes it again at exit and that flush would raise too."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):  # stdout without a file descriptor (captured): nothing is flushed to a pipe
        pass
    return READER_GONE_EXIT


def emit_error(message: str, exit_code: int, as_json: bool) -> int:
    """Print one failure and return its exit code: ``portable-spec: error: MESSAGE`` as one line on stderr, or with
    ``--json`` one JSON object ``{"error": MESSAGE, "exit": CODE}`` on stdout (the one shape every command uses)."""
    if as_json:
        json.dump({"error": message, "exit": exit_code}, sys.stdout)
        sys.stdout.write("\n")
    else:
        print(f"portable-spec: error: {message}", file=sys.stderr)
    return exit_code
