"""``portable-spec bench``: benchmarks. ``bench draft``: eager vs per-step FULL draft graphs vs a whole-loop graph,
against the profiler's summed kernel time. ``bench e2e``: vLLM end to end (V1 without speculation, upstream V1,
V1 + our FULL drafter, Model Runner V2) on a generated model pair. ``bench breakdown``: an e2e report's per-step
breakdown. ``bench pool``: several e2e reports of one pair judged together (``e2e/pool.py``).

The product's ``portable-spec bench`` forwards here through the entry point ``portable_spec.commands:bench``."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os

from portable_spec.commands._common import (
    INSTALL_VLLM,
    add_platform_flag,
    check_out_dir,
    check_out_file,
    ensure_out_dir,
)
from portable_spec.output import add_json_flag, emit, wants_json
from portable_spec.errors import PortableSpecError
from portable_spec.ports import platform_class, select_platform


def _int_list(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.replace(",", " ").split()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values:
        raise argparse.ArgumentTypeError("expected at least one integer")
    return values


def check_minimums(args: argparse.Namespace, minimums: dict[str, tuple[int, str]]) -> None:
    """Reject a numeric flag below its minimum (``dest: (minimum, example)``) before any device or model work."""
    for dest, (minimum, example) in minimums.items():
        value = getattr(args, dest)
        if any(v < minimum for v in (value if isinstance(value, list) else [value])):
            flag = "--" + dest.replace("_", "-")
            raise PortableSpecError(f"{flag} must be >= {minimum} (got {value}): pass {flag} {example}")


E2E_MINIMUMS = {"num_spec": (1, "1 or more"), "concurrency": (1, "1,4,16,64"), "tokens": (1, "1 or more"),
                "repeats": (1, "1 or more"), "timeout": (1, "1 or more (seconds)"), "tp": (1, "1 or 2"),
                "profile_concurrency": (1, "1 or more")}
DRAFT_MINIMUMS = {"hidden": (1, "1 or more"), "vocab": (1, "1 or more"), "layers": (1, "1 or more"),
                  "num_spec": (1, "1 or more"), "context_len": (1, "1 or more"), "max_model_len": (1, "1 or more"),
                  "iters": (1, "1 or more"), "warmup": (0, "0 or more")}


def e2e_host_problem(tp: int = 1) -> str | None:
    """Why ``bench e2e`` cannot run on this host, or None. Counts GPUs through NVML (``fork_safe``): the engines
    it boots are separate processes that must still be able to initialise CUDA."""
    from portable_spec.ports.fork_safe import visible_device_count

    if not platform_class("cuda").is_active():
        return ("bench e2e needs an NVIDIA GPU and vLLM 0.26.0; no CUDA device is visible here: run it on a GPU "
                "host (check the driver and CUDA_VISIBLE_DEVICES)")
    if visible_device_count() < tp:
        return (f"--tp {tp} needs {tp} GPUs but {visible_device_count()} are visible: lower --tp or run on a host "
                "with more GPUs")
    if importlib.util.find_spec("vllm") is None:
        return f"bench e2e needs vLLM 0.26.0, which is not installed: {INSTALL_VLLM}"
    return None


def build_parser() -> argparse.ArgumentParser:
    from portable_spec.cli import OneLineErrorParser

    parser = OneLineErrorParser(prog="portable-spec bench",
                                description="benchmarks: draft steps (graphs vs eager), vLLM end to end, the per-step "
                                            "breakdown of an e2e report, and several e2e reports pooled")
    parser.set_defaults(json=False)
    add_json_flag(parser)  # ``bench --json SUB`` as well as ``bench SUB --json``
    bench_sub = parser.add_subparsers(dest="bench_command", required=True, metavar="BENCH")
    _register_draft(bench_sub)
    _register_e2e(bench_sub)
    _register_breakdown(bench_sub)
    _register_pool(bench_sub)
    return parser


def main(argv: list[str]) -> int:
    """``portable-spec bench ARGS``: the product's CLI forwards here (entry point ``portable_spec.commands:bench``)."""
    from portable_spec.cli import run_parsed

    return run_parsed(build_parser(), list(argv))


def _register_e2e(bench_sub: argparse._SubParsersAction) -> None:
    from portable_spec_harness.e2e.configs import VARIANTS
    from portable_spec_harness.e2e.gc_pauses import GC_HEAP_MODES

    p = bench_sub.add_parser("e2e", help="vLLM end to end: output tok/s, TPOT and acceptance length per engine "
                                         "variant and concurrency (needs vLLM 0.26.0 on a GPU host)")
    p.add_argument("--pair", default="llama_eagle", help="generated model pair (default llama_eagle)")
    p.add_argument("--target", metavar="DIR", help="your own target checkpoint directory (instead of --pair)")
    p.add_argument("--draft", metavar="DIR", help="your own draft checkpoint directory (with --target)")
    p.add_argument("--method", help="speculative method of --draft: eagle, eagle3, mtp or dflash (with --target)")
    p.add_argument("--model-variant", default="perfect", help="perfect | partial | attention (default perfect)")
    p.add_argument("--num-spec", type=int, default=3, metavar="K", help="speculative tokens (default 3)")
    p.add_argument("--concurrency", type=_int_list, default=[1, 4, 16, 64], metavar="LIST",
                   help="comma-separated concurrencies (default 1,4,16,64)")
    p.add_argument("--variants", default="nospec,upstream_v1,full_drafter,mrv2",
                   help=f"comma-separated engine variants from {', '.join(sorted(VARIANTS))}")
    p.add_argument("--tokens", type=int, default=256, metavar="N", help="output tokens per request (default 256)")
    p.add_argument("--repeats", type=int, default=5, metavar="N",
                   help="timed passes per variant and concurrency, interleaved across variants; the median is "
                        "reported (default 5)")
    p.add_argument("--timeout", type=int, default=540, metavar="S",
                   help="seconds for all variants to boot (they boot together), and per profile")
    p.add_argument("--gc-heap", choices=GC_HEAP_MODES, default="frozen",
                   help="each engine's Python heap after boot: frozen as vllm serve freezes it (default), or live "
                        "(full collections of the boot's objects then land in timed passes)")
    p.add_argument("--out", metavar="DIR", default="bench-e2e", help="where bench_e2e.json/.png and logs go")
    p.add_argument("--profile", action="store_true",
                   help="also record a torch-profiler summary of decoding per variant, with the per-step breakdown")
    p.add_argument("--profile-concurrency", type=int, default=1, metavar="C",
                   help="requests in the profiled pass (default 1; at most the largest --concurrency)")
    from portable_spec_harness.parallel import add_parallel_flags

    add_parallel_flags(p)
    add_json_flag(p)
    p.set_defaults(func=run_e2e)


def e2e_variants(args: argparse.Namespace) -> tuple[str, ...]:
    """The engine variants ``--variants`` names; unknown or none is a one-line error."""
    from portable_spec_harness.e2e.configs import VARIANTS

    variants = tuple(v.strip() for v in args.variants.split(",") if v.strip())
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown or not variants:
        raise PortableSpecError(f"unknown engine variant(s) {', '.join(unknown) or '(none given)'}; pass --variants "
                                f"with names from {', '.join(sorted(VARIANTS))}")
    return variants


def e2e_models(args: argparse.Namespace) -> dict[str, str] | None:
    """The operator's own checkpoints (``--target``, ``--draft``, ``--method``), or None for the generated
    ``--pair``; either is checked here, on any host, before the GPU host check."""
    from portable_spec_harness.e2e.bench import check_checkpoint_method, checkpoint_pair
    from portable_spec_harness.model_zoo import pair_problem

    if not (args.target or args.draft or args.method):
        problem = pair_problem(args.pair, args.model_variant)
        if problem:
            raise PortableSpecError(f"--pair {args.pair} --model-variant {args.model_variant}: {problem}")
        return None
    if args.method:
        check_checkpoint_method(args.method)
    if not (args.target and args.method):
        raise PortableSpecError("your own models need --target DIR and --method M (and --draft DIR except for mtp)")
    return checkpoint_pair(args.target, args.draft, args.method)


def check_e2e_input(args: argparse.Namespace) -> tuple[tuple[str, ...], dict[str, str] | None]:
    """Every flag of ``bench e2e`` checked before anything touches a GPU: ``(variants, own checkpoints)``."""
    variants = e2e_variants(args)
    check_minimums(args, E2E_MINIMUMS)
    if args.profile_concurrency > max(args.concurrency):
        raise PortableSpecError(f"--profile-concurrency {args.profile_concurrency} exceeds the largest --concurrency "
                                f"{max(args.concurrency)} (the engines' max_num_seqs): pass one of "
                                f"{','.join(map(str, args.concurrency))}")
    checkpoint = e2e_models(args)
    check_out_dir(args.out)
    return variants, checkpoint


def run_e2e(args: argparse.Namespace) -> int:
    from portable_spec_harness.e2e.bench import run_bench
    from portable_spec_harness.parallel import Parallel

    variants, checkpoint = check_e2e_input(args)
    problem = e2e_host_problem(args.tp)
    if problem:
        raise PortableSpecError(problem)
    ensure_out_dir(args.out)
    report = run_bench(args.out, pair=args.pair, model_variant=args.model_variant, k=args.num_spec,
                       concurrency=tuple(args.concurrency), variants=variants, bench_tokens=args.tokens,
                       repeats=args.repeats, timeout_s=args.timeout, profile=args.profile,
                       profile_concurrency=args.profile_concurrency, parallel=Parallel.from_args(args).child_args(),
                       checkpoint=checkpoint, gc_heap=args.gc_heap)
    emit(args, report, render_e2e)
    return 0


def paired_text(cell: dict) -> str:
    if not cell.get("passes"):
        return "no passes" + (f" ({cell['verdict']} at {cell['bound']})" if "verdict" in cell else "")
    text = f"{cell['median']:.3f}x [{cell['interval'][0]:.3f}, {cell['interval'][1]:.3f}] of {cell['passes']}"
    if "verdict" in cell:
        text += f" {cell['verdict']} at {cell['bound']}"
        if cell.get("passes_to_decide"):
            text += f" (~{cell['passes_to_decide']} passes to decide)"
    return text


def ratio_lines(summary: dict) -> list[str]:
    """One line per ratio of medians (``<ours>_over_<other>``) and per paired key of a bench (or pooled) summary."""
    lines = [f"{key}: " + ", ".join(f"c={c}: {r:.3f}x" for c, r in ratios.items())
             for key, ratios in summary.items() if "_over_" in key]
    # the per-pass ratios: median [interval] and, for a bound, the verdict
    return lines + [f"{key}: " + ", ".join(f"c={c}: " + paired_text(cell) for c, cell in cells.items())
                    for key, cells in summary.items() if key.startswith("paired_")]


def render_e2e(report: dict) -> str:
    from portable_spec_harness.e2e.bench import pair_label

    lines = [f"{pair_label(report)}, K={report['k']}, TP={report.get('tensor_parallel_size', 1)}, {report['device']}, "
             f"vLLM {report['vllm']}",
             f"{'variant':<14}" + "".join(f"{'c=' + str(c):>12}" for c in report["concurrency"])]
    for variant, row in report["summary"]["output_tok_s"].items():
        lines.append(f"{variant:<14}" + "".join(f"{row.get(c, float('nan')):>12.1f}" for c in report["concurrency"]))
    for variant, cells in report["summary"].get("gc_full_collections", {}).items():
        lines.append(f"full collections in timed passes, {variant} (heap {report.get('gc_heap')}): "
                     + ", ".join(f"c={c}: {n}" for c, n in cells.items()))
    for variant, cells in report["summary"].get("stalls", {}).items():  # steps over 2x the pass's median step
        lines.append(f"stalled steps in timed passes, {variant}: " + ", ".join(
            f"c={c}: {s['stall_ms']:.0f} ms in {s['passes_with_stall']}/{s['passes']} passes" for c, s in cells.items()))
    lines += ratio_lines(report["summary"])
    runners = [f"{row['variant']} {row.get('runner_kind') or ('mrv2' if row.get('use_v2_model_runner') else 'v1')}"
               for row in report["results"] if "use_v2_model_runner" in row]
    if runners:  # which runner each engine built (vLLM picks it for the MRV2 variants)
        lines.append("runner: " + ", ".join(runners))
    from portable_spec_harness.e2e.breakdown_report import breakdowns_of, clock_section, clocks_of, render_table

    table = render_table(breakdowns_of(report))
    at = report.get("profile_concurrency") or 1
    where = f"per-step breakdown at concurrency {at} (profiled pass)"
    return "\n".join(lines + (["", where, table] if table else []) + clock_section(clocks_of(report), at))


def _register_breakdown(bench_sub: argparse._SubParsersAction) -> None:
    p = bench_sub.add_parser("breakdown", help="the per-step breakdown (host and device ms per phase and variant) of "
                                               "a bench e2e JSON, as a table and optionally a PNG")
    p.add_argument("file", metavar="FILE.json", help="a bench_e2e.json written by bench e2e --profile")
    p.add_argument("--png", metavar="OUT", help="also write the stacked bar chart to OUT")
    add_json_flag(p)
    p.set_defaults(func=run_breakdown)


def run_breakdown(args: argparse.Namespace) -> int:
    from portable_spec_harness.e2e.bench import pair_label
    from portable_spec_harness.e2e.breakdown_report import breakdowns_of, render_table, write_png

    if args.png:
        check_out_file(args.png, "--png")
    try:
        with open(args.file) as fh:
            report = json.load(fh)
    except (OSError, ValueError) as exc:
        raise PortableSpecError(f"cannot read {args.file!r} ({getattr(exc, 'strerror', None) or exc}): pass a "
                                "bench_e2e.json") from None
    breakdowns = breakdowns_of(report) if isinstance(report, dict) else {}
    if not breakdowns:
        raise PortableSpecError(f"{args.file} has no per-step breakdown: re-run bench e2e with --profile (reports "
                                "before the breakdown existed have none)")
    from portable_spec_harness.e2e.breakdown_report import clock_section, clocks_of

    clocks = clocks_of(report)
    table = "\n".join([render_table(breakdowns), *clock_section(clocks, report.get("profile_concurrency"))])
    payload = {"file": args.file, "table": table, "breakdown": breakdowns, "phase_clock": clocks}
    if args.png:
        title = (f"{pair_label(report)}, K={report.get('k')}, {report.get('device')}, vLLM {report.get('vllm')}"
                 if "pair" in report else "")
        if write_png(breakdowns, args.png, title) is None:
            raise PortableSpecError("--png needs matplotlib, which is not installed: pip install matplotlib")
        payload["png"] = args.png
    emit(args, payload, lambda p: p["table"] + (f"\nwrote {p['png']}" if p.get("png") else ""))
    return 0


def _register_pool(bench_sub: argparse._SubParsersAction) -> None:
    p = bench_sub.add_parser("pool", help="one judgement from several bench e2e reports of one pair: their per-pass "
                                          "ratios pooled (passes pair only within a report), as JSON and a PNG")
    p.add_argument("files", nargs="+", metavar="FILE.json",
                   help="bench_e2e.json files written by bench e2e (one pair, model variant, K and --tokens)")
    p.add_argument("--out", metavar="DIR", required=True, help="where bench_pool.json and bench_pool.png go")
    add_json_flag(p)
    p.set_defaults(func=run_pool)


def run_pool(args: argparse.Namespace) -> int:
    from portable_spec_harness.e2e.pool import FIX, load_reports, plot_pool, pool_reports

    for path in args.files:
        if not os.path.isfile(path):
            raise PortableSpecError(f"no such file {path!r}: {FIX}")
    check_out_dir(args.out)
    pooled = pool_reports(load_reports(args.files), args.files)
    ensure_out_dir(args.out)
    written = [os.path.join(args.out, "bench_pool.json")]
    with open(written[0], "w") as fh:
        json.dump(pooled, fh, indent=1)
    png = plot_pool(pooled, os.path.join(args.out, "bench_pool.png"))
    no_png = None if png else NO_PNG  # said in the output, never left for the reader to notice
    emit(args, {**pooled, "written": written + ([png] if png else []), "no_png": no_png}, render_pool)
    return 0


NO_PNG = "no bench_pool.png: matplotlib is not installed (pip install matplotlib; the harness depends on it)"


def render_pool(pooled: dict) -> str:
    from portable_spec_harness.e2e.bench import pair_label

    lines = [f"{pair_label(pooled)}, K={pooled['k']}, TP={','.join(map(str, pooled['tensor_parallel_sizes']))}, "
             f"{', '.join(pooled['devices'])}, vLLM {', '.join(pooled['vllm'])}: {len(pooled['reports'])} reports "
             "pooled (passes pair only within a report)", *ratio_lines(pooled["summary"])]
    for report in pooled["reports"]:  # each boot's own medians: how far one report alone could mislead
        parts = [f"{name} " + ", ".join(f"c={c}: {over:.3f}x (paired {entry['paired'][c]:.3f}x)"
                                        for c, over in entry["over"].items())
                 for name, entries in pooled["per_report"].items()
                 for entry in entries if entry["source"] == report["path"]]
        lines.append(f"{report['path']}: {report['date']}, {report['device']}, vLLM {report['vllm']}, "
                     f"{report['repeats']} repeats; " + "; ".join(parts))
    lines += [f"wrote {path}" for path in pooled.get("written", [])]
    return "\n".join(lines + ([pooled["no_png"]] if pooled.get("no_png") else []))


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
    from portable_spec_harness.draft_bench import DraftBenchConfig, render_table, run_draft_bench, write_plot

    cfg = DraftBenchConfig(method=args.method, hidden=args.hidden, vocab=args.vocab, layers=args.layers,
                           num_spec=args.num_spec, batch_sizes=args.batch_sizes, context_len=args.context_len,
                           max_model_len=args.max_model_len, iters=args.iters, warmup=args.warmup,
                           probabilistic=args.probabilistic, kv_layout=args.kv_layout)
    check_minimums(args, DRAFT_MINIMUMS)
    cfg.validate()
    if args.out:
        check_out_dir(args.out)
    platform = select_platform(args.platform)
    if not platform.supports_graphs:
        raise PortableSpecError(f"bench draft needs device graphs; platform {platform.name!r} has none: "
                                "run it on a GPU host (--platform cuda, rocm or musa)")
    if args.out:
        ensure_out_dir(args.out)
    report = run_draft_bench(platform, cfg, progress=not args.no_progress and not wants_json(args))
    if args.out:
        png = write_plot(report, os.path.join(args.out, "draft_bench.png"))
        report["plot"] = png
        with open(os.path.join(args.out, "draft_bench.json"), "w") as fh:
            json.dump(report, fh, indent=2, default=str)
    emit(args, report, render_table)
    return 0
