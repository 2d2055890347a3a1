"""Builders for the context models' attention weights: position-only heads, content heads, value readers, outputs.

A head is addressed by its KV head ``kv``: its query is the first query head of the GQA group (``kv * group``), the
group's other query heads stay zero (they read the same V and ``o_proj`` ignores them). ``value(kv, dim, row)`` sets
one V coordinate, ``output(kv, dim, direction)`` says where ``o_proj`` writes it. Qwen2-style layers (MiMo) add a
q/k/v bias: ``position_bias_head`` puts a position-only head's patterns there, so its query and key are the patterns
whatever the input (no constant to read from it).
"""

from __future__ import annotations

from typing import Any

from portable_spec_harness import zoo_base
from portable_spec_harness.zoo_base import _torch
from portable_spec_harness.context_zoo.basis import HIDDEN
from portable_spec_harness.context_zoo.rope_profile import Profile, patterns

NUM_HEADS = 16
NUM_KV_HEADS = 4
HEAD_DIM = 128
GROUP = NUM_HEADS // NUM_KV_HEADS


class AttentionWeights:
    """q/k/v/o of one Llama-style attention layer (``q_in`` inputs), all zero until a head is set."""

    def __init__(self, q_in: int = HIDDEN):
        torch = _torch()
        self.q = torch.zeros(NUM_HEADS * HEAD_DIM, q_in)
        self.k = torch.zeros(NUM_KV_HEADS * HEAD_DIM, q_in)
        self.v = torch.zeros(NUM_KV_HEADS * HEAD_DIM, q_in)
        self.o = torch.zeros(HIDDEN, NUM_HEADS * HEAD_DIM)
        self.q_bias = torch.zeros(NUM_HEADS * HEAD_DIM)
        self.k_bias = torch.zeros(NUM_KV_HEADS * HEAD_DIM)
        self.v_bias = torch.zeros(NUM_KV_HEADS * HEAD_DIM)

    def position_head(self, kv: int, d0: int, profile: Profile, q_const, k_const) -> None:
        """Query and key independent of the token (``q_const . x`` and ``k_const . x`` are the same for every input
        the head sees), so the score is RoPE's alone and peaks ``d0`` positions back."""
        torch = _torch()
        q_pat, k_pat = patterns(profile, d0)
        h = kv * GROUP
        self.q[h * HEAD_DIM:(h + 1) * HEAD_DIM] = torch.outer(q_pat, q_const)
        self.k[kv * HEAD_DIM:(kv + 1) * HEAD_DIM] = torch.outer(k_pat, k_const)

    def position_bias_head(self, kv: int, d0: int, profile: Profile) -> None:
        """``position_head`` through the bias alone: q and k are the patterns for every input (the weights stay 0), so
        the score is RoPE's alone, exactly as when ``q_const . x == 1``, and it needs the bias loaded and added."""
        q_pat, k_pat = patterns(profile, d0)
        h = kv * GROUP
        self.q_bias[h * HEAD_DIM:(h + 1) * HEAD_DIM] = q_pat
        self.k_bias[kv * HEAD_DIM:(kv + 1) * HEAD_DIM] = k_pat

    def content_head(self, kv: int, slot: int, q_const, k_sign) -> None:
        """Query and key on one rotary coordinate: the score is the product of ``q_const . x`` and ``k_sign . x``
        (in the slowest pair RoPE turns it by < 0.24 rad over 2048 positions: a sign test, not a position test)."""
        h = kv * GROUP
        self.q[h * HEAD_DIM + slot] = q_const
        self.k[kv * HEAD_DIM + slot] = k_sign

    def value(self, kv: int, dim: int, row) -> None:
        self.v[kv * HEAD_DIM + dim] = row

    def values(self, kv: int, first: int, rows) -> None:
        for i in range(rows.shape[0]):
            self.value(kv, first + i, rows[i])

    def output(self, kv: int, dim: int, direction) -> None:
        self.o[:, kv * GROUP * HEAD_DIM + dim] = direction

    def tensors(self, prefix: str, *, bias: bool = False) -> dict[str, Any]:
        """The layer's tensors in checkpoint naming; ``bias`` adds the q/k/v biases (Qwen2 layers always have them)."""
        out = {f"{prefix}.q_proj.weight": self.q, f"{prefix}.k_proj.weight": self.k,
               f"{prefix}.v_proj.weight": self.v, f"{prefix}.o_proj.weight": self.o}
        if bias:
            out.update({f"{prefix}.q_proj.bias": self.q_bias, f"{prefix}.k_proj.bias": self.k_bias,
                        f"{prefix}.v_proj.bias": self.v_bias})
        return out


def filler_attention(prefix: str, seed: int, tag: str, q_in: int = HIDDEN, *, bias: bool = False
                     ) -> dict[str, Any]:
    """A layer's attention that computes something and adds nothing (``o_proj == 0``); ``bias``: random q/k/v biases
    too (a Qwen2-style layer)."""
    torch = _torch()
    biases = {f"{prefix}.{n}_proj.bias": zoo_base._randn((size,), seed, f"{tag}{n}b")
              for n, size in (("q", NUM_HEADS * HEAD_DIM), ("k", NUM_KV_HEADS * HEAD_DIM),
                              ("v", NUM_KV_HEADS * HEAD_DIM))} if bias else {}
    return {**biases, f"{prefix}.q_proj.weight": zoo_base._randn((NUM_HEADS * HEAD_DIM, q_in), seed, tag + "q"),
            f"{prefix}.k_proj.weight": zoo_base._randn((NUM_KV_HEADS * HEAD_DIM, q_in), seed, tag + "k"),
            f"{prefix}.v_proj.weight": zoo_base._randn((NUM_KV_HEADS * HEAD_DIM, q_in), seed, tag + "v"),
            f"{prefix}.o_proj.weight": torch.zeros(HIDDEN, NUM_HEADS * HEAD_DIM)}


def filler_mlp(prefix: str, seed: int, tag: str, intermediate: int) -> dict[str, Any]:
    """An MLP that computes something and adds nothing (``down_proj == 0``)."""
    torch = _torch()
    return {f"{prefix}.gate_proj.weight": zoo_base._randn((intermediate, HIDDEN), seed, tag + "gate"),
            f"{prefix}.up_proj.weight": zoo_base._randn((intermediate, HIDDEN), seed, tag + "up"),
            f"{prefix}.down_proj.weight": torch.zeros(HIDDEN, intermediate)}
