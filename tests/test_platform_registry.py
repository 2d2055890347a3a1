"""Platform registry and selection: every platform registered, precedence CLI > VLLM_PLATFORM > detection, errors."""

from __future__ import annotations

import types

import pytest
import torch

from portable_spec.errors import PlatformError
from portable_spec.ports import (
    DevicePort,
    detect_platform_name,
    platform_class,
    platform_names,
    requested_platform_name,
    select_platform,
)
from portable_spec.errors import PortableSpecError
from portable_spec.ports import torch_build
from portable_spec.ports.cpu_port import CpuPort
from portable_spec.ports.musa_port import MusaPort
from portable_spec.ports.rocm_port import RocmPort, fp8_dtype_for_arch
from portable_spec_harness.musa_sim import SimulatedMusa

NO_GPU = not torch.cuda.is_available()


def test_all_four_platforms_registered_with_matching_names():
    assert platform_names() == ["cpu", "cuda", "musa", "rocm"]
    for name in platform_names():
        cls = platform_class(name)
        assert issubclass(cls, DevicePort) and cls.name == name


@pytest.mark.parametrize("name,device_type,backend,inference_mode", [
    ("cuda", "cuda", "nccl", False), ("rocm", "cuda", "nccl", False),
    ("musa", "musa", "mccl", True), ("cpu", "cpu", "gloo", False)])
def test_platform_identity(name, device_type, backend, inference_mode):
    cls = platform_class(name)
    assert (cls.device_type, cls.dist_backend, cls.capture_inference_mode) == (device_type, backend, inference_mode)


def test_platform_names_are_case_insensitive():
    assert platform_class(" CUDA ") is platform_class("cuda")


def test_cli_choice_beats_env_beats_detection():
    assert requested_platform_name("cuda", {"VLLM_PLATFORM": "musa"}) == ("cuda", "--platform")
    assert requested_platform_name(None, {"VLLM_PLATFORM": "musa"}) == ("musa", "VLLM_PLATFORM")
    assert requested_platform_name(None, {}) == (detect_platform_name(), "auto-detection")


@pytest.mark.skipif(not NO_GPU, reason="detection picks the GPU here")
def test_detection_without_accelerator_is_cpu():
    assert detect_platform_name() == "cpu"
    assert select_platform(None, {}).name == "cpu"


@pytest.mark.parametrize("value", ["", "  "])
def test_an_empty_platform_is_one_line_never_auto_detection(value):
    with pytest.raises(PlatformError) as err:
        requested_platform_name(None, {"VLLM_PLATFORM": value})
    assert str(err.value) == ("VLLM_PLATFORM is set but empty: name one of cpu, cuda, musa, rocm, or unset it "
                              "(auto-detection on the CLI; vLLM's built-in platforms under vLLM)")
    with pytest.raises(PlatformError) as err:
        requested_platform_name(value, {"VLLM_PLATFORM": "cuda"})
    assert str(err.value) == ("--platform is set but empty: name one of cpu, cuda, musa, rocm, or leave it out (then "
                              "$VLLM_PLATFORM, else auto-detection)")


def test_unknown_env_platform_names_valid_choices():
    with pytest.raises(PlatformError) as err:
        select_platform(None, {"VLLM_PLATFORM": "bogus"})
    assert str(err.value) == "unknown platform 'bogus' from VLLM_PLATFORM; valid choices: cpu, cuda, musa, rocm"


def test_unknown_cli_platform_names_its_source():
    with pytest.raises(PlatformError, match=r"^unknown platform 'tpu' from --platform; valid choices: "):
        select_platform("tpu", {})


@pytest.mark.skipif(MusaPort.is_active(), reason="torch_musa is installed here")
def test_musa_without_torch_musa_says_it_is_required():
    assert not MusaPort.is_active()
    with pytest.raises(PlatformError, match=r"^platform 'musa' requires torch_musa, which is not installed"):
        select_platform("musa", {})


@pytest.mark.skipif(not NO_GPU, reason="a CUDA device is visible")
def test_cuda_without_gpu_says_no_device_visible():
    with pytest.raises(PlatformError, match=r"^platform 'cuda' selected but no CUDA device is visible"):
        select_platform("cuda", {})


def test_rocm_detected_from_hip_build_not_from_is_available(monkeypatch):
    monkeypatch.setattr(torch.version, "hip", None, raising=False)
    assert not RocmPort.is_active()
    assert "requires a ROCm (HIP) build" in RocmPort.unavailable_reason()
    monkeypatch.setattr(torch.version, "hip", "6.4.0", raising=False)
    assert RocmPort.is_active()


def test_rocm_fp8_is_fnuz_only_on_gfx94x():
    assert fp8_dtype_for_arch("gfx942:sramecc+:xnack-") == torch.float8_e4m3fnuz
    assert fp8_dtype_for_arch("gfx950") == torch.float8_e4m3fn
    assert fp8_dtype_for_arch("gfx90a") == torch.float8_e4m3fn


def test_torch_build_read_without_torch_matches_torch_version():
    """Detection and ``probe``'s facts read torch's version file alone; it says what the imported torch says."""
    read = torch_build._version_file()
    assert read is not None and read.__name__ != "torch.version"
    assert (read.__version__, read.cuda, read.hip) == (torch.version.__version__, torch.version.cuda,
                                                       getattr(torch.version, "hip", None))
    assert torch_build.torch_version() == torch.__version__
    assert (torch_build.cuda_build(), torch_build.hip_build()) == (torch.version.cuda is not None,
                                                                  bool(getattr(torch.version, "hip", None)))


def test_cpu_port_facts_need_no_device_module_and_load_it_on_first_use():
    port = CpuPort()
    assert port._device_module is None
    assert port.facts()["fp8_dtype"] == "float8_e4m3fn" and port.fp8_dtype() == torch.float8_e4m3fn
    assert port._device_module is None
    assert port.device_module is torch.cpu


def test_musa_live_graph_limit_follows_torchada_cap_when_asked(monkeypatch):
    """One source: the port reads torchada's cap on each access (never at import), class and instance alike."""
    monkeypatch.delenv("TORCHADA_GRAPH_EXEC_CAP", raising=False)
    assert MusaPort.live_graph_limit == 1900 and MusaPort.runtime_live_graph_limit() == (1900, None)
    monkeypatch.setenv("TORCHADA_GRAPH_EXEC_CAP", "1000")
    assert MusaPort.live_graph_limit == 1000 and MusaPort(device_module=SimulatedMusa()).live_graph_limit == 1000
    pinned = MusaPort(device_module=SimulatedMusa())
    pinned.live_graph_limit = 8  # the musa-sim harness pins its own
    assert pinned.live_graph_limit == 8 and MusaPort.live_graph_limit == 1000


@pytest.mark.parametrize("value", ["-5", "0", "many", "12.5"])
def test_a_torchada_cap_torchada_would_ignore_is_one_line_for_the_cli_and_its_fallback_for_an_engine(monkeypatch,
                                                                                                    value):
    """torchada (``_graph_rotation._read_cap``) ignores a non-integer or non-positive cap and uses 1900: the port says
    so in one line instead of planning 1900 silently; an engine gets torchada's 1900 with that line."""
    monkeypatch.setenv("TORCHADA_GRAPH_EXEC_CAP", value)
    expected = (f"TORCHADA_GRAPH_EXEC_CAP={value!r} is not a positive integer (torchada ignores it and caps live graph "
                "executables at 1900): set a positive count, or unset it for the default")
    with pytest.raises(PortableSpecError) as err:
        MusaPort.live_graph_limit
    assert str(err.value) == expected
    assert MusaPort.runtime_live_graph_limit() == (1900, expected)


def test_injected_device_module_bypasses_detection_and_is_labelled():
    sim = SimulatedMusa()
    port = MusaPort(device_module=sim, label="musa-sim")
    assert port.injected and port.label == "musa-sim" and port.device_module is sim
    assert port.graph_class is sim.MUSAGraph
    with pytest.raises(TypeError, match="no keep_graph"):
        sim.MUSAGraph(keep_graph=True)


def test_missing_device_function_fails_at_binding_not_later():
    incomplete = types.SimpleNamespace(__name__="torch.broken")
    with pytest.raises(PlatformError, match="lacks Stream"):
        MusaPort(device_module=incomplete)


def test_device_functions_are_declared_class_members_read_from_the_ports_module():
    """Declared on the class (a type checker sees them, as PyTorch's DeviceInterface members), each read from the
    instance's own device module, so an injected simulation serves the same declarations."""
    from portable_spec.ports.interface import DevicePort, DeviceFunction

    declared = {name for name, value in vars(DevicePort).items() if isinstance(value, DeviceFunction)}
    assert {"_Stream", "_graph", "_graph_pool_handle", "_is_current_stream_capturing"} <= declared
    assert set(DevicePort.device_functions()) == {vars(DevicePort)[n].attr for n in declared}
    sim = SimulatedMusa()
    port = MusaPort(device_module=sim, label="musa-sim")
    assert "_Stream" not in vars(port)  # nothing bound per instance
    assert port._is_current_stream_capturing == sim.is_current_stream_capturing
    assert MusaPort._graph is vars(DevicePort)["_graph"]  # the class attribute is the declaration



def test_graph_pool_is_one_object_per_device_across_callers():
    created = []
    module = SimulatedMusa(backing=types.SimpleNamespace(
        graph_pool_handle=lambda: created.append(object()) or created[-1], current_device=lambda: 0))
    first, second = MusaPort(device_module=module), MusaPort(device_module=module)
    assert first.graph_pool() is second.graph_pool() is first.graph_pool()
    assert len(created) == 1
    other_device = first.graph_pool(index=1)
    assert other_device is not first.graph_pool() and len(created) == 2


def test_cpu_platform_has_no_graphs_and_says_so():
    cpu = select_platform("cpu", {})
    assert not cpu.is_capturing()
    with pytest.raises(PlatformError, match="has no device graphs"):
        cpu.new_graph()
