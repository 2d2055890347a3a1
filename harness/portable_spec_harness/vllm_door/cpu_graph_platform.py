"""A CPU-importable vLLM platform carrying our hooks, for configuration tests on machines without a GPU.

vLLM's ``CpuPlatform`` forces ``cudagraph_mode=NONE`` and its CUDA/ROCm modules do not import without a GPU, so
config tests pin this class (``vllm.platforms._current_platform``) to exercise the capture planner inside a real
``VllmConfig``. It never runs a model.
"""

from vllm.platforms.interface import Platform, PlatformEnum

from portable_spec.vllm_adapter.platform.base import PortableSpecPlatformMixin


class CpuGraphTestPlatform(PortableSpecPlatformMixin, Platform):
    _enum = PlatformEnum.OOT
    device_name = "cpu"
    device_type = "cpu"
    dispatch_key = "CPU"
    dist_backend = "gloo"
    port_name = "cpu"

    @classmethod
    def support_static_graph_mode(cls) -> bool:
        return True

    @classmethod
    def is_pin_memory_available(cls) -> bool:
        return False  # no accelerator: torch has no pinned-memory allocator here

    @classmethod
    def get_device_name(cls, device_id: int = 0) -> str:
        return "cpu (graph-config test platform)"
