"""``portable-spec probe`` through the real console entry (subprocess): JSON schema and every user-facing error."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from portable_spec.ports.musa_port import MusaPort

PROBE_KEYS = {"platform", "label", "device_type", "device_name", "runtime", "graphs_supported", "dist_backend",
              "fp8_dtype", "live_graph_limit", "capture_inference_mode", "pool_shared", "graph_check"}


def run_cli(*args: str, env_extra: dict[str, str] | None = None, drop_env: tuple[str, ...] = ("VLLM_PLATFORM",)):
    env = {k: v for k, v in os.environ.items() if k not in drop_env}
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-m", "portable_spec", *args], capture_output=True, text=True, env=env,
                          timeout=120)


def assert_one_line_error(proc: subprocess.CompletedProcess, expected: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert lines == [f"portable-spec: error: {expected}"], proc.stderr
    assert "Traceback" not in proc.stderr


def test_bogus_vllm_platform_is_a_one_line_error_naming_the_choices():
    proc = run_cli("probe", env_extra={"VLLM_PLATFORM": "bogus"})
    assert_one_line_error(proc, "unknown platform 'bogus' from VLLM_PLATFORM; valid choices: cpu, cuda, musa, rocm")


@pytest.mark.skipif(MusaPort.is_active(), reason="torch_musa is installed here")
def test_musa_without_torch_musa_is_a_one_line_error():
    proc = run_cli("probe", "--platform", "musa")
    assert_one_line_error(proc, "platform 'musa' requires torch_musa, which is not installed: it comes with the "
                                "MUSA SDK, not from a public package index; install vllm-musa as its instructions "
                                "say (its vLLM build, torch_musa, torchada), then pip install --no-deps "
                                "portable-spec; or choose another platform")
    assert "pip install torch_musa" not in proc.stderr  # no public index serves it


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is visible")
def test_cuda_without_gpu_is_a_one_line_error():
    proc = run_cli("probe", "--platform", "cuda")
    assert_one_line_error(proc, "platform 'cuda' selected but no CUDA device is visible "
                                "(check the driver and CUDA_VISIBLE_DEVICES, or use --platform cpu)")


def test_cli_flag_beats_bad_env():
    proc = run_cli("probe", "--platform", "cpu", "--json", env_extra={"VLLM_PLATFORM": "bogus"})
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["platform"] == "cpu"


def test_probe_json_is_one_object_with_the_schema():
    proc = run_cli("probe", "--platform", "cpu", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)  # exactly one JSON document, nothing else on stdout
    assert set(report) == PROBE_KEYS
    assert report["platform"] == "cpu" and report["graphs_supported"] is False
    assert report["runtime"]["torch"] == torch.__version__
    assert report["pool_shared"] is None  # null: not checked (true/false only where it was)
    assert report["graph_check"] == {"ran": False, "reason": "platform 'cpu' has no device graphs; run on a GPU "
                                                            "host (--platform cuda|rocm|musa)"}


@pytest.mark.skipif(torch.cuda.is_available(), reason="auto-detection picks the GPU here")
def test_probe_auto_detects_cpu_on_a_cpu_host():
    proc = run_cli("probe", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["platform"] == "cpu"


def test_probe_text_output_lists_the_facts():
    proc = run_cli("probe", "--platform", "cpu")
    assert proc.returncode == 0, proc.stderr
    assert "platform: cpu" in proc.stdout and "dist_backend: gloo" in proc.stdout


def test_probe_text_says_what_was_not_checked_and_why():
    proc = run_cli("probe", "--platform", "cpu")
    assert proc.returncode == 0, proc.stderr
    assert "None" not in proc.stdout, proc.stdout
    lines = dict(line.split(": ", 1) for line in proc.stdout.splitlines() if ": " in line)
    why = "platform 'cpu' has no device graphs; run on a GPU host (--platform cuda|rocm|musa)"
    assert lines["graph_check"] == f"not run: {why}"
    assert lines["pool_shared"] == f"not checked: {why}"
    assert lines["live_graph_limit"] == "none (no cap on live graphs)"


def test_probe_text_reads_unknown_for_facts_a_platform_cannot_read():
    from portable_spec.commands.probe import render_probe

    text = render_probe({"runtime": {"torch": "2.13.0", "musa": None}, "pool_shared": True,
                         "graph_check": {"ran": True, "replayed_correctly": True}, "live_graph_limit": 1900})
    assert text.splitlines() == ["runtime:", "  torch: 2.13.0", "  musa: unknown", "pool_shared: True",
                                 "graph_check:", "  ran: True", "  replayed_correctly: True", "live_graph_limit: 1900"]
