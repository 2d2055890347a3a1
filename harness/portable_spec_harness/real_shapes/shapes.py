"""The real shapes, from public numbers (no file is downloaded: every config is written here), and the one list of
pairs this package builds.

Targets:

* ``llama31_8b``: Llama-3.1-8B (hidden 4096, 32 layers, 32 heads / 8 KV heads, head_dim 128, intermediate 14336,
  vocabulary 128256 = 128000 words + 256 special tokens, RoPE theta 500000 with llama3 scaling, 131072 positions,
  RMS eps 1e-5, bf16);
* ``qwen3_30b_a3b``: Qwen3-30B-A3B (``Qwen3MoeForCausalLM``: hidden 2048, 48 layers, 32 heads / 4 KV heads, head_dim
  128, 128 experts with 8 active, moe_intermediate 768, vocabulary 151936 = 151643 words + 293 special tokens, RoPE
  theta 1e6, 40960 positions, RMS eps 1e-6, bf16).

Heads:

* ``eagle``: EAGLE-LLaMA3-Instruct-8B's shape (vLLM ``EagleLlamaForCausalLM``: one Llama layer without input norm,
  ``fc`` 2 * hidden -> hidden, the target's embeddings and lm_head);
* ``eagle3``: EAGLE3-LLaMA3.1-Instruct-8B's shape for Llama (vLLM ``Eagle3LlamaForCausalLM``: one layer whose
  attention reads 2 * hidden, ``fc`` 3 * hidden -> hidden, its own 32000-token lm_head, ``d2t`` / ``t2d``), and the
  public Qwen3-30B-A3B EAGLE-3 head's shape for the MoE target (a ``LlamaForCausalLMEagle3`` head: hidden 2048, 32 /
  4 heads, intermediate 6144, draft vocabulary 32000; vLLM 0.26.0 loads it as ``Eagle3LlamaForCausalLM`` and
  ``Qwen3MoeForCausalLM`` supports EAGLE-3).

Where we differ from the public files, and why: every head takes the target's ``max_position_embeddings`` and RoPE
(the public EAGLE-1 head was trained for Llama-3 at 8192 positions, the EAGLE-3 heads say 2048): vLLM sizes the
head's RoPE table from the head's own config, and a request past it would index outside the table.

``SMALL`` is the same construction at test scale (hidden 1024, 4 layers, vocabulary 8192, draft vocabulary 2048, 8
experts with 2 active; a 2-layer draft model of hidden 512): the CPU tests run vLLM's own modules on it.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from portable_spec.errors import PortableSpecError


@dataclass(frozen=True)
class Vocabulary:
    """A tokenizer's layout: ids below ``words`` are ordinary words; the rest are special tokens, some named."""

    size: int
    words: int
    named: tuple[tuple[int, str], ...]
    bos: int | None  # added in front of every prompt by the tokenizer (Llama), or None (Qwen3)
    eos: tuple[int, ...]  # generation_config's eos_token_id; the first is the tokenizer's eos_token
    pad: int | None = None
    special_prefix: str = "<|reserved_special_token_"

    def token_name(self, token: int) -> str:
        names = dict(self.named)
        return names.get(token, f"{self.special_prefix}{token - self.words}|>")


LLAMA3_VOCAB = Vocabulary(
    size=128256, words=128000,
    named=((128000, "<|begin_of_text|>"), (128001, "<|end_of_text|>"), (128006, "<|start_header_id|>"),
           (128007, "<|end_header_id|>"), (128008, "<|eom_id|>"), (128009, "<|eot_id|>")),
    bos=128000, eos=(128009, 128001, 128008))
QWEN3_VOCAB = Vocabulary(
    size=151936, words=151643,
    named=((151643, "<|endoftext|>"), (151644, "<|im_start|>"), (151645, "<|im_end|>")),
    bos=None, eos=(151645, 151643), pad=151643, special_prefix="<|extra_")

LLAMA31_8B: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
    "vocab_size": 128256, "max_position_embeddings": 131072, "rms_norm_eps": 1e-5,
    "rope_theta": 500000.0,
    "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192},
    "hidden_act": "silu", "attention_bias": False, "attention_dropout": 0.0, "mlp_bias": False,
    "tie_word_embeddings": False, "initializer_range": 0.02, "pretraining_tp": 1, "use_cache": True,
    "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009], "torch_dtype": "bfloat16",
}
QWEN3_30B_A3B: dict[str, Any] = {
    "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
    "hidden_size": 2048, "intermediate_size": 6144, "moe_intermediate_size": 768, "num_hidden_layers": 48,
    "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128,
    "num_experts": 128, "num_experts_per_tok": 8, "norm_topk_prob": True, "decoder_sparse_step": 1,
    "mlp_only_layers": [], "router_aux_loss_coef": 0.001, "output_router_logits": False,
    "vocab_size": 151936, "max_position_embeddings": 40960, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
    "rope_scaling": None, "hidden_act": "silu", "attention_bias": False, "attention_dropout": 0.0,
    "use_sliding_window": False, "sliding_window": None, "max_window_layers": 48,
    "tie_word_embeddings": False, "initializer_range": 0.02, "use_cache": True,
    "bos_token_id": 151643, "eos_token_id": 151645, "torch_dtype": "bfloat16",
}
HEAD_KEYS = ("vocab_size", "max_position_embeddings", "rms_norm_eps", "rope_theta", "rope_scaling",
             "bos_token_id", "eos_token_id", "torch_dtype")
"""What a head takes from its target (see the module docstring)."""


def _head(target: dict[str, Any], architecture: str, **shape: Any) -> dict[str, Any]:
    return {"architectures": [architecture], "model_type": "llama", "num_hidden_layers": 1, "hidden_act": "silu",
            "attention_bias": False, "mlp_bias": False, "tie_word_embeddings": False, "use_cache": True,
            **{key: copy.deepcopy(target[key]) for key in HEAD_KEYS}, **shape}


EAGLE_LLAMA3_8B = _head(LLAMA31_8B, "LlamaForCausalLM", hidden_size=4096, intermediate_size=14336,
                        num_attention_heads=32, num_key_value_heads=8, head_dim=128)
"""EAGLE-LLaMA3-Instruct-8B's shape; vLLM's EAGLEConfig renames the architecture to EagleLlamaForCausalLM."""
EAGLE3_LLAMA31_8B = _head(LLAMA31_8B, "LlamaForCausalLMEagle3", hidden_size=4096, intermediate_size=14336,
                          num_attention_heads=32, num_key_value_heads=8, head_dim=128, draft_vocab_size=32000)
LLAMA32_1B: dict[str, Any] = {
    **LLAMA31_8B, "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16, "head_dim": 64,
    "rope_scaling": {**LLAMA31_8B["rope_scaling"], "factor": 32.0}, "tie_word_embeddings": True,
}
"""Llama-3.2-1B's shape: Llama-3.1-8B's config (vocabulary, heads, BOS / EOS, RoPE theta, positions, eps) but for
these numbers; the draft of ``llama8b_draft1b``."""
EAGLE3_QWEN3_30B_A3B = _head(QWEN3_30B_A3B, "LlamaForCausalLMEagle3", hidden_size=2048, intermediate_size=6144,
                             num_attention_heads=32, num_key_value_heads=4, head_dim=128, draft_vocab_size=32000)


@dataclass(frozen=True)
class Pair:
    name: str
    target: dict[str, Any]
    head: dict[str, Any]
    method: str  # vLLM's speculative method
    vocabulary: Vocabulary
    family: str  # the designed target's weight layout: "llama" or "qwen3_moe"
    public: str  # what the shapes are taken from
    active: int = 32000
    """How many tokens the designed target ever generates (its f cycle): the EAGLE-3 draft vocabulary, so that a
    draft can name every one (the EAGLE-1 pair's target is the EAGLE-3 pair's)."""


PAIRS: dict[str, Pair] = {p.name: p for p in (
    Pair("llama8b_eagle", LLAMA31_8B, EAGLE_LLAMA3_8B, "eagle", LLAMA3_VOCAB, "llama",
         "Llama-3.1-8B + EAGLE-LLaMA3-Instruct-8B"),
    Pair("llama8b_eagle3", LLAMA31_8B, EAGLE3_LLAMA31_8B, "eagle3", LLAMA3_VOCAB, "llama",
         "Llama-3.1-8B + EAGLE3-LLaMA3.1-Instruct-8B"),
    Pair("qwen3moe30b_eagle3", QWEN3_30B_A3B, EAGLE3_QWEN3_30B_A3B, "eagle3", QWEN3_VOCAB, "qwen3_moe",
         "Qwen3-30B-A3B + a Qwen3-30B-A3B EAGLE-3 head (LlamaForCausalLMEagle3, 32000-token draft vocabulary)"),
    Pair("llama8b_draft1b", LLAMA31_8B, LLAMA32_1B, "draft_model", LLAMA3_VOCAB, "llama",
         "Llama-3.1-8B + a Llama-3.2-1B-shaped draft model"),
)}
"""Every pair this package builds: the one list (the bench and the CLI read it)."""
PAIR_NAMES: tuple[str, ...] = tuple(PAIRS)

SCALES = ("real", "small")
SMALL_TARGET = {"hidden_size": 1024, "intermediate_size": 512, "num_hidden_layers": 4, "num_attention_heads": 8,
                "num_key_value_heads": 2, "head_dim": 128, "vocab_size": 8192, "max_position_embeddings": 16384,
                "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 128, "max_window_layers": 4}
SMALL_HEAD = {"hidden_size": 1024, "intermediate_size": 512, "num_attention_heads": 8, "num_key_value_heads": 2,
              "head_dim": 128, "vocab_size": 8192, "max_position_embeddings": 16384}
SMALL_DRAFT_MODEL = {"hidden_size": 512, "intermediate_size": 256, "num_hidden_layers": 2, "num_attention_heads": 8,
                     "num_key_value_heads": 2, "head_dim": 64, "vocab_size": 8192}
"""A draft model at test scale: several layers (the chain runs through each) and a hidden size of its own, unlike
the target's, so that a construction reading the wrong one fails."""
SMALL_DRAFT_VOCAB = 2048
SMALL_SPECIALS = 64


def _small(pair: Pair) -> Pair:
    """The same pair at test scale: only the numbers above change (the construction reads them from the configs)."""
    target = {**pair.target, **{k: v for k, v in SMALL_TARGET.items() if k in pair.target}}
    if pair.method == "draft_model":  # a whole model: its own RoPE (the public one's), the target's positions
        head = {**pair.head, **SMALL_DRAFT_MODEL, "max_position_embeddings": target["max_position_embeddings"]}
    else:
        head = {**pair.head, **SMALL_HEAD, "rope_scaling": copy.deepcopy(target["rope_scaling"]),
                "max_position_embeddings": target["max_position_embeddings"]}
    if "draft_vocab_size" in head:
        head["draft_vocab_size"] = SMALL_DRAFT_VOCAB
    words = SMALL_TARGET["vocab_size"] - SMALL_SPECIALS
    shift = words - pair.vocabulary.words
    vocab = Vocabulary(SMALL_TARGET["vocab_size"], words,
                       tuple((i + shift, name) for i, name in pair.vocabulary.named),
                       None if pair.vocabulary.bos is None else pair.vocabulary.bos + shift,
                       tuple(e + shift for e in pair.vocabulary.eos),
                       None if pair.vocabulary.pad is None else pair.vocabulary.pad + shift,
                       pair.vocabulary.special_prefix)
    for cfg in (target, head):
        cfg["bos_token_id"] = vocab.bos if vocab.bos is not None else vocab.eos[-1]
        cfg["eos_token_id"] = list(vocab.eos) if isinstance(pair.target["eos_token_id"], list) else vocab.eos[0]
    return Pair(pair.name, target, head, pair.method, vocab, pair.family, pair.public + " (test scale)",
                SMALL_DRAFT_VOCAB)


def pair(name: str, scale: str = "real") -> Pair:
    """The named pair at ``scale`` (one-line error naming the valid choices)."""
    if name not in PAIRS:
        raise PortableSpecError(f"real_shapes: unknown pair {name!r}; use one of {', '.join(PAIR_NAMES)}")
    if scale not in SCALES:
        raise PortableSpecError(f"real_shapes: unknown scale {scale!r}; use one of {', '.join(SCALES)}")
    return PAIRS[name] if scale == "real" else _small(PAIRS[name])


def parameter_count(config: dict[str, Any], *, head: bool = False) -> int:
    """Weights of a target or draft model (embeddings, layers, lm_head unless tied) or of a head (its layer, fc, its
    own lm_head; it shares the target's embeddings): the memory plan's numbers."""
    h, layers = config["hidden_size"], config.get("num_hidden_layers", 1)
    hd, heads, kv = config["head_dim"], config["num_attention_heads"], config["num_key_value_heads"]
    q_in = 2 * h if head and config.get("draft_vocab_size") else h
    attention = heads * hd * q_in + 2 * kv * hd * q_in + h * heads * hd
    if "num_experts" in config:
        mlp = config["num_experts"] * 3 * h * config["moe_intermediate_size"] + config["num_experts"] * h
    else:
        mlp = 3 * h * config["intermediate_size"]
    norms = 2 * h + (2 * hd if config.get("model_type") == "qwen3_moe" else 0)
    if not head:
        lm_heads = 1 if config.get("tie_word_embeddings") else 2
        return config["vocab_size"] * h * lm_heads + layers * (attention + mlp + norms) + h
    if config.get("draft_vocab_size"):
        return 3 * h * h + attention + mlp + 4 * h + config["draft_vocab_size"] * h
    return 2 * h * h + attention + mlp + h
