"""The serving benchmark's report: medians and ratios from the runs, the phase clock's host/device split at
concurrency 1, a console table and a PNG. ``status`` is ``complete`` only when every cell and ratio has numbers,
every asked round ran and every phase reading came back; anything else is ``incomplete`` with the reasons listed
(a benchmark does not pass or fail on speed: no number here is compared with a target)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from portable_spec_harness.e2e.step_breakdown import PHASES
from portable_spec_harness.serve_bench import stats
from portable_spec_harness.serve_bench.plan import RATIO_BASES, TARGET_LINES
from portable_spec_harness.plotting import legend

OURS = "ours"


def split(clock: dict[str, Any] | None, profile: dict[str, Any] | None) -> dict[str, Any]:
    """What share of a real step (the phase clock's, unprofiled) the GPU is busy (the profiled pass's kernels,
    copies and memsets per step); the rest is host time the GPU waits through: launch overhead and the host's own
    work. Phase by phase: host wall (clock) next to device time (profile)."""
    if not clock or "error" in clock or not profile or "error" in profile:
        why = (clock or {}).get("error") or (profile or {}).get("error") or "no reading"
        return {"error": f"no split: {why}"}
    step, device = clock["step_wall_ms"], profile["device_ms"]
    if not step > 0:
        return {"error": f"no split: step wall {step!r} ms"}
    return {"step_wall_ms": step, "device_busy_ms": device, "host_only_ms": round(max(step - device, 0.0), 4),
            "device_busy_share": round(device / step, 4), "gpu_waits_share": round(max(1 - device / step, 0.0), 4),
            "launches_per_step": round(sum(profile["phases"][p]["launches"] for p in PHASES)
                                       + profile["unattributed"]["launches"], 2),
            "phases_ms": {p: {"host_wall": clock["phases"][p]["wall_ms"], "device": profile["phases"][p]["device_ms"]}
                          for p in PHASES},
            "note": "step_wall_ms: unprofiled pass, engine busy time per model step; device_busy_ms: profiled pass"}


def identity_problems(variant: str, facts: list[dict[str, Any]]) -> list[str]:
    """Whether a server ran what its label says, from the probe's facts: ours our platform and drafter with graph
    replays during the runs, upstream V1 vLLM's platform and drafter on the V1 runner, MRV2 vLLM's platform and the V2
    runner. A mislabelled number is worse than none."""
    readings = [f for f in facts if "error" not in f and f.get("runner")]
    if not readings:
        return [f"{variant}: no facts from its server's probe"]
    first, last = readings[0], readings[-1]
    drafter, v2 = str(first.get("drafter")), first.get("use_v2_model_runner")
    platform = first.get("platform")
    if platform is not None and str(platform).startswith("portable_spec.") != (variant == OURS):
        return [f"{variant}: ran on platform {platform}"]
    if variant == OURS:
        replays = sum((last.get("replays") or {}).values()) - sum((first.get("replays") or {}).values())
        if not drafter.startswith("portable_spec.") or v2:
            return [f"{variant}: ran drafter {drafter} (V2 runner: {v2}), not ours on the V1 runner"]
        if len(readings) > 1 and replays <= 0:
            return [f"{variant}: our drafter's graphs did not replay during the runs"]
    elif variant == "upstream_v1" and (drafter.startswith("portable_spec.") or v2):
        return [f"{variant}: ran drafter {drafter} (V2 runner: {v2}), not vLLM's on the V1 runner"]
    elif variant == "mrv2" and not v2:
        return [f"{variant}: its server ran the V1 runner"]
    return []


def assemble(record: dict[str, Any], variants: list[str], concurrency: list[int]) -> dict[str, Any]:
    """Add cells, ratios, splits, status and problems to the run's ``record`` (returned)."""
    problems = list(record.get("problems", []))
    for variant in variants:
        problems += identity_problems(variant, (record["variants"].get(variant) or {}).get("facts", []))
    table = stats.cells(record["runs"], variants, concurrency)
    record["cells"] = table
    for variant, row in table.items():
        problems += [f"{variant} c={c}: {cell['error']}" for c, cell in row.items() if "error" in cell]
    if OURS in variants:
        for base in RATIO_BASES:
            if base in variants:
                key = f"{OURS}_over_{base}"
                record[key] = stats.ratios(table, OURS, base, concurrency)
                problems += [f"{key} c={c}: {r['error']}" for c, r in record[key].items() if "error" in r]
    phase = record.get("phase_clock_c1") or {}
    for variant, reading in phase.items():
        reading["split"] = split(reading.get("clock"), reading.get("profile"))
        if "error" in reading["split"]:
            problems.append(f"phase clock {variant}: {reading['split']['error']}")
    if record.get("rounds_done", 0) < record.get("rounds_asked", 0):
        problems.append(f"{record['rounds_done']} of {record['rounds_asked']} rounds ran "
                        f"({record.get('stopped_because') or 'stopped'})")
    record["problems"] = problems
    record["status"] = "complete" if not problems else "incomplete"
    return record


def _num(value: Any, digits: int = 1) -> str:
    return "-" if not isinstance(value, (int, float)) else f"{value:.{digits}f}"


def table(report: dict[str, Any]) -> str:
    """Per concurrency and variant the client's numbers (medians over rounds), then the ratios and the split."""
    lines = [f"serve bench: {report['pair']['name']} ({report['pair']['mode']}), K={report['pair']['k']}, "
             f"in/out {report['workload']['input_len']}/{report['workload']['output_len']}, "
             f"{report.get('rounds_done')} rounds, {report['placement']['mode']}, {report.get('device') or '?'}"]
    head = f"{'c':>3} {'variant':<12} {'out tok/s':>10} {'TPOT med':>9} {'TPOT p99':>9} {'ITL med':>8} " \
           f"{'ITL p99':>8} {'TTFT med':>9} {'TTFT p99':>9} {'accept':>7} {'runs':>4}"
    lines.append(head)
    for c in report["workload"]["concurrency"]:
        for variant, row in report["cells"].items():
            cell = row.get(str(c), {})
            if "error" in cell:
                lines.append(f"{c:>3} {variant:<12} {cell['error'][:90]}")
                continue

            def m(key: str, digits: int = 2) -> str:
                return _num(cell.get(key, {}).get("median"), digits)
            lines.append(f"{c:>3} {variant:<12} {m('output_throughput', 1):>10} {m('median_tpot_ms'):>9} "
                         f"{m('p99_tpot_ms'):>9} {m('median_itl_ms'):>8} {m('p99_itl_ms'):>8} "
                         f"{m('median_ttft_ms'):>9} {m('p99_ttft_ms'):>9} {m('spec_decode_acceptance_length'):>7} "
                         f"{cell.get('runs', 0):>4}")
    for base in RATIO_BASES:
        key = f"{OURS}_over_{base}"
        if key in report:
            cells = "  ".join(f"c={c}: " + (f"tok/s {r['output_tok_s']:.3f}, TPOT {r['median_tpot_ms']:.3f}"
                                            if "error" not in r else "error") for c, r in report[key].items())
            lines.append(f"{key}: {cells}")
    for variant, reading in (report.get("phase_clock_c1") or {}).items():
        s = reading.get("split", {})
        lines.append(f"phase clock c=1 {variant}: " + (s["error"] if "error" in s else
                     f"step {s['step_wall_ms']:.3f} ms, GPU busy {s['device_busy_ms']:.3f} ms "
                     f"({s['device_busy_share']:.0%}), host-only {s['host_only_ms']:.3f} ms, "
                     f"{s['launches_per_step']:.0f} launches/step"))
    clocks = {v: r["clock"] for v, r in (report.get("phase_clock_c1") or {}).items()
              if (r.get("clock") or {}).get("phases")}
    if clocks:
        from portable_spec_harness.e2e.breakdown_report import clock_section, render_table

        lines += clock_section(clocks, 1)
        profiles = {v: r["profile"] for v, r in report["phase_clock_c1"].items()
                    if (r.get("profile") or {}).get("phases")}
        if profiles:
            lines += ["", render_table(profiles)]
    lines.append(f"serve bench: {report['status']}" + (f" ({len(report['problems'])} problems)"
                                                       if report["problems"] else ""))
    lines += [f"  {p}" for p in report["problems"][:30]]
    return "\n".join(lines)


def plot(report: dict[str, Any], path: Path) -> str | None:
    """Output tok/s and median TPOT per variant over concurrency, ours over each baseline (lines at issue 24's targets),
    and under them the profiled per-step host/device bars at concurrency 1. None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    from portable_spec_harness.e2e.breakdown_report import draw

    profiles = {v: r["profile"] for v, r in (report.get("phase_clock_c1") or {}).items()
                if (r.get("profile") or {}).get("phases")}
    rows = 2 if profiles else 1
    fig = plt.figure(figsize=(16, 4.4 * rows))
    axes = [fig.add_subplot(rows, 3, i + 1) for i in range(3)]
    for variant, row in report["cells"].items():
        points = [(int(c), cell) for c, cell in row.items() if "error" not in cell]
        if points:
            xs = [c for c, _ in points]
            axes[0].plot(xs, [cell["output_throughput"]["median"] for _, cell in points], marker="o", label=variant)
            axes[1].plot(xs, [cell["median_tpot_ms"]["median"] for _, cell in points], marker="o", label=variant)
    for base in RATIO_BASES:
        ratios = {int(c): r["output_tok_s"] for c, r in (report.get(f"{OURS}_over_{base}") or {}).items()
                  if "error" not in r}
        if ratios:
            axes[2].plot(list(ratios), list(ratios.values()), marker="o", label=f"{OURS} / {base}")
    for level in sorted({level for base in RATIO_BASES for level in TARGET_LINES[base]}):
        axes[2].axhline(level, color="grey", linestyle="--", linewidth=0.8)
    for ax, label in zip(axes, ("output tok/s (median of rounds)", "median TPOT (ms)", "output tok/s ratio")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("max concurrency (vllm bench serve)")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        legend(ax, fontsize=8)
    if profiles:
        draw(fig.add_subplot(2, 1, 2), profiles, 1)
    pair = report["pair"]
    fig.suptitle(f"vllm serve + vllm bench serve: {pair['name']} ({pair['mode']}), K={pair['k']}, "
                 f"in/out {report['workload']['input_len']}/{report['workload']['output_len']}, "
                 f"{report.get('device') or '?'}, vLLM {report.get('vllm')}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)
