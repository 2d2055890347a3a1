"""The phase clock (``harness/e2e/phase_clock.py``): exclusive wall and CPU time per phase from the same scopes the
profiler breakdown reads, driven through ``profile_scopes``' real wrappers with injected clocks."""

from __future__ import annotations

import inspect

import pytest

from portable_spec_harness.e2e.breakdown_report import clocks_of, render_clock_table
from portable_spec_harness.e2e.phase_clock import PhaseClock
from portable_spec_harness.vllm_door import profile_scopes
from portable_spec_harness.vllm_door.profile_scopes import DRAFT_CHAIN, DRAFT_FIRST, OUTPUT, STEP, ScopeHook


class Ticks:
    """A clock that advances only when told (wall and CPU separately)."""

    def __init__(self) -> None:
        self.wall = self.cpu = 0.0

    def spend(self, wall: float, cpu: float | None = None) -> None:
        self.wall += wall
        self.cpu += wall if cpu is None else cpu


def _clock(ticks: Ticks) -> PhaseClock:
    return PhaseClock(wall=lambda: ticks.wall, cpu=lambda: ticks.cpu)


def test_nested_phases_count_once_and_off_cpu_time_is_wall_minus_cpu():
    ticks = Ticks()
    clock = _clock(ticks)
    for _ in range(2):  # two steps
        with clock.scope(STEP):  # target prep
            ticks.spend(1.0)
            with clock.scope("gpu_model_runner: forward"):
                ticks.spend(0.5, cpu=0.1)  # 0.4 s off the CPU
            with clock.scope("not a phase scope"):  # its time stays with the step's phase
                ticks.spend(0.25)
        with clock.scope(OUTPUT):
            ticks.spend(0.125)
            with clock.scope("gpu_model_runner: draft"):
                ticks.spend(0.5)
                with clock.scope(DRAFT_CHAIN):
                    ticks.spend(2.0)
    out = clock.summary(wall_s=10.0)
    phases = out["phases"]
    assert out["steps"] == 2 and out["step_wall_ms"] == 5000.0
    assert phases["target_prep"]["wall_ms"] == 1250.0 and phases["target_forward"]["wall_ms"] == 500.0
    assert phases["target_forward"]["off_cpu_ms"] == pytest.approx(400.0)
    assert phases["output"]["wall_ms"] == 125.0
    assert phases["draft_first"]["wall_ms"] == 500.0 and phases["draft_chain"]["wall_ms"] == 2000.0
    assert out["unattributed"]["wall_ms"] == pytest.approx(5000.0 - 4375.0)


def test_the_clock_times_the_real_scope_wrappers_including_region_switches():
    """``profile_scopes.installed(factory=...)`` opens our hooks' scopes through the clock: a region that switches
    from the first pass to the chain splits its time there, and the factory is gone after the block."""

    class Drafter:
        def __init__(self, ticks: Ticks) -> None:
            self.ticks = ticks

        def propose(self) -> None:
            self.ticks.spend(0.5)
            self.chain()

        def chain(self) -> None:
            self.ticks.spend(1.5)

    ticks = Ticks()
    clock = _clock(ticks)
    hooks = (ScopeHook(__name__, "Drafter.propose", DRAFT_FIRST, "region"),
             ScopeHook(__name__, "Drafter.chain", DRAFT_CHAIN, "switch_before"))
    globals()["Drafter"] = Drafter
    try:
        with profile_scopes.installed(hooks, factory=clock.scope) as report:
            assert len(report["installed"]) == 2
            with clock.scope(STEP):
                Drafter(ticks).propose()
        assert profile_scopes._factory is None
        out = clock.summary(wall_s=2.0)
        assert out["phases"]["draft_first"]["wall_ms"] == 500.0 and out["phases"]["draft_chain"]["wall_ms"] == 1500.0
    finally:
        del globals()["Drafter"]


def test_no_step_scope_is_an_error_not_a_division_by_zero():
    assert "no step scope" in PhaseClock().summary(1.0)["error"]


def test_the_report_table_shows_the_difference_to_mrv2():
    def row(variant: str, prep: float) -> dict:
        ticks = Ticks()
        clock = _clock(ticks)
        with clock.scope(STEP):
            ticks.spend(prep)
        return {"variant": variant, "phase_clock": clock.summary(wall_s=prep + 1.0)}

    report = {"results": [row("full_drafter", 3.0), row("mrv2", 1.0), {"variant": "upstream_v1"}]}
    clocks = clocks_of(report)
    assert list(clocks) == ["full_drafter", "mrv2"]
    table = render_clock_table(clocks)
    prep = next(line for line in table.splitlines() if line.startswith("target input prep"))
    assert prep.split()[-3:] == ["2000.000", "/", "0.000"]  # ours - MRV2: 2 s of wall, none off the CPU


def test_detail_scopes_are_timed_inclusive_apart_from_the_phases():
    ticks = Ticks()
    clock = _clock(ticks)
    detail = profile_scopes.DETAIL_PREFIX + "v1 _prepare_inputs"
    inner = profile_scopes.DETAIL_PREFIX + "v1 _calc_spec_decode_metadata"
    with clock.scope(STEP):
        ticks.spend(1.0)
        with clock.scope(detail):
            ticks.spend(0.5)
            with clock.scope(inner):
                ticks.spend(0.25, cpu=0.0)
    out = clock.summary(wall_s=2.0)
    assert out["phases"]["target_prep"]["wall_ms"] == 1750.0  # details take nothing from their phase
    assert out["details"]["v1 _prepare_inputs"] == {"wall_ms": 750.0, "cpu_ms": 500.0, "calls_per_step": 1.0}
    assert out["details"]["v1 _calc_spec_decode_metadata"]["wall_ms"] == 250.0 and out["misnested"] == 0


def test_a_scope_closed_out_of_order_is_counted_and_dropped_not_misattributed():
    ticks = Ticks()
    clock = _clock(ticks)
    with clock.scope(STEP):
        outer = clock.scope(profile_scopes.DETAIL_PREFIX + "outer")
        outer.__enter__()
        with clock.scope(DRAFT_FIRST):
            ticks.spend(1.0)
            outer.__exit__(None, None, None)  # closes under an open phase scope
        ticks.spend(1.0)
    out = clock.summary(wall_s=2.0)
    assert out["misnested"] == 1 and "outer" not in out["details"]
    assert out["phases"]["draft_first"]["wall_ms"] == 1000.0 and out["phases"]["target_prep"]["wall_ms"] == 1000.0


def test_every_detail_hook_names_a_vllm_0_26_method_and_encloses_no_region_switch():
    """The detail hooks resolve on vLLM 0.26.0 (ours once it is imported), and none is a method a region switch
    happens inside (which would misnest the clock's scopes)."""
    import vllm.v1.core.sched.scheduler  # noqa: F401
    import vllm.v1.spec_decode.llm_base_proposer  # noqa: F401
    import vllm.v1.worker.gpu.model_runner  # noqa: F401
    import vllm.v1.worker.gpu_model_runner  # noqa: F401

    switches = {h.attr.split(".")[-1] for h in profile_scopes.HOOKS if h.kind.startswith("switch")}
    for hook in profile_scopes.DETAIL_HOOKS:
        if hook.module.startswith("portable_spec"):
            continue
        owner, name = profile_scopes.resolve(hook)
        assert name in vars(owner)
        source = inspect.getsource(vars(owner)[name])
        assert not any(f".{s}(" in source for s in switches), hook


def test_the_report_lists_each_runners_detail_scopes():
    from portable_spec_harness.e2e.breakdown_report import clock_section

    def row(variant: str, detail: str, seconds: float) -> dict:
        ticks = Ticks()
        clock = _clock(ticks)
        with clock.scope(STEP):
            with clock.scope(profile_scopes.DETAIL_PREFIX + detail):
                ticks.spend(seconds)
        return {"variant": variant, "phase_clock": clock.summary(wall_s=seconds)}

    clocks = clocks_of({"results": [row("full_drafter", "v1 _prepare_inputs", 0.002),
                                    row("mrv2", "mrv2 prepare_inputs", 0.001)]})
    lines = "\n".join(clock_section(clocks, 16)).splitlines()
    v1 = next(line for line in lines if line.startswith("v1 _prepare_inputs"))
    assert v1.split()[-4:] == ["2.000", "/", "1.00", "-"]  # ours has it, MRV2 has no such call
    assert any(line.startswith("mrv2 prepare_inputs") and line.rstrip().endswith("1.00") for line in lines)
