"""The serving benchmark's report: medians and ratios per cell (input length x sampling x concurrency, keyed
``in1024/sampled/c2``) from the runs, rounds paired, the timed runs shorter than ``--min-run-s``, the phase clock's
host/device split at concurrency 1, a console table and a PNG (one panel per input length and sampling). ``status``
is ``complete`` only when every cell and ratio has numbers, every asked round ran and every phase reading came back;
anything else is ``incomplete`` with the reasons listed (a benchmark does not pass or fail on speed: no number here
is compared with a target). Short runs do not make a report incomplete (a capped cell's runs are short by design)
but are listed in the JSON (``short_runs``), the table and its last line."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from portable_spec_harness import host_facts
from portable_spec_harness.e2e.step_breakdown import PHASES
from portable_spec_harness.serve_bench import stats
from portable_spec_harness.e2e.mrv2_checks import GRAPHED_STANDALONE
from portable_spec_harness.serve_bench.plan import (OURS, OURS_KINDS, TARGET_LINES, VARIANTS, Cell, kind_of,
                                                    ratio_pairs, scheduling_of)
from portable_spec_harness.plotting import legend, save_png, wrapped_title


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


def identity_problems(variant: str, facts: list[dict[str, Any]], tp: int = 1) -> list[str]:
    """Whether a server ran what its label says, from the probe's facts: at tensor parallel ``tp``; ours our
    platform and drafter with graph replays during the runs, upstream V1 vLLM's platform and drafter on the V1 runner,
    MRV2 vLLM's platform and the V2 runner (``ours@async`` is judged as ours). A mislabelled number is worse than
    none."""
    kind = kind_of(variant)
    readings = [f for f in facts if "error" not in f and f.get("runner")]
    if not readings:
        return [f"{variant}: no facts from its server's probe"]
    first, last = readings[0], readings[-1]
    if first.get("tensor_parallel_size", tp) != tp:
        return [f"{variant}: ran at tensor parallel {first.get('tensor_parallel_size')}, not the {tp} asked"]
    drafter, v2 = str(first.get("drafter")), first.get("use_v2_model_runner")
    platform = first.get("platform")
    if platform is not None and str(platform).startswith("portable_spec.") != (kind in OURS_KINDS):
        return [f"{variant}: ran on platform {platform}"]
    if kind == "ours_mrv2":
        return ours_mrv2_problems(variant, readings, v2)
    if kind == OURS:
        replays = grown(readings, lambda r: sum((r.get("replays") or {}).values()))
        if not drafter.startswith("portable_spec.") or v2:
            return [f"{variant}: ran drafter {drafter} (V2 runner: {v2}), not ours on the V1 runner"]
        if len(readings) > 1 and replays <= 0:
            return [f"{variant}: our drafter's graphs did not replay during the runs"]
    elif kind == "upstream_v1" and (drafter.startswith("portable_spec.") or v2):
        return [f"{variant}: ran drafter {drafter} (V2 runner: {v2}), not vLLM's on the V1 runner"]
    elif kind == "mrv2" and not v2:
        return [f"{variant}: its server ran the V1 runner"]
    return []


def grown(readings: list[dict[str, Any]], count: Callable[[dict[str, Any]], int]) -> int:
    """How much ``count`` grew over a variant's readings, in order: the sum of each rise from one reading to the next.
    A fall is a new server (``in_turn`` boots one per round, and carries one into the next round), whose count starts
    again, so the readings of several servers add up instead of the last server's count being taken from the first's."""
    counts = [count(r) for r in readings]
    return sum(max(0, after - before) for before, after in zip(counts, counts[1:]))


def ours_mrv2_problems(variant: str, readings: list[dict[str, Any]], v2: Any) -> list[str]:
    """MRV2 on our platform: the V2 runner, and where MRV2 built our graphed standalone draft-model speculator
    (vLLM 0.33.0's ``draft_model``), its step-0 or decode graphs replayed during the runs (MRV2's own speculators on our
    platform count no replays of their own)."""
    first, last = readings[0], readings[-1]
    if not v2:
        return [f"{variant}: its server ran the V1 runner"]
    if str(first.get("speculator")) != GRAPHED_STANDALONE:
        return []
    replayed = grown(readings, lambda r: sum((r.get("speculator_replays") or {}).values())
                     + sum((r.get("speculator_prefill_replays") or {}).values()))
    if len(readings) > 1 and replayed <= 0:
        return [f"{variant}: our standalone speculator's graphs did not replay during the runs "
                f"({last.get('speculator_eager_prefills')} eager step-0 passes, "
                f"{last.get('speculator_eager_loops')} eager decode loops)"]
    return []


def scheduling(record: dict[str, Any], variants: list[str]) -> tuple[dict[str, Any], list[str]]:
    """Whether each server ran with async scheduling (its probe's facts), and the problems: a server that did not
    run what it was asked (its name's ``@async`` / ``@sync``, else ``--async-scheduling``) or whose facts do not say
    while on or off was asked, and servers asked alike (no suffix) that ran differently (their steps would not
    compare; a suffixed one differs by design)."""
    default = (record.get("settings") or {}).get("async_scheduling", "default")
    asked = {variant: scheduling_of(variant, default) for variant in variants}
    ran: dict[str, Any] = {}
    for variant in variants:
        facts = [f for f in (record["variants"].get(variant) or {}).get("facts", []) if "async_scheduling" in f]
        if facts:
            ran[variant] = facts[0]["async_scheduling"]
    problems = [f"{variant}: ran with async scheduling {ran[variant]}, but {_asking(variant, choice)} was asked"
                if variant in ran else f"{variant}: {_asking(variant, choice)} was asked, but no fact of its server "
                                       "says how it scheduled"
                for variant, choice in asked.items()
                if choice != "default" and (variant not in ran or bool(ran[variant]) != (choice == "on"))]
    alike = {variant: on for variant, on in ran.items() if variant == kind_of(variant)}
    if len({bool(v) for v in alike.values()}) > 1:
        problems.append(f"the variants ran with different async scheduling ({_on_off(alike)})")
    return {"asked": default, "asked_per_variant": asked, "per_variant": ran}, problems


def _asking(variant: str, choice: str) -> str:
    """What asked a server's scheduling: ``--async-scheduling on``, or ``ours@async``'s suffix."""
    return f"--async-scheduling {choice}" if variant == kind_of(variant) else f"{variant}'s async scheduling {choice}"


def _on_off(ran: dict[str, Any]) -> str:
    return ", ".join(f"{variant} {'on' if on else 'off'}" for variant, on in ran.items())


def assemble(record: dict[str, Any], variants: list[str], cells: list[Cell]) -> dict[str, Any]:
    """Add cells, ratios, short runs, splits, status and problems to the run's ``record`` (returned)."""
    problems = list(record.get("problems", []))
    tp = tensor_parallel_size(record)
    for variant in variants:
        problems += identity_problems(variant, (record["variants"].get(variant) or {}).get("facts", []), tp)
    record["async_scheduling"], mixed = scheduling(record, variants)
    problems += mixed
    workload = record["workload"]
    table = stats.cells(record["runs"], variants, cells, workload)
    record["cells"] = table
    for variant, row in table.items():
        problems += [f"{variant} {key}: {cell['error']}" for key, cell in row.items() if "error" in cell]
    for key, (variant, base) in ratio_pairs(variants).items():
        record[key] = stats.ratios(table, record["runs"], variant, base, cells, workload)
        problems += [f"{key} {c}: {r['error']}" for c, r in record[key].items() if "error" in r]
    record["short_runs"] = short_runs(record["runs"], workload.get("min_run_s") or 0.0)
    for variant, reading in phase_clock_readings(record).items():
        reading["split"] = split(reading.get("clock"), reading.get("profile"))
        if "error" in reading["split"]:
            problems.append(f"phase clock {variant}: {reading['split']['error']}")
    if short := rounds_short(record):
        problems.append(short)
    record["problems"] = problems
    record["status"] = "complete" if not problems else "incomplete"
    return record


def phase_clock_readings(record: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each variant's phase-clock reading in a report (its ``cell`` says where it ran): ``phase_clock``, or
    ``phase_clock_c1`` in a report written when the clock ran only at concurrency 1."""
    return record.get("phase_clock") or record.get("phase_clock_c1") or {}


def clock_concurrency(readings: dict[str, dict[str, Any]]) -> int:
    """The concurrency the phase-clock ``readings`` ran at, as their clock runs recorded it (1 where none did)."""
    return max((int((r.get("clock_run") or {}).get("concurrency") or 1) for r in readings.values()), default=1)


def rounds_short(record: dict[str, Any]) -> str | None:
    """The problem a report has when fewer rounds ran than it asked for (None when every round ran); a summary that
    pools the rest from another call reads the same sentence back (``combine``)."""
    if record.get("rounds_done", 0) >= record.get("rounds_asked", 0):
        return None
    return (f"{record['rounds_done']} of {record['rounds_asked']} rounds ran "
            f"({record.get('stopped_because') or 'stopped'})")


def tensor_parallel_size(report: dict[str, Any]) -> int:
    """The TP every server was asked to run at (``settings.parallel``; 1 in reports from before the option)."""
    return ((report.get("settings") or {}).get("parallel") or {}).get("tensor_parallel_size", 1)


def where(report: dict[str, Any]) -> str:
    """The device and tensor parallelism, as the table and the plot's title name them."""
    return f"{report.get('device') or '?'}, TP={tensor_parallel_size(report)}"


def short_runs(runs: list[dict[str, Any]], min_run_s: float) -> list[dict[str, Any]]:
    """The timed runs that measured for less than ``min_run_s`` (the client's own duration): too few requests for a
    steady number, named so no reader takes their cell for a long run."""
    return [{"variant": r["variant"], "cell": Cell(r["input_len"], r["sampling"], r["concurrency"]).key,
             "round": r["round"], "duration_s": r["duration_s"], "num_prompts": r["num_prompts"]}
            for r in runs if isinstance(r.get("duration_s"), (int, float)) and r["duration_s"] < min_run_s]


def _num(value: Any, digits: int = 1) -> str:
    return "-" if not isinstance(value, (int, float)) else f"{value:.{digits}f}"


def panels(report: dict[str, Any]) -> list[tuple[int, str]]:
    """The report's (input length, sampling) groups, in the order the cells ran."""
    return list(dict.fromkeys(Cell(n, sm, 0).panel for n in report["workload"]["input_lens"]
                              for sm in report["workload"]["sampling"]))


def table(report: dict[str, Any]) -> str:
    """Per input length and sampling, per concurrency and variant the client's numbers (medians over rounds), then
    the ratios with their paired intervals, the short runs and the split."""
    w = report["workload"]
    lines = [f"serve bench: {report['pair']['name']} ({report['pair']['mode']}), K={report['pair']['k']}, "
             f"in/out {','.join(map(str, w['input_lens']))}/{w['output_len']}, sampling {','.join(w['sampling'])}, "
             f"{report.get('rounds_done')} rounds, {report['placement']['mode']}, {where(report)}"]
    if "host" in report:  # reports from before the host was recorded keep their table as it was
        lines.append(host_facts.describe(report["host"]))
    if w.get("sized_per_variant"):
        lines.append("prompts sized per variant (--size-per-variant): each variant's runs from its own warm run")
    ran = (report.get("async_scheduling") or {}).get("per_variant") or {}
    if ran:
        lines.append(f"async scheduling ({report['async_scheduling']['asked']}): {_on_off(ran)}")
    for input_len, sampling in panels(report):
        lines += [f"in {input_len}, {sampling} {_sampling_note(w, sampling)}:", _HEAD]
        lines += [_row(report, Cell(input_len, sampling, c), variant)
                  for c in w["concurrency"] for variant in report["cells"]]
        lines += _ratio_lines(report, input_len, sampling)
    lines += _short_lines(report)
    if report.get("phase_clock_skipped"):
        lines.append(f"phase clock: skipped at TP={tensor_parallel_size(report)}: {report['phase_clock_skipped']}")
    readings = phase_clock_readings(report)
    for variant, reading in readings.items():
        s = reading.get("split", {})
        lines.append(f"phase clock {reading.get('cell', 'c=1')} {variant}: " + (s["error"] if "error" in s else
                     f"step {s['step_wall_ms']:.3f} ms, GPU busy {s['device_busy_ms']:.3f} ms "
                     f"({s['device_busy_share']:.0%}), host-only {s['host_only_ms']:.3f} ms, "
                     f"{s['launches_per_step']:.0f} launches/step"))
    clocks = {v: r["clock"] for v, r in readings.items() if (r.get("clock") or {}).get("phases")}
    if clocks:
        from portable_spec_harness.e2e.breakdown_report import clock_section, render_table

        lines += clock_section(clocks, clock_concurrency(readings))
        profiles = {v: r["profile"] for v, r in readings.items() if (r.get("profile") or {}).get("phases")}
        if profiles:
            lines += ["", render_table(profiles)]
    short = (f"; {len(report['short_runs'])} of {len(report['runs'])} timed runs under --min-run-s "
             f"{w['min_run_s']:g} s" if report.get("short_runs") else "")
    lines.append(f"serve bench: {report['status']}" + (f" ({len(report['problems'])} problems)"
                                                       if report["problems"] else "") + short)
    lines += [f"  {p}" for p in report["problems"][:30]]
    return "\n".join(lines)


NAME_WIDTH = max(map(len, VARIANTS)) + len("@async")
"""The table's variant column: the longest kind with a scheduling suffix."""
_HEAD = (f"{'c':>5} {'variant':<{NAME_WIDTH}} {'out tok/s':>10} {'TPOT med':>9} {'TPOT p99':>9} {'ITL med':>8} "
         f"{'ITL p99':>8} {'TTFT med':>9} {'TTFT p99':>9} {'stall ms':>9} {'accept':>7} {'run s':>6} {'prompts':>7} "
         f"{'runs':>4}")


def _sampling_note(workload: dict[str, Any], sampling: str) -> str:
    """``(temperature 0.8, top_p 0.95, seeded)``: what a sampling's requests carried."""
    params = (workload.get("sampling_params") or {}).get(sampling) or {}
    said = [f"{k} {v}" for k, v in params.items() if k != "seed"] + (["seeded"] if "seed" in params else [])
    return f"({', '.join(said)})" if said else ""


def _row(report: dict[str, Any], cell: Cell, variant: str) -> str:
    """One variant's medians in one cell (``-`` where the cell lacks a metric: the stall total of an old result)."""
    entry = report["cells"][variant].get(cell.key, {})
    if "error" in entry:
        return f"{cell.concurrency:>5} {variant:<{NAME_WIDTH}} {entry['error'][:100]}"

    def m(key: str, digits: int = 2) -> str:
        return _num(entry.get(key, {}).get("median"), digits)
    prompts = report["workload"]["num_prompts"].get(cell.key, "-")
    if isinstance(prompts, dict):  # sized per variant (``--size-per-variant``)
        prompts = prompts.get(variant, "-")
    return (f"{cell.concurrency:>5} {variant:<{NAME_WIDTH}} {m('output_throughput', 1):>10} "
            f"{m('median_tpot_ms'):>9} {m('p99_tpot_ms'):>9} {m('median_itl_ms'):>8} {m('p99_itl_ms'):>8} "
            f"{m('median_ttft_ms'):>9} {m('p99_ttft_ms'):>9} {m('stall_total_ms', 1):>9} "
            f"{m('spec_decode_acceptance_length'):>7} {m('duration', 1):>6} {prompts:>7} {entry.get('runs', 0):>4}")


def _ratio_lines(report: dict[str, Any], input_len: int, sampling: str) -> list[str]:
    """Per ratio (``plan.ratio_pairs`` of the report's variants), each concurrency's ratio of medians and the paired
    median with its interval."""
    lines = []
    for key in ratio_pairs(list(report["cells"])):
        ratios = report.get(key)
        if not ratios:
            continue
        parts = []
        for c in report["workload"]["concurrency"]:
            r = ratios.get(Cell(input_len, sampling, c).key, {"error": "no cell"})
            pair = r.get("paired_output_tok_s") or {}
            p99 = r.get("paired_p99_itl_ms") or {}
            itl = f", p99 ITL paired {p99['median']:.3f}" if p99.get("passes") else ""
            parts.append(f"c={c}: error" if "error" in r else
                         f"c={c}: tok/s {r['output_tok_s']:.3f} (paired {pair['median']:.3f} "
                         f"[{pair['interval'][0]:.3f}, {pair['interval'][1]:.3f}], {pair['passes']} rounds), "
                         f"TPOT {r['median_tpot_ms']:.3f}{itl}" if pair.get("passes") else
                         f"c={c}: tok/s {r['output_tok_s']:.3f}, TPOT {r['median_tpot_ms']:.3f}")
        lines.append(f"  {key}: " + "  ".join(parts))
    return lines


def _short_lines(report: dict[str, Any]) -> list[str]:
    short = report.get("short_runs") or []
    if not short:
        return []
    head = (f"short runs: {len(short)} of {len(report['runs'])} timed runs measured under --min-run-s "
            f"{report['workload']['min_run_s']:g} s (see sizing in the JSON):")
    return [head] + [f"  {s['cell']} {s['variant']} round {s['round']}: {s['duration_s']:.2f} s, "
                     f"{s['num_prompts']} prompts" for s in short[:20]]


def plot(report: dict[str, Any], path: Path) -> str | None:
    """One panel per input length and sampling: each ratio (ours over each baseline, a suffixed variant over its
    plain one) on output tok/s against concurrency (the paired median of the rounds with its interval; lines at the
    targets, ``plan.TARGET_LINES``); under them the profiled per-step host/device bars of the phase clock's cell.
    None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    from portable_spec_harness.e2e.breakdown_report import draw

    readings = phase_clock_readings(report)
    profiles = {v: r["profile"] for v, r in readings.items() if (r.get("profile") or {}).get("phases")}
    groups = panels(report)
    cols = min(len(groups), 3)
    rows = -(-len(groups) // cols)
    width = max(5.6 * cols, 14.0 if profiles else 7.0)  # the bars below and the title need the room
    fig = plt.figure(figsize=(width, 4.2 * (rows + (1 if profiles else 0))))
    for i, (input_len, sampling) in enumerate(groups):
        _ratio_panel(fig.add_subplot(rows + (1 if profiles else 0), cols, i + 1), report, input_len, sampling)
    if profiles:
        draw(fig.add_subplot(rows + 1, 1, rows + 1), profiles, clock_concurrency(readings))
    pair, w = report["pair"], report["workload"]
    fig.suptitle(wrapped_title(f"vllm serve + vllm bench serve: {pair['name']} ({pair['mode']}), K={pair['k']}, "
                               f"output {w['output_len']} tokens, {where(report)}, vLLM {report.get('vllm')}", width))
    fig.tight_layout()
    save_png(fig, path, dpi=110)
    plt.close(fig)
    return str(path)


def _ratio_panel(ax: Any, report: dict[str, Any], input_len: int, sampling: str) -> None:
    """Each ratio in one (input length, sampling): the paired median with its interval per concurrency, the ratio
    of medians as an open marker, the target lines dashed."""
    for index, (key, (variant, base)) in enumerate(ratio_pairs(list(report["cells"])).items()):
        ratios = report.get(key) or {}
        found = [(c, ratios.get(Cell(input_len, sampling, c).key)) for c in report["workload"]["concurrency"]]
        points = [(c, r) for c, r in found if r and "error" not in r]
        if not points:
            continue
        paired = [(c, r["paired_output_tok_s"]) for c, r in points if r["paired_output_tok_s"].get("passes")]
        if paired:
            mids = [p["median"] for _, p in paired]
            errs = [[m - p["interval"][0] for m, (_, p) in zip(mids, paired)],
                    [p["interval"][1] - m for m, (_, p) in zip(mids, paired)]]
            ax.errorbar([c for c, _ in paired], mids, yerr=errs, fmt="o-", capsize=3, color=f"C{index}",
                        label=f"{variant} / {base}: paired median, interval")
        ax.plot([c for c, _ in points], [r["output_tok_s"] for _, r in points], "D", mfc="none", color=f"C{index}",
                label=f"{variant} / {base}: ratio of medians")
    for level in sorted({level for levels in TARGET_LINES.values() for level in levels}):
        ax.axhline(level, color="grey", linestyle="--", linewidth=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xticks(report["workload"]["concurrency"], [str(c) for c in report["workload"]["concurrency"]])
    ax.set_xlabel("max concurrency (vllm bench serve)")
    ax.set_ylabel("output tok/s ratio")
    ax.set_title(f"input {input_len} tokens, {sampling}", fontsize=10)
    ax.grid(alpha=0.3)
    legend(ax, fontsize=7)
