"""Builds one real inductor ``CachingAutotuner`` (the object whose construction sets ``TRITON_CACHE_DIR`` where unset),
on the CPU: a trivial Triton kernel, one config, the CPU's device properties. Nothing is compiled or launched; only the
constructor runs, as it does for each inductor kernel a warm-up builds."""

from __future__ import annotations

from typing import Any


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
