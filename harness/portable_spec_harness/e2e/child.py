"""Runs inside a child process: boots one vLLM ``LLM`` for one variant, then either

- runs the greedy job (per seed: that seed's token prompts; outputs and spec-decode metrics; all seeds share one
  boot) and prints one line ``RESULT <json>`` on stdout, or
- with ``--serve``, answers the benchmark's commands (warm-up, timed pass, profile, facts), see ``serve()``.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from typing import Any

from portable_spec.envs import INJECT_BUG_ENV, inject_bug
from portable_spec_harness.e2e.configs import VARIANTS, EngineVariant
from portable_spec_harness.e2e.draft_steps import recorded_runs
from portable_spec_harness.e2e.facts import platform_facts
from portable_spec_harness.e2e.gc_pauses import GC_HEAP_MODES, CollectionClock, settle_heap
from portable_spec_harness.e2e.step_attribution import breakdown
from portable_spec_harness.e2e.step_breakdown import is_scope
from portable_spec_harness.e2e.step_clock import STEP_KEYS, StepClock
from portable_spec_harness.parallel import Parallel, add_parallel_flags
from portable_spec_harness.vllm_door.bug_injection import Injection, injected
from portable_spec_harness.vllm_door.offline import runner_scopes

PROMPTS = [[5, 17, 42, 99], [7, 7, 300, 12, 64, 3], [250, 11], [81, 19, 23, 512, 40, 33, 2, 9]]
SEEDED_PROMPT_TOKENS = range(3, 1000)  # below the zoo's vocabulary (1024), above its special ids


PROMPT_SETS = ("fixed", "context")
MAX_MODEL_LEN = 1024
"""Every engine's ``max_model_len`` (the context prompt set has one prompt that ends exactly there)."""


def prompts_for_seed(seed: int, prompt_set: str = "fixed", max_tokens: int = 48) -> list[list[int]]:
    """``fixed``: seed 0's four fixed prompts, any other seed four seeded prompts of 2..12 tokens (so seeds differ in
    greedy runs too, where the sampling seed changes nothing). ``context``: the context pairs' prompts
    (``model_zoo.context_prompts``): short ones, ones longer than 16 KV blocks, three with one shared 18-block prefix
    (ragged prefix-cache prefills beside decodes) and one that ends at ``MAX_MODEL_LEN`` (trimmed drafts)."""
    if prompt_set == "context":
        from portable_spec_harness.model_zoo import context_prompts

        return [list(p["prompt_token_ids"]) for p in context_prompts(seed, max_model_len=MAX_MODEL_LEN,
                                                                   max_tokens=max_tokens)]
    if seed == 0:
        return [list(p) for p in PROMPTS]
    rng = random.Random(f"prompts-{seed}")
    return [[rng.choice(SEEDED_PROMPT_TOKENS) for _ in range(rng.randint(2, 12))] for _ in range(4)]


def prompt_set_for(pair: str) -> str:
    """The prompt set a zoo pair runs: a context pair's target follows its context, so it runs the context prompts
    (whose greedy outputs its design gives); every other pair the fixed ones."""
    from portable_spec_harness.model_zoo import CONTEXT_PAIRS

    return "context" if pair in CONTEXT_PAIRS else "fixed"


def designed_outputs(expected: dict[str, Any], prompt_set: str, seeds: list[int] | tuple[int, ...],
                     max_tokens: int) -> dict[int, list[list[int]]]:
    """Per seed, the target's greedy output by the pair's design (``model_zoo.expected_output``: f-chain or context)
    on each prompt the child runs for that seed."""
    from portable_spec_harness.model_zoo import expected_output

    return {seed: [expected_output(expected, p, max_tokens) for p in prompts_for_seed(seed, prompt_set, max_tokens)]
            for seed in seeds}


def spec_counters(llm: Any) -> dict[str, Any]:
    return {m.name: (getattr(m, "values", None) or getattr(m, "value", None)) for m in llm.get_metrics()
            if m.name.startswith("vllm:spec_decode")}


def acceptance_per_position(before: dict, after: dict) -> list[float] | None:
    drafts = (after.get("vllm:spec_decode_num_drafts") or 0) - (before.get("vllm:spec_decode_num_drafts") or 0)
    per_pos_after = after.get("vllm:spec_decode_num_accepted_tokens_per_pos")
    if not drafts or not per_pos_after:
        return None
    per_pos_before = before.get("vllm:spec_decode_num_accepted_tokens_per_pos") or [0] * len(per_pos_after)
    return [round((a - b) / drafts, 4) for a, b in zip(per_pos_after, per_pos_before)]


def acceptance_counts(before: dict, after: dict) -> dict[str, Any]:
    def delta(key):
        return (after.get(key) or 0) - (before.get(key) or 0)
    per_pos = after.get("vllm:spec_decode_num_accepted_tokens_per_pos")
    per_pos_before = before.get("vllm:spec_decode_num_accepted_tokens_per_pos") or [0] * len(per_pos or [])
    return {"drafts": delta("vllm:spec_decode_num_drafts"),
            "draft_tokens": delta("vllm:spec_decode_num_draft_tokens"),
            "accepted": delta("vllm:spec_decode_num_accepted_tokens"),
            "accepted_per_position": [a - b for a, b in zip(per_pos or [], per_pos_before)]}


def worker_facts(worker: Any) -> dict[str, Any]:
    """Runs on each worker (collective_rpc): which runner/drafter, and our drafter's capture and replay counts."""
    runner = worker.model_runner
    drafter = getattr(runner, "drafter", None)
    graphs = getattr(drafter, "graph_runner", None)
    return {"rank": getattr(worker, "rank", None),
            "runner": f"{type(runner).__module__}.{type(runner).__qualname__}",
            "drafter": f"{type(drafter).__module__}.{type(drafter).__qualname__}" if drafter else None,
            "capture_stats": getattr(drafter, "capture_stats", None),
            "warmup_stats": getattr(runner, "warmup_stats", None),
            "replays": dict(graphs.replays) if graphs is not None else None,
            "pointer_mismatches": graphs.pointer_mismatches if graphs is not None else None,
            "padded_metadata_builds": (dict(getattr(drafter, "padded_metadata_builds", None) or {})
                                       if drafter is not None else None),
            "async_scheduling": getattr(getattr(getattr(worker, "vllm_config", None), "scheduler_config", None),
                                        "async_scheduling", None),
            **platform_facts(worker)}


def variant_engine_args(variant: EngineVariant, parallel: dict[str, Any]) -> dict[str, Any]:
    """``LLM(...)`` keywords a variant adds to the tensor-parallel ones (``compilation_config`` merged)."""
    merged = {**parallel, **variant.engine_args}
    compilation = {**parallel.get("compilation_config", {}), **variant.engine_args.get("compilation_config", {})}
    if compilation:
        merged["compilation_config"] = compilation
    if variant.attention_backend:
        merged["attention_backend"] = variant.attention_backend
    return merged


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--variant", required=True, choices=sorted(VARIANTS))
    parser.add_argument("--target", required=True)
    parser.add_argument("--draft")
    parser.add_argument("--method", default="eagle")
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0, help="engine seed")
    parser.add_argument("--seeds", default=None, help="greedy job: comma-separated prompt/sampling seeds "
                                                      "(default: --seed); every seed runs in this one boot")
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--draft-sample-method", default=None)
    parser.add_argument("--async-scheduling", action="store_true",
                        help="async_scheduling=True (vLLM 0.26.0 leaves it off for draft_model unless asked)")
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--prompt-set", choices=PROMPT_SETS, default="fixed",
                        help="greedy job: the prompts (context: long, shared-prefix and max-length prompts)")
    parser.add_argument("--max-num-seqs", type=int, default=8)
    parser.add_argument("--bench-tokens", type=int, default=256)
    parser.add_argument("--kv-cache-bytes", type=int, default=None,
                        help="fixed KV-cache size: no memory profiling, so engines can share a GPU")
    parser.add_argument("--serve", action="store_true",
                        help="after boot print READY, then answer one JSON command per stdin line (see serve())")
    parser.add_argument("--gc-heap", choices=GC_HEAP_MODES, default="frozen",
                        help="--serve: freeze the booted heap as vllm serve does (default), or leave it live "
                             "(gc_pauses.py)")
    parser.add_argument("--record-drafts", action="store_true",
                        help="greedy job: record every step's drafts per request (the per-step oracle's input)")
    add_parallel_flags(parser)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    """With ``PORTABLE_SPEC_INJECT_BUG`` set, the engine boots and runs with that drafter bug installed in this
    process (``vllm_door.bug_injection``; TP=1 only: at TP=2 the workers are other processes)."""
    args = parse_args(argv)
    bug = inject_bug()
    if bug and (args.tp > 1 or args.serve):
        raise SystemExit(f"{INJECT_BUG_ENV}={bug}: injected bugs run in the greedy job at TP=1 only (the worker must "
                         "be this process)")
    with injected(bug) as injection:
        boot_and_run(args, injection)


def resolved_ours(platform_name: str, simulated_device: str | None) -> bool:
    """Whether the platform vLLM resolved is one our variant may report as ours: a product class, or, for a simulated
    device, the harness's simulation of our class (``musa_sim_plugin.PLATFORM_QUALNAME``)."""
    from portable_spec_harness.musa_sim_plugin import PLATFORM_QUALNAME

    return platform_name.startswith("portable_spec.") or bool(simulated_device) and platform_name == PLATFORM_QUALNAME


def boot_and_run(args: argparse.Namespace, injection: Injection | None) -> None:
    from portable_spec_harness.vllm_door.offline import engine_api, resolved_platform_label, resolved_platform_qualname

    api = engine_api()
    SamplingParams, TokensPrompt = api.SamplingParams, api.TokensPrompt
    variant = VARIANTS[args.variant]
    started = time.perf_counter()
    llm = api.LLM(**engine_kwargs(args))
    result: dict[str, Any] = {"variant": args.variant, "seed": args.seed,
                              "boot_s": round(time.perf_counter() - started, 2)}
    vcfg = llm.llm_engine.vllm_config
    platform_name, label = resolved_platform_qualname(), resolved_platform_label()
    if "VLLM_PLATFORM" in variant.env and not resolved_ours(platform_name, variant.simulated_device):
        # Never report vLLM's own path under our variant's name (e.g. entry points not installed here).
        raise SystemExit(f"variant {args.variant} needs portable_spec's platform but vLLM resolved {platform_name}; "
                         "install the project and its harness into this interpreter "
                         "(python -m pip install -e . -e harness)")
    if variant.simulated_device and label != f"{variant.simulated_device}-sim":
        raise SystemExit(f"variant {args.variant} simulates {variant.simulated_device} but vLLM resolved "
                         f"{platform_name} ({label}); run it through portable_spec_harness.e2e.parent")
    result.update({
        "tensor_parallel_size": vcfg.parallel_config.tensor_parallel_size,
        "use_v2_model_runner": vcfg.use_v2_model_runner,
        "platform": platform_name,
        "platform_label": label,
        "capture_sizes": vcfg.compilation_config.cudagraph_capture_sizes,
        "cudagraph_mode": str(vcfg.compilation_config.cudagraph_mode)})
    if args.serve:
        serve(llm, args, result, SamplingParams, TokensPrompt)
        return
    seeds = [int(s) for s in args.seeds.split(",")] if args.seeds else [args.seed]
    if injection is not None:
        injection.start_counting()  # the requests' steps (and replays of graphs captured with it), not the boot's

    def run_seed(seed: int) -> dict[str, Any]:
        return greedy_run(llm, seed, args, SamplingParams, TokensPrompt)

    if args.record_drafts:
        result["runs"], result["draft_record"] = recorded_runs(llm, seeds, run_seed)
    else:
        result["runs"] = [run_seed(seed) for seed in seeds]
    if injection is not None:
        result["injected_bug"] = injection.report()
    result.update(engine_facts(llm))
    print("RESULT " + json.dumps(result), flush=True)


def engine_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The ``LLM(...)`` keyword arguments for one variant. ``jit_monitor_verbose``: vLLM's JIT monitor logs every
    compilation during inference (by default only a kernel name's first, so a second specialization of a kernel
    would go unseen by the e2e check)."""
    variant = VARIANTS[args.variant]
    speculative = None
    if variant.speculative:
        speculative = {"method": args.method, "model": args.draft, "num_speculative_tokens": args.k,
                       "enforce_eager": variant.drafter_enforce_eager}
        if args.draft_sample_method:
            speculative["draft_sample_method"] = args.draft_sample_method
        if variant.attention_backend:
            speculative["attention_backend"] = variant.attention_backend
    memory = ({"kv_cache_memory_bytes": args.kv_cache_bytes, "gpu_memory_utilization": 0.1} if args.kv_cache_bytes
              else {"gpu_memory_utilization": 0.3})
    parallel = Parallel.from_args(args).engine_args()
    return dict(model=args.target, speculative_config=speculative, max_model_len=MAX_MODEL_LEN, max_num_seqs=args.max_num_seqs,
                seed=args.seed, disable_log_stats=False, skip_tokenizer_init=True, jit_monitor_verbose=True,
                **({"async_scheduling": True} if args.async_scheduling else {}),
                **memory, **variant_engine_args(variant, parallel))


def engine_facts(llm: Any) -> dict[str, Any]:
    """Rank 0's facts at the top level (as at TP=1), and every rank's under ``ranks``."""
    try:
        ranks = llm.collective_rpc(worker_facts)
    except Exception as exc:  # facts are diagnostics; never lose the measurements over them
        return {"worker_facts_error": f"{type(exc).__name__}: {exc}"}
    return {**ranks[0], "ranks": ranks}


def serve(llm: Any, args: Any, booted: dict[str, Any], sampling_params: Any, tokens_prompt: Any) -> None:
    """Answer commands so a parent can interleave timed passes of several booted engines (fair under a drifting
    host). One JSON object per stdin line: ``{"job": "warm"|"pass", "concurrency": c}``,
    ``{"job": "profile", "concurrency": c}``, ``{"job": "facts"}`` or ``{"job": "exit"}``; each answer is one
    ``REPLY <json>`` line on stdout."""
    import sys

    heap = settle_heap(args.gc_heap)
    print("READY " + json.dumps({**booted, **engine_facts(llm), **heap}), flush=True)
    for line in sys.stdin:
        command = json.loads(line)
        job = command.get("job")
        try:
            if job == "exit":
                break
            if job == "warm":
                reply = bench_warm(llm, command["concurrency"], args, sampling_params, tokens_prompt)
            elif job == "pass":
                reply = bench_pass(llm, command["concurrency"], args, sampling_params, tokens_prompt)
            elif job == "profile":
                reply = profile_decode(llm, args, sampling_params, tokens_prompt, command.get("concurrency", 1))
            elif job == "facts":
                reply = engine_facts(llm)
            else:
                reply = {"error": f"unknown job {job!r}"}
        except Exception as exc:  # report, keep serving: the parent decides what a failure means
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        print("REPLY " + json.dumps(reply), flush=True)


def greedy_run(llm: Any, seed: int, args: Any, sampling_params: Any, tokens_prompt: Any) -> dict[str, Any]:
    """One seed's prompts through the engine: outputs and the spec-decode counters' deltas."""
    params = sampling_params(max_tokens=args.max_tokens, temperature=args.temperature, seed=seed, ignore_eos=True,
                             detokenize=False)
    before = spec_counters(llm)
    prompts = prompts_for_seed(seed, args.prompt_set, args.max_tokens)
    outputs = llm.generate([tokens_prompt(prompt_token_ids=p) for p in prompts], params, use_tqdm=False)
    after = spec_counters(llm)
    return {"seed": seed, "outputs": [list(o.outputs[0].token_ids) for o in outputs],
            "request_ids": [o.request_id for o in outputs],
            "acceptance_per_position": acceptance_per_position(before, after),
            "acceptance_counts": acceptance_counts(before, after)}


def profile_decode(llm: Any, args: Any, sampling_params: Any, tokens_prompt: Any, concurrency: int = 1,
                   top: int = 40) -> dict[str, Any]:
    """torch-profiler view of steady-state decoding at ``concurrency`` requests (engine in-process; at 1 the one
    prompt earlier reports used, above it the timed passes' prompts): where host and device time go, to locate
    the remaining gap to Model Runner V2. vLLM's own runner scopes ("gpu_model_runner: draft",
    ...) and ours (``profile_scopes``) are switched on for the profiled pass only and reported with their inclusive
    host time, and read into the per-step ``breakdown`` (``step_breakdown``)."""
    import torch

    prompts = ([tokens_prompt(prompt_token_ids=PROMPTS[0])] if concurrency == 1
               else bench_prompts(concurrency, tokens_prompt))
    params = sampling_params(max_tokens=args.bench_tokens, temperature=0.0, ignore_eos=True, detokenize=False)
    llm.generate(prompts, params, use_tqdm=False)
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with runner_scopes() as hooks, torch.profiler.profile(activities=activities) as prof:
        started = time.perf_counter()
        llm.generate(prompts, params, use_tqdm=False)
        wall = time.perf_counter() - started
    events = prof.key_averages()

    def row(e: Any) -> dict[str, Any]:
        return {"name": e.key[:120], "calls": e.count, "cpu_total_us": round(e.cpu_time_total, 1),
                "self_cpu_us": round(e.self_cpu_time_total, 1),
                "device_us": round(getattr(e, "self_device_time_total", 0.0), 1)}

    def rows(key: str) -> list[dict[str, Any]]:
        return [row(e) for e in sorted(events, key=lambda e: getattr(e, key), reverse=True)[:top]]
    scopes = [row(e) for e in events if is_scope(e.key)]
    # Device-side events are kernels and copies, plus the GPU-side ranges of record_function scopes: not those.
    kernels = [e for e in events if getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA
               and not getattr(e, "is_user_annotation", False) and not is_scope(e.key)]
    return {"concurrency": concurrency, "wall_s": round(wall, 4), "tokens": args.bench_tokens,
            "kernels": sum(e.count for e in kernels),
            "kernel_busy_us": round(sum(e.self_device_time_total for e in kernels), 1),
            "runner_scopes": sorted(scopes, key=lambda r: -r["cpu_total_us"]),
            "top_self_cpu": rows("self_cpu_time_total"), "top_device": rows("self_device_time_total"),
            "breakdown": profile_breakdown(prof, llm, hooks), "python": python_profile(llm, prompts, params),
            "phase_clock": phase_clock(llm, prompts, params)}


def phase_clock(llm: Any, prompts: list[Any], params: Any) -> dict[str, Any]:
    """One more decoding pass with only the phase scopes timed (``PhaseClock``, no profiler): real host ms per
    step and phase, wall and thread-CPU."""
    from portable_spec_harness.e2e.phase_clock import PhaseClock

    clock = PhaseClock()
    with runner_scopes(clock.scope, details=True):
        started = time.perf_counter()
        llm.generate(prompts, params, use_tqdm=False)
        wall = time.perf_counter() - started
    return clock.summary(wall)


def profile_breakdown(prof: Any, llm: Any, hooks: dict[str, list[str]]) -> dict[str, Any]:
    """The per-step phase breakdown of the profiled pass, with which of our scope hooks were installed; a failure is
    reported in it, never loses the rest of the profile."""
    runner = "mrv2" if llm.llm_engine.vllm_config.use_v2_model_runner else "v1"
    try:
        result = breakdown(prof.events(), runner=runner)
    except Exception as exc:  # diagnostics: report, keep the profile
        result = {"error": f"{type(exc).__name__}: {exc}", "runner": runner}
    return {**result, "scope_hooks": hooks}


def python_profile(llm: Any, prompts: list[Any], params: Any, top: int = 45) -> dict[str, Any]:
    """cProfile of one more decoding pass (engine in-process, same thread): which Python functions the host time
    goes to, by own time and by inclusive time. cProfile slows Python down; read the shares, not the absolutes."""
    import cProfile
    import pstats

    prof = cProfile.Profile()
    started = time.perf_counter()
    prof.enable()
    llm.generate(prompts, params, use_tqdm=False)
    prof.disable()
    wall = time.perf_counter() - started
    stats = pstats.Stats(prof).stats  # (file, line, func) -> (primitive calls, calls, own s, inclusive s, callers)

    def rows(index: int) -> list[dict[str, Any]]:
        ranked = sorted(stats.items(), key=lambda kv: kv[1][index], reverse=True)[:top]
        return [{"func": f"{'/'.join(f.split('/')[-2:])}:{line}({name})", "calls": v[1],
                 "own_ms": round(1000 * v[2], 2), "inclusive_ms": round(1000 * v[3], 2)}
                for (f, line, name), v in ranked]
    return {"wall_s": round(wall, 4), "by_own_time": rows(2), "by_inclusive_time": rows(3)}


def bench_prompts(concurrency: int, tokens_prompt: Any) -> list[Any]:
    return [tokens_prompt(prompt_token_ids=PROMPTS[i % len(PROMPTS)] + [i % 900 + 3]) for i in range(concurrency)]


def bench_params(args: Any, sampling_params: Any, max_tokens: int | None = None) -> Any:
    return sampling_params(max_tokens=max_tokens or args.bench_tokens, temperature=args.temperature, seed=args.seed,
                           ignore_eos=True, detokenize=False)


def bench_warm(llm: Any, concurrency: int, args: Any, sampling_params: Any, tokens_prompt: Any) -> dict[str, Any]:
    """One untimed pass at this concurrency, then the time to first token (a 1-token pass)."""
    prompts = bench_prompts(concurrency, tokens_prompt)
    llm.generate(prompts, bench_params(args, sampling_params), use_tqdm=False)
    started = time.perf_counter()
    llm.generate(prompts, bench_params(args, sampling_params, max_tokens=1), use_tqdm=False)
    return {"concurrency": concurrency, "ttft_s": round(time.perf_counter() - started, 4)}


def bench_pass(llm: Any, concurrency: int, args: Any, sampling_params: Any, tokens_prompt: Any) -> dict[str, Any]:
    """One timed pass: wall time, output tokens, the spec-decode counters' deltas, the collections this process
    paid during it (``gc_pauses``) and its engine steps' durations (``step_clock``)."""
    prompts = bench_prompts(concurrency, tokens_prompt)
    before = spec_counters(llm)
    with CollectionClock() as collections, StepClock(llm.llm_engine) as steps:
        started = time.perf_counter()
        outputs = llm.generate(prompts, bench_params(args, sampling_params), use_tqdm=False)
        wall = time.perf_counter() - started
    counts = acceptance_counts(before, spec_counters(llm))
    return {"concurrency": concurrency, "wall_s": round(wall, 5), "started_at": round(time.time() - wall, 3),
            "output_tokens": sum(len(o.outputs[0].token_ids) for o in outputs),
            "drafts": counts["drafts"], "accepted": counts["accepted"], **collections.report(), **steps.report()}


def bench_summary(concurrency: int, ttft_s: float, passes: list[dict[str, Any]], bench_tokens: int) -> dict[str, Any]:
    """Median over the timed passes (all walls kept); TPOT excludes the time to first token."""
    walls = [p["wall_s"] for p in passes]
    wall = statistics.median(walls)
    tokens = passes[0]["output_tokens"]
    drafts, accepted = sum(p["drafts"] for p in passes), sum(p["accepted"] for p in passes)
    pauses = {"gc_pause_ms_all": [p["gc_pause_ms"] for p in passes],
              "gc_full_collections": sum(p["gc_collections"][2] for p in passes)} \
        if all("gc_pause_ms" in p for p in passes) else {}
    if all("started_at" in p for p in passes):  # wall-clock starts: line passes up with host or GPU samplers
        pauses["started_at_all"] = [p["started_at"] for p in passes]
    if all(p.get("steps") for p in passes):  # per pass: steady step time and stalls (step_clock.py)
        pauses.update({f"{key}_all": [p[key] for p in passes] for key in STEP_KEYS})
    return {"concurrency": concurrency, "output_tokens": tokens, "wall_s": round(wall, 4),
            "wall_s_all": [round(w, 4) for w in walls], **pauses, "output_tok_s": round(tokens / wall, 1),
            "output_tok_s_best": round(tokens / min(walls), 1), "ttft_s": ttft_s,
            "tpot_ms": round(1000 * max(wall - ttft_s, 0.0) / max(bench_tokens - 1, 1), 3),
            "acceptance_length": round(1 + accepted / drafts, 3) if drafts else None}


if __name__ == "__main__":
    main()
