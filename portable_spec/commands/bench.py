"""``portable-spec bench``: benchmarks. ``bench draft``: eager vs per-step FULL draft graphs vs a whole-loop graph,
against the profiler's summed kernel time (``bench e2e`` joins later as another sub-command)."""

from __future__ import annotations

import argparse
import json
import os

from portable_spec.commands._common import add_json_flag, add_platform_flag, emit
from portable_spec.errors import PortableSpecError
from portable_spec.platforms import select_platform


def _int_list(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.replace(",", " ").split()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values:
        raise argparse.ArgumentTypeError("expected at least one batch size")
    return values


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("bench", help="benchmarks (draft: per-step FULL draft graphs vs eager)")
    bench_sub = parser.add_subparsers(dest="bench_command", required=True, metavar="BENCH")
    _register_draft(bench_sub)


def _register_draft(bench_sub: argparse._SubParsersAction) -> None:
    p = bench_sub.add_parser("draft", help="time per draft step: eager, per-step FULL graphs, whole-loop graph, "
                                           "and the summed kernel time (torch profiler)")
    p.add_argument("--method", default="eagle", choices=["eagle", "dflash"],
                   help="synthetic draft step (default eagle)")
    p.add_argument("--hidden", type=int, default=1024, metavar="H", help="hidden size (default 1024)")
    p.add_argument("--vocab", type=int, default=32000, metavar="V", help="vocabulary size (default 32000)")
    p.add_argument("--layers", type=int, default=1, metavar="L", help="decoder layers (default 1)")
    p.add_argument("--num-spec", type=int, default=5, metavar="K", help="draft tokens per step (default 5)")
    p.add_argument("--batch-sizes", type=_int_list, default=[1, 4, 16, 64], metavar="LIST",
                   help="comma-separated request counts (default 1,4,16,64)")
    p.add_argument("--context-len", type=int, default=512, metavar="N", help="context tokens per request (default 512)")
    p.add_argument("--max-model-len", type=int, default=1024, metavar="N", help="KV capacity per request")
    p.add_argument("--iters", type=int, default=200, metavar="N", help="timed proposals per measurement")
    p.add_argument("--warmup", type=int, default=20, metavar="N", help="untimed proposals first")
    p.add_argument("--probabilistic", action="store_true", help="also write draft logits [reqs, K, vocab]")
    p.add_argument("--kv-layout", default="paged", choices=["paged", "contiguous"], help="KV cache layout")
    p.add_argument("--out", metavar="DIR", help="write draft_bench.json and draft_bench.png into DIR")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    add_platform_flag(p)
    add_json_flag(p)
    p.set_defaults(func=run_draft)


def run_draft(args: argparse.Namespace) -> int:
    from portable_spec.draft.bench import DraftBenchConfig, render_table, run_draft_bench, write_plot

    cfg = DraftBenchConfig(method=args.method, hidden=args.hidden, vocab=args.vocab, layers=args.layers,
                           num_spec=args.num_spec, batch_sizes=args.batch_sizes, context_len=args.context_len,
                           max_model_len=args.max_model_len, iters=args.iters, warmup=args.warmup,
                           probabilistic=args.probabilistic, kv_layout=args.kv_layout)
    cfg.validate()
    platform = select_platform(args.platform)
    if not platform.supports_graphs:
        raise PortableSpecError(f"bench draft needs device graphs; platform {platform.name!r} has none: "
                                "run it on a GPU host (--platform cuda, rocm or musa)")
    report = run_draft_bench(platform, cfg, progress=not args.no_progress and not args.json)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        png = write_plot(report, os.path.join(args.out, "draft_bench.png"))
        report["plot"] = png
        with open(os.path.join(args.out, "draft_bench.json"), "w") as fh:
            json.dump(report, fh, indent=2, default=str)
    emit(args, report, render_table)
    return 0
