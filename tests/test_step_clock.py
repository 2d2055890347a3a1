"""The bench's per-step clock (step_clock.py): it sees every engine step of a pass, splits a pass into steady step
time and stalls, and the summary pairs the engines on the steady part while still reporting each one's stalls.
Timing a real engine is the cuda lane's job; these pin the mechanism, and that vLLM's offline loop still steps
through the attribute the clock wraps."""

from __future__ import annotations

import inspect
import time

import pytest

from portable_spec_harness.e2e.bench import summarize
from portable_spec_harness.e2e.child import bench_summary
from portable_spec_harness.e2e.step_clock import STEP_KEYS, StepClock, step_report


class Engine:
    def __init__(self, durations_s):
        self.durations_s = list(durations_s)
        self.calls = 0

    def step(self):
        self.calls += 1
        time.sleep(self.durations_s.pop(0))
        return []


def test_vllms_offline_loop_calls_the_engines_step_once_per_step():
    """``LLM.generate`` runs ``_run_engine``, which calls ``self.llm_engine.step()`` per engine step: the attribute
    the clock wraps on the instance. If vLLM moves the loop, this fails before the bench silently times nothing."""
    from vllm.entrypoints.llm import LLM
    from vllm.v1.engine.llm_engine import LLMEngine

    assert "self.llm_engine.step()" in inspect.getsource(LLM._run_engine)
    assert callable(LLMEngine.step) and "__slots__" not in vars(LLMEngine)


def test_the_clock_times_each_step_and_puts_the_method_back():
    engine = Engine([0.002, 0.002, 0.03, 0.002])
    with StepClock(engine) as clock:
        for _ in range(4):
            engine.step()
    assert engine.calls == 4 and len(clock.durations_s) == 4
    assert "step" not in vars(engine) and engine.step.__func__ is Engine.step
    report = clock.report()
    assert set(report) == set(STEP_KEYS) and report["steps"] == 4
    assert report["stall_steps"] == 1 and report["stall_ms"] > 20
    assert report["slowest_steps"][0][0] == 2  # the stalled step, by its position in the pass
    assert report["step_ms_median"] < 10  # the stall does not move the steady step


def test_the_clock_restores_an_instance_override_and_survives_a_failing_step():
    engine = Engine([])
    own = engine.step
    engine.step = own  # an instance attribute already there
    with pytest.raises(IndexError):
        with StepClock(engine) as clock:
            engine.step()  # no durations left: the step raises
    assert vars(engine)["step"] is own and len(clock.durations_s) == 1


def test_a_pass_with_no_steps_reports_none_and_the_summary_drops_the_step_lists():
    assert step_report([]) == {"steps": 0}
    passes = [{"wall_s": 0.4, "output_tokens": 10, "drafts": 2, "accepted": 4, **step_report([0.001] * 5)},
              {"wall_s": 0.4, "output_tokens": 10, "drafts": 2, "accepted": 4, **step_report([])}]
    assert "step_ms_median_all" not in bench_summary(1, 0.01, passes, bench_tokens=10)


def _row(variant, walls, steps_ms, stall_ms):
    passes = [{"wall_s": w, "output_tokens": 512, "drafts": 128, "accepted": 384,
               **step_report([s / 1000] * 127 + [(s + stall) / 1000])}
              for w, s, stall in zip(walls, steps_ms, stall_ms)]
    return {"variant": variant, "bench": [bench_summary(4, 0.01, passes, bench_tokens=512)]}


def test_the_summary_pairs_the_steady_steps_and_keeps_each_engines_stalls():
    """Noisy walls (a stall of 100-250 ms in some passes, on either engine) leave the wall's paired ratio undecided;
    the same passes' median steps are equal, so the step-time pairing holds the 0.98 bound, and the stalls stay
    visible per engine."""
    base = [0.40, 0.55, 0.41, 0.39, 0.62, 0.40, 0.41, 0.52, 0.40, 0.39, 0.41]
    ours = [0.52, 0.40, 0.40, 0.63, 0.40, 0.41, 0.55, 0.40, 0.41, 0.40, 0.60]
    steps = [3.0] * len(base)
    stalls_base = [max(w - 0.4, 0) * 1000 for w in base]
    stalls_ours = [max(w - 0.4, 0) * 1000 for w in ours]
    summary = summarize([_row("builtin_mrv2", base, steps, stalls_base),
                         _row("ours_platform_mrv2", ours, steps, stalls_ours)])
    wall = summary["paired_ours_platform_mrv2_vs_builtin_mrv2"][4]
    step = summary["paired_step_time_ours_platform_mrv2_vs_builtin_mrv2"][4]
    assert wall["verdict"] == "undecided"
    assert step["verdict"] == "holds" and step["median"] == 1.0 and step["passes"] == len(base)
    stalls = summary["stalls"]
    assert stalls["ours_platform_mrv2"][4]["passes_with_stall"] == sum(1 for s in stalls_ours if s > 3.0) == 6
    assert stalls["builtin_mrv2"][4]["stall_ms"] == pytest.approx(sum(s for s in stalls_base if s > 3.0), abs=1)


def test_a_slower_steady_step_fails_the_bound_even_where_the_walls_hide_it():
    """Ours steps 5% slower in every pass while the walls' noise covers it: the step-time pairing fails."""
    walls = [0.40, 0.55, 0.41, 0.39, 0.62, 0.40, 0.41, 0.52, 0.40]
    summary = summarize([_row("builtin_mrv2", walls, [3.0] * 9, [0] * 9),
                         _row("ours_platform_mrv2", list(reversed(walls)), [3.15] * 9, [0] * 9)])
    step = summary["paired_step_time_ours_platform_mrv2_vs_builtin_mrv2"][4]
    assert step["verdict"] == "fails" and step["median"] == pytest.approx(3.0 / 3.15, abs=1e-3)
