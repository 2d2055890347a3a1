"""The sampling sweep's verdict: ours must serve every kind a baseline serves and compile nothing after boot; a kind
refused everywhere is vLLM's limit, not ours; a sweep that served nothing of ours fails."""

import pytest

from portable_spec_harness import jit_judge
from portable_spec_harness.serve_bench import one_server, sampling_sweep as sweep

KINDS = ["greedy", "top_k", "min_p"]
EXPECTED = len(sweep.batches(KINDS)) + 1


def _result(variant, refuse=(), jit=(), drop=0, monitor=True):
    names = [name for name, _ in sweep.batches(KINDS)]
    names = names[:len(names) - drop] + [sweep.ALL]
    batches = {}
    for name in names:
        kinds = name.split("+") if name != sweep.ALL else [k for k in KINDS if k not in refuse]
        batches[name] = [{"kind": k, **({"status": 400, "error": "refused"} if k in refuse else
                                        {"status": 200, "tokens": 24})} for k in kinds]
    return {"variant": variant, "batches": batches, "jit_after_boot": list(jit), "jit_monitor_active": monitor}


def test_every_kind_is_sent_alone_and_beside_a_greedy_request():
    assert sweep.batches(KINDS) == [("greedy", ["greedy"]), ("top_k", ["top_k"]), ("min_p", ["min_p"]),
                                    ("top_k+greedy", ["top_k", "greedy"]), ("min_p+greedy", ["min_p", "greedy"])]


def test_a_clean_sweep_of_ours_passes_and_counts_the_requests_served():
    compared, found = sweep.problems([_result("ours_mrv2"), _result("mrv2", jit=["Triton: _topk_topp_kernel"])],
                                     EXPECTED)
    assert found == [] and compared == 3 + 4 + 3  # singles, pairs, all: the baseline's compiles are its own


def test_a_kind_refused_by_every_variant_is_vllms_limit():
    results = [_result("ours_mrv2", refuse=["min_p"]), _result("mrv2", refuse=["min_p"])]
    compared, found = sweep.problems(results, EXPECTED)
    assert found == [] and compared == 2 + 2 + 2
    assert sweep.refused(results) == ["min_p", "min_p+greedy"]


@pytest.mark.parametrize("ours,phrase", [
    (_result("ours_mrv2", jit=["Triton kernel JIT compilation: _temperature_kernel"]), "JIT compile(s) after boot"),
    (_result("ours_mrv2", refuse=["top_k"]), "failed that a baseline served: top_k, top_k+greedy"),
    (_result("ours", drop=1), "5 of 6 batches sent"),
    (_result("ours_mrv2", monitor=False), "JIT monitor never logged"),
    (_result("ours@async", monitor=False), "ours@async: vLLM's JIT monitor never logged"),
    ({k: v for k, v in _result("ours").items() if k != "jit_monitor_active"}, "ours: vLLM's JIT monitor not recorded"),
])
def test_what_the_sweep_guards_fails_it(ours, phrase):
    compared, found = sweep.problems([ours, _result("mrv2")], EXPECTED)
    assert any(phrase in line for line in found), found


def test_a_failure_with_no_baseline_run_still_fails():
    compared, found = sweep.problems([_result("ours", refuse=["top_k"])], EXPECTED)
    assert any("no baseline was run" in line for line in found), found


def test_a_sweep_that_served_nothing_of_ours_fails():
    compared, found = sweep.problems([_result("mrv2")], EXPECTED)
    assert compared == 0 and found == ["no request of ours, ours_mrv2 served"]
    compared, found = sweep.problems([{"variant": "ours", "boot": {"ready": False}}], EXPECTED)
    assert compared == 0 and "0 of 6 batches sent" in found[0]


def test_an_unknown_kind_is_a_one_line_error(capsys):
    with pytest.raises(SystemExit) as stop:
        sweep.main(["/tmp/unused-sweep-out", "--kinds", "greedy,topk"])
    assert stop.value.code == 2
    assert "unknown kind(s) ['topk']: choose from greedy," in capsys.readouterr().err


def test_the_kinds_reach_what_the_sampler_specializes_on():
    """Top-k alone, min-p, penalties, logprobs counts of different kernel widths, seeded and unseeded: the table
    must keep them, or the sweep stops finding what the benchmark's one profile misses."""
    table = sweep.KINDS
    assert any("top_k" in k and "top_p" not in k for k in table.values())
    assert any("min_p" in k for k in table.values())
    assert any("repetition_penalty" in k for k in table.values())
    assert {k.get("logprobs") for k in table.values()} >= {1, 5, 20}
    assert any("seed" in k for k in table.values()) and any(k.get("temperature") and "seed" not in k
                                                            for k in table.values())


def test_a_probe_server_records_what_the_judge_read_from_its_log(tmp_path, monkeypatch):
    """``one_server.booted`` stops the server and records ``jit_judge.read``'s one read of its log, under the keys
    the committed sweeps and probes carry."""
    import asyncio

    from portable_spec_harness import vllm_serve
    from soak_fake_server import COMPILE_LINE, MONITOR_LINE

    class Stopped:
        def stop(self):
            return 0

    def launch(server, port, log):
        log.write_text(MONITOR_LINE + "\n" + COMPILE_LINE.format(kernel="_temperature_kernel") + "\n")
        return Stopped()

    async def not_ready(*args, **kwargs):
        return {"ready": False, "error": "test"}
    monkeypatch.setattr(one_server, "launch", launch)
    monkeypatch.setattr(vllm_serve, "wait_healthy", not_ready)

    async def probe():
        async with one_server.booted(type("S", (), {"variant": "ours@async"})(), tmp_path, 1) as (port, result):
            assert port is None
        return result
    result = asyncio.run(probe())
    assert result == {"variant": "ours@async", "boot": {"ready": False, "error": "test"},
                      "jit_after_boot": ["Triton kernel JIT compilation: _temperature_kernel"],
                      "jit_monitor_active": True}
    assert jit_judge.problems("ours@async", jit_judge.recorded(result)) == [
        "ours@async: 1 kernel JIT compile(s) after boot: Triton kernel JIT compilation: _temperature_kernel"]


COMMITTED_SWEEPS = {
    # session 24, vLLM 0.33.0: Model Runner V2 on both servers (ours_mrv2 = MRV2 on our platform)
    "2026-11-29-h200-session24/sweep033": (("ours_mrv2", "mrv2"), True, 2),
    # session 25, vLLM 0.26.0: the V1 runner on both servers (ours = our drafter on V1, upstream_v1 = vLLM's)
    "2026-11-29-h200-session25/soaksweep026": (("ours", "upstream_v1"), False, 6),
}
"""Committed H200 sweeps: (the variants in order, whether both ran Model Runner V2, how many kernels the baseline
compiled after boot)."""


@pytest.mark.parametrize("folder", sorted(COMMITTED_SWEEPS))
def test_a_committed_h200_sweep_reads_as_its_results_say(folder):
    """Each committed sweep: ours served every kind vLLM serves and compiled nothing after boot, with vLLM's monitor
    armed, while the baseline of the same call compiled kernels after boot; planting one of the baseline's compiles
    on ours, or disarming ours' monitor, makes the same data fail."""
    import json
    from pathlib import Path

    names, mrv2, baseline_compiles = COMMITTED_SWEEPS[folder]
    path = Path(__file__).resolve().parents[1] / "bench/results" / folder / "sampling-sweep/sampling_sweep.json"
    report = json.loads(path.read_text())
    variants = report["variants"]
    assert [r["variant"] for r in variants] == list(names)
    assert [r["facts"]["use_v2_model_runner"] for r in variants] == [mrv2, mrv2]
    kinds = report["settings"]["kinds"]  # session 24 wrote the --kinds text, later sweeps the parsed list
    expected = len(sweep.batches(kinds.split(",") if isinstance(kinds, str) else kinds)) + 1
    assert sweep.problems(variants, expected) == (54, [])
    assert sweep.refused(variants) == ["logit_bias", "logit_bias+greedy", "min_p", "min_p+greedy"]
    baseline = variants[1]["jit_after_boot"]
    assert len(baseline) == baseline_compiles and variants[1]["jit_monitor_active"] and variants[0]["jit_monitor_active"]
    planted = [{**variants[0], "jit_after_boot": baseline[:1]}, variants[1]]
    assert sweep.problems(planted, expected)[1] == [f"{names[0]}: 1 kernel JIT compile(s) after boot: {baseline[0]}"]
    unarmed = [{**variants[0], "jit_monitor_active": False}, variants[1]]
    assert sweep.problems(unarmed, expected)[1] == [
        f"{names[0]}: vLLM's JIT monitor never logged 'Kernel JIT monitor activated': zero compile lines prove nothing"]


def test_a_scheduling_suffix_keeps_a_variant_ours():
    compared, found = sweep.problems([_result("ours@async", jit=["Triton: _temperature_kernel"]), _result("mrv2")],
                                     EXPECTED)
    assert compared == 10 and any("ours@async: 1 kernel JIT compile(s)" in line for line in found), found
