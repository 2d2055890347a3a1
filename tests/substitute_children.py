"""Child processes of tests/test_attention_substitutes.py (each prints one JSON line): vLLM's TRITON_ATTN kernels
as vLLM ships them and with our MUSA substitutes bound, run by the Triton interpreter or built by Triton's front end.

vLLM turns Triton off on a host without a GPU driver; ``enable_vllm_triton`` pins a CPU-importable vLLM platform
and turns it back on, so the objects compared are vLLM's real kernels. Run: python substitute_children.py NAME...
(several names share one process, and so one import of vLLM; the line maps each name to its result). Each child
binds the substitutes and unbinds them before it returns.
"""

from __future__ import annotations

import importlib
import json
import re
import sys

import torch

from portable_spec.kernels import registry
from portable_spec.vllm_adapter.patch import version_gate
from portable_spec.vllm_adapter.tools.triton_check_worker import enable_vllm_triton

enable_vllm_triton()

import triton  # noqa: E402
import triton.language as tl  # noqa: E402
import vllm.v1.attention.ops.triton_attention_helpers as helpers  # noqa: E402
import vllm.v1.attention.ops.triton_unified_attention as ua  # noqa: E402

from portable_spec.attention_caps.reference import TOLERANCES, build_case, compare, reference_attention  # noqa: E402


def _attention_case(seed: int, seq_lens: list[int], query_lens: list[int], *, causal: bool, padded: int,
                    head_size: int = 64) -> dict:
    """A vLLM-layout batch (float32) with ``padded`` trailing graph-padding requests (no queries, no K/V)."""
    gen = torch.Generator().manual_seed(seed)
    keys = [torch.randn(s, 2, head_size, generator=gen) for s in seq_lens]
    values = [torch.randn(s, 2, head_size, generator=gen) for s in seq_lens]
    q = torch.randn(sum(query_lens), 8, head_size, generator=gen)
    case = build_case(keys, values, q, query_lens, causal=causal, seed=seed + 1)
    cu = torch.cat([case.cu_seqlens_q, case.cu_seqlens_q[-1:].repeat(padded)])
    seqused = torch.cat([case.seqused_k, torch.zeros(padded, dtype=torch.int32)])
    table = torch.cat([case.block_table, torch.zeros(padded, case.block_table.shape[1], dtype=torch.int32)])
    return {"case": case, "cu": cu, "seqused": seqused, "table": table}


def _run_attention(c: dict, use_3d: bool) -> torch.Tensor:
    case = c["case"]
    tokens, heads, dim = case.q.shape
    out = torch.full_like(case.q, float("nan"))
    extra = {}
    if use_3d:
        segments = 4
        extra = dict(seq_threshold_3D=128, num_par_softmax_segments=segments,
                     softmax_segm_output=torch.empty(tokens, heads, segments, dim),
                     softmax_segm_max=torch.empty(tokens, heads, segments),
                     softmax_segm_expsum=torch.empty(tokens, heads, segments))
    num_seqs = len(c["seqused"])
    ua.unified_attention(q=case.q, k=case.k_cache, v=case.v_cache, out=out, cu_seqlens_q=c["cu"],
                         max_seqlen_q=max(case.query_lens), seqused_k=c["seqused"], max_seqlen_k=max(case.seq_lens),
                         softmax_scale=case.scale, causal=case.causal, window_size=(-1, -1), block_table=c["table"],
                         softcap=0, q_descale=None, k_descale=torch.ones(num_seqs, 2),
                         v_descale=torch.ones(num_seqs, 2), **extra)
    return out


def unified_attention() -> dict:
    gen = torch.Generator().manual_seed(2026)
    specs = [  # (name, seq_lens, query_lens, causal, padded, 3D)
        ("verify_with_empty_rows", [20, 7, 33, 1, 16], [3, 0, 5, 1, 4], True, 2, False),
        ("dflash_block_noncausal", [12, 30, 9], [4, 4, 4], False, 1, False),
        ("decode_3d_split_softmax", [40, 3, 17, 64], [1, 1, 1, 1], True, 3, True),
    ]
    for i in range(3):  # random shapes
        n = int(torch.randint(1, 6, (1,), generator=gen))
        seqs = torch.randint(1, 70, (n,), generator=gen).tolist()
        queries = [int(torch.randint(0, min(s, 6) + 1, (1,), generator=gen)) for s in seqs]
        queries[0] = max(queries[0], 1)
        specs.append((f"random{i}", seqs, queries, bool(i % 2 == 0), i, max(queries) == 1))
    out = {"derived_kernel": None, "cases": {}}
    for seed, (name, seqs, queries, causal, padded, use_3d) in enumerate(specs):
        c = _attention_case(seed, seqs, queries, causal=causal, padded=padded)
        shipped = _run_attention(c, use_3d)
        try:
            registry.install_substitutions("musa", pick=version_gate.pick)
            out["derived_kernel"] = ua.kernel_unified_attention.fn.__module__
            substituted = _run_attention(c, use_3d)
        finally:
            registry.uninstall()
        ref = reference_attention(c["case"])
        out["cases"][name] = {"bitwise_equal": bool(torch.equal(shipped, substituted)), "rows": shipped.shape[0],
                              "vs_reference": compare(substituted, ref, TOLERANCES["float32"])["ok"],
                              "vllm_vs_reference": compare(shipped, ref, TOLERANCES["float32"])["ok"]}
    return out


@triton.jit
def _lookup(cu_ptr, targets_ptr, out_ptr, num_seqs, BLOCK_Q: tl.constexpr, Q_BLOCK_MODE: tl.constexpr):
    i = tl.program_id(0)
    target = tl.load(targets_ptr + i)
    tl.store(out_ptr + i, helpers.find_seq_idx(cu_ptr, target, num_seqs, BLOCK_Q, Q_BLOCK_MODE))


def _lookup_reference(cu: list[int], target: int, block_q: int, q_block_mode: bool) -> int:
    """The last sequence whose (q-block) start is <= target, -1 if none: what find_seq_idx's search returns."""
    starts = [v // block_q + i if q_block_mode else v for i, v in enumerate(cu[:-1])]
    return max([i for i, s in enumerate(starts) if s <= target], default=-1)


def find_seq_idx() -> dict:
    gen = torch.Generator().manual_seed(94)
    results = []
    for trial in range(6):
        num_seqs = int(torch.randint(1, 12, (1,), generator=gen))
        lens = torch.randint(0, 9, (num_seqs,), generator=gen)
        lens[torch.rand(num_seqs, generator=gen) < 0.3] = 0  # zero-length rows
        cu = torch.cat([torch.zeros(1, dtype=torch.int64), lens.cumsum(0)]).to(torch.int32)
        block_q, mode = (4, True) if trial % 2 == 0 else (1, False)
        top = int(cu[-1]) // block_q + num_seqs + 3
        targets = torch.arange(-1, top, dtype=torch.int32)
        got = {}
        for bound in ("vllm", "substituted"):
            out = torch.full_like(targets, -777)
            try:
                if bound == "substituted":
                    registry.install_substitutions("musa", pick=version_gate.pick)
                _lookup[(targets.numel(),)](cu, targets, out, num_seqs, BLOCK_Q=block_q, Q_BLOCK_MODE=mode)
                got[bound] = out.tolist()
            finally:
                registry.uninstall()
        want = [_lookup_reference(cu.tolist(), t, block_q, mode) for t in targets.tolist()]
        results.append({"equal": got["vllm"] == got["substituted"], "reference": got["substituted"] == want,
                        "zero_rows": int((lens == 0).sum())})
    return {"trials": results}


def _ir(key: str) -> tuple[str, list[str]]:
    from portable_spec.kernels.triton_compile import ttir
    from portable_spec_harness.synthetic.triton_cases import SOURCE
    from portable_spec.kernels.triton_table import kernel_cases

    case = next(c for c in kernel_cases((SOURCE,)) if c.key == key)
    fn = getattr(importlib.import_module(case.module), case.attr)
    text = ttir(fn, case.signature, case.constexprs)
    return fn.cache_key, sorted(set(re.findall(r'tt\.func (?:private|public) @"?([\w.]+?)__', text)))


def compiled_helpers() -> dict:
    out = {"triton": triton.__version__, "before": _ir("reduce_segments")}
    try:
        registry.install_substitutions("musa", pick=version_gate.pick)
        out["bound"] = _ir("reduce_segments")
        out["kernel"] = _ir("kernel_unified_attention[2d]")
        out["kernel_object"] = ua.kernel_unified_attention.fn.__module__
    finally:
        registry.uninstall()
    out["after"] = _ir("reduce_segments")
    return out


if __name__ == "__main__":
    print(json.dumps({name: globals()[name]() for name in sys.argv[1:]}))
