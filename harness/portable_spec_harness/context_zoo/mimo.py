"""A MiMo-shaped target (Qwen2 layers: q/k/v bias, standard GQA attention) with one MTP layer (vLLM ``mimo_mtp``),
both exact by construction: the MTP pair that runs on standard attention (the DeepSeek one needs MLA).

Shape (``MiMoForCausalLM``; config ``model_type`` ``qwen2``, which transformers knows, where MiMo's hub checkpoints
say ``mimo`` with remote code: vLLM picks the class and maps the draft to ``mimo_mtp`` by the architecture): the
Llama context target's dims (hidden 2048, 16 heads of 128, 4 KV heads, 2 layers, intermediate 256),
``num_nextn_predict_layers`` 1.

Target: the Llama context target of :mod:`.models` (the greedy rule of :mod:`.function`, logits 16 for the greedy
token, <= 12 elsewhere) with its two position-only heads in the q/k bias (``AttentionWeights.position_bias_head``:
the same queries and keys, exactly; a bias vLLM fails to load or add leaves the scores flat and the output wrong);
the filler layer's q/k/v biases random, its o_proj zero. vLLM's ``MiMoModel`` hands the MTP layer the pre-norm
hidden ``h`` (RMS 2), transformers' last hidden state is ``h / 2``: the MTP's ``hidden_layernorm`` makes them one.

MTP layer (checkpoint ``model.mtp_layers.0.*``; vLLM's ``MiMoMultiTokenPredictorLayer``, the target's embedding
and its lm_head copy): ``input_proj`` on ``[hidden_layernorm(h) | token_layernorm(e_y)]`` is ``[F | I / 2]`` with
``F e_t = r_B1(t)``, so ``x = (e_y + r_B1(x_prev)) / 2`` (note MiMo's order: hidden first, DeepSeek's eh_proj takes
the embedding first). Its Qwen2 block, on ``input_layernorm(x) = (e_y + r) / sqrt(2)``, has the same two
position-only heads (bias): "current" (own position) reads ``A(y)`` and the state ``B1`` and writes
``(w_A(y) + u1_B1 - r_B1) / 2``, "previous" (one back) reads ``B2`` of the previous draft position's input and
writes ``u2 / 2``; the MLP adds nothing. ``x + attention`` is ``h(y; A(y), B1(x_prev), B2(x_prev)) / 2`` (RMS 1),
which ``final_layernorm`` keeps: exactly the target's normed final hidden at that position, so the logits are the
target's (margin 4) and the recycled hidden has the target's form: every chained step is exact, 100% acceptance for
prompts of >= 3 tokens (vLLM zeroes the MTP's input embedding at position 0). vLLM's ``MiMoMTP`` (0.26.0, 0.28.0)
runs its one layer for every step (its proposer passes no ``spec_step_idx``), which is what this design needs; it
builds that layer from the target's config, so the layer's attention is ``model.layers.2``: it continues the
target's layer indices (no KV cache shared by index, unlike the separate draft model). Right only with the target's
hidden (B1), its own K/V (A, the state) and the previous draft position's K/V at relative position 1 (B2).
"""

from __future__ import annotations

from typing import Any

from portable_spec_harness import zoo_base
from portable_spec_harness.zoo_base import _torch
from portable_spec_harness.context_zoo.attention import HEAD_DIM, NUM_HEADS, NUM_KV_HEADS, AttentionWeights
from portable_spec_harness.context_zoo.attention import filler_attention, filler_mlp
from portable_spec_harness.context_zoo.basis import CODES, HIDDEN, basis, code_map, code_readers, direction_readers
from portable_spec_harness.context_zoo.function import context_function
from portable_spec_harness.context_zoo.models import CURRENT, INTERMEDIATE, LAYERS, PREVIOUS
from portable_spec_harness.context_zoo.models import context_attention, lm_head
from portable_spec_harness.context_zoo.rope_profile import LLAMA

MTP_PREFIX = "model.mtp_layers.0"
"""The MTP layer in MiMo's checkpoint naming (vLLM's mapper moves it to ``mtp_layers.<num_hidden_layers>``)."""
ROOT2 = 2 ** 0.5  # the MTP block sees input_layernorm(x) = (e_y + r) / sqrt(2)


def mtp_attention(seed: int) -> AttentionWeights:
    b, fn = basis(seed), context_function(seed)
    att = AttentionWeights()
    att.position_bias_head(CURRENT, 0, LLAMA)
    att.position_bias_head(PREVIOUS, 1, LLAMA)
    att.values(CURRENT, 0, code_readers(fn.A, b.tokens, scale=ROOT2))
    att.values(CURRENT, CODES, direction_readers(b["r"], scale=ROOT2))
    att.values(PREVIOUS, 0, code_readers(fn.B2, b.tokens, scale=ROOT2))
    for v in range(CODES):
        att.output(CURRENT, v, b["w"][v] / 2)
        att.output(CURRENT, CODES + v, (b["u1"][v] - b["r"][v]) / 2)
        att.output(PREVIOUS, v, b["u2"][v] / 2)
    return att


def _norms(prefix: str) -> dict[str, Any]:
    torch = _torch()
    return {f"{prefix}.input_layernorm.weight": torch.ones(HIDDEN),
            f"{prefix}.post_attention_layernorm.weight": torch.ones(HIDDEN)}


def target_weights(seed: int = 0, logit: float = 16.0) -> dict[str, Any]:
    """The target's layers and the MTP layer (``model.mtp_layers.0``), in MiMo checkpoint naming."""
    torch = _torch()
    b, fn = basis(seed), context_function(seed)
    w: dict[str, Any] = {"model.embed_tokens.weight": b.tokens.clone(), "model.norm.weight": torch.ones(HIDDEN),
                         "lm_head.weight": lm_head(seed, logit)}
    for i in range(LAYERS):
        p = f"model.layers.{i}"
        w.update(_norms(p))
        if i == 0:
            w.update(context_attention(seed, bias=True).tensors(f"{p}.self_attn", bias=True))
        else:
            w.update(filler_attention(f"{p}.self_attn", seed, f"mimo{i}", bias=True))
        w.update(filler_mlp(f"{p}.mlp", seed, f"mimo{i}", INTERMEDIATE))
    p = MTP_PREFIX
    w.update(_norms(p))
    w.update(mtp_attention(seed).tensors(f"{p}.self_attn", bias=True))
    w.update(filler_mlp(f"{p}.mlp", seed, "mimo-mtp", INTERMEDIATE))
    for name in ("token_layernorm", "hidden_layernorm", "final_layernorm"):
        w[f"{p}.{name}.weight"] = torch.ones(HIDDEN)
    w[f"{p}.input_proj.weight"] = torch.cat([code_map(fn.B1, b["r"], b.tokens), torch.eye(HIDDEN) / 2], 1)
    return w


def target_config() -> dict[str, Any]:
    cfg = zoo_base._base_config("qwen2", "MiMoForCausalLM", LAYERS, intermediate=INTERMEDIATE,
                                 kv_heads=NUM_KV_HEADS, rope_theta=LLAMA.theta)
    del cfg["attention_bias"]  # Qwen2 layers always have the q/k/v bias
    return {**cfg, "hidden_size": HIDDEN, "num_attention_heads": NUM_HEADS, "head_dim": HEAD_DIM,
            "use_sliding_window": False, "sliding_window": None, "max_window_layers": LAYERS,
            "num_nextn_predict_layers": 1}
