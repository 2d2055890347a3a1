"""Run in its own process (``python tests/rocm_platform_decisions.py gfx942``, or an arch per process forked after the
imports, ``FORK_IMPORTS`` and ``case`` with ``tests/forked_children.run_forked``): vLLM's ``RocmPlatform`` and our
``PortableRocmPlatform`` asked the same config-level questions on a stand-in AMD device; prints one JSON object.

vLLM's ROCm module reads the device's arch when it is imported (amdsmi, else ``torch.cuda.get_device_properties``),
so on a CPU host the stand-in answers that one call with the arch under test; every decision after it is vLLM's own
code on both classes. It runs in a subprocess because the tests' process pins another vLLM platform, and because
the arch is read once per process.
"""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

HEAD_SIZES = (64, 128, 256)
DTYPES = ("bfloat16", "float16")
KV_CACHE_DTYPES = ("auto", "fp8")


def _stand_in_device(arch: str) -> None:
    """The arch read at import, and vLLM's Triton switch on (vLLM turns it off where no GPU driver is loaded, and
    some backends' modules need the real ``triton.language`` at import)."""
    import importlib

    import torch
    import vllm.triton_utils
    import vllm.triton_utils.importing as importing

    props = types.SimpleNamespace(gcnArchName=arch, name=f"stand-in {arch}", total_memory=64 << 30,
                                  multi_processor_count=104, major=9, minor=0)
    torch.cuda.get_device_properties = lambda *args, **kwargs: props
    importing.HAS_TRITON = True
    importlib.reload(vllm.triton_utils)


def _backend(cls: Any, head_size: int, dtype: str, kv_cache_dtype: str) -> str:
    """The backend ``cls`` picks with no ``--attention-backend``, and the graph support its metadata builder
    declares (what vLLM's cudagraph mode is checked against)."""
    import importlib

    import torch
    from vllm.v1.attention.selector import AttentionSelectorConfig

    config = AttentionSelectorConfig(head_size=head_size, dtype=getattr(torch, dtype), kv_cache_dtype=kv_cache_dtype,
                                     block_size=16)
    try:
        path = cls.get_attn_backend_cls(None, config)
    except (ValueError, ImportError) as exc:  # vLLM's refusal is the decision
        return f"refused: {type(exc).__name__}"
    module, _, name = path.rpartition(".")
    builder = getattr(importlib.import_module(module), name).get_builder_cls()
    support = getattr(builder, "_cudagraph_support", None)
    return f"{name} ({getattr(support, 'name', support)})"


def decisions(cls: Any) -> dict[str, Any]:
    """What ``cls`` decides, in vLLM's terms, for the stand-in device."""
    cap = cls.get_device_capability()
    return {
        "device_capability": [cap.major, cap.minor] if cap else None,
        "fp8_dtype": str(cls.fp8_dtype()), "is_fp8_fnuz": cls.is_fp8_fnuz(), "supports_fp8": cls.supports_fp8(),
        "use_custom_allreduce": cls.use_custom_allreduce(),
        "support_static_graph_mode": cls.support_static_graph_mode(),
        "static_graph_wrapper": cls.get_static_graph_wrapper_cls(),
        "attention": {f"{dtype}/{head}/{kv}": _backend(cls, head, dtype, kv)
                      for dtype in DTYPES for head in HEAD_SIZES for kv in KV_CACHE_DTYPES},
        "graph_pool_from": min((k for k in type.mro(cls) if "get_global_graph_pool" in vars(k)),
                               key=type.mro(cls).index).__module__,
    }


FORK_IMPORTS = """
    import torch
    import vllm.triton_utils
    import vllm.triton_utils.importing
"""
"""What ``_stand_in_device`` imports before it stands the device in (torch and vLLM, ~5 s and more a process on the
lane's machine): ``tests/forked_children.run_forked`` makes them once and forks a process per arch from there, each
starting where a fresh process of ``main`` would be at that point."""


def case(arch: str) -> str:
    """One arch's code for ``run_forked``: ``main`` in the forked process, its JSON on stdout."""
    return f"import json, sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); " \
           f"import rocm_platform_decisions as d; print(json.dumps(d.main({arch!r})))"


def main(arch: str) -> dict[str, Any]:
    _stand_in_device(arch)
    import vllm.platforms.rocm as rocm

    from portable_spec.ports.rocm_port import fp8_dtype_for_arch
    from portable_spec.vllm_adapter.platform.rocm import PortableRocmPlatform

    return {"arch": rocm._GCN_ARCH, "vllm": decisions(rocm.RocmPlatform), "ours": decisions(PortableRocmPlatform),
            "our_port_fp8_dtype": str(fp8_dtype_for_arch(arch))}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
