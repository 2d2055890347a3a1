"""Triton kernels for the synthetic draft steps: one launch per fused op, so a captured step is a short kernel list.

Every kernel reads device scalars and indices through pointers (never ``.item()``), skips padded rows (request index
−1, slot −1) with masked stores, and follows the MUSA-Triton rules (no annotated assignments in kernels, one dtype
per variable in every branch, no PDL/TMA intrinsics). Hashing for Gumbel noise is done in int64 with 32-bit masks,
so the torch reference in ``ops.py`` reproduces it exactly.
"""

from __future__ import annotations

import triton
import triton.language as tl

MASK32 = 0xFFFFFFFF


@triton.jit
def _hash32(seed, pos, vocab_idx):
    x = ((seed & 0xFFFFFFFF) * 0x9E3779B1 + (pos & 0xFFFFFFFF) * 0x85EBCA77
         + vocab_idx * 0xC2B2AE3D) & 0xFFFFFFFF
    x = x ^ (x >> 16)
    x = (x * 0x7FEB352D) & 0xFFFFFFFF
    x = x ^ (x >> 15)
    x = (x * 0x846CA68B) & 0xFFFFFFFF
    x = x ^ (x >> 16)
    return x


@triton.jit
def rms_norm_kernel(x_ptr, w_ptr, out_ptr, stride_x, stride_o, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    var = tl.sum(x * x, axis=0) / n_cols
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * stride_o + cols, (x * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def silu_mul_kernel(x_ptr, out_ptr, stride_x, stride_o, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < n_cols
    a = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(x_ptr + row * stride_x + n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    y = a / (1.0 + tl.exp(-a)) * b
    tl.store(out_ptr + row * stride_o + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def rope_store_kv_kernel(qkv_ptr, pos_ptr, slot_ptr, cos_sin_ptr, q_out_ptr, k_cache_ptr, v_cache_ptr,
                         stride_qkv, stride_q_out, stride_slot, max_pos,
                         NUM_HEADS: tl.constexpr, NUM_KV_HEADS: tl.constexpr, HEAD_DIM: tl.constexpr):
    """Program (token, head): rotate q heads into ``q_out``; rotate k and copy v into the cache at the token's slot.

    ``NUM_HEADS == 0`` writes K/V only (DFlash context K/V, outside any graph)."""
    t = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1)
    half = HEAD_DIM // 2
    d = tl.arange(0, HEAD_DIM // 2)
    pos = tl.load(pos_ptr + t).to(tl.int64)
    pos = tl.minimum(tl.maximum(pos, 0), max_pos - 1)
    cos = tl.load(cos_sin_ptr + pos * HEAD_DIM + d)
    sin = tl.load(cos_sin_ptr + pos * HEAD_DIM + half + d)
    row = qkv_ptr + t * stride_qkv
    if h < NUM_HEADS:
        x1 = tl.load(row + h * HEAD_DIM + d).to(tl.float32)
        x2 = tl.load(row + h * HEAD_DIM + half + d).to(tl.float32)
        dst = q_out_ptr + t * stride_q_out + h * HEAD_DIM
        tl.store(dst + d, (x1 * cos - x2 * sin).to(q_out_ptr.dtype.element_ty))
        tl.store(dst + half + d, (x2 * cos + x1 * sin).to(q_out_ptr.dtype.element_ty))
    else:
        kh = h - NUM_HEADS
        slot = tl.load(slot_ptr + t).to(tl.int64)
        ok = (d < half) & (slot >= 0)
        safe = tl.where(slot >= 0, slot, 0)
        kb = row + (NUM_HEADS + kh) * HEAD_DIM
        vb = row + (NUM_HEADS + NUM_KV_HEADS + kh) * HEAD_DIM
        x1 = tl.load(kb + d).to(tl.float32)
        x2 = tl.load(kb + half + d).to(tl.float32)
        kdst = k_cache_ptr + safe * stride_slot + kh * HEAD_DIM
        tl.store(kdst + d, (x1 * cos - x2 * sin).to(k_cache_ptr.dtype.element_ty), mask=ok)
        tl.store(kdst + half + d, (x2 * cos + x1 * sin).to(k_cache_ptr.dtype.element_ty), mask=ok)
        vdst = v_cache_ptr + safe * stride_slot + kh * HEAD_DIM
        tl.store(vdst + d, tl.load(vb + d), mask=ok)
        tl.store(vdst + half + d, tl.load(vb + half + d), mask=ok)


@triton.jit
def uniform_attention_kernel(q_ptr, k_cache_ptr, v_cache_ptr, out_ptr, block_table_ptr, req_ptr, seq_len_ptr,
                             scale, stride_q, stride_o, stride_slot, stride_bt,
                             QUERY_LEN: tl.constexpr, GROUP: tl.constexpr, HEAD_DIM: tl.constexpr,
                             PAGE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                             CAUSAL: tl.constexpr):
    """Program (request row, kv head): QUERY_LEN query tokens x GROUP q heads over the row's paged K/V.

    Row r's tokens are ``r*QUERY_LEN ..``; its K/V are positions ``[0, seq_len)`` and its queries sit at the last
    QUERY_LEN positions. Padded rows (request −1) attend to nothing and write zeros."""
    r = tl.program_id(0).to(tl.int64)
    kvh = tl.program_id(1)
    req = tl.load(req_ptr + r).to(tl.int64)
    seq_len = tl.load(seq_len_ptr + r)
    seq_len = tl.where(req >= 0, seq_len, 0)
    req_safe = tl.where(req >= 0, req, 0)
    m = tl.arange(0, BLOCK_M)
    qi = m // GROUP
    head = kvh * GROUP + m % GROUP
    m_mask = m < QUERY_LEN * GROUP
    tok = r * QUERY_LEN + qi
    d = tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + tok[:, None] * stride_q + head[:, None] * HEAD_DIM + d[None, :], mask=m_mask[:, None],
                other=0.0)
    q_pos = seq_len - QUERY_LEN + qi
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    for start in range(0, seq_len, BLOCK_N):
        n = start + tl.arange(0, BLOCK_N)
        n_mask = n < seq_len
        page = tl.load(block_table_ptr + req_safe * stride_bt + n // PAGE, mask=n_mask, other=0).to(tl.int64)
        slot = page * PAGE + n % PAGE
        kv_off = slot[:, None] * stride_slot + kvh * HEAD_DIM + d[None, :]
        k = tl.load(k_cache_ptr + kv_off, mask=n_mask[:, None], other=0.0)
        s = tl.dot(q, tl.trans(k)) * scale
        valid = n_mask[None, :] & m_mask[:, None]
        if CAUSAL:
            valid = valid & (n[None, :] <= q_pos[:, None])
        s = tl.where(valid, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        p = tl.exp(s - m_safe[:, None])
        alpha = tl.exp(m_i - m_safe)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_cache_ptr + kv_off, mask=n_mask[:, None], other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    out = acc / tl.where(l_i > 0, l_i, 1.0)[:, None]
    tl.store(out_ptr + tok[:, None] * stride_o + head[:, None] * HEAD_DIM + d[None, :],
             out.to(out_ptr.dtype.element_ty), mask=m_mask[:, None])


@triton.jit
def sample_record_kernel(logits_ptr, stride_l, req_ptr, pos_ptr, temp_ptr, seed_ptr, step_ptr,
                         tokens_ptr, stride_tok, draft_logits_ptr, stride_dl_req, stride_dl_col,
                         next_ptr, vocab,
                         COLS: tl.constexpr, QUERY_LEN: tl.constexpr, OFFSET: tl.constexpr,
                         WRITE_LOGITS: tl.constexpr, WRITE_NEXT: tl.constexpr, BLOCK_V: tl.constexpr):
    """Program n samples one draft token: row ``n // COLS``, column ``current_draft_step + n % COLS``.

    Greedy (temperature 0) takes the argmax; otherwise argmax(logits / T + Gumbel(seed, position, vocab index)).
    The temperature-scaled logits go to ``draft_logits[req, column]`` (probabilistic rejection sampling). Padded rows
    (request −1) store nothing but still feed the next step (``next``), so chain inputs stay defined."""
    n = tl.program_id(0).to(tl.int64)
    row = n // COLS
    j = n % COLS
    tok = row * QUERY_LEN + OFFSET + j
    req = tl.load(req_ptr + row).to(tl.int64)
    ok = req >= 0
    req_safe = tl.where(ok, req, 0)
    col = tl.load(step_ptr).to(tl.int64) + j
    temp = tl.load(temp_ptr + req_safe).to(tl.float32)
    temp = tl.where(ok, temp, 0.0)
    greedy = temp <= 0.0
    inv_t = 1.0 / tl.where(greedy, 1.0, temp)
    seed = tl.load(seed_ptr + req_safe).to(tl.int64)
    pos = tl.load(pos_ptr + tok).to(tl.int64)
    best_val = tl.full([BLOCK_V], float("-inf"), tl.float32)
    best_idx = tl.zeros([BLOCK_V], tl.int64)
    for start in range(0, vocab, BLOCK_V):
        v = start + tl.arange(0, BLOCK_V).to(tl.int64)
        vm = v < vocab
        x = tl.load(logits_ptr + tok * stride_l + v, mask=vm, other=0.0).to(tl.float32) * inv_t
        if WRITE_LOGITS:
            tl.store(draft_logits_ptr + req_safe * stride_dl_req + col * stride_dl_col + v, x, mask=vm & ok)
        if greedy:
            score = x
        else:
            h = _hash32(seed, pos, v)
            u = ((h >> 8).to(tl.float32) + 0.5) * (1.0 / 16777216.0)
            score = x - tl.log(-tl.log(u))
        score = tl.where(vm, score, float("-inf"))
        better = score > best_val
        best_val = tl.where(better, score, best_val)
        best_idx = tl.where(better, v, best_idx)
    top = tl.max(best_val, 0)
    idx = tl.min(tl.where(best_val == top, best_idx, vocab), 0)
    tl.store(tokens_ptr + req_safe * stride_tok + col, idx, mask=ok)
    if WRITE_NEXT:
        tl.store(next_ptr + n, idx.to(next_ptr.dtype.element_ty))


@triton.jit
def advance_kernel(hidden_ptr, stride_h, pos_ptr, sample_idx_ptr, req_ptr, block_table_ptr, stride_bt,
                   next_hidden_ptr, stride_nh, next_pos_ptr, next_seq_ptr, next_slot_ptr, hidden_size, max_pos,
                   QUERY_LEN: tl.constexpr, HAS_SAMPLE_INDEX: tl.constexpr, PAGE: tl.constexpr,
                   BLOCK_H: tl.constexpr):
    """Program r writes the next chain step's inputs for row r from this step's sampled token position:
    position + 1, seq_len, slot (−1 for padded rows) and the hidden state of the sampled token."""
    r = tl.program_id(0).to(tl.int64)
    src = r * QUERY_LEN
    if HAS_SAMPLE_INDEX:
        src = src + tl.load(sample_idx_ptr + r).to(tl.int64)
    req = tl.load(req_ptr + r).to(tl.int64)
    ok = req >= 0
    p = tl.load(pos_ptr + src).to(tl.int64) + 1
    p = tl.minimum(tl.maximum(p, 0), max_pos - 1)
    page = tl.load(block_table_ptr + tl.where(ok, req, 0) * stride_bt + p // PAGE).to(tl.int64)
    slot = tl.where(ok, page * PAGE + p % PAGE, -1)
    for h0 in range(0, hidden_size, BLOCK_H):
        cols = h0 + tl.arange(0, BLOCK_H)
        hm = cols < hidden_size
        tl.store(next_hidden_ptr + r * stride_nh + cols, tl.load(hidden_ptr + src * stride_h + cols, mask=hm),
                 mask=hm)
    tl.store(next_pos_ptr + r, p.to(next_pos_ptr.dtype.element_ty))
    tl.store(next_seq_ptr + r, (p + 1).to(next_seq_ptr.dtype.element_ty))
    tl.store(next_slot_ptr + r, slot.to(next_slot_ptr.dtype.element_ty))
