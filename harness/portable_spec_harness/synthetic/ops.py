"""The fused ops of the synthetic draft steps, each with a Triton implementation and a torch reference.

``Ops(backend="triton")`` launches the kernels in ``triton_kernels.py`` (one launch per op, capture-safe: no host
sync, no allocation beyond the outputs); ``Ops(backend="torch")`` is the reference the kernels are tested against
and what CPU runs use. Both read the step column from the device scalar ``current_draft_step``.
"""

from __future__ import annotations

import importlib.util
import math

import torch

from portable_spec.errors import PortableSpecError

BACKENDS = ("triton", "torch")


def _mix32(x: torch.Tensor) -> torch.Tensor:
    m = 0xFFFFFFFF
    x = x ^ (x >> 16)
    x = (x * 0x7FEB352D) & m
    x = x ^ (x >> 15)
    x = (x * 0x846CA68B) & m
    return x ^ (x >> 16)


def hash32(seed: torch.Tensor, pos: torch.Tensor, vocab_idx: torch.Tensor) -> torch.Tensor:
    """The Gumbel-noise hash of ``triton_kernels._hash32`` in int64 torch ops (bit-identical)."""
    m = 0xFFFFFFFF
    x = ((seed & m) * 0x9E3779B1 + (pos & m) * 0x85EBCA77 + vocab_idx * 0xC2B2AE3D) & m
    return _mix32(x)


def rope_cache(max_pos: int, head_dim: int, base: float = 10000.0, device: torch.device | str = "cpu") -> torch.Tensor:
    """``[max_pos, head_dim]`` float32: cos in the first half, sin in the second (neox rotate-half)."""
    inv = 1.0 / (base ** (torch.arange(0, head_dim // 2, dtype=torch.float64) * 2 / head_dim))
    ang = torch.arange(max_pos, dtype=torch.float64)[:, None] * inv[None, :]
    return torch.cat([ang.cos(), ang.sin()], dim=1).to(torch.float32).to(device)


def default_backend(device: torch.device) -> str:
    """Triton on a GPU (or under ``TRITON_INTERPRET=1``), torch otherwise."""
    if importlib.util.find_spec("triton") is None:
        return "torch"
    return "triton" if device.type != "cpu" else "torch"


class Ops:
    """One backend's implementation of every fused op (see module docstring)."""

    def __init__(self, backend: str) -> None:
        if backend not in BACKENDS:
            raise PortableSpecError(f"unknown op backend {backend!r}: use one of {', '.join(BACKENDS)}")
        if backend == "triton":
            if importlib.util.find_spec("triton") is None:
                raise PortableSpecError("op backend 'triton' needs triton: pip install triton, or use backend 'torch'")
            from portable_spec_harness.synthetic import triton_kernels
            self._k = triton_kernels
        self.backend = backend

    # ---- elementwise / rows ----------------------------------------------------------------------------------
    def rms_norm(self, x: torch.Tensor, w: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
        if self.backend == "torch":
            xf = x.float()
            return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype)
        out = torch.empty_like(x)
        n = x.shape[-1]
        self._k.rms_norm_kernel[(x.shape[0],)](x, w, out, x.stride(0), out.stride(0), n, eps,
                                               BLOCK=triton_next_pow2(n))
        return out

    def silu_mul(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[-1] // 2
        if self.backend == "torch":
            a, b = x[:, :n].float(), x[:, n:].float()
            return (a / (1.0 + torch.exp(-a)) * b).to(x.dtype)
        out = torch.empty((x.shape[0], n), dtype=x.dtype, device=x.device)
        block = min(1024, triton_next_pow2(n))
        self._k.silu_mul_kernel[(x.shape[0], -(-n // block))](x, out, x.stride(0), out.stride(0), n, BLOCK=block)
        return out

    # ---- attention -------------------------------------------------------------------------------------------
    def rope_store_kv(self, qkv: torch.Tensor, pos: torch.Tensor, slot: torch.Tensor, cos_sin: torch.Tensor,
                      k_cache: torch.Tensor, v_cache: torch.Tensor, num_heads: int, num_kv_heads: int,
                      head_dim: int) -> torch.Tensor | None:
        """Rotate q (returned as ``[T, num_heads, head_dim]``; None when ``num_heads == 0``) and write rotated k
        and v into the flat caches ``[num_slots, num_kv_heads, head_dim]`` at ``slot`` (−1: skipped)."""
        t = qkv.shape[0]
        if self.backend == "torch":
            half = head_dim // 2
            p = pos.long().clamp(0, cos_sin.shape[0] - 1)
            cos, sin = cos_sin[p, :half][:, None, :], cos_sin[p, half:][:, None, :]

            def rot(x: torch.Tensor) -> torch.Tensor:
                x = x.float()
                x1, x2 = x[..., :half], x[..., half:]
                return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)

            heads = qkv.view(t, num_heads + 2 * num_kv_heads, head_dim)
            q = rot(heads[:, :num_heads]).to(qkv.dtype) if num_heads else None
            k = rot(heads[:, num_heads:num_heads + num_kv_heads]).to(k_cache.dtype)
            v = heads[:, num_heads + num_kv_heads:].to(v_cache.dtype)
            ok = slot.long() >= 0
            idx = slot.long()[ok]
            k_cache[idx] = k[ok]
            v_cache[idx] = v[ok]
            return q
        q_out = (torch.empty((t, num_heads, head_dim), dtype=qkv.dtype, device=qkv.device) if num_heads
                 else qkv)  # unused pointer when num_heads == 0
        self._k.rope_store_kv_kernel[(t, num_heads + num_kv_heads)](
            qkv, pos, slot, cos_sin, q_out, k_cache, v_cache, qkv.stride(0), q_out.stride(0), k_cache.stride(0),
            cos_sin.shape[0], NUM_HEADS=num_heads, NUM_KV_HEADS=num_kv_heads, HEAD_DIM=head_dim)
        return q_out if num_heads else None

    def attention(self, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
                  req: torch.Tensor, seq_lens: torch.Tensor, *, query_len: int, page: int, causal: bool,
                  num_kv_heads: int) -> torch.Tensor:
        """Uniform-query-length paged attention. ``q``: ``[R*query_len, H, D]``; returns ``[R*query_len, H*D]``."""
        t, nh, hd = q.shape
        rows = t // query_len
        group = nh // num_kv_heads
        scale = 1.0 / math.sqrt(hd)
        if self.backend == "torch":
            out = torch.zeros((t, nh, hd), dtype=q.dtype, device=q.device)
            for r in range(rows):
                rq, sl = int(req[r]), int(seq_lens[r])
                if rq < 0 or sl <= 0:
                    continue
                n = torch.arange(sl, device=q.device)
                slots = block_table[rq].long()[n // page] * page + n % page
                k = k_cache[slots].float().repeat_interleave(group, dim=1)  # [S, H, D]
                v = v_cache[slots].float().repeat_interleave(group, dim=1)
                qs = q[r * query_len:(r + 1) * query_len].float()  # [Q, H, D]
                s = torch.einsum("qhd,shd->hqs", qs, k) * scale
                if causal:
                    qpos = sl - query_len + torch.arange(query_len, device=q.device)
                    s = s.masked_fill(n[None, None, :] > qpos[None, :, None], float("-inf"))
                p = torch.softmax(s, dim=-1)
                out[r * query_len:(r + 1) * query_len] = torch.einsum("hqs,shd->qhd", p, v).to(q.dtype)
            return out.view(t, nh * hd)
        out = torch.empty((t, nh * hd), dtype=q.dtype, device=q.device)
        block_m = max(16, triton_next_pow2(query_len * group))
        self._k.uniform_attention_kernel[(rows, num_kv_heads)](
            q, k_cache, v_cache, out, block_table, req, seq_lens, scale, q.stride(0), out.stride(0),
            k_cache.stride(0), block_table.stride(0), QUERY_LEN=query_len, GROUP=group, HEAD_DIM=hd, PAGE=page,
            BLOCK_M=block_m, BLOCK_N=64, CAUSAL=causal)
        return out

    # ---- sampling and chain inputs ---------------------------------------------------------------------------
    def sample_record(self, logits: torch.Tensor, req: torch.Tensor, pos: torch.Tensor, temperature: torch.Tensor,
                      seeds: torch.Tensor, step: torch.Tensor, tokens_out: torch.Tensor,
                      logits_out: torch.Tensor | None, next_tokens: torch.Tensor | None, *, rows: int, cols: int,
                      query_len: int, offset: int) -> None:
        """Sample ``rows * cols`` draft tokens (see ``sample_record_kernel``) into ``tokens_out[req, step + j]``."""
        vocab = logits.shape[-1]
        n_samples = rows * cols
        if self.backend == "torch":
            n = torch.arange(n_samples, device=logits.device)
            row, j = n // cols, n % cols
            tok = row * query_len + offset + j
            rq = req.long()[row]
            ok = rq >= 0
            safe = torch.where(ok, rq, torch.zeros_like(rq))
            temp = torch.where(ok, temperature[safe].float(), torch.zeros_like(temperature[safe].float()))
            greedy = temp <= 0
            inv_t = 1.0 / torch.where(greedy, torch.ones_like(temp), temp)
            x = logits[tok].float() * inv_t[:, None]
            v = torch.arange(vocab, device=logits.device, dtype=torch.int64)
            h = hash32(seeds[safe].long()[:, None], pos.long()[tok][:, None], v[None, :])
            u = ((h >> 8).to(torch.float32) + 0.5) * (1.0 / 16777216.0)
            score = torch.where(greedy[:, None], x, x - torch.log(-torch.log(u)))
            idx = score.argmax(dim=-1)
            col = step.long() + j
            tokens_out[safe[ok], col[ok]] = idx[ok].to(tokens_out.dtype)
            if logits_out is not None:
                logits_out[safe[ok], col[ok]] = x[ok]
            if next_tokens is not None:
                next_tokens[:n_samples] = idx.to(next_tokens.dtype)
            return
        write_logits = logits_out is not None
        dl = logits_out if write_logits else tokens_out
        nxt = next_tokens if next_tokens is not None else tokens_out
        self._k.sample_record_kernel[(n_samples,)](
            logits, logits.stride(0), req, pos, temperature, seeds, step, tokens_out, tokens_out.stride(0),
            dl, dl.stride(0) if write_logits else 0, dl.stride(1) if write_logits else 0, nxt, vocab,
            COLS=cols, QUERY_LEN=query_len, OFFSET=offset, WRITE_LOGITS=write_logits,
            WRITE_NEXT=next_tokens is not None, BLOCK_V=min(4096, triton_next_pow2(vocab)), num_warps=8)

    def advance(self, hidden: torch.Tensor, pos: torch.Tensor, sample_index: torch.Tensor | None, req: torch.Tensor,
                block_table: torch.Tensor, next_hidden: torch.Tensor, next_pos: torch.Tensor, next_seq: torch.Tensor,
                next_slot: torch.Tensor, *, rows: int, query_len: int, page: int, max_pos: int) -> None:
        """Write the next chain step's inputs for ``rows`` rows (see ``advance_kernel``)."""
        if self.backend == "torch":
            r = torch.arange(rows, device=hidden.device)
            src = r * query_len + (sample_index[:rows].long() if sample_index is not None else 0)
            rq = req.long()[:rows]
            ok = rq >= 0
            p = (pos.long()[src] + 1).clamp(0, max_pos - 1)
            page_id = block_table[torch.where(ok, rq, torch.zeros_like(rq)), p // page].long()
            slot = torch.where(ok, page_id * page + p % page, torch.full_like(p, -1))
            next_hidden[:rows] = hidden[src]
            next_pos[:rows] = p.to(next_pos.dtype)
            next_seq[:rows] = (p + 1).to(next_seq.dtype)
            next_slot[:rows] = slot.to(next_slot.dtype)
            return
        si = sample_index if sample_index is not None else req
        self._k.advance_kernel[(rows,)](
            hidden, hidden.stride(0), pos, si, req, block_table, block_table.stride(0), next_hidden,
            next_hidden.stride(0), next_pos, next_seq, next_slot, hidden.shape[-1], max_pos,
            QUERY_LEN=query_len, HAS_SAMPLE_INDEX=sample_index is not None, PAGE=page,
            BLOCK_H=min(1024, triton_next_pow2(hidden.shape[-1])))


def triton_next_pow2(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())
