"""The cuda lane's tp2 stage (``ci/gpu/tp2.sh``) and the scripts it shares with the lane's serve-bench and soak
stages, run with a stand-in interpreter that records each command line: every step at TP=2 carries the two switches a
host without NVLink multicast needs, and the serving benchmark's command line parses with its own CLI as TP=2."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SWITCHES = ["--disable-custom-all-reduce", "--no-fuse-allreduce-rms"]
RECORDER = """#!/usr/bin/env bash
if [[ "$1" == "-c" ]]; then echo 2; exit 0; fi   # tp2.sh's GPU count
python3 -c 'import json, sys; print(json.dumps(sys.argv[1:]))' "$@" >> "$RECORD"
"""


def recorded(tmp_path: Path, script: str, **env: str) -> list[list[str]]:
    """The command lines ``script`` ran its interpreter with (``PYTHON`` is a recorder)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    python = tmp_path / "python"
    python.write_text(RECORDER)
    python.chmod(0o755)
    record = tmp_path / "record.jsonl"
    done = subprocess.run(["bash", script, str(tmp_path / "out")], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTHON": str(python), "RECORD": str(record), **env})
    assert done.returncode == 0, done.stdout + done.stderr
    return [json.loads(line) for line in record.read_text().splitlines()] if record.exists() else []


def module_args(commands: list[list[str]], module: str) -> list[str]:
    (args,) = [c[2:] for c in commands if c[:2] == ["-m", module]]
    return args


def test_the_tp2_serve_and_soak_steps_run_every_server_at_tp2_with_the_switches(tmp_path):
    commands = recorded(tmp_path, "ci/gpu/tp2.sh", TP2_STEPS="serve,soak,boot",
                        SERVE_BENCH_PAIR="llama8b_eagle3", SERVE_BENCH_MODE="designed")
    serve = module_args(commands, "portable_spec_harness.serve_bench")
    from portable_spec_harness.parallel import Parallel
    from portable_spec_harness.serve_bench.__main__ import parser, settings_from

    settings = settings_from(parser().parse_args(serve))
    assert settings.parallel == Parallel(2, True, True)
    assert serve[serve.index("--pair") + 1] == "llama8b_eagle3" and serve[serve.index("--out") + 1].endswith(
        "out/tp2/serve-bench")
    soak = module_args(commands, "portable_spec_harness.soak")
    assert soak[soak.index("--tp") + 1] == "2" and set(SWITCHES) <= set(soak)
    assert soak[soak.index("--pairs") + 1] == "llama_ctx_eagle3" and soak[soak.index("--sync-pairs") + 1] == ""
    boot = module_args(commands, "portable_spec_harness.e2e.boot_time")
    assert boot[boot.index("--tp") + 1] == "2" and set(SWITCHES) <= set(boot)


@pytest.mark.parametrize("script,knob,module", [
    ("ci/gpu/serve_bench.sh", "SERVE_BENCH_TP", "portable_spec_harness.serve_bench"),
    ("ci/gpu/soak.sh", "SOAK_TP", "portable_spec_harness.soak")])
def test_the_lane_stages_run_at_tp1_unless_their_knob_says_otherwise(tmp_path, script, knob, module):
    args = module_args(recorded(tmp_path, script), module)
    assert args[args.index("--tp") + 1] == "1" and not set(SWITCHES) & set(args)
    args = module_args(recorded(tmp_path / "two", script, **{knob: "2"}), module)
    assert args[args.index("--tp") + 1] == "2" and set(SWITCHES) <= set(args)
    lane = (ROOT / "ci/lanes/cuda.sh").read_text()
    assert f"bash {script} \"$out\"" in lane  # the lane's stage is this script
