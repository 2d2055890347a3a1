"""Drives a workload against servers: each request at its arrival time, each with its own deadline, the whole load
within a wall time; streamed requests read event by event, and the ``abort`` class disconnects mid-stream.

What comes back is one ``Outcome`` per request and server: the token ids and text of every choice, finish and stop
reasons, usage, the arrival time of every streamed chunk that carried tokens (the client-side conditions are counted
from these), and, when something went wrong, an ``error_kind``: ``http_5xx``, ``http_4xx``, ``stream_error`` (an
``error`` event inside a 200 stream, which is how vLLM reports a failure after the stream started), ``deadline``
(a hang: not done within its deadline or the load's wall time), ``connection`` or ``protocol``. A deliberate
disconnect is ``aborted``, not an error.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Awaitable, Callable

from portable_spec_harness.soak.http import Connection, ProtocolError, fetch
from portable_spec_harness.soak.metrics import GaugeTrace, RUNNING, WAITING, Sample, parse
from portable_spec_harness.soak.workload import RequestSpec

COMPLETIONS = "/v1/completions"


@dataclass(frozen=True)
class Endpoint:
    name: str
    host: str
    port: int
    model: str
    """The served model name the bodies carry."""


@dataclass
class Choice:
    token_ids: list[int] = field(default_factory=list)
    text: str = ""
    finish_reason: str | None = None
    stop_reason: int | str | None = None


@dataclass
class Outcome:
    rid: str
    server: str
    klass: str
    t_send: float
    stream: bool = False
    status: int | None = None
    error_kind: str | None = None
    error: str | None = None
    aborted: bool = False
    choices: dict[int, Choice] = field(default_factory=dict)
    usage: dict[str, Any] | None = None
    chunk_times: list[float] = field(default_factory=list)
    t_done: float | None = None

    @property
    def ok(self) -> bool:
        """Finished normally: no error, not aborted, every choice with a finish reason."""
        return self.error_kind is None and not self.aborted and bool(self.choices) and all(
            c.finish_reason is not None for c in self.choices.values())

    @property
    def tokens(self) -> int:
        return sum(len(c.token_ids) for c in self.choices.values())

    @property
    def ttft_s(self) -> float | None:
        """Send to the first chunk with tokens (streamed requests only)."""
        return self.chunk_times[0] - self.t_send if self.stream and self.chunk_times else None

    @property
    def tpot_s(self) -> float | None:
        """(last token chunk - first) / (tokens - 1): the mean time per output token after the first, streamed
        single-choice requests only."""
        if not self.stream or len(self.chunk_times) < 2 or len(self.choices) != 1 or self.tokens < 2:
            return None
        return (self.chunk_times[-1] - self.chunk_times[0]) / (self.tokens - 1)

    def as_json(self) -> dict[str, Any]:
        row = asdict(self)
        row["choices"] = {str(i): asdict(c) for i, c in sorted(self.choices.items())}
        row["chunk_times"] = [round(t, 4) for t in self.chunk_times]
        return row


def request_body(spec: RequestSpec, model: str) -> dict[str, Any]:
    body = {"model": model, **spec.body}
    if spec.stream:
        body["stream_options"] = {"include_usage": True}
    return body


def _apply_choices(outcome: Outcome, choices: list[dict[str, Any]], delta: bool) -> int:
    """Fold a response's (or a stream chunk's) choices into ``outcome``; returns the tokens they carried."""
    carried = 0
    for raw in choices:
        choice = outcome.choices.setdefault(int(raw.get("index", 0)), Choice())
        ids = raw.get("token_ids") or []
        carried += len(ids)
        choice.token_ids = (choice.token_ids + list(ids)) if delta else list(ids)
        choice.text = (choice.text + (raw.get("text") or "")) if delta else (raw.get("text") or "")
        if raw.get("finish_reason") is not None:
            choice.finish_reason = raw["finish_reason"]
            choice.stop_reason = raw.get("stop_reason")
    return carried


async def _streamed(conn: Connection, spec: RequestSpec, outcome: Outcome, clock: Callable[[], float]) -> None:
    done = False
    async for data in conn.events():
        if data == "[DONE]":
            done = True
            break
        event = json.loads(data)
        if "error" in event:
            outcome.error_kind, outcome.error = "stream_error", json.dumps(event["error"])[:300]
            return
        if event.get("usage"):
            outcome.usage = event["usage"]
        if _apply_choices(outcome, event.get("choices") or [], delta=True):
            outcome.chunk_times.append(clock())
            finished = len(outcome.choices) >= spec.n and all(
                c.finish_reason is not None for c in outcome.choices.values())
            if spec.abort_after_chunks and len(outcome.chunk_times) >= spec.abort_after_chunks and not finished:
                conn.close(abort=True)
                outcome.aborted = True
                return
    if not done:
        outcome.error_kind, outcome.error = "protocol", "stream ended without [DONE]"


async def send(endpoint: Endpoint, spec: RequestSpec, clock: Callable[[], float]) -> Outcome:
    """One request, within its deadline."""
    outcome = Outcome(spec.rid, endpoint.name, spec.klass, t_send=clock(), stream=spec.stream)
    conn = Connection(endpoint.host, endpoint.port)

    async def run() -> None:
        await conn.open("POST", COMPLETIONS, json.dumps(request_body(spec, endpoint.model)).encode())
        outcome.status = conn.status
        if conn.status != 200:
            body = (await conn.body()).decode(errors="replace")
            outcome.error_kind = "http_5xx" if conn.status >= 500 else "http_4xx"
            outcome.error = f"HTTP {conn.status}: {body[:300]}"
            return
        if spec.stream:
            await _streamed(conn, spec, outcome, clock)
        else:
            payload = json.loads(await conn.body())
            outcome.usage = payload.get("usage")
            if _apply_choices(outcome, payload.get("choices") or [], delta=False):
                outcome.chunk_times.append(clock())

    try:
        await asyncio.wait_for(run(), spec.deadline_s)
    except asyncio.TimeoutError:
        outcome.error_kind, outcome.error = "deadline", f"not done {spec.deadline_s:g} s after it was sent"
    except ProtocolError as exc:
        outcome.error_kind, outcome.error = "protocol", str(exc)
    except (ConnectionError, OSError, asyncio.IncompleteReadError) as exc:
        outcome.error_kind, outcome.error = "connection", f"{type(exc).__name__}: {exc}"
    except ValueError as exc:  # JSON that does not parse
        outcome.error_kind, outcome.error = "protocol", f"{type(exc).__name__}: {exc}"
    finally:
        conn.close(abort=outcome.aborted)
        outcome.t_done = clock()
    if outcome.error_kind is None and not outcome.aborted and not outcome.ok:
        outcome.error_kind, outcome.error = "protocol", "a choice came back without a finish reason"
    return outcome


async def drive(endpoint: Endpoint, requests: list[RequestSpec], wall_s: float,
                progress: Callable[[Outcome], None] | None = None) -> list[Outcome]:
    """Send every request at its arrival time; a request still open after ``wall_s`` is a hang (``deadline``)."""
    started = time.monotonic()

    def clock() -> float:
        return time.monotonic() - started

    async def one(spec: RequestSpec) -> Outcome:
        await asyncio.sleep(max(0.0, spec.arrival_s - clock()))
        try:
            outcome = await send(endpoint, spec, clock)
        except Exception as exc:  # a response the client could not read (e.g. a malformed choice): one error
            outcome = Outcome(spec.rid, endpoint.name, spec.klass, t_send=clock(), stream=spec.stream,
                              error_kind="protocol", error=f"{type(exc).__name__}: {exc}")
        if progress is not None:
            progress(outcome)
        return outcome

    tasks = {asyncio.ensure_future(one(spec)): spec for spec in requests}
    done, pending = await asyncio.wait(tasks, timeout=wall_s)
    outcomes = {tasks[t].rid: t.result() for t in done}
    for task in pending:
        task.cancel()
    for task in pending:
        spec = tasks[task]
        outcomes[spec.rid] = Outcome(spec.rid, endpoint.name, spec.klass, t_send=spec.arrival_s,
                                     error_kind="deadline", error=f"still open at the load's wall time ({wall_s:g} s)")
    if pending:
        await asyncio.gather(*pending, return_exceptions=True)
    return [outcomes[spec.rid] for spec in requests]


async def scrape(endpoint: Endpoint, timeout_s: float = 10.0) -> Sample | None:
    """``/metrics`` once; None when it does not answer 200 in time."""
    try:
        response = await fetch(endpoint.host, endpoint.port, "GET", "/metrics", timeout_s=timeout_s)
    except (asyncio.TimeoutError, ConnectionError, OSError, ProtocolError):
        return None
    return parse(response.body.decode(errors="replace")) if response.status == 200 else None


async def watch_gauges(endpoint: Endpoint, every_s: float, stop: asyncio.Event) -> dict[str, GaugeTrace]:
    """Sample vLLM's waiting and running gauges until ``stop`` is set (the peak of waiting is ``queued``)."""
    traces = {WAITING: GaugeTrace(WAITING), RUNNING: GaugeTrace(RUNNING)}
    while not stop.is_set():
        sample = await scrape(endpoint, timeout_s=max(every_s * 8, 2.0))
        for trace in traces.values():
            trace.add(sample)
        try:
            await asyncio.wait_for(stop.wait(), every_s)
        except asyncio.TimeoutError:
            pass
    return traces


SENTINEL = RequestSpec("sentinel", "sentinel", {"prompt": [1, 9, 10], "max_tokens": 1, "temperature": 0.0,
                                               "stream": False, "priority": 0, "return_token_ids": True,
                                               "request_id": "soak-sentinel"}, 0.0, None, deadline_s=30.0)
"""One token after the load. vLLM refreshes its gauges only when the engine steps; when the last requests left by
client aborts, no step follows and the gauges keep the old counts. The sentinel's step publishes the scheduler's
state after it finished, and shows the server still serves."""


async def wait_drained(endpoint: Endpoint, within_s: float, every_s: float = 0.5) -> dict[str, Any]:
    """After the load: one ``SENTINEL`` request, then poll until vLLM's running and waiting gauges are both 0
    (requests finished or aborted were freed). ``drained`` false after ``within_s`` is a hang or a leak."""
    started, last = time.monotonic(), None
    sentinel = await send(endpoint, SENTINEL, lambda: time.monotonic() - started)
    served = {"sentinel": "ok" if sentinel.ok else f"{sentinel.error_kind}: {sentinel.error}"}
    while sentinel.ok and time.monotonic() - started < within_s:
        sample = await scrape(endpoint)
        if sample is not None:
            last = {"running": sample.get(RUNNING), "waiting": sample.get(WAITING)}
            if last["running"] == 0 and last["waiting"] == 0:
                return {"drained": True, "seconds": round(time.monotonic() - started, 2), **served, **last}
        await asyncio.sleep(every_s)
    return {"drained": False, "seconds": round(time.monotonic() - started, 2), **served,
            **(last or {"running": None, "waiting": None})}


async def drive_with_gauges(endpoint: Endpoint, requests: list[RequestSpec], wall_s: float, every_s: float,
                            progress: Callable[[Outcome], None] | None = None
                            ) -> tuple[list[Outcome], dict[str, GaugeTrace]]:
    stop = asyncio.Event()
    watcher = asyncio.ensure_future(watch_gauges(endpoint, every_s, stop))
    try:
        outcomes = await drive(endpoint, requests, wall_s, progress)
    finally:
        stop.set()
    return outcomes, await watcher


def run(coro: Awaitable[Any]) -> Any:
    return asyncio.run(coro)  # type: ignore[arg-type]
