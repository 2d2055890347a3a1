"""The cold-boot comparison (``portable_spec_harness.e2e.boot_time``) under a call's time limit: upstream V1 boots
first and the report is written after every boot. Why: at TP=2 a 300 s and a 370 s call each ended during the last
boot, which was upstream's, so ours was measured twice and the baseline never, and the report (written at the end)
was lost with it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from portable_spec_harness.e2e import boot_time


class Cut(Exception):
    """The time limit, arriving during a boot."""


def fake_boots(monkeypatch, cut_at: int) -> list[str]:
    booted: list[str] = []

    def boot_once(variant, child_args, workdir, log, timeout_s, stack_every):
        if len(booted) == cut_at:
            raise Cut(variant)
        booted.append(variant)
        return {"variant": variant, "wall_to_ready_s": 100.0 + 10 * len(booted), "llm_init_s": 80.0, "error": None}

    monkeypatch.setattr(boot_time, "boot_once", boot_once)
    monkeypatch.setattr("portable_spec_harness.model_zoo.build_pair",
                        lambda *a, **k: {"target": "t", "draft": "d", "method": "eagle"})
    return booted


def test_upstream_boots_first_and_each_boot_is_on_disk_before_the_next(monkeypatch, tmp_path):
    booted = fake_boots(monkeypatch, cut_at=2)
    with pytest.raises(Cut, match="platform_only"):
        boot_time.main([str(tmp_path)])
    assert booted == ["upstream_v1", "full_drafter"]
    report = json.loads((tmp_path / "boot_time.json").read_text())
    assert [b["variant"] for b in report["boots"]] == booted
    assert report["ours_over_upstream"] == {"cold": round(120.0 / 110.0, 3)}
    assert report["variants_asked"] == ["upstream_v1", "full_drafter", "platform_only"]


def test_a_complete_run_reports_every_boot(monkeypatch, tmp_path):
    booted = fake_boots(monkeypatch, cut_at=99)
    assert boot_time.main([str(tmp_path), "--warm"]) == 0
    report = json.loads(Path(tmp_path / "boot_time.json").read_text())
    assert len(report["boots"]) == len(booted) == 6 and set(report["ours_over_upstream"]) == {"cold", "warm"}
