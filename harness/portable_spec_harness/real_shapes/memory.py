"""The memory plan of a pair on one GPU: bf16 weights, KV bytes per token, and the KV room an H100 / H200 leaves.

vLLM gives the KV cache ``gpu_memory_utilization`` (0.9) of the card minus the weights and what a step needs besides
(activations for 8192 batched tokens, CUDA graphs, the sampler: ``OVERHEAD_GIB``, an estimate). The bench's largest
cell (32 concurrent requests of 1024 + 256 tokens) needs ``BENCH_TOKENS`` of KV; a kind "fits" when its room holds
that with half again to spare (prefix blocks, the drafter's lookahead).

Llama-3.1-8B: 15.0 GiB of weights (+0.8 GiB EAGLE-3 head): ~52 GiB of KV on an H100 (~400k tokens). Qwen3-30B-A3B:
56.9 GiB (+0.3 GiB head), 96 KiB of KV per token: ~10 GiB / ~100k tokens on an H100, which fits the bench (with less
room for long-context runs); an H200 leaves ~65 GiB. The partial EAGLE-1 head ships its own embeddings (+1 GiB;
not in the plan). A draft model (``draft_model``) counts as a whole model with its own KV in every layer (Llama-3.2-1B:
2.3 GiB tied, +0.5 GiB for the designed draft's untied lm_head, not in the plan; 32 KiB of KV per token).
"""

from __future__ import annotations

from typing import Any

from portable_spec_harness.real_shapes.shapes import Pair, parameter_count

GIB = 1 << 30
CARDS_GIB = {"nvidia-h100-x1": 79.6, "nvidia-h200": 139.8}
UTILIZATION = 0.9
OVERHEAD_GIB = 4.0
BENCH_TOKENS = 32 * (1024 + 256)
BYTES = 2  # bf16


def kv_bytes_per_token(config: dict[str, Any], layers: int | None = None) -> int:
    layers = config.get("num_hidden_layers", 1) if layers is None else layers
    return 2 * layers * config["num_key_value_heads"] * config["head_dim"] * BYTES


def plan(p: Pair) -> dict[str, Any]:
    whole = p.method == "draft_model"  # a draft model: every layer of its own, not one head layer
    target, head = parameter_count(p.target), parameter_count(p.head, head=not whole)
    weights = (target + head) * BYTES / GIB
    per_token = kv_bytes_per_token(p.target) + kv_bytes_per_token(p.head, layers=None if whole else 1)
    cards = {}
    for kind, total in CARDS_GIB.items():
        room = total * UTILIZATION - weights - OVERHEAD_GIB
        tokens = int(room * GIB // per_token) if room > 0 else 0
        cards[kind] = {"kv_gib": round(room, 1), "kv_tokens": tokens, "fits": tokens >= 1.5 * BENCH_TOKENS}
    kind = next((k for k, c in cards.items() if c["fits"]), None)
    return {"target_params": target, "head_params": head, "weights_gib": round(weights, 2),
            "kv_bytes_per_token": per_token, "cards": cards, "kind": kind, "bench_tokens": BENCH_TOKENS}
