"""``portable-spec probe --platform musa``: the kernel-substitution section, driven through the real registry and
vLLM 0.26.0 on CPU. No torch_musa exists here, so where the command needs the MUSA port the test says so."""

from __future__ import annotations

import argparse
import importlib
import json

from portable_spec import ports
from portable_spec.commands import probe as probe_cmd
from portable_spec.kernels import SUBSTITUTIONS, Substitution, installed, substitutions_for
from portable_spec.ports.cpu_port import CpuPort
from portable_spec.vllm_adapter.patch import version_gate
from portable_spec.vllm_adapter.tools.kernel_report import substitution_report


def _current(target: str):
    module, attr = target.rsplit(".", 1)
    return getattr(importlib.import_module(module), attr)


def test_probe_on_musa_reports_each_substitute_bound_and_why(vllm_platform, monkeypatch, capsys):
    """MUSA AVAILABILITY MONKEYPATCHED: without torch_musa the MUSA port cannot be built, so the command is handed
    the CPU port renamed "musa" (its facts are the CPU's and mean nothing here). What is real is what this test is
    about: the command finds MUSA's entries in the registry, binds them on this host's vLLM as MusaWorker does,
    reports each one bound with its reason, and puts vLLM's objects back."""
    stand_in = CpuPort(label="musa (availability monkeypatched: the CPU port stands in)")
    stand_in.name = "musa"
    monkeypatch.setattr(ports, "select_platform", lambda choice: stand_in)
    targets = [t for s in substitutions_for("musa") for t in s.targets]
    before = {t: _current(t) for t in targets}

    assert probe_cmd.run(argparse.Namespace(platform="musa", json=True, verify=False)) == 0
    section = json.loads(capsys.readouterr().out)["kernel_substitutions"]
    assert section["vllm"] == "0.26.0"
    assert section["vllm_kernels_are_triton_jit"] is False  # vLLM found no Triton driver on this CPU host
    here = [s for s in (sub.at(version_gate.pick) for sub in substitutions_for("musa")) if s.targets]
    assert [s["name"] for s in section["substitutions"]] == [s.name for s in here]  # entries with a site on this vLLM
    for row, sub in zip(section["substitutions"], here):
        assert row["bound"] is True and row["error"] is None, row
        assert row["reason"] == sub.reason and row["targets"] == list(sub.targets)
    assert installed() == [] and all(_current(t) is before[t] for t in targets)

    assert probe_cmd.run(argparse.Namespace(platform="musa", json=False, verify=False)) == 0
    text = capsys.readouterr().out
    n = len(here)
    assert f"kernel substitutions: {n}/{n} bound (vLLM 0.26.0" in text
    assert "  kernel_unified_attention <- vLLM's source with unannotate-parameters x6: bound" in text


def test_a_substitute_that_cannot_bind_is_reported_with_its_one_line_fix(vllm_platform):
    moved = Substitution(name="moved", platforms=("musa",), reason="test entry",
                         targets=("vllm.v1.spec_decode.utils.no_such_kernel",),
                         replacement=SUBSTITUTIONS[0].replacement)
    report = substitution_report("musa", (SUBSTITUTIONS[0], moved))
    assert [r["bound"] for r in report["substitutions"]] == [False, False]
    error = report["substitutions"][1]["error"]
    assert "\n" not in error and "has no attribute 'no_such_kernel' (vLLM moved it)" in error
    assert installed() == []


def test_platforms_without_substitutions_get_no_section(vllm_platform, monkeypatch, capsys):
    monkeypatch.setattr(ports, "select_platform", lambda choice: CpuPort())
    assert probe_cmd.run(argparse.Namespace(platform="cpu", json=True, verify=False)) == 0
    assert "kernel_substitutions" not in json.loads(capsys.readouterr().out)
    assert substitution_report("rocm") == {"vllm": "0.26.0", "vllm_kernels_are_triton_jit": None,
                                           "substitutions": []}
