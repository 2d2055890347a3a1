"""``portable-spec`` command line. Each subcommand lives in ``portable_spec.commands.<name>`` and registers itself.

Every user-facing failure is a ``PortableSpecError`` (argparse's usage errors included): one line on stderr, or with
``--json`` one JSON object on stdout (``output.emit_error``), exit code 2, no traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import NoReturn

from portable_spec import __version__
from portable_spec.errors import PortableSpecError, UsageError
from portable_spec.output import emit_error, reader_gone, wants_json
from portable_spec.ports import env_platform_name

COMMANDS = ("probe", "sizes", "caps", "kernels", "census", "bench")

DESCRIPTION = """\
Run vLLM's speculative-decoding drafter under FULL graphs on NVIDIA CUDA, AMD ROCm and
Moore Threads MUSA. Serving is `VLLM_PLATFORM=cuda|rocm|musa vllm serve ...`; these
commands plan and check a deployment: capture sizes, attention backends, kernel
substitutions, the device's graphs, and benchmarks."""

EPILOG = """\
example:
  portable-spec sizes --method eagle3 --num-spec 3 --max-num-seqs 64 --platform musa

'portable-spec COMMAND --help' lists a command's options. Every command takes --json;
bad input exits 2 with one line that names the fix."""


class OneLineErrorParser(argparse.ArgumentParser):
    """argparse's usage errors as one line naming the fix (``--help``), like every other error; exit code 2."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{self.prog} --help')")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(prog="portable-spec", description=DESCRIPTION, epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"portable-spec {__version__}")
    parser.set_defaults(json=False)  # the commands' --json flags leave it absent unless given (output.add_json_flag)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"portable_spec.commands.{name}").register(sub)
    return parser


def run_parsed(parser: argparse.ArgumentParser, argv: list[str]) -> int:
    """Parse ``argv`` and run the chosen command's ``func``; every ``PortableSpecError`` becomes one line (or one
    JSON object with ``--json``) and its exit code. The harness's ``bench`` command runs through this too."""
    args = None
    try:
        args = parser.parse_args(argv)
        if getattr(args, "platform", None) is None:  # --platform beats VLLM_PLATFORM, a wrong one included
            env_platform_name()  # a wrong VLLM_PLATFORM fails here, also for commands that do not read it
        return int(args.func(args) or 0)
    except PortableSpecError as exc:
        # Before the arguments parse, ``--json`` is known only from the raw command line.
        as_json = wants_json(args) if args is not None else "--json" in argv
        return emit_error(str(exc), exc.exit_code, as_json)


def main(argv: list[str] | None = None) -> int:
    """Every command, and argparse's help, under one guard: a reader that closes stdout early (``| head``) ends the
    command quietly instead of in a ``BrokenPipeError`` traceback."""
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        try:
            return _dispatch(argv)
        finally:  # argparse's --help exits too: a buffered tail meets the closed pipe here, not at interpreter exit
            sys.stdout.flush()
    except BrokenPipeError:
        return reader_gone()


def _dispatch(argv: list[str]) -> int:
    if argv[:1] == ["bench"]:  # the harness's command parses its own arguments (commands/bench.py)
        from portable_spec.commands.bench import forward

        try:
            return forward(argv[1:])
        except PortableSpecError as exc:
            return emit_error(str(exc), exc.exit_code, "--json" in argv)
    return run_parsed(build_parser(), argv)


if __name__ == "__main__":
    sys.exit(main())
