"""The first-batches probe: waves of the benchmark's own requests, each size twice, and a pause where a size's first
wave waits longer than its repeat. Run end to end against the soak's fake server with a made-up first-batch pause
(the real client, the real boot and stop, the real JIT judge), and its verdict function alone: a pause, an
incomplete wave, a compile or an unarmed monitor of ours fails it; the baseline's are only reported."""

from __future__ import annotations

import argparse
import asyncio
import json

import pytest

from portable_spec_harness.serve_bench import first_batches as fb
from portable_spec_harness.serve_bench import one_server, pairs, servers
from shared_zoo import shared_zoo
from soak_fake_server import Misbehave, fake_launcher

SIZES = [1, 2, 4]


def test_sampled_waves_send_the_benchmarks_requests_each_with_a_seed_of_its_own():
    seeds = []
    for size in SIZES:
        for wave in range(len(fb.WAVES)):
            bodies = fb.request_sampling("sampled", 7, size, wave)
            assert len(bodies) == size
            assert all(b["temperature"] == 0.8 and b["top_p"] == 0.95 for b in bodies)
            seeds += [b["seed"] for b in bodies]
    assert len(seeds) == 2 * sum(SIZES) and len(set(seeds)) == len(seeds)
    assert fb.request_sampling("greedy", 7, 2, 0) == [{"temperature": 0.0}, {"temperature": 0.0}]


def test_a_wave_is_as_slow_as_its_slowest_first_token_and_unjudged_when_a_request_streamed_nothing():
    wave = fb.wave_summary(100.0, [[100.05, 100.06], [100.4]])
    assert wave["ttft_ms"] == [50.0, 400.0] and wave["max_ttft_ms"] == 400.0 and wave["chunks"] == [2, 1]
    assert fb.wave_summary(100.0, [[100.05], []])["max_ttft_ms"] is None


def test_a_first_wave_over_its_repeat_by_more_than_the_threshold_is_a_pause():
    waves = {"1": {"first": {"max_ttft_ms": 60.0}, "repeat": {"max_ttft_ms": 50.0}},
             "2": {"first": {"max_ttft_ms": 1117.0}, "repeat": {"max_ttft_ms": 93.0}},
             "4": {"first": {"max_ttft_ms": 300.0}, "repeat": {"max_ttft_ms": 60.0}},
             "8": {"first": {"max_ttft_ms": 900.0}}}  # no repeat: not judged here, problems() counts it
    assert fb.pauses(waves, 250.0) == [{"size": 2, "excess_ms": 1024.0, "first_ms": 1117.0, "repeat_ms": 93.0}]
    assert [p["size"] for p in fb.pauses(waves, 200.0)] == [2, 4]


def _result(variant, pauses=(), jit=(), monitor=True, drop=0, silent=False):
    waves = {str(size): {wave: {"chunks": [0 if silent and size == 2 else 9] * size} for wave in fb.WAVES}
             for size in SIZES[:len(SIZES) - drop]}
    return {"variant": variant, "waves": waves, "jit_after_boot": list(jit), "jit_monitor_active": monitor,
            "pauses": [{"size": s, "excess_ms": 1000.0, "first_ms": 1050.0, "repeat_ms": 50.0} for s in pauses]}


def test_a_clean_probe_of_ours_passes_and_counts_its_waves():
    compared, found = fb.problems([_result("ours_mrv2"), _result("mrv2", pauses=[1], jit=["k"])], SIZES)
    assert (compared, found) == (6, [])  # the baseline's pause and compile are its own


@pytest.mark.parametrize("bad,phrase", [
    (_result("ours_mrv2", pauses=[2]), "ours_mrv2: its first batch of 2 paused 1000.0 ms over the repeat"),
    (_result("ours_mrv2", drop=1), "ours_mrv2: 4 of 6 waves streamed every request"),
    (_result("ours_mrv2", silent=True), "ours_mrv2: 4 of 6 waves streamed every request"),
    (_result("ours_mrv2", jit=["Triton kernel JIT compilation: _gumbel_sample_kernel"]), "JIT compile(s) after boot"),
    (_result("ours@async", monitor=False), "ours@async: vLLM's JIT monitor never logged"),
])
def test_what_the_probe_guards_fails_it(bad, phrase):
    _, found = fb.problems([bad, _result("mrv2")], SIZES)
    assert any(phrase in line for line in found), found


def test_a_probe_without_ours_compared_nothing_and_fails():
    assert fb.problems([_result("mrv2")], SIZES) == (0, ["no wave of ours, ours_mrv2 to compare"])


@pytest.mark.parametrize("text", ["2,1", "0,1", "1,1", "x", ""])
def test_sizes_not_increasing_from_one_exit_2_naming_the_fix(text, capsys):
    with pytest.raises(SystemExit) as stop:
        fb.main(["/tmp/unused", "--sizes", text])
    assert stop.value.code == 2
    assert "e.g. 1,2,4,8,16,32" in capsys.readouterr().err


def _args(pause_ms: float = 250.0) -> argparse.Namespace:
    return argparse.Namespace(sizes=SIZES, sampling="sampled", input_len=16, output_len=8, pause_ms=pause_ms,
                              boot_timeout=30.0, seed=0)


@pytest.fixture(scope="module")
def zoo_pair(tmp_path_factory) -> pairs.BenchPair:
    return pairs.resolve("llama_eagle", None, None, shared_zoo(tmp_path_factory))


def _probe(tmp_path, monkeypatch, pair, variant: str, misbehave: Misbehave) -> dict:
    monkeypatch.setattr(one_server, "launch", fake_launcher(misbehave))
    server = servers.BenchServer(variant, pair, 640, max(SIZES), 1 << 30)
    return asyncio.run(fb.probe_variant(server, tmp_path, _args(), vocab=1000))


def test_the_probe_finds_a_made_up_first_batch_pause_of_ours_and_only_that(tmp_path, monkeypatch, zoo_pair):
    """The fake server waits 1.5 s once, at its first batch of two: the probe's first wave of 2 pauses, its repeat
    and every other size do not, and the verdict names it; the same server without the pause passes."""
    paused = _probe(tmp_path, monkeypatch, zoo_pair, "ours_mrv2",
                    Misbehave(first_batch_pause_s={2: 1.5}, only_variant="ours_mrv2"))
    assert sorted(paused["waves"]) == ["1", "2", "4"]
    assert all(len(w["chunks"]) == int(size) and all(w["chunks"]) for size, by_wave in paused["waves"].items()
               for w in by_wave.values())
    assert [p["size"] for p in paused["pauses"]] == [2] and paused["pauses"][0]["excess_ms"] > 1000
    assert paused["waves"]["2"]["first"]["max_ttft_ms"] > 1500 > paused["waves"]["2"]["repeat"]["max_ttft_ms"]
    assert paused["jit_monitor_active"] is True and paused["jit_after_boot"] == []
    compared, found = fb.problems([paused], SIZES)
    assert compared == 6 and len(found) == 1 and "its first batch of 2 paused" in found[0], found

    clean = _probe(tmp_path, monkeypatch, zoo_pair, "ours_mrv2", Misbehave(only_variant="ours_mrv2"))
    assert clean["pauses"] == [] and fb.problems([clean], SIZES) == (6, [])
    assert one_server.runner_name(clean["facts"]) == "v1"  # the fake answers as a V1 server unless it runs mrv2


def test_the_report_is_written_with_the_verdict(tmp_path, monkeypatch, zoo_pair):
    result = _probe(tmp_path, monkeypatch, zoo_pair, "ours_mrv2",
                    Misbehave(first_batch_pause_s={4: 1.5}, only_variant="ours_mrv2"))
    report = fb.write_report(tmp_path, zoo_pair, _args(), [result])
    saved = json.loads((tmp_path / "first_batches.json").read_text())
    assert saved["compared_waves"] == report["compared_waves"] == 6
    assert len(saved["problems"]) == 1 and "first batch of 4 paused" in saved["problems"][0]
