"""The musa-sim engine's switch and platform, against real vLLM 0.26.0 classes on CPU: the environment switches a
process onto ``MusaSimPlatform`` through vLLM's own plugin resolver (exactly one plugin answers; an ordinary vLLM
never loads the harness), the class differs from our MUSA class only in device identity, the MUSA class's budget,
config hook, worker and attention selection are what the engine gets, and the MUSA class has every platform method
vLLM's worker and runner call at start-up. Per-platform runs are subprocesses (the platform is process-global)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest
import torch

from portable_spec_harness import musa_sim_plugin
from portable_spec_harness.musa_sim import SimulatedMusa
from portable_spec.ports.musa_port import MusaPort
from portable_spec.ports import current as mixin
from portable_spec import envs
from portable_spec.vllm_adapter.platform import qualnames
from portable_spec.vllm_adapter.platform import selection
from portable_spec.vllm_adapter.plugin import platform_plugin
from forked_children import run_forked
from test_vllm_config import DFLASH, EAGLE, LLAMA, QWEN3, model_dir

SIM_QUALNAME = "portable_spec_harness.musa_sim_platform.MusaSimPlatform"
SWITCHES = ("VLLM_PLATFORM", envs.SIM_DEVICE_ENV, "VLLM_PLUGINS", "TORCHADA_GRAPH_EXEC_CAP", "PYTHONPATH",
            "PORTABLE_SPEC_SIM_TORCHADA_GRAPHS")

pytestmark = pytest.mark.skipif(MusaPort.is_active(), reason="torch_musa is installed here: run the real thing")


def run_python(code: str, env_extra: dict[str, str], args: list[str] = ()) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in SWITCHES}
    env.update(env_extra)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True,
                          env=env, timeout=300)


def tagged(stdout: str) -> dict[str, str]:
    return dict(line.split(" ", 1) for line in stdout.splitlines() if line.split(" ")[0].isupper() and " " in line)


@pytest.fixture
def sim_env(tmp_path):
    return musa_sim_plugin.plugin_env(tmp_path / "plugin", environ={})


# ------------------------------------------------------------------------------------------------ the switch
def test_the_plugin_is_a_dist_info_that_only_the_harness_puts_on_the_path(tmp_path):
    root = musa_sim_plugin.write_plugin(tmp_path)
    entry = (root / musa_sim_plugin.DIST_INFO / "entry_points.txt").read_text()
    assert entry == "[vllm.platform_plugins]\nportable_spec_musa_sim = portable_spec_harness.musa_sim_plugin:probe\n"
    assert musa_sim_plugin.write_plugin(tmp_path) == root  # idempotent
    env = musa_sim_plugin.plugin_env(tmp_path, environ={"PYTHONPATH": f"/tmp/site{os.pathsep}{root}"})
    assert env["PYTHONPATH"] == os.pathsep.join([str(root), "/tmp/site"])  # first, once; the caller's path kept
    assert (env["VLLM_PLATFORM"], env[envs.SIM_DEVICE_ENV]) == ("musa", "musa")
    pyproject = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    assert "musa_sim" not in pyproject  # never installed by pip: a plain `vllm serve` cannot load it


@pytest.mark.parametrize("platform,sim,answers", [("musa", "musa", True), ("musa", None, False),
                                                  ("cuda", "musa", False), (None, "musa", False)])
def test_exactly_one_probe_answers(monkeypatch, tmp_path, platform, sim, answers):
    for name, value in (("VLLM_PLATFORM", platform), (envs.SIM_DEVICE_ENV, sim)):
        monkeypatch.delenv(name, raising=False) if value is None else monkeypatch.setenv(name, value)
    monkeypatch.syspath_prepend(str(musa_sim_plugin.write_plugin(tmp_path)))  # the simulation's plugin, as the harness
    ours, simulation = platform_plugin.platform_qualname(), musa_sim_plugin.probe()
    assert simulation == (SIM_QUALNAME if answers else None)
    if answers:
        assert ours is None  # vLLM refuses two out-of-tree plugins that answer at once
    elif platform is not None:
        assert ours is not None


def test_a_simulation_without_its_plugin_fails_in_one_line_instead_of_running_cuda(monkeypatch):
    monkeypatch.setenv("VLLM_PLATFORM", "musa")
    monkeypatch.setenv(envs.SIM_DEVICE_ENV, "musa")
    assert platform_plugin.platform_qualname() == qualnames.ERROR_CLASS  # no simulation plugin on this path
    problem = selection.current().problem
    assert "portable_spec_musa_sim" in problem and "unset PORTABLE_SPEC_SIM_DEVICE" in problem


def test_vllms_resolver_activates_the_simulation_plugin_alone(sim_engine):
    proc = sim_engine  # its first lines: vLLM's resolver, before anything else of vLLM's runs
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert tagged(proc.stdout)["CLASS"] == f"{SIM_QUALNAME} musa-sim"
    assert "Platform plugin portable_spec_musa_sim is activated" in proc.stdout + proc.stderr


def test_without_the_plugin_on_the_path_the_simulation_switch_fails_loudly():
    proc = run_python("import vllm.platforms; print(vllm.platforms.current_platform)",
                      {"VLLM_PLATFORM": "musa", envs.SIM_DEVICE_ENV: "musa"})
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("portable_spec.errors.PlatformError: PORTABLE_SPEC_SIM_DEVICE=musa asks for the musa-sim")


def test_an_ordinary_vllm_never_loads_the_harness():
    proc = run_python("""
        import sys
        from vllm.plugins import load_plugins_by_group, load_general_plugins
        load_plugins_by_group("vllm.platform_plugins"); load_general_plugins()
        print("HARNESS", sorted(m for m in sys.modules if m.startswith("portable_spec_harness")))
    """, {})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert tagged(proc.stdout)["HARNESS"] == "[]"


def test_the_simulation_probe_module_stays_light():
    proc = run_python("""
        import sys
        import portable_spec_harness.musa_sim_plugin as plugin
        plugin.probe()
        heavy = ("vllm", "torch", "portable_spec_harness.musa_sim_platform")
        print("HEAVY", sorted(m for m in heavy if m in sys.modules))
    """, {})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert tagged(proc.stdout)["HEAVY"] == "[]"


# ------------------------------------------------------------------------------------------------ the platform
IDENTITY = {"device_name": "cuda", "device_type": "cuda", "dispatch_key": "CUDA", "dist_backend": "nccl",
            "device_control_env_var": "CUDA_VISIBLE_DEVICES"}


def test_the_sim_class_changes_only_the_device_identity():
    from portable_spec_harness.musa_sim_platform import MusaSimPlatform
    from portable_spec.vllm_adapter.platform.musa import PortableMusaPlatform

    own = {k for k in vars(MusaSimPlatform) if not k.startswith("__") or k == "__init__"}
    # import_kernels and is_cuda_alike: the compiled ops (vLLM's CUDA ones as vllm-musa's MUSA build)
    assert own == set(IDENTITY) | {"__init__", "label", "import_kernels", "is_cuda_alike"}
    assert {k: getattr(MusaSimPlatform, k) for k in IDENTITY} == IDENTITY
    assert MusaSimPlatform.__bases__ == (PortableMusaPlatform,)
    assert PortableMusaPlatform.device_type == "musa" and PortableMusaPlatform.dispatch_key == "PrivateUse1"
    assert MusaSimPlatform.label() == "musa-sim" and PortableMusaPlatform.label() == "musa"
    assert MusaSimPlatform.port_name == "musa" and MusaSimPlatform.worker_cls == PortableMusaPlatform.worker_cls
    assert musa_sim_plugin.PLATFORM_QUALNAME == f"{MusaSimPlatform.__module__}.{MusaSimPlatform.__qualname__}"


SIM_PROCESS_IMPORTS = """
    import torch
    from portable_spec_harness.musa_sim_platform import MusaSimPlatform
    from portable_spec.ports.current import device_port
"""
PORT_ONCE = """
    from portable_spec_harness.musa_sim_platform import MusaSimPlatform
    from portable_spec.ports.current import device_port
    MusaSimPlatform(); first = device_port("musa"); MusaSimPlatform()
    print("PORT", first.label, type(first.device_module).__name__, first.device_module.live_graph_cap,
          device_port("musa") is first, first.capture_inference_mode, first.graph_class.__name__)
"""
ALIASING = """
    import torch
    from portable_spec_harness.musa_sim_platform import MusaSimPlatform
    from portable_spec.ports.current import device_port
    MusaSimPlatform(); MusaSimPlatform()
    sim = device_port("musa").device_module
    print("ALIASED", torch.cuda.CUDAGraph is sim.MUSAGraph, torch.cuda.graph == sim.graph)
"""
GRAPH_SWITCHES = ("on", "off", None)


@pytest.fixture(scope="module")
def sim_processes(tmp_path_factory) -> dict[str, subprocess.CompletedProcess]:
    """The sim processes of the two tests below, each a process of its own that instantiates the platform with its
    environment, forked from one that imported vLLM and the sim platform (they were four processes importing vLLM,
    ~10 s each on the lane's machine); the switches are read at instantiation (``install_musa_sim_port``)."""
    cases = {"port": (PORT_ONCE, {"TORCHADA_GRAPH_EXEC_CAP": "77"}),
             **{f"aliasing-{switch}": (ALIASING, {"PORTABLE_SPEC_SIM_TORCHADA_GRAPHS": switch} if switch else {})
                for switch in GRAPH_SWITCHES}}
    root = str(Path(__file__).resolve().parents[1])
    return run_forked(lambda code, args: run_python(code, {"PYTHONPATH": root}, args), SIM_PROCESS_IMPORTS, cases,
                      tmp_path_factory.mktemp("sim_processes"))


def test_each_sim_process_gets_the_simulated_musa_port_once(sim_processes):
    proc = sim_processes["port"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert tagged(proc.stdout)["PORT"] == "musa-sim SimulatedMusa 77 True True MUSAGraph"


@pytest.mark.parametrize("switch,aliased", [("on", "True True"), ("off", "False False"), (None, "False False")])
def test_the_mrv2_variants_switch_torchadas_graph_aliasing_on_in_each_sim_process(sim_processes, switch, aliased):
    """``PORTABLE_SPEC_SIM_TORCHADA_GRAPHS=on`` (the musa-sim Model Runner V2 variants): the process's
    ``torch.cuda.CUDAGraph``/``graph`` are its simulated torch.musa's, as torchada makes them on MUSA; off or unset
    (the V1 variants), torch.cuda is left alone."""
    proc = sim_processes[f"aliasing-{switch}"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert tagged(proc.stdout)["ALIASED"] == aliased


@pytest.fixture(scope="module")
def sim_engine(tmp_path_factory) -> subprocess.CompletedProcess:
    """One process switched onto the simulation by the environment: vLLM's resolver picks the platform (``CLASS``),
    then a real ``EngineArgs.create_engine_config`` (the tests of both read it). The two were two processes with the
    same environment, each importing vLLM (~10 s or more on the lane's machine)."""
    tmp_path = tmp_path_factory.mktemp("sim_engine")
    sim_env = musa_sim_plugin.plugin_env(tmp_path / "plugin", environ={})
    models = {name: model_dir(tmp_path, name, cfg) for name, cfg in
              (("qwen3", QWEN3), ("dflash", DFLASH))}
    return run_python(f"""
        import sys, vllm.platforms
        cp = vllm.platforms.current_platform
        print("CLASS", type(cp).__module__ + "." + type(cp).__qualname__, cp.label())
        import torch
        from portable_spec.logs import share_vllm_log_handlers
        from vllm.engine.arg_utils import EngineArgs
        from vllm.v1.attention.selector import AttentionSelectorConfig
        cfg = EngineArgs(model={models['qwen3']!r}, skip_tokenizer_init=True, max_num_seqs=8, speculative_config={{
            "method": "dflash", "model": {models['dflash']!r}, "num_speculative_tokens": 8}}).create_engine_config()
        plan = cfg.additional_config["portable_spec"]["plan"]
        print("WORKER", cfg.parallel_config.worker_cls)
        print("SIZES", cfg.compilation_config.cudagraph_capture_sizes, plan["live_graph_limit"])
        print("DEVICE", cfg.device_config.device_type)
        share_vllm_log_handlers()
        cp = vllm.platforms.current_platform
        draft = AttentionSelectorConfig(head_size=64, dtype=torch.bfloat16, kv_cache_dtype="auto", block_size=16,
                                        use_non_causal=True)
        print("ATTN", cp.get_attn_backend_cls(None, draft))
        print("FACTS", cp.get_device_capability(), cp.opaque_attention_op(), cp.get_static_graph_wrapper_cls())
    """, sim_env)


def test_the_engine_config_is_the_musa_classs_on_the_sim(sim_engine):
    """Real ``EngineArgs.create_engine_config`` in a process switched by the environment: MusaWorker, the MUSA plan
    with its 1900 budget and block-aligned DFlash sizes, CUDA tensors, TRITON_ATTN from the MUSA rows (logged)."""
    proc = sim_engine
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = tagged(proc.stdout)
    assert lines["WORKER"] == "portable_spec.vllm_adapter.worker.musa_worker.MusaWorker"
    assert lines["SIZES"] == "[9, 18, 36, 72] 1900"
    assert lines["DEVICE"] == "cuda"
    assert lines["ATTN"] == "vllm.v1.attention.backends.triton_attn.TritonAttentionBackend"
    assert "portable_spec[musa-sim]: attention backend TRITON_ATTN from the MUSA rows" in proc.stdout + proc.stderr
    assert lines["FACTS"] == ("DeviceCapability(major=3, minor=1) True "
                              "vllm.compilation.cuda_graph.CUDAGraphWrapper")


def test_a_forced_small_cap_reaches_the_planner_and_the_drafters_runtime_budget(sim_env, tmp_path):
    """``TORCHADA_GRAPH_EXEC_CAP=8``: the MUSA class plans with 8, prunes sizes with a warning (kept across the
    config re-runs), and the drafter's runtime budget is what the target's graphs leave of it."""
    models = {name: model_dir(tmp_path, name, cfg) for name, cfg in (("llama", LLAMA), ("eagle", EAGLE))}
    proc = run_python(f"""
        import dataclasses
        from vllm.engine.arg_utils import EngineArgs
        from portable_spec.capture_sizes import CapturePlan
        from portable_spec.vllm_adapter.platform.drafter_plan import draft_graph_budget, drafter_plan
        cfg = EngineArgs(model={models['llama']!r}, skip_tokenizer_init=True, max_num_seqs=8,
                         compilation_config={{"cudagraph_mode": "FULL"}}, speculative_config={{
            "method": "eagle", "model": {models['eagle']!r}, "num_speculative_tokens": 3}}).create_engine_config()
        replaced = dataclasses.replace(cfg)
        state = replaced.additional_config["portable_spec"]
        print("SIZES", replaced.compilation_config.cudagraph_capture_sizes, state["plan"]["live_graph_limit"])
        print("BUDGET", draft_graph_budget(drafter_plan(replaced)), state["plan"]["live_graphs"])
        print("WARNED", [w[:47] for w in state["warnings"] if "live-graph limit" in w])
    """, {**sim_env, "TORCHADA_GRAPH_EXEC_CAP": "8"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = tagged(proc.stdout)
    assert lines["SIZES"] == "[4, 8] 8"
    assert lines["BUDGET"] == "6 8"  # first step [4, 8] + chain [1, 2, 4, 8]: 6 drafter graphs beside 2 target ones
    assert lines["WARNED"] == "['18 live graphs exceed the live-graph limit 8 (1']"
    assert "18 live graphs exceed the live-graph limit 8" in proc.stderr  # and the engine log shows it


def test_the_mtp_parts_musa_sim_engine_config_is_the_musa_class_with_vllms_mimo_mtp(tmp_path):
    """``musa_sim_mtp``'s musa-sim variant configured as the lane's child configures it (the part's zoo pair and
    arguments, the child's ``engine_kwargs``, the variant's environment with the plugin): vLLM's real
    ``create_engine_config`` resolves MusaSimPlatform, MusaWorker, the V1 runner, the MTP method with vLLM's
    ``mimo_mtp`` draft (``MiMoMTPModel``, standard attention), our plan for it, and TRITON_ATTN from the MUSA rows.
    vLLM's ``HAS_TRITON`` is forced on as on a GPU host (here no driver answers); the runner is the variant's."""
    import json

    from portable_spec_harness.e2e.child import engine_kwargs, parse_args
    from portable_spec_harness.e2e.musa_sim_parts import MUSA_SIM, PARTS
    from portable_spec_harness.e2e.parent import variant_env
    from test_e2e_harness import load_script

    _, child, _ = load_script("musa_sim_e2e").part_design(PARTS["musa_sim_mtp"], tmp_path / "zoo")
    kwargs = engine_kwargs(parse_args(["--variant", MUSA_SIM, *child]))
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import json, sys
        import torch
        import vllm.config.vllm as config_module
        config_module.HAS_TRITON = True
        import vllm.platforms
        from portable_spec.logs import share_vllm_log_handlers
        from vllm.engine.arg_utils import EngineArgs
        from vllm.v1.attention.selector import AttentionSelectorConfig
        cfg = EngineArgs(**json.loads(sys.argv[1])).create_engine_config()
        cp = vllm.platforms.current_platform
        print("CLASS", type(cp).__module__ + "." + type(cp).__qualname__, cp.label())
        print("WORKER", cfg.parallel_config.worker_cls)
        print("V2", cfg.use_v2_model_runner)
        spec = cfg.speculative_config
        draft = spec.draft_model_config.hf_config
        print("SPEC", spec.method, spec.num_speculative_tokens, draft.model_type, draft.architectures[0])
        print("PLAN", cfg.additional_config["portable_spec"]["plan"]["live_graph_limit"])
        share_vllm_log_handlers()
        head = AttentionSelectorConfig(head_size=128, dtype=torch.bfloat16, kv_cache_dtype="auto", block_size=16)
        print("ATTN", cp.get_attn_backend_cls(None, head))
    """), json.dumps(kwargs)], env=variant_env(MUSA_SIM), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = tagged(proc.stdout)
    assert lines["CLASS"] == f"{SIM_QUALNAME} musa-sim"
    assert lines["WORKER"] == "portable_spec.vllm_adapter.worker.musa_worker.MusaWorker"
    assert lines["V2"] == "False"
    assert lines["SPEC"] == "mtp 3 mimo_mtp MiMoMTPModel"
    assert lines["PLAN"] == "1900"
    assert lines["ATTN"] == "vllm.v1.attention.backends.triton_attn.TritonAttentionBackend"
    assert "portable_spec[musa-sim]: attention backend TRITON_ATTN from the MUSA rows" in proc.stdout + proc.stderr


def test_musa_live_graph_limit_is_read_when_the_config_is_planned(monkeypatch):
    from portable_spec.vllm_adapter.platform.musa import PortableMusaPlatform

    monkeypatch.setenv("TORCHADA_GRAPH_EXEC_CAP", "40")
    assert PortableMusaPlatform.live_graph_limit() == 40
    monkeypatch.delenv("TORCHADA_GRAPH_EXEC_CAP")
    assert PortableMusaPlatform.live_graph_limit() == 1900


def test_a_cap_torchada_ignores_plans_with_torchadas_default_and_says_so_once(monkeypatch, caplog):
    """An engine must not stop where torchada would run: it plans with the cap torchada then applies (1900), and one
    warning (per process) names the fix."""
    from portable_spec.vllm_adapter.platform import base
    from portable_spec.vllm_adapter.platform.musa import PortableMusaPlatform

    monkeypatch.setattr(base, "_SAID", set())
    monkeypatch.setenv("TORCHADA_GRAPH_EXEC_CAP", "-5")
    with caplog.at_level(logging.WARNING, logger="portable_spec.vllm_adapter"):
        assert PortableMusaPlatform.live_graph_limit() == 1900 and PortableMusaPlatform.live_graph_limit() == 1900
    (said,) = [r.getMessage() for r in caplog.records]
    assert said == ("portable_spec[musa]: TORCHADA_GRAPH_EXEC_CAP='-5' is not a positive integer (torchada ignores it "
                    "and caps live graph executables at 1900): set a positive count, or unset it for the default; "
                    "planning with 1900")


# ------------------------------------------------------------------------------------------------ the MUSA class
# (its platform methods against vLLM's Platform: tests/test_musa_platform_span.py, on every vLLM of the span)
@pytest.fixture
def musa_port():
    """Our MUSA port over a simulated torch.musa whose backing records calls (no device touched)."""
    seen: list[tuple] = []
    backing = types.SimpleNamespace(
        manual_seed_all=lambda seed: seen.append(("seed", seed)),
        get_device_properties=lambda i: types.SimpleNamespace(multi_processor_count=56, total_memory=1 << 30),
        get_device_name=lambda i=None: "MTT S80", current_device=lambda: 0)
    sim = SimulatedMusa(backing=backing, capability=(2, 1))
    mixin.install_device_port(MusaPort(device_module=sim, label="musa-sim"))
    try:
        yield sim, seen
    finally:
        mixin._INSTALLED_PORTS.pop("musa", None)


def test_musa_class_start_up_methods_go_through_torch_musa(musa_port):
    from portable_spec.vllm_adapter.platform.musa import PortableMusaPlatform

    sim, seen = musa_port
    PortableMusaPlatform.manual_seed_all(7)
    assert seen == [("seed", 7)] and sim.call_counts()["manual_seed_all"] == 1
    assert PortableMusaPlatform.num_compute_units() == 56
    assert PortableMusaPlatform.opaque_attention_op() is True
    PortableMusaPlatform.check_if_supports_dtype(torch.float16)
    with pytest.raises(ValueError, match=r"bfloat16 needs MUSA capability 2.2 .* has 2.1: pass --dtype float16"):
        PortableMusaPlatform.check_if_supports_dtype(torch.bfloat16)
    sim.capability = (3, 1)
    PortableMusaPlatform.check_if_supports_dtype(torch.bfloat16)


def test_the_drafter_finds_our_port_by_port_name_not_device_name():
    from portable_spec.ports.current import port_name_of

    def platform(device_name, port_name=None):
        return types.SimpleNamespace(device_name=device_name, **({"port_name": port_name} if port_name else {}))

    assert port_name_of(platform("cuda", "musa")) == "musa"  # musa-sim: CUDA tensors, the MUSA port
    assert port_name_of(platform("musa", "musa")) == "musa"
    assert port_name_of(platform("cuda")) == "cuda"  # vLLM's own CUDA platform (PORTABLE_SPEC_DRAFT_GRAPH=full)
    assert port_name_of(platform("rocm")) == "rocm"
    assert port_name_of(platform("cpu", "cpu")) == "cuda"


def test_the_musa_worker_logs_one_line_per_bound_substitute(vllm_platform, caplog):
    from portable_spec.kernels import registry
    from portable_spec.vllm_adapter.patch import version_gate
    from portable_spec.vllm_adapter.worker.gpu_worker import log_bound_substitutes

    with caplog.at_level(logging.INFO, logger="portable_spec.vllm_adapter"):
        assert log_bound_substitutes("musa", "musa-sim") == []  # nothing bound, nothing claimed
        registry.install_substitutions("musa", pick=version_gate.pick)
        try:
            names = log_bound_substitutes("musa", "musa-sim")
        finally:
            registry.uninstall()
    # An entry with no binding site on this vLLM (``_mulhilo32`` before 0.33.0) binds and claims nothing.
    expected = [sub.name for sub in registry.substitutions_for("musa") if sub.at(version_gate.pick).targets]
    assert names == expected
    lines = [r.getMessage() for r in caplog.records if "kernel substitute" in r.getMessage()]
    assert len(lines) == len(expected) and all(line.startswith("portable_spec[musa-sim]: kernel substitute ")
                                               for line in lines)
    assert "find_seq_idx bound at 3 vLLM site(s)" in " ".join(lines)


def test_simulated_musa_seeds_and_measures_through_its_backing():
    seen = []
    backing = types.SimpleNamespace(manual_seed_all=seen.append, mem_get_info=lambda d=None: (3, 8),
                                    memory_reserved=lambda d=None: 5, memory_allocated=lambda d=None: 4,
                                    current_device=lambda: 0)
    sim = SimulatedMusa(backing=backing)
    sim.manual_seed_all(11)
    assert seen == [11] and sim.call_counts()["manual_seed_all"] == 1
    assert MusaPort(device_module=sim).memory_snapshot() == {"free": 3, "reserved": 5, "allocated": 4}


def test_the_base_worker_binds_the_substitutes_of_its_platforms_port(vllm_platform, monkeypatch, caplog):
    """``PortableWorker.init_device`` binds through ``bind_kernel_substitutes``: a MUSA (or musa-sim) platform gets
    MUSA's entries, a CUDA platform CUDA's, each logged once under the platform's label."""
    import types

    from portable_spec.kernels import registry
    from portable_spec.vllm_adapter.patch import version_gate
    from portable_spec.vllm_adapter.worker import gpu_worker as worker

    for port, label in (("musa", "musa-sim"), ("cuda", "cuda")):
        platform = types.SimpleNamespace(port_name=port, device_name="cuda")
        monkeypatch.setattr(worker, "current_platform", platform)
        monkeypatch.setattr(worker, "platform_label", lambda p, label=label: label)
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="portable_spec.vllm_adapter"):
            try:
                names = worker.bind_kernel_substitutes()
                here = [s.at(version_gate.pick) for s in registry.substitutions_for(port)]
                here = [s for s in here if s.targets]  # entries with a binding site on this vLLM
                assert set(registry.installed()) == {t for s in here for t in s.targets}
            finally:
                registry.uninstall()
        assert names == [sub.name for sub in here] and names
        lines = [r.getMessage() for r in caplog.records if "kernel substitute" in r.getMessage()]
        assert len(lines) == len(names) and all(line.startswith(f"portable_spec[{label}]: ") for line in lines)


@pytest.mark.parametrize("switch,cuda_alike", [("on", True), ("off", False), (None, False)])
def test_the_sim_answers_is_cuda_alike_as_vllm_musa_only_for_the_mrv2_variants(switch, cuda_alike, monkeypatch):
    """vLLM 0.26.0's Model Runner V2 takes a UVA view of its pinned host buffers through ``torch.ops._C`` only where
    ``is_cuda_alike()`` (``get_accelerator_view_from_cpu_tensor``): vllm-musa's platform answers True, our standalone
    class False (no compiled ops without vllm-musa). The musa-sim MRV2 variants stand in for vllm-musa's there."""
    import inspect

    from vllm.utils import torch_utils

    from portable_spec_harness.e2e.configs import MUSA_SIM, MUSA_SIM_MRV2
    from portable_spec_harness.musa_sim_platform import MusaSimPlatform
    from portable_spec.vllm_adapter.platform.musa import PortableMusaPlatform

    if switch is None:
        monkeypatch.delenv("PORTABLE_SPEC_SIM_VLLM_MUSA_OPS", raising=False)
    else:
        monkeypatch.setenv("PORTABLE_SPEC_SIM_VLLM_MUSA_OPS", switch)
    assert MusaSimPlatform.is_cuda_alike(MusaSimPlatform.__new__(MusaSimPlatform)) is cuda_alike
    assert PortableMusaPlatform.is_cuda_alike(PortableMusaPlatform.__new__(PortableMusaPlatform)) is False
    assert MUSA_SIM_MRV2["PORTABLE_SPEC_SIM_VLLM_MUSA_OPS"] == "on" and "PORTABLE_SPEC_SIM_VLLM_MUSA_OPS" not in MUSA_SIM
    source = inspect.getsource(torch_utils.get_accelerator_view_from_cpu_tensor)
    assert "is_cuda_alike()" in source and "get_cuda_view_from_cpu_tensor" in source  # what vLLM gates on


def test_the_standalone_musa_class_names_the_fix_when_vllm_picks_mrv2(monkeypatch, caplog):
    import logging

    from vllm.platforms.interface import Platform

    from portable_spec.vllm_adapter.platform import musa
    from portable_spec.vllm_adapter.platform.base import PortableSpecPlatformMixin

    monkeypatch.setattr(PortableSpecPlatformMixin, "check_and_update_config", classmethod(lambda cls, config: None))
    for v2, warned in ((True, True), (False, False)):
        caplog.clear()
        config = types.SimpleNamespace(use_v2_model_runner=v2)
        with caplog.at_level(logging.WARNING, logger="portable_spec.vllm_adapter"):
            musa.PortableMusaPlatform.check_and_update_config(config)
        lines = [r.getMessage() for r in caplog.records if "Model Runner V2" in r.getMessage()]
        assert len(lines) == warned and all("install vllm-musa" in m and "VLLM_USE_V2_MODEL_RUNNER=0" in m
                                            for m in lines)
    assert issubclass(musa.PortableMusaPlatform, Platform)
