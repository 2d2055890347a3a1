"""The Triton cache folder as tests see it, read on their own rather than through the product's helper:
``build_an_inductor_autotuner`` builds one real inductor ``CachingAutotuner`` (the object whose construction sets
``TRITON_CACHE_DIR`` where unset) on the CPU: a trivial Triton kernel, one config, the CPU's device properties; nothing
is compiled or launched, only the constructor runs, as it does for each inductor kernel a warm-up builds.
``tritons_default_folder_seen`` reads Triton's own folder with the variable unset."""

from __future__ import annotations

from typing import Any


def tritons_default_folder_seen(monkeypatch) -> str | None:
    """Triton's cache knob read with TRITON_CACHE_DIR unset for the moment (None without Triton: the warm-ups then
    leave the variable unset)."""
    try:
        import triton
    except ImportError:
        return None
    with monkeypatch.context() as m:
        m.delenv("TRITON_CACHE_DIR", raising=False)
        return str(triton.knobs.cache.dir)


def build_an_inductor_autotuner() -> Any:
    import torch
    import triton
    import triton.language as tl
    from torch._inductor.runtime.hints import DeviceProperties, HeuristicType
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner

    @triton.jit
    def untouched(x_ptr, n: tl.constexpr):
        pass

    meta = {"device": DeviceProperties.create(torch.device("cpu")), "signature": {}, "constants": {}}
    return CachingAutotuner(untouched, meta, [triton.Config({})], None, [], False, HeuristicType.POINTWISE,
                            size_hints={"x": 16}, inductor_meta={})
