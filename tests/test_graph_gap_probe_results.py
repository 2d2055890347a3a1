"""Session 30's graph-gap probe on the H200, as its README states it, read back from the committed JSON: the table row
for row, the per-gap figure, and that the graph's gaps are all short and the eager ones not. A changed number fails."""

from __future__ import annotations

from pathlib import Path

from results_readback import load, table

RUN = Path(__file__).resolve().parents[1] / "bench" / "results" / "2026-11-29-h200-session30-graph-gaps"
PROBES = ("probe-k1000", "probe-k100", "probe-k1000-big")


def readme() -> str:
    return (RUN / "README.md").read_text()


def test_the_table_is_the_probes_json_row_for_row():
    rows = {}
    lines = [line for line in readme().splitlines() if line.startswith("| probe-")]
    for line in lines:
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0], cells[1]] = cells[2:]
    assert len(rows) == 6 and table(readme(), "| probe | mode |")
    for probe in PROBES:
        result = load(RUN / probe / "graph_gap_probe.json")
        assert result["device"] == "NVIDIA H200" and result["steps"] == 20
        for mode, r in result["modes"].items():
            g = r["device_gaps"]
            expect = [f"{r['kernels_per_step']:.0f}", f"{r['launches_per_step']:.0f}", str(g["busy_ms"]),
                      str(g["span_ms"]), *(f"{g['gap_ms'][k]} ({g['gaps'][k]})" for k in ("under_5us", "5_to_100us",
                                                                                             "100us_up"))]
            assert rows[probe, mode] == expect, (probe, mode)
            assert r["unlinked_ms"] == 0.0 and r["kernels_per_step"] == result["kernels"]


def test_a_graphs_gaps_are_all_short_and_an_eager_steps_are_not():
    text = " ".join(readme().split())
    for probe in PROBES:
        modes = load(RUN / probe / "graph_gap_probe.json")["modes"]
        graph, eager = modes["graph"]["device_gaps"], modes["eager"]["device_gaps"]
        assert graph["gaps"]["5_to_100us"] == graph["gaps"]["100us_up"] == 0 and graph["gaps"]["under_5us"] > 90
        assert eager["gaps"]["under_5us"] == 0 and eager["gaps"]["5_to_100us"] > 90
        per_gap_us = 1000 * graph["gap_ms"]["under_5us"] / graph["gaps"]["under_5us"]
        assert per_gap_us < 0.1, probe
    k1000 = load(RUN / "probe-k1000" / "graph_gap_probe.json")["modes"]["graph"]["device_gaps"]
    assert f"({k1000['gap_ms']['under_5us']} ms over 999 gaps with ~1 µs kernels" in text
