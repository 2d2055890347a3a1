"""``python -m portable_spec_harness.real_shapes.smoke OUT``: a designed real-shape pair through ``vllm serve`` on the GPU.

Per head (``--heads perfect,partial``): build the pair (``OUT/pair``), boot ``vllm serve`` with the designed-weights
loader on ``PYTHONPATH`` (the engine variant's environment, ``harness/e2e/configs.py``: ``upstream_v1`` by default),
send seeded greedy completions as token ids (prompts from the whole vocabulary, special tokens too) all at once, and
judge (``judge``):

* every output is the designed continuation (``design.continuation``), token for token;
* acceptance per draft position, from vLLM's ``/metrics`` counters, is the designed one: >= 0.95 for the perfect
  head, within 0.08 of ``design.simulate`` over the same prompts for the partial head;
* the server log has the loader's line for the target and the head (the weights were made on the device, checked).

Writes ``OUT/smoke.json`` (``--json`` prints it) and each server's log; exit 0 when every check passed, 1 otherwise,
2 on bad arguments. A cold H100: ~2-3 minutes per head for Llama-3.1-8B (boot: weights ~20 s, compile and graph
capture ~1-2 min), ~3-4 for Qwen3-30B-A3B. The heads' servers boot together, each with a fixed KV cache.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

from portable_spec.errors import PortableSpecError
from portable_spec_harness.real_shapes import design as D

SERVED = "real-shapes"
BOOT_S = 600
REQUEST_S = 300
PERFECT_MIN = 0.95
PARTIAL_TOLERANCE = 0.08
PROMPT_LENGTHS = (3, 17, 64, 130, 255, 511, 700, 1000)
LOADER_LINE = "real_shapes: designed {role} weights"
MAX_NUM_SEQS = 16
FUSED_LINE = "chain steps are fused graphs"
FUSED_ENGINES = ("full_drafter",)
"""Engine variants whose server must log ``FUSED_LINE`` (our FULL drafter with the fused chain)."""


def prompts(design: D.Design, seed: int = 0) -> list[list[int]]:
    """Seeded prompts of ``PROMPT_LENGTHS`` tokens drawn from the whole vocabulary (special tokens too)."""
    rng = random.Random(f"real-shapes-smoke-{seed}")
    return [[rng.randrange(design.vocab_size) for _ in range(n)] for n in PROMPT_LENGTHS]


def expectation(design: D.Design, head: str, batch: list[list[int]], max_tokens: int, k: int) -> dict[str, Any]:
    """The designed outputs and the simulated acceptance per position over ``batch``."""
    sims = [D.simulate(design, head, p, max_tokens, k) for p in batch]
    drafts = sum(s["num_drafts"] for s in sims)
    per_pos = [sum(s["accepted_per_position"][i] for s in sims) / drafts for i in range(k)]
    return {"outputs": [s["output"] for s in sims], "acceptance_per_position": per_pos}


def judge(head: str, outputs: list[list[int] | None], want: dict[str, Any], counters: dict[str, Any],
          log_text: str, roles: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """Each check: ``ok``, what it compared (``compared`` > 0, else it fails) and what it saw."""
    same = sum(o == w for o, w in zip(outputs, want["outputs"]))
    checks = {"greedy output is the designed continuation": {
        "ok": len(outputs) == len(want["outputs"]) > 0 and same == len(outputs), "compared": len(outputs),
        "equal": same, "tokens": sum(len(o or []) for o in outputs)}}
    drafts, accepted = counters.get("drafts"), counters.get("accepted_per_position")
    measured = [a / drafts for a in accepted] if drafts and accepted is not None else None
    expected = want["acceptance_per_position"]
    if measured is None or len(measured) != len(expected):
        ok = False
    elif head == "perfect":
        ok = all(m >= PERFECT_MIN for m in measured)
    else:
        ok = all(abs(m - e) <= PARTIAL_TOLERANCE for m, e in zip(measured, expected))
    checks["acceptance per position is the designed one"] = {
        "ok": ok, "compared": drafts or 0, "measured": measured, "expected": expected}
    found = [role for role in roles if LOADER_LINE.format(role=role) in log_text]
    checks["the designed loader made and checked every model"] = {
        "ok": found == list(roles), "compared": len(roles), "found": found}
    return checks


async def _complete(port: int, prompt: list[int], max_tokens: int) -> list[int] | None:
    from portable_spec_harness.soak.http import fetch

    payload = {"model": SERVED, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0.0,
               "return_token_ids": True}
    response = await fetch("127.0.0.1", port, "POST", "/v1/completions", payload, timeout_s=REQUEST_S)
    if response.status != 200:
        return None
    return response.json()["choices"][0].get("token_ids")


async def _scrape(port: int, k: int) -> dict[str, Any]:
    from portable_spec_harness.soak import metrics
    from portable_spec_harness.soak.http import fetch

    sample = metrics.parse((await fetch("127.0.0.1", port, "GET", "/metrics")).body.decode())
    per_pos = [sample.get("vllm:spec_decode_num_accepted_tokens_per_pos_total", position=str(i)) for i in range(k)]
    return {"drafts": sample.get(metrics.DRAFTS), "accepted": sample.get(metrics.ACCEPTED),
            "accepted_per_position": None if None in per_pos else per_pos}


def ours_lines(log_text: str, limit: int = 20) -> list[str]:
    """What our layer said in the server log (which drafter ran, fused or not and why), first ``limit`` lines."""
    return [line.split("portable_spec:", 1)[1].strip() for line in log_text.splitlines()
            if "portable_spec:" in line][:limit]


def _difference(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    def minus(a: Any, b: Any) -> Any:
        if a is None or b is None:
            return None
        return [x - y for x, y in zip(a, b)] if isinstance(a, list) else a - b

    return {key: minus(after[key], before[key]) for key in after}


def server_command(pair_dir: Path, head: str, k: int, port: int, max_model_len: int) -> list[str]:
    """``vllm serve`` for one head with a fixed KV cache (every request at ``max_model_len``, as the serving bench
    sizes it), so vLLM skips memory profiling and the heads' servers, or another lane's, can share the GPU."""
    from portable_spec_harness.real_shapes.build import load, serve_args
    from portable_spec_harness.serve_bench.memory import kv_cache_bytes
    from portable_spec_harness.serve_bench.servers import GPU_MEMORY_UTILIZATION
    from portable_spec_harness.vllm_serve import serve_command

    shapes = load(pair_dir)["shapes"]
    kv = kv_cache_bytes(shapes["target"], shapes["head"], max_model_len, MAX_NUM_SEQS)
    return serve_command([*serve_args(pair_dir, head, k), "--port", str(port), "--served-model-name", SERVED,
                          "--max-model-len", str(max_model_len), "--max-num-seqs", str(MAX_NUM_SEQS),
                          "--kv-cache-memory-bytes", str(kv), "--gpu-memory-utilization", str(GPU_MEMORY_UTILIZATION)])


def server_env(pair: str, engine: str, moe: bool, head: str = "") -> dict[str, str]:
    """The engine variant's environment, a compile cache of its own (per head: the heads' servers boot at once and
    would otherwise write one cache together), the loader's plugin and the repository first on ``PYTHONPATH``."""
    from portable_spec_harness.e2e.parent import own_compile_cache, variant_env
    from portable_spec_harness.real_shapes.plugin import plugin_env
    from portable_spec_harness.runtime_plugin import pythonpath_first
    from portable_spec_harness.vllm_serve import PLAIN_LOG_ENV

    cache = f"real-shapes-{pair}-{engine}" + (f"-{head}" if head else "")
    env = {**variant_env(engine, "auto" if moe else "v1"), **own_compile_cache(cache), **PLAIN_LOG_ENV}
    env["PYTHONPATH"] = pythonpath_first(Path(__file__).resolve().parents[3], env)
    env.update(plugin_env(environ=env))
    return env


def launch_server(command: list[str], env: dict[str, str], log: Path):
    """``command`` in a process group of its own (``vllm_serve.ServerProcess``, as the soak and the serving bench)."""
    from portable_spec_harness.vllm_serve import ServerProcess

    return ServerProcess(command, env, log)


def run_head(out: Path, pair_dir: Path, head: str, engine: str, k: int, max_tokens: int, seed: int,
             launch: Callable[..., Any] = launch_server, port: int | None = None) -> dict[str, Any]:
    """Boot one server with ``head``, send the prompts, judge; the server is stopped whatever happens."""
    from portable_spec_harness.real_shapes.build import load
    from portable_spec_harness.vllm_serve import free_port

    info = load(pair_dir)
    _, design = D.read_marker(info["target"])
    batch = prompts(design, seed)
    want = expectation(design, head, batch, max_tokens, k)
    port = port or free_port()
    log = out / f"server_{head}.log"
    started = time.monotonic()
    server = launch(server_command(pair_dir, head, k, port, max(PROMPT_LENGTHS) + max_tokens + 64),
                    server_env(info["pair"], engine, info["family"] == "qwen3_moe", head), log)
    result: dict[str, Any] = {"head": head, "log": log.name, "port": port}
    try:
        up = asyncio.run(_wait_healthy(server, port, started + BOOT_S))
        result["boot_s"] = round(time.monotonic() - started, 1)
        if not up:
            result["error"] = f"no healthy server within {BOOT_S} s (exit {server.returncode}); see {log.name}"
            outputs, counters = [], {}
        else:
            outputs, counters = asyncio.run(_requests(port, batch, max_tokens, k))
    finally:
        server.stop()
    result["counters"] = counters
    log_text = log.read_text(errors="replace")
    result["checks"] = judge(head, outputs, want, counters, log_text, ("target", info["method"]))
    result["portable_spec_lines"] = ours_lines(log_text)
    if engine in FUSED_ENGINES:
        result["checks"]["our fused drafter ran"] = {
            "ok": any(FUSED_LINE in line for line in result["portable_spec_lines"]),
            "compared": len(result["portable_spec_lines"]), "wanted": FUSED_LINE}
    result["passed"] = "error" not in result and all(c["ok"] and c["compared"] > 0 for c in result["checks"].values())
    return result


async def _wait_healthy(server: Any, port: int, deadline: float) -> bool:
    from portable_spec_harness.vllm_serve import health

    while time.monotonic() < deadline and server.alive():
        if await health("127.0.0.1", port):
            return True
        await asyncio.sleep(2)
    return False


async def _requests(port: int, batch: list[list[int]], max_tokens: int, k: int):
    before = await _scrape(port, k)
    outputs = await asyncio.gather(*(_complete(port, p, max_tokens) for p in batch))
    return list(outputs), _difference(before, await _scrape(port, k))


def run_smoke(out: Path, pair: str, heads: list[str], engine: str = "upstream_v1", k: int = 3, max_tokens: int = 96,
              seed: int = 0, launch: Callable[..., Any] = launch_server, scale: str = "real") -> dict[str, Any]:
    from portable_spec_harness.real_shapes.build import build_pair
    from portable_spec_harness.vllm_serve import free_port

    out.mkdir(parents=True, exist_ok=True)
    pair_dir = build_pair(pair, "designed", out / "pair", seed=seed, scale=scale)
    taken: set[int] = set()
    ports = {head: free_port(taken) for head in heads}  # one each, handed out before any server binds
    # The heads' servers boot side by side (fixed KV caches): one boot's wall time instead of one per head.
    with ThreadPoolExecutor(max_workers=len(heads)) as pool:
        futures = {head: pool.submit(run_head, out, pair_dir, head, engine, k, max_tokens, seed, launch, ports[head])
                   for head in heads}
        runs = {head: future.result() for head, future in futures.items()}
    report = {"pair": pair, "engine": engine, "k": k, "max_tokens": max_tokens, "heads": runs,
              "status": "passed" if runs and all(r["passed"] for r in runs.values()) else "failed"}
    (out / "smoke.json").write_text(json.dumps(report, indent=2) + "\n")
    return report


def main(argv: list[str] | None = None) -> int:
    from portable_spec_harness.e2e.configs import VARIANTS
    from portable_spec_harness.real_shapes.shapes import PAIR_NAMES

    parser = argparse.ArgumentParser(prog="python -m portable_spec_harness.real_shapes.smoke",
                                     description="A designed real-shape pair through vllm serve (GPU).")
    parser.add_argument("out", type=Path)
    parser.add_argument("--pair", default="llama8b_eagle3", choices=PAIR_NAMES)
    parser.add_argument("--heads", default="perfect,partial", help="designed heads to serve, one server each")
    parser.add_argument("--engine", default="upstream_v1", choices=[v for v, e in VARIANTS.items() if e.speculative],
                        help="engine variant (harness/e2e/configs.py)")
    parser.add_argument("--k", type=int, default=3, help="num_speculative_tokens")
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    heads = [h for h in args.heads.split(",") if h]
    if not heads or set(heads) - set(D.VARIANTS) or args.k < 1 or args.max_tokens < 8:
        print(f"error: --heads must name {' / '.join(D.VARIANTS)}, --k >= 1, --max-tokens >= 8", file=sys.stderr)
        return 2
    try:
        report = run_smoke(args.out, args.pair, heads, args.engine, args.k, args.max_tokens, args.seed)
    except PortableSpecError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    if args.json:
        print(json.dumps(report))
    else:
        for head, run in report["heads"].items():
            marks = ", ".join(f"{name}: {'ok' if c['ok'] else 'FAILED'}" for name, c in run["checks"].items())
            print(f"real-shapes: {report['pair']} {head} ({run.get('boot_s')} s boot): {marks}")
        print(f"real-shapes: {report['status']}")
    return 0 if report["status"] == "passed" else 1


if __name__ == "__main__":
    sys.exit(main())
