"""``portable-spec census``: the census's platform field answers "where does MUSA differ" in one query, every entry
names platforms we serve, and a bad ``--platform`` is one line with exit 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from portable_spec.commands.census import census_payload
from portable_spec.kernels import substitutions_for
from portable_spec.vllm_adapter.patch.manifest import CENSUS, PLATFORMS
from portable_spec_harness.vllm_door.census import HARNESS_CENSUS


def run_census(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "VLLM_PLATFORM"}
    return subprocess.run([sys.executable, "-m", "portable_spec", "census", *args], capture_output=True, text=True,
                          env=env, timeout=120)


def test_every_entry_names_platforms_we_serve():
    for d in CENSUS + HARNESS_CENSUS:
        assert d.platforms and set(d.platforms) <= set(PLATFORMS), d.name
    assert {p for d in CENSUS for p in d.platforms} == set(PLATFORMS)


def test_where_musa_differs_is_every_musa_specific_entry_and_its_substitutes():
    payload = json.loads(run_census("--platform", "musa", "--json").stdout)
    expected = [d.name for d in CENSUS if "musa" in d.platforms and set(d.platforms) != set(PLATFORMS)]
    assert [e["name"] for e in payload["specific"]] == expected and len(expected) >= 5
    # the MUSA-only classes are all there: the standalone platform, the vllm-musa composition, the device-gate worker
    assert {e["ours"].partition(":")[0].rpartition(".")[2] for e in payload["specific"]} >= {
        "musa", "vllm_musa_platform", "vllm_musa_worker", "musa_worker"}
    subs = [s["name"] for s in payload["kernel_substitutes"]]
    assert subs == [s.name for s in substitutions_for("musa")] and subs
    shared = [d.name for d in CENSUS if set(d.platforms) == set(PLATFORMS)]
    assert payload["shared"] == shared and shared


def test_rocm_binds_no_substitute_and_has_no_specific_entry():
    payload = census_payload("rocm")
    assert payload["specific"] == [] and payload["kernel_substitutes"] == []


def test_the_whole_census_lists_every_entry():
    payload = json.loads(run_census("--json").stdout)
    assert [e["name"] for e in payload["entries"]] == [d.name for d in CENSUS]
    text = run_census().stdout
    assert text.splitlines()[0] == f"census: {len(CENSUS)} places portable_spec changes vLLM"


def test_an_unknown_platform_is_one_line_and_exit_2():
    proc = run_census("--platform", "tpu")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.splitlines() == [
        "portable-spec: error: --platform 'tpu': the census knows cuda, rocm, musa; pass one of them"]
