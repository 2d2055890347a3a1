#!/usr/bin/env python3
"""cuda lane: per-step FULL draft graphs — parity on cuda and musa-sim, and the draft micro-benchmark.

Usage: python ci/gpu/draft_suite.py OUTDIR [--compositions N] [--iters N] [--skip-bench] [--skip-parity]

Writes OUTDIR/draft_parity.json (EAGLE K=1..5 and DFlash K=8, N compositions each, on cuda and on musa-sim),
OUTDIR/draft_bench.json, OUTDIR/draft_bench.md (the ratio table) and OUTDIR/draft_bench.png (hidden 1024, vocab 32k, 1 layer, K=5, batch 1/4/16/64).
Exit code 0 only if every parity run matched and every bench ratio is within the limit. musa-sim results are
labelled musa-sim: a simulated torch.musa backed by torch.cuda, not MUSA hardware.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))  # repo root

PARITY_CONFIGS = [("eagle", k) for k in range(1, 6)] + [("dflash", 8)]


def stamp() -> dict:
    return {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
            "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}


def log(msg: str) -> None:
    print(f"[draft_suite {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def run_parity(outdir: str, compositions: int) -> bool:
    from portable_spec_harness.musa_sim_harness import musa_sim_platform
    from portable_spec_harness.parity import PARITY_MODEL, parity_suite
    from portable_spec.ports.cuda_port import CudaPort

    results = []
    for label, make in (("cuda", CudaPort), ("musa-sim", musa_sim_platform)):
        t0 = time.time()
        for res in parity_suite(make(), PARITY_CONFIGS, compositions):
            log(f"parity {label} {res['method']} K={res['num_spec']}: {res['matched']}/{res['compositions']} "
                f"({res['seconds']} s, {res['graphs_captured']} graphs, {res['padded_compositions']} padded)")
            results.append(res)
        log(f"parity {label} done in {time.time() - t0:.1f} s")
    ok = all(r["matched"] == r["compositions"] and r["first_mismatch"] is None for r in results)
    summary = {f"{r['platform']}/{r['method']}/K={r['num_spec']}": f"{r['matched']}/{r['compositions']}"
               for r in results}
    report = {"kind": "draft_parity", **stamp(), "compositions_per_config": compositions, "model": PARITY_MODEL,
              "summary": summary, "pass": ok, "results": results,
              "note": "eager at the same padded shape vs graph replay, draft tokens and fp32 draft logits compared "
                      "bit for bit; musa-sim = simulated torch.musa backed by torch.cuda (not MUSA hardware)"}
    with open(os.path.join(outdir, "draft_parity.json"), "w") as fh:
        json.dump(report, fh, indent=2, default=str)
    return ok


def run_bench(outdir: str, iters: int) -> bool:
    from portable_spec_harness.draft_bench import DraftBenchConfig, render_table, run_draft_bench, write_plot
    from portable_spec.ports.cuda_port import CudaPort

    cfg = DraftBenchConfig(method="eagle", hidden=1024, vocab=32000, layers=1, num_spec=5,
                           batch_sizes=[1, 4, 16, 64], iters=iters)
    report = run_draft_bench(CudaPort(), cfg)
    report.update({"cuda": torch.version.cuda})
    report["plot"] = write_plot(report, os.path.join(outdir, "draft_bench.png"))
    if report["plot"] is None:
        log("matplotlib is missing: draft_bench.png not written (render it from the JSON with "
            "`python -m portable_spec_harness.draft_bench_plot OUTDIR/draft_bench.json`)")
    with open(os.path.join(outdir, "draft_bench.json"), "w") as fh:
        json.dump(report, fh, indent=2, default=str)
    table = render_table(report)
    with open(os.path.join(outdir, "draft_bench.md"), "w") as fh:
        fh.write("```\n" + table + "\n```\n\n" + report["method_note"] + "\n")
    log("\n" + table)
    return bool(report["pass"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("outdir")
    parser.add_argument("--compositions", type=int, default=1000, help="parity compositions per config")
    parser.add_argument("--iters", type=int, default=300, help="timed proposals per bench measurement")
    parser.add_argument("--skip-bench", action="store_true")
    parser.add_argument("--skip-parity", action="store_true")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("draft_suite: no CUDA device; run it on the cuda lane", file=sys.stderr)
        return 2
    os.makedirs(args.outdir, exist_ok=True)
    ok = True
    if not args.skip_bench:  # the benchmark first, on a quiet device
        ok &= run_bench(args.outdir, args.iters)
    if not args.skip_parity:
        ok &= run_parity(args.outdir, args.compositions)
    log(f"overall: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
