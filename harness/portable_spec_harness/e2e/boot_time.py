"""Boot time of engine variants, one at a time, each from cold caches, with a per-process profile of where it went.

    python -m portable_spec_harness.e2e.boot_time OUTDIR [--variants upstream_v1,full_drafter] [--tp 2 ...]
           [--pair llama_eagle] [--k 3] [--warm] [--no-prime] [--stack-every 5]

Why one at a time: engines booting together share CPUs (torch.compile) and say nothing about each other's boot.
Why cold caches: every boot gets its own vLLM, Inductor and Triton caches, so no variant profits from another's
compilation; ``--warm`` then boots each variant again on its own (now warm) caches.
Why a priming boot: machine-wide first-use costs outside the per-engine caches (the CUDA driver's compute cache,
FlashInfer's JIT dir, the OS file cache) land on whichever engine boots first on a fresh host, so one discarded boot of
the first variant on throwaway caches runs before the measured ones (``--no-prime``: none); it is reported apart.
Where the time goes: every Python process of the engine (the engine core and each tensor-parallel worker) samples
all its threads' stacks every ``--stack-every`` seconds (a daemon thread reading ``sys._current_frames()``, started by
a ``sitecustomize`` on the children's path only); the report counts, per process, the innermost vLLM/portable_spec/torch frame of each dump, so a phase
that took 60 s shows as ~60 / N samples in one function. vLLM's own timing lines are kept with their timestamps.
Writes OUTDIR/boot_time.json after every boot (a call cut by a time limit keeps the boots it finished).
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from portable_spec.envs import STACK_DIR_ENV, STACK_EVERY_ENV
from portable_spec_harness.parallel import Parallel
from portable_spec_harness.parallel import add_parallel_flags

SITECUSTOMIZE = '''
import os, sys, threading, time, traceback
from portable_spec.envs import stack_sampling
_every, _dir = stack_sampling()


def _sample(path, every):
    # A daemon thread with the GIL, reading sys._current_frames(): faulthandler's watchdog dumps crashed short-lived
    # children (vLLM's model inspection subprocess died with SIGSEGV on the H100).
    with open(path, "w") as out:
        out.write("ARGV %r\\n" % (sys.argv,))
        while True:
            time.sleep(every)
            out.write("Timeout (%.1f)!\\n" % every)
            for ident, frame in sys._current_frames().items():
                if ident == threading.get_ident():
                    continue
                out.write("Thread 0x%x (most recent call first):\\n" % ident)
                for entry in reversed(traceback.extract_stack(frame)):
                    out.write('  File "%s", line %s in %s\\n' % (entry.filename, entry.lineno, entry.name))
            out.flush()


if _every > 0 and _dir:
    threading.Thread(target=_sample, args=(os.path.join(_dir, "stacks-%d.txt" % os.getpid()), _every),
                     daemon=True, name="portable_spec-stack-sampler").start()
'''
TIMING_NEEDLES = ("took", "finished in", "Loading weights", "Compiling a graph", "Capturing CUDA graphs",
                  "portable_spec:", "init engine", "No available shared memory", "Graph capturing", "torch.compile",
                  "Dynamo bytecode transform", "Cache the graph", "KV cache", "Memory profiling", "Starting to load")
FRAME = re.compile(r'^\s+File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<func>\S+)')
OURS = ("/vllm/", "/portable_spec/", "/torch/")


def frame_profile(path: Path) -> dict[str, Any]:
    """Per dump, each thread's innermost frame inside vLLM, portable_spec or torch; counted over the dumps."""
    text = path.read_text(errors="replace")
    argv = text.splitlines()[0] if text else ""
    dumps = [d for d in re.split(r"^Timeout \(\S+\)!$", text, flags=re.M)[1:]]
    top: Counter = Counter()
    for dump in dumps:
        for thread in re.split(r"^(?:Thread|Current thread) 0x[0-9a-f]+ \(most recent call first\):$", dump,
                               flags=re.M)[1:]:
            for line in thread.splitlines():
                m = FRAME.match(line)
                if m and any(part in m["file"] for part in OURS):
                    short = "/".join(m["file"].split("/")[-2:])
                    top[f"{short}:{m['line']}({m['func']})"] += 1
                    break
    return {"argv": argv[:200], "dumps": len(dumps), "top_frames": top.most_common(12)}


def boot_once(variant: str, child_args: list[str], workdir: Path, log: Path, timeout_s: float,
              stack_every: float) -> dict[str, Any]:
    """Boot one engine on ``workdir``'s caches until READY; wall time, the child's own LLM() time, profiles."""
    from portable_spec_harness.e2e.interleave import ServedEngine

    stacks = workdir / f"stacks-{log.stem}"
    stacks.mkdir(parents=True, exist_ok=True)
    site = workdir / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    import os

    env = {"VLLM_CACHE_ROOT": str(workdir / "vllm"), "TORCHINDUCTOR_CACHE_DIR": str(workdir / "inductor"),
           "TRITON_CACHE_DIR": str(workdir / "triton"), STACK_EVERY_ENV: str(stack_every), STACK_DIR_ENV: str(stacks),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH", "")]))}
    started = time.perf_counter()
    engine = ServedEngine(variant, child_args, log, env)
    facts = engine.ready(timeout_s)
    wall = round(time.perf_counter() - started, 1)
    engine.close()
    lines = log.read_text(errors="replace").splitlines() if log.exists() else []
    return {"variant": variant, "wall_to_ready_s": wall, "llm_init_s": facts.get("boot_s"),
            "error": facts.get("error"), "capture_stats": facts.get("capture_stats"),
            "ranks": [{"rank": r.get("rank"), "capture_stats": r.get("capture_stats")} for r in facts.get("ranks", [])],
            "timing_lines": [line[-260:] for line in lines if any(n in line for n in TIMING_NEEDLES)][:80],
            "profiles": {p.name: frame_profile(p) for p in sorted(stacks.glob("stacks-*.txt"))}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("outdir")
    # upstream first: the baseline every ratio divides by is measured even when a time limit cuts the call
    parser.add_argument("--variants", default="upstream_v1,full_drafter,platform_only")
    parser.add_argument("--pair", default="llama_eagle")
    parser.add_argument("--model-variant", default="perfect")
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--max-num-seqs", type=int, default=64)
    parser.add_argument("--warm", action="store_true", help="boot each variant a second time on its warm caches")
    parser.add_argument("--prime", action=argparse.BooleanOptionalAction, default=True,
                        help="first boot the first variant once on throwaway caches, not measured (module docstring)")
    parser.add_argument("--stack-every", type=float, default=5.0, help="seconds between stack dumps (0: none)")
    parser.add_argument("--timeout", type=float, default=420)
    add_parallel_flags(parser)
    args = parser.parse_args(argv)
    from portable_spec_harness.model_zoo import build_pair

    out = Path(args.outdir)
    out.mkdir(parents=True, exist_ok=True)
    pair = build_pair(args.pair, Path("/tmp/portable_spec_zoo"), variant=args.model_variant,
                      num_speculative_tokens=args.k)
    child = ["--target", pair["target"], "--draft", pair["draft"], "--method", pair["method"], "--k", str(args.k),
             "--max-num-seqs", str(args.max_num_seqs), *Parallel.from_args(args).child_args()]
    root = Path(tempfile.mkdtemp(prefix="boot_time_"))
    variants = args.variants.split(",")
    boots, ratios, walls, priming = [], {}, {}, None
    if args.prime:
        first = variants[0]
        booted = boot_once(first, child, root / "priming", out / f"boot_priming_{first}.log", args.timeout,
                           args.stack_every)
        priming = {k: booted[k] for k in ("variant", "wall_to_ready_s", "llm_init_s", "error")}
        print(json.dumps({"phase": "priming", **priming}), flush=True)
        write_report(out, args, boots, priming)  # an error here is recorded; the measured boots still run
    for phase in ("cold", "warm") if args.warm else ("cold",):
        for variant in variants:
            log = out / f"boot_{phase}_{variant}.log"
            boots.append({"phase": phase,
                          **boot_once(variant, child, root / variant, log, args.timeout, args.stack_every)})
            print(json.dumps({k: boots[-1][k] for k in ("phase", "variant", "wall_to_ready_s", "llm_init_s",
                                                        "error")}), flush=True)
            ratios, walls = write_report(out, args, boots, priming)  # after every boot: a call cut later keeps these
    print("BOOT " + json.dumps({"ours_over_upstream": ratios, "walls": {f"{p}/{v}": w for (p, v), w in walls.items()}}))
    return 0 if boots and not any(b["error"] for b in boots) else 1


def write_report(out: Path, args: argparse.Namespace, boots: list[dict], priming: dict | None) -> tuple[dict, dict]:
    """OUT/boot_time.json from the boots so far (``priming``, the discarded first boot, apart: it counts in no wall or
    ratio); returns ours / upstream per phase and the walls."""
    import torch

    from portable_spec_harness.vllm_door.offline import vllm_version

    walls = {(b["phase"], b["variant"]): b["wall_to_ready_s"] for b in boots if not b["error"]}
    ratios = {phase: round(walls[(phase, "full_drafter")] / walls[(phase, "upstream_v1")], 3)
              for phase in ("cold", "warm") if (phase, "full_drafter") in walls and (phase, "upstream_v1") in walls}
    costs = "the host's first-use costs (driver compute cache, FlashInfer JIT, file cache)"
    primed = (f"a discarded priming boot of the first variant on throwaway caches ran first, so {costs} fall "
              "on it, not on a measured boot" if args.prime
              else f"no priming boot: the first variant measured also pays {costs}")
    report = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "device": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
              "device_count": torch.cuda.device_count() if torch.cuda.is_available() else 0,
              "torch": torch.__version__, "vllm": vllm_version(), "tensor_parallel_size": args.tp,
              "pair": args.pair, "k": args.k, "max_num_seqs": args.max_num_seqs,
              "method": "one engine at a time, each on its own cold vLLM/Inductor/Triton caches (warm: again on its "
                        "own caches); wall from process start to READY; stack samples every "
                        f"{args.stack_every} s per process; " + primed,
              "variants_asked": args.variants.split(","), "priming": priming, "ours_over_upstream": ratios,
              "boots": boots}
    (out / "boot_time.json").write_text(json.dumps(report, indent=1))
    return ratios, walls


if __name__ == "__main__":
    raise SystemExit(main())
