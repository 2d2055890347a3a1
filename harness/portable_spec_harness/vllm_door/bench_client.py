"""vLLM's own serving client, ``vllm bench serve`` (``vllm/benchmarks/serve.py``), run in the calling process: the
same parser and ``main`` the ``vllm bench serve`` command calls (``entrypoints/cli/benchmark/serve.py``), without a
new interpreter per run (importing vLLM's CLI takes seconds, and a benchmark makes dozens of runs)."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any


def parse(argv: list[str]) -> argparse.Namespace:
    """``argv`` as ``vllm bench serve`` parses it (an unknown or malformed flag exits like the command)."""
    from vllm.benchmarks.serve import add_cli_args
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser(prog="vllm bench serve")
    add_cli_args(parser)
    return parser.parse_args(argv)


def preload() -> None:
    """Import what ``bench_serve`` imports, ahead of its first run. Why: the first run in a process pays for importing
    vLLM's benchmark client (vLLM, torch, transformers), tens of seconds where the host CPU is slow, in that run's
    wall time and in the call's device time; imported while the servers boot, it costs nothing."""
    import vllm.benchmarks.serve  # noqa: F401
    import vllm.utils.argparse_utils  # noqa: F401


def bench_serve(argv: list[str]) -> dict[str, Any]:
    """One ``vllm bench serve ARGV``: what its ``main`` returns (the dict it saves with ``--save-result``)."""
    from vllm.benchmarks.serve import main

    args = parse(argv)
    logs_to_stderr()
    return main(args)


def logs_to_stderr() -> None:
    """vLLM's log lines in this process go to stderr: its handler writes to the stdout of import time, which a
    caller's ``--json`` keeps for one JSON object (what the client prints itself is routed by the caller)."""
    for handler in logging.getLogger("vllm").handlers:
        if isinstance(handler, logging.StreamHandler) and handler.stream in (sys.__stdout__, sys.stdout):
            handler.setStream(sys.stderr)
