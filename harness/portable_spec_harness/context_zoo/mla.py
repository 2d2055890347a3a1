"""A DeepSeek-V3-shaped MLA target with one MTP layer (vLLM ``deepseek_mtp``), both exact by construction.

Shape (``DeepseekV3ForCausalLM``, DeepSeek-V2-Lite's attention dims): hidden 2048, 16 heads, ``q_lora_rank`` None,
``kv_lora_rank`` 512, ``qk_nope_head_dim`` 128, ``qk_rope_head_dim`` 64, ``v_head_dim`` 128 (MLA cache head size 576:
what vLLM's FlashMLA and FlashAttnMLA backends take on Hopper), 2 dense layers (``first_k_dense_replace`` 2),
``num_nextn_predict_layers`` 1; ``moe_layer_freq`` 3 keeps vLLM's MTP layer (index 2) dense too, no yarn scaling.

Target: the greedy rule of :mod:`.function`, as the Llama context target but through MLA. Layer 0's compressed KV
is ``c_kv = norm(a_A(t) + b1_B1(t) + b2_B2(t))`` (three orthogonal +-1 rows of a 512 Hadamard: RMS sqrt(3)) and
its shared rope key ``k_pe`` the position-only key pattern (32 interleaved pairs, :data:`.rope_profile.MLA`: peak
147.0, gap 27.2, tilt 18.6 in softmax units at scale 1/sqrt(192)). Head 0's ``q_pe`` peaks at the current position
and its V (``kv_b``) reads ``A`` from the latent; head 1 peaks one position back and reads ``B1, B2``; every
``q_nope`` / ``k_nope`` is zero (so the absorbed decode path computes the same scores). o_proj writes ``w, u1, u2``
as in :mod:`.models`, every other o_proj and down_proj is zero: logits 16 for the greedy token, <= 12 elsewhere.

MTP layer (``model.layers.2``, shares the target's embedding and lm_head): ``eh_proj = [I / 2 | F]`` with
``F e_t = r_B1(t)`` gives ``x = (e_y + r_B1(x_prev)) / 2``; its MLA block, on ``norm(x) = (e_y + r) / sqrt(2)``, puts
``A(y)``, ``B2(y)`` and the state ``B1`` in the latent; head 0 (own position) writes ``(w_A(y) + u1_B1 - r_B1) / 2``,
head 1 (one back) ``u2_B2(prev input) / 2``. ``residual + hidden`` is then ``h(y; ...) / 2``, exactly the target's
final hidden at that position (RMS 1), so the recycled normed hidden has the target's form and every chained step
is exact: 100% acceptance for prompts of >= 3 tokens (vLLM zeroes the MTP's input embedding at position 0, so the
draft's position 0 carries no token and position 1 cannot read one back).
"""

from __future__ import annotations

from typing import Any

from portable_spec_harness import zoo_base
from portable_spec_harness.zoo_base import _torch
from portable_spec_harness.context_zoo.basis import CODES, HIDDEN, LATENT, basis, code_map, direction_readers
from portable_spec_harness.context_zoo.function import context_function
from portable_spec_harness.context_zoo.models import lm_head
from portable_spec_harness.context_zoo.rope_profile import MLA, patterns

LAYERS = 2
NUM_HEADS = 16
QK_NOPE = 128
QK_ROPE = 64
V_HEAD = 128
INTERMEDIATE = 256
CURRENT, PREVIOUS = 0, 1  # the heads of the context layers
ROOT3 = 3 ** 0.5  # kv_a_layernorm(a + b1 + b2) = (a + b1 + b2) / sqrt(3)


class MLAWeights:
    """q_proj / kv_a_proj_with_mqa / kv_b_proj / o_proj of one MLA layer, all zero until a head is set."""

    def __init__(self):
        torch = _torch()
        self.q = torch.zeros(NUM_HEADS * (QK_NOPE + QK_ROPE), HIDDEN)
        self.kv_a = torch.zeros(LATENT + QK_ROPE, HIDDEN)
        self.kv_b = torch.zeros(NUM_HEADS * (QK_NOPE + V_HEAD), LATENT)
        self.o = torch.zeros(HIDDEN, NUM_HEADS * V_HEAD)

    def position_head(self, head: int, d0: int, const) -> None:
        torch = _torch()
        q_pat, _ = patterns(MLA, d0)
        start = head * (QK_NOPE + QK_ROPE) + QK_NOPE
        self.q[start:start + QK_ROPE] = torch.outer(q_pat, const)

    def rope_key(self, const) -> None:
        torch = _torch()
        _, k_pat = patterns(MLA, 0)
        self.kv_a[LATENT:] = torch.outer(k_pat, const)

    def value(self, head: int, first: int, rows) -> None:
        start = head * (QK_NOPE + V_HEAD) + QK_NOPE + first
        self.kv_b[start:start + rows.shape[0]] = rows

    def output(self, head: int, dim: int, direction) -> None:
        self.o[:, head * V_HEAD + dim] = direction

    def tensors(self, prefix: str) -> dict[str, Any]:
        torch = _torch()
        return {f"{prefix}.q_proj.weight": self.q, f"{prefix}.kv_a_proj_with_mqa.weight": self.kv_a,
                f"{prefix}.kv_a_layernorm.weight": torch.ones(LATENT), f"{prefix}.kv_b_proj.weight": self.kv_b,
                f"{prefix}.o_proj.weight": self.o}


def _target_layer(seed: int) -> MLAWeights:
    b, fn = basis(seed), context_function(seed)
    c, lat = b.mean_token, b.latent
    att = MLAWeights()
    att.position_head(CURRENT, 0, c)
    att.position_head(PREVIOUS, 1, c)
    att.rope_key(c)
    att.kv_a[:LATENT] = (code_map(fn.A, lat["a"], b.tokens) + code_map(fn.B1, lat["b1"], b.tokens)
                         + code_map(fn.B2, lat["b2"], b.tokens))
    att.value(CURRENT, 0, direction_readers(lat["a"], ROOT3))
    att.value(PREVIOUS, 0, direction_readers(lat["b1"], ROOT3))
    att.value(PREVIOUS, CODES, direction_readers(lat["b2"], ROOT3))
    for v in range(CODES):
        att.output(CURRENT, v, b["w"][v])
        att.output(PREVIOUS, v, b["u1"][v])
        att.output(PREVIOUS, CODES + v, b["u2"][v])
    return att


def _mtp_layer(seed: int) -> MLAWeights:
    b, fn = basis(seed), context_function(seed)
    lat = b.latent
    root2 = 2 ** 0.5  # the block sees norm(x) = (e_y + r) / sqrt(2)
    c = root2 * b.mean_token
    att = MLAWeights()
    att.position_head(CURRENT, 0, c)
    att.position_head(PREVIOUS, 1, c)
    att.rope_key(c)
    state = lat["b1"].t() @ b["r"] / HIDDEN  # r_c -> b1_c
    att.kv_a[:LATENT] = root2 * (code_map(fn.A, lat["a"], b.tokens) + code_map(fn.B2, lat["b2"], b.tokens) + state)
    att.value(CURRENT, 0, direction_readers(lat["a"], ROOT3))
    att.value(CURRENT, CODES, direction_readers(lat["b1"], ROOT3))
    att.value(PREVIOUS, 0, direction_readers(lat["b2"], ROOT3))
    for v in range(CODES):
        att.output(CURRENT, v, b["w"][v] / 2)
        att.output(CURRENT, CODES + v, (b["u1"][v] - b["r"][v]) / 2)
        att.output(PREVIOUS, v, b["u2"][v] / 2)
    return att


def _filler_layer(seed: int, tag: str) -> MLAWeights:
    att = MLAWeights()
    att.q = zoo_base._randn(tuple(att.q.shape), seed, tag + "q")
    att.kv_a = zoo_base._randn(tuple(att.kv_a.shape), seed, tag + "kva")
    att.kv_b = zoo_base._randn(tuple(att.kv_b.shape), seed, tag + "kvb")
    return att  # o_proj stays zero: the layer adds nothing


def _dense(prefix: str, seed: int, tag: str) -> dict[str, Any]:
    from portable_spec_harness.context_zoo.attention import filler_mlp

    torch = _torch()
    return {f"{prefix}.input_layernorm.weight": torch.ones(HIDDEN),
            f"{prefix}.post_attention_layernorm.weight": torch.ones(HIDDEN),
            **filler_mlp(f"{prefix}.mlp", seed, tag, INTERMEDIATE)}


def target_weights(seed: int = 0, logit: float = 16.0) -> dict[str, Any]:
    """The target's layers and the MTP layer (``model.layers.<LAYERS>``), in DeepSeek-V3 checkpoint naming."""
    torch = _torch()
    b = basis(seed)
    head = lm_head(seed, logit)
    w: dict[str, Any] = {"model.embed_tokens.weight": b.tokens.clone(), "model.norm.weight": torch.ones(HIDDEN),
                         "lm_head.weight": head}
    for i in range(LAYERS):
        p = f"model.layers.{i}"
        att = _target_layer(seed) if i == 0 else _filler_layer(seed, f"mla{i}")
        w.update(att.tensors(f"{p}.self_attn"))
        w.update(_dense(p, seed, f"mla{i}"))
    p = f"model.layers.{LAYERS}"
    w.update(_mtp_layer(seed).tensors(f"{p}.self_attn"))
    w.update(_dense(p, seed, "mtp"))
    w[f"{p}.embed_tokens.weight"] = b.tokens.clone()
    w[f"{p}.enorm.weight"] = torch.ones(HIDDEN)
    w[f"{p}.hnorm.weight"] = torch.ones(HIDDEN)
    w[f"{p}.eh_proj.weight"] = torch.cat([torch.eye(HIDDEN) / 2, code_map(context_function(seed).B1, b["r"],
                                                                           b.tokens)], 1)
    w[f"{p}.shared_head.norm.weight"] = torch.ones(HIDDEN)
    w[f"{p}.shared_head.head.weight"] = head.clone()
    return w


def target_config() -> dict[str, Any]:
    cfg = zoo_base._base_config("deepseek_v3", "DeepseekV3ForCausalLM", LAYERS, intermediate=INTERMEDIATE,
                                 kv_heads=NUM_HEADS, rope_theta=MLA.theta)
    del cfg["head_dim"]
    return {**cfg, "hidden_size": HIDDEN, "num_attention_heads": NUM_HEADS, "q_lora_rank": None,
            "kv_lora_rank": LATENT, "qk_nope_head_dim": QK_NOPE, "qk_rope_head_dim": QK_ROPE, "v_head_dim": V_HEAD,
            "rope_scaling": None, "rope_interleave": True, "first_k_dense_replace": LAYERS, "moe_layer_freq": 3,
            "n_routed_experts": 4, "n_shared_experts": 1, "num_experts_per_tok": 2, "moe_intermediate_size": 64,
            "n_group": 1, "topk_group": 1, "norm_topk_prob": True, "routed_scaling_factor": 1.0,
            "scoring_func": "sigmoid", "topk_method": "noaux_tc", "num_nextn_predict_layers": 1}
