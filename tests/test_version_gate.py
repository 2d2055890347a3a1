"""The version gate (``vllm_adapter.patch.version_gate``): the one place per-version differences live. Pure version
arithmetic and the worker's use of it; the lane runs this module on every vLLM of the span."""

from __future__ import annotations

import logging
import re
import tomllib
from pathlib import Path

import pytest

from portable_spec.vllm_adapter.patch import version_gate
from portable_spec.vllm_adapter.patch.manifest import CENSUS

ROOT = Path(__file__).resolve().parents[1]
V26, V28, V33 = (version_gate.parse(v) for v in version_gate.SPAN)


def test_versions_parse_to_their_release_numbers():
    assert version_gate.parse("0.33.0") == (0, 33, 0)
    assert version_gate.parse("0.33.1.dev4+g1234abc") == (0, 33, 1)
    assert version_gate.parse("0.28.0+musa") == (0, 28, 0)
    assert version_gate.parse("1.0") == (1, 0, 0)
    with pytest.raises(ValueError):
        version_gate.parse("nightly")


def test_pick_takes_the_newest_key_at_or_below_the_version():
    table = {"0.26.0": "a", "0.28.0": "b", "0.33.0": "c"}
    assert [version_gate.pick(table, v) for v in (V26, (0, 27, 1), V28, (0, 31, 0), V33, (0, 40, 0))] == [
        "a", "a", "b", "b", "c", "c"]
    assert version_gate.pick({"0.26.0": "a", "0.33.0": "c"}, V28) == "a"  # unchanged until 0.33
    with pytest.raises(LookupError, match="0.25.0"):
        version_gate.pick(table, (0, 25, 0))


def test_each_feature_exists_where_the_lane_found_it():
    expected = {"v1_full_drafter": (True, True, False), "kernel_substitutes_cuda": (True, True, False),
                "planner_mirrors_vllm_sizes": (True, True, False),
                "mrv2_graph_budget": (True, True, True), "mrv2_sampled_warmup": (True, True, True),
                "mrv2_standalone_graphs": (False, False, True)}
    assert set(expected) == set(version_gate.FEATURES)
    for name, verdicts in expected.items():
        assert tuple(version_gate.has(name, v) for v in (V26, V28, V33)) == verdicts, name
        for version, present in zip((V26, V28, V33), verdicts):
            reason = version_gate.why_not(name, version)
            assert (reason is None) == present, name
            assert present or (reason.startswith(f"{name} unsupported on vLLM ") and "\n" not in reason)


def test_why_not_names_the_version_and_the_reason_in_one_line():
    line = version_gate.why_not("v1_full_drafter", V33)
    assert line.startswith("v1_full_drafter unsupported on vLLM 0.33.0: from vLLM 0.29 Model Runner V2 runs")
    assert version_gate.why_not("v1_full_drafter", V28) is None
    with pytest.raises(KeyError, match="unknown version-gate feature"):
        version_gate.has("no_such_feature", V26)


def test_say_unsupported_logs_once_per_process(monkeypatch, caplog):
    monkeypatch.setattr(version_gate, "installed", lambda: V33)
    monkeypatch.setattr(version_gate, "_SAID", set())
    logger = logging.getLogger("portable_spec.vllm_adapter")
    with caplog.at_level(logging.INFO, logger="portable_spec.vllm_adapter"):
        assert version_gate.say_unsupported("v1_full_drafter", logger) is True
        assert version_gate.say_unsupported("v1_full_drafter", logger) is True
    lines = [r.getMessage() for r in caplog.records if "v1_full_drafter" in r.getMessage()]
    assert lines == ["portable_spec: " + version_gate.why_not("v1_full_drafter", V33)]
    monkeypatch.setattr(version_gate, "installed", lambda: V26)
    assert version_gate.say_unsupported("v1_full_drafter", logger) is False


def test_the_span_is_the_lanes_virtualenvs_and_pyproject_states_the_range():
    pins = sorted((re.search(r"^vllm==(\S+)$", path.read_text(), re.M).group(1)
                   for path in (ROOT / "ci").glob("requirements-cpu*.txt")), key=version_gate.parse)
    assert tuple(pins) == version_gate.SPAN
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["vllm"]
    assert extra == [f"vllm{version_gate.SUPPORTED}"]
    low, high = re.fullmatch(r">=(\S+),<(\S+)", version_gate.SUPPORTED).groups()
    assert version_gate.parse(low) == V26 and all(version_gate.parse(v) < version_gate.parse(high)
                                                  for v in version_gate.SPAN)


def test_the_installed_vllm_is_one_the_lane_checks():
    """Each lane virtualenv holds a vLLM of the span (a stray version would report numbers for nothing we check)."""
    if version_gate.installed_text() is None:
        pytest.skip("no vLLM installed")
    assert version_gate.report()["in_span"], version_gate.installed_text()


def test_a_moved_census_target_is_looked_up_where_each_version_has_it():
    moved = [d for d in CENSUS if d.moved]
    assert len(moved) == 2  # validate_environ; the MRV2 worker's warm-up body (_compile_or_warm_up_model on 0.33)
    for entry in moved:
        (old, since, new), = entry.moved
        assert old in entry.targets_on(V26) and old in entry.targets_on(V28)
        assert new in entry.targets_on(V33) and old not in entry.targets_on(V33)
        assert since == "0.33.0"


def test_the_mrv2_sampled_warm_up_exists_on_every_version_a_model_covers():
    """``mrv2_sampled_warmup``: derived for vLLM 0.26, 0.28 and 0.33 (``mrv2_warmup.installed_plan`` picks the newest at
    or below the installed one), none past 0.33."""
    verdicts = [version_gate.has("mrv2_sampled_warmup", v)
                for v in ((0, 25, 9), (0, 26, 0), (0, 27, 0), V28, (0, 32, 9), V33, (0, 33, 5), (0, 34, 0))]
    assert verdicts == [False, True, True, True, True, True, True, False]


def test_v1_drafter_entries_do_not_apply_where_the_feature_is_absent():
    v1 = [d for d in CENSUS if d.requires == "v1_full_drafter"]
    assert len(v1) >= 8
    assert all(d.applies(V28) and not d.applies(V33) for d in v1)
    assert all(d.applies(V33) for d in CENSUS if not d.requires)


def test_the_worker_binds_no_substitutes_where_the_gate_says_so(monkeypatch, caplog, vllm_platform):
    """``gpu_worker.bind_kernel_substitutes``: on 0.26.0 the port's table is installed; MUSA's on 0.33.0 too (derived
    per version); CUDA's on 0.33.0 one line, none bound (installing would raise: the V1 drafter's binding sites
    moved)."""
    from portable_spec.vllm_adapter.worker import gpu_worker

    installs = []
    monkeypatch.setattr(gpu_worker, "port_name_of", lambda platform: "cuda")
    monkeypatch.setattr(gpu_worker, "install_substitutions",
                        lambda port, subs=(), pick=None: installs.append(port) or [])
    monkeypatch.setattr(version_gate, "_SAID", set())
    monkeypatch.setattr(version_gate, "installed", lambda: V26)
    gpu_worker.bind_kernel_substitutes()
    assert installs == ["cuda"]
    monkeypatch.setattr(gpu_worker, "port_name_of", lambda platform: "musa")  # MUSA's table: on every version
    monkeypatch.setattr(version_gate, "installed", lambda: V33)
    gpu_worker.bind_kernel_substitutes()
    assert installs == ["cuda", "musa"]
    monkeypatch.setattr(gpu_worker, "port_name_of", lambda platform: "cuda")
    with caplog.at_level(logging.INFO, logger="portable_spec.vllm_adapter"):
        assert gpu_worker.bind_kernel_substitutes() == []
    assert installs == ["cuda", "musa"]
    assert [r.getMessage() for r in caplog.records if r.name.startswith("portable_spec")] == [
        "portable_spec: " + version_gate.why_not("kernel_substitutes_cuda", V33)]
