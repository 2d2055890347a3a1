"""The one judge of "no kernel compiled after boot" (``portable_spec_harness.jit_judge``) that the serving benchmark, the join
probe and the sampling sweep share: one read of a server log gives the compiles and whether vLLM's JIT monitor was
armed; a variant of ours (by kind: ``ours@async`` is ours) fails on a compile after boot, on a monitor that never
armed, and on a result that did not record the monitor. Each planted fault below fails the judge on its own."""

from pathlib import Path

import pytest

from portable_spec_harness import jit_judge
from soak_fake_server import COMPILE_LINE, MONITOR_LINE

ROOT = Path(__file__).resolve().parents[1]
SWEEP_033 = ROOT / "bench/results/2026-11-29-h200-session24/sweep033/sampling-sweep"
"""Session 24's sampling sweep on vLLM 0.33.0: whole server logs, committed gzipped."""
CLEAN = MONITOR_LINE + "\n"
COMPILED = CLEAN + COMPILE_LINE.format(kernel="_topk_topp_kernel") + "\n"
UNARMED = "INFO nothing armed here\n"


def test_one_read_gives_the_compiles_and_the_monitor(tmp_path):
    log = tmp_path / "server_ours.log"
    log.write_text(COMPILED)
    assert jit_judge.read(log) == jit_judge.JitLog(("Triton kernel JIT compilation: _topk_topp_kernel",), True)
    log.write_text(UNARMED)
    assert jit_judge.read(log) == jit_judge.JitLog((), False)
    assert jit_judge.read(tmp_path / "missing.log") == jit_judge.JitLog((), False)


def test_the_log_is_read_once(tmp_path, monkeypatch):
    log = tmp_path / "server_ours.log"
    log.write_text(COMPILED)
    reads = []
    real = Path.read_text
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: reads.append(self) or real(self, *a, **k))
    jit_judge.read(log)
    assert reads == [log]


def test_the_committed_h200_logs_read_as_vllm_wrote_them():
    """Real vLLM 0.33.0 words: MRV2 on vLLM's platform compiled two kernels with its monitor armed, ours none."""
    theirs = jit_judge.read(SWEEP_033 / "server_mrv2.log.gz")
    assert theirs.monitor_active and [c.rsplit(": ", 1)[1] for c in theirs.compiles] == [
        "_gumbel_sample_kernel", "_topk_log_softmax_kernel"]
    assert jit_judge.problems("mrv2", theirs) == []  # a baseline: recorded, not judged
    assert jit_judge.problems("ours_mrv2", jit_judge.read(SWEEP_033 / "server_ours_mrv2.log.gz")) == []


@pytest.mark.parametrize("variant", ["ours", "ours_mrv2", "ours@async", "ours@sync", "ours_mrv2@async"])
def test_a_clean_log_of_ours_passes(variant):
    assert jit_judge.problems(variant, jit_judge.scan(CLEAN)) == []


@pytest.mark.parametrize("variant,text,phrase", [
    ("ours", COMPILED, "ours: 1 kernel JIT compile(s) after boot: Triton kernel JIT compilation: _topk_topp_kernel"),
    ("ours_mrv2", UNARMED, "ours_mrv2: vLLM's JIT monitor never logged 'Kernel JIT monitor activated'"),
    ("ours@async", COMPILED, "ours@async: 1 kernel JIT compile(s) after boot"),
    ("ours@async", UNARMED, "ours@async: vLLM's JIT monitor never logged"),
    ("ours_mrv2@sync", "", "ours_mrv2@sync: vLLM's JIT monitor never logged"),
])
def test_a_planted_compile_or_a_dropped_monitor_fails_ours_by_its_kind(variant, text, phrase):
    found = jit_judge.problems(variant, jit_judge.scan(text), see="server.log")
    assert len(found) == 1 and found[0].startswith(phrase) and found[0].endswith("; see server.log"), found


def test_a_compile_without_a_monitor_line_is_two_problems():
    found = jit_judge.problems("ours", jit_judge.scan(COMPILE_LINE.format(kernel="_temperature_kernel")))
    assert [line.split(": ", 2)[1][:20] for line in found] == ["vLLM's JIT monitor n", "1 kernel JIT compile"]


@pytest.mark.parametrize("variant", ["upstream_v1", "mrv2", "upstream_v1@async", "mrv2@sync"])
def test_a_baseline_is_recorded_never_judged(variant):
    assert jit_judge.problems(variant, jit_judge.scan(COMPILE_LINE.format(kernel="_topk_topp_kernel"))) == []


def test_a_result_that_did_not_record_the_monitor_fails_as_not_recorded():
    """Results written before the monitor was read (no ``jit_monitor_active``) never pass by silence."""
    before = {"variant": "ours", "jit_after_boot": []}
    assert jit_judge.recorded(before) == jit_judge.JitLog((), None)
    assert jit_judge.problems("ours", jit_judge.recorded(before)) == [
        "ours: vLLM's JIT monitor not recorded (no 'jit_monitor_active' in the result): its zero compile lines "
        "prove nothing"]
    written = {"variant": "ours", **jit_judge.scan(CLEAN).as_json()}
    assert written == {"variant": "ours", "jit_after_boot": [], "jit_monitor_active": True}
    assert jit_judge.problems("ours", jit_judge.recorded(written)) == []


def test_a_server_that_never_got_ready_is_left_to_its_boot_problem():
    """vLLM arms the monitor after the warm-up, which a failed boot never reached: no monitor problem on top of the
    boot's own (the bench's OOM fallback and the probes' missing runs say what went wrong)."""
    unarmed = jit_judge.scan(UNARMED)
    assert jit_judge.problems("ours", unarmed, ready=False) == []
    assert jit_judge.result_problems({"variant": "ours", "boot": {"ready": False}, **unarmed.as_json()}) == []
    assert jit_judge.result_problems({"variant": "ours", "boot": {"ready": True}, **unarmed.as_json()}) == [
        "ours: vLLM's JIT monitor never logged 'Kernel JIT monitor activated': zero compile lines prove nothing"]
    assert jit_judge.result_problems({"variant": "ours@async", **unarmed.as_json()})  # no boot record: judged
