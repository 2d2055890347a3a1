"""A stand-in for vllm-musa 0.1.28, built by the tests (lane vllm-musa-contract).

vllm-musa cannot be installed here at a matching version (it builds a patched vLLM 0.28.0 against torch_musa), so
the composition is tested against this package: a real distribution written into a directory, with a ``.dist-info``
whose entry points vLLM discovers exactly as pip-installed ones (as ``harness/portable_spec_harness/musa_sim_plugin.py``
writes its plugin), and the interface ``portable_spec/vllm_adapter/platform/vllm_musa_contract.py`` lists: the
entry-point names and targets, the probe's answer, ``vllm_musa.platform.MUSAPlatform`` and
``vllm_musa.worker.MTGPUWorker`` with the methods we override, inherit or rely on being absent, and the attention
backends it registers. Re-read against vllm-musa's stored sources on 2026-11-28 (``finalize_config`` and
``validate_cudagraph_config`` added then). It is written by hand from vllm-musa's public sources (facts, not code), NOT generated from
the contract module, so ``tests/test_vllm_musa_contract.py`` can find the two apart.

It is nothing more: no kernels, no ops, no object patches. A stand-in ``torch_musa`` comes with it, because both
probes ask whether ``torch_musa`` imports (that is what makes this interpreter a MUSA host to them); importing it
renames torch's PrivateUse1 backend "musa", as torch_musa does, so only child processes import it. Where vllm-musa
imports torchada (hence torch_musa) when its package loads, the stand-in leaves that to its probe: importing the
stand-in in the test process renames nothing.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from pathlib import Path
from typing import Iterator

DIST_INFO = "vllm_musa-0.1.28.dist-info"

INIT = '''"""Stand-in for vllm-musa 0.1.28, written by portable_spec's tests; never installed by pip."""

__version__ = "0.1.28"
REGISTERED: list[str] = []


def musa_platform_plugin():
    """Answers whenever torch_musa imports (vllm-musa's also asks torchada first)."""
    try:
        import torch_musa  # noqa: F401
    except ImportError:
        return None
    return "vllm_musa.platform.MUSAPlatform"


def register_custom_ops():
    """vllm-musa's applies its object patches and registers ops, communicators and attention backends; this one
    registers the attention backends and says it ran."""
    from vllm_musa.platform import register_attention_backends

    register_attention_backends()
    REGISTERED.append("musa_custom_ops")
'''

PLATFORM = '''"""Stand-in for vllm_musa/platform.py: MUSAPlatformBase, two device-query variants, the MUSAPlatform alias."""

import os

from vllm.platforms.interface import Platform, PlatformEnum
from vllm.v1.attention.backends.registry import AttentionBackendEnum, register_backend

_BACKENDS = "vllm_musa.v1.attention.backends"
REGISTERED_BACKENDS = {
    "FLASHMLA": _BACKENDS + ".mla.flashmla.MUSAFlashMLABackend",
    "FLASHMLA_SPARSE": _BACKENDS + ".mla.flashmla_sparse.MUSAFlashMLASparseBackend",
    "FLASH_ATTN": _BACKENDS + ".flash_attn.MUSAFlashAttentionBackend",
    "TURBOQUANT": _BACKENDS + ".turboquant.MUSATurboQuantAttentionBackend",
}
SELECTION_ORDER = ("FLASH_ATTN", "TRITON_ATTN", "TURBOQUANT")
SEEN = []


def register_attention_backends():
    for member, class_path in REGISTERED_BACKENDS.items():
        register_backend(AttentionBackendEnum[member], class_path=class_path)


class MUSAPlatformBase(Platform):
    _enum = PlatformEnum.OOT
    device_name = "musa"
    device_type = "musa"
    dispatch_key = "MUSA"
    ray_device_key = "GPU"
    dist_backend = "mccl"
    device_control_env_var = "MUSA_VISIBLE_DEVICES"

    def is_cuda_alike(self):
        return True

    def is_sleep_mode_available(self):
        return True

    @classmethod
    def apply_config_platform_defaults(cls, vllm_config):
        SEEN.append("apply_config_platform_defaults")
        custom_ops = vllm_config.compilation_config.custom_ops
        if "all" not in custom_ops and "none" not in custom_ops:
            custom_ops.append("all")

    @classmethod
    def check_and_update_config(cls, vllm_config):
        SEEN.append("check_and_update_config")
        spec = vllm_config.speculative_config
        compilation = vllm_config.compilation_config
        if spec is not None and spec.method == "dflash" and os.environ.get("VLLM_MUSA_DFLASH_FULL_WRAP", "1") != "0":
            from vllm.config import CUDAGraphMode

            block = 1 + int(spec.num_speculative_tokens)
            seqs = vllm_config.scheduler_config.max_num_seqs or 8
            compilation.cudagraph_capture_sizes = [block * n for n in (1, 2, 4, 8) if n <= max(1, seqs)]
            compilation.max_cudagraph_capture_size = compilation.cudagraph_capture_sizes[-1]
            compilation.cudagraph_mode = CUDAGraphMode.FULL
        if vllm_config.parallel_config.worker_cls == "auto":
            vllm_config.parallel_config.worker_cls = "vllm_musa.worker.MTGPUWorker"
        if vllm_config.cache_config.block_size is None:
            vllm_config.cache_config.block_size = 16

    @classmethod
    def finalize_config(cls, vllm_config):
        SEEN.append("finalize_config")

    @classmethod
    def validate_cudagraph_config(cls, vllm_config, *, uniform_decode_query_len):
        """vllm-musa's checks the resolved capture sizes against its fused-MoE RuntimePlan (none here)."""
        SEEN.append("validate_cudagraph_config")

    @classmethod
    def get_attn_backend_cls(cls, selected_backend, attn_selector_config, num_heads=None):
        register_attention_backends()
        return (selected_backend or AttentionBackendEnum[SELECTION_ORDER[0]]).get_path()

    @classmethod
    def get_device_communicator_cls(cls):
        return "vllm.distributed.device_communicators.cuda_communicator.CudaCommunicator"

    @classmethod
    def get_static_graph_wrapper_cls(cls):
        return "vllm.compilation.cuda_graph.CUDAGraphWrapper"

    @classmethod
    def support_static_graph_mode(cls):
        return True


class MtmlMUSAPlatform(MUSAPlatformBase):
    """Device queries through pymtml (not here)."""


class NonMtmlMUSAPlatform(MUSAPlatformBase):
    """Device queries through torch.cuda under torchada (not here)."""


MUSAPlatform = NonMtmlMUSAPlatform
'''

WORKER = '''"""Stand-in for vllm_musa/worker.py: MTGPUWorker, vLLM's Worker with vllm-musa's set-up."""

from vllm.v1.worker.gpu_worker import Worker

SEEN = []


class MTGPUWorker(Worker):
    def __init__(self, vllm_config, local_rank, rank, distributed_init_method, is_driver_worker=False):
        super().__init__(vllm_config=vllm_config, local_rank=local_rank, rank=rank,
                         distributed_init_method=distributed_init_method, is_driver_worker=is_driver_worker)

    def init_device(self):
        import vllm.v1.worker.gpu_model_runner as runner_module

        # What vLLM's init_device is about to see: the device type and the runner class it will build.
        SEEN.append((self.device_config.device_type, runner_module.GPUModelRunner.__name__))
        super().init_device()

    def execute_dummy_batch(self):
        self.model_runner._dummy_run(self.model_runner.uniform_decode_query_len, uniform_decode=True)
'''

TORCH_MUSA = '''"""Stand-in for torch_musa, written by portable_spec's tests: it imports (what both MUSA probes ask) and, as
torch_musa does, names torch's PrivateUse1 backend "musa" (vllm-musa's dispatch key "MUSA" parses then)."""

import torch

if torch._C._get_privateuse1_backend_name() == "privateuseone":
    torch.utils.rename_privateuse1_backend("musa")
'''

METADATA = "Metadata-Version: 2.1\nName: vllm-musa\nVersion: 0.1.28\nSummary: stand-in written by portable_spec tests\n"
ENTRY_POINTS = ("[vllm.general_plugins]\nmusa_custom_ops = vllm_musa:register_custom_ops\n\n"
                "[vllm.platform_plugins]\nmusa = vllm_musa:musa_platform_plugin\n")

FILES = {
    "vllm_musa/__init__.py": INIT,
    "vllm_musa/platform.py": PLATFORM,
    "vllm_musa/worker.py": WORKER,
    f"{DIST_INFO}/METADATA": METADATA,
    f"{DIST_INFO}/entry_points.txt": ENTRY_POINTS,
}
TORCH_MUSA_FILES = {"torch_musa/__init__.py": TORCH_MUSA}

# Our modules that import vllm-musa (they bind its classes at import, so each stand-in needs a fresh import).
COMPOSED_MODULES = ("portable_spec.vllm_adapter.platform.vllm_musa_platform",
                    "portable_spec.vllm_adapter.worker.vllm_musa_worker")


def write(root: Path, *, vllm_musa: bool = True) -> Path:
    """Write the stand-in under ``root`` (``vllm_musa=False``: only the stand-in torch_musa, a MUSA host without
    vllm-musa); returns ``root``, the directory to put on the path."""
    files = {**TORCH_MUSA_FILES, **(FILES if vllm_musa else {})}
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def _forget() -> None:
    for name in list(sys.modules):
        if name.split(".")[0] in ("vllm_musa", "torch_musa") or name in COMPOSED_MODULES:
            del sys.modules[name]
    importlib.invalidate_caches()


@contextlib.contextmanager
def installed(root: Path, *, vllm_musa: bool = True) -> Iterator[Path]:
    """The stand-in on this process's path (first), for the body; removed after, with every module it loaded."""
    write(root, vllm_musa=vllm_musa)
    sys.path.insert(0, str(root))
    _forget()
    try:
        yield root
    finally:
        sys.path.remove(str(root))
        _forget()


def env(root: Path, *, vllm_musa: bool = True, **extra: str) -> dict[str, str]:
    """A child process's environment with the stand-in first on ``PYTHONPATH`` (and no inherited VLLM_PLATFORM or
    VLLM_PLUGINS unless ``extra`` sets them)."""
    write(root, vllm_musa=vllm_musa)
    base = {k: v for k, v in os.environ.items() if k not in ("VLLM_PLATFORM", "VLLM_PLUGINS")}
    path = [str(root), *[p for p in base.get("PYTHONPATH", "").split(os.pathsep) if p]]
    return {**base, "PYTHONPATH": os.pathsep.join(path), **extra}
