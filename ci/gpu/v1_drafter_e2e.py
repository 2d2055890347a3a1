"""Issue 6 end to end on the GPU host: vLLM 0.26.0's V1 runner with our FULL drafter graphs vs the eager drafter,
upstream V1 (PIECEWISE drafter) and no speculation, on generated tiny model pairs.

    python ci/gpu/v1_drafter_e2e.py OUTDIR [--pairs llama_eagle:perfect,...] [--k 3] [--seeds 0]

Every configuration boots in its own subprocess (vLLM state is process-global) and reports greedy outputs,
acceptance counts per position (vLLM's own metrics), which runner ran, and the drafter's graph capture stats read
from the worker. The orchestrator writes OUTDIR/v1_drafter_e2e.json and exits non-zero when an assertion fails.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import time
from pathlib import Path

CONFIGS = {
    # name: (env, speculative?, drafter enforce_eager)
    "nospec": ({}, False, False),
    "upstream_v1": ({}, True, False),  # built-in CUDA platform: PIECEWISE drafter
    "eager_drafter": ({"VLLM_PLATFORM": "cuda"}, True, True),
    "full_drafter": ({"VLLM_PLATFORM": "cuda"}, True, False),
}
PROMPTS = [[5, 17, 42, 99], [7, 7, 300, 12, 64, 3], [250, 11], [81, 19, 23, 512, 40, 33, 2, 9]]


def child(args: argparse.Namespace) -> None:
    """One configuration in this process; prints one JSON line prefixed with RESULT."""
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    env, spec, eager_drafter = CONFIGS[args.config]
    speculative = ({"method": args.method, "model": args.draft, "num_speculative_tokens": args.k,
                    "enforce_eager": eager_drafter} if spec else None)
    started = time.perf_counter()
    llm = LLM(model=args.target, speculative_config=speculative, max_model_len=512, max_num_seqs=8,
              gpu_memory_utilization=0.25, seed=args.seed, disable_log_stats=False, skip_tokenizer_init=True)
    boot_s = time.perf_counter() - started
    prompts = [TokensPrompt(prompt_token_ids=p) for p in PROMPTS]
    params = SamplingParams(max_tokens=args.max_tokens, temperature=args.temperature, seed=args.seed,
                            ignore_eos=True, detokenize=False)
    started = time.perf_counter()
    outputs = llm.generate(prompts, params, use_tqdm=False)
    gen_s = time.perf_counter() - started
    metrics = {m.name: (getattr(m, "values", None) or getattr(m, "value", None)) for m in llm.get_metrics()
               if m.name.startswith("vllm:spec_decode")}

    def worker_facts(worker):
        runner = worker.model_runner
        drafter = getattr(runner, "drafter", None)
        graphs = getattr(drafter, "_chain_graphs", None)
        return {"runner": f"{type(runner).__module__}.{type(runner).__qualname__}",
                "drafter": f"{type(drafter).__module__}.{type(drafter).__qualname__}" if drafter else None,
                "capture_stats": getattr(drafter, "capture_stats", None),
                "chain_replays": graphs.replays if graphs is not None else 0}

    facts = llm.collective_rpc(worker_facts)[0]
    vcfg = llm.llm_engine.vllm_config
    from vllm.platforms import current_platform
    print("RESULT " + json.dumps({
        "config": args.config, "seed": args.seed, "boot_s": round(boot_s, 2), "generate_s": round(gen_s, 3),
        "outputs": [list(o.outputs[0].token_ids) for o in outputs],
        "use_v2_model_runner": vcfg.use_v2_model_runner,
        "platform": f"{type(current_platform).__module__}.{type(current_platform).__qualname__}",
        "capture_sizes": vcfg.compilation_config.cudagraph_capture_sizes,
        "cudagraph_mode": str(vcfg.compilation_config.cudagraph_mode),
        "spec_metrics": metrics, **facts}), flush=True)


def run_config(args: argparse.Namespace, config: str, seed: int, out: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "VLLM_PLATFORM"}
    env.update(CONFIGS[config][0])
    env.update({"VLLM_USE_V2_MODEL_RUNNER": "0", "VLLM_ALLOW_INSECURE_SERIALIZATION": "1",
                "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "PYTHONUNBUFFERED": "1"})
    cmd = [sys.executable, __file__, "child", "--config", config, "--target", args.target, "--draft", args.draft,
           "--method", args.method, "--k", str(args.k), "--seed", str(seed), "--max-tokens", str(args.max_tokens),
           "--temperature", str(args.temperature)]
    log = out / f"v1_e2e_{args.tag}_{config}_s{seed}.log"
    print(f"[e2e] {args.tag} {config} seed={seed} ...", flush=True)
    with open(log, "w") as fh:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=fh, text=True, env=env, timeout=args.timeout)
    result = next((json.loads(line[7:]) for line in proc.stdout.splitlines() if line.startswith("RESULT ")), None)
    if result is None:
        return {"config": config, "seed": seed, "error": f"exit {proc.returncode}, see {log.name}"}
    result["log"] = log.name
    return result


def acceptance_per_position(result: dict) -> list[float] | None:
    metrics = result.get("spec_metrics") or {}
    per_pos = metrics.get("vllm:spec_decode_num_accepted_tokens_per_pos")
    drafts = metrics.get("vllm:spec_decode_num_drafts")
    if not per_pos or not drafts:
        return None
    return [round(a / drafts, 4) for a in per_pos]


def main() -> int:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="cmd")
    c = sub.add_parser("child")
    for flag in ("--config", "--target", "--draft", "--method"):
        c.add_argument(flag, required=True)
    c.add_argument("--k", type=int, default=3)
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--max-tokens", type=int, default=48)
    c.add_argument("--temperature", type=float, default=0.0)
    if len(sys.argv) > 1 and sys.argv[1] == "child":
        child(parser.parse_args())
        return 0
    parser = argparse.ArgumentParser()
    parser.add_argument("outdir")
    parser.add_argument("--pair", default="llama_eagle")
    parser.add_argument("--variant", default="perfect")
    parser.add_argument("--method", default="eagle")
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--timeout", type=int, default=420)
    args = parser.parse_args()
    out = Path(args.outdir)
    out.mkdir(parents=True, exist_ok=True)
    from portable_spec.testing.model_zoo import build_pair

    models = build_pair(args.pair, Path("/tmp/portable_spec_zoo"), variant=args.variant)
    args.target, args.draft = str(models["target"]), str(models["draft"])
    args.tag = f"{args.pair}_{args.variant}_k{args.k}_t{args.temperature:g}"
    results = [run_config(args, cfg, int(seed), out) for seed in args.seeds.split(",")
               for cfg in args.configs.split(",")]
    for r in results:
        r["acceptance_per_position"] = acceptance_per_position(r)
        print(json.dumps({k: r.get(k) for k in ("config", "seed", "error", "use_v2_model_runner", "platform",
                                                "runner", "drafter", "capture_stats", "chain_replays",
                                                "acceptance_per_position", "boot_s", "generate_s")}), flush=True)
    import torch
    report = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "device": torch.cuda.get_device_name(), "torch": torch.__version__,
              "vllm": __import__("vllm").__version__, "pair": args.pair, "variant": args.variant,
              "method": args.method, "k": args.k, "temperature": args.temperature, "results": results}
    by = {(r["config"], r["seed"]): r for r in results}
    checks = {}
    for seed in [int(s) for s in args.seeds.split(",")]:
        base = by.get(("nospec", seed), {}).get("outputs")
        for cfg in ("upstream_v1", "eager_drafter", "full_drafter"):
            r = by.get((cfg, seed), {})
            if base is not None and "outputs" in r and args.temperature == 0:
                checks[f"greedy_equal_{cfg}_s{seed}"] = r["outputs"] == base
            if "runner" in r:
                checks[f"v1_runner_{cfg}_s{seed}"] = r["use_v2_model_runner"] is False
        full = by.get(("full_drafter", seed), {})
        if "runner" in full:
            checks[f"full_graphs_captured_s{seed}"] = bool((full.get("capture_stats") or {}).get("graphs"))
            checks[f"full_graphs_replayed_s{seed}"] = full.get("chain_replays", 0) > 0
            checks[f"our_platform_s{seed}"] = full["platform"].startswith("portable_spec.")
    report["checks"] = checks
    name = out / f"v1_drafter_e2e_{args.tag}.json"
    name.write_text(json.dumps(report, indent=1))
    print("CHECKS " + json.dumps(checks), flush=True)
    return 0 if checks and all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
