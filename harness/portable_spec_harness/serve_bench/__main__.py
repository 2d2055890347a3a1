"""``python -m portable_spec_harness.serve_bench --pair DIR_OR_NAME --out DIR``: the serving benchmark of issue 24.

Boots ``vllm serve`` per variant (upstream V1, ours, MRV2 for dense targets), once for every cell, drives each with
vLLM's own ``vllm bench serve`` (random dataset, fixed lengths) in every cell: ``--input-len`` x ``--sampling`` x
``--concurrency``, each cell's runs sized from its warm run to last ``--min-run-s``, rounds interleaved, and writes
``OUT/serve_bench.json`` (medians of the rounds per cell, ``ours_over_upstream_v1`` / ``ours_over_mrv2`` per cell
key such as ``in1024/sampled/c2`` on output tok/s and median TPOT with the rounds paired, the runs under
``--min-run-s``, the phase clock's host/device split at concurrency 1 or in the cell ``--clock-cell`` names),
``.txt`` and ``.png``, every client run's saved JSON and printed text under ``OUT/runs/``, and each server's log.
``--tp N`` runs every server at tensor parallel N on GPUs 0..N-1 (``--disable-custom-all-reduce
--no-fuse-allreduce-rms`` too on a host without NVLink multicast); the placement is then estimated per GPU and the
report names the TP. ``--async-scheduling on|off`` asks every server
for that scheduling; a variant named with a suffix asks its own server (``--variants upstream_v1,ours,ours@async``:
ours with vLLM's default and ours with async scheduling, one more server, interleaved like the rest), adding the
ratios ``ours@async_over_upstream_v1`` and ``ours@async_over_ours``; the report checks each server ran as asked.
Exit 0 when the report is complete, 1 when it is not (a cell without numbers, a round cut by ``--budget-s``, a
server that ran something other than its label), 2 on bad input (one line naming the fix).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import math
import statistics
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from portable_spec.errors import PortableSpecError, UsageError
from portable_spec.output import emit_error
from portable_spec_harness.parallel import Parallel, add_parallel_flags
from portable_spec_harness.serve_bench import driver, plan
from portable_spec_harness.serve_bench.driver import Settings
from portable_spec_harness.serve_bench.servers import ASYNC_SCHEDULING

PLACEMENTS = ("auto", "together", "in_turn")
HOOKS = driver.Hooks
"""What starts servers and runs the client (the CPU tests swap in fake servers here)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2, shaped by --json too (see main)
        raise UsageError(f"{message} (see '{self.prog} --help')")


EXAMPLES = {"--concurrency": "1,2,8,32", "--input-len": "128,1024,4096"}


def _ints(flag: str, text: str, minimum: int) -> tuple[int, ...]:
    example = f"e.g. {flag} {EXAMPLES[flag]}"
    try:
        values = tuple(int(p) for p in text.replace(",", " ").split())
    except ValueError:
        raise PortableSpecError(f"{flag} takes comma-separated integers, got {text!r}: {example}") from None
    if not values or min(values) < minimum:
        raise PortableSpecError(f"{flag} needs integers >= {minimum}, got {text!r}: {example}")
    if len(set(values)) != len(values):
        raise PortableSpecError(f"{flag} lists a value twice ({text!r}): list each once")
    return values


def _sampling(text: str) -> tuple[str, ...]:
    """``--sampling``'s names, each known and listed once."""
    names = tuple(n for n in text.replace(",", " ").split())
    unknown = [n for n in names if n not in plan.SAMPLING]
    if not names or unknown:
        raise PortableSpecError(f"--sampling {text!r}: use {' or '.join(plan.SAMPLING)}, comma-separated "
                                "(e.g. --sampling greedy,sampled)")
    if len(set(names)) != len(names):
        raise PortableSpecError(f"--sampling lists a mode twice ({text!r}): list each once")
    return names


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m portable_spec_harness.serve_bench",
                description="vllm serve per variant, driven by vllm bench serve, rounds interleaved (issue 24).")
    p.add_argument("--pair", required=True, help="a prepared pair folder (target/, draft/, optional pair.json), a "
                                                 "model-zoo pair, or a real_shapes pair name")
    p.add_argument("--mode", default=None, help="weights (zoo pairs: the variant, default perfect; real_shapes "
                                                "names: dummy (default) or designed; a folder: a label)")
    p.add_argument("--head", default=None, help="a real_shapes pair's draft head: perfect (default) or partial")
    p.add_argument("--variants", default=",".join(plan.DEFAULT_VARIANTS),
                   help=f"comma-separated, of {', '.join(plan.VARIANTS)}; a name ending in @async or @sync is a "
                        "server of its own run with --async-scheduling / --no-async-scheduling, beside the plain one "
                        "(e.g. upstream_v1,ours,ours@async; default: %(default)s)")
    p.add_argument("--concurrency", default="1,2,8,32", help="--max-concurrency values (default: %(default)s)")
    p.add_argument("--rounds", type=int, default=3, help="timed rounds; each visits every cell once (default 3)")
    p.add_argument("--first-round", type=int, default=0,
                   help="rotation offset when one benchmark is split over several calls (default 0)")
    p.add_argument("--input-len", default="256",
                   help="prompt tokens, comma-separated: one cell per length (default: %(default)s; the servers' "
                        "max_model_len and KV cache fit the longest)")
    p.add_argument("--sampling", default="greedy",
                   help=f"comma-separated, of {', '.join(plan.SAMPLING)}: one cell per mode (sampled: temperature "
                        f"{plan.SAMPLING['sampled']['temperature']:g}, top-p {plan.SAMPLING['sampled']['top_p']:g}, "
                        "every request seeded from --seed; default: %(default)s)")
    p.add_argument("--output-len", type=int, default=256)
    p.add_argument("--prompts-per-slot", type=int, default=2,
                   help="the fewest prompts per run = this x concurrency (default 2); --min-run-s may size more")
    p.add_argument("--min-run-s", type=float, default=10.0,
                   help="size each cell's timed runs from its warm run to last at least this many seconds; shorter "
                        "runs are flagged in the report (default 10; 0: --prompts-per-slot as it is)")
    p.add_argument("--max-prompts", type=int, default=1024,
                   help="the most prompts one sized run gets (default %(default)s)")
    p.add_argument("--num-spec", type=int, default=None, help="speculative tokens (default: the pair's, else 3)")
    p.add_argument("--temperature", default=None, help=argparse.SUPPRESS)
    p.add_argument("--seed", type=int, default=0,
                   help="the client's random prompts, and every sampled request's seed (default 0)")
    p.add_argument("--placement", default="auto", choices=PLACEMENTS,
                   help="servers together (runs interleaved across them) or one at a time; auto: by the memory "
                        "estimate (default)")
    p.add_argument("--no-phase-clock", action="store_true", help="skip the phase clock and its profiled pass")
    p.add_argument("--clock-cell", default=None, metavar="CELL",
                   help="the cell the phase clock runs in, one of this call's (e.g. in4096/sampled/c8: its prompt "
                        "length, sampling and concurrency; default: c=1 at the first input length and sampling)")
    p.add_argument("--async-scheduling", default="default", choices=sorted(ASYNC_SCHEDULING),
                   help="vLLM's default for the method, or --async-scheduling / --no-async-scheduling on every "
                        "variant without an @async / @sync suffix (default: %(default)s)")
    p.add_argument("--kv-cache-gib", type=float, default=None, help="KV cache per server and GPU (default: sized "
                                                                    "from the workload, per rank at --tp)")
    add_parallel_flags(p)  # every variant's server at that TP; the placement estimate per GPU
    p.add_argument("--boot-timeout", type=float, default=600.0, help="seconds for the servers to answer /health")
    p.add_argument("--run-timeout", type=float, default=300.0, help="seconds for one client run")
    p.add_argument("--sizing-from", type=Path, default=None,
                   help="an earlier call of this benchmark (its folder or serve_bench.json): the cells it sized keep "
                        "its prompts and run one warm pass instead of two (a benchmark split over several calls)")
    p.add_argument("--size-per-variant", action="store_true",
                   help="size each variant's timed runs in a cell from its own warm run (default: every variant runs "
                        "the prompts sized from the fastest one's, so a slow baseline's runs last several times "
                        "--min-run-s)")
    p.add_argument("--keep-servers", type=Path, default=None,
                   help="leave the servers running when this call ends and write their registry to this file, for "
                        "the next call's --reuse-servers (a benchmark split over calls on a host that stays up; "
                        "needs --no-phase-clock; with --placement in_turn, the last round's last server where the "
                        "next call's first round starts with its variant)")
    p.add_argument("--reuse-servers", type=Path, default=None,
                   help="an earlier call's --keep-servers registry: each of its servers that is the same server "
                        "this call would boot, alive and healthy, is used instead of a boot (the rest boot); with "
                        "--sizing-from, such a server runs no warm run in the cells it served before, but the first")
    p.add_argument("--server-max-num-seqs", type=int, default=None,
                   help="the servers' --max-num-seqs (default: the largest --concurrency); a chained call of fewer "
                        "concurrencies names the chain's largest, so it reuses the kept servers instead of booting")
    p.add_argument("--server-max-input-len", type=int, default=None,
                   help="the input length the servers' --max-model-len and KV cache fit (default: the longest "
                        "--input-len); a chained call of shorter inputs names the chain's longest, for the same reason")
    p.add_argument("--budget-s", type=float, default=None,
                   help="stop starting rounds when the next would end past this many seconds; with --sizing-from, "
                        "a call that would boot and could not finish one round in it is refused before booting")
    p.add_argument("--work-dir", type=Path, default=Path("/tmp/portable_spec_zoo"),
                   help="where zoo / real-shape pairs are built")
    p.add_argument("--out", type=Path, required=True, help="output folder")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    return p


def settings_from(args: argparse.Namespace) -> Settings:
    """The checked settings (every problem one line naming the fix)."""
    variants = plan.checked_variants(args.variants, args.async_scheduling)
    if args.temperature is not None:
        raise PortableSpecError(f"--temperature is gone: pass --sampling greedy or sampled (sampled: temperature "
                                f"{plan.SAMPLING['sampled']['temperature']:g}, top-p "
                                f"{plan.SAMPLING['sampled']['top_p']:g}, seeded from --seed), or both: greedy,sampled")
    for flag, value, minimum in (("--rounds", args.rounds, 1), ("--output-len", args.output_len, 2),
                                 ("--prompts-per-slot", args.prompts_per_slot, 1),
                                 ("--first-round", args.first_round, 0), ("--max-prompts", args.max_prompts, 1),
                                 ("--min-run-s", args.min_run_s, 0)):
        if not (value >= minimum and math.isfinite(value)):
            raise PortableSpecError(f"{flag} must be >= {minimum} and finite (got {value})")
    if args.num_spec is not None and args.num_spec < 1:
        raise PortableSpecError(f"--num-spec must be >= 1 (got {args.num_spec})")
    for flag, value in (("--boot-timeout", args.boot_timeout), ("--run-timeout", args.run_timeout),
                        ("--budget-s", args.budget_s), ("--kv-cache-gib", args.kv_cache_gib)):
        if value is not None and not value > 0:
            raise PortableSpecError(f"{flag} must be > 0 (got {value})")
    if args.out.exists() and not args.out.is_dir():
        raise PortableSpecError(f"--out {args.out} is a file: pass a folder")
    parallel = Parallel.from_args(args)
    if parallel.problem():
        raise PortableSpecError(parallel.problem())
    if args.keep_servers is not None and not args.no_phase_clock:
        raise PortableSpecError("--keep-servers leaves the servers for a later call's timed runs, and the phase "
                                "clock's profiler pass can slow a server afterwards: add --no-phase-clock")
    concurrency, input_lens = _ints("--concurrency", args.concurrency, 1), _ints("--input-len", args.input_len, 1)
    sampling = _sampling(args.sampling)
    if args.clock_cell is not None:
        if args.no_phase_clock:
            raise PortableSpecError(f"--clock-cell {args.clock_cell} names where the phase clock runs, and "
                                    "--no-phase-clock skips it: drop one")
        plan.clock_cell(plan.cells(input_lens, sampling, concurrency), args.clock_cell)
    # a server shape below the cells is refused here, before the pair is built or --out made
    plan.server_shape(concurrency, input_lens, args.server_max_num_seqs, args.server_max_input_len)
    return Settings(variants=variants, concurrency=concurrency, rounds=args.rounds,
                    first_round=args.first_round, input_lens=input_lens,
                    sampling=sampling, output_len=args.output_len,
                    prompts_per_slot=args.prompts_per_slot, min_run_s=args.min_run_s, max_prompts=args.max_prompts,
                    size_per_variant=args.size_per_variant, seed=args.seed,
                    placement=args.placement, phase_clock=not args.no_phase_clock, clock_cell=args.clock_cell,
                    boot_s=args.boot_timeout,
                    run_timeout_s=args.run_timeout, budget_s=args.budget_s, kv_cache_gib=args.kv_cache_gib,
                    async_scheduling=args.async_scheduling, parallel=parallel,
                    server_max_num_seqs=args.server_max_num_seqs, server_max_input_len=args.server_max_input_len,
                    keep_servers=str(args.keep_servers) if args.keep_servers is not None else None,
                    reuse_servers=str(args.reuse_servers) if args.reuse_servers is not None else None)


SIZED_BY = ("output_len", "min_run_s", "prompts_per_slot", "max_prompts", "run_timeout_s", "size_per_variant")
"""The settings a cell's sizing follows from besides its cell and pair: an earlier call's sizing is reused only where
they are the same (``size_per_variant``: a cell sized once for every variant, or once per variant)."""
SIZED_BY_BEFORE = {"size_per_variant": False}
"""What a report written before one of ``SIZED_BY`` existed ran with."""


def earlier_sizing(settings: Settings, pair: Any, source: Path) -> Settings:
    """``settings`` with the sizing an earlier call of the same benchmark fixed (``--sizing-from``), for the cells it
    shares with this one, its short runs there (what those cells' prompts grow from, ``Bench.earlier``), and the
    seconds its timed runs and its boot took (what the budget reckons with): the same
    pair and weights, the same ``SIZED_BY`` settings and TP, else one line naming the fix."""
    from portable_spec_harness.serve_bench.combine import load

    report = load(source)
    fix = "pass the report of an earlier call of this same benchmark, or drop --sizing-from"
    if report.get("kind") != "serve_bench" or not isinstance(report.get("sizing"), dict):
        raise PortableSpecError(f"--sizing-from {source}: not a serve bench report with a sizing: {fix}")
    theirs = (report["pair"].get("name"), report["pair"].get("mode"))
    if theirs != (pair.name, pair.mode):
        raise PortableSpecError(f"--sizing-from {source}: sized {theirs[0]} ({theirs[1]}), this bench runs "
                                f"{pair.name} ({pair.mode}): {fix}")
    earlier = report.get("settings") or {}
    for key in SIZED_BY:
        theirs_ran = earlier.get(key, SIZED_BY_BEFORE.get(key))
        if theirs_ran != getattr(settings, key):
            raise PortableSpecError(f"--sizing-from {source}: its {key} was {theirs_ran}, this bench's is "
                                    f"{getattr(settings, key)}: {fix}")
    if (earlier.get("parallel") or {}).get("tensor_parallel_size", 1) != settings.parallel.tp:
        raise PortableSpecError(f"--sizing-from {source}: another tensor parallel size: {fix}")
    keys = {cell.key for cell in plan.cells(settings.input_lens, settings.sampling, settings.concurrency)}
    shared = {k: v for k, v in report["sizing"].items() if k in keys}
    if not shared:
        raise PortableSpecError(f"--sizing-from {source}: it sized none of this bench's cells: {fix}")
    durations: dict[str, dict[str, list[float]]] = {}
    for run in report.get("runs", []):
        cell = plan.cell_of(run, report["workload"])
        if cell.key in shared and run.get("duration_s"):
            durations.setdefault(cell.key, {}).setdefault(run["variant"], []).append(run["duration_s"])
    medians = {key: {v: statistics.median(d) for v, d in by.items()} for key, by in durations.items()}
    return replace(settings, sizing_from=str(source), earlier_sizing=shared, earlier_durations=medians,
                   earlier_short_s=_shortest(report.get("short_runs") or [], shared),
                   earlier_boot_s=_together_boot_s(report), earlier_variant_boot_s=_in_turn_boot_s(report))


def _shortest(short_runs: list[dict[str, Any]], cells: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Cell key -> variant -> the shortest of an earlier call's timed runs under its ``--min-run-s`` (the report's
    ``short_runs``, ``report.short_runs``), in ``cells``: what a cell's prompts grow from (``Bench.earlier``)."""
    out: dict[str, dict[str, float]] = {}
    for run in short_runs:
        if run["cell"] in cells:
            by = out.setdefault(run["cell"], {})
            by[run["variant"]] = min(run["duration_s"], by.get(run["variant"], run["duration_s"]))
    return out


def _together_boot_s(report: dict[str, Any]) -> float | None:
    """The seconds an earlier call took to boot its servers together, or None where it tells nothing: another
    placement (or a fall-back from ``together``), or every server a kept one (its boot recorded as 0)."""
    boot_s = (report.get("phases_s") or {}).get("boot_s")
    together = (report.get("placement") or {}).get("mode") == "together"
    return float(boot_s) if together and isinstance(boot_s, (int, float)) and boot_s > 0 else None


def _in_turn_boot_s(report: dict[str, Any]) -> dict[str, float]:
    """Variant -> the shortest of an earlier ``in_turn`` call's own boots of it (ready, not a kept server's, whose
    boot is recorded as 0); empty for another placement, whose servers booted side by side."""
    if (report.get("placement") or {}).get("mode") != "in_turn":
        return {}
    out = {}
    for variant, info in (report.get("variants") or {}).items():
        own = driver.own_boot_seconds(info.get("boots") or [])
        if own:
            out[variant] = min(own)
    return out


def host_problem() -> str | None:
    """Why this host cannot run the benchmark (vLLM or its client's HTTP library missing), or None."""
    for module, what in (("vllm", "vLLM 0.26.0 (on the GPU host: PYTHONPATH=/tmp/site)"),
                         ("aiohttp", "aiohttp, which vllm bench serve uses")):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not importable: install {what}"
    return None


def main(argv: list[str] | None = None) -> int:
    raw = list(sys.argv[1:] if argv is None else argv)
    as_json = "--json" in raw
    try:
        args = parser().parse_args(raw)
        settings = settings_from(args)
        problem = host_problem()
        if problem:
            raise PortableSpecError(problem)
        from portable_spec_harness.serve_bench.pairs import resolve

        pair = resolve(args.pair, args.mode, args.num_spec, args.work_dir, args.head)
        if not plan.variants_for(list(settings.variants), pair.moe)[0]:
            raise PortableSpecError(f"--variants {args.variants}: none applies to {pair.name} (MoE: no mrv2); add "
                                    "upstream_v1 or ours")
        if args.sizing_from is not None:
            settings = earlier_sizing(settings, pair, args.sizing_from)
    except PortableSpecError as exc:
        return emit_error(str(exc), exc.exit_code, as_json)
    say = (lambda line: print(line, file=sys.stderr, flush=True)) if as_json else (lambda line: print(line, flush=True))
    try:
        with contextlib.redirect_stdout(sys.stderr) if as_json else contextlib.nullcontext():
            result = driver.run_serve_bench(pair, settings, args.out, HOOKS(say=say))
    except PortableSpecError as exc:  # found before any server started (fewer GPUs than --tp, a budget too short)
        return emit_error(str(exc), exc.exit_code, as_json)
    if as_json:
        print(json.dumps(_headline(result)))
    else:
        print((args.out / "serve_bench.txt").read_text(), end="")
    return 0 if result["status"] == "complete" else 1


def _headline(result: dict[str, Any]) -> dict[str, Any]:
    """The report without the per-run rows (those stay in ``serve_bench.json``)."""
    return {k: v for k, v in result.items() if k not in ("runs", "warm_runs", "order")}


if __name__ == "__main__":
    sys.exit(main())
