"""Weights and configs of the context targets (Llama, Qwen3), their EAGLE-1, EAGLE-3 and DFlash heads, and a
separate 4-layer draft model (``draft_model_weights``).

Notation: ``e_t`` token rows, ``w_g``, ``u1_c``, ``u2_c``, ``r_c``, ``m1_c``, ``m2_c``, ``z0`` code rows of
:mod:`.basis` (all +-1, exactly orthogonal); ``A, B1, B2, phi, table`` the tables of :mod:`.function`; every
position-only head uses :mod:`.rope_profile` (peak ``d0`` positions back, a gap >= 30.7 in softmax units to any
other key, 35.7 with Qwen3's q/k norms). ``h(t; a, b1, b2) = e_t + w_a + u1_b1 + u2_b2``.

Target (``LlamaForCausalLM`` / ``Qwen3ForCausalLM``, 2 layers): layer 0's attention has two position-only heads,
"current" (``d0 = 0``, V = one-hot ``A(t)``, o_proj -> ``w``) and "previous" (``d0 = 1``, V = one-hot ``B1, B2``,
o_proj -> ``u1, u2``); every other o_proj and every down_proj is zero. So after layer 0 the residual at position
``p`` is exactly ``h(x_p; A(x_p), B1(x_p-1), B2(x_p-1))`` (RMS 2), the final norm halves it, and the lm_head row of
table token ``T(g, c1, c2)`` is ``L / 2048 (w_g + (u1_c1 + u2_c2) / 2)``: logits are ``L (1/2 [group] + 1/4
[c1] + 1/4 [c2])``, i.e. 16 for the greedy token, at most 12 for any other (a margin of 4 = L / 4 that bf16, which
holds all these numbers exactly, cannot flip), 0 for every non-table token. Both reads go through the KV cache:
the current token's own K/V (slot, seq_lens including it) and the previous one's at relative position 1.

EAGLE-1 head (``EagleLlamaForCausalLM``): ``fc = [I / 2 | F]``, ``F e_t = r_B1(t)``, so with the target's hidden
``h / 2`` of the previous position ``x = e_y / 2 + r_B1(x_prev) / 2``. Its layer (no input norm) has the same two
position-only heads: "current" reads ``A(y)`` and the state ``B1(x_prev)`` from the draft's own K/V and writes
``(w_A(y) + u1_B1 - r_B1) / 2``, "previous" reads ``B2`` of the previous draft position's input and writes
``u2 / 2``. Its output is ``h(y; A(y), B1(x_prev), B2(x_prev)) / 2``: exactly the target's final hidden at that
position, so it predicts what the target will (logits equal, margin 4) and feeds the next step a hidden of the
target's form. Right only with the target's hidden (B1), its own K/V (A, the state) and the previous draft
position's K/V at relative position 1 (B2).

EAGLE-3 head (``LlamaForCausalLMEagle3``, aux layers [0, 1, 2], attention on): ``fc`` maps the aux states to
``H = r_B1(x) + w + u1 + u2`` (``r`` from aux 0's ``e_x``; ``w, u1, u2`` projected from aux 1: the target's own
prediction terms). The "current" head reads ``A(y)``, ``B1(y)`` from the embedding half and the hidden's four code
coefficients from the hidden half, and writes ``w_A(y) + r_B1(y) + u1_B1(state) - (old r, w, u1, u2)``; the
"previous" head writes ``u2_B2(prev input)``. The residual becomes ``r_B1(y) + w_A(y) + u1 + u2``: the same form
(RMS 2), so chained steps work on the draft's own prenorm output, and the normed output gives the target's logits.

DFlash head (``DFlashDraftModel``, Qwen3 target, non-causal): context K/V come from ``fc(aux) = z0 + m1_B1(x) +
m2_B2(x)``. Three heads on the mask slots: X (position-only, ``d0 = 1``: the bonus at slot 1, a mask with V = 0 at
any later slot), Y (content: the bonus at every slot; +181 against -181 for masks and context), Z (position-only,
``d0 = 2``: the last context token at slot 1, a V = 0 token at any later slot). Y writes the slot-2 answer
``w_phi(A(b)) + u1_B1(b) + u2_B2(b)``; X, at slot 1 only, swaps it for ``w_A(b)`` minus the class; Z, at slot 1
only, adds ``B(x_{n-1})``. Slot 1 predicts ``x_{n+1}``, slot 2 ``x_{n+2}`` (see :mod:`.function`), slots >= 3 repeat
slot 2, which is never the next token: acceptance ``[1, 1, 0, ...]`` exactly.
"""

from __future__ import annotations

from typing import Any

from portable_spec.errors import PortableSpecError
from portable_spec_harness import zoo_base
from portable_spec_harness.zoo_base import MASK_ID, VOCAB, _torch
from portable_spec_harness.context_zoo.attention import (
    HEAD_DIM, NUM_HEADS, NUM_KV_HEADS, AttentionWeights, filler_attention, filler_mlp)
from portable_spec_harness.context_zoo.basis import CODES, HIDDEN, basis, code_map, code_readers, direction_readers
from portable_spec_harness.context_zoo.function import context_function
from portable_spec_harness.context_zoo.rope_profile import LLAMA, QNORM

LAYERS = 2
DRAFT_MODEL_LAYERS = 4
INTERMEDIATE = 256
CURRENT, PREVIOUS = 0, 1  # KV heads of the targets' and EAGLE heads' context layer
DFLASH_X, DFLASH_Y, DFLASH_Z = 0, 1, 2
DFLASH_CONTENT_SLOT = HEAD_DIM // 2 - 1  # neox pair 63: the slowest rotation
EAGLE3_AUX_LAYERS = [0, 1, 2]
DFLASH_TARGET_LAYERS = [0, 1]  # vLLM reads the states after layers 0 and 1 of the target (ids + 1)
FAMILIES = ("llama_ctx", "qwen3_ctx")


def lm_head(seed: int, logit: float):
    """Row of table token T(g, c1, c2) = logit / 2048 (w_g + (u1_c1 + u2_c2) / 2); other rows 0."""
    torch = _torch()
    b, fn = basis(seed), context_function(seed)
    out = torch.zeros(VOCAB, HIDDEN)
    for index, t in enumerate(fn.table):
        g, rest = divmod(index, CODES * CODES)
        c1, c2 = divmod(rest, CODES)
        out[t] = b["w"][g] + (b["u1"][c1] + b["u2"][c2]) / 2
    out *= logit / HIDDEN
    if logit <= 0 or not torch.equal(out.bfloat16().float(), out):
        raise PortableSpecError(f"context_zoo: target_logit {logit:g} gives lm_head weights bf16 cannot hold "
                                "exactly; use e.g. 16 or 8")
    return out


def context_attention(seed: int, *, bias: bool = False):
    """The targets' layer-0 attention (see the module docstring); ``bias``: the position-only queries and keys in the
    q/k bias instead of read from the input's constant (the same numbers: the Qwen2-style MiMo target)."""
    b, fn = basis(seed), context_function(seed)
    c = b.mean_token
    att = AttentionWeights()
    for kv, d0 in ((CURRENT, 0), (PREVIOUS, 1)):
        if bias:
            att.position_bias_head(kv, d0, LLAMA)
        else:
            att.position_head(kv, d0, LLAMA, c, c)
    att.values(CURRENT, 0, code_readers(fn.A, b.tokens))
    att.values(PREVIOUS, 0, code_readers(fn.B1, b.tokens))
    att.values(PREVIOUS, CODES, code_readers(fn.B2, b.tokens))
    for v in range(CODES):
        att.output(CURRENT, v, b["w"][v])
        att.output(PREVIOUS, v, b["u1"][v])
        att.output(PREVIOUS, CODES + v, b["u2"][v])
    return att


def target_weights(family: str, seed: int = 0, logit: float = 16.0, *, layers: int = LAYERS,
                   context_layer: int = 0) -> dict[str, Any]:
    """The target (see the module docstring); ``layers`` / ``context_layer`` place the context attention in a
    deeper stack (the separate draft model: ``draft_model_weights``)."""
    torch = _torch()
    if family not in FAMILIES:
        raise PortableSpecError(f"context_zoo: unknown family {family!r}; use one of {', '.join(FAMILIES)}")
    b = basis(seed)
    w: dict[str, Any] = {"model.embed_tokens.weight": b.tokens.clone(), "model.norm.weight": torch.ones(HIDDEN),
                         "lm_head.weight": lm_head(seed, logit)}
    for i in range(layers):
        p = f"model.layers.{i}"
        w[f"{p}.input_layernorm.weight"] = torch.ones(HIDDEN)
        w[f"{p}.post_attention_layernorm.weight"] = torch.ones(HIDDEN)
        if i == context_layer:
            w.update(context_attention(seed).tensors(f"{p}.self_attn"))
        else:
            w.update(filler_attention(f"{p}.self_attn", seed, f"{family}{i}"))
        if family == "qwen3_ctx":  # q/k normed per head: the position heads keep their shape, scaled to QNORM.norm
            norm = QNORM.norm if i == context_layer else 1.0
            w[f"{p}.self_attn.q_norm.weight"] = torch.full((HEAD_DIM,), norm)
            w[f"{p}.self_attn.k_norm.weight"] = torch.full((HEAD_DIM,), norm)
        w.update(filler_mlp(f"{p}.mlp", seed, f"{family}{i}", INTERMEDIATE))
    return w


def draft_model_weights(seed: int = 0, logit: float = 16.0) -> dict[str, Any]:
    """The separate draft model (vLLM ``draft_model``): a ``LlamaForCausalLM`` of ``DRAFT_MODEL_LAYERS`` layers and
    the target's vocabulary whose context attention sits in its LAST layer (every earlier layer computes and adds
    nothing), so it predicts exactly what the target will (100% acceptance), and only through its deepest layer's
    K/V at the right positions, slots and sequence lengths: its own current token and the previous position."""
    return target_weights("llama_ctx", seed, logit, layers=DRAFT_MODEL_LAYERS, context_layer=DRAFT_MODEL_LAYERS - 1)


def eagle_weights(seed: int = 0) -> dict[str, Any]:
    """EAGLE-1 head in vLLM's ``EagleLlamaForCausalLM`` layout (embedding and lm_head shared with the target)."""
    torch = _torch()
    b, fn = basis(seed), context_function(seed)
    half_state = code_map(fn.B1, b["r"], b.tokens)  # reads the hidden's e part (1/2): r_B1 / 2
    att = AttentionWeights()
    c2 = 2 * b.mean_token  # c . x = 1/2 for x = e_y / 2 + r / 2
    att.position_head(CURRENT, 0, LLAMA, c2, c2)
    att.position_head(PREVIOUS, 1, LLAMA, c2, c2)
    att.values(CURRENT, 0, code_readers(fn.A, b.tokens, scale=2))
    att.values(CURRENT, CODES, direction_readers(b["r"], scale=2))
    att.values(PREVIOUS, 0, code_readers(fn.B2, b.tokens, scale=2))
    for v in range(CODES):
        att.output(CURRENT, v, b["w"][v] / 2)
        att.output(CURRENT, CODES + v, (b["u1"][v] - b["r"][v]) / 2)
        att.output(PREVIOUS, v, b["u2"][v] / 2)
    w: dict[str, Any] = {"fc.weight": torch.cat([torch.eye(HIDDEN) / 2, half_state], 1),
                         "layers.0.post_attention_layernorm.weight": torch.ones(HIDDEN)}
    w.update(att.tensors("layers.0.self_attn"))
    w.update(filler_mlp("layers.0.mlp", seed, "ctx-eagle", INTERMEDIATE))
    return w


def _projector(directions):
    """[HIDDEN, HIDDEN]: keeps the coefficients of ``directions`` (orthogonal +-1 rows), drops everything else."""
    return directions.t() @ directions / HIDDEN


def eagle3_weights(seed: int = 0) -> dict[str, Any]:
    """EAGLE-3 head (midlayer naming, attention on); embedding and lm_head shared with the target."""
    torch = _torch()
    b, fn = basis(seed), context_function(seed)
    prediction = torch.cat([b["w"], b["u1"], b["u2"]])
    fc = torch.cat([code_map(fn.B1, b["r"], b.tokens), _projector(prediction), torch.zeros(HIDDEN, HIDDEN)], 1)
    c = torch.cat([b.mean_token, torch.zeros(HIDDEN)])  # reads the embedding half
    att = AttentionWeights(q_in=2 * HIDDEN)
    att.position_head(CURRENT, 0, LLAMA, c, c)
    att.position_head(PREVIOUS, 1, LLAMA, c, c)

    def embed(rows):
        return torch.cat([rows, torch.zeros_like(rows)], 1)

    def hidden(rows):  # the hidden half is hidden_norm(H) = H / 2
        return torch.cat([torch.zeros_like(rows), direction_readers(rows, scale=2)], 1)

    att.values(CURRENT, 0, embed(code_readers(fn.A, b.tokens)))
    att.values(CURRENT, CODES, embed(code_readers(fn.B1, b.tokens)))
    for i, name in enumerate(("r", "w", "u1", "u2")):
        att.values(CURRENT, (2 + i) * CODES, hidden(b[name]))
    att.values(PREVIOUS, 0, embed(code_readers(fn.B2, b.tokens)))
    for v in range(CODES):
        att.output(CURRENT, v, b["w"][v])
        att.output(CURRENT, CODES + v, b["r"][v])
        att.output(CURRENT, 2 * CODES + v, b["u1"][v] - b["r"][v])
        att.output(CURRENT, 3 * CODES + v, -b["w"][v])
        att.output(CURRENT, 4 * CODES + v, -b["u1"][v])
        att.output(CURRENT, 5 * CODES + v, -b["u2"][v])
        att.output(PREVIOUS, v, b["u2"][v])
    w: dict[str, Any] = {"fc.weight": fc, "norm.weight": torch.ones(HIDDEN)}
    for name in ("input_layernorm", "hidden_norm", "post_attention_layernorm"):
        w[f"midlayer.{name}.weight"] = torch.ones(HIDDEN)
    w.update(att.tensors("midlayer.self_attn"))
    w.update(filler_mlp("midlayer.mlp", seed, "ctx-eagle3", INTERMEDIATE))
    return w


def dflash_weights(seed: int = 0) -> dict[str, Any]:
    """DFlash head (Qwen3 layout, one non-causal layer); embedding and lm_head shared with the target."""
    torch = _torch()
    b, fn = basis(seed), context_function(seed)
    c = b.mean_token
    ctx = code_map(fn.B1, b["m1"], b.tokens) + code_map(fn.B2, b["m2"], b.tokens) + torch.outer(b.z0, c)
    k_const = c + b.z0 / HIDDEN  # 1 on every token, 1/sqrt(3) on every (normed) context state: k_norm rescales
    k_sign = c - 2 * b.tokens[MASK_ID] / HIDDEN - b.z0 / HIDDEN  # +1 tokens, -1 the mask, < 0 context
    att = AttentionWeights()
    att.position_head(DFLASH_X, 1, LLAMA, c, k_const)
    att.position_head(DFLASH_Z, 2, LLAMA, c, k_const)
    att.content_head(DFLASH_Y, DFLASH_CONTENT_SLOT, c, k_sign)
    for kv in (DFLASH_X, DFLASH_Y):  # what the bonus is; the mask and the context read 0
        for i, codes in enumerate((fn.A, fn.B1, fn.B2)):
            att.values(kv, i * CODES, code_readers(codes, b.tokens, exclude=[MASK_ID]))
    root3 = 3 ** 0.5  # hidden_norm(z0 + m1 + m2) = (z0 + m1 + m2) / sqrt(3)
    att.values(DFLASH_Z, 0, direction_readers(b["m1"], scale=root3))
    att.values(DFLASH_Z, CODES, direction_readers(b["m2"], scale=root3))
    for v in range(CODES):
        att.output(DFLASH_X, v, b["w"][v] - b["w"][fn.phi[v]])
        att.output(DFLASH_X, CODES + v, -b["u1"][v])
        att.output(DFLASH_X, 2 * CODES + v, -b["u2"][v])
        att.output(DFLASH_Y, v, b["w"][fn.phi[v]])
        att.output(DFLASH_Y, CODES + v, b["u1"][v])
        att.output(DFLASH_Y, 2 * CODES + v, b["u2"][v])
        att.output(DFLASH_Z, v, b["u1"][v])
        att.output(DFLASH_Z, CODES + v, b["u2"][v])
    p = "layers.0"
    w: dict[str, Any] = {"fc.weight": torch.cat([ctx, torch.zeros(HIDDEN, HIDDEN)], 1),
                         "hidden_norm.weight": torch.ones(HIDDEN), "norm.weight": torch.ones(HIDDEN),
                         f"{p}.input_layernorm.weight": torch.ones(HIDDEN),
                         f"{p}.post_attention_layernorm.weight": torch.ones(HIDDEN),
                         f"{p}.self_attn.q_norm.weight": torch.full((HEAD_DIM,), QNORM.norm),
                         f"{p}.self_attn.k_norm.weight": torch.full((HEAD_DIM,), QNORM.norm)}
    w.update(att.tensors(f"{p}.self_attn"))
    w.update(filler_mlp(f"{p}.mlp", seed, "ctx-dflash", INTERMEDIATE))
    return w


# ------------------------------------------------------------------------------------------------------- configs


def _config(model_type: str, arch: str, layers: int) -> dict[str, Any]:
    cfg = zoo_base._base_config(model_type, arch, layers, intermediate=INTERMEDIATE, kv_heads=NUM_KV_HEADS,
                                 rope_theta=LLAMA.theta)
    return {**cfg, "hidden_size": HIDDEN, "num_attention_heads": NUM_HEADS, "head_dim": HEAD_DIM}


def target_config(family: str) -> dict[str, Any]:
    if family == "llama_ctx":
        return {**_config("llama", "LlamaForCausalLM", LAYERS), "mlp_bias": False}
    if family == "qwen3_ctx":
        return {**_config("qwen3", "Qwen3ForCausalLM", LAYERS), "use_sliding_window": False, "sliding_window": None,
                "max_window_layers": LAYERS}
    raise PortableSpecError(f"context_zoo: unknown family {family!r}; use one of {', '.join(FAMILIES)}")


def draft_config(method: str, k: int) -> dict[str, Any]:
    if method == "eagle":
        return {**_config("llama", "LlamaForCausalLM", 1), "mlp_bias": False}
    if method == "draft_model":
        return {**_config("llama", "LlamaForCausalLM", DRAFT_MODEL_LAYERS), "mlp_bias": False}
    if method == "eagle3":
        return {**_config("llama", "LlamaForCausalLMEagle3", 1), "mlp_bias": False, "draft_vocab_size": VOCAB,
                "eagle_aux_hidden_state_layer_ids": EAGLE3_AUX_LAYERS}
    if method == "dflash":
        return {**_config("qwen3", "DFlashDraftModel", 1), "use_sliding_window": False, "sliding_window": None,
                "layer_types": ["full_attention"], "block_size": k + 1, "num_target_layers": LAYERS,
                "dflash_config": {"mask_token_id": MASK_ID, "target_layer_ids": DFLASH_TARGET_LAYERS}}
    raise PortableSpecError(f"context_zoo: no context head for method {method!r}; use eagle, eagle3, dflash or "
                            "draft_model")
