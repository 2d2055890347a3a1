"""Issue 23 end to end on the GPU host: Model Runner V2 under our CUDA platform (``VLLM_PLATFORM=cuda``) against MRV2
on vLLM's built-in CUDA platform and no speculation, on one generated dense pair.

    python ci/gpu/mrv2_e2e.py OUTDIR [--pair llama_eagle] [--variant perfect] [--k 3] [--seeds 0]
           [--variants nospec,builtin_mrv2,ours_platform_mrv2] [--kv-cache-bytes N] [--concurrent] [--timeout 420]

The MRV2 variants set no ``VLLM_USE_V2_MODEL_RUNNER``: vLLM picks the runner, and the checks assert it picked MRV2
(``harness/portable_spec_harness/e2e/mrv2_checks.py``: greedy = no speculation, acceptance = MRV2 on vLLM's platform, MRV2's
graphs in our one pool, capture sizes left to MRV2 with one log line, the graphs our budget counts). Each variant
boots once in its own child (``harness/e2e/child.py``) and runs every seed. Writes OUTDIR/mrv2_e2e_<tag>.json
(device, versions, date, per-run results, checks, what each exactness check compared, log excerpts) and exits
non-zero when a check fails. ``ci/gpu/v1_drafter_matrix.py --parts mrv2`` runs every part of
``harness/e2e/mrv2_parts.py`` through this script.
"""

from __future__ import annotations

import datetime
import json
import sys
from pathlib import Path

from portable_spec_harness.e2e.mrv2_checks import judge
from portable_spec_harness.e2e.mrv2_parts import DEFAULT_VARIANTS
from portable_spec_harness.e2e.parent import (log_excerpt, own_compile_cache, part_parser, per_seed_rows,
                                              run_variant, run_variants)

ROW_KEYS = ("variant", "seed", "error", "use_v2_model_runner", "runner_kind", "platform", "worker", "speculator",
            "capture_sizes", "mrv2_full_graphs", "vllm_graphs", "port_pool", "acceptance_per_position", "boot_s")


def main() -> int:
    parser = part_parser(",".join(DEFAULT_VARIANTS))
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--timeout", type=int, default=420, help="seconds per engine boot and its jobs")
    parser.add_argument("--kv-cache-bytes", type=int, default=None,
                        help="fixed KV-cache size per engine (no memory profiling: lets parts share the GPU)")
    parser.add_argument("--concurrent", action="store_true",
                        help="boot the variants at once (needs --kv-cache-bytes: no memory profiling)")
    args = parser.parse_args()
    if args.concurrent and not args.kv_cache_bytes:
        parser.error("--concurrent needs --kv-cache-bytes (engines sharing a GPU cannot profile its memory)")
    out = Path(args.outdir)
    out.mkdir(parents=True, exist_ok=True)
    from portable_spec_harness.e2e.child import designed_outputs, prompt_set_for
    from portable_spec_harness.model_zoo import CONTEXT_PAIRS, build_pair

    pair = build_pair(args.pair, Path("/tmp/portable_spec_zoo"), variant=args.variant, num_speculative_tokens=args.k)
    tag = f"{args.pair}_{args.variant}_k{args.k}"
    seeds = [int(s) for s in args.seeds.split(",")]
    prompt_set = prompt_set_for(args.pair)
    design = ({"outputs": designed_outputs(pair["expected"], prompt_set, seeds, args.max_tokens),
               "acceptance": pair["expected"]["acceptance_per_position"]} if args.pair in CONTEXT_PAIRS else None)
    variants = args.variants.split(",")

    def run_one(variant: str) -> dict:
        child = ["--target", pair["target"], "--draft", pair["draft"], "--method", pair["method"],
                 "--k", str(args.k), "--seeds", args.seeds, "--temperature", "0",
                 "--max-tokens", str(args.max_tokens), "--prompt-set", prompt_set]
        if args.kv_cache_bytes:
            child += ["--kv-cache-bytes", str(args.kv_cache_bytes)]
        env = own_compile_cache(f"mrv2-{tag}-{variant}") if args.concurrent else {}
        log = out / f"mrv2_{tag}_{variant}.log"
        result = run_variant(variant, child, log, args.timeout, extra_env=env)
        result["log_excerpt"] = log_excerpt(log)
        return result

    results = [row for result in run_variants(run_one, variants, args.concurrent)
               for row in per_seed_rows(result, seeds)]
    for row in results:
        print(json.dumps({k: row.get(k) for k in ROW_KEYS}), flush=True)
    # Perfect EAGLE heads accept every draft under greedy decoding; the zoo's plain DFlash head does not.
    perfect = design is None and args.variant == "perfect" and pair["method"] != "dflash"
    judged = judge(results, seeds, method=pair["method"], k=args.k, perfect=perfect, design=design)
    import torch

    from portable_spec_harness.vllm_door.offline import vllm_version

    report = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "device": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
              "torch": torch.__version__, "vllm": vllm_version(), "pair": args.pair, "variant": args.variant,
              "method": pair["method"], "k": args.k, "seeds": seeds, "variants": variants,
              "expected_acceptance_per_position": pair["expected"]["acceptance_per_position"],
              "results": results, "checks": judged.checks, "exactness": judged.evidence}
    (out / f"mrv2_e2e_{tag}.json").write_text(json.dumps(report, indent=1))
    print("CHECKS " + json.dumps(judged.checks), flush=True)
    return 0 if judged.checks and all(judged.checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
