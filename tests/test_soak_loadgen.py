"""The soak's client against an in-process fake OpenAI server (``soak_fake_server``): streamed and whole responses,
a deliberate disconnect the server notices, and every way a request can fail (500, an error event inside a 200
stream, a dropped connection, a hang past the deadline or the load's wall time); plus the HTTP and Prometheus
parsers on hand-made input."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from pathlib import Path

import pytest

from portable_spec_harness import vllm_serve
from portable_spec_harness.soak import http, loadgen, metrics, servers, workload

from soak_fake_server import FakeVllm, Misbehave, fake_detokenize, fake_greedy


@pytest.fixture
def fake(tmp_path):
    made = []

    def make(misbehave: Misbehave | None = None, variant: str = "full_drafter") -> FakeVllm:
        genconfig = tmp_path / "genconfig"
        genconfig.mkdir(exist_ok=True)
        (genconfig / "generation_config.json").write_text('{"eos_token_id": [2]}')
        spec = servers.ServerSpec("p", variant, True, "/t", "/d", "eagle", "v1", str(genconfig))
        server = FakeVllm(spec, vllm_serve.free_port(), tmp_path / f"{variant}.log",
                          misbehave or Misbehave(only_variant=""))
        made.append(server)
        return server

    yield make
    for server in made:
        server.stop()


def endpoint(server: FakeVllm) -> loadgen.Endpoint:
    return loadgen.Endpoint("fake", "127.0.0.1", server.port, servers.SERVED_MODEL)


def request(rid: str, stream: bool = True, max_tokens: int = 20, **extra) -> workload.RequestSpec:
    body = {"prompt": [1, 40, 50, 60], "max_tokens": max_tokens, "temperature": 0.0, "ignore_eos": True,
            "stream": stream, "priority": 1, "return_token_ids": True, "request_id": rid}
    fields = {k: extra.pop(k) for k in ("abort_after_chunks", "deadline_s") if k in extra}
    return workload.RequestSpec(rid, "greedy", {**body, **extra}, 0.0, "nospec", **fields)


def send(server: FakeVllm, spec: workload.RequestSpec) -> loadgen.Outcome:
    started = time.monotonic()
    return asyncio.run(loadgen.send(endpoint(server), spec, lambda: time.monotonic() - started))


def test_a_streamed_request_collects_every_token_chunk_and_usage(fake):
    server = fake(variant="full_drafter")
    out = send(server, request("s1", max_tokens=21))
    assert out.ok and out.error_kind is None and out.status == 200
    assert out.choices[0].token_ids == fake_greedy([1, 40, 50, 60], 21)
    assert out.choices[0].text == fake_detokenize(out.choices[0].token_ids)
    assert out.choices[0].finish_reason == "length" and out.usage["completion_tokens"] == 21
    assert len(out.chunk_times) == 1 + 5  # the first token alone, then windows of 1 + K
    assert out.ttft_s > 0 and out.tpot_s > 0


def test_a_whole_response_and_n_choices(fake):
    server = fake(variant="nospec")
    out = send(server, request("w1", stream=False, temperature=0.8, seed=5, n=2))
    assert out.ok and sorted(out.choices) == [0, 1] and out.ttft_s is None and out.tpot_s is None
    assert out.choices[0].token_ids != out.choices[1].token_ids  # seed + index per choice


def test_an_abort_disconnects_mid_stream_and_the_server_frees_the_request(fake):
    server = fake(variant="nospec")
    out = send(server, request("a1", max_tokens=300, abort_after_chunks=2))
    assert out.aborted and out.error_kind is None and not out.ok
    assert len(out.chunk_times) == 2 and out.tokens == 2
    deadline = time.monotonic() + 5
    while server.state.in_flight and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.state.in_flight == 0  # the server saw the client go


@pytest.mark.parametrize("misbehave,kind", [
    (Misbehave(status_500="x", only_variant=""), "http_5xx"),
    (Misbehave(stream_error="x", only_variant=""), "stream_error"),
    (Misbehave(drop="x", only_variant=""), "protocol"),
])
def test_failures_are_errors_of_their_kind(fake, misbehave, kind):
    out = send(fake(misbehave), request("x1"))
    assert out.error_kind == kind and not out.ok and not out.aborted


def test_a_hang_is_a_deadline_error_within_the_deadline(fake):
    server = fake(Misbehave(hang="h", only_variant=""))
    started = time.monotonic()
    out = send(server, request("h1", deadline_s=0.5))
    assert out.error_kind == "deadline" and time.monotonic() - started < 3


def test_drive_keeps_arrival_times_and_turns_requests_open_at_the_wall_into_hangs(fake):
    server = fake(Misbehave(hang="late", only_variant=""))
    specs = [dataclasses.replace(request("first"), arrival_s=0.0),
             dataclasses.replace(request("second"), arrival_s=0.3),
             dataclasses.replace(request("late"), arrival_s=0.1)]
    outcomes = asyncio.run(loadgen.drive(endpoint(server), specs, wall_s=1.5))
    by = {o.rid: o for o in outcomes}
    assert [o.rid for o in outcomes] == ["first", "second", "late"]
    assert by["first"].ok and by["second"].ok and by["second"].t_send >= 0.29
    assert by["late"].error_kind == "deadline" and "wall time" in by["late"].error


def test_gauges_and_drain_read_the_servers_metrics(fake):
    server = fake(variant="nospec")
    specs = [dataclasses.replace(request(f"g{i}", max_tokens=30), arrival_s=0.0) for i in range(12)]
    outcomes, gauges = asyncio.run(loadgen.drive_with_gauges(endpoint(server), specs, 20, 0.01))
    assert all(o.ok for o in outcomes)
    assert gauges[metrics.WAITING].peak > 0 and gauges[metrics.RUNNING].peak == 8
    drained = asyncio.run(loadgen.wait_drained(endpoint(server), 2))
    assert drained["drained"] and drained["sentinel"] == "ok"
    assert server.state.counters[metrics.PREFIX_CACHE_QUERIES + "{}"] == 12 * 4 + 3  # the sentinel was served
    leaky = fake(Misbehave(leak=True, only_variant=""), variant="eager_drafter")
    result = asyncio.run(loadgen.wait_drained(endpoint(leaky), 0.3, every_s=0.05))
    assert not result["drained"] and result["running"] == 1


# ------------------------------------------------------------------------------------------------ parsers
def test_sse_events_split_across_chunks_and_crlf():
    async def serve(reader, writer):
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for part in (b'data: {"a"', b': 1}\r\n\r\ndata: [DO', b"NE]\n\n"):
            writer.write(f"{len(part):x}\r\n".encode() + part + b"\r\n")
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        writer.close()

    async def run():
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        conn = http.Connection("127.0.0.1", server.sockets[0].getsockname()[1])
        await conn.open("POST", "/x", b"{}")
        events = [e async for e in conn.events()]
        conn.close()
        server.close()
        return events

    assert asyncio.run(run()) == ['{"a": 1}', "[DONE]"]


def test_prometheus_text_with_labels_histograms_and_missing_names():
    text = ('# HELP x\n# TYPE vllm:num_preemptions_total counter\n'
            'vllm:num_preemptions_total{engine="0",model_name="a,b \\"q\\""} 4.0\n'
            'vllm:request_params_n_bucket{engine="0",le="1.0"} 5.0\n'
            'vllm:request_params_n_bucket{engine="0",le="2.0"} 7.0\n'
            'vllm:request_params_n_bucket{engine="0",le="+Inf"} 7.0\n'
            'vllm:request_params_n_count{engine="0"} 7.0\n')
    sample = metrics.parse(text)
    assert sample.get(metrics.PREEMPTIONS) == 4 and sample.get(metrics.PREEMPTIONS, model_name='a,b "q"') == 4
    assert sample.histogram_above(metrics.PARAM_N, 1) == 2
    assert sample.get(metrics.WAITING) is None and sample.histogram_above(metrics.PARAM_N, 3) is None
    before = metrics.parse(text.replace("4.0", "1.0"))
    assert metrics.delta(before, sample, metrics.PREEMPTIONS) == 3
    assert metrics.delta(before, metrics.Sample(), metrics.PREEMPTIONS) is None


def test_the_fake_answers_what_the_real_server_is_asked(fake, tmp_path: Path):
    server = fake()
    ep = endpoint(server)
    assert asyncio.run(http.fetch(ep.host, ep.port, "GET", "/health")).status == 200
    rpc = asyncio.run(http.fetch(ep.host, ep.port, "POST", "/collective_rpc", {"method": servers.PROBE_METHOD}))
    assert rpc.json()["results"][0]["runner"].endswith("PortableV1ModelRunner")
