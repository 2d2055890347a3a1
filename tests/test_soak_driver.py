"""The whole soak on CPU: ``driver.run_soak`` with in-process fake servers in place of ``vllm serve`` (same ports,
endpoints and report), once on well-behaved servers (it passes, every condition counted) and once on servers that
misbehave in every way at once (each misbehaviour shows up as its own failure); plus the CLI's argument checks."""

from __future__ import annotations

import json

import pytest

from portable_spec_harness.soak import __main__ as cli
from portable_spec_harness.soak import budget, conditions, driver, workload

from soak_fake_server import DeadServer, Misbehave, fake_build, fake_launcher, fake_oracle

FAST = driver.Deadlines(boot_s=10, load_wall_s=30, request_s=4, drain_s=2, total_s=120, metrics_every_s=0.02)


def soak(tmp_path, misbehave: Misbehave | None = None, sync: tuple[str, ...] = ()) -> dict:
    return driver.run_soak(tmp_path, ["llama_ctx_eagle"], list(sync), 40, 0, build=fake_build, oracle=fake_oracle,
                           runner=lambda pair: "v1", launch=fake_launcher(misbehave), deadlines=FAST,
                           structured=(True, "test"), say=lambda line: None)


def test_a_soak_on_well_behaved_servers_passes_with_every_condition_counted(tmp_path):
    result = soak(tmp_path, sync=("llama_ctx_eagle",))
    assert result["status"] == "passed", result["failures"]
    servers = result["pairs"]["llama_ctx_eagle"]["servers"]
    assert sorted(servers) == ["eager_drafter", "eager_drafter_sync", "full_drafter", "full_drafter_sync", "nospec"]
    for name in ("full_drafter", "full_drafter_sync"):
        row = servers[name]
        assert row["mismatches"] == 0 and row["errors"] == 0
        assert all(isinstance(v, int) and v > 0 for v in row["conditions"].values())
        assert set(conditions.CONDITIONS) == set(row["conditions"])
        assert row["compared"]["greedy_vs_nospec"]["tokens"] > 0 and row["compared"]["seeded_solo_vs_eager"]["tokens"] > 0
        assert row["latency_ms"]["ttft"]["p50"] is not None and row["latency_ms"]["tpot"]["p99"] is not None
    assert not servers["full_drafter_sync"]["async_scheduling"]
    written = json.loads((tmp_path / "soak.json").read_text())
    assert written["status"] == "passed" and written["budget"]["num_gpu_blocks"] > 0
    assert "llama_ctx_eagle/full_drafter" in (tmp_path / "soak_table.txt").read_text()
    requests = json.loads((tmp_path / "soak_requests_llama_ctx_eagle.json").read_text())
    solo = [r for r in requests["nospec"] if r["rid"].endswith(workload.SOLO_SUFFIX)]
    pressure = [r for r in requests["nospec"] if r["rid"].endswith("-pressure")]
    assert len(pressure) == budget.MAX_NUM_SEQS and not any(r["error_kind"] for r in pressure)
    # the load, the pressure wave, then the seeded requests alone
    assert len(requests["nospec"]) == 40 + len(pressure) + len(solo) and solo
    for name in ("full_drafter", "full_drafter_sync"):
        assert servers[name]["pressure_wave"]["completed"] == budget.MAX_NUM_SEQS
        drafter = servers[name]["drafter"]  # the load's replays, read before the wave
        assert 0 < drafter["first_pass_replays_in_load"] < drafter["first_pass_replays"]
        assert servers[name]["compared"]["greedy_vs_nospec"]["requests"] >= budget.MAX_NUM_SEQS


def test_every_misbehaviour_of_our_server_fails_the_soak_on_its_own_check(tmp_path):
    bad = Misbehave(wrong_token="-greedy", status_500="-stop_string", stream_error="-length_window",
                    hang="-max_model_len", missing_metric="vllm:prefix_cache_hits", no_preemption=True, leak=True)
    result = soak(tmp_path, bad)
    assert result["status"] == "failed"
    ours = result["pairs"]["llama_ctx_eagle"]["servers"]["full_drafter"]
    assert ours["mismatches"] > 0 and "greedy_equals_nospec" in ours["failures"]
    assert {"http_5xx", "stream_error", "deadline"} <= set(ours["error_kinds"])
    assert "no_request_errors" in ours["failures"]
    assert ours["conditions"]["preempted"] == 0 and "condition_preempted" in ours["failures"]
    assert ours["conditions"]["prefix_cache_hits"] is None and "metrics_scraped" in ours["failures"]
    assert "drained" in ours["failures"]
    for reference in ("nospec", "eager_drafter"):  # only ours misbehaved
        assert result["pairs"]["llama_ctx_eagle"]["servers"][reference]["failures"] == []


def test_a_server_that_never_boots_is_reported_not_hung(tmp_path):
    launch = fake_launcher()
    result = driver.run_soak(tmp_path, ["llama_ctx_eagle"], [], 24, 0, build=fake_build, oracle=fake_oracle,
                             runner=lambda pair: "v1", deadlines=FAST, structured=(True, "test"),
                             say=lambda line: None,
                             launch=lambda spec, port, log: (DeadServer() if spec.variant == "nospec"
                                                             else launch(spec, port, log)))
    servers = result["pairs"]["llama_ctx_eagle"]["servers"]
    assert result["status"] == "failed" and "booted" in servers["nospec"]["failures"]
    assert "exited with 1" in servers["nospec"]["boot"]["error"]
    assert "greedy_equals_nospec" in servers["full_drafter"]["failures"]  # nothing to compare with


def test_a_soak_at_tp2_starts_every_server_at_tp2_and_reports_it(tmp_path):
    from portable_spec_harness.parallel import Parallel

    started = []

    def launch(spec, port, log):
        started.append(spec)
        return fake_launcher()(spec, port, log)

    parallel = Parallel(2, True, True)
    result = driver.run_soak(tmp_path, ["llama_ctx_eagle"], [], 40, 0, build=fake_build, oracle=fake_oracle,
                             runner=lambda pair: "v1", launch=launch, deadlines=FAST, structured=(True, "test"),
                             say=lambda line: None, parallel=parallel)
    assert result["status"] == "passed", result["failures"]
    assert sorted(s.name for s in started) == ["eager_drafter", "full_drafter", "nospec"]
    assert all(s.parallel == parallel for s in started)
    assert result["tensor_parallel"]["tensor_parallel_size"] == 2
    assert "TP=2" in (tmp_path / "soak_table.txt").read_text()
    row = result["pairs"]["llama_ctx_eagle"]["servers"]["full_drafter"]
    assert row["checks"]["tensor_parallel_as_asked"] and row["drafter"]["tensor_parallel_size"] == 2
    assert row["checks"]["facts_from_every_rank"] and row["checks"]["graphs_replayed_on_every_rank"]


def test_the_cli_refuses_unknown_pairs_and_tiny_loads(capsys):
    for argv in (["out", "--pairs", "nope"], ["out", "--sync-pairs", "llama_ctx_eagle3", "--pairs",
                                                                      "llama_ctx_eagle"], ["out", "--requests", "5"],
                 ["out", "--tp", "0"], ["out", "--disable-custom-all-reduce"]):
        with pytest.raises(SystemExit) as exc:
            cli.main(argv)
        assert exc.value.code == 2
