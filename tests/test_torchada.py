"""torchada as MUSA users have it (issue 40): the REAL package, on a CPU host.

- Our live-graph cap follows torchada's: the default is the installed torchada's ``_DEFAULT_CAP``
  (``torchada/_graph_rotation.py``), and for every setting the cap our MUSA port plans with is the one torchada's own
  ``_resolve_cap`` returns (ours refuses in one line where torchada silently ignores a value; the number is the same).
- Importing torchada sets ``VLLM_TUNED_CONFIG_FOLDER`` and ``SGLANG_MOE_CONFIG_DIR`` (``torchada/__init__.py`` calls
  ``set_default_moe_config_dir``); without torch_musa it patches nothing. None of our decisions may move with that
  import: the capture-size plans, the platform resolution, every variable of our envs table, the attention table and
  picks, the kernel substitutes, the MUSA cap. Each side is computed in a fresh interpreter, one with ``import
  torchada`` first, and compared leaf by leaf; a decision that reads one of torchada's variables fails it (the canary
  test shows the comparison sees one).

The cpu lane installs torchada (``ci/requirements-cpu.txt``); elsewhere these tests skip, saying so.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap

import pytest

from portable_spec import envs
from portable_spec.ports import torchada_build
from portable_spec.ports.musa_port import MusaPort

HAVE_TORCHADA = importlib.util.find_spec("torchada") is not None  # finds it; importing it here would set variables
needs_torchada = pytest.mark.skipif(not HAVE_TORCHADA, reason="torchada is not installed in this environment (the "
                                                              "cpu lane installs it from ci/requirements-cpu.txt)")

TORCHADA_SETS = ("VLLM_TUNED_CONFIG_FOLDER", "SGLANG_MOE_CONFIG_DIR")
"""What ``import torchada`` sets when unset (``torchada/triton/autotune/fused_moe/__init__.py``,
``set_default_moe_config_dir``, 0.1.103)."""
TORCHADA_READS = ("TORCHADA_GRAPH_EXEC_CAP", "TORCHADA_GRAPH_AUTOPROBE", "TORCHADA_GRAPH_EXEC_MARGIN",
                  "TORCHADA_GRAPH_ROTATION", "TORCHADA_PLATFORM", "TORCHADA_FORCE_CUDA_AVAILABLE")


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without torchada's variables, ours that steer a decision, and with ``extra``."""
    drop = {*TORCHADA_SETS, *TORCHADA_READS, envs.PLATFORM_ENV, envs.SIM_DEVICE_ENV}
    return {**{k: v for k, v in os.environ.items() if k not in drop}, **extra}


def run_python(code: str, *args: str, env: dict[str, str] | None = None) -> dict:
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True,
                          env=clean_env() if env is None else env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1])


# -- the cap -----------------------------------------------------------------------------------------------------------

@needs_torchada
def test_our_default_cap_is_the_installed_torchadas():
    """The literal we read from torchada's source is the constant its module holds when imported, and ours agrees:
    were torchada's default to change, the mirror (``envs.TORCHADA_DEFAULT_EXEC_CAP``, what a host without torchada
    plans with) must follow."""
    theirs = run_python("""
        import json
        from torchada import _graph_rotation as g
        print(json.dumps({"default": g._DEFAULT_CAP}))
    """)["default"]
    assert torchada_build.default_cap() == theirs
    assert envs.TORCHADA_DEFAULT_EXEC_CAP == theirs, (
        f"torchada {torchada_build.installed_version()} caps at {theirs} by default; ours says "
        f"{envs.TORCHADA_DEFAULT_EXEC_CAP}: update EnvVar({envs.TORCHADA_CAP_ENV}) and docs/environment.md")
    assert MusaPort.runtime_live_graph_limit() == (theirs, None)


CAP_VALUES = (None, "", "   ", "1000", " 12 ", "+7", "1_000", "64", "0", "-5", "many", "12.5", "3e3", "0x40")


@needs_torchada
def test_for_every_setting_our_cap_is_the_one_torchada_enforces():
    """torchada's own ``_resolve_cap`` (explicit setting > auto-probe > default) against our MUSA port, one setting
    after another in one interpreter: the same number every time. Where torchada ignores the setting, ours names it
    in one line (the CLI refuses it; an engine plans with torchada's number and logs the line). With
    ``TORCHADA_GRAPH_AUTOPROBE=1`` and no cap set, torchada measures its cap on the device (here its probe finds no
    torch_musa and it falls back to its default); ours plans with the default and says why."""
    settings = [(cap, None) for cap in CAP_VALUES] + [(None, "1"), ("", "1"), ("500", "1"), (None, " 1"), (None, "0")]
    rows = run_python("""
        import json, os, sys
        from torchada import _graph_rotation as g
        from portable_spec.ports.musa_port import MusaPort
        rows = []
        for cap, probe in json.loads(sys.argv[1]):
            for name, value in (("TORCHADA_GRAPH_EXEC_CAP", cap), ("TORCHADA_GRAPH_AUTOPROBE", probe)):
                os.environ.pop(name, None)
                if value is not None:
                    os.environ[name] = value
            ours, said = MusaPort.runtime_live_graph_limit()
            rows.append({"cap": cap, "probe": probe, "torchada": g._resolve_cap(), "ours": ours, "said": said})
        print(json.dumps(rows))
    """, json.dumps(settings))
    assert len(rows) == len(settings) > 0
    for row in rows:
        assert row["ours"] == row["torchada"], row
    ignored = {row["cap"] for row in rows if row["said"] and "not a positive integer" in row["said"]}
    assert ignored == {"0", "-5", "many", "12.5", "3e3", "0x40"}, ignored
    assert {row["cap"]: row["ours"] for row in rows if row["cap"] in ("1000", " 12 ", "+7", "1_000")} == {
        "1000": 1000, " 12 ": 12, "+7": 7, "1_000": 1000}
    probed = [(row["cap"], row["probe"]) for row in rows if row["said"] and "AUTOPROBE=1" in row["said"]]
    assert probed == [(None, "1")], probed  # a set cap (even blank) wins, and only exactly "1" probes


def test_probe_reports_torchadas_version_and_cap(monkeypatch):
    """``probe --platform musa``'s torchada section: the version from the distribution's metadata (no import), the cap
    in force and where it comes from."""
    for name in TORCHADA_READS:
        monkeypatch.delenv(name, raising=False)
    facts = MusaPort.torchada_facts()
    assert facts["live_graph_cap"] == envs.TORCHADA_DEFAULT_EXEC_CAP and facts["cap_from"] == "torchada's default"
    if HAVE_TORCHADA:
        assert facts["version"] == torchada_build.installed_version() and facts["version"][0].isdigit()
        assert facts["default_from"] == f"_DEFAULT_CAP in {torchada_build.cap_source_path()}"
        assert facts["default_from"].endswith(os.path.join("torchada", "_graph_rotation.py"))
    else:
        assert facts["version"] == "not installed" and facts["default_from"].startswith("ours (1900")
    assert "torchada" not in sys.modules  # read, never imported
    assert facts["rotation"].startswith("on")
    monkeypatch.setenv(envs.TORCHADA_ROTATION_ENV, "0")
    assert MusaPort.torchada_facts()["rotation"].startswith("off (TORCHADA_GRAPH_ROTATION=0")
    monkeypatch.setenv(envs.TORCHADA_AUTOPROBE_ENV, "1")
    assert MusaPort.torchada_facts()["cap_from"].startswith("TORCHADA_GRAPH_AUTOPROBE=1 has torchada measure")
    monkeypatch.setenv(envs.TORCHADA_CAP_ENV, "300")
    assert MusaPort.torchada_facts()["live_graph_cap"] == 300
    assert MusaPort.torchada_facts()["cap_from"] == envs.TORCHADA_CAP_ENV
    monkeypatch.setenv(envs.TORCHADA_CAP_ENV, "-3")
    facts = MusaPort.torchada_facts()
    assert facts["live_graph_cap"] == envs.TORCHADA_DEFAULT_EXEC_CAP and "'-3' is not a positive integer" in \
        facts["cap_from"]


# -- import-time effects -------------------------------------------------------------------------------------------

@needs_torchada
def test_what_importing_torchada_does_on_a_cpu_host():
    """Without torch_musa: it imports (torch, no torch_musa), detects the CPU, patches nothing (``apply_patches``
    returns early, ``torch.cuda`` stays torch's, no graph rotation), and sets exactly its two config folders where
    unset, leaving a value already set alone."""
    seen = run_python("""
        import json, os, sys
        before = dict(os.environ)
        import torch
        cuda = sys.modules["torch.cuda"]
        import torchada
        from torchada import _graph_rotation as g
        after = dict(os.environ)
        print(json.dumps({"changed": sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k)),
                          "values": {k: after.get(k) for k in %r}, "platform": torchada.detect_platform().value,
                          "torch_musa": "torch_musa" in sys.modules, "cuda_kept": sys.modules["torch.cuda"] is cuda,
                          "patched": torchada.is_patched(), "rotation": g._installed}))
    """ % (TORCHADA_SETS,))
    assert seen["changed"] == sorted(TORCHADA_SETS)
    assert seen["values"]["SGLANG_MOE_CONFIG_DIR"].endswith(os.path.join("torchada", "triton", "autotune", "fused_moe"))
    assert os.path.join("fused_moe", "configs", "triton_") in seen["values"]["VLLM_TUNED_CONFIG_FOLDER"]
    assert seen["platform"] == "cpu" and not seen["torch_musa"] and seen["cuda_kept"] and not seen["rotation"]
    kept = run_python("""
        import json, os
        import torchada
        print(json.dumps({k: os.environ[k] for k in %r}))
    """ % (TORCHADA_SETS,), env=clean_env(VLLM_TUNED_CONFIG_FOLDER="/mine", SGLANG_MOE_CONFIG_DIR="/also-mine"))
    assert kept == {"VLLM_TUNED_CONFIG_FOLDER": "/mine", "SGLANG_MOE_CONFIG_DIR": "/also-mine"}


DECISIONS = """
import contextlib, inspect, io, json, os, sys
mode = sys.argv[1]
if mode == "torchada":
    import torchada  # before anything of ours, as a MUSA user's entry point may
torchada_set = {k: os.environ.get(k) for k in %(sets)r}

from portable_spec import envs
from portable_spec.attention_caps.lookup import rows
from portable_spec.attention_caps.platform_pick import attention_picks
from portable_spec.cli import main
from portable_spec.errors import PortableSpecError
from portable_spec.kernels import substitutions_for
from portable_spec.ports import registry
from portable_spec.ports.musa_port import MusaPort


def cli(*argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        try:
            code = main([*argv, "--json"])
        except SystemExit as exc:
            code = exc.code
    return {"exit": code, "json": json.loads(out.getvalue() or "null")}


def outcome(fn, *args):
    try:
        return fn(*args)
    except PortableSpecError as exc:
        return {"error": str(exc)}


decisions = {"sizes": {}, "caps": cli("caps"), "kernels": {}, "probe": {}, "registry": {}, "envs": {},
             "attention": {}, "substitutes": {}}
for platform in registry.platform_names():
    for method in ("eagle", "eagle3", "mtp", "dflash", "draft_model"):
        for k, seqs in ((1, 1), (3, 8), (7, 256)):
            key = f"{platform}/{method}/k{k}/n{seqs}"
            decisions["sizes"][key] = cli("sizes", "--method", method, "--num-spec", str(k), "--max-num-seqs",
                                          str(seqs), "--platform", platform)
    for pieces in ("40", "200"):  # PIECEWISE targets; 200 pieces a size overrun MUSA's cap, so the budget prunes
        decisions["sizes"][f"{platform}/budget{pieces}"] = cli("sizes", "--method", "dflash", "--num-spec", "7",
                                                               "--max-num-seqs", "512", "--graphs-per-size", pieces,
                                                               "--platform", platform)
    decisions["kernels"][platform] = cli("kernels", "--platform", platform)
    decisions["probe"][platform] = cli("probe", "--platform", platform)
    decisions["registry"][platform] = outcome(lambda n: registry.select_platform(n).name, platform)
    decisions["attention"][platform] = outcome(attention_picks, platform)
    decisions["substitutes"][platform] = [[s.name, str(s.replacement), list(s.targets)]
                                          for s in substitutions_for(platform)]
decisions["probe"]["detected"] = cli("probe")
decisions["registry"]["detected"] = outcome(registry.detect_platform_name)
decisions["registry"]["requested"] = outcome(registry.requested_platform_name)
decisions["attention"]["rows"] = [r.to_dict() for r in rows()]
decisions["envs"]["raw"] = {v.name: envs.raw(v.name) for v in envs.VARIABLES}
decisions["envs"]["set"] = {v.name: envs.is_set(v.name) for v in envs.VARIABLES}
for reader, fn in vars(envs).items():  # every named reader that needs no argument (a new one is compared too)
    if inspect.isfunction(fn) and fn.__module__ == envs.__name__ and not reader.startswith("_") and all(
            p.default is not p.empty for p in inspect.signature(fn).parameters.values()):
        decisions["envs"][reader] = outcome(fn)
decisions["musa_cap"] = {"runtime": MusaPort.runtime_live_graph_limit(), "torchada": MusaPort.torchada_facts()}
if "canary" in sys.argv[2:]:  # a decision that reads a variable torchada sets: the comparison must see it move
    decisions["canary"] = os.environ.get("VLLM_TUNED_CONFIG_FOLDER")
print(json.dumps({"torchada_set": torchada_set, "decisions": decisions}, default=repr))
""" % {"sets": TORCHADA_SETS}


def leaves(value, path=""):
    """Every scalar of a JSON value, keyed by its path (a container's emptiness is a leaf too)."""
    if isinstance(value, dict):
        items = [(f"{path}/{k}", v) for k, v in value.items()]
    elif isinstance(value, list):
        items = [(f"{path}[{i}]", v) for i, v in enumerate(value)]
    else:
        return {path: value}
    out = {path: type(value).__name__ + ("(empty)" if not value else "")}
    for sub, v in items:
        out.update(leaves(v, sub))
    return out


@pytest.fixture(scope="module")
def compared() -> tuple[int, list[str]]:
    """Our decisions in a fresh interpreter without, then with, ``import torchada`` (each with the canary):
    (leaves compared, the paths that differ)."""
    plain = run_python(DECISIONS, "plain", "canary")
    imported = run_python(DECISIONS, "torchada", "canary")
    assert plain["torchada_set"] == dict.fromkeys(TORCHADA_SETS)
    assert all(imported["torchada_set"].values()), imported["torchada_set"]  # the import ran, with its effects
    before, after = leaves(plain["decisions"]), leaves(imported["decisions"])
    differing = sorted(k for k in before.keys() | after.keys() if before.get(k, "<absent>") != after.get(k, "<absent>"))
    return len(before.keys() | after.keys()), differing


@needs_torchada
def test_importing_torchada_changes_none_of_our_decisions(compared):
    count, differing = compared
    ours = [path for path in differing if path != "/canary"]
    assert not ours, f"import torchada moved {len(ours)} of our decisions: {ours[:20]}"
    assert count > 1000, count  # every section filled: the sizes alone are 4 platforms x 16 plans


@needs_torchada
def test_the_comparison_sees_a_decision_that_reads_a_variable_torchada_sets(compared):
    """The canary (``os.environ.get("VLLM_TUNED_CONFIG_FOLDER")``, asked for in both interpreters) moves with the
    import: a decision of ours that read a variable torchada sets would fail the test above the same way."""
    assert "/canary" in compared[1]
