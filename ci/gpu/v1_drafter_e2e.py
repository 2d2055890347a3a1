"""Issue 6 end to end on the GPU host: vLLM 0.26.0's V1 runner with our FULL drafter graphs vs the eager drafter,
upstream V1 (PIECEWISE drafter) and no speculation, on generated tiny model pairs.

    python ci/gpu/v1_drafter_e2e.py OUTDIR [--pair llama_eagle] [--variant perfect] [--k 3] [--seeds 0]
           [--variants nospec,upstream_v1,eager_drafter,full_drafter] [--temperature 0] [--draft-sample-method M]
           [--target-logit 8]   (the soft target: sampled output departs from greedy; see the model zoo)
           [--async-scheduling]   (every engine with async scheduling, which vLLM 0.26.0 leaves off for draft_model)
           [--tp 2 --disable-custom-all-reduce --no-fuse-allreduce-rms]   (tensor parallel; the two switches for
           hosts without NVLink multicast)  [--fail-capture RANK:KIND:REQS]   (our variant's capture of that key
           fails on that rank: every rank must drop it, output must stay exact)
           [--allow-jit]   (do not fail when our variant JIT-compiles a kernel during inference; by default it
           fails: our runner warms the drafter/verify kernels at boot. Upstream variants' JIT events are reported only)
           [--inject-bug NAME]   (TP=1: our variant runs with a known drafter bug, PORTABLE_SPEC_INJECT_BUG; the
           run passes when an exactness check catches it)  [--expect-draft-sample d2t_gather]   (our fused graphs
           must sample that way: the d2t gather on an EAGLE-3 head with a draft vocabulary)

Each engine variant boots once, in its own child process, and runs every seed's prompts; under greedy decoding every
speculative variant records each step's drafts per request (``vllm_door.draft_recorder``). Writes
OUTDIR/v1_drafter_e2e_<tag>.json (device, versions, date, per-run results, checks, what each exactness check compared
and where it failed, log excerpts) and exits non-zero when a check fails; with ``--inject-bug``, non-zero when no
exactness check failed (the bug went unseen) or the run was not what it claims (``injected_bug`` in the JSON says
which checks caught it, and which of them the matrix had before the per-step oracle).
"""

from __future__ import annotations

import datetime
import json
import sys
from pathlib import Path

from portable_spec.draft.fault_injection import FAIL_CAPTURE_ENV
from portable_spec.envs import BY_NAME, INJECT_BUG_ENV
from portable_spec_harness.parallel import Parallel
from portable_spec_harness.e2e.parent import (log_excerpt, own_compile_cache, part_parser, per_seed_rows,
                                              run_variant, run_variants)
from portable_spec_harness.e2e.v1_checks import DRAFT_SAMPLES, bug_outcome, checks_for, judge, mean_acceptance
from portable_spec_harness.parallel import add_parallel_flags

__all__ = ["checks_for", "per_seed_rows"]  # what tests/test_e2e_harness.py reads from this script
INJECTABLE_BUGS = BY_NAME[INJECT_BUG_ENV].choices


def main() -> int:
    parser = part_parser("nospec,upstream_v1,eager_drafter,full_drafter")
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--draft-sample-method", default=None)
    parser.add_argument("--async-scheduling", action="store_true",
                        help="every variant's engine with async_scheduling=True (checked from its facts)")
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--prompt-set", choices=("fixed", "context"), default=None,
                        help="the prompts (default: context for the context pairs, else fixed)")
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
    parser.add_argument("--expect-draft-sample", default=None, choices=DRAFT_SAMPLES,
                        help="how our variant's fused graphs must sample (capture_stats' draft_sample): e.g. "
                             "d2t_gather for an EAGLE-3 head with a draft vocabulary")
    parser.add_argument("--inject-bug", default=None, choices=INJECTABLE_BUGS,
                        help=f"run our variant with this drafter bug ({INJECT_BUG_ENV}; TP=1): passes when caught")
    add_parallel_flags(parser)
    args = parser.parse_args()
    if args.concurrent and not args.kv_cache_bytes:
        parser.error("--concurrent needs --kv-cache-bytes (engines sharing a GPU cannot profile its memory)")
    if args.inject_bug and args.tp > 1:
        parser.error("--inject-bug runs at TP=1 only (the bug is installed in the child's own process)")
    out = Path(args.outdir)
    out.mkdir(parents=True, exist_ok=True)
    from portable_spec_harness.e2e.child import designed_outputs, prompt_set_for
    from portable_spec_harness.model_zoo import CONTEXT_PAIRS, LOGIT, build_pair

    logit = LOGIT if args.target_logit is None else args.target_logit
    pair = build_pair(args.pair, Path("/tmp/portable_spec_zoo"), variant=args.variant, num_speculative_tokens=args.k,
                      target_logit=logit)
    tag = (f"{args.pair}_{args.variant}_k{args.k}_t{args.temperature:g}" + ("" if logit == LOGIT else f"_logit{logit:g}")
           + ("_auto" if args.runner == "auto" else "") + (f"_tp{args.tp}" if args.tp > 1 else "")
           + ("_failcapture" if args.fail_capture else "") + (f"_bug_{args.inject_bug}" if args.inject_bug else ""))
    seeds = [int(s) for s in args.seeds.split(",")]
    greedy = args.temperature == 0
    prompt_set = args.prompt_set or prompt_set_for(args.pair)
    designed = designed_outputs(pair["expected"], prompt_set, seeds, args.max_tokens)
    continuations = None if greedy else designed
    # Constructed pairs whose answers are known (the context pairs): the no-speculation run must give the designed
    # greedy output, and the drafters the designed per-position acceptance.
    design = ({"outputs": designed, "acceptance": pair["expected"]["acceptance_per_position"]}
              if greedy and args.pair in CONTEXT_PAIRS else None)
    results = []
    variants = args.variants.split(",")

    def run_one(variant: str) -> dict:
        """One boot per variant: every seed's prompts run in it (the child's greedy job loops over --seeds)."""
        child = ["--target", pair["target"], "--draft", pair["draft"], "--method", pair["method"],
                 "--k", str(args.k), "--seeds", args.seeds, "--temperature", str(args.temperature),
                 "--max-tokens", str(args.max_tokens), "--prompt-set", prompt_set, *Parallel.from_args(args).child_args()]
        if args.draft_sample_method:
            child += ["--draft-sample-method", args.draft_sample_method]
        if args.async_scheduling:
            child += ["--async-scheduling"]
        if args.kv_cache_bytes:
            child += ["--kv-cache-bytes", str(args.kv_cache_bytes)]
        if greedy and variant != "nospec":
            child += ["--record-drafts"]
        log = out / f"e2e_{tag}_{variant}.log"
        env = {FAIL_CAPTURE_ENV: args.fail_capture} if args.fail_capture and variant == "full_drafter" else {}
        if args.inject_bug and variant == "full_drafter":
            env[INJECT_BUG_ENV] = args.inject_bug
        if args.concurrent:  # engines booting together must not write one vLLM compile-cache entry together
            env.update(own_compile_cache(f"{tag}-{variant}"))
        result = run_variant(variant, child, log, args.timeout, runner=args.runner, extra_env=env)
        result["log_excerpt"] = log_excerpt(log)
        return result

    for result in run_variants(run_one, variants, args.concurrent):
        for row in per_seed_rows(result, seeds):
            results.append(row)
            print(json.dumps({k: row.get(k) for k in (
                "variant", "seed", "error", "use_v2_model_runner", "platform", "runner", "drafter", "capture_stats",
                "replays", "pointer_mismatches", "acceptance_per_position", "boot_s", "tensor_parallel_size",
                "jit_during_inference", "jit_monitor_active", "draft_record", "injected_bug")}),
                  flush=True)
    # Perfect heads accept everything under greedy decoding; when sampling, only with probabilistic draft sampling
    # (the EAGLE head's draft distribution then equals the target's: p / q == 1).
    perfect = design is None and args.variant in ("perfect", "d2t") and pair["method"] != "dflash" and (
        greedy or (pair["method"] == "eagle" and args.draft_sample_method == "probabilistic"))
    judged = judge(results, seeds, greedy, perfect=perfect, k=args.k, greedy_continuations=continuations, tp=args.tp,
                   fail_capture=args.fail_capture, require_no_jit=not args.allow_jit, tolerance_pts=args.tolerance_pts,
                   inject_bug=args.inject_bug, design=design, draft_sample=args.expect_draft_sample,
                   async_scheduling=args.async_scheduling)
    checks = judged.checks
    injected = None
    if args.inject_bug:
        from portable_spec_harness.vllm_door.bug_injection import BUGS

        bug = BUGS[args.inject_bug]
        injected = {**bug_outcome(checks, args.inject_bug), "imitates": bug.imitates, "should_fail": bug.should_fail,
                    "fired": next(((r.get("injected_bug") or {}).get("fired") for r in results
                                   if r.get("variant") == "full_drafter" and "error" not in r), None)}
    import torch

    from portable_spec_harness.vllm_door.offline import vllm_version

    report = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "device": torch.cuda.get_device_name(), "device_count": torch.cuda.device_count(),
              "torch": torch.__version__, "vllm": vllm_version(), "tensor_parallel_size": args.tp,
              "fail_capture": args.fail_capture,
              "pair": args.pair, "variant": args.variant, "method": pair["method"], "k": args.k,
              "injected_bug": injected,
              "temperature": args.temperature, "draft_sample_method": args.draft_sample_method,
              "async_scheduling_asked": args.async_scheduling,
              "target_logit": logit, "target_top_probability_t1": pair["expected"]["target_top_probability_t1"],
              "runner_choice": args.runner,
              "expected_acceptance_per_position": pair["expected"]["acceptance_per_position"],
              "mean_acceptance_per_position": {v: mean_acceptance(results, v) for v in args.variants.split(",")},
              "results": results, "checks": checks, "exactness": judged.evidence}
    (out / f"v1_drafter_e2e_{tag}.json").write_text(json.dumps(report, indent=1))
    print("CHECKS " + json.dumps(checks), flush=True)
    if injected is not None:
        print("INJECTED_BUG " + json.dumps({k: injected[k] for k in ("name", "caught", "caught_by",
                                                                      "caught_by_pre_oracle", "run_checks_failed")}),
              flush=True)
        return 0 if injected["caught"] else 1
    return 0 if checks and all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
