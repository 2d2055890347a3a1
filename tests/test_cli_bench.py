"""``portable-spec bench`` on a host without a GPU, through the real console entry (subprocess) and ``cli.main``
(in-process): every bad input and every missing host requirement is one line naming the fix, exit code 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from portable_spec.errors import PortableSpecError
from portable_spec.ports.cuda_port import CudaPort


def run_cli(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "VLLM_PLATFORM"}
    return subprocess.run([sys.executable, "-m", "portable_spec", *args], capture_output=True, text=True, env=env,
                          timeout=120)


def test_bench_draft_on_cpu_is_a_one_line_error_naming_a_gpu_platform():
    message = ("bench draft needs device graphs; platform 'cpu' has none: run it on a GPU host (--platform cuda, rocm "
               "or musa)")
    proc = run_cli("bench", "draft", "--platform", "cpu")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.splitlines() == [f"portable-spec: error: {message}"]
    proc = run_cli("bench", "draft", "--platform", "cpu", "--json")
    assert proc.returncode == 2 and proc.stderr == ""
    assert json.loads(proc.stdout) == {"error": message, "exit": 2}


def test_bench_draft_rejects_bad_settings_before_touching_a_device():
    proc = run_cli("bench", "draft", "--platform", "cpu", "--batch-sizes", "0,4")
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == ["portable-spec: error: batch sizes must be >= 1 (got [0, 4]): pass "
                                        "--batch-sizes 1,4,16,64"]
    proc = run_cli("bench", "draft", "--platform", "cpu", "--context-len", "1020")
    assert proc.returncode == 2 and "lower --context-len" in proc.stderr and len(proc.stderr.splitlines()) == 1


def test_bench_needs_a_sub_command_and_lists_draft():
    proc = run_cli("bench")
    assert proc.returncode == 2 and "BENCH" in proc.stderr
    proc = run_cli("bench", "--help")
    assert proc.returncode == 0 and "draft" in proc.stdout


# In-process through ``portable_spec.cli.main``: every bad input and the CPU-only host end in exit code 2 and one
# line on stderr, before any model is built or engine booted.

def cli(capsys, *argv: str) -> tuple[int, list[str]]:
    from portable_spec.cli import main

    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, captured.err.splitlines()


@pytest.fixture
def stop_at_host_check(monkeypatch):
    """Bad input must be rejected before the host check (so before any device, model or engine work): on any host,
    getting that far reads as a different error."""
    import portable_spec_harness.bench_cli as command

    def reached(*args, **kwargs):
        raise PortableSpecError("host check reached")

    monkeypatch.setattr(command, "e2e_host_problem", lambda tp=1: "host check reached")
    monkeypatch.setattr(command, "select_platform", reached)


@pytest.mark.parametrize("args, expected", [
    (("--concurrency", "0"), "--concurrency must be >= 1 (got [0]): pass --concurrency 1,4,16,64"),
    (("--concurrency", "4,-1"), "--concurrency must be >= 1 (got [4, -1]): pass --concurrency 1,4,16,64"),
    (("--tokens", "0"), "--tokens must be >= 1 (got 0): pass --tokens 1 or more"),
    (("--repeats", "0"), "--repeats must be >= 1 (got 0): pass --repeats 1 or more"),
    (("--timeout", "-5"), "--timeout must be >= 1 (got -5): pass --timeout 1 or more (seconds)"),
    (("--num-spec", "0"), "--num-spec must be >= 1 (got 0): pass --num-spec 1 or more"),
    (("--variants", ","), "unknown engine variant(s) (none given); pass --variants with names from "
                          "builtin_mrv2, builtin_mrv2_triton, cuda_triton_full_drafter, eager_drafter, full_drafter, "
                          "full_drafter_unfused, mrv2, musa_sim_budget, musa_sim_full_drafter, musa_sim_mrv2, "
                          "musa_sim_mrv2_budget, nospec, ours_platform_mrv2, platform_only, upstream_v1"),
    (("--tp", "0"), "--tp must be >= 1 (got 0): pass --tp 1 or 2"),
    (("--profile-concurrency", "0"), "--profile-concurrency must be >= 1 (got 0): pass --profile-concurrency 1 or "
                                     "more"),
    (("--concurrency", "1,4", "--profile-concurrency", "16"), "--profile-concurrency 16 exceeds the largest "
                                                              "--concurrency 4 (the engines' max_num_seqs): pass one "
                                                              "of 1,4"),
    (("--concurrency", ","), "argument --concurrency: expected at least one integer "
                             "(see 'portable-spec bench e2e --help')"),
    (("--tokens", "many"), "argument --tokens: invalid int value: 'many' (see 'portable-spec bench e2e --help')"),
])
def test_bench_e2e_bad_input_is_one_line_exit_2(capsys, stop_at_host_check, args, expected):
    assert cli(capsys, "bench", "e2e", *args) == (2, [f"portable-spec: error: {expected}"])


@pytest.mark.parametrize("flag, value, minimum", [
    ("--hidden", "0", 1), ("--vocab", "-1", 1), ("--layers", "0", 1), ("--num-spec", "0", 1),
    ("--context-len", "0", 1), ("--max-model-len", "0", 1), ("--iters", "0", 1), ("--warmup", "-1", 0),
])
def test_bench_draft_bad_numbers_are_one_line_exit_2(capsys, stop_at_host_check, flag, value, minimum):
    code, err = cli(capsys, "bench", "draft", flag, value)
    assert (code, err) == (2, [f"portable-spec: error: {flag} must be >= {minimum} (got {value}): pass {flag} "
                               f"{minimum} or more"])


@pytest.mark.skipif(CudaPort.is_active(), reason="a CUDA device is visible")
def test_bench_e2e_on_a_cpu_only_host_is_one_line_exit_2(capsys, tmp_path):
    out = tmp_path / "never-created"
    code, err = cli(capsys, "bench", "e2e", "--out", str(out))
    assert (code, err) == (2, ["portable-spec: error: bench e2e needs an NVIDIA GPU and vLLM 0.26.0; no CUDA device "
                               "is visible here: run it on a GPU host (check the driver and CUDA_VISIBLE_DEVICES)"])
    assert not out.exists()


def test_bench_e2e_with_fewer_gpus_than_tp_is_one_line_exit_2(capsys, monkeypatch):
    import portable_spec.ports.fork_safe as fork_safe

    monkeypatch.setattr(CudaPort, "is_active", classmethod(lambda cls: True))
    monkeypatch.setattr(fork_safe, "visible_device_count", lambda: 1)
    assert cli(capsys, "bench", "e2e", "--tp", "2") == (2, ["portable-spec: error: --tp 2 needs 2 GPUs but 1 are "
                                                            "visible: lower --tp or run on a host with more GPUs"])


def test_bench_e2e_without_vllm_is_one_line_exit_2(capsys, monkeypatch):
    import portable_spec.ports.fork_safe as fork_safe

    monkeypatch.setattr(CudaPort, "is_active", classmethod(lambda cls: True))
    monkeypatch.setattr(fork_safe, "visible_device_count", lambda: 1)
    monkeypatch.setitem(sys.modules, "vllm", None)  # importlib.util.find_spec("vllm") is None, as without vLLM
    assert cli(capsys, "bench", "e2e") == (2, ["portable-spec: error: bench e2e needs vLLM 0.26.0, which is not "
                                               "installed: pip install -e '.[vllm]'"])


def test_out_dir_that_cannot_be_made_is_one_line(tmp_path):
    from portable_spec.commands._common import ensure_out_dir

    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(PortableSpecError, match=r"^cannot use --out .*: pass a writable directory \(created if "
                                                r"missing\)$"):
        ensure_out_dir(str(blocker / "sub"))
    ensure_out_dir(str(tmp_path / "a" / "b"))
    assert (tmp_path / "a" / "b").is_dir()


def test_bench_e2e_concurrency_0_through_the_console_entry(tmp_path):
    proc = run_cli("bench", "e2e", "--concurrency", "0", "--out", str(tmp_path / "out"))
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.splitlines() == ["portable-spec: error: --concurrency must be >= 1 (got [0]): pass "
                                        "--concurrency 1,4,16,64"]


@pytest.mark.parametrize("args, expected", [
    (("--target", "/nonexistent", "--draft", "/nonexistent", "--method", "eagle"),
     "--target '/nonexistent' is not a model directory (no config.json): pass a local checkpoint directory"),
    (("--target", "{t}", "--method", "eagle"), "--method eagle needs --draft DIR (only mtp drafts from the target "
                                                "itself)"),
    (("--target", "{t}", "--draft", "{t}", "--method", "medusa"),
     "--method 'medusa' is not one our drafter covers: pass one of eagle, eagle3, mtp, dflash, draft_model"),
    (("--draft", "{t}"), "your own models need --target DIR and --method M (and --draft DIR except for mtp)"),
])
def test_bench_e2e_own_checkpoints_are_checked_in_one_line(capsys, monkeypatch, tmp_path, args, expected):
    import portable_spec_harness.bench_cli as command

    (tmp_path / "config.json").write_text("{}")
    monkeypatch.setattr(command, "e2e_host_problem", lambda tp=1: None)  # as on a GPU host with vLLM
    argv = [a.replace("{t}", str(tmp_path)) for a in args]
    assert cli(capsys, "bench", "e2e", "--out", str(tmp_path / "out"), *argv) == (2, [f"portable-spec: error: {expected}"])


def test_own_checkpoints_name_the_pair_the_report_ran(tmp_path):
    from portable_spec_harness.e2e.bench import checkpoint_pair, pair_label

    for name in ("tgt", "dft"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text("{}")
    pair = checkpoint_pair(str(tmp_path / "tgt"), str(tmp_path / "dft"), "eagle3")
    assert pair["name"] == "tgt + dft (eagle3)" and pair["draft"] == str(tmp_path / "dft")
    assert checkpoint_pair(str(tmp_path / "tgt"), None, "mtp")["draft"] == str(tmp_path / "tgt")
    assert pair_label({"pair": pair["name"], "model_variant": None}) == "tgt + dft (eagle3)"
    assert pair_label({"pair": "llama_eagle", "model_variant": "perfect"}) == "llama_eagle (perfect)"


def test_without_the_harness_bench_says_in_one_line_how_to_get_it(monkeypatch, capsys):
    """The product ships without the harness: ``portable-spec bench`` finds no ``portable_spec.commands:bench`` entry
    point, prints one line naming the install, and exits 2 (text and ``--json``); with the harness it forwards."""
    import portable_spec.commands.bench as bench_command
    from portable_spec.cli import main

    found = [ep for ep in bench_command.entry_points(group=bench_command.COMMAND_GROUP) if ep.name == "bench"]
    assert [ep.value for ep in found] == ["portable_spec_harness.bench_cli:main"]  # the harness declares it
    monkeypatch.setattr(bench_command, "entry_points", lambda group: [])
    assert main(["bench", "pool", "a.json", "--out", "x"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines() == [f"portable-spec: error: {bench_command.HARNESS_MISSING}"]
    assert "pip install --no-deps -e harness/" in err
    assert main(["bench", "--json", "breakdown", "r.json"]) == 2
    assert json.loads(capsys.readouterr().out) == {"error": bench_command.HARNESS_MISSING, "exit": 2}
