"""``ci/gpu/lane_and_pack.sh`` stops a lane that runs past its limit the way the serving benchmark needs: SIGTERM to
the lane's whole process group, then the archive only once every process of it has ended (or, after
``LANE_STOP_GRACE_S``, been killed), so a report written on the way out is in it. Run on CPU: a copy of the wrapper's
tree whose cuda lane is a stub Python process standing in for the benchmark."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

BENCH = """
import os, pathlib, signal, sys, time
out = pathlib.Path(sys.argv[1])
def stop(*_):
    raise SystemExit(1)
signal.signal(signal.SIGTERM, signal.SIG_IGN if sys.argv[2] == "ignore" else stop)
(out / "serve_bench.partial.json").write_text("{}")
print(f"bench pid {os.getpid()}", flush=True)
try:
    time.sleep(float(sys.argv[3]))
finally:
    time.sleep(2)  # stopping its servers
    (out / "serve_bench.json").write_text("{}")
sys.exit(int(sys.argv[4]))
"""


def lane_and_pack(tmp_path: Path, limit: str, mode: str = "stop", run_s: str = "60", exit_code: str = "0",
                  env: dict | None = None, says: tuple[str, ...] = ()) -> tuple[subprocess.CompletedProcess, float,
                                                                             Path, str]:
    """Runs the wrapper in a copy of its tree; the stub lane prints ``says`` (lines a stage prints), then its bench
    sleeps ``run_s`` and exits ``exit_code``, on SIGTERM (``mode`` "stop") takes 2 s to stop and then writes
    serve_bench.json; "ignore": ignores SIGTERM."""
    tree = tmp_path / "tree"
    for rel in ("ci/gpu/lane_and_pack.sh", "ci/gpu-host/jit_cache.sh"):
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, tree / rel)
    (tree / "ci/lanes").mkdir()
    (tree / "ci/lanes/bench.py").write_text(BENCH)
    (tree / "ci/lanes/cuda.sh").write_text(  # as the real lane: bash running the bench in the foreground
        "".join(f"echo {shlex.quote(line)}\n" for line in says) +
        f'"{sys.executable}" -S "$(dirname "$0")/bench.py" "$1" {mode} {run_s} {exit_code}\n'
        'rc=$?; echo "bench exit $rc"; exit $rc\n')
    out, name = tmp_path / "out", f"pack-test-{os.getpid()}-{tmp_path.name}"
    out.mkdir()
    started = time.monotonic()
    try:
        result = subprocess.run(["bash", str(tree / "ci/gpu/lane_and_pack.sh"), name, limit, "serve-bench"],
                                capture_output=True, text=True, timeout=60,
                                env={"PATH": os.environ["PATH"], "HOME": str(tmp_path / "home"), "OUT": str(out),
                                     **(env or {})})
    finally:
        shutil.rmtree(f"/tmp/lane-{name}", ignore_errors=True)  # the wrapper works there, as on the GPU host
    return result, time.monotonic() - started, out / f"{name}.tgz", f"lane-{name}"


def packed(archive: Path, lane: str) -> tuple[list[str], str]:
    with tarfile.open(archive) as tgz:
        return sorted(Path(n).name for n in tgz.getnames() if n != lane), \
            tgz.extractfile(f"{lane}/console.log").read().decode()


def bench_pid(console: str) -> int:
    return int(re.search(r"^bench pid (\d+)$", console, re.M).group(1))


def gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].startswith("Z")  # a zombie left to reap
    except FileNotFoundError:
        return True


def test_a_lane_past_its_limit_is_packed_only_after_it_wrote_its_report(tmp_path):
    """The bench needs 2 s after SIGTERM to write serve_bench.json: the archive holds it, and the exit status is
    still timeout's 124."""
    result, wall, archive, lane = lane_and_pack(tmp_path, "1")
    assert result.returncode == 124, result.stdout + result.stderr
    files, console = packed(archive, lane)
    assert files == ["console.log", "serve_bench.json", "serve_bench.partial.json"], files
    said = re.search(r"^lane exit 124 after 1 s; lane processes ended ([0-9]+) s after SIGTERM$", console, re.M)
    assert said and 1 <= int(said.group(1)) <= 4, console
    assert said.group(0) in result.stdout  # the call's tail says it too
    assert "bench exit" not in console  # the lane's bash died at the SIGTERM; the bench outlived it
    assert gone(bench_pid(console)) and wall < 12, wall


def test_a_lane_that_ignores_sigterm_is_killed_after_the_grace(tmp_path):
    result, wall, archive, lane = lane_and_pack(tmp_path, "1", mode="ignore", env={"LANE_STOP_GRACE_S": "1"})
    assert result.returncode == 124, result.stdout + result.stderr
    files, console = packed(archive, lane)
    assert "lane exit 124 after 1 s; lane processes killed after 1 s" in console.splitlines(), console
    assert files == ["console.log", "serve_bench.partial.json"], files  # SIGKILL: no report written
    assert gone(bench_pid(console)) and wall < 12, wall


def test_a_lane_within_its_limit_keeps_its_own_exit_status_and_returns_at_once(tmp_path):
    """No SIGTERM, no grace: the wrapper returns when the lane does (its watchdog does not hold the call)."""
    result, wall, archive, lane = lane_and_pack(tmp_path, "60", run_s="0", exit_code="3")
    assert result.returncode == 3, result.stdout + result.stderr
    files, console = packed(archive, lane)
    assert files == ["console.log", "serve_bench.json", "serve_bench.partial.json"], files
    assert console.splitlines()[-3:-1] == ["bench exit 3", "lane exit 3"], console
    assert "SIGTERM" not in console + result.stdout and wall < 12, wall


def test_the_probes_verdicts_reach_the_calls_tail(tmp_path):
    """The device tool returns only the call's last lines: each probe's summary line must be among those the wrapper
    prints from the console (the first-batches probe's too, added after the join probe's and the sweep's)."""
    says = ("join probe: 3 runs of ours compared; no stall, no compile after boot",
            "sampling sweep: 41 requests of ours served; refused by every variant: none; no compile after boot",
            "first batches: 12 waves of ours compared; ours_mrv2: its first batch of 2 paused 1024.0 ms",
            "first batches: slowest first token ms per size, first / repeat {\"ours_mrv2\": {\"2\": [1117.0, 93.0]}}")
    result, _, _, _ = lane_and_pack(tmp_path, "60", run_s="0", says=says)
    assert result.returncode == 0, result.stdout + result.stderr
    tail = result.stdout.splitlines()
    assert [line for line in says if line in tail] == list(says), result.stdout
