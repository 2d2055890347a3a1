"""Issue 6 end to end on the GPU host: vLLM 0.26.0's V1 runner with our FULL drafter graphs vs the eager drafter,
upstream V1 (PIECEWISE drafter) and no speculation, on generated tiny model pairs.

    python ci/gpu/v1_drafter_e2e.py OUTDIR [--pair llama_eagle] [--variant perfect] [--k 3] [--seeds 0]
           [--variants nospec,upstream_v1,eager_drafter,full_drafter] [--temperature 0] [--draft-sample-method M]
           [--target-logit 8]   (the soft target: sampled output departs from greedy; see the model zoo)
           [--tp 2 --disable-custom-all-reduce --no-fuse-allreduce-rms]   (tensor parallel; the two switches for
           hosts without NVLink multicast)  [--fail-capture RANK:KIND:REQS]   (our variant's capture of that key
           fails on that rank: every rank must drop it, output must stay exact)
           [--allow-jit]   (do not fail when our variant JIT-compiles a kernel during inference; by default it
           fails: our runner warms the drafter/verify kernels at boot. Upstream variants' JIT events are reported only)

Each engine variant boots once, in its own child process, and runs every seed's prompts. Writes OUTDIR/v1_drafter_e2e_<tag>.json (device, versions, date,
per-run results, checks, log excerpts) and exits non-zero when a check fails.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from portable_spec.draft.capture_log import CAPTURE_LOG_PREFIX
from portable_spec.draft.dispatcher import CHAIN_KINDS, FIRST_PASS_KINDS, any_replayed
from portable_spec.draft.fault_injection import FAIL_CAPTURE_ENV
from portable_spec.harness.e2e.child import add_parallel_flags, parallel_child_args
from portable_spec.harness.e2e.parent import log_excerpt, own_compile_cache, per_seed_rows, run_variant


def rank_checks(full: dict, seed: int, tp: int, fail_capture: str | None) -> dict[str, bool]:
    """At tensor parallel: every rank captured, replayed and agreed on the same graphs, and logged its capture line;
    with an injected failure, every rank dropped the failed key (and only keys that failed somewhere)."""
    ranks = full.get("ranks") or []
    stats = [r.get("capture_stats") or {} for r in ranks]
    checks = {f"full_drafter_s{seed}_facts_from_every_rank": len(ranks) == tp,
              f"full_drafter_s{seed}_same_graphs_on_every_rank":
                  len({json_key(s.get("num_tokens")) for s in stats}) == 1,
              f"full_drafter_s{seed}_no_pointer_mismatch_on_any_rank": all(r.get("pointer_mismatches") == 0
                                                                           for r in ranks),
              f"full_drafter_s{seed}_log_shows_capture_per_rank": sum(
                  CAPTURE_LOG_PREFIX in line for line in full.get("log_excerpt", [])) >= tp}
    if fail_capture:
        _, kind, reqs = fail_capture.split(":")
        checks[f"full_drafter_s{seed}_failed_key_dropped_on_every_rank"] = all(
            f"{kind}:{reqs}" in s.get("failed", {}) for s in stats)
    return checks


def json_key(value) -> str:
    return json.dumps(value, sort_keys=True)


def checks_for(results: list[dict], seeds: list[int], greedy: bool, perfect: bool,
               greedy_continuations: dict[int, list[list[int]]] | None = None, tp: int = 1,
               fail_capture: str | None = None, require_no_jit: bool = True) -> dict[str, bool]:
    """``greedy_continuations`` (sampled runs): each seed's greedy outputs; a sampled run whose outputs all equal
    them did not really sample (a target too peaked for its temperature), and fails ``sampled_off_greedy``."""
    by = {(r["variant"], r.get("seed")): r for r in results}
    checks: dict[str, bool] = {}
    for seed in seeds:
        base = by.get(("nospec", seed), {}).get("outputs")
        for name in ("upstream_v1", "eager_drafter", "full_drafter"):
            r = by.get((name, seed))
            if r is None:
                continue
            checks[f"{name}_s{seed}_ran"] = "error" not in r
            if "error" in r:
                continue
            checks[f"{name}_s{seed}_v1_runner"] = r["use_v2_model_runner"] is False
            if greedy and base is not None:
                checks[f"{name}_s{seed}_greedy_equals_nospec"] = r["outputs"] == base
            if not greedy and greedy_continuations and seed in greedy_continuations:
                checks[f"{name}_s{seed}_sampled_off_greedy"] = r["outputs"] != greedy_continuations[seed]
        full, eager = by.get(("full_drafter", seed), {}), by.get(("eager_drafter", seed), {})
        if "error" not in full and "runner" in full:
            checks[f"full_drafter_s{seed}_our_platform"] = full["platform"].startswith("portable_spec.")
            checks[f"full_drafter_s{seed}_graphs_captured"] = bool((full.get("capture_stats") or {}).get("graphs"))
            replays = full.get("replays") or {}
            if (full.get("drafter") or "").endswith("DFlashProposer"):
                checks[f"full_drafter_s{seed}_block_graphs_replayed"] = replays.get("dflash_block", 0) > 0
            else:
                checks[f"full_drafter_s{seed}_first_pass_graphs_replayed"] = any_replayed(replays, FIRST_PASS_KINDS)
                if args_k_above_one(full):
                    checks[f"full_drafter_s{seed}_chain_graphs_replayed"] = any_replayed(replays, CHAIN_KINDS)
            checks[f"full_drafter_s{seed}_no_pointer_mismatch"] = full.get("pointer_mismatches") == 0
            checks[f"full_drafter_s{seed}_log_shows_capture"] = any(
                CAPTURE_LOG_PREFIX in line and " s, " in line and "MiB" in line for line in full.get("log_excerpt", []))
            checks[f"full_drafter_s{seed}_tensor_parallel_{tp}"] = full.get("tensor_parallel_size") == tp
            if require_no_jit:
                checks[f"full_drafter_s{seed}_no_jit_during_inference"] = full.get("jit_during_inference") == []
            if tp > 1 or fail_capture:
                checks.update(rank_checks(full, seed, tp, fail_capture))
            if perfect and full.get("acceptance_per_position"):
                checks[f"full_drafter_s{seed}_every_position_100pct"] = all(
                    a == 1.0 for a in full["acceptance_per_position"])
            if greedy and "acceptance_counts" in eager and "acceptance_counts" in full:
                checks[f"full_drafter_s{seed}_acceptance_counts_equal_eager"] = (
                    full["acceptance_counts"] == eager["acceptance_counts"])
    return checks


def args_k_above_one(result: dict) -> bool:
    return len(result.get("acceptance_per_position") or []) > 1


def mean_acceptance(results: list[dict], variant: str) -> list[float] | None:
    rows = [r["acceptance_per_position"] for r in results
            if r.get("variant") == variant and r.get("acceptance_per_position")]
    return [round(sum(col) / len(col), 4) for col in zip(*rows)] if rows else None


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("outdir")
    parser.add_argument("--pair", default="llama_eagle")
    parser.add_argument("--variant", default="perfect")
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--variants", default="nospec,upstream_v1,eager_drafter,full_drafter")
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--draft-sample-method", default=None)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--target-logit", type=float, default=None,
                        help="the target's winning logit (default: the zoo's sharp 16; 8 = soft, for sampling runs)")
    parser.add_argument("--timeout", type=int, default=420, help="seconds per engine boot and its jobs")
    parser.add_argument("--kv-cache-bytes", type=int, default=None,
                        help="fixed KV-cache size per engine (no memory profiling: lets parts share the GPU)")
    parser.add_argument("--runner", choices=("v1", "auto"), default="v1",
                        help="v1: force VLLM_USE_V2_MODEL_RUNNER=0; auto: let vLLM choose (MoE targets pick V1)")
    parser.add_argument("--tolerance-pts", type=float, default=None,
                        help="max |full - eager| acceptance difference per position, averaged over seeds")
    parser.add_argument("--allow-jit", action="store_true",
                        help="do not fail when vLLM's JIT monitor saw a kernel compile during inference in our "
                             "variant (by default that fails: our runner warms those kernels at boot)")
    parser.add_argument("--concurrent", action="store_true",
                        help="boot the variants at once (needs --kv-cache-bytes: no memory profiling)")
    parser.add_argument("--fail-capture", default=None, metavar="RANK:KIND:REQS",
                        help=f"inject a capture failure into our variant ({FAIL_CAPTURE_ENV})")
    add_parallel_flags(parser)
    args = parser.parse_args()
    if args.concurrent and not args.kv_cache_bytes:
        parser.error("--concurrent needs --kv-cache-bytes (engines sharing a GPU cannot profile its memory)")
    out = Path(args.outdir)
    out.mkdir(parents=True, exist_ok=True)
    from portable_spec.harness.e2e.child import prompts_for_seed
    from portable_spec.harness.model_zoo import LOGIT, build_pair, expected_continuation

    logit = LOGIT if args.target_logit is None else args.target_logit
    pair = build_pair(args.pair, Path("/tmp/portable_spec_zoo"), variant=args.variant, num_speculative_tokens=args.k,
                      target_logit=logit)
    tag = (f"{args.pair}_{args.variant}_k{args.k}_t{args.temperature:g}" + ("" if logit == LOGIT else f"_logit{logit:g}")
           + ("_auto" if args.runner == "auto" else "") + (f"_tp{args.tp}" if args.tp > 1 else "")
           + ("_failcapture" if args.fail_capture else ""))
    seeds = [int(s) for s in args.seeds.split(",")]
    greedy = args.temperature == 0
    continuations = None if greedy else {
        seed: [expected_continuation(pair["expected"]["f"], p, args.max_tokens) for p in prompts_for_seed(seed)]
        for seed in seeds}
    results = []
    variants = args.variants.split(",")

    def run_one(variant: str) -> dict:
        """One boot per variant: every seed's prompts run in it (the child's greedy job loops over --seeds)."""
        child = ["--target", pair["target"], "--draft", pair["draft"], "--method", pair["method"],
                 "--k", str(args.k), "--seeds", args.seeds, "--temperature", str(args.temperature),
                 "--max-tokens", str(args.max_tokens), *parallel_child_args(args)]
        if args.draft_sample_method:
            child += ["--draft-sample-method", args.draft_sample_method]
        if args.kv_cache_bytes:
            child += ["--kv-cache-bytes", str(args.kv_cache_bytes)]
        log = out / f"e2e_{tag}_{variant}.log"
        env = {FAIL_CAPTURE_ENV: args.fail_capture} if args.fail_capture and variant == "full_drafter" else {}
        if args.concurrent:  # engines booting together must not write one vLLM compile-cache entry together
            env.update(own_compile_cache(f"{tag}-{variant}"))
        result = run_variant(variant, child, log, args.timeout, runner=args.runner, extra_env=env)
        result["log_excerpt"] = log_excerpt(log)
        return result

    if args.concurrent:
        with ThreadPoolExecutor(max_workers=len(variants)) as pool:
            outcomes = list(pool.map(run_one, variants))
    else:
        outcomes = [run_one(variant) for variant in variants]
    for result in outcomes:
        for row in per_seed_rows(result, seeds):
            results.append(row)
            print(json.dumps({k: row.get(k) for k in (
                "variant", "seed", "error", "use_v2_model_runner", "platform", "runner", "drafter", "capture_stats",
                "replays", "pointer_mismatches", "acceptance_per_position", "boot_s", "tensor_parallel_size",
                "jit_during_inference")}),
                  flush=True)
    # Perfect heads accept everything under greedy decoding; when sampling, only with probabilistic draft sampling
    # (the EAGLE head's draft distribution then equals the target's: p / q == 1).
    perfect = args.variant == "perfect" and pair["method"] != "dflash" and (
        greedy or (pair["method"] == "eagle" and args.draft_sample_method == "probabilistic"))
    checks = checks_for(results, seeds, greedy, perfect=perfect, greedy_continuations=continuations, tp=args.tp,
                        fail_capture=args.fail_capture, require_no_jit=not args.allow_jit)
    if args.tolerance_pts is not None:
        full, eager = mean_acceptance(results, "full_drafter"), mean_acceptance(results, "eager_drafter")
        if full and eager:
            checks["full_vs_eager_acceptance_within_tolerance"] = all(
                abs(a - b) * 100 <= args.tolerance_pts for a, b in zip(full, eager))
    import torch

    from portable_spec.vllm_adapter.harness_door.offline import vllm_version

    report = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "device": torch.cuda.get_device_name(), "device_count": torch.cuda.device_count(),
              "torch": torch.__version__, "vllm": vllm_version(), "tensor_parallel_size": args.tp,
              "fail_capture": args.fail_capture,
              "pair": args.pair, "variant": args.variant, "method": pair["method"], "k": args.k,
              "temperature": args.temperature, "draft_sample_method": args.draft_sample_method,
              "target_logit": logit, "target_top_probability_t1": pair["expected"]["target_top_probability_t1"],
              "runner_choice": args.runner,
              "expected_acceptance_per_position": pair["expected"]["acceptance_per_position"],
              "mean_acceptance_per_position": {v: mean_acceptance(results, v) for v in args.variants.split(",")},
              "results": results, "checks": checks}
    (out / f"v1_drafter_e2e_{tag}.json").write_text(json.dumps(report, indent=1))
    print("CHECKS " + json.dumps(checks), flush=True)
    return 0 if checks and all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
