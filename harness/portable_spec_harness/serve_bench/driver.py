"""One serving benchmark: decide the placement, boot the servers, warm every variant in every cell (input length x
sampling x concurrency), size each cell's prompts from its last warm runs (``--min-run-s``), run the timed rounds
interleaved, read the phase clock at concurrency 1, stop the servers, write the report.

The phase clock comes after a server's timed runs, never before them: its torch-profiler pass can leave the server
slower per kernel launch afterwards, which would slow a launch-heavy variant's timed runs more than another's.

``together``: every variant's server boots once and stays up for every cell; the client runs rotate across them
(``plan.order``). ``in_turn``: one server at a time; per round each variant boots, warms and runs every cell, then
stops, but a round's last server stays up for the next round where the rotation starts it with that variant
(``Bench.in_turn``), also into the next call (``--keep-servers``). The cells never add a boot: one server, sized for
the longest input (or ``--server-max-input-len`` and ``--server-max-num-seqs``: a chain's widest, so its kept servers
are reused), serves them all. A kept server
(``--reuse-servers``) runs no warm run in a cell it served before and ``--sizing-from`` sized (``Bench.warm_skip``).
A ``together`` boot that fails for memory with ``--placement auto`` falls back to ``in_turn``.

Servers are started through ``launch(server, port, log)`` (``servers.launch``: ``vllm serve`` processes) and the
client through ``client(argv, log, timeout_s)`` (``client.run_client``: vLLM's own ``vllm bench serve``). The CPU
tests pass in-process fake servers and keep the real client, so every step below runs without a GPU.
``OUTDIR/serve_bench.partial.json`` is rewritten after every run: a run cut short by an outer time limit keeps what
it measured.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import shutil
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from portable_spec.errors import PortableSpecError
from portable_spec_harness import vllm_serve
from portable_spec_harness.e2e.bench import progress_bar
from portable_spec_harness.e2e.interleave import rotation
from portable_spec_harness.parallel import Parallel
from portable_spec_harness.serve_bench import client as client_mod
from portable_spec_harness import host_facts, jit_judge
from portable_spec_harness.serve_bench import kept_servers, memory, plan, report, servers
from portable_spec_harness.serve_bench.pairs import BenchPair, read_config
from portable_spec_harness.serve_bench.servers import BenchServer
from portable_spec_harness.vllm_door import bench_client

HOST = "127.0.0.1"
OOM = re.compile(r"out of memory|OutOfMemoryError|Free memory on device|CUDA error: out of memory|"
                 r"No available memory for the cache blocks", re.IGNORECASE)
"""What a server's log says when it did not fit beside the others (torch, CUDA, vLLM's start-up memory check)."""
ROUND_RESERVE_S = 45.0
"""Kept back from ``--budget-s`` for stopping the servers and writing the report."""
KEPT_ROUND_RESERVE_S = 15.0
"""Kept back instead by a call that leaves its servers running (``--keep-servers``, servers booted together): the
report alone, with no server to stop (up to 20 s each, most of ``ROUND_RESERVE_S``), so a chained call does not
refuse a last round that fits."""
RUN_OVERHEAD_S = 4.0
"""A client run's cost beside its timed part (``vllm bench serve`` starting, its tokenizer, its result file)."""
WARM_SLACK = 1.25
"""A timed run predicted from the last warm wave alone: that many times waves x the wave (a timed run's waves come
slower than the warm one on a host-bound server, whose speed follows the host's)."""
PHASE_CLOCK_RESERVE_S = 40.0
"""Kept back from ``--budget-s`` per variant for its phase clock after the timed rounds (two short runs)."""
WARM_SKIPPED = ("a reused kept server that served this cell before; its prompts and run time come from "
                "--sizing-from")
WARM_CARRIED = ("the round before's last server, carried into this round: it ran this cell's timed runs just now, "
                "with the prompts fixed then")
"""Why a cell's warm run was left out (``Bench.warm_skip``, ``record["warm_skipped"]``)."""
PHASE_CLOCK_NEEDS_TP1 = ("the phase clock times the engine core's busy loop, where the worker runs only at TP=1 "
                         "(vLLM's single-process executor); at TP >= 2 the workers are processes of their own")
"""Why ``--tp`` >= 2 runs without the phase clock (recorded as ``phase_clock_skipped``)."""


@dataclass(frozen=True)
class Settings:
    variants: tuple[str, ...] = plan.DEFAULT_VARIANTS
    """Bench variant names, a scheduling suffix included (``plan.checked_variants``): one server each."""
    concurrency: tuple[int, ...] = (1, 2, 8, 32)
    rounds: int = 3
    first_round: int = 0
    """Where this call's rounds start in the rotation (a benchmark split over several calls keeps rotating)."""
    input_lens: tuple[int, ...] = (256,)
    sampling: tuple[str, ...] = ("greedy",)
    """Names of ``plan.SAMPLING``."""
    output_len: int = 256
    prompts_per_slot: int = 2
    """The fewest prompts per slot of a timed run; ``min_run_s`` may size more."""
    min_run_s: float = 10.0
    """Each cell's timed runs are sized from its warm runs to last at least this (0: ``prompts_per_slot`` as it is);
    a shorter timed run is flagged in the report."""
    max_prompts: int = 1024
    """The most prompts one sized run gets (a fast warm run cannot size a run that never ends)."""
    size_per_variant: bool = False
    """Size each (cell, variant) from that variant's own warm runs (``--size-per-variant``) instead of one size per
    cell from the fastest variant's: a slow baseline then runs the fast one's prompts for several times as long
    (vLLM 0.33.0's eager MRV2 draft-model speculator beside ours: most of a device session). Output tok/s at a fixed
    output length (``ignore_eos``, whole waves) does not depend on how many waves a run has, so each variant's runs
    need only reach ``min_run_s`` on their own; the rounds still pair run by run."""
    seed: int = 0
    placement: str = "auto"
    phase_clock: bool = True
    clock_cell: str | None = None
    """The cell the phase clock runs in (``--clock-cell``, one of this call's cell keys): None for concurrency 1 at the
    first input length and sampling. Why: a cell that misses a target gets its cause from the phase clock in that
    cell, at its own concurrency and prompt length (issue 41 item 4), not from concurrency 1."""
    clock_prompts: int = 2
    profile_output_len: int = 64
    boot_s: float = 600.0
    run_timeout_s: float = 300.0
    budget_s: float | None = None
    kv_cache_gib: float | None = None
    server_max_num_seqs: int | None = None
    """The servers' ``--max-num-seqs`` (``--server-max-num-seqs``; None: the highest concurrency): a chained call of
    fewer concurrencies names the chain's widest, so its kept servers' arguments stay the same and are reused
    (``plan.server_shape``)."""
    server_max_input_len: int | None = None
    """The input length the servers' ``--max-model-len`` and KV cache fit (``--server-max-input-len``; None: the
    longest input), for the same reason."""
    async_scheduling: str = "default"
    """``servers.ASYNC_SCHEDULING``: vLLM's default, or on / off for every variant without a scheduling suffix
    (``ours@async`` asks its own server, ``plan.scheduling_of``)."""
    parallel: Parallel = Parallel()
    """Tensor parallelism of every server (``parallel.Parallel``)."""
    sizing_from: str | None = None
    """An earlier call's report of this benchmark (``--sizing-from``), whose sizing ``earlier_sizing`` holds."""
    keep_servers: str | None = None
    """Where to leave a registry of this call's servers, left running for the next call (``kept_servers``)."""
    reuse_servers: str | None = None
    """An earlier call's registry: its servers stand in for this call's where they are the same (``kept_servers``)."""
    earlier_sizing: dict[str, Any] = field(default_factory=dict)
    """Cell key -> the sizing an earlier call of this benchmark fixed (``--sizing-from``): such a cell keeps its
    prompts and runs one warm pass, not ``plan.WARM_PASSES``: a benchmark split over several calls spent ~20% of each
    later call on warm runs, half of them only to size again, and its calls' runs now share their prompts."""
    earlier_durations: dict[str, dict[str, float]] = field(default_factory=dict)
    """Cell key -> variant -> the median seconds of that earlier call's timed runs: what ``round_estimate_s``
    expects a round of the same prompts to take."""
    earlier_short_s: dict[str, dict[str, float]] = field(default_factory=dict)
    """Cell key -> variant -> the shortest of that earlier call's timed runs under ``min_run_s`` (its report's
    ``short_runs``): such a cell's prompts grow from it (``Bench.earlier``, ``plan.resized_from_short``)."""
    earlier_boot_s: float | None = None
    """How long that earlier call's ``together`` boot took (``phases_s["boot_s"]``), where it booted: what
    ``preflight`` expects this call's boot to take at least."""
    earlier_variant_boot_s: dict[str, float] = field(default_factory=dict)
    """Variant -> the shortest boot of its own (ready, not a kept server's) in that earlier call, where it booted
    its servers ``in_turn``, one at a time: what ``preflight`` expects each boot of an ``in_turn`` call to take at
    least. A ``together`` call's per-server boots are left out: booting side by side, each was slower than alone."""

    def as_json(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v.as_json() if isinstance(v, Parallel) else v)
                for k, v in self.__dict__.items()}


@dataclass
class Live:
    server: BenchServer
    port: int
    log: Path
    handle: Any = None
    boot: dict[str, Any] = field(default_factory=dict)
    served: frozenset[str] = frozenset()
    """The cell keys a kept server (``--reuse-servers``) served in the calls before this one (its registry's
    ``served_cells``): where ``warm_skip`` may leave out a cell's warm run."""
    carried: bool = False
    """The server ``in_turn`` carried from the round before (its last, this round's first): it ran its cells' timed
    runs just now, so ``warm_skip`` leaves out its warm runs in the cells sized by then."""
    own_log: Path | None = None
    """Where a kept server's log (``log``, in the call that booted it) is copied in this call's folder
    (``Bench.log_for``): None for a server booted here, whose ``log`` is already there."""


@dataclass
class Hooks:
    """What the CPU tests replace: the server launcher, the client, the device and host queries and the console."""

    launch: Callable[[BenchServer, int, Path], Any] = servers.launch
    adopt: Callable[[dict[str, Any]], Any] = kept_servers.adopt
    client: Callable[[list[str], Path, float], dict[str, Any]] = client_mod.run_client
    device: Callable[[], dict[str, Any]] = memory.device_memory
    host: Callable[[], dict[str, Any]] = host_facts.host_facts
    preload: Callable[[], Any] = bench_client.preload
    say: Callable[[str], None] = print


class Bench:
    def __init__(self, pair: BenchPair, settings: Settings, outdir: Path, hooks: Hooks) -> None:
        self.pair, self.settings, self.outdir, self.hooks = pair, settings, outdir, hooks
        self.runs_dir = outdir / "runs"
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        self.started = time.monotonic()
        self.ports: set[int] = set()
        self.variants, skipped = plan.variants_for(list(settings.variants), pair.moe)
        clock_skipped = settings.phase_clock and settings.parallel.tp > 1
        if clock_skipped:
            self.settings = settings = replace(settings, phase_clock=False)
        self.record: dict[str, Any] = {
            "kind": "serve_bench", "pair": pair.as_json(), "settings": settings.as_json(),
            "skipped_variants": skipped, "variants": {}, "runs": [], "warm_runs": [], "order": [],
            "phase_clock": {}, "problems": [], "rounds_asked": settings.rounds, "rounds_done": 0,
            "phases_s": {}, "sizing": {}, **({"phase_clock_skipped": PHASE_CLOCK_NEEDS_TP1} if clock_skipped else {})}
        self.cells = plan.cells(settings.input_lens, settings.sampling, settings.concurrency)
        self.clock_cell = plan.clock_cell(self.cells, settings.clock_cell)  # refused here, before any boot
        self.code = kept_servers.code_hash() if settings.keep_servers or settings.reuse_servers else ""
        # An earlier call's kept servers (--reuse-servers), read once: the placement and every boot ask it.
        self.kept = kept_servers.read(Path(settings.reuse_servers)) if settings.reuse_servers else {}
        self.preloading: threading.Thread | None = None
        self.logs_named: dict[str, int] = {}

    # ---------------------------------------------------------------------------------------------- planning
    def plan_servers(self) -> dict[str, BenchServer]:
        s = self.settings
        target, draft = read_config(self.pair.target), read_config(self.pair.draft)
        seqs, longest = plan.server_shape(s.concurrency, s.input_lens, s.server_max_num_seqs, s.server_max_input_len)
        max_len = plan.max_model_len(longest, s.output_len, self.pair.k)
        tp = s.parallel.tp
        kv = int(s.kv_cache_gib * memory.GIB) if s.kv_cache_gib else memory.kv_cache_bytes(
            target, draft, max_len, seqs, tp)
        (w_target, src_target), (w_draft, src_draft) = (memory.weights_bytes(self.pair.target, target),
                                                        memory.weights_bytes(self.pair.draft, draft))
        device = self.hooks.device()
        if device.get("count") is not None and device["count"] < tp:
            raise PortableSpecError(f"--tp {tp} needs {tp} GPUs; {device['count']} visible here: run on a host with "
                                    f"{tp} (or set CUDA_VISIBLE_DEVICES to show them), or lower --tp")
        per_server = memory.server_bytes(w_target + w_draft, kv, tp)
        self.record["device_memory"] = device
        self.record["host"] = self.hooks.host()  # before any boot: the host's speed, not the servers' load
        self.record["tensor_parallel"] = s.parallel.as_json()
        free = memory.free_on(device, tp)
        kept_up = self.kept_alive()
        if free is not None and kept_up:  # kept servers of this benchmark hold what they will use again
            free += kept_up * per_server
        self.record["placement"] = {
            **memory.placement(len(self.variants), per_server, free, s.placement, tp),
            **({"kept_servers_counted_free": kept_up} if kept_up else {}),
            "weights_gib": {"target": round(w_target / memory.GIB, 2), "draft": round(w_draft / memory.GIB, 2),
                            "from": {"target": src_target, "draft": src_draft}},
            "kv_cache_gib": round(kv / memory.GIB, 3)}
        self.record["workload"] = {
            "client": "vllm bench serve", "dataset": "random", "input_lens": list(s.input_lens),
            "output_len": s.output_len, "range_ratio": 0, "sampling": list(s.sampling),
            "sampling_params": {name: plan.sampling_params(name) for name in s.sampling},
            "ignore_eos": True, "request_rate": "inf", "concurrency": list(s.concurrency),
            "cells": [cell.key for cell in self.cells], "min_run_s": s.min_run_s,
            "prompts_per_slot_floor": s.prompts_per_slot, "max_prompts": s.max_prompts,
            **({"sized_per_variant": True} if s.size_per_variant else {}),
            "num_prompts": {}, "stall_rule": f"ITL gaps >= {client_mod.STALL_THRESHOLD_MS:g} ms of every request "
                                              "(vllm bench serve --save-detailed), summed per run",
            "max_model_len": max_len, "max_num_seqs": seqs}
        return {v: BenchServer(v, self.pair, max_len, seqs, kv,
                               plan.scheduling_of(v, s.async_scheduling), s.parallel) for v in self.variants}

    # ---------------------------------------------------------------------------------------------- servers
    def log_for(self, variant: str) -> Path:
        """This call's log file for ``variant``'s next server, booted or adopted: ``server_<variant>.log`` for its
        first, ``server_<variant>.<n>.log`` for its n-th. Why: ``in_turn`` can start a variant twice in one call (a
        kept server adopted in round 1, a fresh boot in round 2), and the second server's log had overwritten the
        first's, with the compiles after boot the first one's log was judged on. Each boot record names its file
        (``log``)."""
        n = self.logs_named[variant] = self.logs_named.get(variant, 0) + 1
        return self.outdir / (f"server_{variant}.log" if n == 1 else f"server_{variant}.{n}.log")

    def boot(self, specs: list[BenchServer], adopt: bool = True) -> list[Live]:
        """Starts ``specs``' servers, or adopts an earlier call's kept ones (``--reuse-servers``; ``adopt`` false:
        boot every one, as ``in_turn`` does after its first server) and waits until they answer. Kept servers of
        variants not among ``specs`` are stopped first (``stop_leftovers``), so their memory is free before a boot."""
        self.stop_leftovers({spec.variant for spec in specs})
        lives, booting = [], []
        for spec in specs:
            live = self.adopt(spec, self.kept.get(spec.variant)) if self.settings.reuse_servers and adopt else None
            if live is None:
                live = Live(spec, vllm_serve.free_port(self.ports), self.log_for(spec.variant))
                live.handle = self.hooks.launch(live.server, live.port, live.log)
                booting.append(live)
            lives.append(live)
        self.start_client_preload()
        deadline = time.monotonic() + self.settings.boot_s

        async def all_ready() -> list[dict[str, Any]]:
            return await asyncio.gather(*(vllm_serve.wait_healthy(live.handle, HOST, live.port, live.log.name,
                                                                  deadline) for live in booting))
        for live, boot in zip(booting, asyncio.run(all_ready()) if booting else []):
            live.boot = boot
            self.variant_entry(live.server)["boots"].append(boot)
            self.hooks.say(f"[serve-bench] boot {live.server.variant}: "
                           f"{'ready' if boot['ready'] else boot['error']} after {boot['seconds']} s")
            self.bar.update(1)
        return lives

    def start_client_preload(self) -> None:
        """Imports the client (``Hooks.preload``) on a thread while the servers boot, once per call: the first client
        run would otherwise wait on the import (``bench_client.preload`` says why). Its seconds, and an error where
        it raised (the first client run then reports its own), go into the report."""
        if self.preloading is not None:
            return
        started = time.monotonic()

        def target() -> None:
            try:
                self.hooks.preload()
            except Exception as exc:  # the client run that needs the import says what failed
                self.record["client_preload_error"] = f"{type(exc).__name__}: {exc}"
            self.record["phases_s"]["client_preload_s"] = round(time.monotonic() - started, 1)
        self.preloading = threading.Thread(target=target, name="client-preload", daemon=True)
        self.preloading.start()

    def client_preloaded(self) -> None:
        """Waits for ``start_client_preload``'s thread, so no client run imports beside it (a thread that has ended
        returns at once)."""
        if self.preloading is not None:
            self.preloading.join()

    def adopt(self, spec: BenchServer, entry: dict[str, Any] | None) -> Live | None:
        """An earlier call's kept server for ``spec`` where it is the same server, alive and healthy (its boot record
        says ``reused``), else None; a kept server that cannot stand in is stopped first, and the variant's
        ``not_reused`` says why (``kept_servers``)."""
        why, handle = "the registry holds no server of this variant", None
        if entry is not None:
            why = kept_servers.mismatch(entry, kept_servers.fingerprint(spec, self.code))
            handle = self.hooks.adopt(entry)
            if why is None and handle is None:
                why = "its process is gone"
            elif why is None and not asyncio.run(vllm_serve.health(HOST, entry["port"], timeout_s=5.0)):
                why = "it does not answer /health"
        if why is not None:
            if handle is not None:
                handle.stop()
            self.variant_entry(spec)["not_reused"] = why
            self.hooks.say(f"[serve-bench] {spec.variant}: no kept server reused ({why}): booting one")
            return None
        self.ports.add(entry["port"])
        own = self.log_for(spec.variant)
        boot = {"ready": True, "seconds": 0.0, "port": entry["port"], "log": own.name,
                "reused": {"registry": self.settings.reuse_servers, "first_boot": entry.get("boot")}}
        self.variant_entry(spec)["boots"].append(boot)
        self.hooks.say(f"[serve-bench] {spec.variant}: kept server on port {entry['port']} reused (no boot)")
        self.bar.update(1)
        return Live(spec, entry["port"], Path(entry["log"]), handle, boot, frozenset(entry.get("served_cells") or ()),
                    own_log=own)

    def kept_alive(self) -> int:
        """How many of the variants' kept servers (``--reuse-servers``) are still running: the device reading counts
        their memory as taken, and the placement counts it free again, as if the same servers were to boot."""
        return sum(1 for v in self.variants if v in self.kept and self.hooks.adopt(self.kept[v]) is not None)

    def stop_leftovers(self, wanted: set[str]) -> None:
        """Stops the kept servers of variants this call does not run: nothing else would, and they hold memory."""
        for variant, entry in sorted(self.kept.items()):
            handle = self.hooks.adopt(entry) if variant not in wanted else None
            if handle is not None:
                handle.stop()
                self.record.setdefault("kept_servers_stopped", []).append(variant)

    def keep(self, lives: list[Live]) -> None:
        """Leaves the ready servers running and writes their registry (``--keep-servers``)."""
        ready = [live for live in lives if live.boot.get("ready") and live.handle is not None]
        entries = {live.server.variant: {
            "fingerprint": kept_servers.fingerprint(live.server, self.code), "port": live.port,
            "pid": kept_servers.pid_of(live.handle), "log": str(live.log), "served_cells": self.served_cells(live),
            "boot": live.boot.get("reused", {}).get("first_boot") or live.boot} for live in ready}
        kept_servers.write(Path(self.settings.keep_servers), entries)
        self.record["kept_servers"] = {"registry": self.settings.keep_servers, "variants": sorted(entries)}
        for live in ready:
            self.judge_jit(live)
        self.stop([live for live in lives if live not in ready])

    def served_cells(self, live: Live) -> list[str]:
        """The cells ``live``'s server has served since its boot: those of earlier calls (``Live.served``) and those
        of this call's warm and timed runs that finished. What the next call's ``warm_skip`` trusts."""
        done = {plan.cell_of(r, self.record["workload"]).key for r in self.record["warm_runs"] + self.record["runs"]
                if r["variant"] == live.server.variant and "error" not in r}
        return sorted(live.served | done)

    def variant_entry(self, server: BenchServer) -> dict[str, Any]:
        return self.record["variants"].setdefault(server.variant, {
            "e2e_variant": server.e2e_variant, "serve_args": servers.serve_args(server, 0),
            "env_switches": {k: v for k, v in servers.server_env(server).items()
                             if k.startswith(("VLLM_USE_V2", "VLLM_PLATFORM", "PORTABLE_SPEC"))},
            "boots": [], "facts": []})

    def rpc(self, live: Live, method: str, timeout_s: float = 300.0) -> dict[str, Any]:
        answer = asyncio.run(vllm_serve.collective_rpc(HOST, live.port, method, timeout_s=timeout_s))
        return answer if answer is not None else {"error": f"{method}: no answer from /collective_rpc"}

    def facts(self, live: Live, when: str) -> None:
        self.variant_entry(live.server)["facts"].append({"when": when, **self.rpc(live, servers.FACTS_METHOD, 60)})

    def stop(self, lives: list[Live]) -> None:
        started = [live for live in lives if live.handle is not None]
        with ThreadPoolExecutor(max_workers=max(1, len(started))) as pool:
            list(pool.map(lambda live: live.handle.stop(), started))
        for live in started:
            self.judge_jit(live)

    def release(self, lives: list[Live], keep: bool) -> None:
        """Stops the servers, or with ``--keep-servers`` (and ``keep``: the run went on with them) leaves the ready
        ones running for the next call."""
        if keep and self.settings.keep_servers:
            self.keep(lives)
        else:
            self.stop(lives)

    def judge_jit(self, live: Live) -> None:
        """Records what vLLM's JIT monitor said in a server's log (every boot's compiles; the monitor armed in every
        boot that got ready) and judges it (``jit_judge``, which leaves a boot that never got ready alone). A kept
        server's log, from its boot on, is copied into this call's folder first (``Live.own_log``), beside the
        servers booted here."""
        if live.own_log is not None and live.log != live.own_log and live.log.exists():
            shutil.copyfile(live.log, live.own_log)
        judge_log(self.record, self.variant_entry(live.server), live.server.variant, live.log,
                  bool(live.boot.get("ready")))

    # ---------------------------------------------------------------------------------------------- client runs
    def client_run(self, live: Live, kind: str, rnd: int, cell: plan.Cell, prompts: int, output_len: int,
                   seed: int) -> dict[str, Any]:
        variant, c = live.server.variant, cell.concurrency
        name = f"{kind}_{variant}_in{cell.input_len}_{cell.sampling}_c{c}_r{rnd}"
        run = client_mod.ClientRun(HOST, live.port, self.pair.target, self.pair.tokenizer, cell.input_len,
                                   output_len, prompts, c, seed, cell.sampling, str(self.runs_dir), f"{name}.json",
                                   variant,
                                   (f"variant={variant}", f"round={rnd}", f"kind={kind}", f"pair={self.pair.name}",
                                    f"mode={self.pair.mode}", f"cell={cell.key}"))
        argv = client_mod.client_args(run)
        self.record.setdefault("client_example", client_mod.command_line(argv))
        self.client_preloaded()
        outcome = self.hooks.client(argv, self.runs_dir / f"{name}.txt", self.settings.run_timeout_s)
        row = {"kind": kind, "variant": variant, "input_len": cell.input_len, "sampling": cell.sampling,
               "concurrency": c, "round": rnd, "num_prompts": prompts, "output_len": output_len, "seed": seed,
               "result_file": f"runs/{name}.json", "client_output": f"runs/{name}.txt", "seconds": outcome["seconds"]}
        if "error" in outcome:
            row["error"] = outcome["error"]
        else:
            try:
                client_mod.condense(self.runs_dir / f"{name}.json")
                row["result"] = client_mod.read_result(self.runs_dir / f"{name}.json")
                row["duration_s"] = row["result"]["duration"]
            except client_mod.ResultError as exc:
                row["error"] = str(exc)
        if "error" in row:
            self.hooks.say(f"[serve-bench] {name}: {row['error']}")
        self.bar.update(1)
        return row

    def warm(self, live: Live) -> None:
        """``warm_passes`` untimed runs per cell, one prompt per slot (graph sizes, JIT kernels, the client's first
        connections); the last one's duration sizes the cell's timed runs (``size``). A cell ``warm_skip`` names
        runs none; each skipped one still counts as a step of the progress bar, which planned it."""
        variant, skipped = live.server.variant, []
        for i, cell in enumerate(self.cells):
            why = self.warm_skip(live, cell, i)
            if why is not None:
                skipped.append({"variant": variant, "cell": cell.key, "why": why})
                self.bar.update(self.warm_passes(cell, variant))
                continue
            first = plan.SIZING_ROUND - plan.WARM_PASSES + 1
            for rnd in range(first, first + self.warm_passes(cell, variant)):
                seed = self.settings.seed + 900_000 + 100_000 * (rnd - plan.SIZING_ROUND) + cell.concurrency
                self.record["warm_runs"].append(self.client_run(live, "warm", rnd, cell, cell.concurrency,
                                                                self.settings.output_len, seed))
        if skipped:
            self.record.setdefault("warm_skipped", []).extend(skipped)
            why = ("carried server", "it ran their timed runs in the round before") if live.carried else (
                "reused server", "sized by --sizing-from, served by this server before")
            self.hooks.say(f"[serve-bench] {variant}: {why[0]}, {len(skipped)} of {len(self.cells)} cells' warm "
                           f"runs skipped ({why[1]})")

    def warm_passes(self, cell: plan.Cell, variant: str) -> int:
        """Warm runs of ``variant`` in ``cell``: ``plan.WARM_PASSES``, or one where an earlier call fixed its sizing
        (``--sizing-from``: none is needed to size, only to warm)."""
        return 1 if self.earlier(cell, variant) is not None else plan.WARM_PASSES

    def warm_skip(self, live: Live, cell: plan.Cell, index: int) -> str | None:
        """Why ``live`` runs no warm run in ``cell`` (``index`` in this call's cells), or None: its server is a kept
        one (``--reuse-servers``) that served the cell in an earlier call (``Live.served``: its graphs, kernels and
        the client's connections are warm), and nothing else here reads such a run: ``--sizing-from`` fixed the
        cell's prompts (``size``) and timed this variant there (``run_estimate_s``). Why: a chained call re-ran every
        cell's warm runs on servers that had just served them. The first cell keeps its warm run,
        so the first timed run does not follow a server idle since the last call. A server ``in_turn`` carried from
        the round before (``Live.carried``) runs none in a cell where its variant ran timed runs in this call: it is
        warm, its prompts were fixed then, and it was not idle (``WARM_CARRIED``)."""
        variant = live.server.variant
        if live.carried and any(r["variant"] == variant and "error" not in r
                                and plan.cell_of(r, self.record["workload"]).key == cell.key
                                for r in self.record["runs"]):
            return WARM_CARRIED
        if (index == 0 or not live.boot.get("reused") or cell.key not in live.served
                or self.earlier(cell, variant) is None
                or not (self.settings.earlier_durations.get(cell.key) or {}).get(variant)):
            return None
        return WARM_SKIPPED

    def size(self, cell: plan.Cell, variant: str) -> int:
        """Prompts of ``variant``'s timed runs in ``cell``, fixed at its first timed run from the warm runs done by
        then and the same for every round after, so each round's runs are paired. By default one size for every
        variant: the fastest one's warm runs (so its runs still reach ``--min-run-s``; under ``in_turn`` only the
        first variant to run has warmed). With ``size_per_variant`` each variant's own warm runs size its runs
        (``record["sizing"][cell]["per_variant"][variant]``), so a slow baseline no longer runs the fast one's
        prompts for minutes. A cell an earlier call sized (``--sizing-from``) keeps that call's prompts, grown where
        its runs came in short (``earlier``)."""
        per_variant = self.settings.size_per_variant
        sizing, prompts, key = self.record["sizing"], self.record["workload"]["num_prompts"], cell.key
        if per_variant:
            sizing, prompts = sizing.setdefault(key, {"per_variant": {}})["per_variant"], prompts.setdefault(key, {})
            key = variant
        if key not in sizing:
            earlier, s = self.earlier(cell, variant), self.settings
            if earlier is not None:
                sized = {**earlier, "warm_runs": 0, "from": s.sizing_from}
                if self.prompt_growth(cell, variant) != 1.0:
                    grown = sized["resized_from_short"]
                    self.hooks.say(f"[serve-bench] {cell.key}{' ' + variant if per_variant else ''}: --sizing-from's "
                                   f"runs came in at {grown['shortest_s']:.2f} s, under --min-run-s "
                                   f"{s.min_run_s:g}: {grown['earlier_per_slot']} -> {sized['per_slot']} prompts "
                                   "per slot")
            else:
                warm = self.warm_seconds(cell, variant if per_variant else None, plan.SIZING_ROUND)
                sized = plan.sized_per_slot(min(warm) if warm else None, s.min_run_s, s.prompts_per_slot,
                                            cell.concurrency, s.max_prompts, s.run_timeout_s)
                sized["num_prompts"] = plan.num_prompts(cell.concurrency, sized["per_slot"])
                sized["warm_runs"] = len(warm)
            sizing[key] = sized
            prompts[key] = sized["num_prompts"]
        return sizing[key]["num_prompts"]

    def warm_seconds(self, cell: plan.Cell, variant: str | None = None, rnd: int | None = None) -> list[float]:
        """The durations of the warm runs that finished in ``cell`` (of ``variant`` and round ``rnd`` where given), in
        the order they ran: what ``size`` sizes from and ``round_estimate_s`` predicts from."""
        return [r["duration_s"] for r in self.record["warm_runs"] if "duration_s" in r
                and plan.cell_of(r, self.record["workload"]) == cell
                and variant in (None, r["variant"]) and rnd in (None, r["round"])]

    def earlier_fixed(self, cell: plan.Cell, variant: str) -> dict[str, Any] | None:
        """The sizing an earlier call fixed for ``variant``'s runs in ``cell`` (``--sizing-from``; that call sized
        per variant exactly when this one does, ``earlier_sizing`` in ``__main__``), as it recorded it, or None."""
        entry = self.settings.earlier_sizing.get(cell.key)
        if entry is not None and self.settings.size_per_variant:
            return (entry.get("per_variant") or {}).get(variant)
        return entry

    def earlier(self, cell: plan.Cell, variant: str) -> dict[str, Any] | None:
        """``earlier_fixed``, grown where that call had a timed run in ``cell`` under ``--min-run-s`` (of ``variant``
        where sized per variant, of any variant where one size served all): from the shortest of them,
        ``plan.resized_from_short``, so a call does not repeat the short runs the earlier report listed. What this
        call's sizing records (``resized_from_short``, naming the report whose runs came in short), so a call sized
        from this one keeps the larger count."""
        entry, s = self.earlier_fixed(cell, variant), self.settings
        short = [d for v, d in (s.earlier_short_s.get(cell.key) or {}).items()
                 if v == variant or not s.size_per_variant]
        if entry is None or not short:
            return entry
        per_slot = entry.get("per_slot") or entry["num_prompts"] // cell.concurrency
        grown = plan.resized_from_short(per_slot, min(short), s.min_run_s, cell.concurrency, s.max_prompts,
                                        s.run_timeout_s)
        if grown is None:
            return entry
        return {**entry, **grown, "num_prompts": plan.num_prompts(cell.concurrency, grown["per_slot"]),
                "resized_from_short": {**grown["resized_from_short"], "short_in": s.sizing_from}}

    def prompt_growth(self, cell: plan.Cell, variant: str) -> float:
        """This call's prompts over the earlier call's in ``cell`` (1.0 unless ``earlier`` grew them): what the
        earlier call's run seconds scale by in ``run_estimate_s``."""
        fixed, mine = self.earlier_fixed(cell, variant), self.earlier(cell, variant)
        return mine["num_prompts"] / fixed["num_prompts"] if fixed and mine else 1.0

    def phase_clock(self, live: Live) -> None:
        """In ``clock_cell``: a run under the phase clock (real host time per phase; ``clock_prompts`` per slot),
        then a shorter one under the torch profiler (device time per phase; one prompt per slot), each switched on
        and off through the probe."""
        cell = self.clock_cell
        reading: dict[str, Any] = {"cell": cell.key}
        c = cell.concurrency
        for kind, prompts, out_len in (("clock", self.settings.clock_prompts * c, self.settings.output_len),
                                       ("profile", c, min(self.settings.profile_output_len, self.settings.output_len))):
            begun = self.rpc(live, f"portable_spec_bench_{kind}_start")
            if "error" in begun:
                reading[kind] = begun
                self.bar.update(1)
                continue
            run = self.client_run(live, kind, -1, cell, prompts, out_len, self.settings.seed + 800_000 + len(reading))
            reading[kind] = self.rpc(live, f"portable_spec_bench_{kind}_stop", timeout_s=600.0)
            reading[kind]["hooks"] = {"installed": begun.get("installed"), "skipped": begun.get("skipped")}
            reading[f"{kind}_run"] = {k: v for k, v in run.items() if k != "result"}
            if "error" in run:
                reading[kind] = {"error": f"client run failed: {run['error']}"}
        self.record["phase_clock"][live.server.variant] = reading

    def timed(self, lives: dict[str, Live], order: list[plan.Run]) -> None:
        for run in order:
            s = self.settings
            row = self.client_run(lives[run.variant], "timed", run.round, run.cell, self.size(run.cell, run.variant),
                                  s.output_len, s.seed + 1000 * run.round + run.cell.concurrency)
            self.record["runs"].append(row)
            self.record["order"].append(run.as_json())
            self.write_partial()

    def budget_left(self, need_s: float) -> bool:
        if self.settings.budget_s is None:
            return True
        left = self.settings.budget_s - (time.monotonic() - self.started) - self.round_reserve_s()
        return left >= need_s

    def round_reserve_s(self) -> float:
        """What the budget keeps back after the last round: ``KEPT_ROUND_RESERVE_S`` where the call will leave its
        servers running (``--keep-servers``, booted together), else ``ROUND_RESERVE_S`` to stop them too."""
        keeps = bool(self.settings.keep_servers) and self.record["placement"]["mode"] == "together"
        return KEPT_ROUND_RESERVE_S if keeps else ROUND_RESERVE_S

    # ---------------------------------------------------------------------------------------------- placements
    def together(self, specs: dict[str, BenchServer]) -> bool:
        """Returns False when a server did not fit beside the others (the caller may retry in turn)."""
        t = time.monotonic()
        lives = self.boot(list(specs.values()))
        self.record["phases_s"]["boot_s"] = round(time.monotonic() - t, 1)
        fits = True
        try:
            failed = [live for live in lives if not live.boot.get("ready")]
            if failed and any(OOM.search(_tail(live.log)) for live in failed):
                self.record["problems"].append("together: " + ", ".join(
                    f"{live.server.variant} did not fit ({live.boot.get('error')})" for live in failed))
                fits = False
                return False
            self.record["problems"] += [f"{live.server.variant}: {live.boot.get('error')}, see {live.log.name}"
                                        for live in failed]
            up = {live.server.variant: live for live in lives if live.boot.get("ready")}
            self.prepare(list(up.values()))
            rounds = range(self.settings.first_round, self.settings.first_round + self.settings.rounds)
            last_round_s = self.round_estimate_s([v for v in self.variants if v in up]) or 0.0
            self.record["phases_s"]["round_estimate_s"] = round(last_round_s, 1)
            for rnd in rounds:
                if not self.budget_left(last_round_s + self.clock_reserve_s(len(up))):
                    self.record["stopped_because"] = f"--budget-s {self.settings.budget_s:g} would be passed"
                    break
                t = time.monotonic()
                self.timed(up, plan.interleaved([v for v in self.variants if v in up], self.cells, 1, rnd))
                last_round_s = time.monotonic() - t
                self.record["rounds_done"] += 1
            self.phase_clocks(list(up.values()))
            for live in up.values():
                self.facts(live, "after")
        finally:
            self.release(lives, keep=fits)
        return True

    def round_estimate_s(self, variants: list[str], warm_too: bool = True) -> float | None:
        """What the first timed round should take, so the budget starts no round it cannot finish (a call killed at
        its limit mid-round loses that round and its report): the sum of ``run_estimate_s`` over the cells and
        ``variants``; None where a run has no estimate (``together`` then starts, as before)."""
        total = 0.0
        for cell in self.cells:
            for variant in variants:
                run = self.run_estimate_s(cell, variant, warm_too)
                if run is None:
                    return None
                total += run
        return total

    def run_estimate_s(self, cell: plan.Cell, variant: str, warm_too: bool = True) -> float | None:
        """What one timed run of ``variant`` in ``cell`` should take: an earlier call's timed run of the same prompts
        (``--sizing-from``; x ``prompt_growth`` where this call grew them from its short runs, so the budget does
        not under-predict), else (``warm_too``) a warm wave x the waves of its prompts (``size``) x ``WARM_SLACK``;
        plus ``RUN_OVERHEAD_S``. None where neither is known. ``warm_too`` fixes the cell's prompts as its first timed
        run would; without it nothing is sized: ``preflight`` asks before any warm run, and a cell sized then would
        keep a size no warm run informed. The wave is this call's last warm wave, or the one the earlier call sized
        the cell from (its sizing's ``warm_s``, where it timed nothing) when that was faster: a first warm wave after
        a boot can hold one-time costs (upstream V1 compiles kernels at its first requests: one 128-token wave took
        2.65 s there against 0.36 s on ours), and predicting every wave of a round from it refused rounds that would
        have fit twice over."""
        waves = self.size(cell, variant) / cell.concurrency if warm_too else 0.0
        known = (self.settings.earlier_durations.get(cell.key) or {}).get(variant)
        if known:  # a cell grown from the earlier call's short runs runs that much longer
            return known * self.prompt_growth(cell, variant) + RUN_OVERHEAD_S
        wave = self.warm_seconds(cell, variant)[-1:] + self.earlier_wave_s(cell, variant) if warm_too else []
        if not wave:
            return None
        return min(wave) * waves * WARM_SLACK + RUN_OVERHEAD_S

    def earlier_wave_s(self, cell: plan.Cell, variant: str) -> list[float]:
        """The warm wave the earlier call (``--sizing-from``) sized ``variant``'s runs in ``cell`` from (its
        ``warm_s``), as a one-item list, or none."""
        entry = self.earlier_fixed(cell, variant)
        wave = entry.get("warm_s") if entry else None
        return [float(wave)] if wave else []

    def preflight(self, specs: dict[str, BenchServer]) -> None:
        """Refuses a call, before it boots anything, whose ``--budget-s`` cannot hold one round: the earlier call's
        boot (``--sizing-from``; ``boot_need``) + its timed runs of every cell and variant of this call + the reserves
        the placement keeps back. Such a call used to boot, warm, and then start no round (``together``: minutes of
        device time for an empty report), or start its first round ``in_turn``, which always starts one, and be
        killed inside it, losing the round. A lower bound: the warm-up is not counted, so it refuses only a call that
        could not have finished a round had its boots been as fast as the earlier call's. It asks only where every
        number is known, and not where every server would be a kept one (no boot)."""
        s = self.settings
        if s.budget_s is None:
            return
        boot = self.boot_need(specs)
        if boot is None:
            return
        boot_s, booted = boot
        round_s = self.round_estimate_s(list(self.variants), warm_too=False)
        if round_s is None:
            return
        clock_s = self.clock_reserve_s(len(self.variants))
        reserve = self.round_reserve_s()
        need = boot_s + round_s + reserve + clock_s
        if need > s.budget_s:
            clock = f" and {clock_s:g} s for the phase clocks" if clock_s else ""
            then = "report" if reserve == KEPT_ROUND_RESERVE_S else "stop and report"
            raise PortableSpecError(
                f"--budget-s {s.budget_s:g} cannot hold one round: the call --sizing-from names booted {booted} and "
                f"ran these cells' timed runs in {round_s:.1f} s, plus {reserve:g} s to {then}{clock} = "
                f"{need:.1f} s; raise --budget-s (SERVE_BENCH_BUDGET) to {math.ceil(need)} or more, or reuse kept "
                "servers (--reuse-servers)")

    def boot_need(self, specs: dict[str, BenchServer]) -> tuple[float, str] | None:
        """The seconds this call's first round must spend booting, by the earlier call's boots, and how to say them;
        None where nothing boots or a boot's seconds are unknown. ``together``: the earlier together boot, where any
        server would boot. ``in_turn``: each server the first round boots one after another (all but an adopted
        kept one, its first), at its variant's earlier boot alone (``earlier_variant_boot_s``)."""
        s, mode = self.settings, self.record["placement"]["mode"]
        if mode == "together":
            if not s.earlier_boot_s or not any(self.would_boot(spec) for spec in specs.values()):
                return None
            return s.earlier_boot_s, f"in {s.earlier_boot_s:.1f} s"
        order = rotation(list(self.variants), s.first_round)
        booting = [v for j, v in enumerate(order) if j > 0 or self.would_boot(specs[v])]
        if mode != "in_turn" or not booting or any(v not in s.earlier_variant_boot_s for v in booting):
            return None
        said = " and ".join(f"{v} in {s.earlier_variant_boot_s[v]:.1f} s" for v in booting)
        return sum(s.earlier_variant_boot_s[v] for v in booting), f"{said} (in turn)"

    def check_pools_with_sizing_call(self) -> None:
        """Says, before any boot, when the call ``--sizing-from`` names ran another workload than this one (other input
        lengths, sampling, output length, ``max_model_len``, scheduling, TP or K): ``combine`` refuses to pool the two,
        so rounds meant to join that call's would stand alone. A call sized from one of another workload is allowed
        (its shared cells keep their prompts), so this is a warning, kept in the report as ``sizing_from_pools``."""
        from portable_spec_harness.serve_bench.combine import load, workload_differences

        if not self.settings.sizing_from:
            return
        mine = {"pair": self.record["pair"], "workload": self.record["workload"], "settings": self.record["settings"]}
        differs = workload_differences(mine, load(Path(self.settings.sizing_from)))
        self.record["sizing_from_pools"] = {"pools": not differs, "differs": differs}
        if differs:
            self.hooks.say(f"[serve-bench] warning: --sizing-from {self.settings.sizing_from} ran another workload "
                           f"({', '.join(differs)}): combine will not pool this call with it")

    def would_boot(self, spec: BenchServer) -> bool:
        """Whether ``boot`` would start ``spec``'s server: no kept server (``--reuse-servers``) of the same
        fingerprint still runs. ``adopt``'s checks without its side effects (stopping, recording) and without its
        health call, which the boot still makes."""
        entry = self.kept.get(spec.variant)
        return (entry is None or kept_servers.mismatch(entry, kept_servers.fingerprint(spec, self.code)) is not None
                or self.hooks.adopt(entry) is None)

    def prepare(self, lives: list[Live]) -> None:
        """Facts before and the warm-up in every cell."""
        t = time.monotonic()
        for live in lives:
            self.facts(live, "before")
            self.warm(live)
        self.record["phases_s"]["warm_s"] = round(time.monotonic() - t, 1)

    def phase_clocks(self, lives: list[Live]) -> None:
        """The phase clock in ``clock_cell`` on each server, once its timed runs are done (see the module's note)."""
        if not self.settings.phase_clock:
            return
        t = time.monotonic()
        for live in lives:
            self.phase_clock(live)
        spent = self.record["phases_s"].get("phase_clock_s", 0.0) + time.monotonic() - t
        self.record["phases_s"]["phase_clock_s"] = round(spent, 1)

    def clock_reserve_s(self, servers_up: int) -> float:
        return PHASE_CLOCK_RESERVE_S * servers_up if self.settings.phase_clock else 0.0

    def in_turn(self, specs: dict[str, BenchServer]) -> None:
        """One server at a time, each round in the rotation's order. The last server of a round stays up where the
        next round starts with the same variant (the rotation puts it first: ``carries``), so three rounds of two
        variants boot four times, not six; each round still has the GPU to one server at a time. A call that ends
        with such a server keeps it for the next call (``--keep-servers``), whose first round adopts it
        (``--reuse-servers``, first round one later); else it is stopped. A server that ran the phase clock is never
        carried (its profiler pass can slow it afterwards)."""
        rounds = range(self.settings.first_round, self.settings.first_round + self.settings.rounds)
        last_round_s, carried, stopped_mid_round = 0.0, None, False
        try:
            for i, rnd in enumerate(rounds):
                if not self.budget_left(last_round_s + (self.clock_reserve_s(1) if i == 0 else 0.0)):
                    self.record["stopped_because"] = f"--budget-s {self.settings.budget_s:g} would be passed"
                    break
                t = time.monotonic()
                order = rotation(list(self.variants), rnd)
                for j, variant in enumerate(order):
                    if carried is not None and carried.server.variant == variant:
                        live, carried = carried, None
                        live.carried = True
                        self.record.setdefault("in_turn_carried", []).append({"round": rnd, "variant": variant})
                    else:  # only the call's first server can be an earlier call's kept one
                        short = self.in_turn_boot_short(variant, clocked=i == 0) if j > 0 else None
                        if short is not None:
                            self.record["stopped_because"] = short
                            self.hooks.say(f"[serve-bench] {short}: round {rnd} stops here")
                            stopped_mid_round = True
                            break
                        (live,) = self.boot([specs[variant]], adopt=i == 0 and j == 0)
                    carry = False
                    try:
                        if not live.boot.get("ready"):
                            self.record["problems"].append(f"round {rnd} {variant}: {live.boot.get('error')}, see "
                                                           f"{live.log.name}")
                            continue
                        self.facts(live, f"before round {rnd}")
                        self.warm(live)
                        self.timed({variant: live}, plan.in_turn([variant], self.cells, 1, rnd))
                        if i == 0:
                            self.phase_clocks([live])
                        self.facts(live, f"after round {rnd}")
                        carry = j == len(order) - 1 and self.carries(variant, rnd, clocked=i == 0)
                    finally:
                        if carry:
                            carried = live
                        else:
                            self.stop([live])
                if stopped_mid_round:
                    break
                last_round_s = time.monotonic() - t
                self.record["rounds_done"] += 1
            if self.settings.keep_servers:  # the registry is written even where no server stays (the next call boots)
                self.keep([carried] if carried is not None else [])
                carried = None
        finally:
            if carried is not None:
                self.stop([carried])

    def in_turn_boot_short(self, variant: str, clocked: bool) -> str | None:
        """Why ``variant``'s boot, a later one of an ``in_turn`` round, must not start: the budget left cannot hold
        that boot (``boot_estimate_s``), its timed runs of the round (an earlier call's, ``--sizing-from``) and, in
        the clock's round, its phase clock; None where it can or the boot's seconds are unknown. Why: ``preflight``
        and the round's own check see the round before its first boot, and a first boot on a fresh host (cold
        compile caches) outlasts the earlier call's; a call whose budget then ran out inside the second boot was
        killed there, its device time spent on a server that ran nothing."""
        boot_s = self.boot_estimate_s(variant)
        if boot_s is None or self.settings.budget_s is None:
            return None
        runs = [self.run_estimate_s(cell, variant, warm_too=False) for cell in self.cells]
        runs_s = sum(r for r in runs if r is not None)
        need = boot_s + runs_s + (self.clock_reserve_s(1) if clocked else 0.0)
        if self.budget_left(need):
            return None
        return (f"--budget-s {self.settings.budget_s:g} would be passed: the boot of {variant} (~{boot_s:.1f} s) "
                f"and its timed runs ({runs_s:.1f} s known) do not fit what is left")

    def boot_estimate_s(self, variant: str) -> float | None:
        """What a boot of ``variant`` should take: the longest of the boots this call has made (another variant's
        included: on one host they share its compile caches' state, cold on a fresh one) and the variant's own boot in
        the call ``--sizing-from`` names (``earlier_variant_boot_s``); None where neither is known."""
        own = [s for entry in self.record["variants"].values() for s in own_boot_seconds(entry.get("boots") or [])]
        earlier = self.settings.earlier_variant_boot_s.get(variant)
        known = own + ([earlier] if earlier else [])
        return max(known) if known else None

    def carries(self, variant: str, rnd: int, clocked: bool) -> bool:
        """Whether round ``rnd``'s last server (``variant``) stays up for the next round, in this call or the next:
        the rotation starts round ``rnd + 1`` with it, and it ran no phase clock (``clocked``: the clock's round)."""
        return rotation(list(self.variants), rnd + 1)[0] == variant and not (clocked and self.settings.phase_clock)

    # ---------------------------------------------------------------------------------------------- the run
    def run(self) -> dict[str, Any]:
        if not self.variants:
            raise ValueError("no variant left to run")
        specs = self.plan_servers()
        self.preflight(specs)
        self.check_pools_with_sizing_call()
        s = self.settings
        per_round = len(self.variants) * len(self.cells)
        in_turn = self.record["placement"]["mode"] == "in_turn"
        boots = len(self.variants) * (s.rounds if in_turn else 1)
        warm = sum(self.warm_passes(c, v) for c in self.cells for v in self.variants) * (s.rounds if in_turn else 1)
        self.bar = progress_bar(boots + warm + per_round * s.rounds + (2 * len(self.variants) if s.phase_clock else 0),
                                desc="serve bench")
        self.hooks.say(f"[serve-bench] {self.pair.name} ({self.pair.mode}): {', '.join(self.variants)}; placement "
                       f"{self.record['placement']['mode']}: {self.record['placement']['reason']}")
        try:
            if self.record["placement"]["mode"] == "together":
                if not self.together(specs):
                    reason = "together did not fit (a server ran out of memory): one server at a time"
                    self.record["placement"].update(mode="in_turn", reason=reason, fell_back=True)
                    self.hooks.say(f"[serve-bench] {reason}")
                    self.in_turn(specs)
            else:
                self.in_turn(specs)
        except (KeyboardInterrupt, SystemExit) as exc:  # an outer time limit: servers are stopped, keep the report
            self.record["stopped_because"] = f"interrupted ({type(exc).__name__})"
            self.finish()
            raise
        finally:
            self.bar.close()
        return self.finish()

    def finish(self) -> dict[str, Any]:
        from portable_spec_harness.soak.report import environment

        self.client_preloaded()  # a call whose servers never came up ran no client: its preload may still write
        self.record["phases_s"]["total_s"] = round(time.monotonic() - self.started, 1)
        self.record.update(environment())
        if not self.record.get("device"):
            self.record["device"] = self.record.get("device_memory", {}).get("name")
        result = report.assemble(self.record, self.variants, self.cells)
        (self.outdir / "serve_bench.json").write_text(json.dumps(result, indent=1))
        (self.outdir / "serve_bench.txt").write_text(report.table(result) + "\n")
        report.plot(result, self.outdir / "serve_bench.png")
        return result

    def write_partial(self) -> None:
        (self.outdir / "serve_bench.partial.json").write_text(json.dumps(self.record, default=str))


def own_boot_seconds(boots: list[dict[str, Any]]) -> list[float]:
    """The seconds of the servers a call booted itself among a variant's boot records: ready, not a kept server it
    adopted (whose boot is recorded as 0 with ``reused``)."""
    return [float(b["seconds"]) for b in boots
            if b.get("ready") and not b.get("reused") and isinstance(b.get("seconds"), (int, float))
            and b["seconds"] > 0]


def judge_log(record: dict[str, Any], entry: dict[str, Any], variant: str, log: Path, ready: bool) -> None:
    """One server log's JIT verdict into the report: its compiles into the variant's ``entry``, the monitor armed
    where the boot got ready, and the judge's problems into ``record`` (a finished call, and ``finalize``'s)."""
    jit = jit_judge.read(log)
    entry.setdefault(jit_judge.COMPILES_KEY, []).extend(jit.compiles)
    if ready:
        entry[jit_judge.MONITOR_KEY] = bool(entry.get(jit_judge.MONITOR_KEY, True) and jit.monitor_active)
    record["problems"] += jit_judge.problems(variant, jit, see=log.name, ready=ready)


def _tail(log: Path, size: int = 20000) -> str:
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return ""
    return text[-size:]


def run_serve_bench(pair: BenchPair, settings: Settings, outdir: str | Path,
                    hooks: Hooks | None = None) -> dict[str, Any]:
    """The whole benchmark; returns the report (also ``OUTDIR/serve_bench.json``, ``.txt`` and ``.png``). SIGTERM
    (an outer ``timeout``) becomes ``SystemExit`` meanwhile, so the servers, which run in sessions of their own, are
    stopped and the report is written before the process ends."""
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    vllm_serve.raise_open_file_limit()
    on_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, exit_on_term) if on_main else None
    try:
        return Bench(pair, settings, outdir, hooks or Hooks()).run()
    finally:
        if on_main:
            signal.signal(signal.SIGTERM, previous)


def exit_on_term(signum: int, frame: Any) -> None:
    """SIGTERM as ``SystemExit``: ``finally`` blocks run, so servers in sessions of their own are stopped."""
    raise SystemExit(128 + signum)
