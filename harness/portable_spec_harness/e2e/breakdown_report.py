"""The per-step breakdowns of a ``bench e2e`` report side by side: a text table (printed at the end of the bench and
by ``portable-spec bench breakdown FILE.json``) and a stacked bar chart (host and device ms per decode step, one
stack per phase), so committed results can be re-read without re-running anything."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from portable_spec_harness.e2e.configs import OURS
from portable_spec_harness.e2e.step_breakdown import PHASE_LABELS, PHASES, UNATTRIBUTED
from portable_spec_harness.e2e.step_attribution import GAP_NAMES
from portable_spec_harness.plotting import legend, save_png

REFERENCE = "mrv2"
WIDTH = 19


def breakdowns_of(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """variant -> breakdown, for every result row that has one without an error (rows of older reports kept it
    under ``profile``)."""
    found = {}
    for row in report.get("results", []):
        bd = row.get("breakdown") or (row.get("profile") or {}).get("breakdown")
        if bd and "phases" in bd:
            found[row["variant"]] = bd
    return found


def _cell(host: float, device: float) -> str:
    return f"{host:7.3f} / {device:7.3f}"


def _rows(bd: dict[str, Any]) -> list[tuple[str, float, float]]:
    rows = [(PHASE_LABELS[p], bd["phases"][p]["host_ms"], bd["phases"][p]["device_ms"]) for p in PHASES]
    rows.append((UNATTRIBUTED, bd[UNATTRIBUTED]["host_ms"], bd[UNATTRIBUTED]["device_ms"]))
    rows.append(("total", bd["host_ms"], bd["device_ms"]))
    return rows


def _grid(title: str, labels: list[str], table: dict[str, list[tuple[float, float]]]) -> list[str]:
    """Rows of ``a / b`` cells per variant, with ``ours - MRV2`` where the table has both."""
    variants = list(table)
    ours = next((v for v in OURS if v in table), None)
    diff = (ours, REFERENCE) if ours and REFERENCE in table else None
    head = f"{title:<34}" + "".join(f"{v:>{WIDTH}}" for v in variants)
    if diff:
        head += f"{diff[0] + ' - ' + diff[1]:>{WIDTH + 4}}"
    lines = [head]
    for i, label in enumerate(labels):
        line = f"{label:<34}" + "".join(f"{_cell(*table[v][i]):>{WIDTH}}" for v in variants)
        if diff:
            a, b = table[diff[0]][i], table[diff[1]][i]
            line += f"{_cell(a[0] - b[0], a[1] - b[1]):>{WIDTH + 4}}"
        lines.append(line)
    return lines


def render_table(breakdowns: dict[str, dict[str, Any]]) -> str:
    """ms per decode step, host / device, per phase and variant; with a difference column (ours - MRV2) when the
    report has both."""
    if not breakdowns:
        return ""
    rows = {v: _rows(bd) for v, bd in breakdowns.items()}
    labels = [label for label, _, _ in next(iter(rows.values()))]
    lines = _grid("ms per decode step, host / device", labels,
                  {v: [(host, device) for _, host, device in r] for v, r in rows.items()})
    for key, label in (("launches", "launches / step"), ("sync_ms", "host in CUDA syncs, ms / step")):
        lines.append(f"{label:<34}" + "".join(
            f"{sum(bd['phases'][p][key] for p in PHASES) + bd[UNATTRIBUTED][key]:>{WIDTH}.2f}"
            for bd in breakdowns.values()))
    lines.append(f"{'steps':<34}" + "".join(f"{bd['steps']:>{WIDTH}}" for bd in breakdowns.values()))
    if all(bd.get("device_gaps") for bd in breakdowns.values()):  # breakdowns written before the gaps have none
        for key, label in (("busy_ms", "device busy, ms / step"), ("span_ms", "device span, ms / step")):
            lines.append(f"{label:<34}" + "".join(f"{bd['device_gaps'][key]:>{WIDTH}.3f}"
                                                  for bd in breakdowns.values()))
        for name in GAP_NAMES:
            lines.append(f"{'idle gaps ' + name.replace('_', ' ') + ', ms (n)':<34}" + "".join(
                f"{bd['device_gaps']['gap_ms'][name]:>{WIDTH - 8}.3f} ({bd['device_gaps']['gaps'][name]:>5.1f})"
                for bd in breakdowns.values()))
    missing = {v: bd["missing_scopes"] for v, bd in breakdowns.items() if bd.get("missing_scopes")}
    if missing:
        lines.append("scopes never seen (missing_scopes in the JSON): " + "; ".join(
            f"{v}: {len(m)} ({', '.join(m[:3])}{', ...' if len(m) > 3 else ''})" for v, m in missing.items()))
    return "\n".join(lines)


def clocks_of(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """variant -> its phase clock (``phase_clock``: real host time, no profiler), for rows that have one."""
    return {row["variant"]: row["phase_clock"] for row in report.get("results", [])
            if (row.get("phase_clock") or {}).get("phases")}


def render_clock_table(clocks: dict[str, dict[str, Any]]) -> str:
    """ms per decode step, wall / off-CPU, per phase and variant, from the unprofiled pass; with ours - MRV2."""
    if not clocks:
        return ""

    def cells(clock: dict[str, Any]) -> list[tuple[float, float]]:
        out = [(clock["phases"][p]["wall_ms"], clock["phases"][p]["off_cpu_ms"]) for p in PHASES]
        return out + [(clock[UNATTRIBUTED]["wall_ms"], 0.0), (clock["step_wall_ms"], 0.0)]
    labels = [PHASE_LABELS[p] for p in PHASES] + [UNATTRIBUTED, "step (pass wall / steps)"]
    lines = _grid("ms per step, wall / off-CPU", labels, {v: cells(c) for v, c in clocks.items()})
    lines.append(f"{'steps':<34}" + "".join(f"{c['steps']:>{WIDTH}}" for c in clocks.values()))
    return "\n".join(lines)


def render_detail_table(clocks: dict[str, dict[str, Any]]) -> str:
    """ms per step (inclusive) / calls per step of each detail scope the phase clock timed, per variant ("-": that
    runner has no such call)."""
    names = sorted({name for clock in clocks.values() for name in clock.get("details") or {}})
    if not names:
        return ""
    width = max(len(n) for n in names) + 2
    lines = [f"{'ms per step (inclusive) / calls per step':<{width}}" + "".join(f"{v:>{WIDTH}}" for v in clocks)]
    for name in names:
        cells = []
        for clock in clocks.values():
            d = (clock.get("details") or {}).get(name)
            cells.append(f"{d['wall_ms']:7.3f} / {d['calls_per_step']:7.2f}" if d else "-")
        lines.append(f"{name:<{width}}" + "".join(f"{c:>{WIDTH}}" for c in cells))
    return "\n".join(lines)


def clock_section(clocks: dict[str, dict[str, Any]], concurrency: int | None = None) -> list[str]:
    """The phase-clock table under its heading, and its detail table, as lines to append to a report (none when
    there is no clock)."""
    table = render_clock_table(clocks)
    at = f" at concurrency {concurrency}" if concurrency else ""
    if not table:
        return []
    details = render_detail_table(clocks)
    return (["", f"phase clock{at} (unprofiled pass, real host time)", table]
            + (["", "where the phases' time goes (detail scopes, same pass)", details] if details else []))


def draw(ax: Any, breakdowns: dict[str, dict[str, Any]], concurrency: int = 1) -> None:
    """Two stacked bars per variant (host, device), one segment per phase, ms per decode step."""
    import matplotlib

    colours = matplotlib.colormaps["tab10"]
    segments = [*PHASES, UNATTRIBUTED]
    ticks, labels = [], []
    for i, (variant, bd) in enumerate(breakdowns.items()):
        for j, side in enumerate(("host", "device")):
            x, bottom = 3 * i + j, 0.0
            for k, seg in enumerate(segments):
                value = (bd["phases"][seg] if seg in bd["phases"] else bd[UNATTRIBUTED])[f"{side}_ms"]
                colour = "lightgrey" if seg == UNATTRIBUTED else colours(k)
                ax.bar(x, value, bottom=bottom, color=colour, edgecolor="white", linewidth=0.5,
                       label=(PHASE_LABELS.get(seg, seg) if i == 0 and j == 0 else None))
                bottom += value
            ticks.append(x)
            labels.append(f"{variant}\n{side}")
    ax.set_xticks(ticks, labels, fontsize=8)
    ax.set_ylabel("ms per decode step")
    ax.set_title(f"per-step breakdown at concurrency {concurrency} (torch profiler, vLLM's scopes + ours)",
                 fontsize=10)
    legend(ax, fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.grid(axis="y", alpha=0.3)


def write_png(breakdowns: dict[str, dict[str, Any]], path: str | Path, title: str = "") -> str | None:
    """The bar chart alone, as a PNG; None when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(max(8.0, 2.2 * len(breakdowns) + 4), 5))
    draw(ax, breakdowns)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    save_png(fig, path, dpi=110)
    plt.close(fig)
    return str(path)
