"""``VLLM_PLATFORM=musa``: a vLLM platform for Moore Threads GPUs (torch_musa + torchada).

Declared, not run: no MUSA device is available to this project, so this class is tested at the configuration and
construction level (and its graph code paths through musa-sim). vLLM's graph wrappers call ``torch.cuda.*`` directly;
torchada aliases those to ``torch.musa`` once our port imports it, and the graph pool comes from our port so vLLM's
graphs and our drafter's graphs share ONE pool per device.

The musa-sim engine lane serves real vLLM engines with this class's code, only its device identity changed
(``harness/musa_sim_platform.py``): that is where a method vLLM calls at start-up but the base class leaves raising
would show (hence ``manual_seed_all``, ``check_if_supports_dtype``, ``num_compute_units``).
"""

from __future__ import annotations

import logging
from typing import Any

import torch
from vllm.platforms.interface import DeviceCapability, Platform, PlatformEnum

from portable_spec.vllm_adapter.platform.base import PortableSpecPlatformMixin, SharedPoolMixin
from portable_spec.vllm_adapter.platform.qualnames import MUSA_WORKER
from portable_spec.ports.current import device_port

logger = logging.getLogger("portable_spec.vllm_adapter")

BF16_MIN_CAPABILITY = 22
"""MUSA 2.2 (MTT S4000): vllm-musa maps CUDA 8.0, vLLM's bf16 threshold, to MUSA 2.2."""


def _musa() -> Any:
    """The ``torch.musa`` module our port bound (a musa-sim module in simulation)."""
    return device_port("musa").device_module


class PortableMusaPlatform(PortableSpecPlatformMixin, SharedPoolMixin, Platform):
    _enum = PlatformEnum.OOT
    device_name = "musa"
    device_type = "musa"
    dispatch_key = "PrivateUse1"  # torch_musa registers MUSA as the renamed PrivateUse1 backend
    ray_device_key = "GPU"
    dist_backend = "mccl"
    device_control_env_var = "MUSA_VISIBLE_DEVICES"
    port_name = "musa"
    worker_cls = MUSA_WORKER  # vLLM 0.26.0's gpu_worker.Worker rejects any device_type but "cuda"

    @classmethod
    def check_and_update_config(cls, vllm_config: Any) -> None:
        super().check_and_update_config(vllm_config)
        from vllm.platforms import current_platform

        if vllm_config.use_v2_model_runner and not current_platform.is_cuda_alike():
            logger.warning(
                "portable_spec[%s]: vLLM picked Model Runner V2, which needs vLLM's compiled ops (UVA views, "
                "torch.ops._C.get_cuda_view_from_cpu_tensor); on MUSA only vllm-musa provides them: install vllm-musa "
                "(our layer then builds on its platform), or set VLLM_USE_V2_MODEL_RUNNER=0 for the V1 runner",
                cls.label())

    @classmethod
    def support_static_graph_mode(cls) -> bool:
        return True

    @classmethod
    def get_static_graph_wrapper_cls(cls) -> str:
        return "vllm.compilation.cuda_graph.CUDAGraphWrapper"

    @classmethod
    def get_device_communicator_cls(cls) -> str:
        return "vllm.distributed.device_communicators.cuda_communicator.CudaCommunicator"

    def is_sleep_mode_available(self) -> bool:
        return False

    @classmethod
    def opaque_attention_op(cls) -> bool:
        """Attention as vLLM's one opaque custom op, as vLLM's CUDA, ROCm, XPU and CPU platforms have it: piecewise
        splitting and FULL graphs then see the same op boundaries as on CUDA (a direct call lets Dynamo trace into
        the backend's Python and its forward context)."""
        return True

    @classmethod
    def manual_seed_all(cls, seed: int) -> None:
        """vLLM's worker seeds every device at start-up (the base class raises)."""
        _musa().manual_seed_all(seed)

    @classmethod
    def check_if_supports_dtype(cls, dtype: torch.dtype) -> None:
        """vLLM's worker asks at start-up (the base class raises): bf16 needs MUSA 2.2 or newer."""
        if dtype == torch.bfloat16 and not cls.has_device_capability(BF16_MIN_CAPABILITY):
            capability = cls.get_device_capability()
            raise ValueError(f"bfloat16 needs MUSA capability 2.2 (MTT S4000) or newer; {cls.get_device_name()} has "
                             f"{capability.major}.{capability.minor}: pass --dtype float16")

    @classmethod
    def check_runner_kv_caches_multi_layer(cls) -> None:
        """vLLM 0.28.0's ``bind_kv_cache`` asks when two attention layers share one layer index (the base class
        raises): the separate draft model's layers (``draft_model.model.layers.N``) share the target's indices. The
        runners on MUSA are vLLM's GPU runners, which vLLM's CUDA platform declares unaffected (a no-op there too).
        vLLM 0.26.0 has no such hook: it lets only CUDA-alike, XPU and CPU platforms through, so our MUSA class
        cannot serve the draft model on 0.26.0's V1 runner (``MusaSimPart.since``)."""

    @classmethod
    def num_compute_units(cls, device_id: int = 0) -> int:
        """vLLM's V1 model runner reads it at construction (the base class raises)."""
        return int(_musa().get_device_properties(device_id).multi_processor_count)

    @classmethod
    def get_attn_backend_cls(cls, selected_backend: Any, attn_selector_config: Any, num_heads: int | None = None) -> str:
        """Pick from our declared MUSA table (non-causal DFlash drafts refuse backends without ``non_causal``)."""
        from vllm.v1.attention.backends.registry import AttentionBackendEnum

        from portable_spec.attention_caps.selection import select_for_vllm

        row = select_for_vllm("musa", selected_backend, attn_selector_config)
        # MUSA FLASH_ATTN ships with vllm-musa (mate kernels) and registers itself over the enum member.
        path = row.class_path or AttentionBackendEnum[row.backend].get_path()
        logger.info("portable_spec[%s]: attention backend %s from the MUSA rows of the capability table (%s)",
                    cls.label(), row.backend, path)
        return path

    @classmethod
    def get_device_capability(cls, device_id: int = 0) -> DeviceCapability:
        major, minor = _musa().get_device_capability(device_id)
        return DeviceCapability(major=major, minor=minor)

    @classmethod
    def get_device_name(cls, device_id: int = 0) -> str:
        return str(_musa().get_device_name(device_id))

    @classmethod
    def get_device_total_memory(cls, device_id: int = 0) -> int:
        return int(_musa().get_device_properties(device_id).total_memory)

    @classmethod
    def set_device(cls, device: torch.device) -> None:
        _musa().set_device(device)

    @classmethod
    def get_current_memory_usage(cls, device: torch.types.Device | None = None) -> float:
        musa = _musa()
        musa.empty_cache()
        musa.reset_peak_memory_stats(device)
        return float(musa.max_memory_allocated(device))

    @classmethod
    def supports_fp8(cls) -> bool:
        # MUSA numbering: 3.1 is the MTT S5000, the first with fp8 (vllm-musa maps CUDA 8.9 to MUSA 3.1).
        return cls.has_device_capability(31)
