"""``VLLM_PLATFORM=cuda``: vLLM's CUDA platform plus our hooks (capture planner, shared pool)."""

from vllm.platforms.cuda import CudaPlatform

from portable_spec.vllm_adapter.platform.base import PortableSpecPlatformMixin, SharedPoolMixin


class PortableCudaPlatform(PortableSpecPlatformMixin, SharedPoolMixin, CudaPlatform):
    port_name = "cuda"
