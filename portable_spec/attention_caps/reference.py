"""Paged attention inputs and the float32 torch reference every backend kernel is checked against.

A ``PagedCase`` is a small varlen batch stored the way vLLM stores it: a paged K/V cache
(``[num_blocks, block_size, num_kv_heads, head_size]``, blocks assigned in shuffled order, unused slots filled with
loud garbage so an out-of-range read shows), a block table, ``cu_seqlens_q`` and the per-sequence KV lengths. Query
tokens are the last ``query_len`` positions of each sequence, as in a decode, a spec-decode verify or a DFlash block.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

GARBAGE = 50.0
"""Value in cache slots no sequence owns: a kernel that reads them produces visibly wrong output."""


@dataclass(frozen=True)
class Tolerance:
    """``|out - ref| <= atol + rtol * |ref|`` elementwise, and (where set) ``rms(out - ref) <= rel_rms * rms(ref)``
    for every query token (a row: all heads and dims), so one bad sequence in a batch cannot hide in the average."""

    atol: float
    rtol: float
    rel_rms: float | None = None

    def to_dict(self) -> dict[str, float | None]:
        return {"atol": self.atol, "rtol": self.rtol, "rel_rms": self.rel_rms}


TOLERANCES = {
    "float16": Tolerance(atol=5e-3, rtol=1e-2),
    "bfloat16": Tolerance(atol=1.5e-2, rtol=2e-2),
    "float32": Tolerance(atol=1e-4, rtol=1e-4),
    "fp8": Tolerance(atol=1.0, rtol=0.1, rel_rms=0.2),
}
"""bf16/fp16: a few output ulps. fp8 (K/V, and Q and P where the kernel quantizes them, in e4m3): a value near 4
moves by up to 0.25 when quantized and errors compound, so the elementwise bound only catches gross errors and the
per-token relative RMS error carries the check. A simulated e4m3 Q/K/V pipeline measures at most 0.056 per token
(tests/test_attention_caps.py), vLLM's Triton kernel with fp8 Q and K/V 0.11 (Triton interpreter on CPU); one
page of garbage keys gives 0.58.
A kernel reading the wrong pages, scales or layout lands far outside both."""


@dataclass
class PagedCase:
    """One varlen batch in vLLM's paged layout plus the logical K/V it was built from."""

    q: torch.Tensor                 # [total_q, num_q_heads, head_size]
    keys: list[torch.Tensor]        # per sequence [seq_len, num_kv_heads, head_size]
    values: list[torch.Tensor]
    query_lens: list[int]
    seq_lens: list[int]
    block_size: int
    k_cache: torch.Tensor           # [num_blocks, block_size, num_kv_heads, head_size]
    v_cache: torch.Tensor
    block_table: torch.Tensor       # [num_seqs, max_blocks_per_seq] int32
    slot_mapping: torch.Tensor      # [sum(seq_lens)] int64: cache slot of every K/V token, sequence by sequence
    cu_seqlens_q: torch.Tensor      # [num_seqs + 1] int32
    seqused_k: torch.Tensor         # [num_seqs] int32
    causal: bool
    scale: float
    sinks: torch.Tensor | None = None   # [num_q_heads] float32 sink logits
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def num_q_heads(self) -> int:
        return self.q.shape[1]

    @property
    def num_kv_heads(self) -> int:
        return self.keys[0].shape[1]

    @property
    def head_size(self) -> int:
        return self.q.shape[2]

    @property
    def max_query_len(self) -> int:
        return max(self.query_lens)

    @property
    def max_seq_len(self) -> int:
        return max(self.seq_lens)

    def key_tokens(self) -> torch.Tensor:
        """All K tokens, sequence by sequence, matching ``slot_mapping`` (the input of a cache-write op)."""
        return torch.cat(self.keys)

    def value_tokens(self) -> torch.Tensor:
        return torch.cat(self.values)

    def query_rows(self, seq: int) -> slice:
        start = int(sum(self.query_lens[:seq]))
        return slice(start, start + self.query_lens[seq])


def make_case(seq_lens: list[int], query_lens: list[int], *, num_q_heads: int = 8, num_kv_heads: int = 2,
              head_size: int = 128, block_size: int = 16, dtype: torch.dtype = torch.bfloat16,
              device: torch.device | str = "cpu", causal: bool = True, sinks: bool = False, seed: int = 0,
              spare_blocks: int = 3) -> PagedCase:
    """A random batch: sequence ``i`` has ``seq_lens[i]`` K/V tokens, its last ``query_lens[i]`` are queries."""
    if len(seq_lens) != len(query_lens) or not seq_lens:
        raise ValueError("seq_lens and query_lens need one entry per sequence")
    if any(q < 1 or q > s for q, s in zip(query_lens, seq_lens)):
        raise ValueError("each query_len must be in 1..seq_len")
    if num_q_heads % num_kv_heads:
        raise ValueError("num_q_heads must be a multiple of num_kv_heads")
    gen = torch.Generator().manual_seed(seed)

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=gen).to(dtype)

    keys = [randn(s, num_kv_heads, head_size) for s in seq_lens]
    values = [randn(s, num_kv_heads, head_size) for s in seq_lens]
    q = randn(sum(query_lens), num_q_heads, head_size)
    # Sink logits are model parameters in the model dtype (vLLM's FA3 takes them as bf16 only); round them to
    # bfloat16 once here so the kernel and the float32 reference use the very same values.
    sink_logits = ((0.5 * torch.randn(num_q_heads, generator=gen) + 4.0).to(torch.bfloat16).float()
                   if sinks else None)
    return build_case(keys, values, q, query_lens, block_size=block_size, device=device, causal=causal,
                      sinks=sink_logits, seed=seed + 1, spare_blocks=spare_blocks)


def build_case(keys: list[torch.Tensor], values: list[torch.Tensor], q: torch.Tensor, query_lens: list[int], *,
               block_size: int = 16, device: torch.device | str = "cpu", causal: bool = True,
               sinks: torch.Tensor | None = None, seed: int = 1, spare_blocks: int = 3) -> PagedCase:
    """Lay given logical K/V out in a fresh paged cache (blocks in shuffled order, garbage in unowned slots)."""
    gen = torch.Generator().manual_seed(seed)
    keys = [k.cpu() for k in keys]
    values = [v.cpu() for v in values]
    seq_lens = [k.shape[0] for k in keys]
    num_kv_heads, head_size = keys[0].shape[1], keys[0].shape[2]
    dtype = keys[0].dtype
    blocks_per_seq = [math.ceil(s / block_size) for s in seq_lens]
    num_blocks = sum(blocks_per_seq) + spare_blocks
    order = torch.randperm(num_blocks, generator=gen).tolist()
    k_cache = torch.full((num_blocks, block_size, num_kv_heads, head_size), GARBAGE, dtype=dtype)
    v_cache = torch.full_like(k_cache, -GARBAGE)
    block_table = torch.zeros(len(seq_lens), max(blocks_per_seq), dtype=torch.int32)
    slots = []
    cursor = 0
    for i, (s, nb) in enumerate(zip(seq_lens, blocks_per_seq)):
        mine = order[cursor:cursor + nb]
        cursor += nb
        block_table[i, :nb] = torch.tensor(mine, dtype=torch.int32)
        seq_slots = torch.tensor([mine[t // block_size] * block_size + t % block_size for t in range(s)])
        k_cache.view(-1, num_kv_heads, head_size)[seq_slots] = keys[i]
        v_cache.view(-1, num_kv_heads, head_size)[seq_slots] = values[i]
        slots.append(seq_slots)
    dev = torch.device(device)
    cu = torch.tensor([0] + torch.cumsum(torch.tensor(query_lens), 0).tolist(), dtype=torch.int32)
    return PagedCase(
        q=q.to(dev), keys=[k.to(dev) for k in keys], values=[v.to(dev) for v in values],
        query_lens=list(query_lens), seq_lens=seq_lens, block_size=block_size,
        k_cache=k_cache.to(dev), v_cache=v_cache.to(dev), block_table=block_table.to(dev),
        slot_mapping=torch.cat(slots).to(device=dev, dtype=torch.int64), cu_seqlens_q=cu.to(dev),
        seqused_k=torch.tensor(seq_lens, dtype=torch.int32, device=dev), causal=causal,
        scale=head_size ** -0.5, sinks=None if sinks is None else sinks.to(dev),
    )


def subcase(case: PagedCase, index: int, *, seed: int = 7) -> PagedCase:
    """Sequence ``index`` of ``case`` alone, in a freshly laid-out cache (the "solo" side of batch invariance)."""
    return build_case([case.keys[index]], [case.values[index]], case.q[case.query_rows(index)],
                      [case.query_lens[index]], block_size=case.block_size, device=case.q.device,
                      causal=case.causal, sinks=case.sinks, seed=seed)


def reference_attention(case: PagedCase, *, causal: bool | None = None, use_sinks: bool = True,
                        keys: list[torch.Tensor] | None = None, values: list[torch.Tensor] | None = None,
                        q: torch.Tensor | None = None) -> torch.Tensor:
    """Float32 attention over the logical K/V: ``[total_q, num_q_heads, head_size]``.

    Causal: query row ``j`` of a sequence of length ``L`` with ``n`` queries sits at position ``L - n + j`` and sees
    keys ``0..L-n+j``. Non-causal (the DFlash block): every query sees all ``L`` keys. Sinks add one logit per head
    with a zero value, as vLLM's ``s_aux``/``sinks`` do.
    """
    causal = case.causal if causal is None else causal
    keys = case.keys if keys is None else keys
    values = case.values if values is None else values
    q_all = (case.q if q is None else q).float()
    group = case.num_q_heads // case.num_kv_heads
    outs = []
    for i, (n, length) in enumerate(zip(case.query_lens, case.seq_lens)):
        qi = q_all[case.query_rows(i)].transpose(0, 1)                         # [H, n, D]
        ki = keys[i].float().repeat_interleave(group, dim=1).transpose(0, 1)  # [H, L, D]
        vi = values[i].float().repeat_interleave(group, dim=1).transpose(0, 1)
        scores = (qi @ ki.transpose(1, 2)) * case.scale                        # [H, n, L]
        if causal:
            pos_q = torch.arange(length - n, length, device=scores.device)[:, None]
            pos_k = torch.arange(length, device=scores.device)[None, :]
            scores = scores.masked_fill(pos_k > pos_q, float("-inf"))
        if use_sinks and case.sinks is not None:
            sink = case.sinks.float()[:, None, None].expand(-1, n, 1)
            probs = torch.softmax(torch.cat([scores, sink], dim=-1), dim=-1)[..., :length]
        else:
            probs = torch.softmax(scores, dim=-1)
        outs.append((probs @ vi).transpose(0, 1))                               # [n, H, D]
    return torch.cat(outs)


def compare(out: torch.Tensor, ref: torch.Tensor, tol: Tolerance) -> dict[str, Any]:
    """Whether ``out`` matches ``ref`` within ``tol``, with the numbers that say by how much."""
    out32 = out.float().to(ref.device)
    if out32.shape != ref.shape:
        return {"ok": False, "why": f"shape {tuple(out32.shape)} != reference {tuple(ref.shape)}"}
    if not torch.isfinite(out32).all():
        return {"ok": False, "why": "non-finite values in the output", "max_abs_err": float("nan")}
    err = (out32 - ref).abs()
    bound = tol.atol + tol.rtol * ref.abs()
    worst = float((err / bound).max())
    rows_err, rows_ref = err.flatten(1).pow(2).mean(1).sqrt(), ref.flatten(1).pow(2).mean(1).sqrt()
    rel_rms = float((rows_err / rows_ref.clamp_min(1e-12)).max())
    ok = bool((err <= bound).all()) and (tol.rel_rms is None or rel_rms <= tol.rel_rms)
    return {"ok": ok, "max_abs_err": float(err.max()), "worst_err_over_bound": worst, "rel_rms": rel_rms}
