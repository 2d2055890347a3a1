"""``portable-spec sizes`` through the real entry point (subprocess): JSON and text output, the platform budget read
from the platform CLASS (``--platform musa`` works without torch_musa), and one-line errors with exit code 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from portable_spec.capture_sizes import plan_capture_sizes

CLEAN_ENV = ("VLLM_PLATFORM", "TORCHADA_GRAPH_EXEC_CAP")


def run_sizes(*args: str, env_extra: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in CLEAN_ENV}
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-m", "portable_spec", "sizes", *args], capture_output=True, text=True,
                          env=env, timeout=120)


def run_json(*args: str, env_extra: dict[str, str] | None = None) -> dict:
    proc = run_sizes(*args, "--json", env_extra=env_extra)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""  # warnings travel inside the JSON, not on stderr
    return json.loads(proc.stdout)


def assert_one_line_error(proc: subprocess.CompletedProcess, expected: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert proc.stderr.splitlines() == [f"portable-spec: error: {expected}"], proc.stderr


def test_dflash_json_is_the_planner_output_plus_platform():
    payload = run_json("--method", "dflash", "--num-spec", "8", "--max-num-seqs", "8", "--platform", "cuda")
    assert payload["target_sizes"] == [9, 18, 36, 72]
    assert payload["first_step"] == {"query_len": 9, "sizes": [9, 18, 36, 72], "mode": "FULL"}
    assert payload["chain_step"] is None
    assert payload["platform"] == "cuda" and payload["live_graph_limit"] is None
    expected = plan_capture_sizes("dflash", 8, 8).to_dict()
    assert {k: v for k, v in payload.items() if k != "platform"} == expected


def test_musa_budget_comes_from_the_class_without_torch_musa():
    args = ("--method", "eagle3", "--num-spec", "3", "--max-num-seqs", "256", "--graphs-per-size", "61")
    payload = run_json(*args, "--platform", "musa")
    assert payload["platform"] == "musa"
    assert payload["live_graph_limit"] == 1900
    assert payload["live_graphs"] == 1892
    assert payload["target_sizes"][-1] == payload["max_capture_size"] == 232
    assert any(w.startswith("3073 live graphs exceed the live-graph limit 1900") for w in payload["warnings"])
    # torchada's cap is configurable; the class attribute follows it.
    small = run_json(*args, env_extra={"VLLM_PLATFORM": "musa", "TORCHADA_GRAPH_EXEC_CAP": "200"})
    assert small["platform"] == "musa" and small["live_graph_limit"] == 200 and small["live_graphs"] <= 200


def test_live_graph_limit_flag_overrides_the_platform():
    payload = run_json("--method", "eagle", "--num-spec", "3", "--max-num-seqs", "4", "--platform", "musa",
                       "--live-graph-limit", "8")
    assert payload["live_graph_limit"] == 8
    assert payload["target_sizes"] == [4, 8] and payload["live_graphs"] == 7


def test_user_sizes_sp_and_eager_draft_flags():
    payload = run_json("--method", "dflash", "--num-spec", "8", "--max-num-seqs", "8", "--sizes", "9,10,18,27",
                       "--platform", "cpu")
    assert payload["target_sizes"] == [9, 18, 27]
    payload = run_json("--method", "eagle", "--num-spec", "1", "--max-num-seqs", "4", "--tp", "4", "--sp",
                       "--platform", "cpu")
    assert payload["tp"] == 4 and payload["sp"] is True and payload["target_sizes"] == [4, 8, 16]
    payload = run_json("--method", "dflash", "--num-spec", "8", "--max-num-seqs", "8", "--max-capture-size", "8",
                       "--allow-eager-draft", "--platform", "cpu")
    assert payload["first_step"] == {"query_len": 9, "sizes": [], "mode": "NONE"}


def test_text_output_is_a_table():
    proc = run_sizes("--method", "eagle", "--num-spec", "3", "--max-num-seqs", "64", "--max-capture-size", "32",
                     "--platform", "cuda")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "method=eagle K=3 max_num_seqs=64 max_capture_size=32 tp=1 sp=off platform=cuda"
    table = [line.split() for line in lines[2:6]]
    assert table[0] == ["list", "query_len", "mode", "count", "sizes", "(num_tokens)"]
    assert table[1] == ["target", "verify", "4", "(target)", "5", "4", "8", "16", "24", "32"]
    assert table[2] == ["draft", "first", "step", "4", "FULL", "5", "4", "8", "16", "24", "32"]
    assert table[3] == ["draft", "chain", "step", "1", "FULL", "7", "1", "2", "4", "8", "16", "24", "32"]
    assert "live graphs: 17 (limit none; 1 per target size)" in lines
    assert lines[-1].startswith("warning: (1+num_speculative_tokens) * max_num_seqs = 256 exceeds the max capture")


@pytest.mark.parametrize("args, expected", [
    (("--method", "eagle", "--num-spec", "0", "--max-num-seqs", "8"),
     "num_speculative_tokens must be >= 1 (got 0): pass --num-spec 1 or more"),
    (("--method", "eagle", "--num-spec", "x", "--max-num-seqs", "8"),
     "num_speculative_tokens must be an integer (got 'x'): pass --num-spec with a whole number"),
    (("--method", "eagle", "--num-spec", "3", "--max-num-seqs", "0"),
     "max_num_seqs must be >= 1 (got 0): pass --max-num-seqs 1 or more"),
    (("--method", "medusa", "--num-spec", "3", "--max-num-seqs", "8"),
     "unknown speculative method 'medusa': pass --method one of eagle, eagle3, mtp, dflash, draft_model"),
    (("--method", "dflash", "--num-spec", "8", "--max-num-seqs", "8", "--max-capture-size", "8"),
     "1+num_speculative_tokens = 9 is above the max capture size 8, so no FULL draft graph fits: "
     "pass --max-capture-size 9 or more, or lower --num-spec"),
    (("--method", "eagle", "--num-spec", "2", "--max-num-seqs", "8", "--tp", "2", "--sp"),
     "sequence parallelism needs capture sizes that are multiples of both 1+num_speculative_tokens (3) and "
     "tensor_parallel_size (2), and max of the two (3) is not: pick --num-spec so that 1+K divides or is a multiple "
     "of --tp, or drop --sp"),
    (("--method", "eagle", "--num-spec", "3", "--max-num-seqs", "8", "--graphs-per-size", "0"),
     "graphs per target size must be >= 1 (got 0): pass --graphs-per-size 1 or more "
     "(a PIECEWISE target captures one graph per piece)"),
    (("--method", "eagle", "--num-spec", "3", "--max-num-seqs", "8", "--sizes", "4,x"),
     "capture sizes must be integers >= 1 (got ['x']): pass --sizes with positive sizes only"),
    (("--method", "eagle", "--num-spec", "3", "--max-num-seqs", "8", "--platform", "bogus"),
     "unknown platform 'bogus' from --platform; valid choices: cpu, cuda, musa, rocm"),
])
def test_bad_input_exits_2_with_one_line(args, expected):
    assert_one_line_error(run_sizes(*args, "--platform", "cpu") if "--platform" not in args else run_sizes(*args),
                          expected)


def test_bad_input_is_one_json_object_in_json_mode():
    proc = run_sizes("--method", "eagle", "--num-spec", "0", "--max-num-seqs", "8", "--json", "--platform", "cpu")
    assert proc.returncode == 2 and proc.stderr == ""
    assert json.loads(proc.stdout) == {"error": "num_speculative_tokens must be >= 1 (got 0): pass --num-spec 1 or "
                                                "more", "exit": 2}


def test_a_size_list_vllm_rewrites_is_stated_not_silently_replaced():
    """vLLM rounds user sizes up to multiples of 1+K and drops those above the max capture size; the plan mirrors
    that (it is what vLLM will capture) and says so in the output."""
    payload = run_json("--method", "eagle", "--num-spec", "3", "--max-num-seqs", "8", "--sizes", "3,5,7",
                       "--platform", "cpu")
    assert payload["target_sizes"] == [4]
    stated = [w for w in payload["warnings"] if "--sizes 3,5,7 became 4" in w]
    assert len(stated) == 1 and "multiples of 4" in stated[0], payload["warnings"]
    text = run_sizes("--method", "eagle", "--num-spec", "3", "--max-num-seqs", "8", "--sizes", "3,5,7",
                     "--platform", "cpu").stdout
    assert "warning: vLLM rounds capture sizes up to multiples of 4" in text
    kept = run_json("--method", "eagle", "--num-spec", "3", "--max-num-seqs", "8", "--sizes", "4,8", "--platform", "cpu")
    assert kept["target_sizes"] == [4, 8] and kept["warnings"] == []
