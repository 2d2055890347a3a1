"""The phase clock (``harness/e2e/phase_clock.py``): exclusive wall and CPU time per phase from the same scopes the
profiler breakdown reads, driven through ``profile_scopes``' real wrappers with injected clocks."""

from __future__ import annotations

import pytest

from portable_spec.harness.e2e.breakdown_report import clocks_of, render_clock_table
from portable_spec.harness.e2e.phase_clock import PhaseClock
from portable_spec.vllm_adapter import profile_scopes
from portable_spec.vllm_adapter.profile_scopes import DRAFT_CHAIN, DRAFT_FIRST, OUTPUT, STEP, ScopeHook


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
