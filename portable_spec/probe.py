"""``portable-spec probe``: what this platform is, and on a device, proof that a graph captures into the ONE shared
pool on a side stream and replays correctly."""

from __future__ import annotations

from typing import Any

from portable_spec.ports.interface import DevicePort


def graph_smoke_test(platform: DevicePort) -> dict[str, Any]:
    """Capture ``y = x * 2 + 1`` into the shared pool, rewrite ``x`` in place, replay, check ``y``."""
    import torch  # only a device with graphs runs this; the facts of a port without graphs need no torch

    dev = platform.device()
    x = torch.arange(16, dtype=torch.float32, device=dev)
    platform.synchronize()
    saw_capturing = []
    graph = platform.new_graph()
    with platform.capture(graph):
        saw_capturing.append(platform.is_capturing())
        y = x * 2 + 1
    x.copy_(torch.arange(16, 32, dtype=torch.float32, device=dev))
    graph.replay()
    platform.synchronize()
    expected = torch.arange(16, 32, dtype=torch.float32, device=dev) * 2 + 1
    return {
        "captured": True,
        "replayed_correctly": bool(torch.equal(y, expected)),
        "capturing_inside_capture": bool(saw_capturing and saw_capturing[0]),
        "capturing_outside_capture": platform.is_capturing(),
        "capture_stream_is_default": platform.capture_stream() == platform.current_stream(),
        "graph_class": f"{type(graph).__module__}.{type(graph).__qualname__}",
    }


def run_probe(platform: DevicePort) -> dict[str, Any]:
    """Facts, pool sharing, and (on a graph-capable device) the capture/replay smoke test.

    ``graph_check`` is always an object whose ``ran`` says whether the check ran; when it did not, ``reason`` says
    why and ``pool_shared`` stays null (true/false only when checked), so readers of either key never guess.
    """
    report = platform.facts()
    if platform.supports_graphs:
        twin = type(platform)(device_module=platform.device_module) if platform.injected else type(platform)()
        report["pool_shared"] = platform.graph_pool() is twin.graph_pool()
        report["graph_check"] = {"ran": True, **graph_smoke_test(platform)}
    else:
        report["pool_shared"] = None
        report["graph_check"] = {"ran": False, "reason": f"platform {platform.name!r} has no device graphs; run on a "
                                                         "GPU host (--platform cuda|rocm|musa)"}
    return report
