"""``portable-spec bench e2e``: the same model and prompts through V1 without speculation, upstream V1 (PIECEWISE
drafter), V1 + our FULL drafter and Model Runner V2, at several concurrencies; output tok/s, TPOT, acceptance
length; JSON + PNG. A benchmark, not a test: it asserts nothing, it reports."""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

from portable_spec.e2e.parent import log_excerpt, run_variant

DEFAULT_VARIANTS = ("nospec", "upstream_v1", "full_drafter", "mrv2")


def run_bench(outdir: str | Path, *, pair: str = "llama_eagle", model_variant: str = "perfect", k: int = 3,
              concurrency: tuple[int, ...] = (1, 4, 16, 64), variants: tuple[str, ...] = DEFAULT_VARIANTS,
              bench_tokens: int = 256, repeats: int = 3, timeout_s: int = 540,
              zoo_dir: str = "/tmp/portable_spec_zoo", profile: bool = False) -> dict[str, Any]:
    from portable_spec.testing.model_zoo import build_pair

    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    models = build_pair(pair, Path(zoo_dir), variant=model_variant, num_speculative_tokens=k)
    rows = []
    for variant in progress(variants):
        child = ["--target", models["target"], "--draft", models["draft"], "--method", models["method"],
                 "--k", str(k), "--jobs", "bench,profile" if profile else "bench", "--concurrency", ",".join(map(str, concurrency)),
                 "--max-num-seqs", str(max(concurrency)), "--bench-tokens", str(bench_tokens),
                 "--repeats", str(repeats)]
        log = out / f"bench_e2e_{variant}.log"
        result = run_variant(variant, child, log, timeout_s)
        result["log_excerpt"] = log_excerpt(log)
        rows.append(result)
    import torch
    import vllm

    report = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "device": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
              "torch": torch.__version__, "vllm": vllm.__version__, "pair": pair, "model_variant": model_variant,
              "k": k, "bench_tokens": bench_tokens, "repeats": repeats, "concurrency": list(concurrency), "results": rows,
              "summary": summarize(rows)}
    (out / "bench_e2e.json").write_text(json.dumps(report, indent=1))
    plot(report, out / "bench_e2e.png")
    return report


def progress(variants: tuple[str, ...]) -> Any:
    """A progress bar over engine variants (each boots vLLM once) when tqdm is installed."""
    try:
        from tqdm import tqdm
    except ImportError:
        return variants
    return tqdm(variants, desc="bench e2e (engine variants)", unit="engine")


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Output tok/s per variant and concurrency, and our FULL drafter's ratio to upstream V1 and to MRV2."""
    table = {r["variant"]: {b["concurrency"]: b for b in r.get("bench", [])} for r in rows}
    summary: dict[str, Any] = {"output_tok_s": {v: {c: b["output_tok_s"] for c, b in t.items()} for v, t in table.items()}}
    for other in ("upstream_v1", "mrv2"):
        if "full_drafter" in table and other in table:
            summary[f"full_drafter_over_{other}"] = {
                c: round(b["output_tok_s"] / table[other][c]["output_tok_s"], 3)
                for c, b in table["full_drafter"].items() if c in table[other]}
    return summary


def plot(report: dict[str, Any], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for row in report["results"]:
        bench = row.get("bench") or []
        if not bench:
            continue
        xs = [b["concurrency"] for b in bench]
        axes[0].plot(xs, [b["output_tok_s"] for b in bench], marker="o", label=row["variant"])
        axes[1].plot(xs, [b["tpot_ms"] for b in bench], marker="o", label=row["variant"])
    for ax, label in zip(axes, ("output tok/s", "TPOT (ms)")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("concurrency")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(f"{report['pair']} ({report['model_variant']}), K={report['k']}, {report['device']}, "
                 f"vLLM {report['vllm']}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
