"""One way to print a result, shared by the CLI and the scripts beside it: ``--json`` gives one JSON object, otherwise
a human rendering. It sits below every layer so that vLLM-side scripts (``vllm_adapter.tools.attention_verify``) print the
same way without importing the CLI."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Callable


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")


def emit(args: argparse.Namespace, payload: dict[str, Any], render: Callable[[dict[str, Any]], str]) -> None:
    """Print ``payload`` as one JSON object (``--json``) or as the human rendering."""
    if getattr(args, "json", False):
        json.dump(payload, sys.stdout, default=str)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render(payload).rstrip("\n") + "\n")
