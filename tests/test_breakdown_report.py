"""The breakdown's report: the side-by-side table, the bar chart (in the bench's PNG and alone) and
``portable-spec bench breakdown FILE.json``, which re-reads committed results."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from profile_events import sample_breakdown

from portable_spec_harness.e2e.breakdown_report import breakdowns_of, render_table, write_png

ROOT = Path(__file__).resolve().parents[1]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def report() -> dict:
    rows = [{"variant": v, "breakdown": sample_breakdown(scale, "mrv2" if v == "mrv2" else "v1")}
            for v, scale in (("upstream_v1", 1.5), ("full_drafter", 1.0), ("mrv2", 0.8))]
    rows.append({"variant": "nospec"})  # not profiled: no column
    rows.append({"variant": "platform_only", "breakdown": {"error": "no step scope", "runner": "v1"}})
    return {"results": rows, "pair": "llama_eagle", "model_variant": "perfect", "k": 5, "device": "cpu",
            "vllm": "0.26.0", "concurrency": [1], "summary": {"output_tok_s": {}}, "tensor_parallel_size": 1}


def test_table_has_every_phase_per_variant_and_ours_minus_mrv2(report):
    text = render_table(breakdowns_of(report))
    lines = text.splitlines()
    assert lines[0].split()[-5:] == ["full_drafter", "mrv2", "full_drafter", "-", "mrv2"]
    assert "upstream_v1" in lines[0] and "nospec" not in text and "platform_only" not in text
    rows = {line[:34].strip(): line[34:] for line in lines[1:]}
    assert list(rows)[:8] == ["target input prep", "target forward", "rejection / verify", "drafter first pass",
                              "drafter chain steps", "output processing", "scheduler + engine",
                              "host waits for tokens"]
    # drafter chain steps: 200 us host, 90 us device per step at scale 1; 0.8x for MRV2; the difference column
    assert rows["drafter chain steps"].split() == ["0.300", "/", "0.135", "0.200", "/", "0.090", "0.160", "/",
                                                   "0.072", "0.040", "/", "0.018"]
    assert rows["steps"].split() == ["2", "2", "2"]
    assert rows["launches / step"].split() == ["5.00", "5.00", "5.00"]  # graph launches: 1 forward, 1 + 3 draft
    assert rows["unattributed"].split()[-3:] == ["0.020", "/", "0.000"]  # every kernel hangs on a phase
    assert rows["total"].split() == ["1.425", "/", "0.420", "0.950", "/", "0.280", "0.760", "/", "0.224", "0.190",
                                     "/", "0.056"]
    assert "scopes never seen (missing_scopes in the JSON): upstream_v1: 19 (gpu_model_runner: preprocess," in text


def test_table_without_mrv2_has_no_difference_column(report):
    only = {k: v for k, v in breakdowns_of(report).items() if k != "mrv2"}
    assert " - " not in render_table(only).splitlines()[0]
    assert render_table({}) == ""


def test_breakdowns_of_reads_rows_and_profiles_of_older_layouts():
    bd = sample_breakdown()
    found = breakdowns_of({"results": [{"variant": "a", "profile": {"breakdown": bd}}, {"variant": "b"}]})
    assert list(found) == ["a"] and found["a"] is bd


def test_bench_png_gets_the_bar_chart_and_the_text_report_the_table(report, tmp_path):
    pytest.importorskip("matplotlib")
    from PIL import Image

    from portable_spec_harness.bench_cli import render_e2e
    from portable_spec_harness.e2e.bench import plot

    plot(report, tmp_path / "with.png")
    plot({**report, "results": [{"variant": "mrv2"}]}, tmp_path / "without.png")
    with Image.open(tmp_path / "with.png") as a, Image.open(tmp_path / "without.png") as b:
        assert a.size[1] > 1.8 * b.size[1]  # a second row of axes
    assert render_e2e(report).endswith(render_table(breakdowns_of(report)))
    assert write_png(breakdowns_of(report), tmp_path / "alone.png", "t") == str(tmp_path / "alone.png")
    assert (tmp_path / "alone.png").read_bytes()[:8] == PNG_MAGIC


def cli(capsys, *argv: str) -> tuple[int, str, list[str]]:
    from portable_spec.cli import main

    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = exc.code
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, captured.out, captured.err.splitlines()


def test_cli_renders_a_committed_style_report_as_table_json_and_png(report, tmp_path, capsys):
    path = tmp_path / "bench_e2e.json"
    path.write_text(json.dumps(report))
    code, out, err = cli(capsys, "bench", "breakdown", str(path))
    assert (code, err) == (0, []) and out.rstrip("\n") == render_table(breakdowns_of(report))
    code, out, _ = cli(capsys, "bench", "breakdown", str(path), "--json")
    payload = json.loads(out)
    assert code == 0 and set(payload["breakdown"]) == {"upstream_v1", "full_drafter", "mrv2"}
    assert payload["breakdown"]["mrv2"]["phases"]["draft_chain"]["device_ms"] == 0.072
    pytest.importorskip("matplotlib")
    code, out, _ = cli(capsys, "bench", "breakdown", str(path), "--png", str(tmp_path / "b.png"))
    assert code == 0 and out.rstrip().endswith(f"wrote {tmp_path / 'b.png'}")
    assert (tmp_path / "b.png").read_bytes()[:8] == PNG_MAGIC


def test_cli_on_a_report_without_breakdown_or_no_report_is_one_line(tmp_path, capsys):
    old = ROOT / "bench/results/2026-11-23-h100-session4/bench_perfect_c1_c64/bench_e2e.json"
    code, _, err = cli(capsys, "bench", "breakdown", str(old))
    assert (code, err) == (2, [f"portable-spec: error: {old} has no per-step breakdown: re-run bench e2e with "
                                "--profile (reports before the breakdown existed have none)"])
    code, _, err = cli(capsys, "bench", "breakdown", str(tmp_path / "missing.json"))
    assert code == 2 and len(err) == 1 and "cannot read" in err[0] and "pass a bench_e2e.json" in err[0]
    (tmp_path / "list.json").write_text("[1, 2]")
    code, _, err = cli(capsys, "bench", "breakdown", str(tmp_path / "list.json"))
    assert code == 2 and "has no per-step breakdown" in err[0]
