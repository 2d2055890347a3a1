"""``portable-spec`` command line. Each subcommand lives in ``portable_spec.commands.<name>`` and registers itself.

Every user-facing failure is a ``PortableSpecError``: one line on stderr, exit code 2, no traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import NoReturn

from portable_spec import __version__
from portable_spec.errors import PortableSpecError

COMMANDS = ("probe", "sizes", "caps", "kernels", "bench")


class OneLineErrorParser(argparse.ArgumentParser):
    """argparse's usage errors as one line naming the fix (``--help``), like every other error; exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"portable-spec: error: {message} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(prog="portable-spec", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"portable-spec {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"portable_spec.commands.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except PortableSpecError as exc:
        print(f"portable-spec: error: {exc}", file=sys.stderr)
        return exc.exit_code


if __name__ == "__main__":
    sys.exit(main())
