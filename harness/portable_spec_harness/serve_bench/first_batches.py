"""Does a served engine pause at its first batch of a size after boot? One ``vllm serve`` per variant (the serving
benchmark's servers, booted one at a time), then for each batch size a wave of that many streamed requests sent
together, and a second wave of the same size (the repeat); a first wave whose slowest time to first token exceeds its
repeat's by more than ``--pause-ms`` paused, and the engine-core thread's sampled stacks (``stack_sampler``) over
that wave say what it waited in.

    python -m portable_spec_harness.serve_bench.first_batches OUT --pair llama8b_eagle --mode dummy

Why a probe of its own: the serving benchmark's warm pass is each cell's first batch, and its client keeps only
medians, after the fact; on Model Runner V2 our platform's server waited 0.6-1.0 s at its first sampled batch of two
with no JIT-monitor line (``bench/results/2026-12-03-h200-session57/README.md``), which neither the join probe (one
request joining another) nor the sampling sweep (compiles only) can see. The waves here are the benchmark's own
requests (``plan.SAMPLING``, each seeded), sizes in order from 1, so each first wave is the server's first batch of
that size.

Writes ``OUT/first_batches.json`` and each server's log. A check, not a benchmark: it compares no speed between
variants. It exits 1 when one of ours (``ours``, ``ours_mrv2``, with or without a scheduling suffix) paused at a
first wave, compiled a kernel after boot or ran without vLLM's JIT monitor armed (``jit_judge``), or left a wave
incomplete; the other variants are reported as the baseline.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

from portable_spec_harness import jit_judge, vllm_serve
from portable_spec_harness.serve_bench import plan
from portable_spec_harness.serve_bench.join_probe import stream
from portable_spec_harness.serve_bench.one_server import HOST, booted, probe_servers, runner_name
from portable_spec_harness.serve_bench.servers import BenchServer
from portable_spec_harness.serve_bench.stack_sampler import window

WAVES = ("first", "repeat")
"""Each size is sent twice: the server's first batch of it, then one it has seen."""


def request_sampling(sampling: str, seed: int, size: int, wave: int) -> list[dict[str, Any]]:
    """The bodies' sampling of one wave: greedy, or ``plan.SAMPLING[sampling]`` with a seed per request, distinct
    across every request of the probe (as the benchmark's sampled runs seed each request)."""
    params = plan.SAMPLING[sampling]
    if params.get("temperature", 0.0) == 0.0:
        return [dict(params) for _ in range(size)]
    return [{**params, "seed": seed + 1000 * size + 100 * wave + i} for i in range(size)]


def wave_summary(sent: float, streams: list[list[float]]) -> dict[str, Any]:
    """One wave's requests as the probe reports them: each request's time to first token and chunks streamed, and
    the slowest first token (``None`` where a request streamed nothing)."""
    ttfts = [round((times[0] - sent) * 1000, 1) if times else None for times in streams]
    return {"sent": sent, "ttft_ms": ttfts, "chunks": [len(times) for times in streams],
            "max_ttft_ms": max(ttfts) if ttfts and None not in ttfts else None}


def pauses(waves: dict[str, dict[str, dict[str, Any]]], pause_ms: float) -> list[dict[str, Any]]:
    """Sizes whose first wave's slowest first token exceeded the repeat's by more than ``pause_ms``: size, excess and
    both waves' slowest first tokens. A size missing a wave, or a wave with a request that streamed nothing, is not
    judged here (``problems`` counts it)."""
    found = []
    for size, by_wave in waves.items():
        first, repeat = (by_wave.get(w, {}).get("max_ttft_ms") for w in WAVES)
        if first is None or repeat is None:
            continue
        if first - repeat > pause_ms:
            found.append({"size": int(size), "excess_ms": round(first - repeat, 1), "first_ms": first,
                          "repeat_ms": repeat})
    return found


async def probe_variant(server: BenchServer, out: Path, args: argparse.Namespace, vocab: int) -> dict[str, Any]:
    import aiohttp

    async with booted(server, out, args.boot_timeout) as (port, result):
        if port is None:
            return result
        result["sampler_start"] = await vllm_serve.collective_rpc(HOST, port, "portable_spec_bench_sampler_start")
        rng = random.Random(args.seed)
        url = f"http://{HOST}:{port}/v1/completions"
        waves: dict[str, dict[str, dict[str, Any]]] = {}
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=300)) as session:
            for size in args.sizes:
                for i, wave in enumerate(WAVES):
                    prompts = [[rng.randrange(10, vocab - 10) for _ in range(args.input_len)] for _ in range(size)]
                    streams: list[list[float]] = [[] for _ in range(size)]
                    sent = time.time()
                    await asyncio.gather(*(stream(session, url, server.pair.target, p, args.output_len, times, body)
                                           for p, times, body in zip(prompts, streams, request_sampling(
                                               args.sampling, args.seed, size, i))))
                    waves.setdefault(str(size), {})[wave] = wave_summary(sent, streams)
        report = await vllm_serve.collective_rpc(HOST, port, "portable_spec_bench_sampler_stop", timeout_s=120)
        result["sampler"] = {k: v for k, v in (report or {}).items() if k != "samples"}
        result["samples"] = len((report or {}).get("samples") or [])
        result["waves"] = waves
        result["pauses"] = pauses(waves, args.pause_ms)
        for pause in result["pauses"]:
            first = waves[str(pause["size"])]["first"]
            if report and "samples" in report:
                pause["engine"] = window(report, first["sent"], first["sent"] + first["max_ttft_ms"] / 1000)
    return result


def problems(results: list[dict[str, Any]], sizes: list[int]) -> tuple[int, list[str]]:
    """What our variants (of a kind in ``jit_judge.JUDGED_KINDS``, ``ours@async`` too) must show: both waves of every
    size, every request streaming, no pause, and ``jit_judge``'s verdict: no kernel JIT compile after boot with vLLM's
    JIT monitor armed. Returns the waves of ours compared and the problems (a probe that compared no wave of ours is
    one); the other variants are the baseline and are only reported."""
    compared, found = 0, []
    for result in (r for r in results if jit_judge.judged(r["variant"])):
        name, waves = result["variant"], result.get("waves") or {}
        complete = [w for size in sizes for w in (waves.get(str(size)) or {}).values()
                    if len(w["chunks"]) == size and all(w["chunks"])]
        if len(complete) != len(WAVES) * len(sizes):
            found.append(f"{name}: {len(complete)} of {len(WAVES) * len(sizes)} waves streamed every request")
        compared += len(complete)
        for pause in result.get("pauses") or []:
            found.append(f"{name}: its first batch of {pause['size']} paused {pause['excess_ms']} ms over the "
                         f"repeat ({pause['first_ms']} against {pause['repeat_ms']} ms to the slowest first token)")
        found += jit_judge.result_problems(result)
    if not compared:
        found.append(f"no wave of {', '.join(jit_judge.JUDGED_KINDS)} to compare")
    return compared, found


def write_report(out: Path, pair: Any, args: argparse.Namespace,
                 results: list[dict[str, Any]]) -> dict[str, Any]:
    """``OUT/first_batches.json`` with the variants probed so far and the verdict on them (written after each one);
    returns it."""
    compared, found = problems(results, args.sizes)
    report = {"pair": pair.as_json(), "settings": vars(args), "variants": results, "compared_waves": compared,
              "problems": found}
    (out / "first_batches.json").write_text(json.dumps(report, indent=1, default=str))
    return report


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(s) for s in text.split(",")]
    except ValueError:
        sizes = []
    if not sizes or any(s < 1 for s in sizes) or sizes != sorted(set(sizes)):
        raise argparse.ArgumentTypeError(f"--sizes {text!r}: give batch sizes from 1 up, comma-separated and "
                                         "increasing, e.g. 1,2,4,8,16,32")
    return sizes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m portable_spec_harness.serve_bench.first_batches")
    parser.add_argument("out")
    parser.add_argument("--pair", default="llama8b_eagle")
    parser.add_argument("--mode", default="dummy")
    parser.add_argument("--variants", default="ours_mrv2,mrv2")
    parser.add_argument("--sizes", type=_sizes, default=_sizes("1,2,4,8,16,32"),
                        help="batch sizes, increasing (default 1,2,4,8,16,32)")
    parser.add_argument("--sampling", choices=sorted(plan.SAMPLING), default="sampled")
    parser.add_argument("--input-len", type=int, default=1024)
    parser.add_argument("--output-len", type=int, default=32)
    parser.add_argument("--pause-ms", type=float, default=250.0,
                        help="a first wave's slowest first token over its repeat's that counts as a pause")
    parser.add_argument("--boot-timeout", type=float, default=600.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    probe = probe_servers(args.pair, args.mode, args.input_len, args.output_len, max(args.sizes),
                          "portable_spec_first_batches")
    results: list[dict[str, Any]] = []
    for variant in args.variants.split(","):
        results.append(asyncio.run(probe_variant(probe.server(variant), out, args, probe.vocab)))
        write_report(out, probe.pair, args, results)
        if not args.json:
            print("first batches: slowest first token ms per size, first / repeat", json.dumps(
                {r["variant"]: {size: [w.get("max_ttft_ms") for w in by_wave.values()]
                                for size, by_wave in (r.get("waves") or {}).items()} for r in results}), flush=True)
            print("first batches: runner, JIT compiles after boot", json.dumps(
                {r["variant"]: [runner_name(r.get("facts")), len(r.get("jit_after_boot") or [])] for r in results}),
                flush=True)
    report = write_report(out, probe.pair, args, results)
    if args.json:
        print(json.dumps(report, default=str))
    else:
        print(f"first batches: {report['compared_waves']} waves of ours compared; " +
              ("; ".join(report["problems"]) if report["problems"] else "no pause, no compile after boot"), flush=True)
    return 1 if report["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
