"""The bench's per-step breakdown (``harness/e2e/step_breakdown``) and the scopes we add for it
(``harness/portable_spec_harness/vllm_door/profile_scopes``): the phase map against vLLM 0.26.0's own scope strings and
hooked methods (and the installed vLLM's where a later one moved them: 0.33.0's MRV2 speculators), host attribution
under the real torch profiler (our real hook installer on stand-ins shaped like vLLM's runners), and device attribution
on torch's own ``FunctionEvent`` tree."""

from __future__ import annotations

import ast
import importlib.util
import inspect
import time
from pathlib import Path

import pytest
import torch
from profile_events import cpu_event, device_event, trace
from torch.autograd.profiler import record_function

from portable_spec_harness.e2e import breakdown_report, step_breakdown as sb
from portable_spec_harness.e2e.step_attribution import breakdown
from portable_spec_harness.vllm_door import profile_scopes as ours
from portable_spec_harness.vllm_door.profile_scopes import HOOKS, ScopeHook, installed, resolve

MS = 1e-3


def vllm_root() -> Path:
    return Path(importlib.util.find_spec("vllm").submodule_search_locations[0])


def vllm_has(module: str) -> bool:
    """Whether the installed vLLM has ``module`` (a file of its tree; nothing imported)."""
    return (vllm_root() / (module.removeprefix("vllm.").replace(".", "/") + ".py")).is_file()


def hook_module_present(module: str) -> bool:
    """A hook's module exists in this process's vLLM (ours on vLLM's standalone speculator where vLLM has that)."""
    if module == ours.OURS_STANDALONE:
        return vllm_has(ours.MRV2_STANDALONE)
    return not module.startswith("vllm.") or vllm_has(module)


def vllm_version() -> str:
    import vllm

    return vllm.__version__.split("+")[0]


def vllm_scopes(relative: str) -> set[str]:
    """Every string literal vLLM passes to ``record_function_or_nullcontext`` in one of its files."""
    tree = ast.parse((vllm_root() / relative).read_text())
    return {node.args[0].value for node in ast.walk(tree)
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "record_function_or_nullcontext"
            and node.args and isinstance(node.args[0], ast.Constant)}


# -- the map against vLLM 0.26.0 ------------------------------------------------------------------------------------

def test_every_vllm_scope_in_the_map_is_still_in_vllms_source_and_every_runner_scope_is_mapped():
    sources = {source for _, _, _, source in sb.SCOPE_PHASES if source != sb.HARNESS}
    assert sources == {sb.V1_RUNNER_PY, sb.ENGINE_PY, sb.SCHEDULER_PY}
    for source in sources:
        found = vllm_scopes(source)
        mapped = {scope for scope, _, _, src in sb.SCOPE_PHASES if src == source}
        # the map is 0.26.0's; a later vLLM dropped these (still mapped for 0.26.0's traces, never seen in its own)
        dropped = set() if vllm_version() == "0.26.0" else {"schedule: get_num_common_prefix_blocks"}
        assert mapped - dropped <= found, f"vLLM renamed or dropped scopes in {source}: {sorted(mapped - found)}"
        assert found - mapped <= set(sb.ENCLOSING_SCOPES), f"unmapped vLLM scopes in {source}: {found - mapped}"
    assert len(vllm_scopes(sb.V1_RUNNER_PY)) == 10  # the scan finds V1's scopes (preprocess ... set_async_...)


def test_model_runner_v2_has_no_scopes_of_its_own_so_ours_stand_in():
    relatives = ["v1/worker/gpu/model_runner.py"] + [
        module.removeprefix("vllm.").replace(".", "/") + ".py" for module in ours.VERSIONED_MODULES
        if module.startswith("vllm.") and vllm_has(module)]
    assert len(relatives) >= 2  # the runner and at least EAGLE's speculator
    for relative in relatives:
        assert vllm_scopes(relative) == set(), f"MRV2 now has scopes in {relative}: map them in step_breakdown"


def test_every_hook_targets_a_method_vllm_defines_and_every_scope_we_add_is_mapped():
    """Every hook resolves on this vLLM, but those on a module only some vLLM of the span has (``VERSIONED_MODULES``),
    which resolve where that module exists: EAGLE's MRV2 speculator in exactly one of its two modules (0.26.0 to
    0.28.0: ``autoregressive``; 0.33.0: ``target_dependent_ar``), the standalone draft model's (vLLM's and ours)
    where vLLM has ``standalone_ar`` (0.33.0)."""
    from portable_spec.vllm_adapter.patch import version_gate

    present = {module: hook_module_present(module) for module in ours.VERSIONED_MODULES}
    assert present[ours.MRV2_SPECULATOR] != present[ours.MRV2_TD_SPECULATOR], present
    if version_gate.has("mrv2_standalone_graphs"):  # where ours is installed, its hooks and vLLM's are checked here
        assert present[ours.MRV2_STANDALONE], present
    for hook in HOOKS:
        if present.get(hook.module, True):  # every hook on a module every vLLM of the span has: always
            owner, name = resolve(hook, import_missing=True)
            assert callable(vars(owner)[name]), hook
    harness = {scope for scope, _, _, source in sb.SCOPE_PHASES if source == sb.HARNESS}
    assert harness == {hook.scope for hook in HOOKS}


def test_the_hooked_calls_happen_where_the_phases_say():
    from vllm.v1.spec_decode.llm_base_proposer import SpecDecodeBaseProposer
    from vllm.v1.worker.gpu.model_runner import GPUModelRunner as V2Runner

    from portable_spec.vllm_adapter.spec_decode.fused_chain import FusedChainMixin

    propose = inspect.getsource(SpecDecodeBaseProposer.propose)
    first_sample = propose.index("self._sample_draft_tokens(")
    assert first_sample < propose.index("for token_index in range(self.num_speculative_tokens - 1):")
    assert "super().propose(1, **kwargs)" in inspect.getsource(FusedChainMixin.propose)
    # EAGLE's MRV2 speculator: 0.26.0 to 0.28.0 | 0.33.0
    eagle = ours.MRV2_SPECULATOR if vllm_has(ours.MRV2_SPECULATOR) else ours.MRV2_TD_SPECULATOR
    owner, _ = resolve(next(h for h in HOOKS if h.module == eagle), import_missing=True)
    mrv2 = inspect.getsource(owner.propose)
    decode = "decode_fn(" if "decode_fn(" in mrv2 else "self._multi_step_decode("  # later: the fused or plain loop
    assert mrv2.index("run_fullgraph(prefill_batch_desc)") < mrv2.index("prepare_decode_inputs(") \
        < mrv2.index(decode)
    if vllm_has(ours.MRV2_STANDALONE):  # the draft model's: step 0, then the decode steps in one call
        owner, _ = resolve(next(h for h in HOOKS if h.module == ours.MRV2_STANDALONE), import_missing=True)
        standalone = inspect.getsource(owner.propose)
        assert standalone.index("self._prefill(") < standalone.index("self._multi_step_decode(")
        assert "sample_draft(" in inspect.getsource(owner._prefill)
        assert "for step in range(1, self.num_speculative_steps):" in inspect.getsource(owner._multi_step_decode)
    assert "self.cudagraph_manager.run_fullgraph(batch_desc)" in inspect.getsource(V2Runner.execute_model)
    sample_tokens = inspect.getsource(V2Runner.sample_tokens)
    assert "self.sample(" in sample_tokens and "self.speculator.propose(" in sample_tokens


# -- host attribution: real profiler, our real installer, stand-ins shaped like vLLM's classes -----------------------

# ms each part sleeps: a phase attributed wrongly loses a whole part (>= 4 ms, below the lower bound) or gains >= 16 ms
# (above the +8 ms allowed for a loaded host's sleep overruns: ~1.4 ms per sleep were seen, and the chain sleeps three
# times); the median of 5 steps drops a one-off stall
PREP, FORWARD, LOGITS, STEP_REST, SAMPLE, DRAFT_IO, FIRST, CHAIN_STEP, BOOKKEEP, GAP, WAIT, SCHED = (
    12, 32, 4, 4, 8, 4, 8, 8, 4, 8, 6, 4)
K = 4
STEPS = 5


def sleep_ms(ms: float) -> None:
    time.sleep(ms * MS)


class FakeV1Runner:
    def execute_model(self):
        with record_function("gpu_model_runner: preprocess"):
            sleep_ms(PREP)
        with record_function("gpu_model_runner: forward"):
            sleep_ms(FORWARD)
        with record_function("gpu_model_runner: postprocess"):
            sleep_ms(LOGITS)
        sleep_ms(STEP_REST)

    def sample_tokens(self, drafter):
        with record_function("gpu_model_runner: sample"):
            sleep_ms(SAMPLE)
        with record_function("gpu_model_runner: draft"):
            sleep_ms(DRAFT_IO)
            getattr(drafter, "propose_with_prep", drafter.propose)(K)
        with record_function("gpu_model_runner: bookkeep"):
            sleep_ms(BOOKKEEP)


class FakeProposer:
    """Upstream's shape: first pass, first sample, then K-1 chain steps each ending in a sample."""

    def propose(self, k):
        sleep_ms(FIRST)
        self._sample_draft_tokens()
        for _ in range(k - 1):
            sleep_ms(CHAIN_STEP)
            self._sample_draft_tokens()

    def _sample_draft_tokens(self):
        pass


class FakeFusedProposer(FakeProposer):
    """Ours on vLLM's runner path: upstream's propose for the first pass (K=1), then our chain loop."""

    def propose(self, k):
        super().propose(1)
        self._run_fused_chain(k)

    def _run_fused_chain(self, k):
        sleep_ms(CHAIN_STEP * (k - 1))


class FakeDraftPrep(FakeFusedProposer):
    """Ours with the runner's draft prep folded in: the runner calls ``propose_with_prep`` (the fused first pass
    samples inside its graph: no sample call), then our chain loop."""

    def propose_with_prep(self, k):
        sleep_ms(FIRST)
        self._run_fused_chain(k)


class FakeScheduler:
    def schedule(self):
        sleep_ms(SCHED / 2)

    def update_from_output(self):
        sleep_ms(SCHED / 2)


class FakeAsyncOutput:
    def get_output(self):
        sleep_ms(WAIT)


class FakeV2Runner:
    def __init__(self):
        self.graphs, self.speculator = FakeGraphManager(), FakeSpeculator()

    def execute_model(self):
        sleep_ms(PREP + STEP_REST)
        self.graphs.run_fullgraph()

    def sample(self):
        sleep_ms(LOGITS + SAMPLE)

    def sample_tokens(self, drafter=None):
        self.sample()
        self.speculator.propose()
        sleep_ms(BOOKKEEP)


class FakeGraphManager:
    def run_fullgraph(self):
        sleep_ms(FORWARD)


class FakeSpeculator:
    def propose(self):
        sleep_ms(DRAFT_IO + FIRST)
        prepare_decode_inputs()
        for _ in range(K - 1):
            sleep_ms(CHAIN_STEP)


def prepare_decode_inputs():
    pass


STAND_INS = {(ours.V1_RUNNER, "GPUModelRunner"): "FakeV1Runner", (ours.V1_RUNNER, "AsyncGPUModelRunnerOutput"):
             "FakeAsyncOutput", (ours.V1_PROPOSER, "SpecDecodeBaseProposer"): "FakeProposer",
             ("portable_spec.vllm_adapter.spec_decode.fused_chain", "FusedChainMixin"): "FakeFusedProposer",
             ("portable_spec.vllm_adapter.spec_decode.draft_prep", "DraftPrepMixin"): "FakeDraftPrep",
             (ours.MRV2_RUNNER, "GPUModelRunner"): "FakeV2Runner",
             ("vllm.v1.worker.gpu.cudagraph_utils", "ModelCudaGraphManager"): "FakeGraphManager",
             ("vllm.v1.worker.gpu.async_utils", "AsyncOutput"): "FakeAsyncOutput",
             (ours.MRV2_SPECULATOR, "AutoRegressiveSpeculator"): "FakeSpeculator",
             (ours.MRV2_SPECULATOR, "prepare_decode_inputs"): "prepare_decode_inputs",
             ("vllm.v1.core.sched.scheduler", "Scheduler"): "FakeScheduler"}


def stand_in_hooks(runner: str) -> tuple[ScopeHook, ...]:
    """The real hook table for one runner's half (and the engine's), each vLLM class or function replaced by its
    stand-in here: same scopes, same kinds."""
    # MRV2's stand-in speculator is shaped like 0.26.0's EAGLE one (0.33.0's EAGLE one is the same shape; the standalone
    # draft model's scopes are checked on vLLM's real classes, test_mrv2_standalone.py)
    later = (ours.MRV2_TD_SPECULATOR, ours.MRV2_STANDALONE, ours.OURS_STANDALONE)
    other = later + ((ours.V1_RUNNER, ours.V1_PROPOSER, "portable_spec.vllm_adapter.spec_decode.fused_chain",
                      "portable_spec.vllm_adapter.spec_decode.draft_prep") if runner == "mrv2"
                     else tuple({hook.module for hook in HOOKS if hook.module.startswith("vllm.v1.worker.gpu.")}))
    hooks = []
    for hook in HOOKS:
        if hook.module not in other:
            first, *rest = hook.attr.split(".")
            hooks.append(ScopeHook(__name__, ".".join([STAND_INS[(hook.module, first)], *rest]), hook.scope,
                                   hook.kind))
    assert len(hooks) >= 8
    return tuple(hooks)


def profiled_decode(runner: str, drafter: FakeProposer | None = None, steps: int = STEPS):
    """``steps`` engine steps shaped like vLLM's (schedule, execute_model, sample_tokens, wait, update), profiled
    on the CPU with our hooks installed; returns (events, measured wall in ms)."""
    model = FakeV1Runner() if runner == "v1" else FakeV2Runner()
    scheduler, output = FakeScheduler(), FakeAsyncOutput()
    hooks = stand_in_hooks(runner)
    with installed(hooks) as report:
        assert not report["skipped"], report
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            started = time.perf_counter()
            for _ in range(steps):
                scheduler.schedule()
                model.execute_model()
                model.sample_tokens(drafter)
                sleep_ms(GAP)  # engine glue: in no phase
                output.get_output()
                scheduler.update_from_output()
            wall = (time.perf_counter() - started) * 1000
    for hook in hooks:  # restored: the stand-ins' own functions again, not our wrappers
        owner, name = resolve(hook)
        assert not hasattr(vars(owner)[name], "__wrapped__"), hook
    return prof.events(), wall


def assert_near(measured: float, nominal: float, what: str) -> None:
    # sleeps never return early; they can overrun on a loaded host, and scopes add a few microseconds each
    assert nominal * 0.95 - 0.05 <= measured <= nominal + 8.0, f"{what}: {measured:.3f} ms, expected ~{nominal}"


EXPECTED = {"target_prep": PREP + STEP_REST, "target_forward": FORWARD, "verify": LOGITS + SAMPLE,
            "draft_first": DRAFT_IO + FIRST, "draft_chain": CHAIN_STEP * (K - 1), "output": BOOKKEEP,
            "engine": SCHED, "host_wait": WAIT}


@pytest.mark.parametrize("runner, drafter", [("v1", FakeProposer()), ("v1", FakeFusedProposer()),
                                             ("v1", FakeDraftPrep()), ("mrv2", None)])
def test_host_time_goes_to_the_innermost_phase_and_adds_up_to_the_measured_total(runner, drafter):
    events, wall = profiled_decode(runner, drafter)
    bd = breakdown(events, runner=runner)
    assert bd["steps"] == STEPS and bd["step_scope"] == ours.STEP
    for phase, nominal in EXPECTED.items():
        assert_near(bd["phases"][phase]["host_ms_median"], nominal, phase)
        assert len(bd["per_step"]["host_ms"][phase]) == STEPS
    assert_near(bd["unattributed"]["host_ms_median"], GAP, "unattributed")
    assert len(bd["per_step"]["host_ms"]["unattributed"]) == STEPS
    parts = sum(p["host_ms"] for p in bd["phases"].values()) + bd["unattributed"]["host_ms"]
    assert abs(parts - bd["host_ms"]) < 1e-3
    assert abs(bd["host_ms"] * STEPS - wall) < 0.05 * wall + 1.0  # the profiler's span is the measured pass
    assert bd["device_ms"] == 0.0 and all(p["device_ms"] == 0.0 for p in bd["phases"].values())
    # one first-pass region and one switch per step, however often the chain samples or propose nests
    assert bd["scope_calls"][ours.DRAFT_FIRST] == STEPS and bd["scope_calls"][ours.DRAFT_CHAIN] == STEPS
    if runner == "v1":
        assert "gpu_model_runner: eplb" in bd["missing_scopes"] and ours.DRAFT_CHAIN not in bd["missing_scopes"]
    else:  # the stand-ins emit every scope we add for MRV2, none of vLLM's engine scopes
        assert bd["missing_scopes"] == [s for s, _, runners, src in sb.SCOPE_PHASES
                                        if "mrv2" in runners.split() and src != sb.HARNESS]


def test_a_region_closes_its_open_scope_when_the_call_raises():
    switch = ours.wrap(lambda: None, ours.DRAFT_CHAIN, "switch_after")

    def first_pass_then_fail():
        switch()
        assert ours._region.name == ours.DRAFT_CHAIN
        raise ValueError("x")

    with pytest.raises(ValueError):
        ours.wrap(first_pass_then_fail, ours.DRAFT_FIRST, "region")()
    assert ours._region.scope is None and ours._region.name is None
    switch()  # outside a region a switch opens nothing
    assert ours._region.scope is None
    with pytest.raises(ValueError, match="unknown scope kind"):
        ours.wrap(first_pass_then_fail, "x", "around")


def test_hooks_on_modules_not_loaded_are_skipped_and_everything_is_restored():
    hooks = (ScopeHook("portable_spec_no_such_module", "X.y", ours.STEP),
             ScopeHook(__name__, "FakeV2Runner.run_fullgraph", ours.MRV2_FORWARD),  # inherited nowhere: not defined
             ScopeHook(__name__, "FakeGraphManager.run_fullgraph", ours.MRV2_FORWARD))
    original = FakeGraphManager.__dict__["run_fullgraph"]
    with installed(hooks) as report:
        assert report["installed"] == [f"{__name__}.FakeGraphManager.run_fullgraph"]
        assert [s.split(":")[0] for s in report["skipped"]] == ["portable_spec_no_such_module.X.y",
                                                                f"{__name__}.FakeV2Runner.run_fullgraph"]
        assert FakeGraphManager.__dict__["run_fullgraph"] is not original
    assert FakeGraphManager.__dict__["run_fullgraph"] is original


def test_without_a_step_scope_the_breakdown_says_so():
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        with record_function("gpu_model_runner: forward"):
            torch.ones(4).sum()
    assert "no step scope" in breakdown(prof.events())["error"]


# -- device attribution on torch's FunctionEvent tree ---------------------------------------------------------------

@pytest.mark.parametrize("typed", [True, False], ids=["activity-types", "older-torch-names-only"])
def test_device_time_goes_to_the_phase_open_when_its_api_call_launched_it_graph_replays_included(typed):
    def cpu(name, start, end, correlation=0):
        return cpu_event(name, start, end, correlation, typed)

    def work(duration, correlation, name="k", kind="kernel"):
        return device_event(name, duration, correlation, kind=kind, typed=typed)
    events = [
        cpu(ours.STEP, 0, 1000),
        cpu("gpu_model_runner: preprocess", 10, 200),
        cpu("aten::copy_", 20, 40), cpu("cudaMemcpyAsync", 25, 35, 101), work(5, 101, "Memcpy HtoD", "gpu_memcpy"),
        # a graph replay under a scope and no aten op: torch links its kernels to nothing; the call's id does
        cpu("gpu_model_runner: forward", 300, 600), cpu("cudaGraphLaunch", 310, 330, 102), work(40, 102), work(30, 102),
        cpu("cudaMemcpyAsync", 650, 660, 110), work(3, 110, "Memcpy HtoD", "gpu_memcpy"),  # back in the outer scope
        cpu(ours.OUTPUT, 1100, 2000),
        cpu("gpu_model_runner: sample", 1100, 1150),  # starts with its parent: still the inner phase
        cpu("cudaLaunchKernel", 1120, 1125, 111), work(4, 111),
        cpu(ours.DRAFT_FIRST, 1200, 1500),
        cpu("aten::mm", 1250, 1300, 102),  # an op whose own id collides with a CUPTI correlation: ignored
        cpu("cudaLaunchKernel", 1260, 1270, 103), work(12, 103),
        cpu(ours.DRAFT_CHAIN, 1500, 1900),
        *[e for i in range(3) for e in (cpu("cudaGraphLaunch", 1510 + 100 * i, 1520 + 100 * i, 104 + i),
                                        work(8, 104 + i))],
        cpu(ours.WAIT, 1950, 1990), cpu("cudaEventSynchronize", 1955, 1985, 107),
        cpu("aten::add", 2100, 2110), cpu("cudaLaunchKernel", 2101, 2105, 108), work(7, 108),  # outside phases
        cpu(ours.STEP, 3000, 3100),  # step 2
        cpu("gpu_model_runner: forward", 3010, 3090), cpu("cudaGraphLaunch", 3020, 3030, 109), work(50, 109),
        work(11, 999),  # its launching call is not in the trace
        work(500, 102, "gpu_model_runner: forward", "gpu_user_annotation"),  # a scope's GPU-side span: no work
    ]
    if typed:
        events.append(work(300, 107, "Event Sync", "cuda_sync"))  # a sync record: time waited, not work
    next(e for e in events if e.name == "aten::add").append_kernel("k", 0, 7)  # torch's op link, where it has one
    bd = breakdown(trace(events), runner="v1")
    per_step = {p: v["device_ms"] for p, v in bd["phases"].items()}
    assert per_step == {"target_prep": 0.004, "target_forward": 0.06, "verify": 0.002, "draft_first": 0.006,
                        "draft_chain": 0.012, "output": 0.0, "engine": 0.0, "host_wait": 0.0}
    assert bd["per_step"]["device_ms"]["target_forward"] == [0.07, 0.05]
    assert bd["device_ms"] == 0.093  # (5 + 70 + 3 + 4 + 12 + 24 + 7 + 11 + 50) us over 2 steps
    assert bd["unattributed"]["device_ms"] == 0.009 and bd["unattributed"]["device_ms_unlinked"] == 0.0055
    assert sum(per_step.values()) + bd["unattributed"]["device_ms"] == pytest.approx(bd["device_ms"])
    assert bd["phases"]["target_forward"]["kernels"] == 1.5 and bd["phases"]["draft_chain"]["kernels"] == 1.5
    launches = {p: v["launches"] for p, v in bd["phases"].items() if v["launches"]}
    assert launches == {"target_prep": 1.0, "target_forward": 1.0, "verify": 0.5, "draft_first": 0.5,
                        "draft_chain": 1.5}
    assert bd["unattributed"]["launches"] == 0.5 and bd["unattributed"]["kernels"] == 1.0
    assert bd["phases"]["host_wait"]["sync_ms"] == 0.015
    # host: nested scopes count for the inner phase only; API calls on their own thread change nothing
    assert bd["per_step"]["host_ms"]["target_prep"] == [pytest.approx(0.7), pytest.approx(0.02)]
    assert bd["per_step"]["host_ms"]["output"] == [pytest.approx(0.11), 0.0]
    assert bd["host_ms"] == pytest.approx(3.1 / 2)
    assert bd["checks"]["device_events_skipped"] == (
        {"gpu_user_annotation": 1, "cuda_sync": 1} if typed else {"scope span": 1})
    assert bd["checks"]["device_ms_torch_op_links"] == 0.0035  # reported, not used: the graph replays lack it


def test_is_scope_tells_scopes_from_kernels_and_ops():
    assert sb.is_scope("gpu_model_runner: draft") and sb.is_scope(ours.DRAFT_CHAIN)
    assert not sb.is_scope("nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT") and not sb.is_scope("aten::copy_")


def test_device_gaps_split_a_steps_span_into_busy_time_and_idle_gaps_by_length():
    """A step's wall over its summed kernel time is idle time between device items: the breakdown sums those gaps
    by length (< 5 us launch gaps inside a replayed graph, 5-100 us, >= 100 us the GPU waiting on the host), with
    overlapping streams counted once. Step 1: kernels at 0-10, 12-20 (gap 2), 50-60 (gap 30), overlapped by 55-70 on
    another stream, then 300-310 (gap 230). Step 2: one kernel, no gap."""
    events = [cpu_event(ours.STEP, 0, 1000), cpu_event("gpu_model_runner: forward", 1, 900)]
    for i, (start, end) in enumerate(((0, 10), (12, 20), (50, 60), (55, 70), (300, 310))):
        events += [cpu_event("cudaLaunchKernel", 2 + i, 3 + i, 200 + i),
                   device_event("k", end - start, 200 + i, start=start)]
    events += [cpu_event(ours.STEP, 1000, 1100), cpu_event("cudaLaunchKernel", 1001, 1002, 300),
               device_event("k", 40, 300, start=1005)]
    bd = breakdown(trace(events), runner="v1")
    gaps = bd["device_gaps"]
    assert gaps["gap_ms"] == {"under_5us": 0.001, "5_to_100us": 0.015, "100us_up": 0.115}  # (2, 30, 230) us / 2
    assert gaps["gaps"] == {"under_5us": 0.5, "5_to_100us": 0.5, "100us_up": 0.5}
    assert gaps["busy_ms"] == 0.044  # (10 + 8 + 20 + 10 + 40) us over 2 steps: the overlap counted once
    assert gaps["span_ms"] == 0.175  # (310 + 40) us / 2 = busy + every gap
    assert gaps["span_ms"] == pytest.approx(gaps["busy_ms"] + sum(gaps["gap_ms"].values()), abs=1e-3)
    text = breakdown_report.render_table({"ours": bd})
    assert "idle gaps 100us up, ms (n)" in text and "device busy, ms / step" in text
