"""Issue 12's musa-sim engine lane on the GPU host: real vLLM 0.26.0 engines on the MUSA code path (our MUSA platform
class, MusaWorker, the MUSA attention rows, the kernel substitutes, drafter graphs through the MUSA port into the one
pool) with only the device identity simulated; tensors live on the CUDA device. Everything it shows is "musa-sim".

    python ci/gpu/musa_sim_e2e.py OUTDIR [--parts musa_sim_eagle,musa_sim_dflash,...] [--parallel 4]
           [--concurrent-variants] [--timeout 420]

Parts (``harness/portable_spec_harness/e2e/musa_sim_parts.py``) run side by side, each engine with a fixed KV cache and each
part with its own vLLM compile cache (correctness only; timings mean nothing here); a part's variants boot one after
another unless ``--concurrent-variants``. Models come from the generated zoo, built once before any part starts.
Writes OUTDIR/musa_sim_e2e.json (label, device, versions, date, what was simulated and what ran for real, every
part's rows with log excerpts, and its checks) and exits non-zero when a check fails.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import sys
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from portable_spec_harness.e2e.child import designed_outputs
from portable_spec_harness.e2e.musa_sim_checks import part_checks
from portable_spec_harness.e2e.musa_sim_parts import NOT_RUN, PARTS, RUN_FOR_REAL, SIMULATED, MusaSimPart, runnable
from portable_spec_harness.e2e.parent import log_excerpt, own_compile_cache, per_seed_rows, run_variant
from portable_spec_harness.musa_sim import LABEL
from portable_spec_harness.model_zoo import build_pair

ZOO = Path("/tmp/portable_spec_zoo_musa_sim")  # its own: the matrix builds the DFlash head at another K
KV_CACHE_BYTES = 1 << 30
MAX_TOKENS = 48
LOG_LINES = 80
ERROR_LINES = 25


def part_design(part: MusaSimPart, zoo: Path = ZOO) -> tuple[dict[str, Any], list[str], dict[int, list[list[int]]]]:
    """The part's zoo pair, the e2e child's arguments and, per seed, the greedy outputs the pair's design gives on
    the prompts the child runs (a context pair's own prompts and outputs; the f-chain's for the others)."""
    pair = build_pair(part.pair, zoo, variant=part.model_variant, num_speculative_tokens=part.k)
    child = ["--target", pair["target"], "--draft", pair["draft"], "--method", pair["method"], "--k", str(part.k),
             "--seeds", ",".join(map(str, part.seeds)), "--max-tokens", str(MAX_TOKENS),
             "--max-num-seqs", str(part.max_num_seqs), "--kv-cache-bytes", str(KV_CACHE_BYTES),
             "--prompt-set", part.prompt_set]
    return pair, child, designed_outputs(pair["expected"], part.prompt_set, part.seeds, MAX_TOKENS)


def run_part(part: MusaSimPart, out: Path, timeout: int, concurrent: bool) -> dict[str, Any]:
    pair, child, continuations = part_design(part)

    def boot(variant: str) -> dict[str, Any]:
        log = out / f"{part.name}_{variant}.log"
        env = own_compile_cache(f"musa-sim-{part.name}" + (f"-{variant}" if concurrent else ""))
        result = run_variant(variant, child, log, timeout, extra_env=env)
        result["log_excerpt"] = log_excerpt(log, limit=LOG_LINES)
        if "error" in result:  # what went wrong, without unpacking the archive
            result["log_tail"] = log.read_text(errors="replace").splitlines()[-ERROR_LINES:]
            last = (result["log_tail"] or [""])[-1][:300]
            print(f"=== {part.name} {variant}: {result['error']}: {last} ===", flush=True)
        return result

    if concurrent:
        with ThreadPoolExecutor(max_workers=len(part.variants)) as pool:
            results = list(pool.map(boot, part.variants))
    else:
        results = [boot(variant) for variant in part.variants]
    rows = [row for result in results for row in per_seed_rows(result, list(part.seeds))]
    expected = pair["expected"]["acceptance_per_position"]
    checks = part_checks(part, rows, continuations, expected)
    print(f"=== {part.name}: {sum(checks.values())}/{len(checks)} checks true ===", flush=True)
    print("CHECKS " + json.dumps({part.name: {k: v for k, v in checks.items() if not v} or "all true"}), flush=True)
    return {"description": part.description, "pair": part.pair, "model_variant": part.model_variant, "k": part.k,
            "seeds": list(part.seeds), "variants": list(part.variants),
            "expected_acceptance_per_position": expected, "rows": rows, "checks": checks}


def version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("outdir")
    parser.add_argument("--parts", default=",".join(runnable(version("vllm"))),
                        help=f"comma-separated, from {', '.join(PARTS)} (default: every part this vLLM runs)")
    parser.add_argument("--parallel", type=int, default=4, help="parts running at once on the GPU")
    parser.add_argument("--concurrent-variants", action="store_true", help="boot a part's variants at once too")
    parser.add_argument("--timeout", type=int, default=420, help="seconds per engine boot and its jobs")
    args = parser.parse_args()
    names = [p for p in args.parts.split(",") if p]
    unknown = [p for p in names if p not in PARTS]
    if unknown:
        parser.error(f"unknown part(s) {', '.join(unknown)}; choose from {', '.join(PARTS)}")
    too_old = [p for p in names if not PARTS[p].runs_on(version("vllm"))]
    if too_old:
        parser.error(f"part(s) {', '.join(too_old)} need vLLM >= {PARTS[too_old[0]].since} (installed: "
                     f"{version('vllm')}): run them with VLLM_SITE naming such a vLLM")
    out = Path(args.outdir)
    out.mkdir(parents=True, exist_ok=True)
    for name in names:  # once, before any part starts: parts never write one model directory together
        build_pair(PARTS[name].pair, ZOO, variant=PARTS[name].model_variant, num_speculative_tokens=PARTS[name].k)

    def guarded(name: str) -> dict[str, Any]:
        try:
            return run_part(PARTS[name], out, args.timeout, args.concurrent_variants)
        except Exception as exc:  # noqa: BLE001 - one broken part must not cost the others' results
            traceback.print_exc()  # where it broke, in the lane's log: the JSON keeps the one line
            print(f"=== {name}: {type(exc).__name__}: {exc} ===", flush=True)
            return {"error": f"{type(exc).__name__}: {exc}", "checks": {}}

    with ThreadPoolExecutor(max_workers=max(args.parallel, 1)) as pool:
        parts = dict(zip(names, pool.map(guarded, names)))
    failed = [name for name, p in parts.items() if not (p["checks"] and all(p["checks"].values()))]
    import torch

    report = {"label": LABEL, "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "device": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
              "torch": torch.__version__, "cuda": torch.version.cuda, "vllm": version("vllm"),
              "triton": version("triton"), "simulated": list(SIMULATED), "not_run": list(NOT_RUN),
              "run_for_real": list(RUN_FOR_REAL), "parts": parts, "failed_parts": failed}
    (out / "musa_sim_e2e.json").write_text(json.dumps(report, indent=1))
    print(f"=== musa-sim e2e: failed parts: {failed or 'none'} ===", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
