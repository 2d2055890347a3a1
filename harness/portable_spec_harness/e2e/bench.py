"""``portable-spec bench e2e``: the same model and prompts through V1 without speculation, upstream V1 (PIECEWISE
drafter), V1 + our FULL drafter and Model Runner V2 (also as vLLM picks it, on vLLM's platform and on ours:
``builtin_mrv2``, ``ours_platform_mrv2``), at several concurrencies; output tok/s, TPOT, acceptance length, the
ratios of ``configs.RATIOS``; JSON + PNG. A benchmark, not a test: it asserts nothing, it reports."""

from __future__ import annotations

import datetime
import json
import time
from pathlib import Path
from typing import Any

from portable_spec.capture_sizes import METHODS
from portable_spec_harness.e2e.configs import BOUNDS, RATIOS
from portable_spec_harness.e2e.paired import LEVEL, paired_cell
from portable_spec_harness.e2e.parent import log_excerpt
from portable_spec_harness.plotting import legend, save_png

DEFAULT_VARIANTS = ("nospec", "upstream_v1", "full_drafter", "mrv2")
CHECKPOINT_METHODS = METHODS


def check_checkpoint_method(method: str) -> None:
    """``--method`` of an operator's checkpoints: one our drafter covers, else one line naming them."""
    from portable_spec.errors import PortableSpecError

    if method not in CHECKPOINT_METHODS:
        raise PortableSpecError(f"--method {method!r} is not one our drafter covers: pass one of "
                                f"{', '.join(CHECKPOINT_METHODS)}")


def checkpoint_pair(target: str, draft: str | None, method: str) -> dict[str, str]:
    """An operator's own checkpoints on disk, checked before any engine boots (one line naming the fix)."""
    from portable_spec.errors import PortableSpecError

    check_checkpoint_method(method)
    if draft is None and method != "mtp":
        raise PortableSpecError(f"--method {method} needs --draft DIR (only mtp drafts from the target itself)")
    for flag, path in (("--target", target), ("--draft", draft)):
        if path is not None and not (Path(path) / "config.json").is_file():
            raise PortableSpecError(f"{flag} {path!r} is not a model directory (no config.json): pass a local "
                                    "checkpoint directory")
    return {"target": str(target), "draft": str(draft if draft is not None else target), "method": method,
            "name": f"{Path(target).name} + {Path(draft).name if draft else 'its own MTP head'} ({method})"}


def run_bench(outdir: str | Path, *, pair: str = "llama_eagle", model_variant: str = "perfect", k: int = 3,
              concurrency: tuple[int, ...] = (1, 4, 16, 64), variants: tuple[str, ...] = DEFAULT_VARIANTS,
              bench_tokens: int = 256, repeats: int = 5, timeout_s: int = 540,
              zoo_dir: str = "/tmp/portable_spec_zoo", profile: bool = False, profile_concurrency: int = 1,
              parallel: list[str] | None = None, checkpoint: dict[str, str] | None = None,
              gc_heap: str = "frozen") -> dict[str, Any]:
    """Boot every variant at once, time them in turns (``interleave``), then profile each (optional).
    ``parallel``: the children's tensor-parallel flags (``parallel.Parallel.child_args``); ``checkpoint``: an
    operator's own models (``checkpoint_pair``) instead of the generated ``pair``; ``gc_heap``: each child's
    collector after boot (``gc_pauses``: frozen as ``vllm serve`` freezes it, or live)."""
    from portable_spec_harness.e2e.child import bench_summary
    from portable_spec_harness.e2e.interleave import boot_all, measure_interleaved
    from portable_spec_harness.model_zoo import build_pair

    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    models = checkpoint or build_pair(pair, Path(zoo_dir), variant=model_variant, num_speculative_tokens=k)
    child = ["--target", models["target"], "--draft", models["draft"], "--method", models["method"], "--k", str(k),
             "--max-num-seqs", str(max(concurrency)), "--bench-tokens", str(bench_tokens), "--gc-heap", gc_heap, *(parallel or [])]
    bar = progress_bar(len(variants) + len(variants) * len(concurrency) * repeats + (len(variants) if profile else 0))
    started = time.perf_counter()
    engines, facts = boot_all(variants, child, out, timeout_s, bar)
    boot_wall = round(time.perf_counter() - started, 1)
    measured = measure_interleaved(engines, concurrency, repeats, bar)
    profiles = {}
    for engine in engines if profile else ():
        profiles[engine.variant] = engine.ask({"job": "profile", "concurrency": profile_concurrency}, timeout_s)
        bar.update(1)
    final = {engine.variant: engine.ask({"job": "facts"}) for engine in engines}
    for engine in engines:
        engine.close()
    bar.close()
    rows = []
    for variant in variants:
        row = {"variant": variant, **facts[variant], **final.get(variant, {}), "log": f"bench_e2e_{variant}.log"}
        if variant in measured:
            row["bench"] = []
            for c in concurrency:
                cell = measured[variant][c]
                bad = [r["error"] for r in [cell["warm"], *cell["passes"]] if "error" in r]
                row["bench"].append({"concurrency": c, "error": bad[0]} if bad else
                                    bench_summary(c, cell["warm"]["ttft_s"], cell["passes"], bench_tokens))
        if variant in profiles:
            row["profile"] = profiles[variant]
            row["breakdown"] = row["profile"].pop("breakdown", None)
            row["phase_clock"] = row["profile"].pop("phase_clock", None)
        row["log_excerpt"] = log_excerpt(out / row["log"])
        rows.append(row)
    import torch

    from portable_spec_harness.vllm_door.offline import vllm_version

    tp = int(parallel[parallel.index("--tp") + 1]) if parallel and "--tp" in parallel else 1
    report = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "device": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
              "device_count": torch.cuda.device_count() if torch.cuda.is_available() else 0,
              "tensor_parallel_size": tp, "parallel_flags": parallel or [],
              "torch": torch.__version__, "vllm": vllm_version(),
              "pair": checkpoint["name"] if checkpoint else pair, "model_variant": None if checkpoint else model_variant,
              "models": {k_: models[k_] for k_ in ("target", "draft", "method")},
              "k": k, "bench_tokens": bench_tokens, "repeats": repeats, "concurrency": list(concurrency),
              "profile_concurrency": profile_concurrency if profile else None,
              "method": "engines booted together (fixed KV cache), timed passes interleaved round-robin; "
                        "median of the passes", "gc_heap": gc_heap, "boot_wall_s": boot_wall, "results": rows,
              "summary": summarize(rows)}
    (out / "bench_e2e.json").write_text(json.dumps(report, indent=1))
    plot(report, out / "bench_e2e.png")
    return report


class _NoBar:
    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass


def progress_bar(total: int, desc: str = "bench e2e") -> Any:
    """A progress bar over boots, timed passes and profiles when tqdm is installed."""
    try:
        from tqdm import tqdm
    except ImportError:
        return _NoBar()
    return tqdm(total=total, desc=desc, unit="step")




def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Output tok/s per variant and concurrency, and each ratio of ``configs.RATIOS`` whose two variants ran (our
    drafter over upstream V1 and over MRV2; MRV2 on our platform over MRV2 on vLLM's): of the medians (the headline)
    and of the best passes (how far noise could move it); from the interleaved passes, ``paired_<ours>_vs_<other>``:
    the median per-pass ratio with its bootstrap interval and, for a bounded ratio (``configs.BOUNDS``), whether the
    passes decide the bound (``paired.py``)."""
    table = {r["variant"]: {b["concurrency"]: b for b in r.get("bench", []) if "output_tok_s" in b} for r in rows}
    summary: dict[str, Any] = {"output_tok_s": {v: {c: b["output_tok_s"] for c, b in t.items()} for v, t in table.items()}}
    if any("gc_full_collections" in b for t in table.values() for b in t.values()):
        # full collections the bench child paid inside timed passes (gc_pauses.py): ~0 on a frozen heap
        summary["gc_full_collections"] = {v: {c: b.get("gc_full_collections") for c, b in t.items()}
                                          for v, t in table.items()}
    for ours, other in RATIOS:
        if ours in table and other in table:
            common = [c for c in table[ours] if c in table[other]]
            summary[f"{ours}_over_{other}"] = {
                c: round(table[ours][c]["output_tok_s"] / table[other][c]["output_tok_s"], 3) for c in common}
            if all("output_tok_s_best" in table[v][c] for v in (ours, other) for c in common):
                summary[f"{ours}_over_{other}_best"] = {
                    c: round(table[ours][c]["output_tok_s_best"] / table[other][c]["output_tok_s_best"], 3)
                    for c in common}
            if all("wall_s_all" in table[v][c] for v in (ours, other) for c in common):
                summary[f"paired_{ours}_vs_{other}"] = {
                    c: paired_cell(table[ours][c], table[other][c], BOUNDS.get((ours, other))) for c in common}
            if all("step_ms_median_all" in table[v][c] for v in (ours, other) for c in common):
                # the same passes on their median step (step_clock.py): the steady cost, stalls left out
                summary[f"paired_step_time_{ours}_vs_{other}"] = {
                    c: paired_cell(table[ours][c], table[other][c], BOUNDS.get((ours, other)), metric="step_time")
                    for c in common}
    if any("stall_ms_all" in b for t in table.values() for b in t.values()):
        # what each engine lost to stalled steps, summed over its timed passes, and how many passes had one
        summary["stalls"] = {v: {c: {"stall_ms": round(sum(b["stall_ms_all"]), 1),
                                     "passes_with_stall": sum(1 for n in b["stall_steps_all"] if n),
                                     "passes": len(b["stall_ms_all"])}
                                 for c, b in t.items() if "stall_ms_all" in b} for v, t in table.items()}
    return summary


PLOT_BASES = ("upstream_v1", "builtin_mrv2", "mrv2")
"""What the plot's third panel divides every variant by: the first of these that ran."""


def pair_label(report: dict[str, Any]) -> str:
    """Which models a report ran: the generated pair and its variant, or the operator's checkpoints."""
    variant = report.get("model_variant")
    return f"{report['pair']} ({variant})" if variant else str(report["pair"])


def plot(report: dict[str, Any], path: Path) -> None:
    """Output tok/s, TPOT, and throughput relative to upstream V1 (the issue's bars at 1.25x and 1.0x) or, in a run
    without it, to MRV2 on vLLM's platform (bars at 0.98x and 1.0x: issue 23's no-regression bound); below them the
    per-step breakdown of every profiled variant (``breakdown_report``)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    from portable_spec_harness.e2e.breakdown_report import breakdowns_of, draw

    breakdowns = breakdowns_of(report)
    rows_of_axes = 2 if breakdowns else 1
    fig = plt.figure(figsize=(16, 4.2 * rows_of_axes))
    axes = [fig.add_subplot(rows_of_axes, 3, i + 1) for i in range(3)]
    if breakdowns:
        draw(fig.add_subplot(2, 1, 2), breakdowns, report.get("profile_concurrency") or 1)
    rows = {row["variant"]: [b for b in row.get("bench") or [] if "output_tok_s" in b] for row in report["results"]}
    base_name = next((v for v in PLOT_BASES if rows.get(v)), "upstream_v1")
    base = {b["concurrency"]: b["output_tok_s"] for b in rows.get(base_name, [])}
    for variant, bench in rows.items():
        if not bench:
            continue
        xs = [b["concurrency"] for b in bench]
        axes[0].plot(xs, [b["output_tok_s"] for b in bench], marker="o", label=variant)
        axes[1].plot(xs, [b["tpot_ms"] for b in bench], marker="o", label=variant)
        if base:
            pts = [(b["concurrency"], b["output_tok_s"] / base[b["concurrency"]]) for b in bench
                   if b["concurrency"] in base]
            line, = axes[2].plot([x for x, _ in pts], [y for _, y in pts], marker="o", label=variant)
            paired = (report.get("summary") or {}).get(f"paired_{variant}_vs_{base_name}") or {}
            cells = [(c, p) for c, p in paired.items() if p.get("passes")]
            if cells:  # the per-pass ratio's median and its interval, beside the ratio of medians
                xs_p = [float(c) * 1.06 for c, _ in cells]
                mids = [p["median"] for _, p in cells]
                errs = [[m - p["interval"][0] for m, (_, p) in zip(mids, cells)],
                        [p["interval"][1] - m for m, (_, p) in zip(mids, cells)]]
                axes[2].errorbar(xs_p, mids, yerr=errs, fmt="s", ms=3, capsize=3, color=line.get_color(),
                                 alpha=0.7, label=f"{variant} paired median, {int(LEVEL * 100)}% interval")
    if base:
        for level in ((1.0, 1.25) if base_name == "upstream_v1" else (0.98, 1.0)):
            axes[2].axhline(level, color="grey", linestyle="--", linewidth=0.8)
    labels = ("output tok/s (median of passes)", "TPOT (ms)", f"output tok/s / {base_name}")
    for ax, label in zip(axes, labels):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("concurrency")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        legend(ax, fontsize=8)
    axes[0].set_yscale("log")
    fig.suptitle(f"{pair_label(report)}, K={report['k']}, "
                 f"TP={report.get('tensor_parallel_size', 1)}, {report['device']}, vLLM {report['vllm']}")
    fig.tight_layout()
    save_png(fig, path, dpi=110)
    plt.close(fig)
