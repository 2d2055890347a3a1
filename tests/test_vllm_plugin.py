"""The vLLM adapter against real vLLM 0.26.0 on CPU: entry points, the VLLM_PLATFORM probe, vLLM's own resolver
(subprocesses: the platform is process-global), and the MUSA platform and worker at construction level."""

from __future__ import annotations

import importlib
import importlib.metadata as md
import os
import subprocess
import sys
import textwrap

import pytest

from portable_spec import envs as our_envs
from portable_spec.ports.musa_port import MusaPort
from portable_spec.vllm_adapter.platform import qualnames, selection
from portable_spec.vllm_adapter.plugin import general_plugin
from portable_spec.vllm_adapter.plugin import platform_plugin
from portable_spec.vllm_adapter.patch.manifest import CENSUS

PROBE_EP = "portable_spec.vllm_adapter.plugin.platform_plugin:platform_qualname"
GENERAL_EP = "portable_spec.vllm_adapter.plugin.general_plugin:register"


def entry_points(group: str) -> dict[str, md.EntryPoint]:
    return {ep.name: ep for ep in md.entry_points(group=group)}


def test_entry_points_are_discoverable_and_load():
    platform_eps, general_eps = entry_points("vllm.platform_plugins"), entry_points("vllm.general_plugins")
    assert platform_eps["portable_spec"].value == PROBE_EP
    assert general_eps["portable_spec"].value == GENERAL_EP
    assert platform_eps["portable_spec"].load() is platform_plugin.platform_qualname
    assert general_eps["portable_spec"].load() is general_plugin.register


def test_probe_is_none_when_vllm_platform_is_unset(monkeypatch):
    monkeypatch.delenv("VLLM_PLATFORM", raising=False)
    assert platform_plugin.platform_qualname() is None


@pytest.mark.parametrize("value", ["", "   "])
def test_an_empty_vllm_platform_is_the_error_class_not_vllms_built_ins(monkeypatch, value):
    """Set but empty is not unset: vLLM's own variables read an empty value as a value (``envs.env_with_choices``
    validates it, ``VLLM_PLUGINS=""`` loads no plugin), so the probe names the fix instead of stepping aside."""
    monkeypatch.setenv("VLLM_PLATFORM", value)
    assert platform_plugin.platform_qualname() == qualnames.ERROR_CLASS
    assert selection.current().problem == (
        "VLLM_PLATFORM is set but empty: name one of cpu, cuda, musa, rocm, or unset it (auto-detection on the CLI; "
        "vLLM's built-in platforms under vLLM)")


@pytest.mark.parametrize("value", ["bogus", "tpu", "cuda-12"])
def test_probe_routes_unknown_values_to_the_error_class(monkeypatch, value):
    monkeypatch.setenv("VLLM_PLATFORM", value)
    assert platform_plugin.platform_qualname() == qualnames.ERROR_CLASS


def test_probe_answers_each_platform_by_availability(monkeypatch):
    """cuda/rocm/musa → our class when our port can run here, else the error class; cpu → vLLM's CpuPort."""
    from portable_spec.ports import platform_class

    for name in ("cuda", "rocm", "musa", "cpu"):
        monkeypatch.setenv("VLLM_PLATFORM", name.upper())
        expected = (qualnames.PLATFORM_CLASSES[name] if platform_class(name).unavailable_reason() is None
                    else qualnames.ERROR_CLASS)
        assert platform_plugin.platform_qualname() == expected
    assert qualnames.PLATFORM_CLASSES["cpu"] == "vllm.platforms.cpu.CpuPlatform"
    assert qualnames.PLATFORM_CLASSES["musa"] == "portable_spec.vllm_adapter.platform.musa.PortableMusaPlatform"


def test_probe_imports_no_vllm_platform_module():
    code = ("import os, sys; os.environ['VLLM_PLATFORM'] = 'musa'\n"
            "from portable_spec.vllm_adapter.plugin.platform_plugin import platform_qualname\n"
            "platform_qualname(); platform_qualname()\n"
            "print(sorted(m for m in sys.modules if m.startswith('vllm')))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def run_python(code: str, env_extra: dict[str, str]) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("VLLM_PLATFORM", "VLLM_PLUGINS")}
    env.update(env_extra)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env,
                          timeout=240)


def test_vllm_resolver_surfaces_our_one_line_error_for_a_bogus_value():
    proc = run_python("""
        import vllm.platforms
        print(vllm.platforms.current_platform)
    """, {"VLLM_PLATFORM": "bogus"})
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert last == ("portable_spec.errors.PlatformError: unknown platform 'bogus' from VLLM_PLATFORM; "
                    "valid choices: cpu, cuda, musa, rocm")


def test_vllm_resolver_keeps_builtins_when_unset():
    proc = run_python("""
        from vllm.platforms import resolve_current_platform_cls_qualname
        print(resolve_current_platform_cls_qualname())
    """, {})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "vllm.platforms.interface.UnspecifiedPlatform"


MUSA_SIM_PRELUDE = """
    # musa-sim: torch_musa is not installed; the MUSA port is made available with an injected simulated
    # torch.musa (backed by nothing: this process never touches a device) and torch learns the 'musa' device name.
    import torch
    torch.utils.rename_privateuse1_backend("musa")
    from portable_spec.ports.musa_port import MusaPort
    from portable_spec_harness.musa_sim import SimulatedMusa
    from portable_spec.ports.current import install_device_port
    MusaPort.unavailable_reason = classmethod(lambda cls: None)
    install_device_port(MusaPort(device_module=SimulatedMusa(backing=torch.cuda), label="musa-sim"))
"""


@pytest.mark.skipif(MusaPort.is_active(), reason="torch_musa is installed here: run the real thing")
def test_vllm_resolver_picks_our_musa_class_musa_sim():
    proc = run_python(MUSA_SIM_PRELUDE + """
    import vllm.platforms
    cp = vllm.platforms.current_platform
    print(type(cp).__module__ + "." + type(cp).__qualname__, cp.device_type, cp.dist_backend,
          cp.support_static_graph_mode())
    """, {"VLLM_PLATFORM": "musa"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == \
        "portable_spec.vllm_adapter.platform.musa.PortableMusaPlatform musa mccl True"


def test_musa_vllm_platform_class_declarations():
    from vllm.platforms.interface import Platform, PlatformEnum

    from portable_spec.vllm_adapter.platform.musa import MUSA_WORKER, PortableMusaPlatform

    assert issubclass(PortableMusaPlatform, Platform)
    assert PortableMusaPlatform._enum == PlatformEnum.OOT
    assert (PortableMusaPlatform.device_type, PortableMusaPlatform.dist_backend) == ("musa", "mccl")
    assert PortableMusaPlatform.support_static_graph_mode()
    assert PortableMusaPlatform.device_control_env_var == "MUSA_VISIBLE_DEVICES"
    assert importlib.import_module(MUSA_WORKER.rpartition(".")[0]).MusaWorker.__name__ == "MusaWorker"


@pytest.fixture
def vllm_envs(monkeypatch):
    """vLLM's real ``envs`` module; its variable table is restored after the test and unknown VLLM_* are unset."""
    import vllm.envs as envs

    table = {name: getter for name, getter in envs.environment_variables.items()
             if getter is not our_envs.requested_platform}  # as if our plugin had not run in this process
    monkeypatch.setattr(envs, "environment_variables", table)
    for name in [n for n in os.environ if n.startswith("VLLM_") and n not in envs.environment_variables]:
        monkeypatch.delenv(name)
    monkeypatch.delenv(general_plugin.DRAFT_GRAPH_ENV, raising=False)
    monkeypatch.setattr(general_plugin, "INSTALLED", [])
    return envs


def test_general_plugin_is_a_no_op_unless_selected(monkeypatch, vllm_envs):
    monkeypatch.delenv("VLLM_PLATFORM", raising=False)
    general_plugin.register()
    assert general_plugin.INSTALLED == []
    monkeypatch.setenv("VLLM_PLATFORM", "cpu")  # vLLM's own CPU platform: not ours
    general_plugin.register()
    assert general_plugin.INSTALLED == []
    monkeypatch.setenv("VLLM_PLATFORM", "musa")
    general_plugin.register()
    general_plugin.register()
    assert general_plugin.INSTALLED == ["general_plugin"]


def validate_environ_target() -> str:
    """Where vLLM's check of VLLM_* variables lives in the installed vLLM, as the census says (0.33 moved it onto the
    platform class; it reads the same table)."""
    (entry,) = [d for d in CENSUS if d.name == "general plugin: VLLM_PLATFORM declared"]
    return next(target for target in entry.targets_on() if target.endswith("validate_environ"))


def validate_environ(hard_fail: bool) -> None:
    module, _, qualname = validate_environ_target().partition(":")
    owner = importlib.import_module(module)
    for name in qualname.split("."):
        owner = getattr(owner, name)
    owner(hard_fail=hard_fail)


def test_general_plugin_makes_vllm_platform_a_known_vllm_variable(monkeypatch, vllm_envs):
    monkeypatch.setenv("VLLM_PLATFORM", "MUSA")
    with pytest.raises(ValueError, match="Unknown vLLM environment variable detected: VLLM_PLATFORM"):
        validate_environ(hard_fail=True)  # what every engine warns about without the plugin
    general_plugin.register()
    validate_environ(hard_fail=True)
    getter = vllm_envs.environment_variables["VLLM_PLATFORM"]
    general_plugin.register()
    assert vllm_envs.environment_variables["VLLM_PLATFORM"] is getter  # idempotent
    assert vllm_envs.VLLM_PLATFORM == "musa" and vllm_envs.compile_factors()["VLLM_PLATFORM"] == "musa"
    monkeypatch.setenv("VLLM_NOT_A_REAL_VAR", "1")  # the check itself is still live
    with pytest.raises(ValueError, match="Unknown vLLM environment variable detected: VLLM_NOT_A_REAL_VAR"):
        validate_environ(hard_fail=True)


def test_general_plugin_never_replaces_a_vllm_definition(monkeypatch, vllm_envs):
    def vllms_own():
        return "vLLM's meaning"

    vllm_envs.environment_variables["VLLM_PLATFORM"] = vllms_own
    monkeypatch.setenv("VLLM_PLATFORM", "musa")
    general_plugin.register()
    assert vllm_envs.environment_variables["VLLM_PLATFORM"] is vllms_own


@pytest.mark.parametrize("env", [{}, {"VLLM_PLATFORM": "cpu"}, {general_plugin.DRAFT_GRAPH_ENV: "full"}])
def test_general_plugin_declares_nothing_when_not_selected_by_vllm_platform(monkeypatch, vllm_envs, env):
    monkeypatch.delenv("VLLM_PLATFORM", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    general_plugin.register()
    assert "VLLM_PLATFORM" not in vllm_envs.environment_variables


@pytest.mark.skipif(MusaPort.is_active(), reason="torch_musa is installed here: run the real thing")
def test_vllms_plugin_loader_silences_the_unknown_variable_check_musa_sim():
    """Through vLLM's own entry-point loader, as ``EngineArgs.__post_init__`` runs it before validation."""
    module, _, qualname = validate_environ_target().partition(":")
    proc = run_python(MUSA_SIM_PRELUDE + f"""
    import os
    from {module} import {qualname.split(".")[0]}
    from vllm.plugins import load_general_plugins
    load_general_plugins()
    {qualname}(hard_fail=True)
    os.environ["VLLM_NOT_A_REAL_VAR"] = "1"
    try:
        {qualname}(hard_fail=True)
    except ValueError as exc:
        print(exc)
    """, {"VLLM_PLATFORM": "musa"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == "Unknown vLLM environment variable detected: VLLM_NOT_A_REAL_VAR"


def test_every_qualname_in_the_table_names_a_class_of_our_source_or_vllms():
    """One table: a typo there would only fail at serve time. Every port has its row, and every name is a class (or
    an assigned name) at the top of the module it names; the error class's module raises on import, by design."""
    import ast
    import importlib.util

    from portable_spec.ports import platform_names

    assert sorted(qualnames.PLATFORM_CLASSES) == platform_names()
    checked = 0
    for qualname in qualnames.ALL:
        module, _, cls = qualname.rpartition(".")
        spec = importlib.util.find_spec(module)
        assert spec is not None, module
        if qualname == qualnames.ERROR_CLASS:
            checked += 1
            continue
        tree = ast.parse(open(spec.origin).read())
        assert cls in {node.name for node in tree.body if isinstance(node, ast.ClassDef)} or \
            cls in {t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets
                    if isinstance(t, ast.Name)}, (module, cls)
        checked += 1
    assert checked == len(qualnames.ALL) == 9


def test_the_entry_points_are_scanned_once_and_every_reader_gets_the_one_selection(monkeypatch, vllm_envs):
    """vLLM calls the probe twice per process; the general plugin, the error class and the CLI's stack section read
    the same decision. One entry-point scan, one ``Selection`` object, for all of them."""
    import importlib.metadata

    from portable_spec.errors import PlatformError
    from portable_spec.vllm_adapter.platform.stack_report import stack_report

    scans, seen = [], []
    real_scan, real_current = importlib.metadata.entry_points, selection.current
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda *a, **k: scans.append(k) or real_scan(*a, **k))
    monkeypatch.setattr(selection, "current", lambda: seen.append(real_current()) or seen[-1])
    monkeypatch.setenv("VLLM_PLATFORM", "musa")
    selection.forget()
    answers = [platform_plugin.platform_qualname(), platform_plugin.platform_qualname()]
    general_plugin.register()
    assert general_plugin.portable_spec_active() and general_plugin.INSTALLED == ["general_plugin"]
    with pytest.raises(PlatformError):
        importlib.import_module("portable_spec.vllm_adapter.plugin.platform_error")
    report = stack_report()
    assert answers[0] == answers[1] == (qualnames.PLATFORM_CLASSES["musa"] if MusaPort.unavailable_reason() is None
                                        else qualnames.ERROR_CLASS)
    assert report["found"] == "standalone (vllm-musa not installed)"
    assert len(scans) == 1, scans
    assert len(seen) >= 6 and all(chosen is seen[0] for chosen in seen), seen
    monkeypatch.setenv("VLLM_PLATFORM", "cuda")  # a changed input is a fresh decision, from the same scan
    assert real_current() is not seen[0] and real_current().name == "cuda" and len(scans) == 1
