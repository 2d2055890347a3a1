"""musa-sim's vLLM platform: our real MUSA platform class with only the device identity simulated.

``MusaSimPlatform`` subclasses ``vllm_adapter.platform.musa.PortableMusaPlatform`` and changes nothing but what a tensor on
the backing CUDA device needs to be served: tensors live on CUDA, so ``device_type`` and ``device_name`` are
"cuda" (vLLM builds ``torch.device(f"{device_name}:{i}")`` for an out-of-tree platform's process groups, and "musa"
is no device type in a CUDA build of torch), ``dispatch_key`` is "CUDA" (vLLM registers its custom ops, attention
among them, on ``current_platform.dispatch_key``; PrivateUse1 kernels would never see a CUDA tensor),
``dist_backend`` is "nccl" (no MCCL here), ``device_control_env_var`` is CUDA_VISIBLE_DEVICES and the compiled ops
are vLLM's CUDA extensions (``import_kernels``). Everything else is
the MUSA class's own code: the config hook and its live-graph budget (torchada's cap, ``TORCHADA_GRAPH_EXEC_CAP``),
``MusaWorker`` (which binds the MUSA kernel substitutes), attention chosen from the MUSA rows of the capability table,
device facts read through ``torch.musa`` — here ``SimulatedMusa``, which enforces the MUSA graph rules (MUSAGraph
without ``keep_graph``, capture under ``inference_mode``, the live-executable cap) on every drafter graph and hands
out the ONE pool vLLM's graphs and ours share.

torchada is not simulated, except, with ``PORTABLE_SPEC_SIM_TORCHADA_GRAPHS=on``, its aliasing of ``torch.cuda``'s
graph API (``musa_sim.alias_torch_cuda_graphs``). Off (the V1 variants), vLLM's own graphs, which call
``torch.cuda.CUDAGraph``/``torch.cuda.graph`` directly, are CUDA graphs on the CUDA device, captured into the same
pool. On (the Model Runner V2 variants), they are the simulated MUSAGraphs, as torchada makes them on MUSA: MRV2's
target and speculator graphs then keep the MUSA rules and count against the simulated live-graph cap.

Every process vLLM starts instantiates its platform once (``vllm.platforms.current_platform``), so the simulated
``torch.musa`` is installed as the MUSA port there, before anything asks the port for a device function.
"""

from __future__ import annotations

from portable_spec.envs import sim_torchada_graphs, sim_vllm_musa_ops
from portable_spec_harness.musa_sim import LABEL, SimulatedMusa, alias_torch_cuda_graphs
from portable_spec.ports.musa_port import MusaPort
from portable_spec.ports.current import install_device_port, installed_port
from portable_spec.vllm_adapter.platform.musa import PortableMusaPlatform

QUALNAME = "portable_spec_harness.musa_sim_platform.MusaSimPlatform"


def install_musa_sim_port() -> MusaPort:
    """This process's MUSA port over a ``SimulatedMusa`` backed by ``torch.cuda`` (once per process); its
    live-executable cap is the one torchada would apply here, so a drafter graph beyond it fails like on MUSA."""
    port = installed_port("musa")
    if port is not None and isinstance(port.device_module, SimulatedMusa):
        return port
    port = MusaPort(device_module=SimulatedMusa(live_graph_cap=MusaPort.runtime_live_graph_limit()[0]), label=LABEL)
    install_device_port(port)
    if sim_torchada_graphs():
        alias_torch_cuda_graphs(port.device_module)
    return port


class MusaSimPlatform(PortableMusaPlatform):
    device_name = "cuda"
    device_type = "cuda"
    dispatch_key = "CUDA"
    dist_backend = "nccl"
    device_control_env_var = "CUDA_VISIBLE_DEVICES"

    def __init__(self) -> None:
        super().__init__()
        install_musa_sim_port()

    @classmethod
    def label(cls) -> str:
        return LABEL

    def is_cuda_alike(self) -> bool:
        """With ``PORTABLE_SPEC_SIM_VLLM_MUSA_OPS=on`` (the Model Runner V2 variants): True, as vllm-musa's platform
        answers with its compiled MUSA ops (here vLLM's CUDA ones, ``import_kernels``); MRV2's UVA buffers need
        them. Otherwise our standalone class's answer (False: no compiled ops without vllm-musa)."""
        return sim_vllm_musa_ops() or super().is_cuda_alike()

    @classmethod
    def import_kernels(cls) -> None:
        """The backing device's compiled ops: vLLM's CUDA extensions (``vllm._C_stable_libtorch``...), as vllm-musa's
        MUSA build of them would be on a MUSA host. Part of the simulated device identity."""
        from portable_spec.vllm_adapter.platform.cuda import PortableCudaPlatform

        PortableCudaPlatform.import_kernels()
