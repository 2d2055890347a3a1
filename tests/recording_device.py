"""A recording stand-in for a torch device module, for tests of the draft runner's host-side bookkeeping on a CPU.

No device graph can be captured on a CPU: here a "graph" records what ran while it was capturing (``captures``) and,
if the step gave it a ``body``, replays that. Real captures and replays are the cuda lane's (``tests/gpu``)."""

from __future__ import annotations

import contextlib

from portable_spec.ports.interface import DevicePort


class RecordingDevice:
    """Just enough of a torch device module for the runner's bookkeeping; a 'graph' records what ran inside it."""

    __name__ = "recording device (CPU stand-in)"

    def __init__(self) -> None:
        self.capturing = None
        self.captures: list[str] = []

    class _Stream:
        def wait_stream(self, other):
            pass

    def Stream(self, **kwargs):  # noqa: N802 - torch API name
        return self._Stream()

    def Event(self, **kwargs):  # noqa: N802
        return object()

    def current_stream(self, device=None):
        return self._Stream()

    def stream(self, stream):
        return contextlib.nullcontext()

    def synchronize(self, device=None):
        pass

    def device_count(self):
        return 1

    def current_device(self):
        return 0

    def get_device_name(self, device=None):
        return "recording"

    def graph_pool_handle(self):
        return ("pool", id(self))

    def is_current_stream_capturing(self):
        return self.capturing is not None

    def CUDAGraph(self):  # noqa: N802
        device = self

        class Graph:
            def __init__(self):
                self.body = None

            def replay(self):
                self.body()

            def pool(self):
                return device.graph_pool_handle()

        return Graph()

    @contextlib.contextmanager
    def graph(self, graph, pool=None, stream=None, capture_error_mode="global"):
        self.capturing = graph
        try:
            yield
        finally:
            self.capturing = None


class RecordingPort(DevicePort):
    name = "cuda"
    device_type = "cpu"
    dist_backend = "gloo"

    @classmethod
    def is_active(cls) -> bool:
        return False

    @classmethod
    def unavailable_reason(cls) -> str | None:
        return None

    def _load_device_module(self):
        raise AssertionError("always injected")
