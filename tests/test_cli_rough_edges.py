"""What a new user on a fresh clone hit, through the real console entry (subprocess): bad input is one line naming the
fix and exit code 2 (with ``--json``, one JSON object ``{"error": ..., "exit": 2}`` on stdout), never a traceback,
never exit 0. Each case failed on the code before the fix."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from profile_events import sample_breakdown

from portable_spec.ports.cuda_port import CudaPort

ROOT = Path(__file__).resolve().parents[1]
CLEAN_ENV = ("VLLM_PLATFORM", "TORCHADA_GRAPH_EXEC_CAP", "PORTABLE_SPEC_TRITON32_PYTHON")
NO_GPU = pytest.mark.skipif(CudaPort.is_active(), reason="a CUDA device is visible")


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k not in CLEAN_ENV}
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "portable_spec", *args], capture_output=True, text=True, env=full,
                          timeout=300)


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    """The error message of a run that must fail with exit 2 and exactly one line on stderr."""
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-500:], proc.stderr[-500:])
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("portable-spec: error: "), proc.stderr
    return lines[0].removeprefix("portable-spec: error: ")


def json_error(proc: subprocess.CompletedProcess) -> str:
    """The error message of a ``--json`` run that must fail with exit 2: one JSON object on stdout, no stderr."""
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.returncode == 2 and proc.stderr == "", (proc.returncode, proc.stderr[-500:])
    payload = json.loads(proc.stdout)
    assert set(payload) == {"error", "exit"} and payload["exit"] == 2 and "\n" not in payload["error"]
    return payload["error"]


@pytest.fixture
def breakdown_json(tmp_path) -> str:
    """A bench e2e report with a per-step breakdown, so ``bench breakdown`` gets as far as writing its PNG."""
    path = tmp_path / "bench_e2e.json"
    path.write_text(json.dumps({"results": [{"variant": "full_drafter", "breakdown": sample_breakdown()}]}))
    return str(path)


@pytest.fixture
def a_file(tmp_path) -> str:
    path = tmp_path / "a_file"
    path.write_text("")
    return str(path)


# ---------------------------------------------------------------- 1. output paths, checked before the work


@pytest.mark.parametrize("png, why", [
    ("{tmp}/missing/dir/x.png", "does not exist"),
    ("{file}/x.png", "is a file, not a directory"),  # as /etc/passwd/x.png
    ("{tmp}", "it is a directory"),
])
def test_bench_breakdown_png_that_cannot_be_written_is_one_line(tmp_path, a_file, breakdown_json, png, why):
    pytest.importorskip("matplotlib")  # without it the old code failed in one line for another reason
    png = png.format(tmp=tmp_path, file=a_file)
    message = one_line_error(run_cli("bench", "breakdown", "--png", png, breakdown_json))
    assert message.startswith(f"cannot use --png {png!r}: ") and why in message
    assert message.endswith("pass a file path in an existing writable directory")


def test_kernels_check_triton_out_file_fails_before_the_check_runs(tmp_path, a_file):
    """An existing file as --out: one line, and the Triton 3.2 interpreter is never started (the old code ran the
    whole check, then failed in os.makedirs with a traceback)."""
    stub = tmp_path / "python3.2"
    stub.write_text(f"#!/bin/sh\ntouch {tmp_path}/started\nexit 1\n")
    stub.chmod(0o755)
    message = one_line_error(run_cli("kernels", "--check-triton", "--out", a_file, "--triton32-python", str(stub)))
    assert message == (f"cannot use --out {a_file!r}: it is a file, not a directory: pass a writable directory "
                       "(created if missing)")
    assert not (tmp_path / "started").exists()


@NO_GPU
@pytest.mark.parametrize("command", [("bench", "e2e"), ("bench", "draft", "--platform", "cpu")])
def test_bench_out_file_is_named_before_the_host_check(a_file, command):
    message = one_line_error(run_cli(*command, "--out", f"{a_file}/sub"))
    assert message.startswith(f"cannot use --out '{a_file}/sub': {a_file!r} is a file, not a directory")


# ---------------------------------------------------------------- 2. bad input that exited 0, or only failed on a GPU


@pytest.mark.parametrize("command", [("caps",), ("kernels",), ("bench", "breakdown", "x.json")])
def test_a_bogus_vllm_platform_fails_commands_that_do_not_read_it_too(command):
    message = one_line_error(run_cli(*command, env={"VLLM_PLATFORM": "bogus"}))
    assert message == "unknown platform 'bogus' from VLLM_PLATFORM; valid choices: cpu, cuda, musa, rocm"


@pytest.mark.parametrize("command", ["caps", "kernels"])
def test_platform_flag_still_beats_a_bogus_vllm_platform(command):
    proc = run_cli(command, "--platform", "musa", "--json", env={"VLLM_PLATFORM": "bogus"})
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("args, expected", [
    (("--method", "eagle", "--num-spec", "3", "--max-num-seqs", "64", "--live-graph-limit", "1"),
     "live-graph limit 1 cannot be met: even one size per list needs 3 live graphs (target 1 size x 1 graph, first "
     "step 1, chain step 1): pass --live-graph-limit 3 or more"),
    (("--method", "eagle3", "--num-spec", "3", "--max-num-seqs", "64", "--live-graph-limit", "10",
      "--graphs-per-size", "20"),
     "live-graph limit 10 cannot be met: even one size per list needs 22 live graphs (target 1 size x 20 graphs, "
     "first step 1, chain step 1): pass --live-graph-limit 22 or more, or --graphs-per-size 8 or less (FULL target "
     "graphs need 1)"),
])
def test_sizes_with_a_live_graph_limit_no_plan_meets_fails_naming_what_meets_it(args, expected):
    assert one_line_error(run_cli("sizes", *args, "--platform", "cuda")) == expected


@NO_GPU
def test_probe_verify_on_a_cpu_host_says_it_needs_a_gpu_host():
    assert one_line_error(run_cli("probe", "--verify")) == (
        "probe --verify needs a GPU host (platform 'cpu' has no device to run attention kernels on): run it there, or "
        "drop --verify")


@NO_GPU
@pytest.mark.parametrize("args, expected", [
    (("--target", "/nonexistent"), "your own models need --target DIR and --method M"),
    (("--target", "/nonexistent", "--draft", "/nonexistent", "--method", "eagle"),
     "--target '/nonexistent' is not a model directory (no config.json)"),
    (("--pair", "bogus"), "--pair bogus --model-variant perfect: unknown pair 'bogus'; use one of llama_eagle, "),
    (("--pair", "llama_eagle3", "--model-variant", "partial"), "pair llama_eagle3 has no 'partial' variant"),
    (("--method", "bogus"), "--method 'bogus' is not one our drafter covers: pass one of eagle, eagle3, mtp, dflash"),
])
def test_bench_e2e_models_are_checked_on_a_cpu_host_too(args, expected):
    """Checked before the GPU host check: on a host without a GPU the old code only said it needs one."""
    message = one_line_error(run_cli("bench", "e2e", *args))
    assert expected in message and "GPU" not in message


# ---------------------------------------------------------------- 3. --help is for users


def test_top_level_help_describes_the_tool_its_commands_and_an_example():
    proc = run_cli("--help")
    assert proc.returncode == 0 and proc.stderr == ""
    assert "``" not in proc.stdout and "portable_spec.commands" not in proc.stdout  # no developer docstring
    assert "speculative-decoding drafter under FULL graphs" in proc.stdout
    for command in ("probe", "sizes", "caps", "kernels", "bench"):
        assert re.search(rf"^\s+{command}\s+\w", proc.stdout, re.MULTILINE), command
    assert re.search(r"^example:\n  portable-spec \w+", proc.stdout, re.MULTILINE)


# ---------------------------------------------------------------- 4. caps cites what a user has


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_caps_musa_cites_no_path_outside_the_repo(fmt):
    proc = run_cli("caps", "--platform", "musa", *(["--json"] if fmt == "json" else []))
    assert proc.returncode == 0, proc.stderr
    text = "\n".join(row["source"] for row in json.loads(proc.stdout)["rows"]) if fmt == "json" else proc.stdout
    assert re.findall(r"(?:^|[\s(\"'])(/[\w.-]+/\S*)", text) == []  # no absolute path (was /work/shared/...)


# ---------------------------------------------------------------- 5. the warning says what was planned


def test_sizes_warning_uses_the_planned_max_capture_size():
    proc = run_cli("sizes", "--method", "eagle3", "--num-spec", "5", "--max-num-seqs", "256", "--platform", "musa")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "max_capture_size=498" in lines[0].split()
    capped = [line for line in lines if "exceeds the max capture size" in line]
    assert len(capped) == 1 and "(the largest planned size is 498)" in capped[0]
    assert "more than 83 requests" in capped[0]  # 83 * 6 = 498; 85 (512 // 6) was the cap's, not the plan's


# ---------------------------------------------------------------- 6. --json everywhere, errors included


def test_bench_takes_json_before_its_subcommand(breakdown_json):
    assert "--json" in run_cli("bench", "--help").stdout
    proc = run_cli("bench", "--json", "breakdown", breakdown_json)
    assert proc.returncode == 0 and set(json.loads(proc.stdout)["breakdown"]) == {"full_drafter"}
    assert json_error(run_cli("bench", "--json")).startswith("the following arguments are required: BENCH")


@pytest.mark.parametrize("args, piece", [
    (("probe", "--platform", "bogus"), "unknown platform 'bogus' from --platform"),
    (("sizes", "--method", "eagle", "--num-spec", "0", "--max-num-seqs", "8"), "pass --num-spec 1 or more"),
    (("sizes", "--method", "eagle"), "the following arguments are required: --num-spec, --max-num-seqs"),
    (("caps", "--platform", "bogus"), "no attention capability rows for platform 'bogus'"),
    (("kernels", "--platform", "bogus"), "unknown platform 'bogus' for kernel substitutions"),
    (("kernels", "--only", "x"), "--only, --out, --cases, --target and --triton32-python go with --check-triton"),
    (("bench", "draft", "--hidden", "0"), "--hidden must be >= 1 (got 0)"),
    (("bench", "e2e", "--tokens", "0"), "--tokens must be >= 1 (got 0)"),
    (("bench", "breakdown", "/nonexistent.json"), "cannot read '/nonexistent.json'"),
    (("bench", "breakdown", "x.json", "--png", "/nonexistent/x.png"), "cannot use --png '/nonexistent/x.png'"),
])
def test_json_errors_are_one_json_object(args, piece):
    assert piece in json_error(run_cli(*args, "--json"))


# ---------------------------------------------------------------- 7. the install command the README gives


def test_probe_verify_without_vllm_names_the_readme_install_command(capsys, monkeypatch):
    """On a GPU host without vLLM (a stand-in port with graphs, the verifier's import blocked)."""
    from types import SimpleNamespace

    import portable_spec.kernels
    import portable_spec.ports
    import portable_spec.probe
    from portable_spec.cli import main

    install = "pip install -e '.[vllm]'"  # README.md's set-up on a GPU host
    assert install in (ROOT / "README.md").read_text()
    # The command imports these when it runs (the CLI does not pay torch's import before that).
    monkeypatch.setattr(portable_spec.ports, "select_platform",
                        lambda choice=None: SimpleNamespace(name="cuda", supports_graphs=True))
    monkeypatch.setattr(portable_spec.probe, "run_probe", lambda platform: {})
    monkeypatch.setattr(portable_spec.kernels, "substitutions_for", lambda name: [])
    monkeypatch.setitem(sys.modules, "portable_spec.vllm_adapter.tools.attention_verify", None)
    assert main(["probe", "--verify"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("portable-spec: error: probe --verify needs vLLM 0.26.0 (")
    assert err[0].endswith(f"install it: {install}")


# ---------------------------------------------------------------- 8. output cut short by its reader, options from the env

PIPED = [("caps", "--json"), ("kernels", "--json"), ("caps",), ("--help",),
         ("sizes", "--method", "eagle3", "--num-spec", "3", "--max-num-seqs", "64", "--platform", "musa", "--json")]


@pytest.mark.parametrize("args", PIPED, ids=[" ".join(a) for a in PIPED])
def test_a_reader_that_closes_the_pipe_ends_the_command_quietly(args):
    """``portable-spec caps --json | head``: the reader is gone before the command writes (its end of the pipe is
    closed before the command starts), so every write meets a closed pipe, deterministically."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    env = {k: v for k, v in os.environ.items() if k not in CLEAN_ENV}
    try:
        proc = subprocess.run([sys.executable, "-m", "portable_spec", *args], stdout=write_end,
                              stderr=subprocess.PIPE, text=True, env=env, timeout=300)
    finally:
        os.close(write_end)
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr[-2000:]
    # 141 (128 + SIGPIPE) as a shell reports for any tool so cut; argparse's --help swallows the error itself (0).
    assert proc.stderr == "" and proc.returncode == (0 if args == ("--help",) else 141), proc.returncode


@pytest.mark.parametrize("env_platform, expected", [("rocm", "rocm"), ("cuda", "cuda"), (None, "musa")])
def test_kernels_lists_the_platform_vllm_platform_names(env_platform, expected):
    env = {"VLLM_PLATFORM": env_platform} if env_platform else {}
    proc = run_cli("kernels", "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["platform"] == expected
    flag = run_cli("kernels", "--json", "--platform", "cuda", env={"VLLM_PLATFORM": "rocm"})
    assert json.loads(flag.stdout)["platform"] == "cuda"  # --platform beats VLLM_PLATFORM
    assert "default: $VLLM_PLATFORM, else musa" in " ".join(run_cli("kernels", "--help").stdout.split())


@pytest.mark.parametrize("value", ["abc", "-5", "nan"])
def test_a_bad_verify_jit_budget_is_one_line_naming_the_variable(value):
    message = one_line_error(run_cli("probe", "--verify", "--platform", "cpu",
                                     env={"PORTABLE_SPEC_VERIFY_JIT_BUDGET_S": value}))
    assert message == (f"PORTABLE_SPEC_VERIFY_JIT_BUDGET_S={value!r} is not a number of seconds >= 0: set it to "
                       "e.g. 150 (the default) or unset it")


# ---------------------------------------------------------------- empty platform, a cap torchada would ignore
@pytest.mark.parametrize("command", [("probe",), ("caps",), ("kernels",),
                                     ("sizes", "--method", "eagle", "--num-spec", "3", "--max-num-seqs", "8")])
def test_an_empty_platform_is_one_line_not_auto_detection(command):
    """``--platform ''`` and ``VLLM_PLATFORM=''`` each read as "not given" and auto-detected silently."""
    assert one_line_error(run_cli(*command, "--platform", "")) == (
        "--platform is set but empty: name one of cpu, cuda, musa, rocm, or leave it out (then $VLLM_PLATFORM, else "
        "auto-detection)")
    assert one_line_error(run_cli(*command, env={"VLLM_PLATFORM": ""})) == (
        "VLLM_PLATFORM is set but empty: name one of cpu, cuda, musa, rocm, or unset it (auto-detection on the CLI; "
        "vLLM's built-in platforms under vLLM)")


@pytest.mark.parametrize("value", ["-5", "0", "lots"])
def test_a_torchada_cap_torchada_would_ignore_is_one_line_not_1900(value):
    """torchada ignores such a value and caps at 1900; ``sizes`` planned 1900 without a word."""
    args = ("sizes", "--method", "eagle3", "--num-spec", "3", "--max-num-seqs", "64", "--platform", "musa")
    assert one_line_error(run_cli(*args, env={"TORCHADA_GRAPH_EXEC_CAP": value})) == (
        f"TORCHADA_GRAPH_EXEC_CAP={value!r} is not a positive integer (torchada ignores it and caps live graph "
        "executables at 1900): set a positive count, or unset it for the default")
    assert run_cli(*args, "--live-graph-limit", "40", env={"TORCHADA_GRAPH_EXEC_CAP": value}).returncode == 0
