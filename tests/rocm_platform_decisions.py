"""Run in its own process (``python tests/rocm_platform_decisions.py gfx942``, or several arches, each in a process
forked after the imports, ``forked``): vLLM's ``RocmPlatform`` and our
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


def forked(arches: list[str]) -> dict[str, Any]:
    """``main`` for each arch, each in a process of its own (the arch is read once per process), forked from this
    one after the imports ``_stand_in_device`` makes before it stands the device in (torch and vLLM, ~5 s and more
    a process on the lane's machine): each child starts where a fresh process of ``main`` would be at that point."""
    import os

    import torch  # noqa: F401
    import vllm.triton_utils  # noqa: F401
    import vllm.triton_utils.importing  # noqa: F401

    out = {}
    for arch in arches:
        read, write = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            rc = 1
            try:
                with os.fdopen(write, "w") as pipe:
                    pipe.write(json.dumps(main(arch)))
                rc = 0
            finally:
                sys.stderr.flush()
                os._exit(rc)
        os.close(write)
        with os.fdopen(read) as pipe:
            text = pipe.read()
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"{arch}: the forked process exited with {os.waitstatus_to_exitcode(status)}")
        out[arch] = json.loads(text)
    return out


def main(arch: str) -> dict[str, Any]:
    _stand_in_device(arch)
    import vllm.platforms.rocm as rocm

    from portable_spec.ports.rocm_port import fp8_dtype_for_arch
    from portable_spec.vllm_adapter.platform.rocm import PortableRocmPlatform

    return {"arch": rocm._GCN_ARCH, "vllm": decisions(rocm.RocmPlatform), "ours": decisions(PortableRocmPlatform),
            "our_port_fp8_dtype": str(fp8_dtype_for_arch(arch))}


if __name__ == "__main__":
    # one arch: its decisions; several: {arch: decisions}, a forked process each
    print(json.dumps(main(sys.argv[1]) if len(sys.argv) == 2 else forked(sys.argv[1:])))
