"""Where a served engine's time goes when a long prompt joins a running decode: one ``vllm serve`` per variant (the
serving benchmark's servers, booted one at a time), a streamed request decoding, a second long prompt sent after
``--join-after`` of its streamed chunks (engine steps), repeated with fresh prompts; every streamed token's arrival time, the stalls (a gap
over ``--stall-ms``) and, for each stall, what the engine-core thread was doing (``stack_sampler``: its Python stack
every 5 ms and the garbage collector's pauses, lined up on the host's clock).

    python -m portable_spec_harness.serve_bench.join_probe OUT --pair llama_eagle --mode attention

Writes ``OUT/join_probe.json`` (and each server's log). A check, not a benchmark: it compares no speed between
variants. It exits 1 when one of ours (``ours``, ``ours_mrv2``, with or without a scheduling suffix) stalled, compiled
a kernel after boot or ran without vLLM's JIT monitor armed (``jit_judge``), or streamed fewer repeats than asked
(``problems``); the other variants are reported as the baseline.
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

from portable_spec_harness import vllm_serve
from portable_spec_harness import jit_judge
from portable_spec_harness.serve_bench import plan
from portable_spec_harness.serve_bench.one_server import HOST, booted, probe_servers, runner_name
from portable_spec_harness.serve_bench.servers import BenchServer
from portable_spec_harness.serve_bench.stack_sampler import window


SAMPLED = plan.SAMPLING["sampled"]
"""``--sampled``: the serving benchmark's sampled requests (issue 41), so the probe also reaches the sampler's kernels
after boot."""


async def stream(session: Any, url: str, model: str, prompt: list[int], max_tokens: int,
                 times: list[float], sampling: dict[str, Any]) -> None:
    """One streamed completion; appends each chunk's arrival time (``time.time``) to ``times``."""
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "ignore_eos": True, "stream": True,
            **sampling}
    async with session.post(url, json=body) as response:
        response.raise_for_status()
        async for raw in response.content:
            line = raw.decode(errors="replace").strip()
            if line.startswith("data:") and line != "data: [DONE]":
                times.append(time.time())


async def scenario(session: Any, url: str, model: str, prompts: tuple[list[int], list[int]], output_len: int,
                   join_after: int, sampling: tuple[dict[str, Any], dict[str, Any]]) -> dict[str, list[float]]:
    """Request A decodes; B (a long prompt) is sent once A has streamed ``join_after`` tokens."""
    a_times: list[float] = []
    b_times: list[float] = []
    a = asyncio.create_task(stream(session, url, model, prompts[0], output_len, a_times, sampling[0]))
    while len(a_times) < join_after and not a.done():
        await asyncio.sleep(0.001)
    sent = time.time()
    await asyncio.gather(a, stream(session, url, model, prompts[1], output_len, b_times, sampling[1]))
    return {"a": a_times, "b": b_times, "b_sent": sent}


def stalls(times: list[float], threshold_s: float) -> list[tuple[float, float]]:
    return [(t0, t1) for t0, t1 in zip(times, times[1:]) if t1 - t0 > threshold_s]


async def probe_variant(server: BenchServer, out: Path, args: argparse.Namespace, vocab: int) -> dict[str, Any]:
    import aiohttp

    async with booted(server, out, args.boot_timeout) as (port, result):
        if port is None:
            return result
        started = await vllm_serve.collective_rpc(HOST, port, "portable_spec_bench_sampler_start")
        result["sampler_start"] = started
        rng = random.Random(args.seed)
        url = f"http://{HOST}:{port}/v1/completions"
        runs = []
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=300)) as session:
            for i in range(args.repeats):
                prompts = tuple([rng.randrange(10, vocab - 10) for _ in range(args.input_len)] for _ in range(2))
                runs.append(await scenario(session, url, server.pair.target, prompts, args.output_len,
                                           args.join_after, request_sampling(args, i)))
        report = await vllm_serve.collective_rpc(HOST, port, "portable_spec_bench_sampler_stop", timeout_s=120)
        result["sampler"] = {k: v for k, v in (report or {}).items() if k != "samples"}
        result["samples"] = len((report or {}).get("samples") or [])
        threshold = args.stall_ms / 1000
        result["runs"] = []
        for i, run in enumerate(runs):
            found = []
            for name in ("a", "b"):
                for t0, t1 in stalls(run[name], threshold):
                    found.append({"request": name, "ms": round((t1 - t0) * 1000, 1),
                                  "after_b_sent_ms": round((t0 - run["b_sent"]) * 1000, 1),
                                  **({"engine": window(report, t0, t1)} if report and "samples" in report else {})})
            gaps = [t1 - t0 for name in ("a", "b") for t0, t1 in zip(run[name], run[name][1:])]
            result["runs"].append({"repeat": i, "tokens": {n: len(run[n]) for n in ("a", "b")},
                                   "max_gap_ms": round(max(gaps) * 1000, 1) if gaps else None,
                                   "b_ttft_ms": round((run["b"][0] - run["b_sent"]) * 1000, 1) if run["b"] else None,
                                   "stalls": found})
    return result


def problems(results: list[dict[str, Any]], repeats: int) -> tuple[int, list[str]]:
    """What our variants (of a kind in ``jit_judge.JUDGED_KINDS``, ``ours@async`` too) must show: every repeat ran
    with both requests streaming, no stall, and ``jit_judge``'s verdict: no kernel JIT compile after boot with vLLM's
    JIT monitor armed. Returns the runs compared and the problems (a probe that compared no run of ours is one); the
    other variants are the baseline and are only reported."""
    compared, found = 0, []
    ours = [r for r in results if jit_judge.judged(r["variant"])]
    for result in ours:
        name, runs = result["variant"], result.get("runs") or []
        if len(runs) != repeats or any(not all(run["tokens"].values()) for run in runs):
            found.append(f"{name}: {len(runs)} of {repeats} repeats streamed both requests")
        compared += len(runs)
        stalls = [s["ms"] for run in runs for s in run["stalls"]]
        if stalls:
            found.append(f"{name}: {len(stalls)} stall(s) of {', '.join(map(str, stalls))} ms")
        found += jit_judge.result_problems(result)
    if not compared:
        found.append(f"no run of {', '.join(jit_judge.JUDGED_KINDS)} to compare")
    return compared, found


def request_sampling(args: argparse.Namespace, repeat: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """Requests A and B of one repeat: greedy, or ``SAMPLED`` with a seed of their own (reproducible runs)."""
    if not args.sampled:
        return dict(plan.SAMPLING["greedy"]), dict(plan.SAMPLING["greedy"])
    return tuple({**SAMPLED, "seed": args.seed + 2 * repeat + j} for j in range(2))  # type: ignore[return-value]


def write_report(out: Path, pair: Any, args: argparse.Namespace,
                 results: list[dict[str, Any]]) -> tuple[int, list[str]]:
    """``OUT/join_probe.json`` with the variants probed so far and the verdict on them (written after each one)."""
    compared, found = problems(results, args.repeats)
    (out / "join_probe.json").write_text(json.dumps({"pair": pair.as_json(), "settings": vars(args),
                                                     "variants": results, "compared_runs": compared,
                                                     "problems": found}, indent=1, default=str))
    return compared, found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m portable_spec_harness.serve_bench.join_probe")
    parser.add_argument("out")
    parser.add_argument("--pair", default="llama_eagle")
    parser.add_argument("--mode", default="attention")
    parser.add_argument("--variants", default="ours,upstream_v1")
    parser.add_argument("--input-len", type=int, default=1024)
    parser.add_argument("--output-len", type=int, default=128)
    parser.add_argument("--join-after", type=int, default=8,
                        help="streamed chunks of A before B is sent (a chunk holds every token of one engine step)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--stall-ms", type=float, default=100.0)
    parser.add_argument("--boot-timeout", type=float, default=420.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sampled", action="store_true",
                        help=f"sampled requests ({SAMPLED}, seeded) instead of greedy")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    probe = probe_servers(args.pair, args.mode, args.input_len, args.output_len, 2, "portable_spec_join_probe")
    results: list[dict[str, Any]] = []
    for variant in args.variants.split(","):
        results.append(asyncio.run(probe_variant(probe.server(variant), out, args, probe.vocab)))
        write_report(out, probe.pair, args, results)
        print("join probe: max gap ms per repeat", json.dumps({r["variant"]: [run["max_gap_ms"] for run in
                                                                r.get("runs", [])] for r in results}), flush=True)
        print("join probe: runner, JIT compiles after boot", json.dumps(
            {r["variant"]: [runner_name(r.get("facts")), len(r.get("jit_after_boot") or [])] for r in results}), flush=True)
    compared, found = write_report(out, probe.pair, args, results)
    print(f"join probe: {compared} runs of ours compared; " + ("; ".join(found) if found else "no stall, no compile "
                                                                "after boot"), flush=True)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
