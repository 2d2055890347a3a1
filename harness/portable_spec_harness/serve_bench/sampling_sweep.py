"""Does any sampling a user can ask for compile a kernel after boot? One ``vllm serve`` per variant (the serving
benchmark's servers, booted one at a time), then every request kind of ``KINDS`` alone, each beside a greedy request,
and all of them in one batch; afterwards vLLM's JIT monitor lines in the server's log.

    python -m portable_spec_harness.serve_bench.sampling_sweep OUT --variants ours_mrv2,mrv2

Why a sweep of its own: the serving benchmark and the join probe send one sampled profile (temperature and top-p),
while the sampler's kernels specialize on more than that (top-k alone, min-p, penalties, the logprobs count, seeded
or not, a batch that mixes greedy and sampled rows). The kinds are written from the OpenAI API's parameters, not from
our warm-up's plan, so the sweep can find a kind the plan missed. A kind vLLM refuses (HTTP 400) on every variant is
reported as refused, not as a failure; a kind one of ours refuses while a baseline serves it is a problem.

Writes ``OUT/sampling_sweep.json`` and each server's log. A check, not a benchmark: exit 1 when one of ours
(``ours``, ``ours_mrv2``) compiled a kernel after boot, failed a request a baseline served, served none, or ran without
vLLM's JIT monitor armed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
from pathlib import Path
from typing import Any

from portable_spec_harness import jit_judge
from portable_spec_harness.serve_bench import plan
from portable_spec_harness.serve_bench.one_server import HOST, booted, probe_servers
from portable_spec_harness.serve_bench.servers import BenchServer

KINDS: dict[str, dict[str, Any]] = {
    "greedy": {"temperature": 0.0},
    "temperature": {"temperature": 0.8},
    "temperature_seeded": {"temperature": 0.8, "seed": 11},
    "top_p": {"temperature": 0.8, "top_p": 0.95},
    "top_p_seeded": {"temperature": 0.8, "top_p": 0.95, "seed": 12},
    "top_k": {"temperature": 0.8, "top_k": 50},
    "top_k_top_p": {"temperature": 0.8, "top_k": 50, "top_p": 0.9},
    "top_k_top_p_seeded": {"temperature": 0.8, "top_k": 50, "top_p": 0.9, "seed": 13},
    "min_p": {"temperature": 0.8, "min_p": 0.05},
    "penalties": {"temperature": 0.8, "presence_penalty": 0.5, "frequency_penalty": 0.3, "repetition_penalty": 1.1},
    "logit_bias": {"temperature": 0.8, "logit_bias": {"100": 2.0}},
    "greedy_logprobs_1": {"temperature": 0.0, "logprobs": 1},
    "greedy_logprobs_5": {"temperature": 0.0, "logprobs": 5},
    "sampled_logprobs_5": {"temperature": 0.8, "top_p": 0.95, "logprobs": 5},
    "sampled_logprobs_20": {"temperature": 0.8, "logprobs": 20},
    "prompt_logprobs": {"temperature": 0.0, "prompt_logprobs": 1},
}
"""Request kinds by the OpenAI completions parameters a client sends (vLLM's extensions ``top_k``, ``min_p``,
``repetition_penalty``, ``prompt_logprobs`` included)."""


async def complete(session: Any, url: str, model: str, prompt: list[int], max_tokens: int,
                   sampling: dict[str, Any]) -> dict[str, Any]:
    """One completion; its HTTP status, tokens produced and, on an error, the first line of vLLM's message."""
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "ignore_eos": True, **sampling}
    async with session.post(url, json=body) as response:
        text = await response.text()
    if response.status != 200:
        return {"status": response.status, "error": text.strip().splitlines()[0][:300] if text.strip() else ""}
    usage = (json.loads(text).get("usage") or {})
    return {"status": 200, "tokens": usage.get("completion_tokens", 0)}


ALL = "all"
"""The last batch: every kind the variant served alone, sent together (one refused kind would fail it whole)."""


def batches(kinds: list[str]) -> list[tuple[str, list[str]]]:
    """Every kind alone, then every kind beside a greedy request (a batch mixing greedy and sampled rows); ``ALL``
    follows, from what the variant served."""
    return [(kind, [kind]) for kind in kinds] + [(f"{kind}+greedy", [kind, "greedy"]) for kind in kinds
                                                if kind != "greedy"]


async def sweep_variant(server: BenchServer, out: Path, args: argparse.Namespace, vocab: int) -> dict[str, Any]:
    import aiohttp

    async with booted(server, out, args.boot_timeout) as (port, result):
        if port is None:
            return result
        rng = random.Random(args.seed)
        url = f"http://{HOST}:{port}/v1/completions"
        result["batches"] = {}
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=300)) as session:

            async def send(name: str, kinds: list[str]) -> None:
                prompts = [[rng.randrange(10, vocab - 10) for _ in range(args.input_len)] for _ in kinds]
                outcomes = await asyncio.gather(*(complete(session, url, server.pair.target, p, args.output_len,
                                                           KINDS[k]) for p, k in zip(prompts, kinds)))
                result["batches"][name] = [{"kind": k, **o} for k, o in zip(kinds, outcomes)]

            for name, kinds in batches(args.kinds):
                await send(name, kinds)
            ok = served(result)
            alone = [k for k in args.kinds if ok.get(k)]
            if alone:
                await send(ALL, alone)
    return result


def served(result: dict[str, Any]) -> dict[str, bool]:
    """Per batch: every request of it answered with tokens."""
    return {name: all(o["status"] == 200 and o.get("tokens", 0) > 0 for o in outcomes)
            for name, outcomes in (result.get("batches") or {}).items()}


def problems(results: list[dict[str, Any]], expected_batches: int) -> tuple[int, list[str]]:
    """What our variants (of a kind in ``jit_judge.JUDGED_KINDS``, ``ours@async`` too) must show: every batch sent,
    each one a baseline served also served by ours, and ``jit_judge``'s verdict: no kernel JIT compile after boot with
    vLLM's JIT monitor armed. Returns the requests of ours served and the problems (a sweep that served no request of
    ours is one); the other variants are the baseline and are only reported."""
    ours = [r for r in results if jit_judge.judged(r["variant"])]
    baseline = [served(r) for r in results if r not in ours]
    compared, found = 0, []
    for result in ours:
        name, ok = result["variant"], served(result)
        if len(ok) != expected_batches:
            found.append(f"{name}: {len(ok)} of {expected_batches} batches sent")
        compared += sum(len(result["batches"][b]) for b, good in ok.items() if good)
        lost = sorted(b for b, good in ok.items() if not good and (not baseline or any(s.get(b) for s in baseline)))
        if lost:
            found.append(f"{name}: {len(lost)} batch(es) failed that " +
                         ("a baseline served" if baseline else "no baseline was run for") + f": {', '.join(lost)}")
        found += jit_judge.result_problems(result)
    if not compared:
        found.append(f"no request of {', '.join(jit_judge.JUDGED_KINDS)} served")
    return compared, found


def refused(results: list[dict[str, Any]]) -> list[str]:
    """Batches no variant served (vLLM's own limits with speculation, e.g. a parameter it refuses)."""
    per_variant = [served(r) for r in results if r.get("batches")]
    names = set().union(*per_variant) if per_variant else set()
    return sorted(b for b in names if not any(s.get(b) for s in per_variant))


def write_report(out: Path, pair: Any, args: argparse.Namespace,
                 results: list[dict[str, Any]]) -> tuple[int, list[str]]:
    expected = len(batches(args.kinds)) + 1  # and ALL
    compared, found = problems(results, expected)
    (out / "sampling_sweep.json").write_text(json.dumps(
        {"pair": pair.as_json(), "settings": vars(args), "kinds": {k: KINDS[k] for k in args.kinds},
         "variants": results, "served_requests_of_ours": compared, "refused_everywhere": refused(results),
         "problems": found}, indent=1, default=str))
    return compared, found


def _kinds(text: str) -> list[str]:
    kinds = text.split(",")
    unknown = [k for k in kinds if k not in KINDS]
    if unknown or not text:
        raise argparse.ArgumentTypeError(f"unknown kind(s) {unknown or [text]}: choose from {', '.join(KINDS)}")
    return kinds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m portable_spec_harness.serve_bench.sampling_sweep")
    parser.add_argument("out")
    parser.add_argument("--pair", default="llama_eagle")
    parser.add_argument("--mode", default="attention")
    parser.add_argument("--variants", default="ours,upstream_v1")
    parser.add_argument("--kinds", type=_kinds, default=",".join(KINDS), help="comma-separated, of the KINDS table")
    parser.add_argument("--input-len", type=int, default=64)
    parser.add_argument("--output-len", type=int, default=24)
    parser.add_argument("--boot-timeout", type=float, default=420.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    probe = probe_servers(args.pair, args.mode, args.input_len, args.output_len, len(args.kinds),
                          "portable_spec_sampling_sweep")
    results: list[dict[str, Any]] = []
    compared, found = 0, []
    for variant in args.variants.split(","):
        results.append(asyncio.run(sweep_variant(probe.server(variant), out, args, probe.vocab)))
        compared, found = write_report(out, probe.pair, args, results)
        print("sampling sweep: batches served, JIT compiles after boot", json.dumps(
            {r["variant"]: [sum(served(r).values()), len(r.get("jit_after_boot") or [])] for r in results}),
            flush=True)
    print(f"sampling sweep: {compared} requests of ours served; refused by every variant: "
          f"{refused(results) or 'none'}; " + ("; ".join(found) if found else "no compile after boot"), flush=True)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
