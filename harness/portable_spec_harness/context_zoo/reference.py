"""Plain-torch reference forwards of the context heads (and the MLA target), as vLLM 0.26.0 computes them.

Transformers has no class for the EAGLE-1/EAGLE-3/DFlash/MTP heads, so these mirror vLLM's modules op for op
(llama_eagle.py, llama_eagle3.py, qwen3_dflash.py, deepseek_mtp.py + deepseek_v2.py's MLA, mimo_mtp.py) on a
checkpoint's tensors. Each runs a whole sequence at once: causal attention over the sequence is what a KV cache
gives step by step, and the ``bugs`` arguments inject what a broken cache or metadata would do:

* ``positions``: the position of every row (a chain step off by one: ``positions[-1] += 1``);
* ``stale``: ``{row: other_row}``, row's K/V computed from another row's input (a wrong slot);
* ``hidden_keys``: rows whose K/V no query may see (``seq_lens`` too short, a dropped KV entry).
"""

from __future__ import annotations

from typing import Any, Sequence

from portable_spec_harness.zoo_base import _torch

RMS_EPS = 1e-6


def rms(x, weight, eps: float = RMS_EPS):
    torch = _torch()
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def rope(x, positions, theta: float, interleaved: bool = False):
    """Rotary embedding on [T, heads, dim] (neox halves, or DeepSeek's interleaved pairs)."""
    torch = _torch()
    dim = x.shape[-1]
    inv = 1.0 / theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    ang = positions.double()[:, None] * inv[None]
    cos, sin = ang.cos().to(x.dtype)[:, None, :], ang.sin().to(x.dtype)[:, None, :]
    if interleaved:
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.stack([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1).flatten(-2)
    x1, x2 = x[..., :dim // 2], x[..., dim // 2:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)


def softmax_attention(q, k, v, scale: float, *, causal: bool = True, hidden_keys: Sequence[int] = (),
                      n_context: int = 0):
    """q [T, H, d], k/v [S, KV, d]; query i sees key j iff j <= i + n_context (by row, as a paged KV cache does)
    and j is not hidden. Returns [T, H * dv]."""
    torch = _torch()
    heads, kv_heads = q.shape[1], k.shape[1]
    k = k.repeat_interleave(heads // kv_heads, 1)
    v = v.repeat_interleave(heads // kv_heads, 1)
    scores = torch.einsum("qhd,khd->hqk", q, k) * scale
    mask = torch.zeros(q.shape[0], k.shape[0], dtype=torch.bool)
    if causal:
        mask |= torch.arange(k.shape[0])[None, :] > torch.arange(q.shape[0])[:, None] + n_context
    for j in hidden_keys:
        mask[:, j] = True
    scores = scores.masked_fill(mask[None], float("-inf"))
    return torch.einsum("hqk,khd->qhd", scores.softmax(-1), v).reshape(q.shape[0], -1)


def llama_attention(w: dict[str, Any], p: str, x, positions, *, theta: float, head_dim: int = 128, kv_x=None,
                    stale: dict[int, int] | None = None, hidden_keys: Sequence[int] = (), qk_norm: bool = False):
    """vLLM LlamaAttention / Qwen3Attention (``qk_norm``) / Qwen2Attention (q/k/v bias, where ``w`` has one) on rows
    ``x`` with causal attention over the rows."""
    kv_x = x if kv_x is None else kv_x
    if stale:
        kv_x = kv_x.clone()
        for row, other in stale.items():
            kv_x[row] = kv_x[other]
    n = x.shape[0]

    def proj(name, rows):  # Qwen2-style layers (MiMo) add a bias
        out = rows @ w[f"{p}.{name}_proj.weight"].t()
        bias = w.get(f"{p}.{name}_proj.bias")
        return (out if bias is None else out + bias).view(n, -1, head_dim)

    q, k, v = proj("q", x), proj("k", kv_x), proj("v", kv_x)
    if qk_norm:
        q, k = rms(q, w[f"{p}.q_norm.weight"]), rms(k, w[f"{p}.k_norm.weight"])
    out = softmax_attention(rope(q, positions, theta), rope(k, positions, theta), v, head_dim ** -0.5,
                            hidden_keys=hidden_keys)
    return out @ w[f"{p}.o_proj.weight"].t()


def mlp(w: dict[str, Any], p: str, x):
    torch = _torch()
    gate = x @ w[f"{p}.gate_proj.weight"].t()
    return (torch.nn.functional.silu(gate) * (x @ w[f"{p}.up_proj.weight"].t())) @ w[f"{p}.down_proj.weight"].t()


def _positions(n: int, positions):
    torch = _torch()
    return torch.arange(n) if positions is None else torch.as_tensor(positions)


def eagle1_forward(draft_w, target_w, token_ids, hidden, *, theta: float = 10000.0, positions=None,
                   stale=None, hidden_keys=()):
    """vLLM EagleLlamaForCausalLM: fc(cat(embed, hidden)) -> layer 0 without input norm -> h + residual (no final
    norm) -> the target's lm_head. Row i: input token ``token_ids[i]``, hidden ``hidden[i]``. Returns (logits, out)."""
    torch = _torch()
    embed = draft_w.get("embed_tokens.weight", target_w["model.embed_tokens.weight"])
    x = torch.cat([embed[token_ids], hidden], -1) @ draft_w["fc.weight"].t()
    pos = _positions(len(token_ids), positions)
    residual = x + llama_attention(draft_w, "layers.0.self_attn", x, pos, theta=theta, stale=stale,
                                   hidden_keys=hidden_keys)
    out = residual + mlp(draft_w, "layers.0.mlp", rms(residual, draft_w["layers.0.post_attention_layernorm.weight"]))
    return out @ target_w["lm_head.weight"].t(), out


def eagle3_forward(draft_w, target_w, token_ids, hidden, *, theta: float = 10000.0, positions=None,
                   stale=None, hidden_keys=()):
    """vLLM Eagle3 LlamaModel (norm after residual); ``hidden`` is already fc-combined (first pass) or the previous
    step's prenorm output (chained steps). Returns (logits, prenorm)."""
    torch = _torch()
    p = "midlayer"
    embeds = rms(target_w["model.embed_tokens.weight"][token_ids], draft_w[f"{p}.input_layernorm.weight"])
    x = torch.cat([embeds, rms(hidden, draft_w[f"{p}.hidden_norm.weight"])], -1)
    pos = _positions(len(token_ids), positions)
    residual = hidden + llama_attention(draft_w, f"{p}.self_attn", x, pos, theta=theta, stale=stale,
                                        hidden_keys=hidden_keys)
    residual = residual + mlp(draft_w, f"{p}.mlp", rms(residual, draft_w[f"{p}.post_attention_layernorm.weight"]))
    return rms(residual, draft_w["norm.weight"]) @ target_w["lm_head.weight"].t(), residual


def dflash_forward(draft_w, target_w, aux, context_positions, bonus: int, k: int, mask_id: int, *,
                   theta: float = 10000.0, query_start: int | None = None, hidden_keys=()):
    """vLLM DFlashQwen3: context K/V from hidden_norm(fc(aux)) (k_norm, RoPE at ``context_positions``), the query
    block [bonus, mask * k] at ``query_start`` (default: last context position + 1) onwards, non-causal attention
    over context + block. ``hidden_keys`` index the context rows. Returns the logits of the k mask slots."""
    torch = _torch()
    hd, p = 128, "layers.0.self_attn"
    ctx = rms(aux @ draft_w["fc.weight"].t(), draft_w["hidden_norm.weight"])
    ctx_pos = torch.as_tensor(context_positions)
    start = int(ctx_pos[-1]) + 1 if query_start is None else query_start
    q_pos = torch.arange(start, start + k + 1)
    ids = torch.tensor([bonus] + [mask_id] * k)
    x = target_w["model.embed_tokens.weight"][ids]
    h = rms(x, draft_w["layers.0.input_layernorm.weight"])

    def kv(states, pos):
        key = rms((states @ draft_w[f"{p}.k_proj.weight"].t()).view(len(pos), -1, hd), draft_w[f"{p}.k_norm.weight"])
        return rope(key, pos, theta), (states @ draft_w[f"{p}.v_proj.weight"].t()).view(len(pos), -1, hd)

    ck, cv = kv(ctx, ctx_pos)
    bk, bv = kv(h, q_pos)
    q = rms((h @ draft_w[f"{p}.q_proj.weight"].t()).view(k + 1, -1, hd), draft_w[f"{p}.q_norm.weight"])
    att = softmax_attention(rope(q, q_pos, theta), torch.cat([ck, bk]), torch.cat([cv, bv]), hd ** -0.5,
                            causal=False, hidden_keys=hidden_keys)
    residual = x + att @ draft_w[f"{p}.o_proj.weight"].t()
    post = rms(residual, draft_w["layers.0.post_attention_layernorm.weight"])
    residual = residual + mlp(draft_w, "layers.0.mlp", post)
    return (rms(residual, draft_w["norm.weight"]) @ target_w["lm_head.weight"].t())[1:]


def mla_attention(w: dict[str, Any], p: str, x, positions, cfg: dict[str, Any], *, stale=None, hidden_keys=()):
    """vLLM DeepseekV2MLAAttention (q_lora_rank None) computed the unabsorbed way: q -> [nope, pe]; kv_a -> [c_kv,
    k_pe]; c_kv normed, kv_b -> per head [k_nope, v]; interleaved RoPE on q_pe and the shared k_pe."""
    torch = _torch()
    n, heads = x.shape[0], cfg["num_attention_heads"]
    nope, pe, vd, rank = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"], cfg["kv_lora_rank"]
    kv_x = x
    if stale:
        kv_x = x.clone()
        for row, other in stale.items():
            kv_x[row] = x[other]
    q = (x @ w[f"{p}.q_proj.weight"].t()).view(n, heads, nope + pe)
    kv_a = kv_x @ w[f"{p}.kv_a_proj_with_mqa.weight"].t()
    c_kv = rms(kv_a[:, :rank], w[f"{p}.kv_a_layernorm.weight"])
    k_pe = kv_a[:, rank:].view(n, 1, pe)
    kv = (c_kv @ w[f"{p}.kv_b_proj.weight"].t()).view(n, heads, nope + vd)
    q_pe = rope(q[..., nope:], positions, cfg["rope_theta"], interleaved=True)
    k_pe = rope(k_pe, positions, cfg["rope_theta"], interleaved=True).expand(n, heads, pe)
    qq = torch.cat([q[..., :nope], q_pe], -1)
    kk = torch.cat([kv[..., :nope], k_pe], -1)
    out = softmax_attention(qq, kk, kv[..., nope:], (nope + pe) ** -0.5, hidden_keys=hidden_keys)
    return out @ w[f"{p}.o_proj.weight"].t()


def mtp_forward(w: dict[str, Any], cfg: dict[str, Any], token_ids, hidden, *, positions=None, stale=None,
                hidden_keys=()):
    """vLLM DeepSeekMultiTokenPredictorLayer (layer ``num_hidden_layers`` of the checkpoint): embeddings zeroed at
    position 0, enorm/hnorm, eh_proj, one DeepseekV2 decoder layer (MLA + dense MLP), residual + hidden; logits
    through shared_head (norm + head). Returns (logits, recycled hidden = the normed output, as the proposer
    recycles it)."""
    torch = _torch()
    p = f"model.layers.{cfg['num_hidden_layers']}"
    pos = _positions(len(token_ids), positions)
    embeds = w[f"{p}.embed_tokens.weight"][token_ids] * (pos != 0)[:, None]
    x = torch.cat([rms(embeds, w[f"{p}.enorm.weight"]), rms(hidden, w[f"{p}.hnorm.weight"])], -1)
    x = x @ w[f"{p}.eh_proj.weight"].t()
    residual = x
    att = mla_attention(w, f"{p}.self_attn", rms(x, w[f"{p}.input_layernorm.weight"]), pos, cfg, stale=stale,
                        hidden_keys=hidden_keys)
    residual = residual + att
    out = residual + mlp(w, f"{p}.mlp", rms(residual, w[f"{p}.post_attention_layernorm.weight"]))
    normed = rms(out, w[f"{p}.shared_head.norm.weight"])
    return normed @ w[f"{p}.shared_head.head.weight"].t(), normed


def mimo_mtp_forward(w: dict[str, Any], cfg: dict[str, Any], token_ids, hidden, *, positions=None, stale=None,
                     hidden_keys=()):
    """vLLM MiMoMultiTokenPredictorLayer (checkpoint ``model.mtp_layers.0``): embeddings zeroed at position 0,
    input_proj(cat(hidden_layernorm(hidden), token_layernorm(embeds))) (hidden first), one Qwen2 decoder layer,
    residual + hidden, final_layernorm; logits through the lm_head. Returns (logits, the normed output: what the
    proposer recycles as the next step's hidden)."""
    torch = _torch()
    p = "model.mtp_layers.0"
    pos = _positions(len(token_ids), positions)
    embeds = w["model.embed_tokens.weight"][token_ids] * (pos != 0)[:, None]
    x = torch.cat([rms(hidden, w[f"{p}.hidden_layernorm.weight"]), rms(embeds, w[f"{p}.token_layernorm.weight"])], -1)
    x = x @ w[f"{p}.input_proj.weight"].t()
    residual = x + llama_attention(w, f"{p}.self_attn", rms(x, w[f"{p}.input_layernorm.weight"]), pos,
                                   theta=cfg["rope_theta"], stale=stale, hidden_keys=hidden_keys)
    out = residual + mlp(w, f"{p}.mlp", rms(residual, w[f"{p}.post_attention_layernorm.weight"]))
    normed = rms(out, w[f"{p}.final_layernorm.weight"])
    return normed @ w["lm_head.weight"].t(), normed


def margin(logits) -> float:
    """The smallest gap between the top two logits over the rows."""
    top = logits.topk(2, -1).values
    return (top[..., 0] - top[..., 1]).min().item()
