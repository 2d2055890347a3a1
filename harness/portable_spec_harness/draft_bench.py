"""Draft micro-benchmark: eager vs per-step FULL graphs vs one whole-loop graph (comparison only), against the summed
GPU kernel time of the per-step replays measured with the torch profiler.

- ``full``: what a proposal costs with per-step graphs: the first step's in-place input copies (and padding fills),
  then K x (``current_draft_step.fill_`` + replay), timed with device events while the host runs ahead.
- ``kernel``: the summed durations of the kernels those K replays launch (profiler; copies and step-scalar fills
  excluded). ``ratio = full / kernel`` is the launch overhead that remains; the target is <= 1.15.
- ``eager``: the same keys run eagerly at the same padded shapes. ``whole_loop``: the K steps (with their step-scalar
  fills) captured as ONE graph — measured for comparison only; the runner never does this.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import torch

from portable_spec.draft.dispatcher import DraftDispatcher, DraftKey
from portable_spec_harness.parity import tensor_device_for
from portable_spec_harness.synthetic.proposer import SyntheticProposer
from portable_spec_harness.synthetic.steps import SyntheticDraftConfig, build_synthetic
from portable_spec.errors import PortableSpecError
from portable_spec.ports.interface import DevicePort
from portable_spec_harness.plotting import legend, save_png

RATIO_LIMIT = 1.15
RATIO_STRETCH = 1.10


@dataclass
class DraftBenchConfig:
    method: str = "eagle"
    hidden: int = 1024
    vocab: int = 32000
    layers: int = 1
    num_spec: int = 5
    batch_sizes: list[int] = field(default_factory=lambda: [1, 4, 16, 64])
    context_len: int = 512
    max_model_len: int = 1024
    iters: int = 200
    warmup: int = 20
    probabilistic: bool = False
    kv_layout: str = "paged"
    seed: int = 0

    def validate(self) -> None:
        if not self.batch_sizes or any(b < 1 for b in self.batch_sizes):
            raise PortableSpecError(f"batch sizes must be >= 1 (got {self.batch_sizes}): pass --batch-sizes 1,4,16,64")
        if self.iters < 1 or self.warmup < 0:
            raise PortableSpecError("--iters must be >= 1 and --warmup >= 0")
        if self.context_len + 2 * (self.num_spec + 2) > self.max_model_len:
            raise PortableSpecError(f"--context-len {self.context_len} leaves no room for K={self.num_spec} drafts "
                                    f"in max_model_len {self.max_model_len}: lower --context-len")


def capture_whole_loop(runner: SyntheticProposer, keys: list[DraftKey]) -> Any:
    """The K steps AND their step-scalar writes as one graph. For comparison only: per-step graphs are the design
    (a whole-chain graph corrupted state on MUSA, vllm-musa MUSA-0203)."""
    platform, model = runner.platform, runner.model
    scalar = model.outputs.current_draft_step
    graph = platform.new_graph()
    with platform.capture(graph):
        for i, key in enumerate(keys):
            scalar.fill_(i)
            model.step(key.step, key.num_tokens, key.num_reqs)
    return graph


def _sleep_ahead(platform: DevicePort) -> None:
    """Queue ~1 ms of GPU work so the host gets ahead of the device before timing (CUDA builds only)."""
    sleep = getattr(torch.cuda, "_sleep", None)
    if sleep is not None and torch.cuda.is_available():
        sleep(2_000_000)


def time_device_us(platform: DevicePort, fn: Callable[[], None], iters: int, warmup: int) -> dict[str, float]:
    """Median and p10/p90 of the device-side span of ``fn`` (events around each call, host running ahead)."""
    for _ in range(warmup):
        fn()
    platform.synchronize()
    starts = [platform.new_event(enable_timing=True) for _ in range(iters)]
    ends = [platform.new_event(enable_timing=True) for _ in range(iters)]
    _sleep_ahead(platform)
    for s, e in zip(starts, ends):
        s.record()
        fn()
        e.record()
    platform.synchronize()
    spans = sorted(s.elapsed_time(e) * 1000.0 for s, e in zip(starts, ends))
    return {"median": statistics.median(spans), "p10": spans[len(spans) // 10], "p90": spans[(9 * len(spans)) // 10]}


def time_sync_wall_us(platform: DevicePort, fn: Callable[[], None], iters: int) -> float:
    """Median host wall time of ``fn`` from an idle device to its completion (launch latency included)."""
    spans = []
    for _ in range(iters):
        platform.synchronize()
        t0 = time.perf_counter()
        fn()
        platform.synchronize()
        spans.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(spans)


def profile_kernel_us(platform: DevicePort, fn: Callable[[], None], iters: int) -> dict[str, float]:
    """Summed kernel time per call of ``fn`` from the torch profiler's device trace (memcpy/memset excluded)."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    platform.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            fn()
        platform.synchronize()
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path) as fh:
            trace = json.load(fh)
    finally:
        os.unlink(path)
    kernels = [ev for ev in trace.get("traceEvents", []) if ev.get("ph") == "X" and ev.get("cat") == "kernel"]
    if not kernels:
        raise PortableSpecError("the torch profiler recorded no kernels (is CUPTI available?): run on a CUDA host "
                                "with a profiler-enabled torch")
    total = sum(float(ev["dur"]) for ev in kernels)
    by_name: dict[str, float] = {}
    for ev in kernels:
        name = str(ev.get("name", "?"))
        by_name[name] = by_name.get(name, 0.0) + float(ev["dur"])
    top = sorted(by_name.items(), key=lambda kv: -kv[1])[:12]
    return {"kernel_us": total / iters, "kernels": len(kernels) / iters,
            "top_kernels_us": {name[:90]: round(us / iters, 2) for name, us in top}}


def run_draft_bench(platform: DevicePort, cfg: DraftBenchConfig, *, progress: bool = False) -> dict[str, Any]:
    """Benchmark one synthetic drafter at each batch size; returns the JSON-ready report."""
    from portable_spec.capture_sizes import plan_capture_sizes

    cfg.validate()
    if not platform.supports_graphs:
        raise PortableSpecError(f"bench draft needs device graphs; platform {platform.name!r} has none: "
                                "use --platform cuda (or rocm/musa)")
    device = tensor_device_for(platform)
    max_reqs = max(cfg.batch_sizes)
    try:
        plan = plan_capture_sizes(cfg.method, cfg.num_spec, max_reqs)
    except ValueError as exc:
        raise PortableSpecError(str(exc)) from None
    model = build_synthetic(cfg.method, SyntheticDraftConfig(
        hidden=cfg.hidden, vocab=cfg.vocab, layers=cfg.layers, max_model_len=cfg.max_model_len,
        kv_layout=cfg.kv_layout, seed=cfg.seed), num_spec=cfg.num_spec, max_reqs=max_reqs, device=device,
        probabilistic=cfg.probabilistic)
    runner = SyntheticProposer(platform, DraftDispatcher.from_plan(plan), model, device=device, progress=progress)
    gen = torch.Generator(device="cpu").manual_seed(cfg.seed)
    rows = []
    sizes = cfg.batch_sizes
    if progress:
        try:
            from tqdm import tqdm
            sizes = tqdm(sizes, desc="bench draft", leave=False)
        except ImportError:
            pass
    for bs in sizes:
        keys = runner.keys_for_batch(bs)
        report = runner.capture([k for k in dict.fromkeys(keys) if k.mode == "FULL"])
        comp = model.random_composition(bs, gen, min_context=cfg.context_len, max_context=cfg.context_len)
        model.apply_context(comp)
        inputs, k = comp.inputs, len(keys)
        graphs = [runner.graphs.get(key) for key in keys]
        row: dict[str, Any] = {"batch_size": bs, "keys": [str(key) for key in dict.fromkeys(keys)],
                               "graphed_steps": sum(g is not None for g in graphs), "steps": k}
        eager = time_device_us(platform, lambda: runner.propose(inputs, bs, eager=True), cfg.iters, cfg.warmup)
        row["eager_us_per_step"] = eager["median"] / k
        if all(g is not None for g in graphs):
            full = time_device_us(platform, lambda: runner.propose(inputs, bs), cfg.iters, cfg.warmup)
            bare = time_device_us(platform, lambda: [g.replay() for g in graphs], cfg.iters, cfg.warmup)
            prof = profile_kernel_us(platform, lambda: [g.replay() for g in graphs], min(cfg.iters, 50))
            whole = capture_whole_loop(runner, keys)
            real_tokens = bs * model.query_len(keys[0].step)

            def whole_loop() -> None:
                runner.prepare(inputs, keys, bs, real_tokens)
                whole.replay()

            whole_t = time_device_us(platform, whole_loop, cfg.iters, cfg.warmup)
            sync_full = time_sync_wall_us(platform, lambda: runner.propose(inputs, bs), min(cfg.iters, 100))
            row.update({
                "full_us_per_step": full["median"] / k,
                "full_p10_us_per_step": full["p10"] / k,
                "full_p90_us_per_step": full["p90"] / k,
                "whole_loop_us_per_step": whole_t["median"] / k,
                "kernel_us_per_step": prof["kernel_us"] / k,
                "kernels_per_step": prof["kernels"] / k,
                "top_kernels_us_per_proposal": prof["top_kernels_us"],
                "ratio": full["median"] / prof["kernel_us"],
                "whole_loop_ratio": whole_t["median"] / prof["kernel_us"],
                "bare_replay_us_per_step": bare["median"] / k,
                "bare_replay_ratio": bare["median"] / prof["kernel_us"],
                "eager_ratio": eager["median"] / prof["kernel_us"],
                "sync_wall_us_per_step": sync_full / k,
            })
            del whole
        else:
            row["error"] = f"no graph for some keys: {report.to_dict()['eager']}"
        rows.append(row)
    runner.close()
    ratios = [r["ratio"] for r in rows if "ratio" in r]
    return {
        "kind": "draft_bench",
        "platform": platform.label,
        "device": platform.device_name(),
        "torch": torch.__version__,
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "config": asdict(cfg) | {"model": model.cfg.to_dict(), "plan_first_sizes": list(plan.first_step.sizes)},
        "ratio_limit": RATIO_LIMIT,
        "ratio_stretch": RATIO_STRETCH,
        "results": rows,
        "max_ratio": max(ratios) if ratios else None,
        "pass": bool(ratios) and len(ratios) == len(rows) and max(ratios) <= RATIO_LIMIT,
        "method_note": ("full = device span (CUDA events, host running ahead) of the first step's input copies plus "
                        "K x (step-scalar fill + replay); kernel = torch-profiler sum of the kernels of the same K "
                        "replays; ratio = full / kernel"),
    }


def render_table(report: dict[str, Any]) -> str:
    lines = [f"draft bench on {report['device']} ({report['platform']}), torch {report['torch']}, "
             f"method {report['config']['method']} K={report['config']['num_spec']}",
             f"{'batch':>5} {'eager':>9} {'full':>9} {'whole':>9} {'kernel':>9} {'ratio':>6} {'bare':>6}"
             "  (us per draft step; bare = replays alone / kernel)"]
    for r in report["results"]:
        if "ratio" not in r:
            lines.append(f"{r['batch_size']:>5} {r['eager_us_per_step']:>9.1f}  {r.get('error', '')}")
            continue
        lines.append(f"{r['batch_size']:>5} {r['eager_us_per_step']:>9.1f} {r['full_us_per_step']:>9.1f} "
                     f"{r['whole_loop_us_per_step']:>9.1f} {r['kernel_us_per_step']:>9.1f} {r['ratio']:>6.3f} "
                     f"{r['bare_replay_ratio']:>6.3f}")
    verdict = "PASS" if report["pass"] else "FAIL"
    lines.append(f"ratio limit {report['ratio_limit']} (stretch {report['ratio_stretch']}): {verdict}")
    return "\n".join(lines)


def write_plot(report: dict[str, Any], path: str) -> str | None:
    """PNG: time per draft step by batch size, and the ratio against the limit. None if matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    rows = [r for r in report["results"] if "ratio" in r]
    if not rows:
        return None
    bs = [r["batch_size"] for r in rows]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for name, label in (("eager_us_per_step", "eager"), ("full_us_per_step", "per-step FULL (copies + replays)"),
                        ("whole_loop_us_per_step", "whole-loop graph (comparison)"),
                        ("kernel_us_per_step", "kernel time (profiler)")):
        ax1.plot(bs, [r[name] for r in rows], marker="o", label=label)
    ax1.set_xscale("log", base=2)
    ax1.set_yscale("log")
    ax1.set_xlabel("batch size (requests)")
    ax1.set_ylabel("µs per draft step (log)")
    ax1.set_title(f"{report['config']['method']} K={report['config']['num_spec']}, hidden "
                  f"{report['config']['hidden']}, vocab {report['config']['vocab']}")
    legend(ax1, fontsize=8)
    ax2.plot(bs, [r["ratio"] for r in rows], marker="o", label="per-step FULL / kernel")
    ax2.plot(bs, [r["whole_loop_ratio"] for r in rows], marker="s", label="whole-loop / kernel")
    ax2.axhline(report["ratio_limit"], color="red", linestyle="--", label=f"limit {report['ratio_limit']}")
    ax2.axhline(report["ratio_stretch"], color="grey", linestyle=":", label=f"stretch {report['ratio_stretch']}")
    ax2.set_xscale("log", base=2)
    ax2.set_xlabel("batch size (requests)")
    ax2.set_ylabel("wall / summed kernel time")
    ax2.set_title(f"{report['device']} ({report['platform']})")
    legend(ax2, fontsize=8)
    fig.tight_layout()
    save_png(fig, path, dpi=120)
    plt.close(fig)
    return path
