"""``serve_bench.finalize``: a killed call's partial record becomes a report that keeps only runs every variant ran
(same cell, same round), counts whole rounds, judges the server logs it holds and names where its host facts came
from; ``combine`` then pools it. Driven by a real benchmark run on CPU (vLLM's ``vllm bench serve`` client against
the soak's in-process fake servers), the kill simulated by cutting the record's last run."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from portable_spec_harness.serve_bench import combine, driver, finalize, pairs
from portable_spec_harness.serve_bench.driver import Hooks, Settings
from portable_spec_harness.soak.report import ENVIRONMENT_KEYS, environment

from shared_zoo import shared_zoo
from soak_fake_server import COMPILE_LINE, CPU_TEST_HOST, fake_launcher

ROOT = Path(__file__).resolve().parents[1]
FAST = dict(concurrency=(1, 2), rounds=2, input_lens=(16,), output_len=12, prompts_per_slot=1, min_run_s=0,
            boot_s=20, run_timeout_s=60, clock_prompts=1, profile_output_len=8, phase_clock=False)
C1, C2 = "in16/greedy/c1", "in16/greedy/c2"
VARIANTS = ("upstream_v1", "ours", "mrv2")


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """One whole two-round call: its folder (report, partial record, server logs)."""
    pair = pairs.resolve("llama_eagle", None, None, shared_zoo(tmp_path_factory))
    out = tmp_path_factory.mktemp("serve_bench_whole")
    hooks = Hooks(launch=fake_launcher(), device=lambda: {"name": "cpu-test", "free_bytes": None},
                  host=lambda: CPU_TEST_HOST, say=lambda line: None)
    driver.run_serve_bench(pair, Settings(**FAST), out, hooks)
    return out


def killed_copy(finished: Path, tmp_path: Path, cut: int) -> Path:
    """The call as if killed ``cut`` runs before its end: its report gone, its partial record short of those runs."""
    folder = tmp_path / "killed"
    shutil.copytree(finished, folder)
    (folder / "serve_bench.json").unlink()
    record = json.loads((folder / finalize.PARTIAL).read_text())
    record["runs"] = record["runs"][:-cut]
    record["rounds_done"] = 1
    (folder / finalize.PARTIAL).write_text(json.dumps(record))
    return folder


def test_a_killed_call_keeps_its_whole_pairs_and_drops_the_unpaired_runs(finished, tmp_path):
    whole = json.loads((finished / "serve_bench.json").read_text())
    assert len(whole["runs"]) == 2 * 2 * 3 and whole["status"] == "complete", whole["problems"]
    folder = killed_copy(finished, tmp_path, cut=1)  # round 1, c=2: two of three variants ran
    result = finalize.finalize(folder, finished / "serve_bench.json")
    dropped = result["finalized"]["dropped_unpaired_runs"]
    assert [(d["round"], d["concurrency"]) for d in dropped] == [(1, 2), (1, 2)]
    assert {d["variant"] for d in dropped} < set(VARIANTS)
    for variant in VARIANTS:  # every variant has the same rounds in every cell, never one variant's extra round
        assert result["cells"][variant][C1]["runs"] == 2 and result["cells"][variant][C2]["runs"] == 1
    assert result["ours_over_upstream_v1"][C1]["paired_output_tok_s"]["passes"] == 2
    assert result["ours_over_upstream_v1"][C2]["paired_output_tok_s"]["passes"] == 1
    assert result["rounds_done"] == 1 and result["status"] == "incomplete"
    assert any(p.startswith("1 of 2 rounds ran (killed at the call's time limit") for p in result["problems"])
    assert result["vllm"] == whole["vllm"] and result["commit"] == whole["commit"]
    assert set(environment()) <= set(ENVIRONMENT_KEYS)  # every host fact a finished report has, and no other
    assert all(result[key] == whole[key] for key in ENVIRONMENT_KEYS if key in whole)
    assert result["finalized"]["environment_from"] == str(finished / "serve_bench.json")
    assert set(result["finalized"]["server_logs"]) == set(VARIANTS)
    assert json.loads((folder / "serve_bench.json").read_text())["runs"] == result["runs"]
    assert (folder / "serve_bench.png").stat().st_size > 10_000


def test_the_finalized_call_pools_with_the_finished_one(finished, tmp_path):
    folder = killed_copy(finished, tmp_path, cut=1)
    finalize.finalize(folder, finished)
    summary = combine.combine([combine.load(finished), combine.load(folder)], ["whole", "killed"])
    (mode,) = summary["pairs"]["llama_eagle"]
    cells = summary["pairs"]["llama_eagle"][mode]["cells"]
    assert {v: (cells[v][C1]["runs"], cells[v][C2]["runs"]) for v in VARIANTS} == {v: (4, 3) for v in VARIANTS}


def test_the_judge_reads_the_logs_the_folder_holds(finished, tmp_path):
    folder = killed_copy(finished, tmp_path, cut=1)
    log = folder / "server_ours.log"
    log.write_text(log.read_text() + "\n" + COMPILE_LINE.format(kernel="_topk_topp_kernel") + "\n")
    result = finalize.finalize(folder, finished)
    assert any("ours" in p and "_topk_topp_kernel" in p for p in result["problems"]), result["problems"]


def test_the_judge_reads_every_servers_log_a_variant_named(finished, tmp_path):
    """In turn, a variant can run two servers in one call (``server_ours.log``, ``server_ours.2.log``): a compile in
    the second one's log is judged too, and a named log that is missing is a problem, not a silent pass."""
    folder = killed_copy(finished, tmp_path, cut=1)
    record = json.loads((folder / finalize.PARTIAL).read_text())
    first = record["variants"]["ours"]["boots"][0]
    record["variants"]["ours"]["boots"].append({**first, "log": "server_ours.2.log"})
    (folder / finalize.PARTIAL).write_text(json.dumps(record))
    second = folder / "server_ours.2.log"
    second.write_text((folder / "server_ours.log").read_text() + COMPILE_LINE.format(kernel="_rejection_kernel") + "\n")
    result = finalize.finalize(folder, finished)
    assert result["finalized"]["server_logs"]["ours"] == ["server_ours.log", "server_ours.2.log"]
    assert any("ours" in p and "_rejection_kernel" in p for p in result["problems"]), result["problems"]
    (folder / "serve_bench.json").unlink()
    second.unlink()
    result = finalize.finalize(folder, finished)
    assert any(p.startswith("ours: no server log server_ours.2.log") for p in result["problems"]), result["problems"]
    (folder / "serve_bench.json").unlink()  # a variant the record holds no server of: said, not a crash
    del record["variants"]["mrv2"]
    (folder / finalize.PARTIAL).write_text(json.dumps(record))
    result = finalize.finalize(folder, finished)
    assert any(p.startswith("mrv2: no server recorded") for p in result["problems"]), result["problems"]


@pytest.mark.parametrize("case, words", [
    ("finished", "already holds serve_bench.json"),
    ("no partial", "is missing or not JSON"),
    ("not a report", "is no finished serve bench report"),
    ("nothing paired", "holds no cell that ran on every variant"),
])
def test_bad_input_is_one_line_and_exit_2(finished, tmp_path, case, words):
    folder, env_from = killed_copy(finished, tmp_path, cut=1), finished / "serve_bench.json"
    if case == "finished":
        folder = finished
    elif case == "no partial":
        (folder / finalize.PARTIAL).unlink()
    elif case == "not a report":
        env_from = tmp_path / "other.json"
        env_from.write_text(json.dumps({"kind": "soak"}))
    else:
        record = json.loads((folder / finalize.PARTIAL).read_text())
        record["runs"] = record["runs"][:1]
        (folder / finalize.PARTIAL).write_text(json.dumps(record))
    proc = subprocess.run([sys.executable, "-m", "portable_spec_harness.serve_bench.finalize", str(folder),
                           "--environment-from", str(env_from)], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2 and words in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    if case != "finished":
        assert not (folder / "serve_bench.json").exists()
