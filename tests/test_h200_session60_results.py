"""Session 60's results README (one H200, vLLM 0.33.0) read back from its JSON and logs: the first-batches probe on
a boot that compiled the model, with the engine serving in its warm-ups' Triton folder (no pause where session 59
paused), the Triton folder probe's two host runs judged again by its current judges, the EAGLE-1 dummy pair's sampled
4096-token cells pooled over sessions 57, 59 and 60, and the main README's sentence on both."""

from __future__ import annotations

import gzip
from pathlib import Path

from ci_scripts import load_ci_script
from results_readback import (ResultsFolder, first_batches_report, jit_compiles, load, mrv2_pooled_rows, wave_cells,
                              wave_pairs)

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "bench" / "results" / "2026-12-03-h200-session60"
S59 = ROOT / "bench" / "results" / "2026-12-03-h200-session59"
SAMPLED_4K = ResultsFolder(RUN, RUN / "e1m4096s")
FB = RUN / "first-batches" / "call1"
PROBE = RUN / "triton-probe"


def folded(run: Path = RUN) -> str:
    return " ".join((run / "README.md").read_text().split())


def test_a_compiling_boot_after_the_fix_shows_no_pause_and_no_compile_after_boot():
    report = first_batches_report(FB)
    (variant,) = report["variants"]
    assert variant["variant"] == "ours_mrv2" and variant["facts"]["runner_kind"] == "mrv2"
    assert report["compared_waves"] == 12 and report["problems"] == []
    assert variant["pauses"] == [] and variant["jit_after_boot"] == [] and variant["jit_monitor_active"]
    log = gzip.decompress((FB / "first-batches" / "server_ours_mrv2.log.gz").read_bytes()).decode()
    assert log.count("Compiling a graph") == 2 and log.count("saved AOT compiled function") == 2
    now = wave_pairs(variant)
    before = wave_pairs(first_batches_report(S59 / "first-batches" / "call1")["variants"][0])
    assert sorted(now) == sorted(before) == [1, 2, 4, 8, 16, 32]
    readme = (RUN / "README.md").read_text()
    assert f"| session 59, before the fix | {wave_cells(before, (2, 32))} |" in readme
    assert f"| this session, after it | {wave_cells(now)} |" in readme
    assert "first-batches: exit 0" in (FB / "console.log").read_text()


def test_the_first_lease_ran_the_fixs_tree_though_its_metadata_reads_the_sessions_start():
    for call in (FB, RUN / "e1m4096s" / "call1"):
        lane = load(call / "cuda_lane.json")
        assert (lane["commit"][:7], lane["tree_changes"], lane["vllm"]) == ("8dd3595", 13, "0.33.0"), call
    first = load(PROBE / "call1" / "triton_folder_probe.json")
    assert set(first["scopes"]) == {"unset", "restored", "named"}  # the probe of 491d1d7, not of 8dd3595
    assert "reads `commit` `8dd3595` with `tree_changes` 13" in folded()


def test_the_probes_runs_judge_again_as_recorded_the_second_reproducing_the_mechanism():
    probe = load_ci_script("ci/gpu/triton_folder_probe.py")
    first, second = (load(PROBE / call / "triton_folder_probe.json") for call in ("call1", "call2"))
    for report in (first, second):
        assert probe.verdict(report) == report["verdict"]
        assert report["verdict"]["named_finds_both_on_disk"] is True
        assert probe.serving_verdict(report) == report["serving_verdict"]
    assert first["serving_verdict"]["named_serves_without_c_builds"] is False
    assert set(first["serving_verdict"]["c_builds_while_serving"].values()) == {0}
    counts = second["serving_verdict"]["c_builds_while_serving"]
    assert counts == {"unset/compiling": 1, "unset/loading": 0, "restored/compiling": 1, "restored/loading": 0,
                      "named/compiling": 0, "named/loading": 0}
    assert second["serving_verdict"]["named_serves_without_c_builds"] is True
    assert "probe rc=0" in (PROBE / "call2" / "triton_folder_probe.log").read_text()
    assert "the `restored` scope (the code before `491d1d7`) and of the `unset` scope each ran the C compiler once" \
        in folded()


def test_the_4096_token_sampled_pool_holds_three_rounds_and_its_rows_are_the_readmes():
    summary = SAMPLED_4K.summary()
    entry = summary["pairs"]["llama8b_eagle"]["dummy"]
    assert [Path(s).parts[-4] for s in entry["sources"]] == [
        "2026-12-03-h200-session57", "2026-12-03-h200-session59", "2026-12-03-h200-session60"]
    assert entry["vllm"] == ["0.33.0"] and summary["problems"] == []
    ratios = entry["ours_mrv2_over_mrv2"]
    rows = mrv2_pooled_rows(entry, ratios)
    assert len(rows) == 4 and all(row.endswith("| 3 |") for row in rows)
    readme = (RUN / "README.md").read_text()
    for row in rows:
        assert row in readme, row
    assert min(r["output_tok_s"] for r in ratios.values()) >= 0.97
    report = SAMPLED_4K.call_report("call1")
    assert (report["rounds_done"], report["status"], report["settings"]["concurrency"]) == (3, "complete", [8, 32])


def test_vllms_platform_compiled_at_its_first_sampled_request_and_ours_did_not():
    logs = RUN / "e1m4096s" / "call1" / "serve-bench"
    assert jit_compiles(logs / "server_mrv2.log.gz") == ["_gumbel_sample_kernel"]
    assert jit_compiles(logs / "server_ours_mrv2.log.gz") == []
    assert "warned once on vLLM's platform (`_gumbel_sample_kernel`" in folded()


def test_the_main_readme_gives_the_pooled_sampled_cells_and_the_pause_fixed():
    four = SAMPLED_4K.summary()["pairs"]["llama8b_eagle"]["dummy"]["ours_mrv2_over_mrv2"]
    one = ResultsFolder(S59, S59 / "e1m1024s").summary()["pairs"]["llama8b_eagle"]["dummy"]["ours_mrv2_over_mrv2"]

    def ratios(pool: dict, cs: tuple[int, ...], length: int) -> str:
        return " / ".join(f"{pool[f'in{length}/sampled/c{c}']['output_tok_s']:.3f}" for c in cs)

    text = " ".join((ROOT / "README.md").read_text().split())
    assert (f"its sampled cells at 1024 in, c = 1 / 2, give {ratios(one, (1, 2), 1024)} and at 4096 in, c = 1 / 2 / 8 "
            f"/ 32, {ratios(four, (1, 2, 8, 32), 4096)}, over 3 rounds") in text
    assert "it now serves in the warm-ups' folder, and a compiling boot's first batches of 1 to 32 show no pause" in text
