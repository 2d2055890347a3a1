"""Render ``draft_bench.png`` from a ``draft_bench.json`` (for hosts where the benchmark ran without matplotlib).

Usage: python -m portable_spec_harness.draft_bench_plot path/to/draft_bench.json [out.png]
"""

from __future__ import annotations

import json
import os
import sys

from portable_spec_harness.draft_bench import write_plot


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    with open(args[0]) as fh:
        report = json.load(fh)
    out = args[1] if len(args) > 1 else os.path.join(os.path.dirname(os.path.abspath(args[0])), "draft_bench.png")
    if write_plot(report, out) is None:
        print("bench_plot: matplotlib is not installed (pip install matplotlib)", file=sys.stderr)
        return 2
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
