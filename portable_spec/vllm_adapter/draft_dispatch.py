"""Our draft keys as real vLLM 0.26.0 ``CudagraphDispatcher`` objects: one per query length.

A vLLM dispatcher computes uniform keys with ONE ``uniform_decode_query_len`` (fixed from ``1 + K`` in its
constructor) and one capture list (``compilation_config.cudagraph_capture_sizes``). A FULL drafter has a first step at
1+K and EAGLE chain steps at 1, each with its own sizes, so each query length gets its own dispatcher: same
``VllmConfig`` (scheduler, LoRA), its own copy of the compilation config carrying that step's sizes and mode, and
``uniform_decode_query_len`` set before ``initialize_cudagraph_keys``. FULL steps map to ``FULL_DECODE_ONLY`` (plain
FULL makes only non-uniform keys); PIECEWISE steps to ``PIECEWISE``; NONE steps to ``NONE``.
"""

from __future__ import annotations

import copy
from typing import Any

from portable_spec.draft.dispatcher import DraftDispatcher, DraftKey
from portable_spec.errors import PortableSpecError


def _vllm_mode(mode: str) -> Any:
    from vllm.config import CUDAGraphMode

    return {"FULL": CUDAGraphMode.FULL_DECODE_ONLY, "PIECEWISE": CUDAGraphMode.PIECEWISE,
            "NONE": CUDAGraphMode.NONE}[mode]


def build_vllm_dispatchers(draft: DraftDispatcher, vllm_config: Any) -> dict[int, Any]:
    """``{query_len: CudagraphDispatcher}`` whose keys are exactly ``draft``'s keys of that query length."""
    from vllm.v1.cudagraph_dispatcher import CudagraphDispatcher

    seqs = vllm_config.scheduler_config.max_num_seqs
    if seqs != draft.max_num_seqs:
        raise PortableSpecError(f"the draft plan was made for max_num_seqs {draft.max_num_seqs} but the engine runs "
                                f"{seqs}: re-plan with the engine's max_num_seqs")
    by_q: dict[int, str] = {}
    result: dict[int, Any] = {}
    for kind in draft.step_kinds:
        q, mode = draft.query_len(kind), draft.mode(kind)
        if q in by_q:
            raise PortableSpecError(f"draft steps {by_q[q]!r} and {kind!r} share query length {q}; one vLLM "
                                    "dispatcher per query length cannot hold two size lists")
        by_q[q] = kind
        sizes = sorted({k.num_tokens for k in draft.keys_for(kind)})
        cc = copy.copy(vllm_config.compilation_config)
        cc.cudagraph_mode = _vllm_mode(mode if sizes else "NONE")
        cc.cudagraph_capture_sizes = sizes
        cc.max_cudagraph_capture_size = sizes[-1] if sizes else 0
        cc.compile_sizes = []
        dispatcher = CudagraphDispatcher(vllm_config)
        dispatcher.compilation_config = cc
        dispatcher.uniform_decode_query_len = q
        dispatcher.initialize_cudagraph_keys(cc.cudagraph_mode, q)
        result[q] = dispatcher
    return result


def to_batch_descriptor(key: DraftKey) -> Any:
    """The vLLM ``BatchDescriptor`` a graphed key corresponds to (what ``set_forward_context`` must receive)."""
    from vllm.forward_context import BatchDescriptor

    return BatchDescriptor(num_tokens=key.num_tokens, num_reqs=key.num_reqs, uniform=key.uniform)


def vllm_dispatch(dispatchers: dict[int, Any], key_or_q: DraftKey | int, num_tokens: int | None = None,
                  uniform: bool = True) -> tuple[Any, Any]:
    """Dispatch through the vLLM dispatcher of a query length (``(CUDAGraphMode, BatchDescriptor)``)."""
    if isinstance(key_or_q, DraftKey):
        q, tokens = key_or_q.query_len, key_or_q.num_tokens if num_tokens is None else num_tokens
    else:
        q, tokens = key_or_q, num_tokens
    if q not in dispatchers:
        raise PortableSpecError(f"no vLLM dispatcher for query length {q}: build them with build_vllm_dispatchers")
    if tokens is None:
        raise PortableSpecError("vllm_dispatch needs num_tokens when given a query length")
    return dispatchers[q].dispatch(tokens, uniform_decode=uniform)
