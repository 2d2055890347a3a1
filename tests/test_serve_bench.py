"""The serving benchmark (``harness/serve_bench``) on CPU: vLLM's own ``vllm bench serve`` client against the soak's
in-process fake servers (real client, real saved JSON, real medians), the interleaved order, the statistics failing
on missing or empty data, the phase-clock probe on vLLM's real classes, the memory placement, the pair folders, the
summary over several runs, and the CLI's one-line errors. Benchmarks are not tests: nothing here asserts a speed."""

from __future__ import annotations

import builtins
import json
import math
import os
import subprocess
import sys
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from portable_spec.errors import PortableSpecError
from portable_spec_harness.serve_bench import (client, combine, driver, kept_servers, memory, pairs, plan, worker_extension,
                                                 report, servers, stats)
from portable_spec_harness import plotting, vllm_serve
from portable_spec_harness.serve_bench.__main__ import earlier_sizing
from portable_spec_harness.serve_bench.driver import Hooks, Settings

from soak_fake_server import (COMPILE_LINE, CPU_TEST_HOST, MONITOR_LINE, DeadServer, FakeVllm, Misbehave, fake_launcher,
                              ticking_clock)
from shared_zoo import shared_zoo

ROOT = Path(__file__).resolve().parents[1]
LLAMA_31_8B = {"architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "intermediate_size": 14336,
               "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
               "vocab_size": 128256, "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
FAST = dict(concurrency=(1, 2), rounds=2, input_lens=(16,), output_len=12, prompts_per_slot=1, min_run_s=0,
            boot_s=20, run_timeout_s=60, clock_prompts=1, profile_output_len=8)
C1, C2 = "in16/greedy/c1", "in16/greedy/c2"
"""FAST's cells: one input length, greedy, concurrency 1 and 2."""


@pytest.fixture(scope="module")
def zoo_pair(tmp_path_factory) -> pairs.BenchPair:
    return pairs.resolve("llama_eagle", None, None, shared_zoo(tmp_path_factory))


def cpu_hooks(launch=None) -> Hooks:
    return Hooks(launch=launch or fake_launcher(), device=lambda: {"name": "cpu-test", "free_bytes": None},
                 host=lambda: CPU_TEST_HOST, say=lambda line: None)


@pytest.fixture(scope="module")
def clean_run(zoo_pair, tmp_path_factory) -> tuple[dict, Path]:
    out = tmp_path_factory.mktemp("serve_bench")
    return driver.run_serve_bench(zoo_pair, Settings(**FAST), out, cpu_hooks()), out


# ------------------------------------------------------------------------------------------------ the whole run
def test_a_clean_run_reports_the_clients_numbers_medians_and_ratios(clean_run):
    result, out = clean_run
    assert result["status"] == "complete", result["problems"]
    assert result["placement"]["mode"] == "together"
    for variant in ("upstream_v1", "ours", "mrv2"):
        for c in (C1, C2):
            cell = result["cells"][variant][c]
            assert cell["runs"] == 2 and cell["failed"] == 0
            assert cell["output_throughput"]["median"] > 0 and len(cell["output_throughput"]["all"]) == 2
            assert cell["spec_decode_acceptance_length"]["median"] > 1
    for key in ("ours_over_upstream_v1", "ours_over_mrv2"):
        assert set(result[key]) == {C1, C2}
        assert all(r["output_tok_s"] > 0 and r["median_tpot_ms"] > 0 for r in result[key].values())
        assert all(r["paired_output_tok_s"]["passes"] == 2 for r in result[key].values())
    assert (out / "serve_bench.txt").read_text().startswith("serve bench: llama_eagle")
    assert (out / "serve_bench.png").stat().st_size > 10_000
    written = json.loads((out / "serve_bench.json").read_text())
    assert written["ours_over_upstream_v1"] == result["ours_over_upstream_v1"]
    assert "vllm bench serve --backend openai" in written["client_example"]


def test_every_timed_number_is_the_one_vllm_bench_serve_saved(clean_run):
    result, out = clean_run
    assert len(result["runs"]) == 2 * 2 * 3
    for run in result["runs"]:
        saved = json.loads((out / run["result_file"]).read_text())
        assert saved["backend"] == "openai" and saved["max_concurrency"] == run["concurrency"]
        assert saved["num_prompts"] == run["num_prompts"] == run["concurrency"]
        assert saved["variant"] == run["variant"] and saved["round"] == str(run["round"])  # --metadata
        for key in ("output_throughput", "median_tpot_ms", "p99_itl_ms", "spec_decode_acceptance_length"):
            assert run["result"][key] == saved[key]
        assert "Serving Benchmark Result" in (out / run["client_output"]).read_text()
    cell = result["cells"]["ours"][C2]["median_tpot_ms"]
    ours = [r["result"]["median_tpot_ms"] for r in result["runs"] if r["variant"] == "ours" and r["concurrency"] == 2]
    assert cell["all"] == ours and cell["median"] == pytest.approx(sum(ours) / 2, abs=1e-4)


def test_the_runs_were_interleaved_as_planned(clean_run):
    result, _ = clean_run
    order = [(r["round"], r["input_len"], r["sampling"], r["concurrency"], r["variant"]) for r in result["order"]]
    assert order == [(r.round, r.cell.input_len, r.cell.sampling, r.cell.concurrency, r.variant)
                     for r in plan.interleaved(["upstream_v1", "ours", "mrv2"], plan.cells([16], ["greedy"], [1, 2]),
                                               2)]
    assert order[0][-1] == "upstream_v1" and order[6][-1] == "ours"  # round 1 starts one variant later


def test_the_phase_clock_and_profile_come_back_per_variant_with_their_split(clean_run):
    result, _ = clean_run
    for variant in ("upstream_v1", "ours", "mrv2"):
        reading = result["phase_clock"][variant]
        assert reading["clock"]["steps"] == 2 and reading["clock"]["step_wall_ms"] == pytest.approx(7.0)
        assert reading["profile"]["device_ms"] > 0
        split = reading["split"]
        assert split["device_busy_share"] == pytest.approx(reading["profile"]["device_ms"] / 7.0, abs=1e-4)
        assert split["host_only_ms"] == pytest.approx(max(7.0 - reading["profile"]["device_ms"], 0), abs=1e-4)
    assert "phase clock at concurrency 1" in report.table(result)


def events_of_a_run(zoo_pair, tmp_path, placement: str) -> list[tuple[str, str]]:
    """(variant, what) in the order the servers saw them: "timed" per timed client run, and every probe call."""
    events: list[tuple[str, str]] = []
    launch = fake_launcher()

    def launch_seen(server, port, log):
        handle = launch(server, port, log)
        original = handle._rpc

        def rpc(method):
            events.append((server.variant, method))
            return original(method)
        handle._rpc = rpc
        return handle

    def client_seen(argv, log, timeout_s):
        if log.name.startswith("timed_"):
            events.append((next(v for v in ("upstream_v1", "ours") if f"_{v}_" in log.name), "timed"))
        return client.run_client(argv, log, timeout_s)
    hooks = Hooks(launch=launch_seen, client=client_seen, device=lambda: {"name": "cpu-test", "free_bytes": None},
                  host=lambda: CPU_TEST_HOST, say=lambda line: None)
    settings = Settings(**{**FAST, "variants": ("upstream_v1", "ours"), "concurrency": (1,), "placement": placement})
    result = driver.run_serve_bench(zoo_pair, settings, tmp_path, hooks)
    assert result["status"] == "complete", result["problems"]
    return events


@pytest.mark.parametrize("placement", ["together", "in_turn"])
def test_the_phase_clock_runs_after_each_servers_timed_runs(zoo_pair, tmp_path, placement):
    """The profiler pass can leave a server slower per launch: no timed run of a server may follow its clock."""
    events = events_of_a_run(zoo_pair, tmp_path, placement)
    for variant in ("upstream_v1", "ours"):
        mine = [what for v, what in events if v == variant]
        timed = [i for i, what in enumerate(mine) if what == "timed"]
        clocks = [i for i, what in enumerate(mine) if what.startswith("portable_spec_bench_")]
        assert len(timed) == 2 and len(clocks) == 4, mine  # 2 rounds x c=1; clock and profile, each start and stop
        if placement == "together":
            assert max(timed) < min(clocks), mine
        else:  # one boot per round: the clock follows the first round's timed run on that boot
            assert timed[0] < min(clocks) < max(clocks) < timed[1], mine


def preload_events(zoo_pair, tmp_path, placement: str, fails: bool = False) -> tuple[list[str], dict]:
    """What a call did in order: "launch <variant>", "preload start" / "preload end" and "client <run file>"."""
    events: list[str] = []
    launch = fake_launcher()

    def launch_seen(server, port, log):
        events.append(f"launch {server.variant}")
        return launch(server, port, log)

    def preload():
        events.append("preload start")
        time.sleep(0.5)  # slower than the fake servers' boot: the first client run must still wait for it
        events.append("preload end")
        if fails:
            raise ImportError("no module named vllm.benchmarks")

    def client_seen(argv, log, timeout_s):
        events.append(f"client {log.stem}")
        return client.run_client(argv, log, timeout_s)
    hooks = Hooks(launch=launch_seen, client=client_seen, device=lambda: {"name": "cpu-test", "free_bytes": None},
                  host=lambda: CPU_TEST_HOST, preload=preload, say=lambda line: None)
    settings = Settings(**{**FAST, "variants": ("upstream_v1", "ours"), "concurrency": (1,), "placement": placement,
                           "phase_clock": False})
    result = driver.run_serve_bench(zoo_pair, settings, tmp_path, hooks)
    assert result["status"] == "complete", result["problems"]
    return events, result


@pytest.mark.parametrize("placement", ["together", "in_turn"])
def test_the_client_is_imported_once_while_the_servers_boot_and_before_the_first_client_run(zoo_pair, tmp_path,
                                                                                           placement):
    events, result = preload_events(zoo_pair, tmp_path, placement)
    assert events.count("preload start") == events.count("preload end") == 1, events
    first_launch = events.index(next(e for e in events if e.startswith("launch ")))
    first_client = events.index(next(e for e in events if e.startswith("client ")))
    assert first_launch < events.index("preload start") < events.index("preload end") < first_client, events
    # in turn, two rounds: round 0's last server is carried into round 1 (the rotation starts it there): 3 boots
    assert len([e for e in events if e.startswith("launch ")]) == (2 if placement == "together" else 3), events
    assert result["phases_s"]["client_preload_s"] >= 0.5 and "client_preload_error" not in result


def test_the_default_preload_imports_the_modules_vllm_bench_serve_runs_from():
    """In a fresh interpreter: after ``bench_client.preload`` vLLM's client and its parser are loaded, so the first
    run imports nothing (a vLLM that moved them fails here before a GPU call pays for it)."""
    probe = ("import sys; from portable_spec_harness.vllm_door import bench_client; bench_client.preload(); "
             "print(sorted(m for m in ('vllm.benchmarks.serve', 'vllm.utils.argparse_utils') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "['vllm.benchmarks.serve', 'vllm.utils.argparse_utils']"


def test_a_client_preload_that_fails_is_recorded_and_the_runs_go_on(zoo_pair, tmp_path):
    events, result = preload_events(zoo_pair, tmp_path, "together", fails=True)
    assert result["client_preload_error"] == "ImportError: no module named vllm.benchmarks"
    assert any(e.startswith("client timed_") for e in events)


@pytest.mark.filterwarnings("ignore:All requests failed:UserWarning")  # vLLM's client, on the server this test kills
def test_a_server_that_dies_leaves_its_cells_and_ratios_without_numbers_and_the_run_incomplete(zoo_pair, tmp_path):
    launch = fake_launcher()

    def dying(server, port, log):
        handle = launch(server, port, log)
        if server.variant == "ours":
            original = handle._rpc

            def rpc(method):  # answers the facts once (ready), then goes away
                answer = original(method)
                handle.stop()
                return answer
            handle._rpc = rpc
        return handle
    result = driver.run_serve_bench(zoo_pair, Settings(**{**FAST, "rounds": 1}), tmp_path, cpu_hooks(dying))
    assert result["status"] == "incomplete"
    assert all("error" in cell for cell in result["cells"]["ours"].values())
    assert all("error" in r for r in result["ours_over_upstream_v1"].values())
    assert all("error" not in cell for cell in result["cells"]["upstream_v1"].values())
    assert any(p.startswith(f"ours_over_mrv2 {C1}") for p in result["problems"])


def test_servers_that_do_not_fit_together_fall_back_to_one_at_a_time(zoo_pair, tmp_path):
    booted = []
    launch = fake_launcher()

    def tight(server, port, log):
        booted.append(server.variant)
        if len(booted) == 2:  # ours, the second server of the together boot, finds no memory left
            log.write_text("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
            return DeadServer()
        return launch(server, port, log)
    settings = Settings(**{**FAST, "rounds": 1, "concurrency": (1,), "variants": ("upstream_v1", "ours", "mrv2")})
    result = driver.run_serve_bench(zoo_pair, settings, tmp_path, cpu_hooks(tight))
    assert result["placement"]["mode"] == "in_turn" and result["placement"]["fell_back"]
    assert booted == ["upstream_v1", "ours", "mrv2", "upstream_v1", "ours", "mrv2"]
    assert result["status"] == "incomplete"  # the failed together boot is kept as a problem
    # ... and is the only one: a server that never got ready is not judged on its JIT monitor (vLLM arms it after
    # the warm-up, which that boot never reached); ours' boot in turn is, and armed it
    assert len(result["problems"]) == 1 and result["problems"][0].startswith("together: ours did not fit")
    assert result["variants"]["ours"]["jit_monitor_active"] is True
    assert all(result["cells"][v][C1]["runs"] == 1 for v in ("upstream_v1", "ours", "mrv2"))


def test_a_budget_stops_rounds_and_says_so(zoo_pair, tmp_path):
    settings = Settings(**{**FAST, "rounds": 3, "budget_s": 1.0, "concurrency": (1,), "phase_clock": False})
    result = driver.run_serve_bench(zoo_pair, settings, tmp_path, cpu_hooks())
    assert result["rounds_done"] < 3 and result["status"] == "incomplete"
    assert any("rounds ran" in p for p in result["problems"])


# The budget starts no timed round it cannot finish: the first round is predicted (an earlier call's timed runs of
# the same prompts, else the warm waves), not taken as free; a device call killed at its limit mid-round loses it.
def test_the_first_round_is_predicted_from_the_warm_waves(clean_run):
    result, _ = clean_run
    assert result["status"] == "complete" and result["rounds_done"] == 2, result["problems"]
    expected, compared = 0.0, 0
    for key, sizing in result["sizing"].items():
        cell = next(c for c in plan.workload_cells(result["workload"]) if c.key == key)
        for variant in result["variants"]:
            warm = [r["duration_s"] for r in result["warm_runs"] if r["variant"] == variant
                    and plan.Cell(r["input_len"], r["sampling"], r["concurrency"]) == cell]
            expected += warm[-1] * sizing["num_prompts"] / cell.concurrency * driver.WARM_SLACK + driver.RUN_OVERHEAD_S
            compared += 1
    assert compared == 2 * 3
    assert result["phases_s"]["round_estimate_s"] == pytest.approx(expected, abs=0.051)


def test_a_first_round_that_cannot_fit_does_not_start(zoo_pair, clean_run, tmp_path):
    """An earlier call's runs say a round takes minutes; the budget has one: no timed run starts (before, the first
    round always started, as if it cost nothing)."""
    first, out = clean_run
    settings = earlier_sizing(Settings(**{**FAST, "rounds": 1, "first_round": 2,
                                          "budget_s": driver.ROUND_RESERVE_S + 60.0, "phase_clock": False}), zoo_pair, out)
    slow = {key: {v: 60.0 for v in by} for key, by in settings.earlier_durations.items()}
    # the boot the earlier call took (fake servers: 0.0 s, or a tenth on a loaded host) left out, so the preflight,
    # which would refuse this call before booting, stays out of the way of the check after the warm-up this tests
    slow_settings = replace(settings, earlier_durations=slow, earlier_boot_s=None)
    result = driver.run_serve_bench(zoo_pair, slow_settings, tmp_path, cpu_hooks())
    assert result["runs"] == [] and result["rounds_done"] == 0
    assert result["phases_s"]["round_estimate_s"] == pytest.approx(6 * (60.0 + driver.RUN_OVERHEAD_S), abs=0.051)
    assert result["stopped_because"] == f"--budget-s {driver.ROUND_RESERVE_S + 60.0:g} would be passed"


def test_a_call_that_keeps_its_servers_keeps_back_less_of_its_budget(zoo_pair, clean_run, tmp_path):
    """A call that leaves its servers running has none to stop after its last round: it keeps back
    ``KEPT_ROUND_RESERVE_S`` of its budget, not ``ROUND_RESERVE_S``, so a round that fits in the difference runs.
    The same call that stops its servers starts none."""
    first, out = clean_run
    run_s = 6.0
    round_s = 6 * (run_s + driver.RUN_OVERHEAD_S)  # FAST's two cells x three variants, from the earlier call's runs
    budget_s = driver.KEPT_ROUND_RESERVE_S + round_s + 25.0  # 25 s for the boot and warm-up of fake servers
    assert budget_s - driver.ROUND_RESERVE_S < round_s
    settings = earlier_sizing(Settings(**{**FAST, "rounds": 1, "first_round": 2, "budget_s": budget_s,
                                          "phase_clock": False}), zoo_pair, out)
    settings = replace(settings, earlier_boot_s=None,
                       earlier_durations={k: {v: run_s for v in by} for k, by in settings.earlier_durations.items()})
    stopped = driver.run_serve_bench(zoo_pair, settings, tmp_path / "stops", cpu_hooks())
    assert stopped["rounds_done"] == 0 and stopped["stopped_because"] == f"--budget-s {budget_s:g} would be passed"
    launched, hooks = adopting_hooks()
    kept = driver.run_serve_bench(zoo_pair, replace(settings, keep_servers=str(tmp_path / "kept.json")),
                                  tmp_path / "keeps", hooks)
    assert len(launched) == 3 and all(h.alive() for *_, h in launched)  # kept, as the reserve assumed
    for *_, handle in launched:
        handle.stop()
    assert kept["rounds_done"] == 1 and kept["status"] == "complete", kept["problems"]
    assert kept["phases_s"]["round_estimate_s"] == pytest.approx(round_s, abs=0.051)


def test_a_round_sized_from_warm_waves_only_is_predicted_from_the_faster_wave(zoo_pair, clean_run, tmp_path):
    """An earlier call that timed nothing (a sizing call: its report holds warm waves only): each cell's run is
    predicted from the faster of this call's last warm wave and the wave the earlier call sized the cell from, so a
    first wave slowed by one-time compiles at a fresh server's first requests does not refuse a round that fits."""
    first, out = clean_run
    settings = earlier_sizing(Settings(**{**FAST, "rounds": 1, "first_round": 2, "phase_clock": False}), zoo_pair, out)
    faster = {key: {**entry, "warm_s": 0.001} for key, entry in settings.earlier_sizing.items()}
    settings = replace(settings, earlier_durations={}, earlier_boot_s=None, earlier_sizing=faster)
    result = driver.run_serve_bench(zoo_pair, settings, tmp_path, cpu_hooks())
    assert result["status"] == "complete", result["problems"]
    expected = from_last_waves = 0.0
    compared = 0
    for key, entry in faster.items():
        cell = next(c for c in plan.workload_cells(result["workload"]) if c.key == key)
        for variant in result["variants"]:
            warm = [r["duration_s"] for r in result["warm_runs"] if r["variant"] == variant
                    and plan.cell_of(r, result["workload"]) == cell]
            assert warm and warm[-1] > 0.001, (key, variant, warm)
            waves = entry["num_prompts"] / cell.concurrency
            expected += 0.001 * waves * driver.WARM_SLACK + driver.RUN_OVERHEAD_S
            from_last_waves += warm[-1] * waves * driver.WARM_SLACK + driver.RUN_OVERHEAD_S
            compared += 1
    assert compared == 2 * 3
    assert result["phases_s"]["round_estimate_s"] == pytest.approx(expected, abs=0.051)
    assert result["phases_s"]["round_estimate_s"] < from_last_waves


def test_sizing_from_carries_the_earlier_calls_run_times(zoo_pair, clean_run):
    first, out = clean_run
    settings = earlier_sizing(Settings(**{**FAST, "rounds": 1, "first_round": 2}), zoo_pair, out)
    compared = 0
    for key, by_variant in settings.earlier_durations.items():
        for variant, seconds in by_variant.items():
            runs = sorted(r["duration_s"] for r in first["runs"] if r["variant"] == variant
                          and plan.cell_of(r, first["workload"]).key == key)
            assert len(runs) == 2 and seconds == pytest.approx(sum(runs) / 2)
            compared += 1
    assert compared == 2 * 3


# A call whose budget cannot hold its servers' boot and one round is refused before it boots anything: such a call
# booted, warmed, and then started no round (minutes of device time for an empty report).
EARLIER_BOOT_S, EARLIER_RUN_S = 100.0, 10.0
"""What ``slow_report`` says the earlier call took: its together boot and each timed run. One round of FAST's two
cells x three variants then takes 6 x (10 + ``RUN_OVERHEAD_S``) = 84 s, and with the boot and ``ROUND_RESERVE_S``
(no phase clock) a call needs 229 s."""
NEEDS_S = 229


def slow_report(clean_run, folder: Path, **change: Any) -> Path:
    """``clean_run``'s report with a real server's boot and timed-run seconds (and ``change``'s top-level keys)."""
    first, _ = clean_run
    assert first["placement"]["mode"] == "together"
    earlier = json.loads(json.dumps(first))
    earlier["phases_s"]["boot_s"] = EARLIER_BOOT_S
    for run in earlier["runs"]:
        run["duration_s"] = EARLIER_RUN_S
    earlier.update(change)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "serve_bench.json").write_text(json.dumps(earlier))
    return folder / "serve_bench.json"


def recording_launcher() -> tuple[list[tuple[str, int, Any]], Any]:
    """A fake launcher that lists (variant, port, handle) per server it starts."""
    launched: list[tuple[str, int, Any]] = []
    fake = fake_launcher()

    def launch(spec, port, log):
        launched.append((spec.variant, port, fake(spec, port, log)))
        return launched[-1][2]
    return launched, launch


def adopting_hooks() -> tuple[list[tuple[str, int, Any]], Hooks]:
    """CPU hooks whose launcher lists the servers it starts (``recording_launcher``) and whose ``adopt`` finds a kept
    one among them by port while it is alive: a chain of calls sharing kept servers."""
    launched, launch = recording_launcher()

    def adopt(entry):
        return next((h for _, port, h in launched if port == entry["port"] and h.alive()), None)

    return launched, replace(cpu_hooks(launch), adopt=adopt)


def budget_argv(tmp_path_factory, earlier: Path, out: Path, budget_s: float) -> list[str]:
    """The CLI for one round of FAST's cells after the earlier call (the settings its sizing needs)."""
    return ["--pair", "llama_eagle", "--work-dir", str(shared_zoo(tmp_path_factory)), "--out", str(out),
            "--concurrency", "1,2", "--rounds", "1", "--first-round", "2", "--input-len", "16", "--output-len", "12",
            "--prompts-per-slot", "1", "--min-run-s", "0", "--run-timeout", "60", "--boot-timeout", "20",
            "--no-phase-clock", "--sizing-from", str(earlier), "--budget-s", f"{budget_s:g}"]


@pytest.mark.parametrize("as_json", [False, True])
def test_a_budget_that_cannot_hold_the_boot_and_one_round_is_refused_before_any_boot(clean_run, tmp_path,
                                                                                    tmp_path_factory, monkeypatch,
                                                                                    capsys, as_json):
    from portable_spec_harness.serve_bench import __main__ as cli

    launched, launch = recording_launcher()
    monkeypatch.setattr(cli, "HOOKS", lambda say: cpu_hooks(launch))
    earlier, out = slow_report(clean_run, tmp_path / "earlier"), tmp_path / "o"
    rc = cli.main(budget_argv(tmp_path_factory, earlier, out, NEEDS_S - 1) + (["--json"] if as_json else []))
    captured = capsys.readouterr()
    assert rc == 2 and launched == []
    if as_json:
        (line,) = captured.out.strip().splitlines()
        assert json.loads(line)["exit"] == 2
        line = json.loads(line)["error"]
    else:
        (line,) = captured.err.strip().splitlines()
        assert line.startswith("portable-spec: error: ") and captured.out == ""
    assert f"--budget-s {NEEDS_S - 1} cannot hold one round" in line and f"booted in {EARLIER_BOOT_S:.1f} s" in line
    assert f"timed runs in {6 * (EARLIER_RUN_S + driver.RUN_OVERHEAD_S):.1f} s" in line
    assert f"(SERVE_BENCH_BUDGET) to {NEEDS_S} or more" in line and "--reuse-servers" in line
    assert not (out / "serve_bench.json").exists() and not (out / "serve_bench.partial.json").exists()


def test_the_same_call_with_a_budget_that_holds_a_round_boots_and_runs_it(clean_run, tmp_path, tmp_path_factory,
                                                                          monkeypatch, capsys):
    from portable_spec_harness.serve_bench import __main__ as cli

    launched, launch = recording_launcher()
    monkeypatch.setattr(cli, "HOOKS", lambda say: cpu_hooks(launch))
    earlier = slow_report(clean_run, tmp_path / "earlier")
    rc = cli.main(budget_argv(tmp_path_factory, earlier, tmp_path / "o", NEEDS_S) + ["--json"])
    headline = json.loads(capsys.readouterr().out)
    assert rc == 0 and headline["status"] == "complete" and headline["rounds_done"] == 1, headline["problems"]
    assert sorted(v for v, *_ in launched) == ["mrv2", "ours", "upstream_v1"]
    assert headline["settings"]["earlier_boot_s"] == EARLIER_BOOT_S


def test_a_call_whose_every_server_is_a_kept_one_is_not_refused(zoo_pair, clean_run, tmp_path):
    """No boot, so the earlier call's boot does not count; one kept server that differs boots again, and counts."""
    launched, hooks = adopting_hooks()
    registry = tmp_path / "kept.json"
    one = driver.run_serve_bench(zoo_pair, Settings(**{**FAST, "rounds": 1}, phase_clock=False,
                                                    keep_servers=str(registry)), tmp_path / "call1", hooks)
    assert one["status"] == "complete" and len(launched) == 3, one["problems"]
    settings = earlier_sizing(Settings(**{**FAST, "rounds": 1}, first_round=1, phase_clock=False,
                                       budget_s=NEEDS_S - 1.0), zoo_pair, slow_report(clean_run, tmp_path / "earlier"))
    kept = json.loads(registry.read_text())
    kept["servers"]["mrv2"]["fingerprint"]["serve_args"].append("--enforce-eager")
    (tmp_path / "stale.json").write_text(json.dumps(kept))
    with pytest.raises(PortableSpecError, match=r"raise --budget-s \(SERVE_BENCH_BUDGET\)"):
        driver.run_serve_bench(zoo_pair, replace(settings, reuse_servers=str(tmp_path / "stale.json")),
                               tmp_path / "refused", hooks)
    assert len(launched) == 3 and all(h.alive() for *_, h in launched)  # nothing booted, nothing stopped
    two = driver.run_serve_bench(zoo_pair, replace(settings, reuse_servers=str(registry)), tmp_path / "call2", hooks)
    assert two["status"] == "complete" and two["rounds_done"] == 1, two["problems"]
    assert len(launched) == 3 and not any(h.alive() for *_, h in launched)


def test_an_earlier_report_that_cannot_tell_the_boot_or_a_cells_runs_is_not_refused(zoo_pair, clean_run, tmp_path):
    """No boot seconds (none recorded, every server a kept one, another placement), or a cell the earlier call did
    not run: the call goes on, and the budget stops rounds as before. The preflight sized nothing: the new cell's
    prompts come from its own warm runs."""
    base = Settings(**{**FAST, "rounds": 1}, first_round=2, phase_clock=False, budget_s=NEEDS_S - 1.0)
    first, _ = clean_run
    assert earlier_sizing(base, zoo_pair, slow_report(clean_run, tmp_path / "slow")).earlier_boot_s == EARLIER_BOOT_S
    for name, change in (("none", {"phases_s": {}}), ("kept", {"phases_s": {"boot_s": 0.0}}),
                         ("in_turn", {"placement": {**first["placement"], "mode": "in_turn"}})):
        settings = earlier_sizing(base, zoo_pair, slow_report(clean_run, tmp_path / name, **change))
        assert settings.earlier_boot_s is None and settings.earlier_durations, name
    launched, launch = recording_launcher()
    result = driver.run_serve_bench(zoo_pair, settings, tmp_path / "no_boot", cpu_hooks(launch))
    assert result["status"] == "complete" and result["rounds_done"] == 1 and len(launched) == 3, result["problems"]
    settings = earlier_sizing(replace(base, concurrency=(1, 2, 4)), zoo_pair, tmp_path / "slow")
    assert settings.earlier_boot_s == EARLIER_BOOT_S and "in16/greedy/c4" not in settings.earlier_durations
    result = driver.run_serve_bench(zoo_pair, settings, tmp_path / "new_cell", cpu_hooks(launch))
    assert result["status"] == "complete" and result["rounds_done"] == 1 and len(launched) == 6, result["problems"]
    assert result["sizing"]["in16/greedy/c4"]["warm_runs"] == 3


def test_a_call_sized_from_one_it_cannot_pool_with_says_so_before_booting(zoo_pair, clean_run, tmp_path):
    """Rounds meant to join an earlier call's must run its workload: a call sized from one of other input lengths is
    told, before any boot, that ``combine`` will not pool the two (and why), and the report keeps it; the same
    workload says nothing and pools."""
    first, out = clean_run
    said: list[str] = []
    hooks = replace(cpu_hooks(), say=said.append)
    base = Settings(**{**FAST, "rounds": 1}, first_round=2, phase_clock=False)
    other = earlier_sizing(replace(base, input_lens=(16, 24)), zoo_pair, out)
    apart = driver.run_serve_bench(zoo_pair, other, tmp_path / "apart", hooks)
    assert apart["sizing_from_pools"] == {"pools": False, "differs": ["input_lens", "max_model_len"]}
    warned = [line for line in said if "will not pool" in line]
    assert warned == [f"[serve-bench] warning: --sizing-from {out} ran another workload (input_lens, max_model_len): "
                      "combine will not pool this call with it"]
    assert said.index(warned[0]) < min(i for i, line in enumerate(said) if "boot" in line)
    with pytest.raises(PortableSpecError, match=r"another workload \(input_lens, max_model_len\)"):
        combine.combine([first, apart], [str(out), str(tmp_path / "apart")])
    said.clear()
    same = driver.run_serve_bench(zoo_pair, earlier_sizing(base, zoo_pair, out), tmp_path / "same", hooks)
    assert same["sizing_from_pools"] == {"pools": True, "differs": []}
    assert not any("will not pool" in line for line in said)
    assert combine.combine([first, same], [str(out), str(tmp_path / "same")])["pairs"]


def test_sigterm_stops_the_servers_and_still_writes_the_report(zoo_pair, tmp_path):
    import os
    import signal

    launched, runs = [], []
    launch = fake_launcher()

    def keep(server, port, log):
        launched.append(launch(server, port, log))
        return launched[-1]

    def client_then_term(argv, log, timeout_s):
        runs.append(argv)
        if len(runs) == 4:  # an outer `timeout` sends SIGTERM to the process group
            os.kill(os.getpid(), signal.SIGTERM)
        return client.run_client(argv, log, timeout_s)
    hooks = Hooks(launch=keep, client=client_then_term, device=lambda: {"name": "cpu-test", "free_bytes": None},
                  host=lambda: CPU_TEST_HOST, say=lambda line: None)
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(SystemExit):
        driver.run_serve_bench(zoo_pair, Settings(**{**FAST, "phase_clock": False}), tmp_path, hooks)
    assert signal.getsignal(signal.SIGTERM) is before
    assert launched and not any(server.alive() for server in launched)
    written = json.loads((tmp_path / "serve_bench.json").read_text())
    assert written["status"] == "incomplete" and written["stopped_because"] == "interrupted (SystemExit)"


# ------------------------------------------------------------------------------------------------ the axes
AXES = {**FAST, "input_lens": (16, 40), "sampling": ("greedy", "sampled"), "concurrency": (1,), "seed": 5,
        "variants": ("upstream_v1", "ours"), "phase_clock": False, "min_run_s": 0.3, "max_prompts": 16}
"""Two input lengths x both samplings at one concurrency, timed runs sized to 0.3 s from their warm runs."""


EARLY_WARM_S = 0.001
"""The duration the axes run gives each cell's earlier warm pass (which must not size the timed runs)."""


@pytest.fixture(scope="module")
def axes_run(zoo_pair, tmp_path_factory) -> dict:
    """The whole benchmark over the axes, with every client command line and every server it booted."""
    out, argvs, booted = tmp_path_factory.mktemp("serve_bench_axes"), [], []
    launch = fake_launcher()

    def client_seen(argv, log, timeout_s):
        argvs.append(argv)
        outcome = client.run_client(argv, log, timeout_s)
        if f"round={plan.SIZING_ROUND - 1}" in argv:  # an earlier warm pass, made far faster than any: sizing from it
            saved = Path(argv[argv.index("--result-dir") + 1]) / argv[argv.index("--result-filename") + 1]
            saved.write_text(json.dumps({**json.loads(saved.read_text()), "duration": EARLY_WARM_S}))  # would show
        return outcome

    def launch_seen(server, port, log):
        booted.append(server)
        return launch(server, port, log)
    hooks = Hooks(launch=launch_seen, client=client_seen, device=lambda: {"name": "cpu-test", "free_bytes": None},
                  host=lambda: CPU_TEST_HOST, say=lambda line: None)
    result = driver.run_serve_bench(zoo_pair, Settings(**AXES), out, hooks)
    return {"result": result, "out": out, "argvs": argvs, "booted": booted}


def test_the_axes_run_every_cell_on_one_boot_per_variant_sized_for_the_longest_input(axes_run, zoo_pair):
    result, booted = axes_run["result"], axes_run["booted"]
    assert result["status"] == "complete", result["problems"]
    assert [server.variant for server in booted] == ["upstream_v1", "ours"]  # the cells added no boot
    longest = plan.max_model_len(40, AXES["output_len"], zoo_pair.k)
    assert longest > plan.max_model_len(16, AXES["output_len"], zoo_pair.k)
    assert result["workload"]["max_model_len"] == longest and {s.max_model_len for s in booted} == {longest}
    kv = memory.kv_cache_bytes(pairs.read_config(zoo_pair.target), pairs.read_config(zoo_pair.draft), longest, 1)
    assert {s.kv_cache_bytes for s in booted} == {kv}
    cell_list = plan.cells([16, 40], ["greedy", "sampled"], [1])
    order = [(r["round"], r["input_len"], r["sampling"], r["concurrency"], r["variant"]) for r in result["order"]]
    assert order == [(r.round, r.cell.input_len, r.cell.sampling, r.cell.concurrency, r.variant)
                     for r in plan.interleaved(["upstream_v1", "ours"], cell_list, 2)]


def test_sampled_cells_reach_vllm_bench_serve_as_seeded_sampling(axes_run):
    """Every client command line, parsed by vLLM's own bench-serve parser: a sampled cell's runs send temperature
    0.8, top-p 0.95 and the run's seed in each request's body; a greedy cell's send temperature 0 and nothing else."""
    from portable_spec_harness.vllm_door.bench_client import parse

    seen = {"greedy": 0, "sampled": 0}
    for argv in axes_run["argvs"]:
        args = parse(argv)
        cell = dict(m.split("=", 1) for m in args.metadata)["cell"]
        input_len, sampling, _ = cell.split("/")
        assert args.random_input_len == int(input_len[2:])
        if sampling == "sampled":
            assert (args.temperature, args.top_p, args.extra_body) == (0.8, 0.95, {"seed": args.seed})
        else:
            assert (args.temperature, args.top_p, args.extra_body) == (0.0, None, None)
        seen[sampling] += 1
    per_variant = 2 * (plan.WARM_PASSES + 2)  # 2 lengths x (the warm passes + 2 timed)
    assert plan.WARM_PASSES == 2 and seen == {"greedy": 2 * per_variant, "sampled": 2 * per_variant}


def test_each_cells_prompts_come_from_its_warm_runs_and_are_the_same_for_every_variant(axes_run):
    result = axes_run["result"]
    for cell in plan.cells([16, 40], ["greedy", "sampled"], [1]):
        passes = [r for r in result["warm_runs"]
                  if (r["input_len"], r["sampling"], r["concurrency"]) == (cell.input_len, cell.sampling, 1)]
        assert sorted(r["round"] for r in passes) == [-2, -2, -1, -1] and len({r["seed"] for r in passes}) == 2
        assert {r["duration_s"] for r in passes if r["round"] == -2} == {EARLY_WARM_S}
        warm = [r["duration_s"] for r in passes if r["round"] == plan.SIZING_ROUND]  # the last pass sizes
        sized = result["sizing"][cell.key]
        assert len(warm) == 2 and sized["warm_s"] == round(min(warm), 3)  # the faster variant's wave
        want = plan.sized_per_slot(min(warm), AXES["min_run_s"], AXES["prompts_per_slot"], 1, AXES["max_prompts"],
                                   AXES["run_timeout_s"])
        assert sized["per_slot"] == want["per_slot"] > AXES["prompts_per_slot"]
        timed = {r["num_prompts"] for r in result["runs"] if plan.cell_of(r, result["workload"]) == cell}
        assert timed == {sized["num_prompts"]} == {result["workload"]["num_prompts"][cell.key]}
    assert "sized_per_variant" not in result["workload"] and result["settings"]["size_per_variant"] is False


def test_every_cell_reports_throughput_latency_percentiles_stalls_and_paired_ratios(axes_run):
    result, out = axes_run["result"], axes_run["out"]
    keys = [cell.key for cell in plan.cells([16, 40], ["greedy", "sampled"], [1])]
    for variant in ("upstream_v1", "ours"):
        assert list(result["cells"][variant]) == keys
        for key in keys:
            cell = result["cells"][variant][key]
            for metric in ("output_throughput", "median_ttft_ms", "p99_ttft_ms", "median_itl_ms", "p99_itl_ms",
                           "stall_total_ms", "stall_gaps", "duration"):
                assert isinstance(cell[metric]["median"], float) and len(cell[metric]["all"]) == 2, (key, metric)
    for run in result["runs"]:
        stalls = run["result"]["itl_stalls"]
        assert run["result"]["stall_total_ms"] == stalls["gap_ms_over_threshold"]
        assert stalls["threshold_ms"] == client.STALL_THRESHOLD_MS and run["duration_s"] == run["result"]["duration"]
    ratios = result["ours_over_upstream_v1"]
    assert list(ratios) == keys and "ours_over_mrv2" not in result
    for r in ratios.values():
        assert r["output_tok_s"] > 0 and r["paired_output_tok_s"]["passes"] == 2
        low, high = r["paired_output_tok_s"]["interval"]
        assert low <= r["paired_output_tok_s"]["median"] <= high
    text = (out / "serve_bench.txt").read_text()
    assert text.startswith("serve bench: llama_eagle") and "K=" in text.splitlines()[0]
    assert "in/out 16,40/12, sampling greedy,sampled" in text.splitlines()[0]
    for input_len in (16, 40):
        assert f"in {input_len}, greedy (temperature 0.0):" in text
        assert f"in {input_len}, sampled (temperature 0.8, top_p 0.95, seeded):" in text
    assert text.count("  ours_over_upstream_v1: c=1: tok/s") == 4
    assert (out / "serve_bench.png").stat().st_size > 10_000
    summary = combine.combine([result, result], ["a", "b"])  # sized runs pool across calls, rounds paired per call
    pooled = summary["ours_over_upstream_v1"]["llama_eagle"]["zoo-perfect"]
    assert list(pooled) == keys and all(r["paired_output_tok_s"]["passes"] == 4 for r in pooled.values())


def test_a_run_shorter_than_min_run_s_is_flagged_in_the_json_the_table_and_its_last_line(zoo_pair, tmp_path):
    settings = Settings(**{**FAST, "concurrency": (1,), "rounds": 1, "variants": ("upstream_v1", "ours"),
                           "phase_clock": False, "min_run_s": 30.0, "max_prompts": 1})
    result = driver.run_serve_bench(zoo_pair, settings, tmp_path, cpu_hooks())
    assert result["status"] == "complete", result["problems"]  # short, not broken: flagged, not a problem
    assert "capped" in result["sizing"][C1]["why"] and result["workload"]["num_prompts"][C1] == 1
    short = result["short_runs"]
    assert [(s["variant"], s["cell"], s["round"]) for s in short] == [("upstream_v1", C1, 0), ("ours", C1, 0)]
    assert all(s["duration_s"] < 30 for s in short)
    lines = (tmp_path / "serve_bench.txt").read_text().splitlines()
    assert "short runs: 2 of 2 timed runs measured under --min-run-s 30 s (see sizing in the JSON):" in lines
    assert lines[-1] == "serve bench: complete; 2 of 2 timed runs under --min-run-s 30 s"


# ------------------------------------------------------------------------------------------------ sizing per variant
SLOW_STEP_S = 0.1
"""The slow variant's engine step in the fake (ten times the others'), as an eager baseline beside ours."""
PER_VARIANT = {**FAST, "variants": ("upstream_v1", "ours"), "phase_clock": False, "min_run_s": 0.4,
               "size_per_variant": True}
"""FAST's two cells, upstream V1 slow, each variant's runs sized to 0.4 s from its own warm run."""


def slow_upstream() -> Hooks:
    return cpu_hooks(fake_launcher(Misbehave(chunk_s={"upstream_v1": SLOW_STEP_S})))


@pytest.fixture(scope="module")
def per_variant_run(zoo_pair, tmp_path_factory) -> tuple[dict, Path]:
    out = tmp_path_factory.mktemp("serve_bench_per_variant")
    return driver.run_serve_bench(zoo_pair, Settings(**PER_VARIANT), out, slow_upstream()), out


@pytest.fixture(scope="module")
def sized_once_run(zoo_pair, tmp_path_factory) -> tuple[dict, Path]:
    """The same slow upstream V1, sized the default way (once per cell), at c = 1 and one round."""
    out = tmp_path_factory.mktemp("serve_bench_sized_once")
    settings = Settings(**{**PER_VARIANT, "size_per_variant": False, "concurrency": (1,), "rounds": 1})
    return driver.run_serve_bench(zoo_pair, settings, out, slow_upstream()), out


def sizing_warm_s(result: dict, cell: plan.Cell, variant: str) -> list[float]:
    """``variant``'s warm runs in ``cell`` that size its timed runs (round ``plan.SIZING_ROUND``)."""
    return [r["duration_s"] for r in result["warm_runs"] if r["variant"] == variant
            and r["round"] == plan.SIZING_ROUND and plan.cell_of(r, result["workload"]) == cell]


def test_sized_per_variant_a_slow_variant_runs_fewer_prompts_each_from_its_own_warm_run(per_variant_run):
    """``size_per_variant``: each variant's runs in a cell are sized from its own warm run (``plan.sized_per_slot``),
    so the slow baseline runs fewer prompts than ours, not ours' for several times as long; the rounds still pair
    into ratios, the first round is predicted from each variant's own prompts, and the table shows each one's."""
    result, out = per_variant_run
    s = Settings(**PER_VARIANT)
    assert result["status"] == "complete", result["problems"]
    assert result["workload"]["sized_per_variant"] is True
    text = (out / "serve_bench.txt").read_text().splitlines()
    estimate = 0.0
    for cell in plan.cells([16], ["greedy"], [1, 2]):
        prompts = {}
        for variant in s.variants:
            warm = sizing_warm_s(result, cell, variant)
            want = plan.sized_per_slot(min(warm), s.min_run_s, s.prompts_per_slot, cell.concurrency, s.max_prompts,
                                       s.run_timeout_s)
            sized = result["sizing"][cell.key]["per_variant"][variant]
            assert (sized["per_slot"], sized["warm_s"], sized["warm_runs"]) == (want["per_slot"], want["warm_s"], 1)
            prompts[variant] = plan.num_prompts(cell.concurrency, want["per_slot"])
            assert sized["num_prompts"] == prompts[variant]
            assert {r["num_prompts"] for r in result["runs"] if r["variant"] == variant
                    and plan.cell_of(r, result["workload"]) == cell} == {prompts[variant]}
            row = next(line.split() for line in text if line.split()[:2] == [str(cell.concurrency), variant])
            assert row[-2] == str(prompts[variant])
            last_warm = [r["duration_s"] for r in result["warm_runs"] if r["variant"] == variant
                         and plan.cell_of(r, result["workload"]) == cell][-1]
            estimate += (last_warm * prompts[variant] / cell.concurrency * driver.WARM_SLACK
                         + driver.RUN_OVERHEAD_S)
        assert result["workload"]["num_prompts"][cell.key] == prompts
        assert prompts["upstream_v1"] < prompts["ours"]
        ratio = result["ours_over_upstream_v1"][cell.key]
        assert ratio["output_tok_s"] > 1 and ratio["paired_output_tok_s"]["passes"] == 2
    assert result["phases_s"]["round_estimate_s"] == pytest.approx(estimate, abs=0.051)
    assert "prompts sized per variant (--size-per-variant): each variant's runs from its own warm run" in text


def test_by_default_a_slow_variant_runs_the_prompts_the_fastest_warm_run_sized(sized_once_run):
    """Without ``size_per_variant`` (the default, every committed report): one size per cell, from the fastest
    variant's warm run, for every variant."""
    result, _ = sized_once_run
    assert result["status"] == "complete", result["problems"]
    assert "sized_per_variant" not in result["workload"] and result["settings"]["size_per_variant"] is False
    cell = plan.Cell(16, "greedy", 1)
    ours, upstream = (min(sizing_warm_s(result, cell, v)) for v in ("ours", "upstream_v1"))
    sized = result["sizing"][C1]
    assert ours < upstream and sized["warm_s"] == round(ours, 3) and sized["warm_runs"] == 2
    assert {r["num_prompts"] for r in result["runs"]} == {sized["num_prompts"]} == \
        {result["workload"]["num_prompts"][C1]}
    assert {r["variant"] for r in result["runs"]} == {"ours", "upstream_v1"}


def test_a_call_sized_per_variant_from_an_earlier_one_keeps_each_variants_prompts(per_variant_run, zoo_pair,
                                                                                  tmp_path):
    first, out = per_variant_run
    settings = earlier_sizing(Settings(**{**PER_VARIANT, "rounds": 1, "first_round": 2}), zoo_pair, out)
    result = driver.run_serve_bench(zoo_pair, settings, tmp_path, slow_upstream())
    assert result["status"] == "complete", result["problems"]
    assert result["workload"]["num_prompts"] == first["workload"]["num_prompts"]
    for key in (C1, C2):
        for variant in PER_VARIANT["variants"]:
            earlier = first["sizing"][key]["per_variant"][variant]
            assert result["sizing"][key]["per_variant"][variant] == {**earlier, "warm_runs": 0, "from": str(out)}
            assert {r["num_prompts"] for r in result["runs"] if r["variant"] == variant
                    and plan.cell_of(r, result["workload"]).key == key} == {earlier["num_prompts"]}
            assert [r["round"] for r in result["warm_runs"] if r["variant"] == variant
                    and plan.cell_of(r, result["workload"]).key == key] == [plan.SIZING_ROUND - plan.WARM_PASSES + 1]


def test_sizing_from_a_call_sized_the_other_way_is_one_line_exit_2(per_variant_run, sized_once_run, clean_run,
                                                                    zoo_pair, tmp_path, tmp_path_factory, capsys,
                                                                    monkeypatch):
    """A call sized per variant keeps no prompts for a call sized once per cell, nor the other way round (a report
    written before the option was sized once per cell)."""
    from portable_spec_harness.serve_bench import __main__ as cli

    (_, per), (_, once), (old, old_out) = per_variant_run, sized_once_run, clean_run
    with pytest.raises(PortableSpecError, match="its size_per_variant was True, this bench's is False: .*drop "
                                                "--sizing-from$"):
        earlier_sizing(Settings(**{**PER_VARIANT, "size_per_variant": False}), zoo_pair, per)
    with pytest.raises(PortableSpecError, match="its size_per_variant was False, this bench's is True"):
        earlier_sizing(Settings(**{**PER_VARIANT, "concurrency": (1,)}), zoo_pair, once)
    before = json.loads(json.dumps(old))
    del before["settings"]["size_per_variant"]
    (tmp_path / "before.json").write_text(json.dumps(before))
    assert earlier_sizing(Settings(**FAST), zoo_pair, tmp_path / "before.json").earlier_sizing.keys() == {C1, C2}
    with pytest.raises(PortableSpecError, match="its size_per_variant was False, this bench's is True"):
        earlier_sizing(Settings(**{**FAST, "size_per_variant": True}), zoo_pair, tmp_path / "before.json")
    monkeypatch.setattr(cli, "HOOKS", lambda say: slow_upstream())
    argv = ["--pair", "llama_eagle", "--work-dir", str(shared_zoo(tmp_path_factory)), "--out", str(tmp_path / "o"),
            "--concurrency", "1,2", "--input-len", "16", "--output-len", "12", "--prompts-per-slot", "1",
            "--min-run-s", "0.4", "--run-timeout", "60", "--variants", "upstream_v1,ours", "--sizing-from", str(per)]
    capsys.readouterr()
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("portable-spec: error: --sizing-from") and \
        "its size_per_variant was True, this bench's is False" in err[0]
    assert not (tmp_path / "o").exists()


def test_the_summary_pools_calls_sized_per_variant_and_refuses_to_mix_the_two_sizings(per_variant_run, sized_once_run,
                                                                                      tmp_path, capsys):
    (per, per_out), (once, once_out) = per_variant_run, sized_once_run
    pooled = combine.combine([per, per], ["a", "b"])
    entry = pooled["pairs"]["llama_eagle"]["zoo-perfect"]
    assert entry["workload"]["sized_per_variant"] and entry["workload"]["num_prompts"] == per["workload"]["num_prompts"]
    assert all(r["paired_output_tok_s"]["passes"] == 4
               for r in pooled["ours_over_upstream_v1"]["llama_eagle"]["zoo-perfect"].values())
    fix = "pool calls of one sizing (run them all with or all without --size-per-variant)"
    for members, sources in (([per, once], ["call-a", "call-b"]), ([once, per], ["call-b", "call-a"])):
        with pytest.raises(PortableSpecError) as err:
            combine.combine(members, sources)
        assert str(err.value) == f"call-a sized its runs per variant (--size-per-variant), call-b once per cell: {fix}"
    capsys.readouterr()
    assert combine.main([str(per_out), str(once_out), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].endswith(fix)


# ------------------------------------------------------------------------------------------------ order
@pytest.mark.parametrize("mode", ["together", "in_turn"])
def test_every_round_visits_every_cell_once_and_the_first_variant_rotates(mode):
    variants, conc = ["upstream_v1", "ours", "mrv2"], [1, 2, 8, 32]
    runs = plan.order(mode, variants, plan.cells([256], ["greedy"], conc), 3)
    for r in range(3):
        cells = [(x.cell.concurrency, x.variant) for x in runs if x.round == r]
        assert sorted(cells) == sorted((c, v) for c in conc for v in variants)
        assert [x.variant for x in runs if x.round == r][0] == variants[r]
    firsts = {v: 0 for v in variants}
    for c in conc:
        for r in range(3):
            firsts[[x.variant for x in runs if x.round == r and x.cell.concurrency == c][0]] += 1
    assert set(firsts.values()) == {len(conc)}  # each variant goes first equally often
    if mode == "in_turn":  # one server at a time: a variant's runs of a round are contiguous
        blocks = [x.variant for x in runs if x.round == 0]
        assert blocks == [v for v in variants for _ in conc]


def test_cells_times_rounds_visit_every_cell_and_variant_once_per_round_without_extra_boots():
    """Input length x sampling x concurrency: each round holds every (cell, variant) once, the first variant rotates
    by round in every cell, and one at a time (in_turn) a variant's runs of a round stay one block: one boot per
    variant per round whatever the cells."""
    variants = ["upstream_v1", "ours", "mrv2"]
    cell_list = plan.cells([128, 1024], ["greedy", "sampled"], [1, 8])
    assert len(cell_list) == 8 and cell_list[-1].key == "in1024/sampled/c8"
    for mode in ("together", "in_turn"):
        runs = plan.order(mode, variants, cell_list, 3, first_round=1)
        assert len(runs) == 3 * 8 * 3
        for r in (1, 2, 3):
            mine = [x for x in runs if x.round == r]
            assert sorted((x.cell.key, x.variant) for x in mine) == sorted(
                (cell.key, v) for cell in cell_list for v in variants)
            for cell in cell_list:
                assert [x.variant for x in mine if x.cell == cell][0] == variants[r % 3]
            blocks = [v for i, v in enumerate(x.variant for x in mine) if i == 0 or mine[i - 1].variant != v]
            assert len(blocks) == (3 if mode == "in_turn" else 8 * 3)


def test_prompts_are_sized_from_the_warm_run_capped_and_floored():
    sized = plan.sized_per_slot(0.5, 10, 2, 8, 1024, 300)
    assert sized["per_slot"] == 30 and sized["projected_s"] == 15.0  # 1.5 x 10 s over 0.5 s a wave
    assert plan.sized_per_slot(0.5, 10, 40, 8, 1024, 300)["per_slot"] == 40  # --prompts-per-slot is the floor
    capped = plan.sized_per_slot(0.5, 10, 1, 8, 64, 300)
    assert capped["per_slot"] == 8 and "capped" in capped["why"]  # --max-prompts 64 at c=8
    slow = plan.sized_per_slot(20.0, 30, 1, 1, 1024, 60)
    assert slow["per_slot"] == 1 and "capped" in slow["why"]  # a 20 s wave: a second would pass half the timeout
    assert plan.sized_per_slot(0.5, 0, 3, 8, 1024, 300) == {"per_slot": 3, "why": "--min-run-s 0: --prompts-per-slot"}
    assert plan.sized_per_slot(None, 10, 3, 8, 1024, 300)["per_slot"] == 3


def test_moe_pairs_skip_mrv2_with_the_reason():
    kept, skipped = plan.variants_for(["upstream_v1", "ours", "mrv2", "ours@async", "mrv2@sync"], moe=True)
    assert kept == ["upstream_v1", "ours", "ours@async"] and "MoE" in skipped["mrv2"] and "MoE" in skipped["mrv2@sync"]
    assert plan.variants_for(["mrv2"], moe=False) == (["mrv2"], {})


# ------------------------------------------------------------------------------------------------ statistics
def test_medians_and_ratios_refuse_missing_or_empty_data():
    with pytest.raises(stats.MissingData, match="no runs"):
        stats.median_of([], "x")
    with pytest.raises(stats.MissingData, match="1 of 3"):
        stats.median_of([1.0, None, 3.0], "x")
    with pytest.raises(stats.MissingData):
        stats.median_of([float("nan")], "x")
    with pytest.raises(stats.MissingData):
        stats.ratio(1.0, 0.0, "x")
    with pytest.raises(stats.MissingData):
        stats.ratio(None, 2.0, "x")
    assert stats.median_of([3.0, 1.0, 2.0], "x") == 2.0 and stats.ratio(3.0, 2.0, "x") == 1.5


def _result(tok_s: float, tpot: float) -> dict:
    base = {m: 1.0 for m in stats.CELL_METRICS}
    return {**base, "output_throughput": tok_s, "median_tpot_ms": tpot}


def test_cells_and_ratios_from_runs_and_an_empty_cell_is_an_error_not_a_zero():
    runs = [{"variant": "ours", "concurrency": 1, "round": r, "result": _result(t, 10.0 / t)}
            for r, t in enumerate((90.0, 100.0, 110.0))]
    runs += [{"variant": "upstream_v1", "concurrency": 1, "round": r, "result": _result(t, 10.0 / t)}
             for r, t in enumerate((40.0, 50.0))]
    runs += [{"variant": "upstream_v1", "concurrency": 2, "round": 0, "error": "boom"}]
    workload = {"input_len": 16, "temperature": 0.0, "concurrency": [1, 2]}  # a report written before the axes
    cells = plan.workload_cells(workload)
    one, two = (cell.key for cell in cells)
    assert (one, two) == ("in16/greedy/c1", "in16/greedy/c2")
    table = stats.cells(runs, ["ours", "upstream_v1"], cells, workload)
    assert table["ours"][one]["output_throughput"]["median"] == 100.0
    assert table["upstream_v1"][one]["output_throughput"]["median"] == 45.0
    assert "stall_total_ms" not in table["ours"][one]  # no run had one: left out, not a 0
    assert "error" in table["ours"][two] and table["upstream_v1"][two] == {
        "runs": 0, "failed": 1, "error": f"no runs for upstream_v1 {two} output_throughput"}
    ratios = stats.ratios(table, runs, "ours", "upstream_v1", cells, workload)
    paired = ratios[one].pop("paired_output_tok_s")
    assert ratios[one].pop("paired_p99_itl_ms")["passes"] == 2
    assert ratios[one] == {"output_tok_s": round(100 / 45, 4), "median_tpot_ms": round(0.1 / 0.225, 4),
                           "p99_itl_ms": 1.0}
    assert paired["passes"] == 2 and paired["unpaired_rounds"] == 1  # round 2 ran ours only
    assert paired["median"] == round((90 / 40 + 100 / 50) / 2, 3)
    assert "error" in ratios[two]
    assert "error" in stats.ratios(table, runs, "ours", "mrv2", cells[:1], workload)[one]
    runs[0]["result"]["stall_total_ms"] = 120.0  # one run has a stall total: every run of its cell must
    assert "stall_total_ms" in stats.cells(runs, ["ours"], cells, workload)["ours"][one]["error"]


def test_p99_itl_is_paired_round_by_round_where_the_medians_of_p99s_come_from_different_rounds():
    """Session 28's c=8 cell at 4096 in: each engine's p99 ITL flips between ~95 and ~150 ms with a few prefill gaps
    either way. Both medians (148.0 and 112.0) are round 2's p99s, so their ratio is that one round's; round by round
    the ratios are 1.011, 0.978, 1.322, median 1.011."""
    ours_p99, upstream_p99 = (151.6, 95.1, 148.0), (150.0, 97.2, 112.0)
    runs = [{"variant": variant, "concurrency": 8, "round": r, "result": {**_result(100.0, 1.0), "p99_itl_ms": p99}}
            for variant, p99s in (("ours", ours_p99), ("upstream_v1", upstream_p99)) for r, p99 in enumerate(p99s)]
    workload = {"input_len": 4096, "temperature": 0.0, "concurrency": [8]}
    cells = plan.workload_cells(workload)
    key = cells[0].key
    table = stats.cells(runs, ["ours", "upstream_v1"], cells, workload)
    ratios = stats.ratios(table, runs, "ours", "upstream_v1", cells, workload)[key]
    assert ratios["p99_itl_ms"] == round(148.0 / 112.0, 4)  # the ratio of medians: past issue 41's 1.25
    paired = ratios["paired_p99_itl_ms"]
    assert paired["passes"] == 3 and paired["unpaired_rounds"] == 0
    assert paired["median"] == round(151.6 / 150.0, 3)
    del runs[0]["result"]["p99_itl_ms"]  # a run without the metric: its round is left out and counted, never a 0
    paired = stats.paired(runs, "ours", "upstream_v1", cells[0], workload, "p99_itl_ms")
    assert paired["passes"] == 2 and paired["unpaired_rounds"] == 1


# ------------------------------------------------------------------------------------------------ client
def test_vllm_bench_serve_parses_the_client_arguments():
    from portable_spec_harness.vllm_door.bench_client import parse

    run = client.ClientRun("127.0.0.1", 8123, "/m/target", "/m/tok", 256, 128, 64, 32, 7, "greedy", "/r", "x.json",
                           "ours", ("variant=ours", "round=0"))
    args = parse(client.client_args(run))
    assert (args.dataset_name, args.random_input_len, args.random_output_len) == ("random", 256, 128)
    assert args.random_range_ratio == "0" and args.num_prompts == 64 and args.max_concurrency == 32
    assert args.request_rate == float("inf") and args.ignore_eos and args.temperature == 0.0 and args.seed == 7
    assert args.top_p is None and args.extra_body is None  # greedy: no top-p, no per-request seed
    assert args.save_result and args.save_detailed and args.result_dir == "/r" and args.result_filename == "x.json"
    assert args.percentile_metrics == "ttft,tpot,itl,e2el" and args.metric_percentiles == "99"
    assert (args.model, args.tokenizer, args.port, args.backend) == ("/m/target", "/m/tok", 8123, "openai")
    assert args.metadata == ["variant=ours", "round=0"] and args.disable_tqdm


def test_each_run_keeps_its_itl_stalls_and_drops_the_per_request_fields(clean_run):
    """The real client saved every request's latencies (--save-detailed); the driver kept their stalls in the run's
    result and dropped the bulky fields from the file, which names them."""
    result, out = clean_run
    for run in result["runs"]:
        stalls = run["result"]["itl_stalls"]
        # one ITL per streamed chunk after the first, and a chunk may carry several tokens (accepted drafts)
        assert 0 < stalls["itls"] <= run["result"]["total_output_tokens"] - run["result"]["completed"]
        assert stalls["median_itl_ms"] > 0 and stalls["stalls"] >= len(stalls["largest"])
        saved = json.loads((out / run["result_file"]).read_text())
        assert saved["detailed_fields_dropped"] == list(client.DETAILED)
        assert not set(client.DETAILED) & set(saved) and saved["itl_stalls"] == stalls
        times = saved["request_times"]
        assert len(times["start_s"]) == len(times["ttft_ms"]) == run["result"]["completed"] > 0
        assert min(times["start_s"]) == 0.0 and min(times["ttft_ms"]) > 0
        grouped = run["result"]["ttft_by_prefills_ahead"]
        assert grouped == saved["ttft_by_prefills_ahead"] == client.ttft_by_prefills_ahead(times)
        assert sum(g["requests"] for g in grouped.values()) == run["result"]["completed"]


@pytest.mark.parametrize("n", [1, 2, 99, 100, 101, 5590, 6129])
def test_p99_neighbours_bracket_the_clients_p99(n):
    """The two gaps ``p99_neighbours`` names are the ones numpy's default percentile (vLLM's bench) interpolates
    between: the p99 lies between them, and each is the gap at its rank."""
    import numpy as np

    gaps = [0.001 * (1 + (i * 7919) % n) for i in range(n)]  # n distinct gaps, shuffled
    low, high = client.p99_neighbours(sorted(gaps))
    p99 = 1000 * float(np.percentile(gaps, 99))
    ordered = sorted(gaps, reverse=True)
    assert low["ms"] <= round(p99, 2) <= high["ms"]
    assert [g["ms"] for g in (low, high)] == [round(1000 * ordered[g["rank"] - 1], 2) for g in (low, high)]
    assert low["rank"] - high["rank"] == (1 if n > 1 else 0)


def test_itl_stalls_names_the_long_gaps_and_says_when_there_are_none(tmp_path):
    saved = {"itls": [[0.006] * 10, [0.006] * 4 + [0.25] + [0.006] * 5], "start_times": [100.0, 100.5],
             "ttfts": [0.03, 0.04]}
    stalls = client.itl_stalls(saved)
    assert (stalls["itls"], stalls["stalls"], stalls["median_itl_ms"]) == (20, 1, 6.0)
    assert stalls["largest"] == [{"request": 1, "token": 5, "ms": 250.0, "at_s": round(0.5 + 0.04 + 4 * 0.006 + 0.25, 3)}]
    assert stalls["stall_excess_ms"] == 244.0
    assert (stalls["threshold_ms"], stalls["gaps_over_threshold"], stalls["gap_ms_over_threshold"]) == (100.0, 1, 250.0)
    assert client.stall_total(stalls) == {"stall_total_ms": 250.0, "stall_gaps": 1}
    assert stalls["gaps_at_least_ms"] == {"50": 1, "100": 1, "150": 1, "200": 1}
    # 20 gaps: the p99 sits at 0.99 x 19 = 18.81 of the sorted gaps, between the 2nd longest and the longest
    assert stalls["p99_neighbours"] == [{"rank": 2, "ms": 6.0}, {"rank": 1, "ms": 250.0}]
    assert client.stall_total({"itls": 0}) == {}  # no ITLs: no stall total, not a 0
    assert client.itl_stalls({"itls": [[], []]}) == {"itls": 0} and client.itl_stalls({}) == {"itls": 0}
    path = tmp_path / "r.json"
    path.write_text(json.dumps({**saved, "generated_texts": ["a", "b"], "completed": 2}))
    client.condense(path)
    condensed = json.loads(path.read_text())
    assert condensed["itl_stalls"] == stalls and condensed["completed"] == 2
    assert condensed["detailed_fields_dropped"] == ["start_times", "ttfts", "itls", "generated_texts"]
    client.condense(path)  # already condensed: left as it is
    assert json.loads(path.read_text()) == condensed


def test_request_times_say_which_prompts_queued_behind_others(tmp_path):
    """An opening burst of three prompts, one prompt alone a second later, and one more just after it: each start's
    count of earlier prompts still waiting for their first token, and the TTFTs grouped by it."""
    saved = {"start_times": [50.0, 50.0, 50.0, 51.0, 51.01], "ttfts": [0.1, 0.2, 0.3, 0.05, 0.08],
             "itls": [[0.01]] * 5}
    times = client.request_times(saved)
    assert times == {"start_s": [0.0, 0.0, 0.0, 1.0, 1.01], "ttft_ms": [100.0, 200.0, 300.0, 50.0, 80.0]}
    assert client.prefills_ahead(times) == [0, 1, 2, 0, 1]
    assert client.ttft_by_prefills_ahead(times) == {"0": {"requests": 2, "median_ttft_ms": 75.0},
                                                    "1": {"requests": 2, "median_ttft_ms": 140.0},
                                                    "2": {"requests": 1, "median_ttft_ms": 300.0}}
    # a prompt whose first token came before the next start, or as it started, queues nothing behind it
    assert client.prefills_ahead({"start_s": [0.0, 0.2], "ttft_ms": [100.0, 10.0]}) == [0, 0]
    assert client.prefills_ahead({"start_s": [0.0, 0.1], "ttft_ms": [100.0, 10.0]}) == [0, 0]
    assert client.request_times({"start_times": [1.0], "ttfts": []}) is None and client.request_times({}) is None
    path = tmp_path / "r.json"
    path.write_text(json.dumps({**saved, "completed": 5}))
    client.condense(path)
    condensed = json.loads(path.read_text())
    assert condensed["request_times"] == times
    assert condensed["ttft_by_prefills_ahead"] == client.ttft_by_prefills_ahead(times)


def test_read_result_refuses_a_run_with_holes(tmp_path, clean_run):
    result, out = clean_run
    saved = json.loads((out / result["runs"][0]["result_file"]).read_text())
    for change, match in ((lambda d: d.pop("median_tpot_ms"), "lacks median_tpot_ms"),
                          (lambda d: d.update(failed=1, completed=d["num_prompts"] - 1), "1 of"),
                          (lambda d: d.pop("spec_decode_acceptance_length"), "no acceptance length")):
        broken = dict(saved)
        change(broken)
        (tmp_path / "r.json").write_text(json.dumps(broken))
        with pytest.raises(client.ResultError, match=match):
            client.read_result(tmp_path / "r.json")
    with pytest.raises(client.ResultError, match="no client result"):
        client.read_result(tmp_path / "absent.json")


def test_a_client_that_raises_or_hangs_is_an_error_and_stdout_is_restored(tmp_path):
    before = sys.stdout

    def raises(argv):
        print("partial output")
        raise SystemExit(2)
    outcome = client.run_client([], tmp_path / "a.txt", 5, bench=raises)
    assert outcome["error"].startswith("SystemExit") and sys.stdout is before
    assert "partial output" in (tmp_path / "a.txt").read_text()
    import threading

    release = threading.Event()
    outcome = client.run_client([], tmp_path / "b.txt", 0.2, bench=lambda argv: release.wait(5))
    assert "no result within" in outcome["error"]
    release.set()


# ------------------------------------------------------------------------------------------------ servers
@pytest.mark.parametrize("variant", ["upstream_v1", "ours", "mrv2"])
def test_vllm_serve_parses_the_bench_command_line(vllm_platform, variant, zoo_pair):
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.entrypoints.openai.cli_args import make_arg_parser, validate_parsed_serve_args
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    server = servers.BenchServer(variant, zoo_pair, 640, 32, 3 << 30)
    args = make_arg_parser(FlexibleArgumentParser()).parse_args(servers.serve_args(server, 8123))
    validate_parsed_serve_args(args)
    engine = AsyncEngineArgs.from_cli_args(args)
    assert args.model_tag == zoo_pair.target and args.port == 8123
    assert engine.speculative_config == {"method": "eagle", "model": zoo_pair.draft, "num_speculative_tokens": 3}
    assert engine.kv_cache_memory_bytes == 3 << 30 and engine.max_num_seqs == 32 and engine.max_model_len == 640
    assert engine.worker_extension_cls == servers.WORKER_EXTENSION
    env = servers.server_env(server)
    assert env.get("VLLM_USE_V2_MODEL_RUNNER") == ("1" if variant == "mrv2" else "0")
    assert env.get("VLLM_PLATFORM") == ("cuda" if variant == "ours" else None)
    assert "VLLM_ENABLE_V1_MULTIPROCESSING" not in env and env["VLLM_SERVER_DEV_MODE"] == "1"


@pytest.mark.parametrize("tp", [1, 2])
def test_vllm_serve_parses_the_bench_command_line_at_tensor_parallel(vllm_platform, zoo_pair, tp):
    """``--tp 2 --disable-custom-all-reduce --no-fuse-allreduce-rms`` reach vLLM 0.26.0's own parser as tensor
    parallel 2 and the two switches on every variant; TP=1 adds nothing to the command line. NVLink multicast is
    off in every server's environment."""
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.entrypoints.openai.cli_args import make_arg_parser, validate_parsed_serve_args
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    from portable_spec_harness.parallel import Parallel
    from portable_spec_harness.vllm_door.offline import MULTICAST_OFF_ENV

    for variant in ("upstream_v1", "ours", "mrv2"):
        server = servers.BenchServer(variant, zoo_pair, 640, 32, 3 << 30, "default", Parallel(tp, tp > 1, tp > 1))
        argv = servers.serve_args(server, 8123)
        args = make_arg_parser(FlexibleArgumentParser()).parse_args(argv)
        validate_parsed_serve_args(args)
        engine = AsyncEngineArgs.from_cli_args(args)
        assert engine.tensor_parallel_size == tp and engine.disable_custom_all_reduce is (tp > 1)
        assert engine.compilation_config.pass_config.fuse_allreduce_rms is (False if tp > 1 else None)
        assert engine.kv_cache_memory_bytes == 3 << 30 and engine.speculative_config["model"] == zoo_pair.draft
        assert ("--tensor-parallel-size" in argv) is (tp > 1)
        env = servers.server_env(server)
        assert {k: env.get(k) for k in MULTICAST_OFF_ENV} == MULTICAST_OFF_ENV


@pytest.mark.parametrize("choice, expected", [("default", None), ("on", True), ("off", False)])
def test_async_scheduling_reaches_vllms_engine_args_as_asked(vllm_platform, zoo_pair, choice, expected):
    """vLLM 0.26.0 leaves async scheduling off for draft_model unless asked: the bench forces one choice on every
    variant, and vLLM's own parser must read it as that choice (None: vLLM decides)."""
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.entrypoints.openai.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    server = servers.BenchServer("ours", zoo_pair, 640, 32, 3 << 30, choice)
    args = make_arg_parser(FlexibleArgumentParser()).parse_args(servers.serve_args(server, 8123))
    assert AsyncEngineArgs.from_cli_args(args).async_scheduling is expected


@pytest.mark.parametrize("choice", ["default", "off"])
def test_a_scheduling_suffix_reaches_vllms_engine_args_on_its_server_only(vllm_platform, zoo_pair, tmp_path, choice):
    """``upstream_v1,ours,ours@async``: the driver plans three servers, and vLLM's own parser reads async scheduling
    on for ``ours@async`` alone, the others with ``--async-scheduling``'s choice (None: vLLM decides). ``ours@async``
    runs ours (platform, drafter) with a compile cache of its own, and the placement counts three servers."""
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.entrypoints.openai.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    settings = Settings(**{**FAST, "variants": ("upstream_v1", "ours", "ours@async"), "async_scheduling": choice})
    bench = driver.Bench(zoo_pair, settings, tmp_path, cpu_hooks())
    specs = bench.plan_servers()
    assert list(specs) == ["upstream_v1", "ours", "ours@async"] and bench.record["placement"]["servers"] == 3
    plain = {"default": None, "off": False}[choice]
    for name, expected in (("upstream_v1", plain), ("ours", plain), ("ours@async", True)):
        argv = servers.serve_args(specs[name], 8123)
        args = make_arg_parser(FlexibleArgumentParser()).parse_args(argv)
        assert AsyncEngineArgs.from_cli_args(args).async_scheduling is expected, name
        assert ("--async-scheduling" in argv, "--no-async-scheduling" in argv) == (expected is True, expected is False)
    ours, suffixed = servers.server_env(specs["ours"]), servers.server_env(specs["ours@async"])
    assert specs["ours@async"].kind == "ours" and suffixed["VLLM_PLATFORM"] == ours["VLLM_PLATFORM"] == "cuda"
    assert suffixed["VLLM_CACHE_ROOT"] != ours["VLLM_CACHE_ROOT"]


def _facts_record(asked: str, ran: dict[str, bool | None]) -> dict:
    """A report's record whose servers said ``ran`` (None: a fact without ``async_scheduling``)."""
    return {"settings": {"async_scheduling": asked},
            "variants": {v: {"facts": [{"runner": "x", **({} if on is None else {"async_scheduling": on})}]}
                         for v, on in ran.items()}}


def test_the_report_says_how_each_server_scheduled_and_flags_a_mismatch():
    said, problems = report.scheduling(_facts_record("on", {"upstream_v1": True, "ours": True}), ["upstream_v1", "ours"])
    assert said == {"asked": "on", "asked_per_variant": {"upstream_v1": "on", "ours": "on"},
                    "per_variant": {"upstream_v1": True, "ours": True}} and problems == []
    _, problems = report.scheduling(_facts_record("on", {"upstream_v1": False, "ours": True}), ["upstream_v1", "ours"])
    assert any("upstream_v1: ran with async scheduling False, but --async-scheduling on was asked" in p
               for p in problems)
    assert any("different async scheduling (upstream_v1 off, ours on)" in p for p in problems)
    _, problems = report.scheduling(_facts_record("default", {"upstream_v1": False, "ours": False}),
                                    ["upstream_v1", "ours"])
    assert problems == []


def test_each_suffixed_server_is_checked_against_its_own_ask_and_may_differ_from_the_plain_ones():
    """A suffixed server is asked its own scheduling: differing from the plain servers is the point, differing from
    its ask is a problem, and so is a server asked on or off whose facts do not say. Plain servers must still agree."""
    variants = ["upstream_v1", "ours", "ours@async", "upstream_v1@sync"]
    said, problems = report.scheduling(_facts_record("default", {"upstream_v1": True, "ours": True, "ours@async": True,
                                                                 "upstream_v1@sync": False}), variants)
    assert problems == [] and said["asked_per_variant"] == {"upstream_v1": "default", "ours": "default",
                                                            "ours@async": "on", "upstream_v1@sync": "off"}
    _, problems = report.scheduling(_facts_record("off", {"upstream_v1": False, "ours": True, "ours@async": False,
                                                          "upstream_v1@sync": None}), variants)
    assert problems == ["ours: ran with async scheduling True, but --async-scheduling off was asked",
                        "ours@async: ran with async scheduling False, but ours@async's async scheduling on was asked",
                        "upstream_v1@sync: upstream_v1@sync's async scheduling off was asked, but no fact of its "
                        "server says how it scheduled",
                        "the variants ran with different async scheduling (upstream_v1 off, ours on)"]


def test_a_forced_choice_runs_end_to_end_and_is_printed(zoo_pair, tmp_path):
    settings = Settings(**{**FAST, "rounds": 1, "concurrency": (1,), "variants": ("upstream_v1", "ours"),
                           "phase_clock": False, "async_scheduling": "off"})
    result = driver.run_serve_bench(zoo_pair, settings, tmp_path, cpu_hooks())
    assert result["status"] == "complete", result["problems"]
    assert result["async_scheduling"]["per_variant"] == {"upstream_v1": False, "ours": False}
    assert "async scheduling (off): upstream_v1 off, ours off" in report.table(result)


SUFFIXED = Settings(**{**FAST, "variants": ("upstream_v1", "ours", "ours@async"), "async_scheduling": "off",
                       "phase_clock": False})
"""What issue 39 asks on one machine, interleaved: upstream and ours as asked (off, as vLLM 0.26.0 picks for
draft_model) and ours with async scheduling."""


@pytest.fixture(scope="module")
def suffixed_run(zoo_pair, tmp_path_factory) -> tuple[dict, Path]:
    out = tmp_path_factory.mktemp("suffixed")
    return driver.run_serve_bench(zoo_pair, SUFFIXED, out, cpu_hooks()), out


def test_a_suffixed_variant_is_a_bench_variant_of_its_own(suffixed_run):
    """``ours@async`` has its own server, cells, interleaved runs, files and ratios, printed by name; the plain
    names keep their keys."""
    result, out = suffixed_run
    assert result["status"] == "complete", result["problems"]
    assert result["async_scheduling"]["per_variant"] == {"upstream_v1": False, "ours": False, "ours@async": True}
    assert list(result["variants"]) == ["upstream_v1", "ours", "ours@async"]
    assert result["variants"]["ours@async"]["serve_args"].count("--async-scheduling") == 1
    assert "--no-async-scheduling" in result["variants"]["ours"]["serve_args"]
    assert result["placement"]["servers"] == 3 and (out / "server_ours@async.log").exists()
    for r in range(2):
        assert sorted(run["variant"] for run in result["order"] if run["round"] == r and run["concurrency"] == 1) == [
            "ours", "ours@async", "upstream_v1"]
    assert all(result["cells"]["ours@async"][c]["runs"] == 2 for c in (C1, C2))
    for key in ("ours_over_upstream_v1", "ours@async_over_upstream_v1", "ours@async_over_ours"):
        assert all(result[key][c]["output_tok_s"] > 0 and result[key][c]["paired_output_tok_s"]["passes"] == 2
                   for c in (C1, C2)), key
    assert "ours_over_mrv2" not in result
    table = (out / "serve_bench.txt").read_text()
    assert "async scheduling (off): upstream_v1 off, ours off, ours@async on" in table
    assert "\n  ours@async_over_upstream_v1: c=1: tok/s " in table and "\n  ours@async_over_ours: c=1: " in table
    assert any(line.split()[1:2] == ["ours@async"] for line in table.splitlines())
    assert (out / "serve_bench.png").stat().st_size > 10_000


def test_a_server_that_ignored_its_suffix_makes_the_report_incomplete(zoo_pair, tmp_path):
    """The readback bites: ``ours@async``'s server says it ran without async scheduling (as a server that dropped
    the flag would), and the report names it."""
    launch = fake_launcher()

    def ignoring(server, port, log):
        return launch(replace(server, async_scheduling="off") if server.variant == "ours@async" else server, port, log)
    settings = replace(SUFFIXED, rounds=1, concurrency=(1,))
    result = driver.run_serve_bench(zoo_pair, settings, tmp_path, cpu_hooks(ignoring))
    assert result["status"] == "incomplete"
    assert result["problems"] == ["ours@async: ran with async scheduling False, but ours@async's async scheduling on "
                                  "was asked"]


def test_the_summary_keys_suffixed_ratios_beside_the_plain_ones(suffixed_run, tmp_path, capsys):
    result, out = suffixed_run
    summary = combine.combine([result, result], ["a", "b"])
    assert summary["ours_over_mrv2"] == {} and summary["problems"] == []
    for key in ("ours_over_upstream_v1", "ours@async_over_upstream_v1", "ours@async_over_ours"):
        pooled = summary[key]["llama_eagle"]["zoo-perfect"][C1]
        assert pooled["output_tok_s"] > 0 and pooled["paired_output_tok_s"]["passes"] == 4, key
    other = json.loads(json.dumps(result))
    other["settings"]["async_scheduling"] = "default"
    with pytest.raises(PortableSpecError, match=r"another workload \(async_scheduling\)"):
        combine.combine([result, other], ["a", "b"])
    assert combine.main([str(out), "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "ours@async_over_ours llama_eagle (zoo-perfect) output tok/s: in16/greedy/c1: " in printed
    png = (tmp_path / "serve_bench_summary.png").read_bytes()
    assert len(png) > 10_000
    assert int.from_bytes(png[16:20], "big") == 2 * 7 * 110  # panels over upstream V1 and ours; no empty MRV2 one


def test_the_summary_says_so_when_it_writes_no_png(suffixed_run, tmp_path, capsys, monkeypatch):
    _, out = suffixed_run
    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.split(".")[0] == "matplotlib":
            raise ImportError("No module named 'matplotlib'")
        return real_import(name, *args, **kwargs)
    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    assert combine.main([str(out), "--out", str(tmp_path / "s")]) == 0
    assert not (tmp_path / "s" / "serve_bench_summary.png").exists()
    assert capsys.readouterr().err.strip() == combine.NO_PNG


def test_ratio_pairs_keep_the_plain_keys_and_add_each_suffixed_one():
    assert plan.ratio_pairs(["upstream_v1", "ours", "mrv2"]) == {"ours_over_upstream_v1": ("ours", "upstream_v1"),
                                                                  "ours_over_mrv2": ("ours", "mrv2")}
    assert list(plan.ratio_pairs(["upstream_v1", "upstream_v1@async", "ours@async"])) == [
        "ours@async_over_upstream_v1", "ours@async_over_upstream_v1@async", "upstream_v1@async_over_upstream_v1"]
    assert plan.ratio_pairs(["upstream_v1", "mrv2"]) == {}
    # vLLM 0.33.0's draft model: MRV2 on our platform (our graphed speculator) over MRV2 on vLLM's.
    assert plan.ratio_pairs(["mrv2", "ours_mrv2"]) == {"ours_mrv2_over_mrv2": ("ours_mrv2", "mrv2")}


def test_the_probe_class_is_a_worker_extension_vllm_accepts():
    from vllm.v1.worker.gpu_worker import Worker

    methods = [m for m in dir(worker_extension.ServeBenchWorkerExtension) if not m.startswith("__")]
    assert "portable_spec_bench_clock_start" in methods and "portable_spec_soak_facts" in methods
    assert not any(hasattr(Worker, m) for m in methods)  # vLLM's clash check in WorkerWrapperBase.init_worker


# ------------------------------------------------------------------------------------------------ the probe
class Worker:
    class vllm_config:
        use_v2_model_runner = False


def test_the_clock_probe_hooks_vllms_engine_step_and_restores_everything():
    import vllm.v1.engine.core as core

    original = core.EngineCoreProc.__dict__["_process_engine_step"]
    worker = Worker()
    begun = worker_extension.start(worker, "clock")
    assert begun["installed"] > 0 and not any("EngineCoreProc" in s for s in begun["skipped"])
    assert core.EngineCoreProc.__dict__["_process_engine_step"] is not original
    assert "already running" in worker_extension.start(worker, "profile")["error"]
    assert "no profile measurement" in worker_extension.stop(worker, "profile")["error"]
    summary = worker_extension.stop(worker, "clock")
    assert "never ran" in summary["error"]  # no engine step happened: an error, not a division by zero
    assert core.EngineCoreProc.__dict__["_process_engine_step"] is original


def test_the_profile_probe_reads_a_real_torch_profile():
    import torch

    from portable_spec_harness.vllm_door.profile_scopes import STEP

    worker = Worker()
    assert worker_extension.start(worker, "profile")["kind"] == "profile"
    for _ in range(3):
        with torch.profiler.record_function(STEP):
            torch.ones(64).add_(1)
    summary = worker_extension.stop(worker, "profile")
    assert summary["steps"] == 3 and summary["runner"] == "v1" and "per_step" not in summary


def test_the_served_clock_divides_by_busy_time_only():
    from portable_spec_harness.vllm_door.profile_scopes import ENGINE_STEP, STEP

    clock, now = ticking_clock()
    for _ in range(4):
        with clock.scope(ENGINE_STEP):
            with clock.scope(STEP):
                now[0] += 0.003
        now[0] += 1.0  # idle: waiting for the next request
    out = worker_extension.served_summary(clock)
    assert out["steps"] == 4 and out["step_wall_ms"] == pytest.approx(3.0) and out["busy_s"] == pytest.approx(0.012)


def test_the_split_is_the_device_share_of_the_real_step():
    clock = {"step_wall_ms": 10.0, "phases": {p: {"wall_ms": 1.0} for p in report.PHASES}}
    profile = {"device_ms": 6.0, "phases": {p: {"device_ms": 0.5, "launches": 2} for p in report.PHASES},
               "unattributed": {"launches": 1}}
    s = report.split(clock, profile)
    assert (s["device_busy_share"], s["gpu_waits_share"], s["host_only_ms"]) == (0.6, 0.4, 4.0)
    assert s["launches_per_step"] == 2 * len(report.PHASES) + 1
    assert "error" in report.split(clock, {"error": "no step scope"})
    assert "error" in report.split(None, profile)


def test_a_server_that_ran_another_drafter_than_its_label_is_a_problem():
    ours = {"runner": "x", "drafter": "vllm.v1.spec_decode.eagle.EagleProposer", "use_v2_model_runner": False}
    assert "not ours" in report.identity_problems("ours", [ours])[0]
    mine = {"runner": "x", "drafter": "portable_spec.vllm_adapter.spec_decode.proposer.P", "replays": {"a": 3},
            "use_v2_model_runner": False}
    assert "did not replay" in report.identity_problems("ours", [mine, mine])[0]
    assert report.identity_problems("ours", [mine, {**mine, "replays": {"a": 9}}]) == []
    # in turn: a carried server (its count from an earlier call) then a fresh one: each server's rise counts
    carried, fresh = ({**mine, "replays": {"a": n}} for n in (90, 2))
    assert report.identity_problems("ours", [carried, {**carried, "replays": {"a": 95}}, fresh,
                                             {**fresh, "replays": {"a": 7}}]) == []
    assert "did not replay" in report.identity_problems("ours", [carried, carried, fresh, fresh])[0]
    assert report.identity_problems("mrv2", [{"runner": "x", "use_v2_model_runner": False}])
    upstream = {"runner": "x", "drafter": "vllm.v1.spec_decode.eagle.EagleProposer", "use_v2_model_runner": False}
    assert report.identity_problems("upstream_v1", [{**upstream, "platform": "vllm.platforms.cuda.CudaPlatform"}]) == []
    assert "platform" in report.identity_problems(
        "upstream_v1", [{**upstream, "platform": "portable_spec.vllm_adapter.platform.cuda.PortableCudaPlatform"}])[0]
    assert report.identity_problems("upstream_v1", [{"error": "no answer"}]) == ["upstream_v1: no facts from its "
                                                                                  "server's probe"]


def test_mrv2_on_our_platform_is_judged_on_its_runner_and_our_standalone_speculators_replays():
    from portable_spec_harness.e2e.mrv2_checks import GRAPHED_STANDALONE, VLLM_STANDALONE

    ours_platform = "portable_spec.vllm_adapter.platform.cuda.PortableCudaPlatform"
    mine = {"runner": "x", "drafter": None, "use_v2_model_runner": True, "platform": ours_platform,
            "speculator": GRAPHED_STANDALONE, "speculator_replays": {"1": 4, "2": 1}, "speculator_eager_loops": 3,
            "speculator_prefill_replays": {"5": 2}, "speculator_eager_prefills": 6}
    assert report.identity_problems("ours_mrv2", [mine, {**mine, "speculator_replays": {"1": 9, "2": 1}}]) == []
    # K = 1 (no decode steps): step 0's replays alone show the graphs ran.
    assert report.identity_problems("ours_mrv2", [mine, {**mine, "speculator_prefill_replays": {"5": 3}}]) == []
    # The bug it guards: our speculator built, every step-0 pass and decode loop eager during the runs.
    assert report.identity_problems("ours_mrv2", [mine, mine]) == [
        "ours_mrv2: our standalone speculator's graphs did not replay during the runs (6 eager step-0 passes, "
        "3 eager decode loops)"]
    assert report.identity_problems("ours_mrv2", [{**mine, "use_v2_model_runner": False}] * 2) == [
        "ours_mrv2: its server ran the V1 runner"]
    assert "ran on platform vllm." in report.identity_problems(
        "ours_mrv2", [{**mine, "platform": "vllm.platforms.cuda.CudaPlatform"}] * 2)[0]
    # MRV2's own speculators on our platform (EAGLE's) count no replays: the runner and platform decide.
    eagle = {**mine, "speculator": "vllm.v1.worker.gpu.spec_decode.x.TargetDependentARSpeculator",
             "speculator_replays": None}
    assert report.identity_problems("ours_mrv2", [eagle, eagle]) == []
    # On vLLM's platform the draft model's speculator is vLLM's eager one: judged as MRV2, no replay asked.
    theirs = {**mine, "platform": "vllm.platforms.cuda.CudaPlatform", "speculator": VLLM_STANDALONE,
              "speculator_replays": None}
    assert report.identity_problems("mrv2", [theirs, theirs]) == []


def test_a_server_at_another_tensor_parallel_than_asked_is_a_problem():
    mine = {"runner": "x", "drafter": "portable_spec.vllm_adapter.spec_decode.proposer.P", "use_v2_model_runner": False,
            "replays": {"a": 3}, "tensor_parallel_size": 2}
    assert report.identity_problems("ours", [mine, {**mine, "replays": {"a": 9}}], tp=2) == []
    assert "tensor parallel 2, not the 1 asked" in report.identity_problems("ours", [mine, mine])[0]
    assert "tensor parallel 1, not the 2 asked" in report.identity_problems(
        "ours", [{**mine, "tensor_parallel_size": 1}] * 2, tp=2)[0]


# ------------------------------------------------------------------------------------------------ memory, pairs
def test_the_memory_estimate_at_llama_31_8b_shapes():
    assert memory.kv_bytes_per_token(LLAMA_31_8B) == 32 * 2 * 8 * 128 * 2
    assert memory.param_count(LLAMA_31_8B) == pytest.approx(8.03e9, rel=0.01)
    per = memory.server_bytes(memory.param_count(LLAMA_31_8B) * 2, 3 << 30)
    assert memory.placement(3, per, 79 * memory.GIB)["mode"] == "together"
    assert memory.placement(3, per, 60 * memory.GIB)["mode"] == "in_turn"
    assert memory.placement(3, per, 60 * memory.GIB, asked="together")["mode"] == "together"
    assert memory.weights_bytes("/nonexistent", LLAMA_31_8B)[1] == "config"


QWEN3_30B_A3B = {"architectures": ["Qwen3MoeForCausalLM"], "hidden_size": 2048, "num_hidden_layers": 48,
                 "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128, "vocab_size": 151936,
                 "num_experts": 128, "moe_intermediate_size": 768, "tie_word_embeddings": False,
                 "torch_dtype": "bfloat16"}


def test_the_memory_estimate_at_tp2_is_per_gpu():
    """At TP=2 every server spans both GPUs: a rank holds half the weights and half the KV heads (MLA's latent and
    a lone KV head whole, as vLLM replicates them), so three Qwen3-30B-A3B-shaped servers that need one server at a
    time on one 139 GiB H200 fit together on two, and still do not on two with 60 GiB free each."""
    assert memory.kv_bytes_per_token(LLAMA_31_8B, tp=2) == memory.kv_bytes_per_token(LLAMA_31_8B) // 2
    assert memory.kv_bytes_per_token({**LLAMA_31_8B, "num_key_value_heads": 1}, tp=2) == 32 * 2 * 1 * 128 * 2
    mla = {"num_hidden_layers": 4, "kv_lora_rank": 512, "qk_rope_head_dim": 64}
    assert memory.kv_bytes_per_token(mla, tp=2) == memory.kv_bytes_per_token(mla) == 4 * 576 * 2
    kv1 = memory.kv_cache_bytes(QWEN3_30B_A3B, LLAMA_31_8B, 1408, 32)
    kv2 = memory.kv_cache_bytes(QWEN3_30B_A3B, LLAMA_31_8B, 1408, 32, tp=2)
    assert kv2 == pytest.approx(kv1 / 2, rel=0.01)
    weights = memory.param_count(QWEN3_30B_A3B) * 2
    assert 56 * memory.GIB < weights < 58 * memory.GIB
    one, two = memory.server_bytes(weights, kv1), memory.server_bytes(weights, kv2, tp=2)
    assert two < one / 2 + memory.OVERHEAD_BYTES
    h200 = 139 * memory.GIB
    assert memory.placement(3, one, h200)["mode"] == "in_turn"
    at_tp2 = memory.placement(3, two, h200, tp=2)
    assert at_tp2["mode"] == "together" and at_tp2["tensor_parallel_size"] == 2 and at_tp2["per"] == "GPU"
    assert memory.placement(3, two, 60 * memory.GIB, tp=2)["mode"] == "in_turn"


def test_the_free_memory_is_the_least_among_the_gpus_a_server_spans():
    reading = {"count": 3, "free_bytes": 90, "devices": [{"free_bytes": 90}, {"free_bytes": 40}, {"free_bytes": 10}]}
    assert memory.free_on(reading, 1) == 90 and memory.free_on(reading, 2) == 40 and memory.free_on(reading, 3) == 10
    assert memory.free_on(reading, 4) is None  # no reading of a GPU the servers would use
    assert memory.free_on({"name": "cpu-test", "free_bytes": None}, 1) is None
    assert "'devices'" in memory.DEVICE_QUERY and "mem_get_info(i)" in memory.DEVICE_QUERY


def test_a_tp2_benchmark_places_by_both_gpus_starts_every_server_at_tp2_and_reports_it(zoo_pair, tmp_path):
    from portable_spec_harness.parallel import Parallel

    started = []
    launch = fake_launcher()

    def seen(server, port, log):
        started.append(server)
        return launch(server, port, log)
    two = {"name": "cpu-test", "count": 2, "free_bytes": 100 * memory.GIB,
           "devices": [{"free_bytes": 100 * memory.GIB}, {"free_bytes": 7 * memory.GIB}]}
    parallel = Parallel(2, True, True)
    settings = Settings(**{**FAST, "rounds": 1, "concurrency": (1,), "parallel": parallel})
    hooks = Hooks(launch=seen, device=lambda: two, host=lambda: CPU_TEST_HOST, say=lambda line: None)
    result = driver.run_serve_bench(zoo_pair, settings, tmp_path, hooks)
    assert result["status"] == "complete", result["problems"]
    assert started and all(s.parallel == parallel for s in started)
    assert result["settings"]["parallel"]["tensor_parallel_size"] == 2
    assert result["tensor_parallel"] == parallel.as_json()
    assert result["placement"]["free_gib"] == 7.0 and result["placement"]["tensor_parallel_size"] == 2
    assert all("--tensor-parallel-size" in v["serve_args"] for v in result["variants"].values())
    text = (tmp_path / "serve_bench.txt").read_text()
    assert "TP=2" in text.splitlines()[0]
    # the served phase clock times the engine core's busy loop, which holds the worker only at TP=1
    assert result["phase_clock"] == {} and result["settings"]["phase_clock"] is False
    assert result["phase_clock_skipped"] == driver.PHASE_CLOCK_NEEDS_TP1 and "phase clock: skipped at TP=2" in text
    one = {**two, "count": 1, "devices": two["devices"][:1]}
    with pytest.raises(PortableSpecError, match="--tp 2 needs 2 GPUs; 1 visible"):
        driver.run_serve_bench(zoo_pair, settings, tmp_path / "one",
                               Hooks(launch=seen, device=lambda: one, host=lambda: CPU_TEST_HOST))


def test_pair_folders_read_pair_json_or_the_zoo_manifest_and_name_whats_missing(tmp_path, zoo_pair):
    folder = tmp_path / "p"
    folder.mkdir()
    (folder / "target").symlink_to(zoo_pair.target)
    with pytest.raises(PortableSpecError, match="no draft model folder"):
        pairs.from_folder(folder)
    (folder / "draft").symlink_to(zoo_pair.draft)
    plain = pairs.from_folder(folder)
    assert (plain.method, plain.k, plain.moe, plain.mode) == ("eagle", 3, False, "as-built")
    (folder / "pair.json").write_text(json.dumps({"name": "x8b", "mode": "dummy", "method": "eagle3",
                                                  "num_speculative_tokens": 4, "serve_args": ["--load-format", "dummy"],
                                                  "env": {"A": "1"}}))
    spec = pairs.from_folder(folder)
    assert (spec.name, spec.mode, spec.method, spec.k, spec.serve_args) == ("x8b", "dummy", "eagle3", 4,
                                                                          ("--load-format", "dummy"))
    assert servers.serve_args(servers.BenchServer("ours", spec, 640, 8, 1 << 30), 1)[-2:] == ["--load-format", "dummy"]
    (folder / "pair.json").write_text(json.dumps({"method": "medusa"}))
    with pytest.raises(PortableSpecError, match="method 'medusa' unknown"):
        pairs.from_folder(folder)
    with pytest.raises(PortableSpecError, match="neither a prepared pair folder"):
        pairs.resolve("no_such_pair", None, None, tmp_path)


def served(pair: pairs.BenchPair) -> tuple[object, dict[str, str]]:
    """What a bench server gets from ``pair``: vLLM's own parse of its command line, and its environment."""
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.entrypoints.openai.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    server = servers.BenchServer("ours", pair, 640, 8, 1 << 30)
    args = make_arg_parser(FlexibleArgumentParser()).parse_args(servers.serve_args(server, 8123))
    args.model = args.model_tag  # as ``vllm serve`` does with its positional model
    return AsyncEngineArgs.from_cli_args(args), servers.server_env(server)


def test_real_shapes_pairs_reach_the_servers_with_their_load_format_plugin_and_head(vllm_platform, tmp_path):
    """Both modes of a small real_shapes pair, built by its own builder and read through its own readers: the
    servers get ``--load-format dummy`` (dummy) or the designed loader's format, its plugin first on PYTHONPATH and
    the chosen head's draft folder (designed); dropping the load format is caught."""
    from dataclasses import replace

    from portable_spec_harness import real_shapes
    from portable_spec_harness.real_shapes import plugin
    from portable_spec_harness.real_shapes.design import FORMAT

    dummy_dir = real_shapes.build_pair("llama8b_eagle3", "dummy", tmp_path / "dummy", scale="small")
    dummy = pairs.resolve(str(dummy_dir), None, 3, tmp_path)
    engine, env = served(dummy)
    assert (engine.load_format, dummy.mode, dummy.source, dummy.method) == ("dummy", "dummy", "real_shapes", "eagle3")
    assert engine.model == str(dummy_dir.resolve() / "target") and dummy.draft == str(dummy_dir.resolve() / "draft")
    assert engine.speculative_config["model"] == dummy.draft and plugin.ENTRY_POINT not in env.get("PYTHONPATH", "")
    assert served(replace(dummy, serve_args=()))[0].load_format != "dummy"  # the check bites on a dropped format

    designed_dir = real_shapes.build_pair("llama8b_eagle3", "designed", tmp_path / "designed", scale="small")
    compared = 0
    for head in (None, "perfect", "partial"):
        designed = pairs.resolve(str(designed_dir), None, 4, tmp_path, head)
        engine, env = served(designed)
        want = designed_dir.resolve() / f"draft_{head or 'perfect'}"
        assert engine.load_format == FORMAT and designed.mode == f"designed-{head or 'perfect'}"
        assert engine.speculative_config == {"method": "eagle3", "model": str(want), "num_speculative_tokens": 4}
        first = Path(env["PYTHONPATH"].split(__import__("os").pathsep)[0])
        assert (first / plugin.DIST_INFO / "entry_points.txt").read_text().count(plugin.ENTRY_POINT) == 1
        assert served(replace(designed, serve_args=()))[0].load_format != FORMAT
        assert plugin.ENTRY_POINT not in served(replace(designed, env={}))[1].get("PYTHONPATH", "")
        compared += 1
    assert compared == 3
    with pytest.raises(PortableSpecError, match="no 'full' head; use one of perfect, partial"):
        pairs.resolve(str(designed_dir), None, 3, tmp_path, "full")
    with pytest.raises(PortableSpecError, match="only a real_shapes pair has heads"):
        pairs.resolve("llama_eagle", None, None, tmp_path / "zoo", "perfect")


def test_the_draft_model_pair_resolves_by_name_in_both_modes_on_the_v1_runner(vllm_platform, tmp_path):
    """``--pair llama8b_draft1b`` (the name: built at real scale under the work dir): vLLM parses ``draft_model``
    with the draft folder ``--head`` picks, the pair's load format, and the designed loader's plugin for designed."""
    from portable_spec_harness.real_shapes import plugin
    from portable_spec_harness.real_shapes.design import FORMAT

    dummy = pairs.resolve("llama8b_draft1b", "dummy", None, tmp_path)
    engine, env = served(dummy)
    assert (dummy.method, dummy.runner, dummy.mode, dummy.source, engine.load_format) == (
        "draft_model", "v1", "dummy", "real_shapes", "dummy")
    assert engine.speculative_config == {"method": "draft_model", "model": dummy.draft, "num_speculative_tokens": 3}
    assert dummy.draft.endswith("/draft") and plugin.ENTRY_POINT not in env.get("PYTHONPATH", "")
    assert dummy.shapes["draft"]["num_hidden_layers"] == 16 and dummy.shapes["draft"]["hidden_size"] == 2048
    for head in ("perfect", "partial"):
        designed = pairs.resolve("llama8b_draft1b", "designed", 4, tmp_path, head)
        engine, env = served(designed)
        assert designed.draft.endswith(f"/draft_{head}") and designed.mode == f"designed-{head}"
        assert (designed.method, designed.runner, engine.load_format) == ("draft_model", "v1", FORMAT)
        assert engine.speculative_config == {"method": "draft_model", "model": designed.draft,
                                             "num_speculative_tokens": 4}
        assert env["PYTHONPATH"].split(__import__("os").pathsep)[0].endswith(plugin.DEFAULT_ROOT.name)


def test_a_bad_head_exits_2_with_one_line(tmp_path, capsys):
    from portable_spec_harness import real_shapes
    from portable_spec_harness.serve_bench import __main__ as cli

    folder = real_shapes.build_pair("llama8b_eagle3", "designed", tmp_path / "designed", scale="small")
    assert cli.main(["--pair", str(folder), "--head", "full", "--out", str(tmp_path / "o")]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "no 'full' head; use one of perfect, partial" in lines[0]


@pytest.mark.parametrize("argv,fragment", [
    (["--input-len", "128,x"], "--input-len takes comma-separated integers, got '128,x': e.g. --input-len 128,1024"),
    (["--input-len", "128,0"], "--input-len needs integers >= 1"),
    (["--input-len", "128,128"], "--input-len lists a value twice"),
    (["--sampling", "greedy,hot"], "--sampling 'greedy,hot': use greedy or sampled"),
    (["--sampling", "sampled,sampled"], "--sampling lists a mode twice"),
    (["--temperature", "0.8"], "--temperature is gone: pass --sampling greedy or sampled"),
    (["--min-run-s", "-1"], "--min-run-s must be >= 0"),
    (["--max-prompts", "0"], "--max-prompts must be >= 1"),
    (["--variants", "ours,ours@fast"], "ours@fast's suffix is unknown: end it in @async (--async-scheduling on) or "
                                       "@sync (--async-scheduling off), or in nothing"),
    (["--variants", "ours,ours@"], "ours@'s suffix is unknown"),
    (["--variants", "ours,ours@async,ours@async"], "names a variant twice: list each once"),
    (["--variants", "ours,ours@async", "--async-scheduling", "on"],
     "ours and ours@async are the same server under --async-scheduling on: drop one"),
    (["--variants", "upstream_v1,sglang@async"], "use some of upstream_v1, ours, mrv2, ours_mrv2, each with an "
                                                 "optional @async or @sync"),
    (["--keep-servers", "kept.json"], "the phase clock's profiler pass can slow a server afterwards: add "
                                      "--no-phase-clock"),
])
def test_bad_axis_or_variant_input_exits_2_with_one_line(argv, fragment, tmp_path, capsys):
    from portable_spec_harness.serve_bench import __main__ as cli

    assert cli.main(["--pair", "llama_eagle", "--out", str(tmp_path / "o"), *argv]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("portable-spec: error:") and fragment in lines[0], lines
    assert captured.out == "" and not (tmp_path / "o").exists()


# ------------------------------------------------------------------------------------------------ kept servers
def test_kept_servers_stand_in_for_the_next_calls_boots_and_one_that_differs_boots_again(zoo_pair, tmp_path):
    """Call 1 keeps its three servers running; call 2 (the next round) uses two of them with no boot, stops the
    third, whose registry entry no longer matches the server call 2 would boot, boots that one, and keeps all three;
    call 3 runs two variants on call 1's servers, stops the third (nothing else would) and keeps nothing, so every
    server ends stopped. Each call's folder has every server's whole log and its JIT verdict."""
    launched, hooks = adopting_hooks()
    registry = tmp_path / "kept.json"
    one = driver.run_serve_bench(zoo_pair, Settings(**{**FAST, "rounds": 1}, phase_clock=False,
                                                    keep_servers=str(registry)), tmp_path / "call1", hooks)
    assert one["status"] == "complete", one["problems"]
    assert len(launched) == 3 and all(h.alive() for *_, h in launched)  # left running
    kept = json.loads(registry.read_text())
    assert kept["kind"] == kept_servers.KIND and sorted(kept["servers"]) == ["mrv2", "ours", "upstream_v1"]
    assert one["kept_servers"] == {"registry": str(registry), "variants": ["mrv2", "ours", "upstream_v1"]}
    # The device reading counts the kept servers' memory as taken: the placement counts it free again.
    settings = Settings(**{**FAST, "rounds": 1}, phase_clock=False, reuse_servers=str(registry))
    per = driver.Bench(zoo_pair, settings, tmp_path / "plan0", hooks)
    per.plan_servers()
    gib = per.record["placement"]["per_server_gib"] * memory.GIB
    tight = replace(hooks, device=lambda: {"name": "cpu-test", "free_bytes": int(1.5 * gib)})
    for reuse, mode in ((None, "in_turn"), (str(registry), "together")):
        bench = driver.Bench(zoo_pair, replace(settings, reuse_servers=reuse), tmp_path / f"plan-{mode}", tight)
        bench.plan_servers()
        assert bench.record["placement"]["mode"] == mode, bench.record["placement"]
    assert bench.record["placement"]["kept_servers_counted_free"] == 3
    kept["servers"]["mrv2"]["fingerprint"]["serve_args"].append("--enforce-eager")  # no longer call 2's server
    registry.write_text(json.dumps(kept))
    stale = hooks.adopt(kept["servers"]["mrv2"])
    again = tmp_path / "kept2.json"
    two = driver.run_serve_bench(zoo_pair, Settings(**{**FAST, "rounds": 1}, first_round=1, phase_clock=False,
                                                    reuse_servers=str(registry), keep_servers=str(again)),
                                 tmp_path / "call2", hooks)
    assert two["status"] == "complete", two["problems"]
    assert [v for v, *_ in launched] == ["upstream_v1", "ours", "mrv2", "mrv2"] and not stale.alive()
    assert sum(h.alive() for *_, h in launched) == 3 and "kept_servers_stopped" not in two
    three = driver.run_serve_bench(zoo_pair, Settings(**{**FAST, "rounds": 1}, first_round=2, phase_clock=False,
                                                      variants=("upstream_v1", "ours"), reuse_servers=str(again)),
                                   tmp_path / "call3", hooks)
    assert three["status"] == "complete", three["problems"]
    assert len(launched) == 4 and three["kept_servers_stopped"] == ["mrv2"]  # call 3 runs no mrv2: stopped
    for variant in ("upstream_v1", "ours"):
        (boot,) = two["variants"][variant]["boots"]
        assert boot["ready"] and boot["seconds"] == 0.0 and boot["reused"]["registry"] == str(registry)
        assert boot["reused"]["first_boot"] == one["variants"][variant]["boots"][0]
        assert "not_reused" not in two["variants"][variant]
    assert two["variants"]["mrv2"]["not_reused"] == "its vllm serve arguments differ"
    assert "reused" not in two["variants"]["mrv2"]["boots"][0]
    assert [b["reused"]["first_boot"] for b in (three["variants"][v]["boots"][0] for v in ("upstream_v1", "ours"))] \
        == [one["variants"][v]["boots"][0] for v in ("upstream_v1", "ours")]  # the first boot, kept through call 2
    assert not any(h.alive() for *_, h in launched) and "kept_servers" not in three
    for out, report_ in ((tmp_path / "call1", one), (tmp_path / "call2", two)):
        for variant in ("upstream_v1", "ours", "mrv2"):
            log = (out / f"server_{variant}.log").read_text()
            assert MONITOR_LINE in log and report_["variants"][variant]["jit_after_boot"] == []
    assert all(two["cells"][v][C1]["runs"] == 1 for v in ("upstream_v1", "ours", "mrv2"))


def test_a_kept_server_is_matched_on_code_and_environment_and_adopted_only_while_alive(tmp_path, zoo_pair):
    """The fingerprint's parts each refuse a stand-in; a kept process that ended is not adopted; an adopted one is
    stopped through its process group."""
    server = servers.BenchServer("ours", zoo_pair, 512, 2, 1 << 20, "default", driver.Parallel())
    wanted = kept_servers.fingerprint(server, "code-a")
    assert kept_servers.mismatch({"fingerprint": wanted}, wanted) is None
    assert kept_servers.mismatch({"fingerprint": {**wanted, "code": "code-b"}}, wanted) == \
        "the code changed since it booted"
    other_env = {**wanted, "env": {**wanted["env"], "VLLM_PLATFORM": "elsewhere"}}
    assert kept_servers.mismatch({"fingerprint": other_env}, wanted) == "its environment differs (VLLM_PLATFORM)"
    assert kept_servers.mismatch({}, wanted) == "the code changed since it booted"
    assert "SERVE_BENCH_FIRST_ROUND" not in wanted["env"] and "OUT" not in wanted["env"]
    done = subprocess.Popen(["true"])
    done.wait()
    assert kept_servers.adopt({"pid": done.pid}) is None and kept_servers.adopt({}) is None
    sleeper = subprocess.Popen(["sleep", "60"], start_new_session=True)
    adopted = kept_servers.adopt({"pid": sleeper.pid})
    assert adopted is not None and adopted.alive()
    adopted.stop()
    assert sleeper.wait(10) is not None and not adopted.alive()
    assert kept_servers.read(tmp_path / "missing.json") == {}
    (tmp_path / "other.json").write_text('{"kind": "something else", "servers": {"ours": {}}}')
    assert kept_servers.read(tmp_path / "other.json") == {}


def test_a_servers_environment_is_the_one_the_bench_started_with_so_a_kept_ones_fingerprint_holds(zoo_pair,
                                                                                                 monkeypatch):
    """The GPU host's refusal ("its environment differs (PYTORCH_NVML_BASED_CUDA_CHECK, TORCHINDUCTOR_CACHE_DIR,
    ...)"): importing vLLM / torch in the bench process writes such variables into its ``os.environ``, call 1 took its
    registry's fingerprint at its end (after those imports) and call 2 at its boot (before). A server's environment,
    launched and fingerprinted alike, is the one the bench process was started with: what it set since is gone, what
    it changed or dropped since has its value at start back."""
    started = vllm_serve.start_environ()
    if started is None:
        pytest.skip("no /proc/self/environ: the start environment is unknown and the live one is used, as before")
    server = servers.BenchServer("ours", zoo_pair, 512, 2, 1 << 20, "default", driver.Parallel())
    at_boot, env_at_boot = kept_servers.fingerprint(server, "code-a"), servers.server_env(server)
    inherited = next(k for k in ("PYTHONPATH", "PATH", "HOME") if k in started)  # run with PYTHONPATH=... at start
    for key, value in (("TORCHINDUCTOR_COMPILE_THREADS", "5"), ("TRITON_CACHE_AUTOTUNING", "5"),
                       ("PORTABLE_SPEC_SET_SINCE_START", "1"), (inherited, "/set/since/start")):
        monkeypatch.setenv(key, value)
    at_end = kept_servers.fingerprint(server, "code-a")
    assert at_end == at_boot and kept_servers.mismatch({"fingerprint": at_boot}, at_end) is None
    env = servers.server_env(server)
    assert env == env_at_boot and env[inherited] == started[inherited] and "PORTABLE_SPEC_SET_SINCE_START" not in env
    assert all(env.get(k) == started.get(k) for k in ("TORCHINDUCTOR_COMPILE_THREADS", "TRITON_CACHE_AUTOTUNING"))
    monkeypatch.delenv(inherited)
    assert servers.server_env(server) == env_at_boot


def test_the_harness_explicit_server_env_stays_whatever_the_bench_set_since_it_started(zoo_pair, monkeypatch):
    """``without_drift`` undoes only what a server inherited: the compile cache of its own, dev mode (the live value
    equal to the harness's own), the pair's environment, a variant's switch and the ones it drops stay as the harness
    makes them."""
    pair = replace(zoo_pair, env={"PORTABLE_SPEC_PAIR_SWITCH": "on"})
    server = servers.BenchServer("ours", pair, 512, 2, 1 << 20, "default", driver.Parallel())
    for key, value in (("VLLM_CACHE_ROOT", "/set/since/start"), ("VLLM_SERVER_DEV_MODE", "1"),
                       ("PORTABLE_SPEC_PAIR_SWITCH", "on"), ("VLLM_PLATFORM", "elsewhere"),
                       ("VLLM_ENABLE_V1_MULTIPROCESSING", "0")):
        monkeypatch.setenv(key, value)
    env = servers.server_env(server)
    assert env["VLLM_CACHE_ROOT"] == "/tmp/portable_spec_vllm_cache/serve-bench-ours"
    assert (env["VLLM_SERVER_DEV_MODE"], env["PORTABLE_SPEC_PAIR_SWITCH"], env["VLLM_PLATFORM"]) == ("1", "on", "cuda")
    assert "VLLM_ENABLE_V1_MULTIPROCESSING" not in env
    assert "VLLM_PLATFORM" not in servers.server_env(replace(server, variant="upstream_v1"))  # dropped on purpose


_START_PROBE = """
import json, os, sys
from portable_spec_harness import vllm_serve
if sys.argv[1] == "title":  # a process title overwrites the exec-time block (and the command line) before the read
    import setproctitle
    setproctitle.setproctitle("VLLM::EngineCore")
os.environ.update(SET_SINCE="1", AT_START="changed")
del os.environ["GONE"]
env = {"KEEP": "1", "SET_SINCE": "1", "AT_START": "changed"}
print(json.dumps([vllm_serve.start_environ() is not None, vllm_serve.environ_drift(), vllm_serve.without_drift(env)]))
"""


@pytest.mark.parametrize("title", [False, True])
def test_the_start_environment_is_the_exec_time_block_and_unknown_once_a_process_title_overwrote_it(title):
    """A fresh interpreter started with a known environment: what it set, changed and dropped since is its drift,
    undone in a server's environment; once a process title (``setproctitle``, as vLLM titles its processes) has
    overwritten the exec-time block, the start is unknown and the environment stays as today (the live one)."""
    if title:
        pytest.importorskip("setproctitle")
    if not Path("/proc/self/environ").exists():
        pytest.skip("no /proc/self/environ")
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "harness")]),
           "AT_START": "1", "GONE": "1"}
    out = subprocess.run([sys.executable, "-c", _START_PROBE, "title" if title else "plain"], env=env, check=True,
                         capture_output=True, text=True).stdout
    known, drift, served = json.loads(out.splitlines()[-1])
    if title:
        assert (known, drift, served) == (False, {}, {"KEEP": "1", "SET_SINCE": "1", "AT_START": "changed"})
    else:
        assert known and {k: drift.get(k, "-") for k in ("SET_SINCE", "AT_START", "GONE")} == \
            {"SET_SINCE": None, "AT_START": "1", "GONE": "1"}
        assert served == {"KEEP": "1", "AT_START": "1", "GONE": "1"}


# ------------------------------------------------------------------------------------------------ combine
def test_a_call_short_of_rounds_is_made_up_only_by_the_rounds_pooled_with_it(clean_run):
    """One benchmark split over calls: the first ran 1 of the 3 rounds it asked for, the second the other 2. Pooled,
    the shortfall is made up (kept under ``made_up``, gone from ``problems``); alone, or pooled short, it stays."""
    result, _ = clean_run
    first, second = json.loads(json.dumps(result)), json.loads(json.dumps(result))
    first.update(rounds_asked=3, rounds_done=1, stopped_because="--budget-s 520 would be passed")
    first["runs"] = [r for r in first["runs"] if r["round"] == 0]
    first["problems"] = [report.rounds_short(first), "a failed run"]
    first["settings"]["first_round"] = 0
    second.update(rounds_asked=2, rounds_done=2, problems=[])
    second["settings"]["first_round"] = 1
    pooled = combine.combine([first, second], ["call1", "call2"])
    assert pooled["pairs"]["llama_eagle"]["zoo-perfect"]["rounds"] == 3
    assert pooled["problems"] == ["llama_eagle (zoo-perfect) a failed run"]
    assert pooled["made_up"] == ["llama_eagle (zoo-perfect) call1: 1 of 3 rounds ran (--budget-s 520 would be "
                                 "passed); pooled: 3 rounds"]
    alone = combine.combine([first], ["call1"])
    assert alone["made_up"] == [] and "llama_eagle (zoo-perfect) 1 of 3 rounds ran" in alone["problems"][0]
    second["rounds_done"] = 1
    second["runs"] = [r for r in second["runs"] if r["round"] == 0]
    second["problems"] = [report.rounds_short(second)]
    short = combine.combine([first, second], ["call1", "call2"])
    assert short["made_up"] == [] and len(short["problems"]) == 3  # 2 of the 3 rounds: nothing made up


def _only(result: dict, concurrency: int, rounds: tuple[int, ...] = (0, 1)) -> dict:
    """A copy of a bench report as if its call had run one concurrency (and only the given rounds)."""
    part = json.loads(json.dumps(result))
    key = f"in16/greedy/c{concurrency}"
    part["workload"].update(concurrency=[concurrency], cells=[key], max_num_seqs=concurrency,
                            num_prompts={key: part["workload"]["num_prompts"][key]})
    part["runs"] = [r for r in part["runs"] if r["concurrency"] == concurrency and r["round"] in rounds]
    part["cells"] = {v: {key: cells[key]} for v, cells in part["cells"].items()}
    return part


def test_calls_split_by_concurrency_pool_every_cell_and_a_short_call_is_made_up_only_by_its_own_cells(clean_run):
    """One benchmark split as a lease allows: calls 1-2 run c=1 (1 round, then 2 more), call 3 runs c=2 and stops
    after 1 of its 2 rounds. Pooled, c=2 is kept (it was dropped when the first call's cells alone were pooled), and
    call 3's shortfall stays a problem: the rounds at c=1 do not make up c=2's."""
    result, _ = clean_run
    call1, call2, call3 = _only(result, 1, (0,)), _only(result, 1), _only(result, 2, (0,))
    call1.update(rounds_asked=3, rounds_done=1, stopped_because="--budget-s 545 would be passed")
    call1["problems"] = [report.rounds_short(call1)]
    call2.update(rounds_asked=2, rounds_done=2, problems=[])
    call2["settings"]["first_round"] = 1
    call3.update(rounds_asked=2, rounds_done=1, stopped_because="--budget-s 555 would be passed")
    call3["problems"] = [report.rounds_short(call3)]
    pooled = combine.combine([call1, call2, call3], ["call1", "call2", "call3"])
    entry = pooled["pairs"]["llama_eagle"]["zoo-perfect"]
    assert [entry["cells"]["ours"][c]["runs"] for c in (C1, C2)] == [3, 1]
    assert entry["rounds"] == 1 and entry["rounds_run"] == 4  # what every cell holds; what the calls ran
    assert set(pooled["ours_over_upstream_v1"]["llama_eagle"]["zoo-perfect"]) == {C1, C2}
    assert entry["workload"]["concurrency"] == [1, 2] and entry["workload"]["cells"] == [C1, C2]
    assert entry["workload"]["max_num_seqs"] == 2 and set(entry["workload"]["num_prompts"]) == {C1, C2}
    assert pooled["made_up"] == ["llama_eagle (zoo-perfect) call1: 1 of 3 rounds ran (--budget-s 545 would be "
                                 "passed); pooled: 3 rounds"]
    assert pooled["problems"] == ["llama_eagle (zoo-perfect) 1 of 2 rounds ran (--budget-s 555 would be passed)"]


def test_the_summary_pools_rounds_of_one_workload_and_refuses_to_mix_workloads(clean_run, tmp_path):
    result, out = clean_run
    summary = combine.combine([result, result], ["a", "b"])
    entry = summary["pairs"]["llama_eagle"]["zoo-perfect"]
    assert entry["rounds"] == 4 and entry["cells"]["ours"][C1]["runs"] == 4
    pooled = summary["ours_over_upstream_v1"]["llama_eagle"]["zoo-perfect"][C1]
    assert pooled["output_tok_s"] > 0
    assert pooled["paired_output_tok_s"]["passes"] == 4  # rounds pair within each report: 2 reports x 2 rounds
    other = json.loads(json.dumps(result))
    other["workload"]["output_len"] = 99
    with pytest.raises(PortableSpecError, match="another workload"):
        combine.combine([result, other], ["a", "b"])
    assert combine.main([str(out), "--out", str(tmp_path)]) == 0
    assert (tmp_path / "serve_bench_summary.png").stat().st_size > 10_000


def test_the_committed_reports_written_before_the_axes_still_combine_to_their_committed_summary():
    """Old ``serve_bench.json`` files (one ``input_len``, a ``temperature``, runs keyed by concurrency) are read as
    one input length and greedy: combining the committed real-shape reports again gives the committed summary's
    ratios, now under ``in256/greedy/c<N>``."""
    committed = json.loads((ROOT / "bench/results/2026-11-27-h200-session14/real_shapes_summary/"
                                   "serve_bench_summary.json").read_text())
    sources = [src for modes in committed["pairs"].values() for entry in modes.values() for src in entry["sources"]]
    summary = combine.combine([combine.load(ROOT / src) for src in sources], sources)
    compared = 0
    for base in ("upstream_v1", "mrv2"):
        for pair, modes in committed[f"ours_over_{base}"].items():
            for mode, cells in modes.items():
                for c, r in cells.items():
                    again = summary[f"ours_over_{base}"][pair][mode][f"in256/greedy/c{c}"]
                    assert again["output_tok_s"] == r["output_tok_s"] and again["paired_output_tok_s"]["passes"] > 0
                    compared += 1
    assert compared >= 20


# ------------------------------------------------------------------------------------------------ CLI
@pytest.mark.parametrize("argv,fragment", [
    (["--out", "o"], "--pair"),
    (["--pair", "llama_eagle", "--out", "o", "--concurrency", "1,x"], "comma-separated integers"),
    (["--pair", "llama_eagle", "--out", "o", "--concurrency", "0"], ">= 1"),
    (["--pair", "llama_eagle", "--out", "o", "--variants", "ours,sglang"], "--variants"),
    (["--pair", "llama_eagle", "--out", "o", "--rounds", "0"], "--rounds must be >= 1"),
    (["--pair", "llama_eagle", "--out", "o", "--placement", "sideways"], "--placement"),
    (["--pair", "/no/such/dir_or_pair", "--out", "o"], "neither a prepared pair folder"),
    (["--pair", "llama_eagle", "--out", "o", "--tp", "0"], "--tp must be >= 1"),
    (["--pair", "llama_eagle", "--out", "o", "--no-fuse-allreduce-rms"], "are for --tp 2 or more"),
])
def test_bad_input_exits_2_with_one_line(argv, fragment, tmp_path):
    cmd = [sys.executable, "-m", "portable_spec_harness.serve_bench", *argv]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "harness")])}  # no install needed
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=120, env=env)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("portable-spec: error:") and fragment in lines[0]
    as_json = subprocess.run(cmd + ["--json"], capture_output=True, text=True, cwd=tmp_path, timeout=120, env=env)
    assert as_json.returncode == 2 and json.loads(as_json.stdout)["exit"] == 2


def test_the_cli_prints_one_json_object_and_exits_0_on_a_complete_report(tmp_path, monkeypatch, capsys):
    """``--min-run-s 0``: the default (10 s) sizes each timed run from its warm run to last at least 10 s, up to 1024
    prompts against the fake server, which made this the slowest test of its module (~34 s) for nothing it checks:
    what is checked is the CLI's one JSON line and exit code on a complete report (the sizing has its own tests,
    ``test_prompts_are_sized_from_the_warm_run_capped_and_floored`` and the ``min_run_s`` flag test)."""
    from portable_spec_harness.serve_bench import __main__ as cli

    monkeypatch.setattr(cli, "HOOKS", lambda say: cpu_hooks())
    rc = cli.main(["--pair", "llama_eagle", "--work-dir", str(tmp_path / "zoo"), "--out", str(tmp_path / "o"),
                   "--concurrency", "1", "--rounds", "1", "--input-len", "16", "--output-len", "8",
                   "--prompts-per-slot", "1", "--min-run-s", "0", "--variants", "upstream_v1,ours", "--json"])
    out = capsys.readouterr().out.strip().splitlines()
    assert rc == 0 and len(out) == 1
    headline = json.loads(out[0])
    assert headline["status"] == "complete" and "runs" not in headline
    assert "in16/greedy/c1" in headline["ours_over_upstream_v1"]
    assert "ours_over_mrv2" not in headline


def test_the_fake_server_is_the_soaks(zoo_pair, tmp_path):
    """The bench's CPU runs use the soak's fake, speaking for a bench server (no generation config, its K)."""
    fake = FakeVllm(servers.BenchServer("mrv2", zoo_pair, 640, 8, 1 << 30), 0, tmp_path / "x.log")
    try:
        facts = fake._rpc("portable_spec_soak_facts")
        assert facts["use_v2_model_runner"] and facts["drafter"] is None and fake.step == 1 + zoo_pair.k
    finally:
        fake.stop()


def test_a_clean_run_records_no_compile_and_an_armed_monitor_for_every_variant(clean_run):
    """The server check the GPU run relies on (issue 41): each variant's entry keeps what ``jit_judge`` read from its
    server's log, under the keys the committed reports carry."""
    result, _ = clean_run
    assert set(result["variants"]) == {"upstream_v1", "ours", "mrv2"}
    assert all(entry["jit_after_boot"] == [] and entry["jit_monitor_active"] is True
               for entry in result["variants"].values())


def test_a_compile_or_an_unarmed_monitor_fails_ours_by_its_kind_and_is_only_recorded_for_a_baseline(zoo_pair,
                                                                                                 tmp_path):
    """The driver judges through ``jit_judge``: a compile planted in ``ours@async``'s log and the monitor line
    dropped from ``ours``' each make the run incomplete; upstream's log with both is recorded, not judged."""
    launch = fake_launcher()
    compile_line = COMPILE_LINE.format(kernel="_topk_topp_kernel")

    def planting(server, port, log):
        handle = launch(server, port, log)
        text = log.read_text()
        if server.variant == "ours@async":
            log.write_text(text + compile_line + "\n")
        elif server.variant in ("ours", "upstream_v1"):
            log.write_text(text.replace(MONITOR_LINE + "\n", "")
                           + (compile_line + "\n" if server.variant == "upstream_v1" else ""))
        return handle
    settings = replace(SUFFIXED, rounds=1, concurrency=(1,))
    result = driver.run_serve_bench(zoo_pair, settings, tmp_path, cpu_hooks(planting))
    assert result["status"] == "incomplete"
    assert result["problems"] == [
        "ours: vLLM's JIT monitor never logged 'Kernel JIT monitor activated': zero compile lines prove nothing; see "
        "server_ours.log",
        "ours@async: 1 kernel JIT compile(s) after boot: Triton kernel JIT compilation: _topk_topp_kernel; see "
        "server_ours@async.log"]
    entries = result["variants"]
    assert {v: (e["jit_after_boot"], e["jit_monitor_active"]) for v, e in entries.items()} == {
        "upstream_v1": (["Triton kernel JIT compilation: _topk_topp_kernel"], False),
        "ours": ([], False),
        "ours@async": (["Triton kernel JIT compilation: _topk_topp_kernel"], True)}


def test_the_summary_records_its_tp_refuses_to_pool_two_and_its_plot_title_names_device_and_tp(clean_run):
    """A round at TP=2 is no round of a TP=1 table: pooling the two refuses, and the pooled entry and the PNG's
    title carry the TP (with the device, vLLM and rounds), so a plot read alone says where it was measured."""
    result, _ = clean_run
    summary = combine.combine([result, result], ["a", "b"])
    entry = summary["pairs"]["llama_eagle"]["zoo-perfect"]
    assert entry["tensor_parallel_size"] == report.tensor_parallel_size(result) == 1
    title = combine.title(summary)
    assert f"llama_eagle (zoo-perfect): {result['device']}, TP=1, vLLM {result['vllm']}, 4 rounds" in title
    tp2 = json.loads(json.dumps(result))
    tp2.setdefault("settings", {})["parallel"] = {"tensor_parallel_size": 2}
    assert combine.combine([tp2], ["a"])["pairs"]["llama_eagle"]["zoo-perfect"]["tensor_parallel_size"] == 2
    with pytest.raises(PortableSpecError, match=r"another workload \(tensor_parallel_size\)"):
        combine.combine([result, tp2], ["a", "b"])


def test_a_long_plot_title_is_wrapped_to_the_figure_and_keeps_every_word():
    text = ("vllm serve + vllm bench serve: llama8b_eagle3 (designed-partial), K=3, output 256 tokens, "
            "NVIDIA H200, TP=2, vLLM 0.28.0")
    lines = plotting.wrapped_title(text, 7.0).splitlines()
    assert len(lines) >= 2 and all(len(line) <= 7 * plotting.TITLE_CHARS_PER_INCH for line in lines)
    assert " ".join(lines) == text and lines[-1].endswith("TP=2, vLLM 0.28.0")


def test_a_committed_gzip_report_combines_to_the_summary_pooled_from_it():
    """Session folders store older call reports gzip-compressed (``serve_bench.json.gz``); ``combine`` reads a folder
    holding one, and pooling session 19's ``dm256b`` again gives the repooled summary committed in session 31."""
    folder = ROOT / "bench/results/2026-11-28-h200-session19/dm256b"
    assert not (folder / "serve_bench.json").exists() and (folder / "serve_bench.json.gz").exists()
    source = "bench/results/2026-11-28-h200-session19/dm256b"
    again = combine.combine([combine.load(folder)], [source])
    committed = json.loads((ROOT / "bench/results/2026-11-29-h200-session31/repooled/s19-dm256b/"
                                   "serve_bench_summary.json").read_text())
    ratios = committed["ours_over_upstream_v1"]["llama8b_draft1b"]["designed-partial"]
    assert len(ratios) == 4
    for key, ratio in ratios.items():
        assert again["ours_over_upstream_v1"]["llama8b_draft1b"]["designed-partial"][key] == ratio, key
    with pytest.raises(PortableSpecError, match="missing or not JSON"):
        combine.load(folder.parent)  # a folder with neither name


# ------------------------------------------------------------------------------------------------ --sizing-from
def test_a_call_sized_from_an_earlier_one_keeps_its_prompts_and_runs_one_warm_pass_per_cell(clean_run, zoo_pair,
                                                                                            tmp_path):
    """A benchmark split over calls: the later call, given the first call's report, runs each shared cell with the
    first call's prompts after one warm pass (not ``plan.WARM_PASSES``), and says where its sizing came from; a cell
    the earlier call did not size is warmed and sized as usual."""
    first, out = clean_run
    settings = Settings(**{**FAST, "concurrency": (1, 2, 4), "rounds": 1, "first_round": 2, "phase_clock": False})
    earlier = {k: {**v, "num_prompts": v["num_prompts"] + 3} for k, v in first["sizing"].items()}  # tell them apart
    settings = replace(settings, sizing_from=str(out), earlier_sizing=earlier)
    result = driver.run_serve_bench(zoo_pair, settings, tmp_path, cpu_hooks())
    assert result["status"] == "complete", result["problems"]
    variants = len(result["variants"])
    for key in (C1, C2):
        warm = [r for r in result["warm_runs"] if plan.Cell(r["input_len"], r["sampling"], r["concurrency"]).key == key]
        assert len(warm) == variants and {r["round"] for r in warm} == {plan.SIZING_ROUND - plan.WARM_PASSES + 1}
        assert result["sizing"][key] == {**earlier[key], "warm_runs": 0, "from": str(out)}
        assert {r["num_prompts"] for r in result["runs"] if plan.cell_of(r, result["workload"]).key == key} == \
            {earlier[key]["num_prompts"]}
    new = "in16/greedy/c4"
    assert len([r for r in result["warm_runs"] if r["concurrency"] == 4]) == variants * plan.WARM_PASSES
    assert "from" not in result["sizing"][new] and result["sizing"][new]["warm_runs"] == variants


@pytest.mark.parametrize("change, phrase", [
    ({"output_len": 13}, "its output_len was 12, this bench's is 13"),
    ({"min_run_s": 5.0}, "its min_run_s was 0, this bench's is 5.0"),
    ({"concurrency": (8,)}, "it sized none of this bench's cells"),
])
def test_sizing_from_another_workload_is_one_line_naming_the_fix(clean_run, zoo_pair, change, phrase):
    _, out = clean_run
    with pytest.raises(PortableSpecError, match="drop --sizing-from") as err:
        earlier_sizing(Settings(**{**FAST, **change}), zoo_pair, out)
    assert phrase in str(err.value) and "\n" not in str(err.value)
    other = replace(zoo_pair, mode="zoo-attention")
    with pytest.raises(PortableSpecError, match=r"sized llama_eagle \(zoo-perfect\), this bench runs llama_eagle "
                                                r"\(zoo-attention\)"):
        earlier_sizing(Settings(**FAST), other, out)
    with pytest.raises(PortableSpecError, match="missing or not JSON"):
        earlier_sizing(Settings(**FAST), zoo_pair, out / "runs")
    assert earlier_sizing(Settings(**FAST), zoo_pair, out).earlier_sizing.keys() == {C1, C2}


# ------------------------------------------------------------------------------------------------ short earlier runs
# vLLM's eager MRV2 baseline is host-bound and varies up to 1.7x between rounds: a call that kept an earlier call's
# prompts (``--sizing-from``) repeated the short runs that call's report already listed. Its cells grow from them.
SHORT_MIN_RUN_S, LONG_RUN_S = 10.0, 12.0


def short_report(clean_run, folder: Path, short: dict[tuple[str, int], float]) -> Path:
    """``clean_run``'s report (one prompt per slot) as a call under ``--min-run-s`` ``SHORT_MIN_RUN_S`` that booted in
    ``EARLIER_BOOT_S`` and whose timed runs took ``LONG_RUN_S``, but those ``short`` names in C1 ((variant, round) ->
    seconds), which its ``short_runs`` list."""
    first, _ = clean_run
    earlier = json.loads(json.dumps(first))
    earlier["settings"]["min_run_s"] = earlier["workload"]["min_run_s"] = SHORT_MIN_RUN_S
    earlier["phases_s"]["boot_s"] = EARLIER_BOOT_S
    for run in earlier["runs"]:
        in_c1 = plan.cell_of(run, earlier["workload"]).key == C1
        run["duration_s"] = short.get((run["variant"], run["round"]), LONG_RUN_S) if in_c1 else LONG_RUN_S
    earlier["short_runs"] = report.short_runs(earlier["runs"], SHORT_MIN_RUN_S)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "serve_bench.json").write_text(json.dumps(earlier))
    return folder / "serve_bench.json"


SHORT = {("upstream_v1", 0): 6.0, ("ours", 1): 9.0}
"""C1's short runs in ``short_report``: the shortest, 6 s of one prompt, sizes 1.5 x 10 s / 6 s -> 3 per slot."""
SHORT_FROM = {**FAST, "min_run_s": SHORT_MIN_RUN_S, "first_round": 2, "phase_clock": False}


def test_prompts_grow_from_an_earlier_calls_shortest_run_within_the_caps():
    grown = plan.resized_from_short(10, 8.8, 10, 2, 1024, 300)
    assert grown["per_slot"] == 18 and grown["projected_s"] == 15.84  # ceil(10 x 1.5 x 10 / 8.8), 0.88 s a wave
    assert grown["resized_from_short"] == {"shortest_s": 8.8, "earlier_per_slot": 10}
    assert "came in at 8.80 s, under --min-run-s 10" in grown["why"] and "capped" not in grown["why"]
    assert plan.resized_from_short(10, 8.8, 10, 2, 30, 300)["per_slot"] == 15  # --max-prompts 30 at c=2
    timeout = plan.resized_from_short(10, 8.8, 10, 1, 1024, 30)  # half of a 30 s timeout: 17 waves of 0.88 s
    assert timeout["per_slot"] == 17 and timeout["why"].endswith("(capped)")
    assert plan.resized_from_short(10, 8.8, 10, 2, 20, 300) is None  # the caps leave it at the earlier count
    assert plan.resized_from_short(10, 10.0, 10, 2, 1024, 300) is None  # not short
    assert plan.resized_from_short(10, 8.8, 0, 2, 1024, 300) is None  # no --min-run-s


def test_a_cell_whose_earlier_runs_came_in_short_grows_from_the_shortest_for_every_round(zoo_pair, clean_run, tmp_path):
    """Sized once per cell: the shortest run of any variant in C1 (upstream V1's 6 s) sizes every variant's runs
    there, in both rounds; the JSON says so, one console line says so, and the first round is predicted with C1's
    earlier seconds x 3. C2, no short run, keeps its prompts. A call sized from this one keeps the larger count."""
    first, _ = clean_run
    earlier = short_report(clean_run, tmp_path / "a", SHORT)
    said: list[str] = []
    settings = earlier_sizing(Settings(**SHORT_FROM), zoo_pair, earlier)
    result = driver.run_serve_bench(zoo_pair, settings, tmp_path / "b", replace(cpu_hooks(), say=said.append))
    assert result["status"] == "complete", result["problems"]
    sized = result["sizing"][C1]
    assert (sized["per_slot"], sized["num_prompts"], sized["from"]) == (3, 3, str(earlier))
    assert sized["resized_from_short"] == {"shortest_s": 6.0, "earlier_per_slot": 1, "short_in": str(earlier)}
    assert "came in at 6.00 s, under --min-run-s 10" in sized["why"]
    c1 = [r for r in result["runs"] if plan.cell_of(r, result["workload"]).key == C1]
    assert {r["round"] for r in c1} == {2, 3} and {r["num_prompts"] for r in c1} == {3}
    assert result["workload"]["num_prompts"][C1] == 3
    assert result["sizing"][C2] == {**first["sizing"][C2], "warm_runs": 0, "from": str(earlier)}
    assert [line for line in said if "prompts per slot" in line] == [
        "[serve-bench] in16/greedy/c1: --sizing-from's runs came in at 6.00 s, under --min-run-s 10: 1 -> 3 prompts "
        "per slot"]
    c1_medians = (6.0 + LONG_RUN_S) / 2 + (LONG_RUN_S + 9.0) / 2 + LONG_RUN_S  # upstream V1, ours, MRV2
    expected = 3 * c1_medians + 3 * LONG_RUN_S + 6 * driver.RUN_OVERHEAD_S
    assert result["phases_s"]["round_estimate_s"] == pytest.approx(expected, abs=0.051)
    # the chain: a call sized from this one reads its grown sizing; with no short run there it keeps 3 per slot, and
    # this call's own short runs (fake servers: milliseconds) grow it from 3
    chain = earlier_sizing(Settings(**SHORT_FROM), zoo_pair, tmp_path / "b")
    assert chain.earlier_sizing[C1]["num_prompts"] == 3
    cell = plan.Cell(16, "greedy", 1)
    kept = driver.Bench(zoo_pair, replace(chain, earlier_short_s={}), tmp_path / "c", cpu_hooks())
    assert kept.earlier(cell, "ours")["num_prompts"] == 3 and kept.prompt_growth(cell, "ours") == 1.0
    again = driver.Bench(zoo_pair, chain, tmp_path / "c", cpu_hooks()).earlier(cell, "ours")
    assert again["per_slot"] > 3 and again["resized_from_short"]["earlier_per_slot"] == 3
    assert again["resized_from_short"]["short_in"] == str(tmp_path / "b")


def test_the_preflight_predicts_a_grown_cell_by_its_prompt_ratio(zoo_pair, clean_run, tmp_path):
    """A cell grown x3 runs about 3 times the earlier call's seconds: the budget preflight counts them so, and
    refuses a budget that holds the earlier call's seconds but not these."""
    settings = earlier_sizing(Settings(**{**SHORT_FROM, "rounds": 1}), zoo_pair,
                              short_report(clean_run, tmp_path / "a", SHORT))
    c1_medians = (6.0 + LONG_RUN_S) / 2 + (LONG_RUN_S + 9.0) / 2 + LONG_RUN_S
    round_s = 3 * c1_medians + 3 * LONG_RUN_S + 6 * driver.RUN_OVERHEAD_S
    need = EARLIER_BOOT_S + round_s + driver.ROUND_RESERVE_S
    launched, launch = recording_launcher()
    with pytest.raises(PortableSpecError, match=rf"ran these cells' timed runs in {round_s:.1f} s"):
        driver.run_serve_bench(zoo_pair, replace(settings, budget_s=need - 1), tmp_path / "o", cpu_hooks(launch))
    assert launched == []


def test_sized_per_variant_only_the_variant_whose_earlier_runs_came_in_short_grows(per_variant_run, zoo_pair,
                                                                                  tmp_path):
    first, _ = per_variant_run
    earlier = json.loads(json.dumps(first))
    upstream = first["sizing"][C1]["per_variant"]["upstream_v1"]["per_slot"]
    earlier["short_runs"] = [{"variant": "upstream_v1", "cell": C1, "round": 0, "duration_s": 0.25,
                              "num_prompts": upstream}]
    (tmp_path / "serve_bench.json").write_text(json.dumps(earlier))
    settings = earlier_sizing(Settings(**PER_VARIANT), zoo_pair, tmp_path / "serve_bench.json")
    bench, cell = driver.Bench(zoo_pair, settings, tmp_path / "o", slow_upstream()), plan.Cell(16, "greedy", 1)
    grown = math.ceil(upstream * 1.5 * 0.4 / 0.25)  # 1.5 x --min-run-s 0.4 over the 0.25 s run
    assert bench.earlier(cell, "upstream_v1")["per_slot"] == grown > upstream
    assert bench.prompt_growth(cell, "upstream_v1") == grown / upstream
    assert bench.earlier(cell, "ours") == first["sizing"][C1]["per_variant"]["ours"]
    assert bench.earlier(plan.Cell(16, "greedy", 2), "upstream_v1") == first["sizing"][C2]["per_variant"]["upstream_v1"]


# ------------------------------------------------------------------------------------------------ one server shape
# A chain of calls sharing kept servers ran each subset of its cells on servers shaped by that subset (--max-num-seqs
# the call's highest concurrency, --max-model-len its longest input): a call of c=2 alone after c=1,2,8,32 booted
# again. ``--server-max-num-seqs`` / ``--server-max-input-len`` name the chain's widest shape on every call.
WIDE = {**FAST, "rounds": 1, "phase_clock": False, "variants": ("upstream_v1", "ours"), "input_lens": (16, 40)}
"""A call of c = 1, 2 x 16, 40 in: servers of max_num_seqs 2 fitting 40-token prompts."""


def test_in_turn_carries_a_rounds_last_server_into_the_next_round_and_the_next_call(zoo_pair, tmp_path):
    """Two variants in turn over three rounds (rotation A B, B A, A B): round 0's last server (ours) serves round 1
    first and round 1's last (upstream V1) round 2 first, so four boots, not six, with every round paired. Split over
    calls, call 1 (round 0) keeps ours for call 2 (rounds 1-2), which adopts it: four boots again. With the phase
    clock, round 0's clocked server is stopped, not carried."""
    def timeline(launched):  # (variant, alive) of every launched server, in order
        return [(v, h.alive()) for v, _, h in launched]

    variants = ("upstream_v1", "ours")
    base = Settings(**{**FAST, "rounds": 3, "concurrency": (1,), "placement": "in_turn", "variants": variants,
                       "phase_clock": False})
    launched, hooks = adopting_hooks()
    whole = driver.run_serve_bench(zoo_pair, base, tmp_path / "whole", hooks)
    assert whole["status"] == "complete" and whole["rounds_done"] == 3, whole["problems"]
    assert [v for v, *_ in launched] == ["upstream_v1", "ours", "upstream_v1", "ours"]
    assert whole["in_turn_carried"] == [{"round": 1, "variant": "ours"}, {"round": 2, "variant": "upstream_v1"}]
    assert not any(alive for _, alive in timeline(launched))  # no --keep-servers: the last one stopped too
    assert [len(whole["variants"][v]["boots"]) for v in variants] == [2, 2]
    # each server keeps its own log: a variant's second boot no longer overwrites its first's
    assert [[b["log"] for b in whole["variants"][v]["boots"]] for v in variants] == [
        ["server_upstream_v1.log", "server_upstream_v1.2.log"], ["server_ours.log", "server_ours.2.log"]]
    assert [h.log.name for _, _, h in launched] == ["server_upstream_v1.log", "server_ours.log",
                                                   "server_upstream_v1.2.log", "server_ours.2.log"]
    assert all(h.log.exists() for _, _, h in launched)
    assert whole["ours_over_upstream_v1"][C1]["paired_output_tok_s"]["passes"] == 3  # every round paired
    # a carried server is warm and its cell sized: it runs no warm run; each fresh boot runs its own
    assert [(w["variant"], w["cell"], w["why"]) for w in whole["warm_skipped"]] == [
        ("ours", C1, driver.WARM_CARRIED), ("upstream_v1", C1, driver.WARM_CARRIED)]
    assert Counter(r["variant"] for r in whole["warm_runs"]) == {"upstream_v1": 2 * plan.WARM_PASSES,
                                                                 "ours": 2 * plan.WARM_PASSES}
    order = [(r["round"], r["variant"]) for r in whole["order"]]
    assert order == [(0, "upstream_v1"), (0, "ours"), (1, "ours"), (1, "upstream_v1"), (2, "upstream_v1"),
                     (2, "ours")]

    launched, hooks = adopting_hooks()
    registry = tmp_path / "kept.json"
    one = driver.run_serve_bench(zoo_pair, replace(base, rounds=1, keep_servers=str(registry)), tmp_path / "c1", hooks)
    assert one["status"] == "complete" and timeline(launched) == [("upstream_v1", False), ("ours", True)]
    assert sorted(kept_servers.read(registry)) == ["ours"] and one["kept_servers"]["variants"] == ["ours"]
    kept_log = launched[1][2].log
    with kept_log.open("a") as log:  # what the kept server logs after call 1 is packed: call 2's rounds
        log.write("served round 1 in call 2\n")
    two = driver.run_serve_bench(zoo_pair, replace(base, rounds=2, first_round=1, reuse_servers=str(registry),
                                                   sizing_from=str(tmp_path / "c1")), tmp_path / "c2", hooks)
    assert two["status"] == "complete" and two["rounds_done"] == 2, two["problems"]
    # call 2 adopted ours for round 1 and carried upstream V1 into round 2: two boots, four over the split, as whole
    assert [v for v, *_ in launched] == ["upstream_v1", "ours", "upstream_v1", "ours"]
    (adopted,) = two["variants"]["ours"]["boots"][:1]
    assert adopted["reused"]["registry"] == str(registry) and "not_reused" not in two["variants"]["ours"]
    assert two["in_turn_carried"] == [{"round": 2, "variant": "upstream_v1"}]
    assert len(two["variants"]["ours"]["boots"]) == 2 and not any(alive for _, alive in timeline(launched))
    # call 2 holds both ours servers' logs: the adopted one's copied whole, the round-2 boot's beside it
    assert [b["log"] for b in two["variants"]["ours"]["boots"]] == ["server_ours.log", "server_ours.2.log"]
    assert (tmp_path / "c2" / "server_ours.log").read_text() == kept_log.read_text()
    assert "served round 1 in call 2" in kept_log.read_text()
    assert "served round 1" not in (tmp_path / "c2" / "server_ours.2.log").read_text()

    from portable_spec_harness.serve_bench.__main__ import parser, settings_from

    cli = settings_from(parser().parse_args(["--pair", "llama_eagle", "--out", str(tmp_path / "o"), "--placement",
                                             "in_turn", "--keep-servers", "k.json", "--no-phase-clock"]))
    assert (cli.placement, cli.keep_servers) == ("in_turn", "k.json")  # the command line takes the pair too

    launched, hooks = adopting_hooks()
    clocked = driver.run_serve_bench(zoo_pair, replace(base, rounds=2, phase_clock=True), tmp_path / "clk", hooks)
    assert clocked["status"] == "complete", clocked["problems"]
    assert [v for v, *_ in launched] == ["upstream_v1", "ours", "ours", "upstream_v1"]  # round 0's ours was clocked
    assert "in_turn_carried" not in clocked and sorted(clocked["phase_clock"]) == sorted(variants)

    # a kept server the first round does not start with (round 0 starts with upstream V1) is stopped before that boot
    launched, hooks = adopting_hooks()
    alive_at_launch: list[list[bool]] = []

    def launch_seen(server, port, log, launch=hooks.launch):
        alive_at_launch.append([h.alive() for *_, h in launched])
        return launch(server, port, log)
    hooks, again = replace(hooks, launch=launch_seen), tmp_path / "again.json"
    driver.run_serve_bench(zoo_pair, replace(base, rounds=1, keep_servers=str(again)), tmp_path / "k1", hooks)
    assert sorted(kept_servers.read(again)) == ["ours"] and launched[1][2].alive()
    other = driver.run_serve_bench(zoo_pair, replace(base, rounds=1, reuse_servers=str(again)), tmp_path / "k2", hooks)
    assert other["status"] == "complete" and other["kept_servers_stopped"] == ["ours"], other["problems"]
    assert alive_at_launch[2] == [False, False]  # call 1's servers: upstream V1 stopped, the kept ours stopped first


def test_an_in_turn_call_whose_budget_cannot_hold_its_first_rounds_boots_is_refused(zoo_pair, tmp_path):
    """In turn the first round always started, so a call whose budget could not hold its boots was killed inside
    it and lost the round. Sized from an earlier in-turn call whose boots took 120 s (upstream V1) and 150 s (ours)
    and each timed run 10 s: one round of one cell needs 120 + 150 + 2 x (10 + ``RUN_OVERHEAD_S``) +
    ``ROUND_RESERVE_S``; a budget a second short is refused before any boot, one that holds it runs, and a call whose
    first server is a kept one counts only the boot it makes. A together call's side-by-side boots are not used."""
    variants = ("upstream_v1", "ours")
    base = Settings(**{**FAST, "rounds": 1, "concurrency": (1,), "placement": "in_turn", "variants": variants,
                       "phase_clock": False})
    launched, hooks = adopting_hooks()
    registry = tmp_path / "kept.json"
    first = driver.run_serve_bench(zoo_pair, replace(base, keep_servers=str(registry)), tmp_path / "c1", hooks)
    assert first["status"] == "complete" and first["kept_servers"]["variants"] == ["ours"], first["problems"]
    boots = {"upstream_v1": 120.0, "ours": 150.0}
    earlier = json.loads(json.dumps(first))
    for variant, seconds in boots.items():
        earlier["variants"][variant]["boots"][0]["seconds"] = seconds
    for run in earlier["runs"]:
        run["duration_s"] = 10.0
    (tmp_path / "slow").mkdir()
    (tmp_path / "slow" / "serve_bench.json").write_text(json.dumps(earlier))
    sized = earlier_sizing(replace(base, first_round=1), zoo_pair, tmp_path / "slow")
    assert sized.earlier_variant_boot_s == boots and sized.earlier_boot_s is None
    runs_s = 2 * (10.0 + driver.RUN_OVERHEAD_S)
    need = sum(boots.values()) + runs_s + driver.ROUND_RESERVE_S
    before = len(launched)
    with pytest.raises(PortableSpecError, match=rf"booted ours in 150.0 s and upstream_v1 in 120.0 s \(in turn\) "
                                                rf"and ran these cells' timed runs in {runs_s:.1f} s.* to "
                                                rf"{math.ceil(need)} or more"):
        driver.run_serve_bench(zoo_pair, replace(sized, budget_s=need - 1), tmp_path / "refused", hooks)
    assert len(launched) == before  # nothing booted
    # the kept ours starts round 1: only upstream V1's boot counts
    adopted = replace(sized, budget_s=need - boots["ours"], reuse_servers=str(registry))
    two = driver.run_serve_bench(zoo_pair, adopted, tmp_path / "c2", hooks)
    assert two["status"] == "complete" and two["rounds_done"] == 1, two["problems"]
    assert [v for v, *_ in launched[before:]] == ["upstream_v1"]
    with pytest.raises(PortableSpecError, match=rf"= {need:.1f} s"):  # the same budget with no kept server
        driver.run_serve_bench(zoo_pair, replace(sized, budget_s=need - boots["ours"]), tmp_path / "no_kept", hooks)
    held = driver.run_serve_bench(zoo_pair, replace(sized, budget_s=need), tmp_path / "held", hooks)
    assert held["status"] == "complete" and held["rounds_done"] == 1, held["problems"]
    together = json.loads(json.dumps(earlier))
    together["placement"]["mode"] = "together"
    (tmp_path / "together").mkdir()
    (tmp_path / "together" / "serve_bench.json").write_text(json.dumps(together))
    assert earlier_sizing(base, zoo_pair, tmp_path / "together").earlier_variant_boot_s == {}


def test_an_in_turn_round_stops_before_a_later_boot_the_budget_left_cannot_hold(zoo_pair, tmp_path, monkeypatch):
    """The preflight sees a round before its first boot, at the earlier call's boots; a fresh host's first boot can
    take longer (cold compile caches: 184 s where the earlier call's took 141 s), and a call then booted its second
    server into the end of its budget and was killed there. Sized from an earlier in-turn call (boots 120 s and
    150 s, runs 10 s) with a budget the preflight passes, this call's upstream V1 boot reported at 290 s: ours would
    need at least 290 s + its run, more than is left, so the round stops before launching it, with the reason, and
    the report is whole; reported at 200 s, ours boots and the round completes."""
    variants = ("upstream_v1", "ours")
    base = Settings(**{**FAST, "rounds": 1, "concurrency": (1,), "placement": "in_turn", "variants": variants,
                       "phase_clock": False})
    launched, hooks = adopting_hooks()
    first = driver.run_serve_bench(zoo_pair, base, tmp_path / "c1", hooks)
    assert first["status"] == "complete", first["problems"]
    earlier = json.loads(json.dumps(first))
    for variant, seconds in {"upstream_v1": 120.0, "ours": 150.0}.items():
        earlier["variants"][variant]["boots"][0]["seconds"] = seconds
    for run in earlier["runs"]:
        run["duration_s"] = 10.0
    (tmp_path / "slow").mkdir()
    (tmp_path / "slow" / "serve_bench.json").write_text(json.dumps(earlier))
    sized = earlier_sizing(base, zoo_pair, tmp_path / "slow")
    need = 120.0 + 150.0 + 2 * (10.0 + driver.RUN_OVERHEAD_S) + driver.ROUND_RESERVE_S
    real_wait = vllm_serve.wait_healthy
    reported = {"upstream_v1": 0.0}

    async def slow_first_boot(handle, host, port, log_name, deadline):
        boot = await real_wait(handle, host, port, log_name, deadline)
        if log_name.startswith("server_upstream_v1"):
            boot["seconds"] = reported["upstream_v1"]
        return boot
    monkeypatch.setattr(driver.vllm_serve, "wait_healthy", slow_first_boot)

    reported["upstream_v1"] = 290.0
    before = len(launched)
    stopped = driver.run_serve_bench(zoo_pair, replace(sized, budget_s=need), tmp_path / "stopped", hooks)
    assert [v for v, *_ in launched[before:]] == ["upstream_v1"]  # ours never launched
    assert stopped["rounds_done"] == 0 and "boots" not in stopped["variants"].get("ours", {})
    assert stopped["stopped_because"] == (f"--budget-s {need:g} would be passed: the boot of ours (~290.0 s) and "
                                          f"its timed runs ({10.0 + driver.RUN_OVERHEAD_S:.1f} s known) do not fit "
                                          "what is left")
    assert [r["variant"] for r in stopped["runs"]] == ["upstream_v1"]  # round 0's upstream V1 run is kept
    assert not any(h.alive() for *_, h in launched)
    assert json.loads((tmp_path / "stopped" / "serve_bench.json").read_text())["stopped_because"].startswith(
        f"--budget-s {need:g} would be passed: the boot of ours")

    reported["upstream_v1"] = 200.0
    before = len(launched)
    held = driver.run_serve_bench(zoo_pair, replace(sized, budget_s=need), tmp_path / "held", hooks)
    assert held["status"] == "complete" and held["rounds_done"] == 1, held["problems"]
    assert [v for v, *_ in launched[before:]] == ["upstream_v1", "ours"] and "stopped_because" not in held


def test_a_call_of_fewer_cells_reuses_a_wider_calls_servers_where_it_names_their_shape(zoo_pair, tmp_path,
                                                                                      monkeypatch):
    """Call 2 runs c = 1 at 16 in alone: its own servers would differ from call 1's (another --max-num-seqs,
    --max-model-len and KV cache), so it would boot both again; with --server-max-num-seqs 2 --server-max-input-len 40
    its servers' arguments are call 1's, it boots nothing, its KV cache is sized for that shape (the zoo pair's cache
    is the floor either way, so the sizing's arguments are read) and its workload records the servers' shape."""
    sized_for: list[tuple[int, int]] = []
    kv_cache_bytes = memory.kv_cache_bytes
    monkeypatch.setattr(memory, "kv_cache_bytes", lambda target, draft, max_len, seqs, tp: sized_for.append(
        (max_len, seqs)) or kv_cache_bytes(target, draft, max_len, seqs, tp))
    launched, hooks = adopting_hooks()
    registry = tmp_path / "kept.json"
    one = driver.run_serve_bench(zoo_pair, Settings(**WIDE, keep_servers=str(registry)), tmp_path / "call1", hooks)
    assert one["status"] == "complete" and len(launched) == 2, one["problems"]
    narrow = Settings(**{**WIDE, "concurrency": (1,), "input_lens": (16,)}, first_round=1,
                      reuse_servers=str(registry))
    own = driver.Bench(zoo_pair, narrow, tmp_path / "own", hooks).plan_servers()["ours"]
    assert kept_servers.mismatch(kept_servers.read(registry)["ours"], kept_servers.fingerprint(
        own, kept_servers.code_hash())) == "its vllm serve arguments differ"
    two = driver.run_serve_bench(zoo_pair, replace(narrow, server_max_num_seqs=2, server_max_input_len=40),
                                 tmp_path / "call2", hooks)
    assert two["status"] == "complete", two["problems"]
    assert len(launched) == 2 and not any(h.alive() for *_, h in launched)  # nothing booted; call 2 kept none
    shape = {"max_num_seqs": 2, "max_model_len": plan.max_model_len(40, FAST["output_len"], zoo_pair.k)}
    for result in (one, two):
        assert {k: result["workload"][k] for k in shape} == shape
    assert two["workload"]["concurrency"] == [1] and two["workload"]["input_lens"] == [16]
    assert (two["settings"]["server_max_num_seqs"], two["settings"]["server_max_input_len"]) == (2, 40)
    for variant in WIDE["variants"]:
        assert two["variants"][variant]["boots"][0]["reused"]["registry"] == str(registry)
        assert two["variants"][variant]["serve_args"] == one["variants"][variant]["serve_args"]  # the KV cache too
    wide = (shape["max_model_len"], 2)
    assert sized_for == [wide, (plan.max_model_len(16, FAST["output_len"], zoo_pair.k), 1), wide]  # calls 1, own, 2


@pytest.mark.parametrize("argv, fragment", [
    (["--concurrency", "1,2,8", "--server-max-num-seqs", "4"],
     "--server-max-num-seqs 4 is below the largest --concurrency, 8: pass 8 or more, or drop --server-max-num-seqs"),
    (["--input-len", "16,40", "--server-max-input-len", "20"],
     "--server-max-input-len 20 is below the longest --input-len, 40: pass 40 or more, or drop "
     "--server-max-input-len"),
])
def test_a_server_shape_below_the_cells_exits_2_with_one_line_and_boots_nothing(argv, fragment, zoo_pair, tmp_path,
                                                                                 tmp_path_factory, monkeypatch,
                                                                                 capsys):
    """Refused before the pair is built or ``--out`` made; the rest of the command line is a short benchmark, so a
    call that is not refused ends soon and fails here instead of running the defaults' minutes."""
    from portable_spec_harness.serve_bench import __main__ as cli

    launched, launch = recording_launcher()
    monkeypatch.setattr(cli, "HOOKS", lambda say: cpu_hooks(launch))
    short = ["--work-dir", str(shared_zoo(tmp_path_factory)), "--variants", "ours", "--rounds", "1", "--min-run-s", "0",
             "--output-len", "8", "--prompts-per-slot", "1", "--no-phase-clock"]
    for as_json in (False, True):
        rc = cli.main(["--pair", "llama_eagle", "--out", str(tmp_path / "o"), *short, *argv] + ["--json"] * as_json)
        captured = capsys.readouterr()
        assert rc == 2, captured.err[-1000:]
        (line,) = (captured.out if as_json else captured.err).strip().splitlines()
        assert fragment in (json.loads(line)["error"] if as_json else line), line
    assert launched == [] and not (tmp_path / "o").exists()
    flag = argv[2].lstrip("-").replace("-", "_")
    bad = Settings(**{**FAST, flag: 1, "input_lens": (16, 40)})  # the driver, called directly, refuses it too
    with pytest.raises(PortableSpecError, match=f"--{argv[2].lstrip('-')} 1 is below"):
        driver.run_serve_bench(zoo_pair, bad, tmp_path / "d", cpu_hooks(launch))
    assert launched == []


def test_the_lane_knobs_reach_the_server_shape_flags(tmp_path):
    from portable_spec_harness.serve_bench.__main__ import parser, settings_from
    from test_tp2_stage import module_args, recorded

    module = "portable_spec_harness.serve_bench"
    plain = settings_from(parser().parse_args(module_args(recorded(tmp_path / "plain", "ci/gpu/serve_bench.sh"),
                                                          module)))
    assert (plain.server_max_num_seqs, plain.server_max_input_len, plain.kv_cache_gib) == (None, None, None)
    shaped = settings_from(parser().parse_args(module_args(recorded(
        tmp_path / "shaped", "ci/gpu/serve_bench.sh", SERVE_BENCH_CONCURRENCY="2", SERVE_BENCH_INPUT_LEN="1024",
        SERVE_BENCH_SERVER_MAX_NUM_SEQS="32", SERVE_BENCH_SERVER_MAX_INPUT_LEN="4096", SERVE_BENCH_KV_CACHE_GIB="9.5"),
        module)))
    assert (shaped.server_max_num_seqs, shaped.server_max_input_len, shaped.kv_cache_gib) == (32, 4096, 9.5)


# ------------------------------------------------------------------------------------------------ kept servers' warm runs
class CountingBar:
    """A progress bar that keeps its total and the steps it was given."""

    def __init__(self, total: int) -> None:
        self.total, self.n = total, 0

    def update(self, n: int = 1) -> None:
        self.n += n

    def close(self) -> None:
        pass


def test_a_reused_server_sized_by_an_earlier_call_warms_its_first_cell_only(zoo_pair, tmp_path, monkeypatch):
    """Call 2 reuses call 1's upstream V1 and ours servers, which served both cells, and is sized from call 1
    (``--sizing-from``): each runs one warm run, in its first cell (C1), and the report names the skipped C2 per
    variant; mrv2, whose kept server no longer matches and boots afresh, still warms both cells. The round estimate
    (from call 1's timed runs), the sizing (call 1's) and the progress bar (every planned step counted) hold."""
    bars: list[CountingBar] = []
    monkeypatch.setattr(driver, "progress_bar", lambda total, desc: bars.append(CountingBar(total)) or bars[-1])
    launched, hooks = adopting_hooks()
    registry = tmp_path / "kept.json"
    one = driver.run_serve_bench(zoo_pair, Settings(**{**FAST, "rounds": 1}, phase_clock=False,
                                                    keep_servers=str(registry)), tmp_path / "call1", hooks)
    assert one["status"] == "complete" and len(launched) == 3, one["problems"]
    kept = json.loads(registry.read_text())
    assert {v: e["served_cells"] for v, e in kept["servers"].items()} == {v: [C1, C2] for v in one["variants"]}
    kept["servers"]["mrv2"]["fingerprint"]["serve_args"].append("--enforce-eager")  # no longer call 2's server
    registry.write_text(json.dumps(kept))
    said: list[str] = []
    settings = earlier_sizing(Settings(**{**FAST, "rounds": 1}, first_round=1, phase_clock=False,
                                       reuse_servers=str(registry)), zoo_pair, tmp_path / "call1")
    two = driver.run_serve_bench(zoo_pair, settings, tmp_path / "call2", replace(hooks, say=said.append))
    assert two["status"] == "complete" and two["rounds_done"] == 1, two["problems"]
    assert [v for v, *_ in launched] == ["upstream_v1", "ours", "mrv2", "mrv2"]
    one_pass = plan.SIZING_ROUND - plan.WARM_PASSES + 1
    warmed = {v: [(plan.cell_of(r, two["workload"]).key, r["round"]) for r in two["warm_runs"] if r["variant"] == v]
              for v in two["variants"]}
    assert warmed == {"upstream_v1": [(C1, one_pass)], "ours": [(C1, one_pass)],
                      "mrv2": [(C1, one_pass), (C2, one_pass)]}
    assert two["warm_skipped"] == [{"variant": v, "cell": C2, "why": driver.WARM_SKIPPED}
                                   for v in ("upstream_v1", "ours")]
    assert [line for line in said if "warm runs skipped" in line] == [
        f"[serve-bench] {v}: reused server, 1 of 2 cells' warm runs skipped (sized by --sizing-from, served by this "
        "server before)" for v in ("upstream_v1", "ours")]
    assert two["sizing"][C2] == {**one["sizing"][C2], "warm_runs": 0, "from": str(tmp_path / "call1")}
    expected = sum(s + driver.RUN_OVERHEAD_S for by in settings.earlier_durations.values() for s in by.values())
    assert two["phases_s"]["round_estimate_s"] == pytest.approx(expected, abs=0.051)
    assert len(bars) == 2 and all(bar.n == bar.total for bar in bars), [(b.n, b.total) for b in bars]


# ------------------------------------------------------------------------------------------------ the clock's cell
def test_the_phase_clock_runs_in_the_cell_it_is_given_at_that_concurrency(zoo_pair, tmp_path):
    """A cell that misses a target gets its cause from the phase clock in that cell (issue 41 item 4): the clock's
    runs there at its concurrency, ``clock_prompts`` per slot, the profiled pass one wave; the report names it."""
    settings = Settings(**{**FAST, "variants": ("upstream_v1", "ours"), "rounds": 1, "clock_prompts": 2,
                           "clock_cell": C2})
    result = driver.run_serve_bench(zoo_pair, settings, tmp_path, cpu_hooks())
    assert result["status"] == "complete", result["problems"]
    compared = 0
    for variant in ("upstream_v1", "ours"):
        reading = result["phase_clock"][variant]
        assert reading["cell"] == C2 and reading["clock"]["steps"] > 0 and "error" not in reading["split"]
        clock, profile = reading["clock_run"], reading["profile_run"]
        assert (clock["concurrency"], clock["num_prompts"], clock["input_len"]) == (2, 4, 16)
        assert (profile["concurrency"], profile["num_prompts"]) == (2, 2)
        compared += 1
    assert compared == 2
    table = report.table(result)
    assert f"phase clock {C2} ours:" in table and "phase clock at concurrency 2" in table
    assert report.clock_concurrency(result["phase_clock"]) == 2


def test_a_report_from_before_keeps_its_phase_clock_at_c1():
    old = json.loads((Path(__file__).resolve().parents[1] / "bench/results/2026-11-29-h200-session31/dm1k033/"
                      "phase_clock/serve-bench/serve_bench.json").read_text())
    assert "phase_clock" not in old and set(report.phase_clock_readings(old)) == {"mrv2", "ours_mrv2"}
    table = report.table(old)
    assert "phase clock in1024/greedy/c1 ours_mrv2:" in table and "phase clock at concurrency 1" in table
    pooled = combine.combine([old], ["old"])
    entry = next(iter(next(iter(pooled["pairs"].values())).values()))
    assert {r["cell"] for r in entry["phase_clock"].values()} == {"in1024/greedy/c1"}


@pytest.mark.parametrize("argv,fix", [
    (["--clock-cell", "in16/greedy/c4"], "is not one of this call's cells: name one of in16/greedy/c1, in16/greedy/c2"),
    (["--clock-cell", "in16/greedy/c2", "--no-phase-clock"], "--no-phase-clock skips it: drop one"),
])
def test_a_clock_cell_the_call_cannot_run_is_one_line_and_exit_2(tmp_path, capsys, argv, fix):
    from portable_spec_harness.serve_bench.__main__ import main

    code = main(["--pair", "llama_eagle", "--input-len", "16", "--concurrency", "1,2", "--out", str(tmp_path / "o"),
                 *argv])
    err = capsys.readouterr().err.strip()
    assert code == 2 and fix in err and err.count("\n") == 0, err
    assert not (tmp_path / "o").exists()


def test_the_driver_called_directly_refuses_a_clock_cell_of_another_call(zoo_pair, tmp_path):
    """No silent fall-back to c=1: the same one line as the CLI's, before any server is launched."""
    launched, launch = recording_launcher()
    bad = Settings(**{**FAST, "clock_cell": "in16/greedy/c4"})
    with pytest.raises(PortableSpecError, match="--clock-cell in16/greedy/c4 is not one of this call's cells: name "
                                                "one of in16/greedy/c1, in16/greedy/c2"):
        driver.run_serve_bench(zoo_pair, bad, tmp_path / "d", cpu_hooks(launch))
    assert launched == []


def test_the_lane_knob_names_the_clock_cell(tmp_path):
    from portable_spec_harness.serve_bench.__main__ import parser, settings_from
    from test_tp2_stage import module_args, recorded

    module = "portable_spec_harness.serve_bench"
    plain = settings_from(parser().parse_args(module_args(recorded(tmp_path / "plain", "ci/gpu/serve_bench.sh"),
                                                          module)))
    named = settings_from(parser().parse_args(module_args(recorded(
        tmp_path / "named", "ci/gpu/serve_bench.sh", SERVE_BENCH_INPUT_LEN="4096", SERVE_BENCH_SAMPLING="sampled",
        SERVE_BENCH_CONCURRENCY="8", SERVE_BENCH_CLOCK_CELL="in4096/sampled/c8"), module)))
    assert (plain.clock_cell, named.clock_cell) == (None, "in4096/sampled/c8")
