"""The host facts a serving report records (``portable_spec_harness.host_facts``): the CPU model and signature read
from cpuinfo, two speed probes that measure this machine (not a made-up number; a probe that cannot run says why),
and the serve bench's report, table and pooled summary carrying them."""

from __future__ import annotations

import json

import pytest

from portable_spec_harness import host_facts
from portable_spec_harness.serve_bench import combine, driver, pairs
from portable_spec_harness.serve_bench.driver import Hooks, Settings
from soak_fake_server import CPU_TEST_HOST, fake_launcher
from shared_zoo import shared_zoo

X86 = ("processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 207\n"
       "model name\t: Intel(R) Xeon(R) Platinum 8580\nstepping\t: 2\ncpu MHz\t\t: 2000.0\ncache size\t: 307200 KB\n"
       "processor\t: 1\ncpu family\t: 6\nmodel\t\t: 143\nstepping\t: 8\n")
QUICK = dict(variants=("upstream_v1", "ours"), concurrency=(1,), rounds=1, input_lens=(16,), output_len=12,
             prompts_per_slot=1, min_run_s=0, boot_s=20, run_timeout_s=60, clock_prompts=1, profile_output_len=8,
             phase_clock=False)
ARM = "processor\t: 0\nBogoMIPS\t: 2000.00\nCPU part\t: 0xd4f\n\nHardware\t: NVIDIA Grace\n"


@pytest.mark.parametrize("text, model", [(X86, "Intel(R) Xeon(R) Platinum 8580"), (ARM, "NVIDIA Grace"),
                                         ("processor\t: 0\nmodel name\t:  \n", None)])
def test_the_cpu_model_is_read_from_cpuinfo(tmp_path, text, model):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(text)
    assert host_facts.cpu_model(cpuinfo) == model


def test_a_missing_cpuinfo_gives_no_model():
    assert host_facts.cpu_model(host_facts.Path("/nonexistent/cpuinfo")) is None
    assert host_facts.cpu_signature(host_facts.Path("/nonexistent/cpuinfo")) is None


@pytest.mark.parametrize("text, signature", [(X86, "family 6 model 207 stepping 2, cache 307200 KB"), (ARM, None),
                                             ("cpu family\t: 6\nmodel\t\t: 143\nstepping\t: 8\n",
                                              "family 6 model 143 stepping 8")])
def test_the_cpu_signature_is_the_first_cpus_family_model_and_stepping(tmp_path, text, signature):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(text)
    assert host_facts.cpu_signature(cpuinfo) == signature


def test_the_python_probe_times_the_loop_it_is_given():
    short, long_ = host_facts.python_loop_ms(20_000, 3), host_facts.python_loop_ms(400_000, 3)
    assert 0 < short < long_  # twenty times the work takes longer: the probe measures, it does not report a constant
    with pytest.raises(ValueError, match="at least 1"):
        host_facts.python_loop_ms(0)


def test_the_torch_probe_measures_in_a_child_and_says_why_when_it_cannot(monkeypatch):
    op_us, error = host_facts.torch_cpu_op_us()
    assert error is None and op_us is not None and 0 < op_us < 10_000
    monkeypatch.setattr(host_facts, "TORCH_PROBE", "raise SystemExit('no torch here')")
    assert host_facts.torch_cpu_op_us() == (None, "no torch here")
    monkeypatch.setattr(host_facts, "TORCH_PROBE", "print('not json')")
    op_us, error = host_facts.torch_cpu_op_us()
    assert op_us is None and error.startswith("unreadable probe output")


def test_host_facts_keep_a_failed_probe_as_none_with_its_reason(monkeypatch):
    monkeypatch.setattr(host_facts, "torch_cpu_op_us", lambda: (None, "ModuleNotFoundError: torch"))
    facts = host_facts.host_facts()
    assert facts["torch_cpu_op_us"] is None and facts["torch_cpu_op_error"] == "ModuleNotFoundError: torch"
    assert facts["python_loop_ms"] > 0 and facts["logical_cpus"] >= facts["usable_cpus"] >= 1
    assert "torch CPU op probe failed (ModuleNotFoundError: torch)" in host_facts.describe(facts)


def test_describe_names_the_model_cpus_load_and_probes():
    line = host_facts.describe(CPU_TEST_HOST)
    assert line == "host: cpu-test (family 6 model 207 stepping 2), 2 of 2 CPUs, load 0.5, 10.0 ms/Python loop, " \
        "2.00 us/torch CPU op"
    assert host_facts.describe(None) == "host: not recorded"


@pytest.fixture(scope="module")
def hosted_run(tmp_path_factory):
    pair = pairs.resolve("llama_eagle", None, None, shared_zoo(tmp_path_factory))
    out = tmp_path_factory.mktemp("serve_bench_host")
    asked: list[str] = []

    def host() -> dict:
        asked.append("host")
        return CPU_TEST_HOST

    hooks = Hooks(launch=fake_launcher(), device=lambda: {"name": "cpu-test", "free_bytes": None}, host=host,
                  say=lambda line: None)
    return driver.run_serve_bench(pair, Settings(**QUICK), out, hooks), out, asked


def test_a_serving_report_records_its_host_once_and_prints_it_under_the_title(hosted_run):
    result, out, asked = hosted_run
    assert asked == ["host"]
    assert json.loads((out / "serve_bench.json").read_text())["host"] == CPU_TEST_HOST
    lines = (out / "serve_bench.txt").read_text().splitlines()
    assert lines[1] == host_facts.describe(CPU_TEST_HOST)


def test_a_pooled_summary_names_each_calls_host_and_none_for_a_report_without_one(hosted_run):
    result, _, _ = hosted_run
    older = {key: value for key, value in result.items() if key != "host"}
    summary = combine.combine([result, older], ["call1", "call0"])
    (entry,) = [mode for modes in summary["pairs"].values() for mode in modes.values()]
    assert entry["hosts"] == {"call1": CPU_TEST_HOST, "call0": None}
