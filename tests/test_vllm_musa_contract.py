"""Lane vllm-musa-contract: our layer composed with vllm-musa, tested item by item against a stand-in package.

vllm-musa itself is not installable here at a matching version (it builds its own patched vLLM 0.28.0 against
torch_musa), so each test runs against ``tests/vllm_musa_standin.py``: a real distribution with real entry points on
the path, shaped as ``portable_spec/vllm_adapter/platform/vllm_musa_contract.py`` says vllm-musa is. vLLM is the real
0.26.0 throughout. What only a MUSA host can show: that vllm-musa itself still matches the contract, and that the
composed engine serves.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import json
import logging
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

import vllm_musa_standin
from forked_children import run_forked
from portable_spec import envs
from portable_spec.vllm_adapter.platform import vllm_musa_contract as contract
from portable_spec.vllm_adapter.platform import qualnames, selection
from portable_spec.vllm_adapter.platform import stack_report as report_module
from portable_spec.vllm_adapter.platform import vllm_musa_stack as stack
from portable_spec.vllm_adapter.plugin import platform_plugin

pytestmark = pytest.mark.vllm_musa_contract
LOGGER = "portable_spec.vllm_adapter"
ON_TOP = ("kernel_unified_attention", "_load_ptr", "tl_rand32", "tl_rand64", "_rejection_kernel",
          "_fill_logprob_token_ids_kernel", "_apply_write_kernel", "_mulhilo32", "_update_committed_marker_cache_kernel",
          "gumbel_noised_argmax")
"""Our MUSA substitutes bound on top of vllm-musa (no series of its covers them), in the registry's order."""
NOTHING_TO_BIND = {"_mulhilo32", "_update_committed_marker_cache_kernel", "gumbel_noised_argmax"}
"""Of those, the ones whose object vllm-musa's vLLM (0.26.0) lacks (vLLM 0.33.0's watermark module, 0.28.0's thinking
budget, 0.28.0's DFlash2): none bound."""
BOUND_HERE = tuple(name for name in ON_TOP if name not in NOTHING_TO_BIND)


@pytest.fixture
def standin(tmp_path, monkeypatch):
    """The stand-in on this process's path; our once-per-process warnings forgotten; no inherited switches."""
    for name in ("VLLM_PLATFORM", "VLLM_PLUGINS", envs.SIM_DEVICE_ENV, envs.VLLM_MUSA_DRAFT_WRAP_ENV,
                 envs.VLLM_MUSA_DFLASH_WRAP_ENV, envs.VLLM_MUSA_EAGLE_RUNNER_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(stack, "_SAID", set())
    with vllm_musa_standin.installed(tmp_path / "standin") as root:
        yield root


def resolve(qualname: str):
    module, _, name = qualname.rpartition(".")
    return getattr(importlib.import_module(module), name)


def run_python(code: str, env: dict[str, str], args: list[str] = ()) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True,
                          env=env, timeout=300)


def tagged(stdout: str) -> dict[str, str]:
    return dict(line.split(" ", 1) for line in stdout.splitlines() if line.split(" ")[0].isupper() and " " in line)


# ------------------------------------------------------------------ 1. the contract module and the stand-in agree
def contract_differences() -> list[str]:
    """Every item of the contract checked against the vllm-musa this interpreter sees (empty: they agree)."""
    from vllm.platforms.interface import Platform
    from vllm.v1.worker.gpu_worker import Worker

    found = []
    for qualname, base in ((contract.PLATFORM_QUALNAME, Platform), (contract.WORKER_QUALNAME, Worker)):
        try:
            if not issubclass(resolve(qualname), base):
                found.append(f"{qualname} is not a vLLM {base.__name__}")
        except (ImportError, AttributeError) as exc:
            found.append(f"{qualname} does not resolve ({exc})")
    dist = importlib.metadata.distribution(contract.DISTRIBUTION)
    have = {(ep.group, ep.name, ep.value) for ep in dist.entry_points}
    want = {(ep.group, ep.name, ep.value) for ep in contract.ENTRY_POINTS}
    if have != want:
        found.append(f"entry points: contract {sorted(want)}, installed {sorted(have)}")
    if dist.version != contract.VERSION_READ:
        found.append(f"version: contract {contract.VERSION_READ}, installed {dist.version}")
    probe = resolve(contract.PLATFORM_PLUGIN.value.replace(":", "."))
    # The probe's `import torch_musa` finds an empty module: the stand-in's would rename torch's backend here.
    shim, sys.modules["torch_musa"] = sys.modules.get("torch_musa"), types.ModuleType("torch_musa")
    try:
        answer = probe()
    finally:
        del sys.modules["torch_musa"]
        if shim is not None:
            sys.modules["torch_musa"] = shim
    if answer != contract.PROBE_ANSWER:
        found.append(f"probe answer: contract {contract.PROBE_ANSWER}, installed {answer}")
    for method in contract.METHODS:
        try:
            owner = resolve(method.owner)
        except (ImportError, AttributeError):
            continue  # reported above
        defined = [c for c in owner.__mro__ if c.__module__.startswith(contract.PACKAGE) and method.name in vars(c)]
        where = f"{method.owner}.{method.name}"
        if method.use == "absent":
            if defined:
                found.append(f"{where}: the contract relies on vllm-musa not defining it; {defined[0]} does")
        elif not defined:
            found.append(f"{where}: the contract says vllm-musa defines it ({method.use}); it does not")
        elif contract.parameters_of(getattr(owner, method.name)) != method.parameters:
            found.append(f"{where}: parameters {contract.parameters_of(getattr(owner, method.name))}, contract "
                         f"{method.parameters}")
    registered = {}
    platform_module = importlib.import_module(contract.PLATFORM_QUALNAME.rpartition(".")[0])
    real = platform_module.register_backend
    platform_module.register_backend = lambda backend, class_path=None: registered.update({backend.name: class_path})
    try:
        platform_module.register_attention_backends()
    finally:
        platform_module.register_backend = real
    if registered != contract.ATTENTION_BACKENDS:
        found.append(f"attention backends: contract {contract.ATTENTION_BACKENDS}, registered {registered}")
    return found


def test_vllm_musa_contract_every_item_matches_the_standin(standin):
    assert contract_differences() == []


@pytest.mark.parametrize("mutation", ["entry point name", "version", "probe answer", "worker qualname",
                                      "parameters", "absent", "attention backend", "inherited hook"])
def test_vllm_musa_contract_a_divergence_from_the_standin_fails(standin, monkeypatch, mutation):
    """Bite: each kind of item, changed on the contract's side, is reported."""
    methods = list(contract.METHODS)
    if mutation == "entry point name":
        monkeypatch.setattr(contract, "ENTRY_POINTS", (contract.PLATFORM_PLUGIN.__class__(
            "vllm.platform_plugins", "musa_platform", contract.PLATFORM_PLUGIN.value, ""), contract.GENERAL_PLUGIN))
    elif mutation == "version":
        monkeypatch.setattr(contract, "VERSION_READ", "0.1.29")
    elif mutation == "probe answer":
        monkeypatch.setattr(contract, "PROBE_ANSWER", "vllm_musa.platform.MUSAPlatformBase")
    elif mutation == "worker qualname":
        monkeypatch.setattr(contract, "WORKER_QUALNAME", "vllm_musa.worker.MUSAWorker")
    elif mutation == "parameters":
        methods[0] = methods[0].__class__(methods[0].owner, methods[0].name, "(config)", "override", "", "")
    elif mutation == "absent":
        methods[0] = methods[0].__class__(methods[0].owner, methods[0].name, "", "absent", "", "")
    elif mutation == "inherited hook":  # vllm-musa's capture-size check, its keyword-only parameter dropped
        at = next(i for i, m in enumerate(methods) if m.name == "validate_cudagraph_config")
        methods[at] = methods[at].__class__(methods[at].owner, methods[at].name, "(vllm_config)", "inherit", "", "")
    else:
        monkeypatch.setitem(contract.ATTENTION_BACKENDS, "FLASH_ATTN", "vllm_musa.flash_attn.FlashAttention")
    monkeypatch.setattr(contract, "METHODS", tuple(methods))
    assert len(contract_differences()) == 1


def test_vllm_musa_contract_environment_items_are_rows_of_envs_and_we_set_none():
    for item in contract.ENV_READ:
        row = envs.BY_NAME[item.name]
        assert row.default == item.default and row.who == "serve", item.name
    assert contract.ENV_SET == ()
    package = Path(__file__).resolve().parents[1] / "portable_spec"
    written = [p for p in package.rglob("*.py") for item in contract.ENV_READ
               if f'os.environ["{item.name}"] =' in p.read_text() or f"os.environ['{item.name}'] =" in p.read_text()]
    assert written == []


def test_vllm_musa_contract_deferred_substitutes_are_our_musa_substitutes():
    from portable_spec.kernels import substitutions_for

    musa = [sub.name for sub in substitutions_for("musa")]
    assert set(contract.DEFERRED_SUBSTITUTES) < set(musa)
    bound, left = stack.substitutes_on_top(musa)
    assert set(bound) == set(ON_TOP)
    assert left == contract.DEFERRED_SUBSTITUTES


def test_vllm_musa_contract_attention_backends_each_have_a_row_or_a_reason():
    from portable_spec.attention_caps.table import TABLE, VENDOR_BACKENDS_NOT_IN_TABLE

    named = {row.backend: row.vendor_class for row in TABLE if row.platform == "musa" and row.vendor_class}
    assert named == {k: v for k, v in contract.ATTENTION_BACKENDS.items() if k in named}
    assert set(named) | set(VENDOR_BACKENDS_NOT_IN_TABLE["musa"]) == set(contract.ATTENTION_BACKENDS)
    assert not set(named) & set(VENDOR_BACKENDS_NOT_IN_TABLE["musa"])


# ------------------------------------------------------------ 2. vLLM's own plugin resolution, both plugins present
RESOLVE = """
    import vllm.platforms
    from vllm.plugins import load_general_plugins, load_plugins_by_group
    print("PLATFORM_PLUGINS", sorted(load_plugins_by_group("vllm.platform_plugins")))
    print("GENERAL_PLUGINS", sorted(load_plugins_by_group("vllm.general_plugins")))
    try:
        qualname = vllm.platforms.resolve_current_platform_cls_qualname()
    except RuntimeError as exc:
        print("REFUSED", exc)
        raise SystemExit(0)
    print("QUALNAME", qualname)
    from vllm.utils.import_utils import resolve_obj_by_qualname
    cls = resolve_obj_by_qualname(qualname)
    print("SUBCLASS", issubclass(cls, resolve_obj_by_qualname("vllm_musa.platform.MUSAPlatform")))
    load_general_plugins()
    import vllm_musa
    from vllm.v1.attention.backends.registry import AttentionBackendEnum
    print("GENERAL", vllm_musa.REGISTERED, AttentionBackendEnum.FLASH_ATTN.get_path())
"""


def test_vllm_musa_contract_vllm_resolves_our_composed_class_with_vllm_plugins(tmp_path):
    env = vllm_musa_standin.env(tmp_path, VLLM_PLATFORM="musa", VLLM_PLUGINS=contract.VLLM_PLUGINS_VALUE)
    proc = run_python(RESOLVE, env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = tagged(proc.stdout)
    assert out["PLATFORM_PLUGINS"] == "['portable_spec']"  # vllm-musa's 'musa' filtered out by VLLM_PLUGINS ...
    assert out["GENERAL_PLUGINS"] == "['musa_custom_ops', 'portable_spec']"  # ... its general plugin kept
    assert out["QUALNAME"] == qualnames.COMPOSED_MUSA_PLATFORM and out["SUBCLASS"] == "True"
    assert out["GENERAL"] == ("['musa_custom_ops'] "
                              "vllm_musa.v1.attention.backends.flash_attn.MUSAFlashAttentionBackend")


def test_vllm_musa_contract_without_vllm_plugins_vllm_musa_serves_alone_and_one_line_says_why(tmp_path):
    proc = run_python(RESOLVE, vllm_musa_standin.env(tmp_path, VLLM_PLATFORM="musa"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = tagged(proc.stdout)
    assert out["PLATFORM_PLUGINS"] == "['musa', 'portable_spec']"
    assert out["QUALNAME"] == contract.PROBE_ANSWER and "REFUSED" not in out  # no two-plugin error
    said = [line for line in proc.stderr.splitlines() if "serves alone" in line]
    assert len(said) == 1 and f"VLLM_PLUGINS={contract.VLLM_PLUGINS_VALUE}" in said[0], proc.stderr[-2000:]


def test_vllm_musa_contract_if_our_probe_did_not_step_aside_vllm_would_refuse(tmp_path):
    """Bite: the same resolution with our step-aside switched off is vLLM's two-plugin error."""
    code = ("import portable_spec.vllm_adapter.platform.vllm_musa_stack as s\n"
            "s.vllm_musa_answers_too = lambda stack, plugins: False\n") + textwrap.dedent(RESOLVE)
    proc = run_python(code, vllm_musa_standin.env(tmp_path, VLLM_PLATFORM="musa"))
    assert proc.returncode != 0  # `import vllm` itself resolves the platform (vllm/utils/torch_utils.py PIN_MEMORY)
    refused = proc.stderr.strip().splitlines()[-1]
    assert refused.startswith("RuntimeError: Only one platform plugin can be activated, but got: [")
    assert "'musa'" in refused and "'portable_spec'" in refused


def test_vllm_musa_contract_vllm_plugins_without_its_general_plugin_fails_in_one_line(tmp_path):
    env = vllm_musa_standin.env(tmp_path, VLLM_PLATFORM="musa", VLLM_PLUGINS="portable_spec")
    proc = run_python("import vllm.platforms; print(vllm.platforms.current_platform)", env)
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert last == ("portable_spec.errors.PlatformError: VLLM_PLUGINS=portable_spec filters out vllm-musa 0.1.28's "
                    "general plugin musa_custom_ops, which registers its ops, communicators and attention backends: "
                    f"set VLLM_PLUGINS={contract.VLLM_PLUGINS_VALUE}")


def test_vllm_musa_contract_without_vllm_musa_the_standalone_class_says_so_once(tmp_path):
    proc = run_python(RESOLVE, vllm_musa_standin.env(tmp_path, vllm_musa=False, VLLM_PLATFORM="musa"))
    assert tagged(proc.stdout)["QUALNAME"] == qualnames.PLATFORM_CLASSES["musa"], proc.stderr[-2000:]
    said = [line for line in proc.stderr.splitlines() if "serving on real MUSA needs vllm-musa" in line]
    assert len(said) == 1, proc.stderr[-2000:]


# ------------------------------------------------------------------ 3. the probe, in this process
def test_vllm_musa_contract_probe_answers_by_vllm_plugins(standin, monkeypatch, caplog):
    monkeypatch.setenv("VLLM_PLATFORM", "musa")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert platform_plugin.platform_qualname() is None and platform_plugin.platform_qualname() is None  # vLLM calls it twice
    assert [r.getMessage() for r in caplog.records].count(caplog.records[0].getMessage()) == 1
    assert "vllm-musa 0.1.28 is installed" in caplog.records[0].getMessage()
    monkeypatch.setenv("VLLM_PLUGINS", "portable_spec,musa_custom_ops,some_other_plugin")
    assert platform_plugin.platform_qualname() == qualnames.COMPOSED_MUSA_PLATFORM
    monkeypatch.setenv("VLLM_PLUGINS", "portable_spec,musa,musa_custom_ops")
    assert platform_plugin.platform_qualname() is None
    monkeypatch.setenv("VLLM_PLUGINS", "portable_spec")
    assert platform_plugin.platform_qualname() == qualnames.ERROR_CLASS
    assert "musa_custom_ops" in selection.current().problem


def test_vllm_musa_contract_the_general_plugin_stays_out_when_vllm_musa_serves_alone(standin, monkeypatch):
    from portable_spec.vllm_adapter.plugin import general_plugin

    monkeypatch.setenv("VLLM_PLATFORM", "musa")
    assert not general_plugin.portable_spec_active()
    monkeypatch.setenv("VLLM_PLUGINS", contract.VLLM_PLUGINS_VALUE)
    assert general_plugin.portable_spec_active()


# ------------------------------------------------------------------ 4. the composed platform and worker
def test_vllm_musa_contract_composed_platform_subclasses_vllm_musas_and_adds_only_our_hooks(standin):
    from portable_spec.vllm_adapter.platform.base import PortableSpecPlatformMixin, SharedPoolMixin

    ours = resolve(qualnames.COMPOSED_MUSA_PLATFORM)
    theirs = resolve(contract.PLATFORM_QUALNAME)
    assert issubclass(ours, theirs) and ours.__mro__[1:4] == (PortableSpecPlatformMixin, SharedPoolMixin, theirs)
    assert (ours.device_type, ours.dispatch_key, ours.dist_backend) == ("musa", "MUSA", "mccl")  # vllm-musa's
    assert ours.worker_cls == qualnames.COMPOSED_MUSA_WORKER and ours.port_name == "musa"
    for name in ("get_attn_backend_cls", "get_device_communicator_cls", "is_sleep_mode_available",
                 "get_static_graph_wrapper_cls"):
        owner = next(c for c in ours.__mro__ if name in vars(c))
        assert owner.__module__ == "vllm_musa.platform", name  # left to vllm-musa
    assert dict(ours.substitutes_left_to_stack) == contract.DEFERRED_SUBSTITUTES


def test_vllm_musa_contract_composed_worker_is_ours_over_mtgpuworker_without_the_musa_worker_trick(standin):
    from portable_spec.vllm_adapter.worker.gpu_worker import PortableWorker
    from portable_spec.vllm_adapter.worker.musa_worker import MusaWorker

    ours = resolve(qualnames.COMPOSED_MUSA_WORKER)
    theirs = resolve(contract.WORKER_QUALNAME)
    assert ours.__mro__[1:3] == (PortableWorker, theirs) and MusaWorker not in ours.__mro__
    assert ours.init_device is PortableWorker.init_device
    assert set(vars(ours)) <= {"__module__", "__doc__", "__qualname__", "__firstlineno__", "__static_attributes__"}


ENGINE = """
    import vllm.platforms
    from vllm.utils.import_utils import resolve_obj_by_qualname
    vllm.platforms._current_platform = resolve_obj_by_qualname({platform!r})()
    from vllm.engine.arg_utils import EngineArgs
    cfg = EngineArgs(model={target!r}, skip_tokenizer_init=True, max_num_seqs=8, speculative_config={{
        "method": "dflash", "model": {draft!r}, "num_speculative_tokens": 8}}).create_engine_config()
    import vllm_musa.platform
    print("THEIRS", vllm_musa.platform.SEEN[:2])
    print("WORKER", cfg.parallel_config.worker_cls)
    print("SIZES", cfg.compilation_config.cudagraph_capture_sizes, cfg.compilation_config.cudagraph_mode.name)
    print("PLAN", cfg.additional_config["portable_spec"]["plan"]["first_step"])
    worker = resolve_obj_by_qualname(cfg.parallel_config.worker_cls)(
        cfg, local_rank=0, rank=0, distributed_init_method="tcp://127.0.0.1:29556")
    try:
        worker.init_device()
    except Exception as exc:  # no device here, and vLLM 0.26.0 unpatched: the gate vllm-musa's patch 0036 opens
        print("INIT", type(exc).__name__, str(exc).splitlines()[0])
    import vllm_musa.worker
    print("SEEN", vllm_musa.worker.SEEN)
    print("AFTER", worker.device_config.device_type)
    from portable_spec.kernels import bound
    print("BOUND", sorted({{sub.name for sub in bound().values()}}))
"""


ENGINE_IMPORTS = """
    import vllm.platforms
    from vllm.utils.import_utils import resolve_obj_by_qualname
"""
DFLASH_WRAPS = ("1", "0")


@pytest.fixture(scope="module")
def engine_runs(tmp_path_factory) -> dict[str, subprocess.CompletedProcess]:
    """``ENGINE`` with vllm-musa's DFlash wrap on and off, each a process of its own forked from one that imported
    vLLM's platforms with the stand-in on the path (they were two processes, each importing vLLM); the switch is read
    when the config is made (``vllm_musa_stack.drafter_left_to_vllm_musa``, the stand-in's config hook)."""
    from test_vllm_config import DFLASH, QWEN3, model_dir

    tmp_path = tmp_path_factory.mktemp("engine")
    target, draft = model_dir(tmp_path / "models", "qwen3", QWEN3), model_dir(tmp_path / "models", "dflash", DFLASH)
    code = ENGINE.format(platform=qualnames.COMPOSED_MUSA_PLATFORM, target=target, draft=draft)
    env = vllm_musa_standin.env(tmp_path / "standin")
    return run_forked(lambda script, args: run_python(script, env, args), ENGINE_IMPORTS,
                      {wrap: (code, {"VLLM_MUSA_DFLASH_FULL_WRAP": wrap}) for wrap in DFLASH_WRAPS},
                      tmp_path_factory.mktemp("engine_forks"))


@pytest.mark.parametrize("dflash_wrap", DFLASH_WRAPS)
def test_vllm_musa_contract_engine_config_and_worker_composition(engine_runs, dflash_wrap):
    """A real vLLM 0.26.0 engine config on the composed class (stand-in beneath), then the composed worker's
    init_device as far as a CPU host goes: vllm-musa's hooks ran under ours, our worker was chosen over MTGPUWorker,
    our plan kept vllm-musa's block-aligned DFlash sizes, the device type stayed "musa" through vllm-musa's worker
    (no MusaWorker trick: unpatched vLLM 0.26.0 refuses it, vllm-musa's build accepts it), the substitutes vllm-musa
    patches itself were not bound, and our V1 runner was built only where vllm-musa does not capture the drafter."""
    proc = engine_runs[dflash_wrap]
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = tagged(proc.stdout)
    assert out["THEIRS"] == "['apply_config_platform_defaults', 'check_and_update_config']"
    assert out["WORKER"] == qualnames.COMPOSED_MUSA_WORKER
    # vllm-musa's DFlash coercion (pure FULL) only with its wrap on; our plan keeps the block-aligned sizes either way
    assert out["SIZES"] == ("[9, 18, 36, 72] FULL" if dflash_wrap == "1" else "[9, 18, 36, 72] FULL_AND_PIECEWISE")
    assert out["PLAN"] == "{'query_len': 9, 'sizes': [9, 18, 36, 72], 'mode': 'FULL'}"
    runner = "GPUModelRunner" if dflash_wrap == "1" else "PortableV1ModelRunner"
    assert out["SEEN"] == f"[('musa', '{runner}')]"
    assert out["INIT"] == "RuntimeError Unsupported device type: musa"
    assert out["AFTER"] == "musa"
    assert out["BOUND"] == str(sorted(BOUND_HERE))
    if dflash_wrap == "1":
        assert "vllm-musa captures the DFlash drafter in FULL graphs itself" in proc.stdout + proc.stderr


# ------------------------------------------------------------------ 5. our drafter and substitutes on vllm-musa
@pytest.mark.parametrize("method,env,ours", [
    ("eagle", {}, True), ("eagle3", {"VLLM_MUSA_DRAFT_FULL_WRAP": "1"}, False),
    ("mtp", {"VLLM_MUSA_DRAFT_FULL_WRAP": "0"}, True),
    ("dflash", {}, False), ("dflash", {"VLLM_MUSA_DFLASH_FULL_WRAP": "0"}, True),
    ("dflash", {"VLLM_MUSA_DRAFT_FULL_WRAP": "1", "VLLM_MUSA_DFLASH_FULL_WRAP": "0"}, True),
    ("eagle3", {"VLLM_MUSA_EAGLE_RUNNER": "1"}, False), ("mtp", {"VLLM_MUSA_EAGLE_RUNNER": "1"}, False),
    ("eagle", {"VLLM_MUSA_EAGLE_RUNNER": "0"}, True), ("draft_model", {"VLLM_MUSA_EAGLE_RUNNER": "1"}, True),
    ("dflash", {"VLLM_MUSA_EAGLE_RUNNER": "1", "VLLM_MUSA_DFLASH_FULL_WRAP": "0"}, True)])
def test_vllm_musa_contract_our_drafter_steps_aside_where_vllm_musa_captures_it(monkeypatch, method, env, ours):
    """vllm-musa's FULL wrap of the draft model (0030), its DFlash capture (platform.py), and its propose dispatcher's
    EagleFullLoopRunner, which sits under EagleProposer only (eagle, eagle3, mtp: vllm_musa_contract)."""
    for name in (envs.VLLM_MUSA_DRAFT_WRAP_ENV, envs.VLLM_MUSA_DFLASH_WRAP_ENV, envs.VLLM_MUSA_EAGLE_RUNNER_ENV):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert (stack.drafter_left_to_vllm_musa(method) is None) == ours


def test_vllm_musa_contract_the_policy_asks_the_platform_stack(vllm_platform, monkeypatch, caplog, tmp_path):
    import vllm.platforms

    from portable_spec.vllm_adapter.spec_decode.policy import draft_graph_mode
    from test_vllm_config import EAGLE, LLAMA, model_dir
    from vllm_configs import engine_config, speculative

    cfg = engine_config(model_dir(tmp_path, "llama", LLAMA),
                        speculative("eagle", model_dir(tmp_path, "eagle", EAGLE), 3), max_num_seqs=8)
    assert draft_graph_mode(cfg) == "full"
    stacked = type("Stacked", (type(vllm_platform),), {"drafter_left_to_stack": classmethod(
        lambda cls, method: stack.drafter_left_to_vllm_musa(method))})
    monkeypatch.setattr(vllm.platforms, "_current_platform", stacked())
    monkeypatch.setenv(envs.VLLM_MUSA_DRAFT_WRAP_ENV, "1")
    with caplog.at_level(logging.INFO, logger=LOGGER):
        assert draft_graph_mode(cfg) == "upstream"
    assert "vllm-musa wraps the draft model in FULL graphs itself (VLLM_MUSA_DRAFT_FULL_WRAP=1" in caplog.text
    monkeypatch.setenv(envs.VLLM_MUSA_DRAFT_WRAP_ENV, "0")
    assert draft_graph_mode(cfg) == "full"


def test_vllm_musa_contract_substitutes_over_the_stack_leave_its_kernels_and_survive_one_that_cannot_bind(
        vllm_platform, monkeypatch, caplog):
    from portable_spec.kernels import registry
    from portable_spec.kernels import substitutions as table
    from portable_spec.vllm_adapter.worker import gpu_worker as worker

    stacked = type("Stacked", (), {"port_name": "musa", "device_name": "musa", "stack": "vllm-musa",
                                   "substitutes_left_to_stack": contract.DEFERRED_SUBSTITUTES})
    monkeypatch.setattr(worker, "current_platform", stacked())
    monkeypatch.setattr(worker, "platform_label", lambda p: "musa")
    moved = registry.Substitution(name="moved", platforms=("musa",), reason="test entry",
                                  targets=("vllm.v1.spec_decode.utils.no_such_kernel",),
                                  replacement=table.SUBSTITUTIONS[0].replacement)
    monkeypatch.setattr(registry, "SUBSTITUTIONS", (*registry.SUBSTITUTIONS, moved))
    monkeypatch.setattr(worker, "substitutions_for", lambda port: registry.substitutions_for(port,
                                                                                            registry.SUBSTITUTIONS))
    with caplog.at_level(logging.INFO, logger=LOGGER):
        try:
            names = worker.bind_kernel_substitutes()
            targets = set(registry.installed())
        finally:
            registry.uninstall()
    assert names == list(BOUND_HERE)
    assert not {t for name in contract.DEFERRED_SUBSTITUTES for s in registry.SUBSTITUTIONS if s.name == name
                for t in s.targets} & targets
    left = [r.getMessage() for r in caplog.records if "left to vllm-musa" in r.getMessage()]
    assert len(left) == len(contract.DEFERRED_SUBSTITUTES)
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warning.startswith("portable_spec[musa]: kernel substitute moved not bound, vllm-musa's kernel stays (")


# ------------------------------------------------------------------ 6. what `portable-spec probe --platform musa` says
def test_vllm_musa_contract_stack_report_with_vllm_musa(standin, monkeypatch):
    report = report_module.stack_report()
    assert report["found"] == "vllm-musa 0.1.28" and report["vllm_plugins"]["composes"] is False
    assert report["vllm_platform"].startswith("none: our probe steps aside")
    monkeypatch.setenv("VLLM_PLUGINS", contract.VLLM_PLUGINS_VALUE)
    report = report_module.stack_report()
    assert report["vllm_platform"] == qualnames.COMPOSED_MUSA_PLATFORM and report["worker"] == qualnames.COMPOSED_MUSA_WORKER
    layer = report["our_layer"]
    assert layer["kernel substitutes"]["left to vllm-musa"] == contract.DEFERRED_SUBSTITUTES
    assert layer["drafter graphs"]["eagle"] == "ours (our V1 runner)"
    assert layer["drafter graphs"]["dflash"].startswith("vllm-musa captures the DFlash drafter")


def test_vllm_musa_contract_stack_report_standalone(tmp_path):
    with vllm_musa_standin.installed(tmp_path / "standin", vllm_musa=False):  # torch_musa, no vllm-musa
        report = report_module.stack_report()
    assert report["found"] == "standalone (vllm-musa not installed)"
    assert report["vllm_platform"] == qualnames.PLATFORM_CLASSES["musa"] and "needs vllm-musa" in report["serving"]


def test_vllm_musa_contract_probe_command_reports_the_stack_and_binds_only_what_is_ours(standin, vllm_platform,
                                                                                       monkeypatch, capsys):
    """MUSA AVAILABILITY MONKEYPATCHED (as in test_probe_kernel_substitutions.py): the CPU port, renamed, stands in for
    the MUSA port; the stack section and the substitutes are what is tested."""
    from portable_spec.commands import probe as probe_cmd
    from portable_spec.ports.cpu_port import CpuPort

    port = CpuPort(label="musa (availability monkeypatched: the CPU port stands in)")
    port.name = "musa"
    monkeypatch.setattr("portable_spec.ports.select_platform", lambda choice: port)  # probe imports it when it runs
    monkeypatch.setenv("VLLM_PLUGINS", contract.VLLM_PLUGINS_VALUE)
    assert probe_cmd.run(argparse.Namespace(platform="musa", json=True, verify=False)) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["stack"]["found"] == "vllm-musa 0.1.28"
    assert [s["name"] for s in report["kernel_substitutions"]["substitutions"]] == list(BOUND_HERE)
    assert probe_cmd.run(argparse.Namespace(platform="musa", json=False, verify=False)) == 0
    text = capsys.readouterr().out
    assert "found: vllm-musa 0.1.28" in text and "left to vllm-musa:" in text
    assert f"{len(BOUND_HERE)}/{len(BOUND_HERE)} bound" in text
