"""``portable-spec bench``: the benchmarks, which ship with the harness (the distribution ``portable-spec-harness``,
``harness/`` in the repository), not with the product.

The product never imports the harness: the harness declares its command under the entry-point group
``portable_spec.commands``, and this module forwards ``bench``'s arguments to it. Without the harness, one line says
how to get it (exit 2)."""

from __future__ import annotations

import argparse
from importlib.metadata import entry_points

from portable_spec.errors import PortableSpecError

COMMAND_GROUP = "portable_spec.commands"
HARNESS_MISSING = ("portable-spec bench comes with the harness, which is not installed: from a clone of the "
                   "repository, pip install --no-deps -e harness/")


def register(sub: argparse._SubParsersAction) -> None:
    """Listed in ``portable-spec --help``; ``cli.main`` hands everything after ``bench`` to ``forward``."""
    sub.add_parser("bench", add_help=False,
                   help="benchmarks (needs the harness, portable-spec-harness): draft steps, vLLM end to end, "
                        "an e2e report's per-step breakdown, several reports pooled")


def forward(argv: list[str]) -> int:
    """Run the harness's ``bench`` command on ``argv`` (the arguments after ``bench``)."""
    found = [ep for ep in entry_points(group=COMMAND_GROUP) if ep.name == "bench"]
    if not found:
        raise PortableSpecError(HARNESS_MISSING)
    return int(found[0].load()(argv) or 0)
