"""``portable-spec bench draft`` on a host without device graphs, through the real console entry (subprocess):
one-line errors that name the fix, and the sub-command tree the lead extends with ``bench e2e``."""

from __future__ import annotations

import os
import subprocess
import sys


def run_cli(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "VLLM_PLATFORM"}
    return subprocess.run([sys.executable, "-m", "portable_spec", *args], capture_output=True, text=True, env=env,
                          timeout=120)


def test_bench_draft_on_cpu_is_a_one_line_error_naming_a_gpu_platform():
    proc = run_cli("bench", "draft", "--platform", "cpu", "--json")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.splitlines() == ["portable-spec: error: bench draft needs device graphs; platform 'cpu' has "
                                        "none: run it on a GPU host (--platform cuda, rocm or musa)"]


def test_bench_draft_rejects_bad_settings_before_touching_a_device():
    proc = run_cli("bench", "draft", "--platform", "cpu", "--batch-sizes", "0,4")
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == ["portable-spec: error: batch sizes must be >= 1 (got [0, 4]): pass "
                                        "--batch-sizes 1,4,16,64"]
    proc = run_cli("bench", "draft", "--platform", "cpu", "--context-len", "1020")
    assert proc.returncode == 2 and "lower --context-len" in proc.stderr and len(proc.stderr.splitlines()) == 1


def test_bench_needs_a_sub_command_and_lists_draft():
    proc = run_cli("bench")
    assert proc.returncode == 2 and "BENCH" in proc.stderr
    proc = run_cli("bench", "--help")
    assert proc.returncode == 0 and "draft" in proc.stdout
