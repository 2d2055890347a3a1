"""``VLLM_PLATFORM=rocm``: vLLM's ROCm platform plus our hooks. Declared; no ROCm device has run it here."""

from vllm.platforms.rocm import RocmPlatform

from portable_spec.vllm_adapter.platform.base import PortableSpecPlatformMixin, SharedPoolMixin


class PortableRocmPlatform(PortableSpecPlatformMixin, SharedPoolMixin, RocmPlatform):
    port_name = "rocm"
