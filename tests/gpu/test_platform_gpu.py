"""cuda lane: graph capture/replay into the ONE shared pool, on a side stream, with is_capturing() scoped to capture;
the same through musa-sim (a simulated torch.musa backed by torch.cuda — musa-sim, not MUSA)."""

from __future__ import annotations

import pytest
import torch

from portable_spec.ports.cuda_port import CudaPort
from portable_spec.ports.musa_port import MusaPort
from portable_spec.probe import run_probe
from portable_spec_harness.musa_sim import MusaSimError, SimulatedMusa

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


def cuda_port() -> CudaPort:
    return CudaPort()


def musa_sim_port(**kwargs) -> MusaPort:
    return MusaPort(device_module=SimulatedMusa(**kwargs), label="musa-sim")


@pytest.fixture(params=["cuda", "musa-sim"])
def port(request):
    return cuda_port() if request.param == "cuda" else musa_sim_port()


def test_capture_and_replay_into_the_shared_pool(port):
    x = torch.zeros(8, device="cuda")
    graph = port.new_graph()
    with port.capture(graph):
        y = x + 3
    x.fill_(4)
    graph.replay()
    port.synchronize()
    assert torch.equal(y, torch.full((8,), 7.0, device="cuda"))
    underlying = getattr(graph, "_graph", graph)
    assert underlying.pool() == port.graph_pool()


def test_pool_is_one_object_for_every_instance():
    a, b = cuda_port(), cuda_port()
    assert a.graph_pool() is b.graph_pool()
    sim = SimulatedMusa()
    assert MusaPort(device_module=sim).graph_pool() is MusaPort(device_module=sim).graph_pool()


def test_capture_stream_is_not_the_default_stream(port):
    assert port.capture_stream() != torch.cuda.default_stream()
    seen = []
    with port.capture(port.new_graph()):
        seen.append(torch.cuda.current_stream())
        torch.zeros(1, device="cuda").add_(1)
    assert seen == [port.capture_stream()]


def test_is_capturing_only_inside_capture(port):
    assert not port.is_capturing()
    inside = []
    with port.capture(port.new_graph()):
        inside.append(port.is_capturing())
        torch.ones(1, device="cuda").mul_(2)
    assert inside == [True] and not port.is_capturing()


def test_probe_reports_a_correct_replay(port):
    report = run_probe(port)
    check = report["graph_check"]
    assert report["pool_shared"] is True and check["ran"] is True
    assert check["replayed_correctly"] and check["capturing_inside_capture"]
    assert not check["capturing_outside_capture"] and not check["capture_stream_is_default"]


def test_musa_sim_enforces_inference_mode_and_our_port_satisfies_it():
    port = musa_sim_port()
    graph = port.new_graph()
    with torch.no_grad(), pytest.raises(MusaSimError, match="inference_mode"):
        with port.device_module.graph(graph, pool=port.graph_pool()):
            pass
    with port.capture(port.new_graph()):  # our capture context enters inference_mode for MUSA
        torch.ones(1, device="cuda").add_(1)
    assert {"MUSAGraph", "graph", "graph_pool_handle", "Stream"} <= set(port.device_module.calls)


def test_musa_sim_live_graph_cap_is_enforced():
    port = musa_sim_port(live_graph_cap=2)
    graphs = []
    for _ in range(2):
        graphs.append(port.new_graph())
        with port.capture(graphs[-1]):
            torch.ones(1, device="cuda").add_(1)
    with pytest.raises(MusaSimError, match="exceed the cap 2"):
        with port.capture(port.new_graph()):
            pass


def test_platform_probe_does_not_poison_fork():
    """vLLM forks its engine core after our probe ran: the probe must not initialise the CUDA runtime."""
    import subprocess
    import sys

    code = ("import os, torch\n"
            "os.environ['VLLM_PLATFORM'] = 'cuda'\n"
            "from portable_spec.vllm_adapter.plugin.platform_plugin import platform_qualname\n"
            "assert platform_qualname() == 'portable_spec.vllm_adapter.platform.cuda.PortableCudaPlatform', platform_qualname()\n"
            "pid = os.fork()\n"
            "if pid == 0:\n"
            "    torch.zeros(1, device='cuda'); os._exit(0)\n"
            "_, status = os.waitpid(pid, 0)\n"
            "print('child exit', os.waitstatus_to_exitcode(status))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "child exit 0", proc.stderr[-2000:]


def test_warm_up_on_the_capture_stream_is_ordered_with_the_current_stream(port):
    x = torch.zeros(1 << 20, device="cuda")
    x.fill_(3)  # queued on the current stream
    with port.on_capture_stream() as side:
        assert torch.cuda.current_stream() == side == port.capture_stream()
        y = x * 2  # must see the fill
    assert torch.equal(y, torch.full_like(x, 6))
    assert torch.cuda.current_stream() != port.capture_stream()
