"""One soak run: build the pairs, plan each pair's load, boot every server at once, read each before the load, drive
the load against all of them at the same time, read each after it, stop them, judge, report.

Servers are started through ``launch(spec, port, log)`` (``servers.launch``: ``vllm serve`` processes) and pairs
built through ``build(name)`` (the model zoo): the CPU tests pass in-process fakes for both, so every step below runs
without a GPU. Deadlines are fixed per phase (``Deadlines``, from ``budget``) and the whole run stays under
``budget.TOTAL_S``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from portable_spec_harness import vllm_serve
from portable_spec_harness.parallel import Parallel
from portable_spec_harness.soak import budget, judge, loadgen, logscan, report, servers, workload
from portable_spec_harness.soak.loadgen import Endpoint, Outcome
from portable_spec_harness.soak.servers import ServerSpec

DEFAULT_PAIRS = ("llama_ctx_eagle", "llama_ctx_eagle3", "mixtral_eagle")
DEFAULT_SYNC_PAIRS = ("llama_ctx_eagle",)
MOE_FAMILIES = ("mixtral",)
"""Targets vLLM 0.26.0 runs on the V1 runner by itself (``--runner auto`` in the e2e matrix)."""


@dataclass(frozen=True)
class Deadlines:
    boot_s: float = budget.BOOT_S
    load_wall_s: float = budget.LOAD_WALL_S
    request_s: float = budget.REQUEST_DEADLINE_S
    drain_s: float = budget.DRAIN_S
    total_s: float = budget.TOTAL_S
    metrics_every_s: float = budget.METRICS_EVERY_S


@dataclass
class PairSetup:
    name: str
    info: dict[str, Any]
    workload: workload.Workload
    greedy_expected: dict[str, list[int]]
    specs: list[ServerSpec]


@dataclass
class Live:
    """A started server: its spec, port, process handle and what is collected about it."""

    spec: ServerSpec
    port: int
    handle: Any
    log: Path
    run: judge.ServerRun = field(init=False)

    def __post_init__(self) -> None:
        self.run = judge.ServerRun(self.spec.name, self.spec.variant, self.spec.role, self.spec.async_scheduling,
                                   speculative=self.spec.variant != "nospec", tp=self.spec.parallel.tp)

    @property
    def endpoint(self) -> Endpoint:
        return Endpoint(f"{self.spec.pair}/{self.spec.name}", "127.0.0.1", self.port, servers.SERVED_MODEL)


# ------------------------------------------------------------------------------------------------ planning
def zoo_build(zoo_dir: Path) -> Callable[[str], dict[str, Any]]:
    def build(name: str) -> dict[str, Any]:
        from portable_spec_harness import model_zoo

        # A sharp zoo target (winning logit 16) samples its greedy output up to ~1e-4 a token, so seeded requests
        # would never leave greedy (condition sampled_off_greedy); the context pairs are soft by construction.
        logit = model_zoo.LOGIT if name in model_zoo.CONTEXT_PAIRS else model_zoo.SOFT_LOGIT
        return model_zoo.build_pair(name, zoo_dir, variant="perfect", num_speculative_tokens=budget.K, target_logit=logit)
    return build


def zoo_oracle(info: dict[str, Any]) -> tuple[Callable, Callable]:
    """The pair's construction (greedy output of any prompt) and the zoo tokenizer's decode."""
    from portable_spec_harness import model_zoo

    tokenizer = model_zoo.tokenizer(info.get("seed", 0))
    expected = info["expected"]
    return (lambda prompt, n: model_zoo.expected_output(expected, list(prompt), n),
            lambda ids: tokenizer.decode(list(ids), skip_special_tokens=True))


def runner_for(pair: str) -> str:
    from portable_spec_harness.model_zoo import PAIRS

    return "auto" if PAIRS[pair][0] in MOE_FAMILIES else "v1"


def prepare(pairs: Sequence[str], sync_pairs: Sequence[str], outdir: Path, n_requests: int, seed: int,
            build: Callable[[str], dict[str, Any]], oracle: Callable[[dict], tuple[Callable, Callable]] = zoo_oracle,
            runner: Callable[[str], str] = runner_for, request_s: float = budget.REQUEST_DEADLINE_S,
            parallel: Parallel = Parallel()) -> list[PairSetup]:
    setups = []
    for name in pairs:
        info = build(name)
        greedy, detokenize = oracle(info)
        plan = workload.build(name, seed, n_requests, greedy, detokenize)
        plan.requests = [dataclasses.replace(r, deadline_s=request_s) for r in plan.requests]
        plan.pressure = [dataclasses.replace(r, deadline_s=request_s) for r in plan.pressure]
        genconfig = outdir / f"generation_config_{name}"
        genconfig.mkdir(parents=True, exist_ok=True)
        (genconfig / "generation_config.json").write_text(json.dumps(plan.generation_config(), indent=1))
        expected = {r.rid: greedy(r.body["prompt"], r.body["max_tokens"]) for r in plan.requests
                    if r.klass == "sampled_seeded"}
        specs = servers.server_specs(info, str(genconfig), sync=name in sync_pairs, runner=runner(name),
                                     parallel=parallel)
        (outdir / f"soak_workload_{name}.json").write_text(json.dumps(
            {"pair": name, "seed": seed, "classes": plan.counts(), "eos_ids": plan.eos_ids, "notes": plan.notes,
             "requests": [dataclasses.asdict(r) for r in plan.requests],
             "pressure": [dataclasses.asdict(r) for r in plan.pressure]}))
        setups.append(PairSetup(name, info, plan, expected, specs))
    return setups


# ------------------------------------------------------------------------------------------------ reading servers
async def health(endpoint: Endpoint, timeout_s: float = 5.0) -> bool:
    return await vllm_serve.health(endpoint.host, endpoint.port, timeout_s)


async def probe_facts(endpoint: Endpoint, timeout_s: float = 60.0) -> dict[str, Any] | None:
    """Our worker extension's reading (``probe.SoakWorkerExtension``) through vLLM's dev-mode ``/collective_rpc``."""
    return await vllm_serve.collective_rpc(endpoint.host, endpoint.port, servers.PROBE_METHOD, timeout_s=timeout_s)


async def wait_ready(live: Live, deadline: float, every_s: float = 1.0) -> dict[str, Any]:
    return await vllm_serve.wait_healthy(live.handle, live.endpoint.host, live.port, live.log.name, deadline, every_s)


# ------------------------------------------------------------------------------------------------ the run
def run_soak(outdir: Path, pairs: Sequence[str] = DEFAULT_PAIRS, sync_pairs: Sequence[str] = DEFAULT_SYNC_PAIRS,
             n_requests: int = budget.REQUESTS, seed: int = 0, *, build: Callable[[str], dict[str, Any]] | None = None,
             oracle: Callable[[dict], tuple[Callable, Callable]] = zoo_oracle,
             runner: Callable[[str], str] = runner_for, launch: Callable[..., Any] = servers.launch,
             deadlines: Deadlines = Deadlines(), structured: tuple[bool, str] | None = None,
             say: Callable[[str], None] = print, parallel: Parallel = Parallel()) -> dict[str, Any]:
    """The whole soak, every server at tensor parallel ``parallel``; returns the report (also written as
    ``OUTDIR/soak.json`` and ``soak_table.txt``)."""
    started = time.monotonic()
    outdir.mkdir(parents=True, exist_ok=True)
    files_before, files_after = vllm_serve.raise_open_file_limit()
    available, backend_version = structured or servers.structured_backend_available()
    if not available:
        say(f"[soak] structured output: {servers.STRUCTURED_BACKEND_MODULE} is not importable: the condition is "
            "unavailable on this host and the run cannot pass")
    build = build or zoo_build(Path("/tmp/portable_spec_zoo"))
    setups = prepare(pairs, sync_pairs, outdir, n_requests, seed, build, oracle, runner, deadlines.request_s,
                     parallel)
    say(f"[soak] planned {sum(len(s.workload.requests) for s in setups)} requests per server set over "
        f"{len(setups)} pair(s); {sum(len(s.specs) for s in setups)} servers")
    ports: set[int] = set()
    lives = {s.name: [Live(spec, vllm_serve.free_port(ports), None, outdir / f"soak_{s.name}_{spec.name}.log")
                      for spec in s.specs] for s in setups}
    all_lives = [live for group in lives.values() for live in group]
    phases: dict[str, float] = {"prepare_s": round(time.monotonic() - started, 1)}
    try:
        for live in all_lives:
            live.handle = launch(live.spec, live.port, live.log)
        asyncio.run(_serve_and_load(setups, lives, all_lives, deadlines, started, phases, say))
    finally:
        t = time.monotonic()
        launched = [live for live in all_lives if live.handle is not None]
        with ThreadPoolExecutor(max_workers=max(1, len(launched))) as pool:
            list(pool.map(lambda live: live.handle.stop(), launched))
        phases["stop_s"] = round(time.monotonic() - t, 1)
    for live in all_lives:
        live.run.log = logscan.scan(live.log)
    pair_reports = {}
    for setup in setups:
        runs = {live.spec.name: live.run for live in lives[setup.name]}
        rows = judge.judge_pair(setup.workload, runs, available, setup.greedy_expected)
        pair_reports[setup.name] = {
            "workload": {"requests": len(setup.workload.requests), "classes": setup.workload.counts(),
                         "eos_ids": setup.workload.eos_ids, "notes": setup.workload.notes,
                         "target": setup.info.get("target"), "draft": setup.info.get("draft"),
                         "method": setup.info.get("method")},
            "servers": rows}
        (outdir / f"soak_requests_{setup.name}.json").write_text(json.dumps(
            {name: [o.as_json() for o in [*run.outcomes, *run.pressure_outcomes, *run.solo_outcomes]]
             for name, run in runs.items()}))
    status, failures = judge.status(pair_reports)
    phases["total_s"] = round(time.monotonic() - started, 1)
    result = report.assemble(pair_reports, status, failures, {
        "structured_output_backend": {"name": servers.STRUCTURED_BACKEND_MODULE, "available": available,
                                      "version": backend_version},
        "pairs_asked": list(pairs), "sync_pairs": list(sync_pairs), "seed": seed, "phases": phases,
        "tensor_parallel": parallel.as_json(),
        "open_file_limit": [files_before, files_after]})
    missing = report.missing_keys(result)
    if missing:
        result["status"], result["failures"] = "failed", [*result["failures"], *(f"report lacks {m}" for m in missing)]
    (outdir / "soak.json").write_text(json.dumps(result, indent=1))
    (outdir / "soak_table.txt").write_text(report.table(result) + "\n")
    return result


async def _serve_and_load(setups: list[PairSetup], lives: dict[str, list[Live]], all_lives: list[Live],
                          deadlines: Deadlines, started: float, phases: dict[str, float],
                          say: Callable[[str], None]) -> None:
    t = time.monotonic()
    boot_deadline = min(t + deadlines.boot_s, started + deadlines.total_s - deadlines.drain_s - 60)
    ready = 0

    async def boot(live: Live) -> None:
        nonlocal ready
        live.run.boot = await wait_ready(live, boot_deadline)
        ready += live.run.boot["ready"]
        say(f"[soak] boot {live.endpoint.name}: {'ready' if live.run.boot['ready'] else live.run.boot['error']} "
            f"after {live.run.boot['seconds']} s ({ready}/{len(all_lives)} ready)")

    await asyncio.gather(*(boot(live) for live in all_lives))
    phases["boot_s"] = round(time.monotonic() - t, 1)
    up = [live for live in all_lives if live.run.boot.get("ready")]
    for live, facts, sample in zip(up, await asyncio.gather(*(probe_facts(x.endpoint) for x in up)),
                                   await asyncio.gather(*(loadgen.scrape(x.endpoint) for x in up))):
        live.run.facts_before, live.run.before = facts, sample
    wall = min(deadlines.load_wall_s, started + deadlines.total_s - time.monotonic() - deadlines.drain_s - 45)
    t = time.monotonic()
    plans = {s.name: s.workload for s in setups}
    total = sum(len(plans[live.spec.pair].requests) for live in up)
    done = {"n": 0, "errors": 0, "aborted": 0}

    def progress(outcome: Outcome) -> None:
        done["n"] += 1
        done["errors"] += outcome.error_kind is not None
        done["aborted"] += outcome.aborted
        if done["n"] % 100 == 0 or done["n"] == total:
            say(f"[soak] load: {done['n']}/{total} requests done, {done['errors']} errors, {done['aborted']} aborted "
                f"by the client, {time.monotonic() - t:.0f} s")

    async def load(live: Live, plan: workload.Workload) -> None:
        live.run.outcomes, live.run.gauges = await loadgen.drive_with_gauges(
            live.endpoint, plan.requests, max(wall, 1.0), deadlines.metrics_every_s, progress)

    if wall > 5:
        await asyncio.gather(*(load(live, plans[live.spec.pair]) for live in up))
    else:
        say(f"[soak] no time left for the load ({wall:.0f} s)")
    phases["load_s"] = round(time.monotonic() - t, 1)
    for live, facts in zip(up, await asyncio.gather(*(probe_facts(x.endpoint) for x in up))):
        live.run.facts_after_load = facts
    t = time.monotonic()
    pressure_wall = max(1.0, min(budget.REQUEST_DEADLINE_S,
                                 started + deadlines.total_s - time.monotonic() - deadlines.drain_s - 40))

    async def pressure(live: Live, plan: workload.Workload) -> None:
        live.run.pressure_outcomes = await loadgen.drive(live.endpoint, plan.pressure, pressure_wall)

    await asyncio.gather(*(pressure(live, plans[live.spec.pair]) for live in up))
    phases["pressure_s"] = round(time.monotonic() - t, 1)
    say(f"[soak] pressure wave: {sum(len(x.run.pressure_outcomes) for x in up)} requests "
        f"({budget.MAX_NUM_SEQS} at once per server, twice its KV cache), {phases['pressure_s']:.0f} s")
    t = time.monotonic()
    drains = await asyncio.gather(*(loadgen.wait_drained(x.endpoint, deadlines.drain_s) for x in up))
    afters = await asyncio.gather(*(loadgen.scrape(x.endpoint) for x in up))
    facts = await asyncio.gather(*(probe_facts(x.endpoint) for x in up))
    phases["after_s"] = round(time.monotonic() - t, 1)
    t = time.monotonic()
    await asyncio.gather(*(solo(live, plans[live.spec.pair]) for live in up))
    phases["solo_s"] = round(time.monotonic() - t, 1)
    say(f"[soak] solo: {sum(len(x.run.solo_outcomes) for x in up)} seeded requests sent one at a time, "
        f"{phases['solo_s']:.0f} s")
    healthy = await asyncio.gather(*(health(x.endpoint) for x in up))
    for live, drained, after, fact, ok in zip(up, drains, afters, facts, healthy):
        live.run.drained, live.run.after, live.run.facts_after = drained, after, fact
        live.run.healthy_at_end, live.run.alive_at_end = ok, live.handle.alive()


async def solo(live: Live, plan: workload.Workload) -> None:
    """The seeded requests again, one at a time (after the load's metrics were read, so they count nowhere else)."""
    start = time.monotonic()
    for spec in plan.solo_requests():
        live.run.solo_outcomes.append(await loadgen.send(live.endpoint, spec, lambda: time.monotonic() - start))
