"""``ci/gpu-host/lease_clock.sh``: a chain's later call sets its limit from the seconds left on the device lease, by
the host's clock since the lease's first call. Run on CPU with a clock file in a temporary folder."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "ci" / "gpu-host" / "lease_clock.sh"


def clock(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True,
                          env={"PATH": os.environ["PATH"], "LEASE_CLOCK_FILE": str(tmp_path / "t0"), **env})


def test_start_then_limit_counts_the_seconds_since_start_and_what_later_calls_keep(tmp_path):
    assert clock(tmp_path, "start").returncode == 0
    started = int((tmp_path / "t0").read_text())
    assert abs(started - time.time()) < 5
    (tmp_path / "t0").write_text(f"{started - 1000}\n")  # the lease started 1,000 s ago
    limit = clock(tmp_path, "limit", "340")
    assert limit.returncode == 0, limit.stderr
    assert 1800 - 150 - 1000 - 340 - 2 <= int(limit.stdout) <= 1800 - 150 - 1000 - 340  # 310, a second or two less
    assert clock(tmp_path, "limit", "0").stdout.strip() == "555"  # 650 left, the default cap
    assert int(clock(tmp_path, "limit", "0", "900").stdout) in range(648, 651)
    assert int(clock(tmp_path, "limit", "0", "600", LEASE_OVERHEAD_S="0").stdout) in range(597, 601)


def test_the_cap_bounds_an_early_call(tmp_path):
    clock(tmp_path, "start")
    assert clock(tmp_path, "limit", "0").stdout.strip() == "555"
    assert clock(tmp_path, "limit", "0", "300").stdout.strip() == "300"


def test_a_host_that_never_started_the_clock_is_one_line_and_exit_1(tmp_path):
    out = clock(tmp_path, "limit", "0")
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and "run 'lease_clock.sh start'" in out.stderr
    bad = clock(tmp_path, "later")
    assert bad.returncode == 2 and bad.stderr.startswith("usage:")
