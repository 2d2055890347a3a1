"""The cold-boot comparison (``portable_spec_harness.e2e.boot_time``) under a call's time limit: upstream V1 boots
first and the report is written after every boot. Why: at TP=2 a 300 s and a 370 s call each ended during the last
boot, which was upstream's, so ours was measured twice and the baseline never, and the report (written at the end)
was lost with it. A discarded priming boot of the first variant, on throwaway caches, runs before the measured ones:
machine-wide first-use costs the per-engine caches do not cover would otherwise land on whichever engine boots first,
so it must never count in a wall or a ratio, and its failure must not stop the measured boots."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from portable_spec_harness.e2e import boot_time


class Cut(Exception):
    """The time limit, arriving during a boot."""


def fake_boots(monkeypatch, cut_at: int, calls: list | None = None, fail_first: bool = False) -> list[str]:
    """boot_once replaced: the n-th boot takes 100 + 10 n s; ``calls`` gets each call's (variant, workdir, log)."""
    booted: list[str] = []

    def boot_once(variant, child_args, workdir, log, timeout_s, stack_every):
        if len(booted) == cut_at:
            raise Cut(variant)
        booted.append(variant)
        if calls is not None:
            calls.append((variant, workdir, log))
        error = "exit 1, see the log" if fail_first and len(booted) == 1 else None
        return {"variant": variant, "wall_to_ready_s": 100.0 + 10 * len(booted), "llm_init_s": 80.0, "error": error}

    monkeypatch.setattr(boot_time, "boot_once", boot_once)
    monkeypatch.setattr("portable_spec_harness.model_zoo.build_pair",
                        lambda *a, **k: {"target": "t", "draft": "d", "method": "eagle"})
    return booted


def test_upstream_boots_first_and_each_boot_is_on_disk_before_the_next(monkeypatch, tmp_path):
    booted = fake_boots(monkeypatch, cut_at=2)
    with pytest.raises(Cut, match="platform_only"):
        boot_time.main([str(tmp_path), "--no-prime"])
    assert booted == ["upstream_v1", "full_drafter"]
    report = json.loads((tmp_path / "boot_time.json").read_text())
    assert [b["variant"] for b in report["boots"]] == booted
    assert report["ours_over_upstream"] == {"cold": round(120.0 / 110.0, 3)}
    assert report["variants_asked"] == ["upstream_v1", "full_drafter", "platform_only"]


def test_a_complete_run_reports_every_boot(monkeypatch, tmp_path):
    booted = fake_boots(monkeypatch, cut_at=99)
    assert boot_time.main([str(tmp_path), "--warm"]) == 0
    report = json.loads(Path(tmp_path / "boot_time.json").read_text())
    assert len(report["boots"]) == len(booted) - 1 == 6 and set(report["ours_over_upstream"]) == {"cold", "warm"}


def test_the_priming_boot_comes_first_on_its_own_caches_and_counts_in_no_wall(monkeypatch, tmp_path, capsys):
    calls: list = []
    fake_boots(monkeypatch, cut_at=99, calls=calls)
    assert boot_time.main([str(tmp_path), "--variants", "full_drafter,upstream_v1"]) == 0
    (variant, workdir, log), measured = calls[0], calls[1:]
    assert variant == "full_drafter" and log == tmp_path / "boot_priming_full_drafter.log"
    assert workdir not in {w for _, w, _ in measured} and [v for v, _, _ in measured] == ["full_drafter", "upstream_v1"]
    report = json.loads((tmp_path / "boot_time.json").read_text())
    assert report["priming"] == {"variant": "full_drafter", "wall_to_ready_s": 110.0, "llm_init_s": 80.0,
                                 "error": None}
    assert [b["wall_to_ready_s"] for b in report["boots"]] == [120.0, 130.0]
    assert report["ours_over_upstream"] == {"cold": round(120.0 / 130.0, 3)} and "discarded priming" in report["method"]
    printed = capsys.readouterr().out
    assert json.loads(printed.splitlines()[0])["phase"] == "priming"
    assert "110.0" not in printed.split("BOOT ")[1]  # the summary's walls: measured boots only


def test_no_prime_boots_no_priming_engine(monkeypatch, tmp_path):
    calls: list = []
    fake_boots(monkeypatch, cut_at=99, calls=calls)
    assert boot_time.main([str(tmp_path), "--no-prime"]) == 0
    assert [v for v, _, _ in calls] == ["upstream_v1", "full_drafter", "platform_only"]
    report = json.loads((tmp_path / "boot_time.json").read_text())
    assert report["priming"] is None and "no priming boot" in report["method"]


def test_the_priming_boot_is_on_disk_before_the_first_measured_one(monkeypatch, tmp_path):
    fake_boots(monkeypatch, cut_at=1)
    with pytest.raises(Cut, match="upstream_v1"):
        boot_time.main([str(tmp_path)])
    report = json.loads((tmp_path / "boot_time.json").read_text())
    assert report["priming"]["wall_to_ready_s"] == 110.0 and report["boots"] == [] and not report["ours_over_upstream"]


def test_a_failed_priming_boot_is_recorded_and_the_measured_boots_still_run(monkeypatch, tmp_path):
    booted = fake_boots(monkeypatch, cut_at=99, fail_first=True)
    assert boot_time.main([str(tmp_path)]) == 0  # the measured boots decide the exit status
    assert booted == ["upstream_v1", "upstream_v1", "full_drafter", "platform_only"]
    report = json.loads((tmp_path / "boot_time.json").read_text())
    assert report["priming"]["error"] and len(report["boots"]) == 3
    assert report["ours_over_upstream"] == {"cold": round(130.0 / 120.0, 3)}
