"""``python -m portable_spec_harness.e2e.graph_gap_probe --out DIR``: how much idle time a replayed CUDA graph leaves
between its kernels on this GPU, against the same kernels launched one by one, counted by the same code that splits
a decode step's profile (``step_attribution.breakdown``'s ``device_gaps``).

Why: a step's wall over its summed kernel time is the idle time between device items. A FULL graph removes the host
from the step, but not the GPU's own gap between two kernels of one graph; with ~1,000 kernels in a step (an 8B
target, a 16-layer draft) that gap alone may be what keeps a step above 1.10x its kernel time (issue 39). This
probe measures it without vLLM: one graph of ``--kernels`` small element-wise kernels, replayed under the phase
clock's step scope, and the same kernels launched eagerly, both profiled by torch's profiler; it also checks that
the attribution reads a real Kineto trace (every kernel linked to its launch, the graph's to its ``cudaGraphLaunch``).

Writes ``DIR/graph_gap_probe.json`` (with the date, device, versions and commit). Needs a CUDA device (exit 2
otherwise). A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from portable_spec.errors import PortableSpecError
from portable_spec.output import emit_error
from portable_spec_harness.e2e.step_attribution import breakdown
from portable_spec_harness.vllm_door import profile_scopes as scopes


def _kernels(x: Any, n: int) -> Any:
    for _ in range(n):
        x = x + 0.0001  # one element-wise kernel per iteration
    return x


def probe(kernels: int, steps: int, size: int) -> dict[str, Any]:
    """Per mode (``graph``: one replay per step; ``eager``: ``kernels`` launches per step): the breakdown's device
    gaps, kernels, launches and device time per step, and the device time it could not link to a launch."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    if not torch.cuda.is_available():
        raise PortableSpecError("no CUDA device: run the probe on the GPU host (the device tool)")
    x = torch.ones(size, device="cuda")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        _kernels(x, kernels)  # warm the kernels before capture
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = _kernels(x, kernels)
    torch.cuda.synchronize()
    out: dict[str, Any] = {}
    for mode in ("graph", "eager"):
        def step() -> None:
            with record_function(scopes.STEP), record_function(scopes.MRV2_FORWARD):
                if mode == "graph":
                    graph.replay()
                else:
                    _kernels(x, kernels)
            torch.cuda.synchronize()
        for _ in range(3):
            step()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(steps):
                step()
        bd = breakdown(prof.events(), runner="mrv2")
        forward = bd["phases"]["target_forward"]
        out[mode] = {"steps": bd["steps"], "kernels_per_step": forward["kernels"],
                     "launches_per_step": forward["launches"], "device_ms": bd["device_ms"],
                     "device_gaps": bd["device_gaps"], "unlinked_ms": bd["unattributed"]["device_ms_unlinked"]}
    del y
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m portable_spec_harness.e2e.graph_gap_probe",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for graph_gap_probe.json")
    parser.add_argument("--kernels", type=int, default=1000, help="kernels per step (default 1000)")
    parser.add_argument("--steps", type=int, default=20, help="profiled steps per mode (default 20)")
    parser.add_argument("--size", type=int, default=4096, help="elements per kernel (default 4096: ~1 us kernels)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    if min(args.kernels, args.steps, args.size) < 1:
        return emit_error("--kernels, --steps and --size must be >= 1", 2, args.json)
    try:
        result = {"kernels": args.kernels, "steps": args.steps, "size": args.size,
                  "modes": probe(args.kernels, args.steps, args.size)}
    except PortableSpecError as exc:
        return emit_error(str(exc), 2, args.json)
    from portable_spec_harness.soak.report import environment

    result.update(environment())  # date, device, versions, commit and tree changes, as other results carry them
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "graph_gap_probe.json").write_text(json.dumps(result, indent=1))
    if args.json:
        print(json.dumps(result))
    else:
        for mode, r in result["modes"].items():
            g = r["device_gaps"]
            print(f"{mode}: {r['kernels_per_step']} kernels, {r['launches_per_step']} launches per step; busy "
                  f"{g['busy_ms']} ms, span {g['span_ms']} ms; gaps {g['gap_ms']} (counts {g['gaps']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
