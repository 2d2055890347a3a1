"""ci/gpu/version_span.py on CPU: the plan per vLLM version (our V1 drafter's e2e where the gate says it exists, the
boot check and the gate's one-line reason where it does not), the budget, and the verdict."""

from __future__ import annotations

import sys

import pytest
from ci_scripts import load_ci_script


@pytest.fixture(scope="module")
def span():
    return load_ci_script("ci/gpu/version_span.py", "gpu_version_span")


@pytest.mark.parametrize("version", [(0, 26, 0), (0, 28, 0)])
def test_where_our_v1_drafter_exists_the_span_runs_its_e2e_parts(span, tmp_path, version):
    steps, reason = span.plan(tmp_path, "perfect,moe", version)
    assert reason is None
    assert [step["name"] for step in steps] == ["hook_points", "gpu_tests", "e2e"]
    e2e = steps[-1]["cmd"]
    assert e2e[1] == "ci/gpu/v1_drafter_matrix.py" and e2e[e2e.index("--parts") + 1] == "perfect,moe"
    assert "--concurrent-variants" in e2e  # the variants boot at once: inside the ~8-minute device budget
    assert "tests/test_vllm_hook_points.py" in steps[0]["cmd"] and "tests/gpu" in steps[1]["cmd"]


def test_where_vllm_picks_model_runner_v2_the_span_boots_instead_and_says_why(span, tmp_path):
    steps, reason = span.plan(tmp_path, "perfect", (0, 33, 0))
    assert reason is not None and reason.startswith("v1_full_drafter unsupported on vLLM 0.33.0: ")
    assert [step["name"] for step in steps] == ["hook_points", "gpu_tests", "boot"]
    assert steps[-1]["cmd"][1:4] == ["ci/gpu/vllm_boot.py", str(tmp_path / "boot"), "--quick"]


def test_each_step_records_its_exit_code_and_a_spent_budget_fails_the_rest(span):
    steps = [{"name": "ok", "cmd": [sys.executable, "-c", "pass"]},
             {"name": "bad", "cmd": [sys.executable, "-c", "raise SystemExit(3)"]}]
    span.run(steps, span.time.monotonic() + 120)
    assert [step["rc"] for step in steps] == [0, 3]
    late = [{"name": "late", "cmd": [sys.executable, "-c", "pass"]}]
    span.run(late, span.time.monotonic() + 5)  # under 30 s left: not started
    assert late[0]["rc"] == 124 and "budget" in late[0]["note"]
