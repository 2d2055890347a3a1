"""A fake ``vllm serve`` for the soak's CPU tests: an asyncio HTTP/1.1 server in a thread that answers the endpoints
the soak uses (``/health``, ``/metrics``, ``/collective_rpc``, ``/v1/completions`` with and without streaming) the way
vLLM 0.26.0 shapes them, from a made-up model whose output is a function of the request. It can also misbehave on
purpose (``Misbehave``): a wrong token, a 500, an error event inside a stream, a dropped connection, a hang, a metric
missing, no preemption counted, a request that never leaves the running gauge, or one variant's engine slower."""

from __future__ import annotations

import asyncio
import json
import math
import random
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from portable_spec_harness.soak import budget, metrics, servers

SLEEP_PER_CHUNK_S = 0.01
"""A made-up engine step: long enough that a burst of requests queues behind ``max_num_seqs``."""
PREFILL_S = 0.05
"""Each request holds its slot at least this long, so a burst keeps the waiting gauge up for a while."""
NON_STREAMED_MAX_S = 1.0
"""A non-streamed answer takes at most this (the pressure wave's 400 tokens at one a step would outlast the
tests' request deadline)."""
BUCKETS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000]
MONITOR_LINE = ("(EngineCore pid=1) INFO 11-25 00:00:01 [jit_monitor.py:84] Kernel JIT monitor activated; "
                "monitored JIT compilations during inference will use mode=warn.")
"""vLLM's line when its worker arms the JIT monitor after the warm-up (the H200 logs' words)."""
COMPILE_LINE = ("(EngineCore pid=1) WARNING 11-25 00:00:09 [jit_monitor.py:140] Triton kernel JIT compilation "
                "during inference: {kernel}. This causes a latency spike; consider extending warmup to cover this "
                "shape/config.")
"""vLLM's JIT monitor's warning for a kernel compiled after boot (``.format(kernel=...)``)."""


def fake_greedy(prompt: list[int], n: int) -> list[int]:
    """The made-up target's greedy output: a walk that depends on the last two tokens (never a special id)."""
    seq = list(prompt)
    for _ in range(n):
        seq.append(8 + (seq[-1] * 31 + seq[-2 if len(seq) > 1 else -1] * 7 + 11) % 1016)
    return seq[len(prompt):]


def prompt_ids(prompt: list[int] | str) -> list[int]:
    """Token prompts as they are; a text prompt (``vllm bench serve`` sends text) one made-up token per character."""
    return [8 + ord(ch) % 1016 for ch in prompt] if isinstance(prompt, str) else list(prompt)


def ticking_clock() -> tuple[Any, list[float]]:
    """A ``PhaseClock`` whose wall and CPU time advance only when ``now[0]`` does."""
    from portable_spec_harness.e2e.phase_clock import PhaseClock

    now = [0.0]
    return PhaseClock(wall=lambda: now[0], cpu=lambda: now[0]), now


class DeadServer:
    """A launched server process that exited at once."""

    returncode = 1

    def alive(self) -> bool:
        return False

    def stop(self) -> int:
        return 1


def fake_clock_summary() -> dict[str, Any]:
    """What the serve bench's probe answers after a clock run: the real ``served_summary`` of two made-up steps."""
    from portable_spec_harness.serve_bench.worker_extension import served_summary
    from portable_spec_harness.vllm_door.profile_scopes import ENGINE_STEP, OUTPUT, STEP

    clock, now = ticking_clock()
    for _ in range(2):
        with clock.scope(ENGINE_STEP):
            with clock.scope(STEP):
                now[0] += 0.001
                with clock.scope("gpu_model_runner: forward"):
                    now[0] += 0.004
            with clock.scope(OUTPUT):
                now[0] += 0.002
    return served_summary(clock)


def fake_profile_summary() -> dict[str, Any]:
    from profile_events import sample_breakdown

    out = sample_breakdown()
    out.pop("per_step", None)
    return out


def fake_detokenize(ids: list[int]) -> str:
    return "".join(chr(97 + t % 26) + chr(65 + (t // 26) % 26) for t in ids)


def fake_build(name: str) -> dict[str, Any]:
    return {"pair": name, "target": f"/zoo/{name}_target", "draft": f"/zoo/{name}_head", "method": "eagle",
            "expected": {}, "seed": 0}


def fake_oracle(info: dict[str, Any]) -> tuple[Any, Any]:
    return fake_greedy, fake_detokenize


@dataclass
class Misbehave:
    wrong_token: str = ""
    """Request-id substring: the first generated token is off by one (only on our drafter's server)."""
    status_500: str = ""
    stream_error: str = ""
    drop: str = ""
    """Close the connection after the first chunk, without ``[DONE]``."""
    hang: str = ""
    missing_metric: str = ""
    no_preemption: bool = False
    leak: bool = False
    """The running gauge never returns to 0."""
    only_variant: str = "full_drafter"
    """Misbehave only on this variant (``""``: every server)."""
    chunk_s: dict[str, float] = field(default_factory=dict)
    """Server variant -> seconds per engine step instead of ``SLEEP_PER_CHUNK_S``: a slower engine (the serve bench's
    sizing per variant); ``only_variant`` does not apply."""
    first_batch_pause_s: dict[int, float] = field(default_factory=dict)
    """Requests in flight -> seconds the request that first makes that many waits before its first token, once per
    server: a first batch of that size paused after boot (the first-batches probe's pause), then never again."""


@dataclass
class State:
    counters: dict[str, float] = field(default_factory=dict)
    hist: dict[str, list[float]] = field(default_factory=dict)
    in_flight: int = 0
    blocks_asked: int = 0
    """KV blocks the requests in flight need at their longest (prompt + max_tokens, per sequence)."""
    waiting: int = 0
    waiting_peak: int = 0
    """The most requests waiting since the last ``/metrics`` read: the gauge reports it, so a scrape that a loaded
    test host runs late still sees a queue that formed and drained between two scrapes (vLLM's gauge is read at its
    own step boundaries; the driver's sampling is what this fake must exercise, not the host's timing)."""
    seen_prefixes: set = field(default_factory=set)
    replays: dict[str, int] = field(default_factory=lambda: {"first_fused": 0, "chain_fused": 0})
    paused_sizes: set = field(default_factory=set)
    """Batch sizes whose first-batch pause (``Misbehave.first_batch_pause_s``) this server already paid."""

    def inc(self, name: str, by: float = 1.0, **labels: str) -> None:
        key = name + json.dumps(labels, sort_keys=True)
        self.counters[key] = self.counters.get(key, 0.0) + by

    def observe(self, name: str, value: float) -> None:
        self.hist.setdefault(name, []).append(value)


class FakeVllm:
    def __init__(self, spec: servers.ServerSpec, port: int, log: Path, misbehave: Misbehave | None = None) -> None:
        self.spec, self.port, self.log = spec, port, log
        self.kind = getattr(spec, "kind", spec.variant)
        """What the server runs: a soak spec's variant, a serve-bench server's kind (``ours@async`` runs ours)."""
        self.misbehave = misbehave or Misbehave()
        self.state = State()
        genconfig = getattr(spec, "generation_config", None)  # the serve bench's servers have none
        config = (json.loads((Path(genconfig) / "generation_config.json").read_text()) if genconfig
                  else {"eos_token_id": [2]})
        self.eos_ids = set(config["eos_token_id"])
        self.k = getattr(spec.pair, "k", budget.K)  # a serve-bench server carries its pair, a soak one its name
        self.step = 1 if self.kind == "nospec" else 1 + self.k
        self.measuring: str | None = None
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        self.ready.wait(10)
        lines = ["INFO 11-25 00:00:00 [vllm.py:1] Asynchronous scheduling is "
                 f"{'enabled' if async_scheduling(spec) else 'disabled'}.",
                 MONITOR_LINE]  # vLLM arms its JIT monitor in every server once warmed up (``portable_spec_harness.jit_judge``)
        if spec.role == "ours":
            lines.append("INFO 11-25 00:00:01 [runner.py:227] portable_spec: drafter FULL graphs: 9 captured in "
                         "0.04 s, 56.0 MiB, sizes {'first_fused': [4, 8]}, 0 failed")
        log.write_text("\n".join(lines) + "\n")

    # -- process-like handle -------------------------------------------------------------------------------
    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.slots = asyncio.Semaphore(budget.MAX_NUM_SEQS)  # as max_num_seqs: the rest wait
        self.server = self.loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", self.port))
        self.ready.set()
        self.loop.run_forever()

    def alive(self) -> bool:
        return self.thread.is_alive()

    @property
    def returncode(self) -> int | None:
        return None if self.alive() else 0

    def stop(self) -> int:
        async def close() -> None:
            self.server.close()
            for task in asyncio.all_tasks(self.loop):
                if task is not asyncio.current_task():
                    task.cancel()
        if self.alive():
            asyncio.run_coroutine_threadsafe(close(), self.loop).result(5)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(5)
        return 0

    def _mine(self) -> bool:
        """Whether this server is the one that misbehaves."""
        return not self.misbehave.only_variant or self.spec.variant == self.misbehave.only_variant

    def _step_s(self) -> float:
        """One made-up engine step on this server (``Misbehave.chunk_s``)."""
        return self.misbehave.chunk_s.get(self.spec.variant, SLEEP_PER_CHUNK_S)

    def _first_batch_pause(self) -> float:
        """Seconds this request waits as the first to make its batch size (``Misbehave.first_batch_pause_s``)."""
        size = self.state.in_flight
        pause = self.misbehave.first_batch_pause_s.get(size, 0.0) if self._mine() else 0.0
        if not pause or size in self.state.paused_sizes:
            return 0.0
        self.state.paused_sizes.add(size)
        return pause

    def _bad(self, field_name: str, rid: str) -> bool:
        needle = getattr(self.misbehave, field_name)
        return bool(needle) and needle in rid and self._mine()

    # -- HTTP ------------------------------------------------------------------------------------------------
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode().split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:] if x)}
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            if method == "GET" and path == "/health":
                await self._send(writer, 200, b"", "text/plain")
            elif method == "GET" and path == "/metrics":
                await self._send(writer, 200, self._metrics().encode(), "text/plain")
            elif method == "POST" and path == "/collective_rpc":
                answer = self._rpc(json.loads(body).get("method", ""))
                ranks = [{**answer, "rank": rank} for rank in range(self.spec.parallel.tp)]  # each worker answers
                await self._send(writer, 200, json.dumps({"results": ranks}).encode())
            elif method == "POST" and path == "/v1/completions":
                await self._completion(writer, json.loads(body))
            else:
                await self._send(writer, 404, b'{"detail": "Not Found"}')
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass  # a client that went away, or the fake stopping under a hung request
        finally:
            writer.close()

    async def _send(self, writer: asyncio.StreamWriter, status: int, body: bytes,
                    content_type: str = "application/json") -> None:
        writer.write(f"HTTP/1.1 {status} X\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
                     f"Connection: close\r\n\r\n".encode() + body)
        await writer.drain()

    async def _chunk(self, writer: asyncio.StreamWriter, data: str) -> None:
        raw = f"data: {data}\n\n".encode()
        writer.write(f"{len(raw):x}\r\n".encode() + raw + b"\r\n")
        await writer.drain()

    # -- the made-up engine --------------------------------------------------------------------------------
    def _choice(self, body: dict[str, Any], index: int, rid: str) -> dict[str, Any]:
        prompt, max_tokens = prompt_ids(body["prompt"]), body["max_tokens"]
        if body.get("response_format"):
            text = '{"color":"red","size":"S"}'
            return {"token_ids": [300 + i for i in range(6)], "text": text, "finish_reason": "stop",
                    "stop_reason": None}
        if body.get("temperature") == 0:
            tokens = fake_greedy(prompt, max_tokens)
        else:
            rng = random.Random(body["seed"] + index) if body.get("seed") is not None else random.Random()
            tokens = [rng.randrange(8, 1024) for _ in range(max_tokens)]
        if self._bad("wrong_token", rid):
            tokens[0] = 8 + (tokens[0] - 7) % 1016
        finish, stop_reason = "length", None
        if not body.get("ignore_eos"):
            hit = next((i for i, t in enumerate(tokens) if t in self.eos_ids), None)
            if hit is not None:
                tokens, finish, stop_reason = tokens[: hit + 1], "stop", tokens[hit]
        text = fake_detokenize(tokens)
        for stop in body.get("stop") or []:
            at = text.find(stop)
            if at >= 0:
                done = next(k for k in range(1, len(tokens) + 1) if stop in fake_detokenize(tokens[:k]))
                # tokens come a step at a time: the first alone, then ``step`` at once
                step_end = done if done == 1 else 1 + math.ceil((done - 1) / self.step) * self.step
                tokens, finish, stop_reason, text = tokens[:step_end], "stop", stop, text[:at]
                break
        return {"token_ids": tokens, "text": text, "finish_reason": finish, "stop_reason": stop_reason}

    def _account(self, body: dict[str, Any], choices: list[dict[str, Any]]) -> None:
        prompt = prompt_ids(body["prompt"])
        cached = 0
        if len(prompt) > 160:
            key = tuple(prompt[:160])
            cached = 160 if key in self.state.seen_prefixes else 0
            self.state.seen_prefixes.add(key)
        self.state.inc(metrics.PREFIX_CACHE_HITS, cached)
        self.state.inc(metrics.PREFIX_CACHE_QUERIES, len(prompt))
        if self.state.blocks_asked > budget.NUM_GPU_BLOCKS and not (self.misbehave.no_preemption and self._mine()):
            self.state.inc(metrics.PREEMPTIONS)  # vLLM preempts when the running requests outgrow the cache
        self.state.observe(metrics.PREFILL_COMPUTED, len(prompt) - cached)
        self.state.observe(metrics.PARAM_N, body.get("n", 1))
        for c in choices:
            steps = 1 + math.ceil(max(len(c["token_ids"]) - 1, 0) / self.step)
            for _ in range(steps):
                self.state.observe(metrics.ITERATIONS, 1)
            self.state.inc(metrics.REQUEST_SUCCESS, finished_reason=c["finish_reason"])
            if self.kind != "nospec":
                self.state.inc(metrics.DRAFTS, steps - 1)
                self.state.inc(metrics.DRAFT_TOKENS, (steps - 1) * self.k)
                self.state.inc(metrics.ACCEPTED, len(c["token_ids"]) - steps)
            if self.spec.role == "ours":
                self.state.replays["first_fused"] += steps - 1
                self.state.replays["chain_fused"] += (steps - 1) * (self.k - 1)

    async def _completion(self, writer: asyncio.StreamWriter, body: dict[str, Any]) -> None:
        rid = body.get("request_id", "")
        if self._bad("status_500", rid):
            await self._send(writer, 500, b'{"error": {"message": "boom", "type": "x", "code": 500}}')
            return
        self.state.waiting += 1
        if self.slots.locked():  # it waits for a slot (a free one is taken without yielding: never seen waiting)
            self.state.waiting_peak = max(self.state.waiting_peak, self.state.waiting)
        try:
            await self.slots.acquire()
        finally:
            self.state.waiting -= 1
        self.state.in_flight += 1
        blocks = body.get("n", 1) * budget.blocks(len(prompt_ids(body["prompt"])) + body["max_tokens"])
        self.state.blocks_asked += blocks
        try:
            await asyncio.sleep(PREFILL_S + self._first_batch_pause())
            if self._bad("hang", rid):
                await asyncio.sleep(3600)
            choices = [self._choice(body, i, rid) for i in range(body.get("n", 1))]
            self._account(body, choices)
            usage = {"prompt_tokens": len(prompt_ids(body["prompt"])),
                     "completion_tokens": sum(len(c["token_ids"]) for c in choices)}
            if not body.get("stream"):
                steps = sum(1 + math.ceil(max(len(c["token_ids"]) - 1, 0) / self.step) for c in choices)
                await asyncio.sleep(min(self._step_s() * steps, NON_STREAMED_MAX_S))
                payload = {"id": "cmpl-x", "object": "text_completion", "model": body["model"], "usage": usage,
                           "choices": [{"index": i, **c} for i, c in enumerate(choices)]}
                await self._send(writer, 200, json.dumps(payload).encode())
                return
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
                         b"Connection: close\r\n\r\n")
            for i, c in enumerate(choices):
                tokens, sent_text, at, first = c["token_ids"], 0, 0, True
                while at < len(tokens):
                    end = at + (1 if first else self.step)
                    first = False
                    last = end >= len(tokens)
                    text_end = len(c["text"]) if last else min(len(fake_detokenize(tokens[:end])), len(c["text"]))
                    chunk = {"index": i, "text": c["text"][sent_text:text_end], "token_ids": tokens[at:end],
                             "finish_reason": c["finish_reason"] if last else None,
                             "stop_reason": c["stop_reason"] if last else None}
                    sent_text, at = max(sent_text, text_end), end
                    if self._bad("stream_error", rid) and at > 1:
                        await self._chunk(writer, json.dumps({"error": {"message": "x", "type": "y", "code": 400}}))
                        await self._chunk(writer, "[DONE]")
                        writer.write(b"0\r\n\r\n")
                        return
                    await self._chunk(writer, json.dumps({"id": "cmpl-x", "choices": [chunk]}))
                    if self._bad("drop", rid):
                        writer.transport.abort()
                        return
                    await asyncio.sleep(self._step_s())
            await self._chunk(writer, json.dumps({"id": "cmpl-x", "choices": [], "usage": usage}))
            await self._chunk(writer, "[DONE]")
            writer.write(b"0\r\n\r\n")
            await writer.drain()
        finally:
            self.state.in_flight -= 1
            self.state.blocks_asked -= blocks
            self.slots.release()

    def _rpc(self, method: str) -> dict[str, Any]:
        """The soak's facts, or the serve bench probe's measurements (a real ``PhaseClock`` and ``step_attribution``
        summary over made-up steps: the driver reads the same shapes a served engine answers with)."""
        if method.startswith("portable_spec_bench_"):
            kind, action = method[len("portable_spec_bench_"):].rsplit("_", 1)
            if action == "start":
                if self.measuring:
                    return {"error": f"a {self.measuring} measurement is already running"}
                self.measuring = kind
                return {"kind": kind, "installed": 20, "skipped": []}
            if self.measuring != kind:
                return {"error": f"no {kind} measurement is running"}
            self.measuring = None
            return fake_clock_summary() if kind == "clock" else fake_profile_summary()
        return self._facts()

    def _facts(self) -> dict[str, Any]:
        ours = self.spec.role == "ours"
        drafter = (None if self.kind in ("nospec", "mrv2") else
                   "portable_spec.vllm_adapter.spec_decode.proposer.FullGraphEagleProposer" if ours
                   else "vllm.v1.spec_decode.eagle.EagleProposer")
        return {"runner": ("portable_spec.vllm_adapter.worker.v1_model_runner.PortableV1ModelRunner" if ours
                           else "vllm.v1.worker.gpu_model_runner.GPUModelRunner"),
                "drafter": drafter, "replays": dict(self.state.replays) if ours else None,
                "pointer_mismatches": 0 if ours else None,
                "capture_stats": {"graphs": 4, "num_tokens": {"first_fused": [1, 2], "chain_fused": [1, 2]},
                                  "failed": {}} if ours else None,
                "platform": ("vllm.platforms.cuda.CudaPlatform" if self.kind in ("nospec", "upstream_v1", "mrv2")
                             else "portable_spec.vllm_adapter.platform.cuda.PortableCudaPlatform"),
                "use_v2_model_runner": self.kind == "mrv2",
                "tensor_parallel_size": self.spec.parallel.tp,
                "async_scheduling": async_scheduling(self.spec),
                "scheduling_policy": "priority", "num_gpu_blocks": budget.NUM_GPU_BLOCKS,
                "long_prefill_token_threshold": budget.LONG_PREFILL_TOKEN_THRESHOLD,
                "max_num_seqs": budget.MAX_NUM_SEQS}

    def _metrics(self) -> str:
        lines = ["# HELP vllm:num_requests_running Number of requests.", "# TYPE vllm:num_requests_running gauge"]
        running = max(self.state.in_flight, 1 if self.misbehave.leak and self._mine() else 0)
        label = 'model_name="soak",engine="0"'
        lines.append(f"vllm:num_requests_running{{{label}}} {float(running)}")
        waiting, self.state.waiting_peak = max(self.state.waiting, self.state.waiting_peak), self.state.waiting
        lines.append(f"vllm:num_requests_waiting{{{label}}} {float(waiting)}")
        names = [metrics.PREEMPTIONS, metrics.PREFIX_CACHE_HITS, metrics.PREFIX_CACHE_QUERIES,
                 metrics.GENERATION_TOKENS]
        if self.kind != "nospec":
            names += list(metrics.SPECULATIVE)
        for name in names:
            lines.append(f"{name}{{{label}}} {self.state.counters.get(name + '{}', 0.0)}")
        for key, value in self.state.counters.items():
            name, labels = key.split("{", 1)
            if name == metrics.REQUEST_SUCCESS:
                reason = json.loads("{" + labels)["finished_reason"]
                lines.append(f'{name}{{{label},finished_reason="{reason}"}} {value}')
        for name in (metrics.PREFILL_COMPUTED, metrics.PARAM_N, metrics.ITERATIONS):
            values = self.state.hist.get(name, [])
            for bound in BUCKETS:
                lines.append(f'{name}_bucket{{{label},le="{float(bound)}"}} {float(sum(v <= bound for v in values))}')
            lines.append(f'{name}_bucket{{{label},le="+Inf"}} {float(len(values))}')
            lines.append(f"{name}_count{{{label}}} {float(len(values))}")
            lines.append(f"{name}_sum{{{label}}} {float(sum(values))}")
        if self.misbehave.missing_metric and self._mine():
            lines = [x for x in lines if not x.startswith(self.misbehave.missing_metric)]
        return "\n".join(lines) + "\n"


def async_scheduling(spec: Any) -> bool:
    """What the made-up engine runs: the soak's spec says it as a bool, the serve bench's as ``--async-scheduling``'s
    choice (its default: on, as vLLM 0.26.0 picks for the fake's EAGLE pair)."""
    value = getattr(spec, "async_scheduling", True)
    return value != "off" if isinstance(value, str) else bool(value)


CPU_TEST_HOST = {"cpu_model": "cpu-test", "cpu_signature": "family 6 model 207 stepping 2", "logical_cpus": 2,
                 "usable_cpus": 2, "loadavg": [0.5, 0.5, 0.5], "python_loop_ms": 10.0, "torch_cpu_op_us": 2.0}
"""What the serve bench's host query says in the CPU tests: the real one spawns a torch probe per call."""


def fake_launcher(misbehave: Misbehave | None = None) -> Any:
    def launch(spec: servers.ServerSpec, port: int, log: Path) -> FakeVllm:
        return FakeVllm(spec, port, log, misbehave)
    return launch
