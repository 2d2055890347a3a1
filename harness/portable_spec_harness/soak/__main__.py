"""``python -m portable_spec_harness.soak OUTDIR``: the serving soak of issue 22 (``ci/lanes/cuda.sh OUT soak``).

Boots per pair the no-speculation server, vLLM's eager drafter and ours (plus both drafters without async scheduling
for ``--sync-pairs``), all at once on one GPU, drives the seeded load against all of them, and writes
``OUTDIR/soak.json`` (``--json`` prints it too), ``soak_table.txt``, each server's log, each pair's workload and
every request's outcome. ``--tp N`` runs every server at tensor parallel N (``--disable-custom-all-reduce
--no-fuse-allreduce-rms`` too on a host without NVLink multicast, whose multicast every server keeps off at any TP:
``parallel.Parallel``). Exit 0 when the soak passed; 1 when it failed or could not make a condition happen on this
host (``incomplete``: e.g. the structured-output backend is not installed); 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from portable_spec_harness.parallel import Parallel, add_parallel_flags
from portable_spec_harness.soak import budget, driver, report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m portable_spec_harness.soak",
        description="The serving soak (issue 22): vllm serve with our drafter and its references under a seeded load.")
    parser.add_argument("outdir", type=Path)
    parser.add_argument("--pairs", default=",".join(driver.DEFAULT_PAIRS),
                        help="model-zoo pairs (default: %(default)s)")
    parser.add_argument("--sync-pairs", default=",".join(driver.DEFAULT_SYNC_PAIRS),
                        help="pairs that also run both drafters with --no-async-scheduling ('' for none; default: "
                             "%(default)s)")
    parser.add_argument("--requests", type=int, default=budget.REQUESTS, help="requests per server (%(default)s)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--zoo", type=Path, default=Path("/tmp/portable_spec_zoo"), help="where the pairs are built")
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object")
    add_parallel_flags(parser)  # every server of the soak at that TP, all on GPUs 0..N-1
    args = parser.parse_args(argv)
    parallel = Parallel.from_args(args)
    if parallel.problem():
        parser.error(parallel.problem())
    from portable_spec_harness.model_zoo import PAIRS

    pairs = [p for p in args.pairs.split(",") if p]
    sync = [p for p in args.sync_pairs.split(",") if p]
    unknown = [p for p in pairs + sync if p not in PAIRS]
    if unknown or not pairs or not set(sync) <= set(pairs):
        parser.error(f"pairs must be model-zoo pairs ({', '.join(PAIRS)}) and --sync-pairs among --pairs; got "
                     f"{', '.join(unknown) or args.sync_pairs}")
    if args.requests < 20:
        parser.error("--requests must be at least 20 (every request class needs a few)")
    say = (lambda line: print(line, file=sys.stderr, flush=True)) if args.json else \
        (lambda line: print(line, flush=True))
    result = driver.run_soak(args.outdir, pairs, sync, args.requests, args.seed, build=driver.zoo_build(args.zoo),
                             say=say, parallel=parallel)
    if args.json:
        print(json.dumps(result))
    else:
        print(report.table(result))
    return 0 if result["status"] == "passed" else 1


if __name__ == "__main__":
    sys.exit(main())
