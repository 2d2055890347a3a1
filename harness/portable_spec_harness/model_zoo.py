"""A generated tiny-model zoo: HF-format target/draft pairs whose greedy output and draft acceptance are known.

Nothing is downloaded: the tokenizer is trained here (``tokenizers``, byte-level BPE) on a generated corpus and every
weight is constructed, so a test can assert vLLM's tokens exactly.

The construction (why the answers are known):

* Embeddings are rows of a randomised Hadamard matrix (hidden size == vocab size), so all V token vectors are
  exactly orthogonal, +-1 valued, and have RMS 1 (every RMSNorm is a no-op up to a uniform scale).
* Every target layer has ``o_proj == 0`` and ``down_proj == 0`` (MoE: every expert's ``w2 == 0``), so the residual
  stream, every aux hidden state and the final hidden state are the current token's embedding. The lm_head row of
  token j is the sum of the embeddings of the tokens that map to j, so the logits are exactly one-hot
  (``16`` for ``f(t)``, ``0`` elsewhere) and the target's greedy next token is ``f(current token)``; no bf16
  rounding can flip it. ``f`` is one seeded cycle through every printable token (no short cycles); special and
  non-printable tokens map into that cycle; the ``<|mask|>`` token has no image.
* EAGLE-1 head (``EagleLlamaForCausalLM``): ``fc = [I | 0]`` keeps the embedding half, its layer's
  ``o_proj``/``down_proj`` are zero, and it shares the target's lm_head, so it predicts ``f(input token)``:
  100% acceptance at every position. The ``partial`` variant ships its own ``embed_tokens`` in which a seeded
  ~40% of the printable tokens carry the embedding of ``f(t)``, so it predicts ``f(f(t))`` there: a known
  agreement fraction, deterministic acceptance.
* EAGLE-1 ``attention`` variant: same 100% acceptance, but only through correct draft attention, positions and
  KV-cache slots (the plain heads ignore all three). Its own embedding scrambles tokens by a seeded permutation
  sigma without fixed points; every head's query and key are one constant vector (RoPE makes the score peak at
  relative position 0, a gap of >= 40 to any other position), V is the identity and ``o_proj = M_sigma - I``, so only
  attending to the current position's own K/V unscrambles the token. Hidden states are still ignored (the EAGLE-3
  head is the one that needs them).
* EAGLE-3 head (``LlamaForCausalLMEagle3``): ``fc = [I | 0 | 0]`` selects one copy of the aux states (the
  embedding of the last verified token), attention is zeroed, and the MLP is an exact lookup table
  (``intermediate_size == V``; gate/up rows are token embeddings, so only the matching row is non-zero) that adds
  ``e_f(t) - e_t`` to the residual: the draft state advances along ``f`` each step and the shared lm_head
  predicts the next token. 100% acceptance. The ``d2t`` variant has the shape of published EAGLE-3 heads: a draft
  vocabulary smaller than the target's (the 855 tokens f can produce, sorted: :func:`draft_vocabulary`), its own
  lm_head over them (the target's rows at those ids) and the ``d2t`` map (draft id i -> target id i + d2t[i]:
  :func:`d2t_offsets`, non-zero and not constant), so vLLM scatters its logits into the target vocabulary. Same
  100% acceptance.
* DFlash head (``DFlashDraftModel``, Qwen3 target): context K/V are zero (``fc == 0``); every head's query and key
  live in the lowest-frequency RoPE pair, so a mask query scores +181 on the bonus token and -181 on mask tokens;
  V is the identity and o_proj passes it on once per GQA group, so every mask slot outputs ``e_mask + e_bonus`` and
  predicts ``f(bonus)``.
  Acceptance is exactly 100% at position 0 and 0% after it (with ``num_speculative_tokens=1``: 100%).
* Soft targets (``target_logit=SOFT_LOGIT``): the same construction with a winning logit of 8 instead of 16, so at
  temperature 1 the target samples ``f(t)`` with probability ~0.745 and any other token otherwise: sampled output
  leaves the f chain (at logit 16 it is the greedy output up to ~1e-4 per token, a degenerate sampling test). The
  EAGLE heads share the lm_head and their output hidden state is exactly the embedding the target ends with, so a
  perfect head's draft distribution equals the target's bit for bit: with probabilistic draft sampling every draft
  token is accepted (``p / q == 1``) at any temperature, and any drafting bug shows up as a drop below 100%.

Pairs that see context (``portable_spec_harness.context_zoo``; the pairs above stay as they are). Their target's
next token is ``table[A(current)][B1(previous), B2(previous)]``, read through two position-only RoPE attention heads
(the current token's own K/V and the previous position's), so a wrong position, KV slot, ``seq_lens`` or
``num_computed_tokens`` changes greedy output; hidden size 2048, exactly orthogonal +-1 code directions, logits 16 for
the greedy token and <= 12 for any other (margin 4, exact in bf16); attention gaps >= 27 in softmax units:

* ``llama_ctx_eagle``: Llama context target + EAGLE-1 head right only with the target's hidden state, its own K/V
  and the previous draft position's K/V: 100% acceptance at every position (prompts of >= 2 tokens).
* ``llama_ctx_eagle3``: the same target + an EAGLE-3 head with attention on (the same three reads, its hidden
  state carried in its prenorm output): 100% acceptance.
* ``qwen3_ctx_dflash``: the Qwen3 form of the target + a DFlash head whose slots 1 and 2 are exact (context K/V
  at the right positions needed for slot 1) and slots >= 3 never are: acceptance ``[1, 1, 0, ...]``.
* ``deepseek_mla_mtp``: a DeepSeek-V3-shaped MLA target (kv_lora_rank 512, rope 64: FlashMLA / FlashAttnMLA on
  Hopper) with one MTP layer (vLLM ``mtp``): 100% acceptance (prompts of >= 3 tokens).
* ``llama_ctx_draft_model``: the Llama context target + a separate 4-layer ``LlamaForCausalLM`` draft of the same
  vocabulary (vLLM ``draft_model``) whose context attention is its last layer: 100% acceptance, only with that
  layer's K/V at the right positions and slots (any prompt).
* ``mimo_ctx_mtp``: a MiMo-shaped target (``MiMoForCausalLM``: Qwen2 layers with q/k/v bias, standard GQA attention)
  with one MTP layer (vLLM ``mtp``, ``mimo_mtp`` inside): the MTP pair on standard attention, 100% acceptance
  (prompts of >= 3 tokens).

Their ``expected`` block has ``kind: "context"`` and the tables; :func:`expected_output` gives the greedy output of
any pair for any prompt, :func:`context_prompts` prompts with expected outputs (> 16 KV blocks, shared prefixes for
ragged prefills, one ending at ``max_model_len``).

Entry points: :func:`build_pair`, :func:`expected_continuation`, :func:`expected_output`, :func:`load_expected`,
:func:`draft_vocabulary` and :func:`d2t_offsets` (an EAGLE-3 draft vocabulary and its map, for any head's builder),
:func:`simulate_greedy_spec_decode`, :func:`context_prompts`, and ``python -m portable_spec_harness.model_zoo OUTDIR``.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import random
import shutil
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

from portable_spec.errors import PortableSpecError
from portable_spec_harness.zoo_base import (  # noqa: F401 (re-exported: model_zoo.VOCAB and the rest stay where users read them)
    BOS_ID, CHAT_TEMPLATE, EOS_ID, HEAD_DIM, HIDDEN, INTERMEDIATE, MANIFEST, MASK_ID, MAX_POSITIONS, NUM_HEADS,
    NUM_KV_HEADS, PAD_ID, RMS_EPS, SPECIAL_TOKENS, VOCAB, ZooFunction, _base_config, _corpus, _generator,
    _is_printable, _randn, _tokenizer_json, _torch, _write_json, _write_tokenizer, tokenizer, zoo_function,
)

ZOO_VERSION = 1
NUM_LAYERS = 4
MOE_EXPERTS = 4
MOE_TOP_K = 2
MOE_INTERMEDIATE = 256
LOGIT = 16.0  # the winning logit; every other logit is exactly 0
SOFT_LOGIT = 8.0  # soft targets: p(f(t)) = e^8 / (e^8 + 1023) ~ 0.745 at temperature 1; 8 / 1024 is exact in bf16
PARTIAL_AGREEMENT = 0.6
EAGLE3_AUX_LAYERS = [1, 2, 3]
DFLASH_TARGET_LAYERS = [1, 2]
DFLASH_QK_NORM = 4.0  # attention score on the bonus token: 128 * 4 * 4 / sqrt(128) ~ 181
DFLASH_ROPE_THETA = 1_000_000.0
EAGLE_ATTN_QK = 16.0  # query/key scale of the attention variant: score gap to any other position >= 0.17 * 16**2
VARIANTS = ("perfect", "partial", "attention", "d2t")


# pair name -> (target family, speculative method, supported variants)
PAIRS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "llama_eagle": ("llama", "eagle", ("perfect", "partial", "attention")),
    "llama_eagle3": ("llama", "eagle3", ("perfect", "d2t")),
    "mixtral_eagle": ("mixtral", "eagle", ("perfect", "partial", "attention")),
    "qwen3_dflash": ("qwen3", "dflash", ("perfect",)),
    "llama_ctx_eagle": ("llama_ctx", "eagle", ("perfect",)),
    "llama_ctx_eagle3": ("llama_ctx", "eagle3", ("perfect",)),
    "qwen3_ctx_dflash": ("qwen3_ctx", "dflash", ("perfect",)),
    "deepseek_mla_mtp": ("deepseek_mla", "mtp", ("perfect",)),
    "llama_ctx_draft_model": ("llama_ctx", "draft_model", ("perfect",)),
    "mimo_ctx_mtp": ("mimo_ctx", "mtp", ("perfect",)),
}
CONTEXT_FAMILIES = ("llama_ctx", "qwen3_ctx", "deepseek_mla", "mimo_ctx")
CONTEXT_PAIRS = tuple(name for name, (family, _, _) in PAIRS.items() if family in CONTEXT_FAMILIES)
"""The pairs that see context (see the module docstring); the others are the f-chain pairs."""
DEFAULT_NUM_SPECULATIVE_TOKENS = 3


# ------------------------------------------------------------------------------------------------ the function f


def partial_agreement_set(seed: int = 0, fraction: float = PARTIAL_AGREEMENT) -> frozenset[int]:
    """The printable tokens on which the partial EAGLE head agrees with f (all non-printable tokens agree too)."""
    cycle = zoo_function(seed).cycle
    rng = random.Random(f"partial-{seed}")
    return frozenset(rng.sample(cycle, round(fraction * len(cycle))))


def partial_draft_function(seed: int = 0) -> tuple[int, ...]:
    """``g`` of the partial EAGLE head: f(t) on the agreement set and off the cycle, f(f(t)) elsewhere."""
    fn = zoo_function(seed)
    agree = partial_agreement_set(seed)
    on_cycle = set(fn.cycle)
    return tuple(
        -1 if t == MASK_ID else (fn.f[fn.f[t]] if (t in on_cycle and t not in agree) else fn.f[t])
        for t in range(VOCAB)
    )


def expected_continuation(f: Sequence[int] | ZooFunction, prompt_ids: Sequence[int], max_tokens: int) -> list[int]:
    """The target's greedy continuation of ``prompt_ids``: f applied to the last token, ``max_tokens`` times."""
    table = f.f if isinstance(f, ZooFunction) else f
    if not prompt_ids:
        raise PortableSpecError("model_zoo: expected_continuation needs at least one prompt token")
    out, token = [], int(prompt_ids[-1])
    for _ in range(max_tokens):
        token = table[token]
        if token < 0:
            raise PortableSpecError("model_zoo: the chain reached the mask token; it never has a successor")
        out.append(token)
    return out


def simulate_greedy_spec_decode(
    f: Sequence[int], propose: Callable[[int, int], list[int]], prompt_ids: Sequence[int], max_tokens: int, k: int
) -> dict[str, Any]:
    """Ideal greedy speculative decoding (no scheduling limits): drafts, accepted tokens per position, output.

    ``propose(bonus_token, k)`` returns the draft's k tokens after ``bonus_token``. vLLM may schedule the last
    steps of a request differently, so compare counts with vLLM only where they cannot depend on that (e.g. the
    perfect heads accept every draft token).
    """
    out = [f[int(prompt_ids[-1])]]  # the prefill step samples one token
    per_pos = [0] * k
    drafts = 0
    while len(out) < max_tokens:
        bonus = out[-1]
        proposal = propose(bonus, k)
        drafts += 1
        prev = bonus
        for i, d in enumerate(proposal):
            if d != f[prev]:
                break
            per_pos[i] += 1
            out.append(d)
            prev = d
        out.append(f[prev])
    return {
        "output": out[:max_tokens],
        "num_drafts": drafts,
        "num_draft_tokens": drafts * k,
        "num_accepted_tokens": sum(per_pos),
        "accepted_per_position": per_pos,
    }


def draft_proposer(method: str, variant: str, seed: int = 0) -> Callable[[int, int], list[int]]:
    """The zoo draft's proposal rule for ``simulate_greedy_spec_decode``."""
    f = zoo_function(seed).f
    if method == "dflash":
        return lambda bonus, k: [f[bonus]] * k
    g = partial_draft_function(seed) if variant == "partial" else f

    def chain(bonus: int, k: int) -> list[int]:
        out, t = [], bonus
        for _ in range(k):
            t = g[t]
            out.append(t)
        return out

    return chain


def top_probability(logit: float = LOGIT, temperature: float = 1.0) -> float:
    """The target's probability of its greedy token f(t) when sampling: one logit ``logit``, VOCAB - 1 at 0."""
    top = math.exp(logit / temperature)
    return top / (top + VOCAB - 1)


def expected_acceptance_per_position(method: str, variant: str, k: int, pair: str | None = None
                                     ) -> list[float] | None:
    """Exact per-position acceptance for the perfect heads; None where it depends on the prompts (partial).
    ``pair`` picks a context pair's heads (its DFlash head accepts two positions)."""
    if pair in CONTEXT_PAIRS:
        from portable_spec_harness.context_zoo.function import expected_acceptance

        return expected_acceptance(method, k)
    if variant == "partial":
        return None
    if method == "dflash":
        return [1.0] + [0.0] * (k - 1)
    return [1.0] * k


# ------------------------------------------------------------------------------------------------------ weights


@functools.lru_cache(maxsize=4)
def embeddings(seed: int = 0):
    """V x H, +-1: Sylvester Hadamard rows, seeded row permutation and column signs (exactly orthogonal)."""
    torch = _torch()
    had = torch.ones(1, 1)
    while had.shape[0] < HIDDEN:
        had = torch.cat([torch.cat([had, had], 1), torch.cat([had, -had], 1)], 0)
    g = _generator(seed, "embed")
    perm = torch.randperm(HIDDEN, generator=g)
    signs = torch.randint(0, 2, (HIDDEN,), generator=g).float() * 2 - 1
    return (had[perm][:VOCAB] * signs).contiguous()


def lm_head(seed: int = 0, logit: float = LOGIT):
    """Row j = logit / HIDDEN * the sum of the embeddings of f's preimage of j: logits are ``logit`` at f(t), 0
    elsewhere. Only a positive ``logit`` whose weights bf16 holds exactly is accepted: then target and draft logits
    are exact and equal (one-line error otherwise)."""
    torch = _torch()
    emb = embeddings(seed)
    f = zoo_function(seed).f
    w = torch.zeros(VOCAB, HIDDEN)
    for t, j in enumerate(f):
        if j >= 0:
            w[j] += emb[t]
    w *= logit / HIDDEN
    if logit <= 0 or not torch.equal(w.bfloat16().float(), w):
        raise PortableSpecError(f"model_zoo: target_logit {logit:g} gives lm_head weights bf16 cannot hold exactly "
                                f"(draft and target logits could differ); use e.g. {LOGIT:g} or {SOFT_LOGIT:g}")
    return w


def _attention(prefix: str, seed: int, tag: str, *, q_in: int = HIDDEN, heads: int = NUM_HEADS,
               kv_heads: int = NUM_KV_HEADS, qk_norm: bool = False) -> dict[str, Any]:
    torch = _torch()
    w = {
        f"{prefix}.q_proj.weight": _randn((heads * HEAD_DIM, q_in), seed, tag + "q"),
        f"{prefix}.k_proj.weight": _randn((kv_heads * HEAD_DIM, q_in), seed, tag + "k"),
        f"{prefix}.v_proj.weight": _randn((kv_heads * HEAD_DIM, q_in), seed, tag + "v"),
        f"{prefix}.o_proj.weight": torch.zeros(HIDDEN, heads * HEAD_DIM),  # the layer adds nothing
    }
    if qk_norm:
        w[f"{prefix}.q_norm.weight"] = torch.ones(HEAD_DIM)
        w[f"{prefix}.k_norm.weight"] = torch.ones(HEAD_DIM)
    return w


def _mlp(prefix: str, seed: int, tag: str, intermediate: int = INTERMEDIATE) -> dict[str, Any]:
    torch = _torch()
    return {
        f"{prefix}.gate_proj.weight": _randn((intermediate, HIDDEN), seed, tag + "gate"),
        f"{prefix}.up_proj.weight": _randn((intermediate, HIDDEN), seed, tag + "up"),
        f"{prefix}.down_proj.weight": torch.zeros(HIDDEN, intermediate),  # the layer adds nothing
    }


def _moe(prefix: str, seed: int, tag: str) -> dict[str, Any]:
    torch = _torch()
    w = {f"{prefix}.gate.weight": _randn((MOE_EXPERTS, HIDDEN), seed, tag + "router", std=0.5)}
    for e in range(MOE_EXPERTS):
        w[f"{prefix}.experts.{e}.w1.weight"] = _randn((MOE_INTERMEDIATE, HIDDEN), seed, f"{tag}w1.{e}")
        w[f"{prefix}.experts.{e}.w3.weight"] = _randn((MOE_INTERMEDIATE, HIDDEN), seed, f"{tag}w3.{e}")
        w[f"{prefix}.experts.{e}.w2.weight"] = torch.zeros(HIDDEN, MOE_INTERMEDIATE)  # every expert adds nothing
    return w


def target_weights(family: str, seed: int = 0, logit: float = LOGIT) -> dict[str, Any]:
    torch = _torch()
    w: dict[str, Any] = {"model.embed_tokens.weight": embeddings(seed).clone(), "model.norm.weight": torch.ones(HIDDEN),
                         "lm_head.weight": lm_head(seed, logit)}
    for i in range(NUM_LAYERS):
        p = f"model.layers.{i}"
        w[f"{p}.input_layernorm.weight"] = torch.ones(HIDDEN)
        w[f"{p}.post_attention_layernorm.weight"] = torch.ones(HIDDEN)
        w.update(_attention(f"{p}.self_attn", seed, f"{family}{i}", qk_norm=family == "qwen3"))
        if family == "mixtral":
            w.update(_moe(f"{p}.block_sparse_moe", seed, f"{family}{i}"))
        else:
            w.update(_mlp(f"{p}.mlp", seed, f"{family}{i}"))
    return w


def eagle_weights(variant: str, seed: int = 0) -> dict[str, Any]:
    """EAGLE-1 head in vLLM's EagleLlamaForCausalLM layout (no input_layernorm, final norm or lm_head)."""
    if variant == "attention":
        return eagle_attention_weights(seed)
    torch = _torch()
    w: dict[str, Any] = {"fc.weight": torch.cat([torch.eye(HIDDEN), torch.zeros(HIDDEN, HIDDEN)], 1)}
    w["layers.0.post_attention_layernorm.weight"] = torch.ones(HIDDEN)
    w.update(_attention("layers.0.self_attn", seed, "eagle"))
    w.update(_mlp("layers.0.mlp", seed, "eagle"))
    if variant == "partial":
        emb = embeddings(seed)
        fn = zoo_function(seed)
        agree = partial_agreement_set(seed)
        own = emb.clone()
        for t in fn.cycle:
            if t not in agree:
                own[t] = emb[fn.f[t]]  # the head sees f(t) where the target sees t: predicts f(f(t))
        w["embed_tokens.weight"] = own
    return w


def _one_head_per_group(v_map):
    """o_proj [H, heads * head_dim] that applies ``v_map`` (H x H, acting on the concatenated V of the kv heads) to
    the first query head of each GQA group and ignores the others (they read the same V)."""
    torch = _torch()
    group = NUM_HEADS // NUM_KV_HEADS
    o = torch.zeros(HIDDEN, NUM_HEADS * HEAD_DIM)
    for kv in range(NUM_KV_HEADS):
        h = kv * group
        o[:, h * HEAD_DIM:(h + 1) * HEAD_DIM] = v_map[:, kv * HEAD_DIM:(kv + 1) * HEAD_DIM]
    return o


def token_map(table: Sequence[int], seed: int = 0):
    """The H x H matrix that sends e_t to e_table[t] (to 0 where table[t] < 0): exact in the orthogonal basis."""
    torch = _torch()
    emb = embeddings(seed)
    image = emb[torch.tensor([max(j, 0) for j in table])] * torch.tensor([float(j >= 0) for j in table])[:, None]
    return image.t() @ emb / HIDDEN


def attention_variant_permutation(seed: int = 0) -> tuple[int, ...]:
    """sigma of the attention variant: a seeded permutation of all token ids with no fixed point."""
    rng = random.Random(f"sigma-{seed}")
    order = list(range(VOCAB))
    rng.shuffle(order)
    sigma = [0] * VOCAB
    for i, t in enumerate(order):
        sigma[t] = order[(i + 1) % VOCAB]
    return tuple(sigma)


def eagle_attention_weights(seed: int = 0) -> dict[str, Any]:
    """EAGLE-1 head that predicts f(t) only when its attention reads the current position's own K/V (see the
    module docstring)."""
    torch = _torch()
    emb = embeddings(seed)
    sigma = attention_variant_permutation(seed)
    inverse = [0] * VOCAB
    for t, s in enumerate(sigma):
        inverse[s] = t
    const = emb.sum(0) / HIDDEN  # const . e_t == 1 for every token
    half = HEAD_DIM // 2
    q = torch.zeros(NUM_HEADS * HEAD_DIM, HIDDEN)
    for h in range(NUM_HEADS):
        q[h * HEAD_DIM:h * HEAD_DIM + half] = EAGLE_ATTN_QK * const  # every rotary pair starts at angle 0
    k = q[:NUM_KV_HEADS * HEAD_DIM].clone()
    w: dict[str, Any] = {
        "embed_tokens.weight": emb[torch.tensor(inverse)],  # the head sees sigma^-1(t)
        "fc.weight": torch.cat([torch.eye(HIDDEN), torch.zeros(HIDDEN, HIDDEN)], 1),
        "layers.0.post_attention_layernorm.weight": torch.ones(HIDDEN),
        "layers.0.self_attn.q_proj.weight": q,
        "layers.0.self_attn.k_proj.weight": k,
        "layers.0.self_attn.v_proj.weight": torch.eye(HIDDEN),  # kv heads together carry the whole vector
        "layers.0.self_attn.o_proj.weight": _one_head_per_group(token_map(sigma, seed) - torch.eye(HIDDEN)),
    }
    w.update(_mlp("layers.0.mlp", seed, "eagle"))
    return w


def draft_vocabulary(seed: int = 0) -> list[int]:
    """The ``d2t`` head's draft vocabulary: every token f can produce (the printable cycle), in target-id order."""
    return sorted(zoo_function(seed).cycle)


def d2t_offsets(draft_to_target: Sequence[int]) -> list[int]:
    """A published EAGLE-3 head's ``d2t`` tensor for a draft vocabulary: ``d2t[i] = target id of draft id i - i``
    (vLLM maps draft id i to ``i + d2t[i]``). The ids must rise strictly, as in published heads (built from a sorted
    token set): then ties between draft logits break to the same token in both vocabularies."""
    ids = list(draft_to_target)
    if not ids or ids[0] < 0 or any(b <= a for a, b in zip(ids, ids[1:])):
        raise PortableSpecError("model_zoo: a draft vocabulary is a non-empty, strictly rising list of target ids "
                                "(sort it and drop duplicates)")
    return [t - i for i, t in enumerate(ids)]


def eagle3_weights(seed: int = 0, *, draft_vocab: Sequence[int] | None = None,
                   logit: float = LOGIT) -> dict[str, Any]:
    """EAGLE-3 head (midlayer naming): fc keeps one aux copy; the MLP is an exact e_t -> e_f(t) - e_t lookup.
    ``draft_vocab`` (rising target ids): the head gets its own lm_head over those ids (the target's rows there, at
    winning logit ``logit``) and the ``d2t`` map (int64, as published heads store it)."""
    torch = _torch()
    emb = embeddings(seed)
    f = zoo_function(seed).f
    n_aux = len(EAGLE3_AUX_LAYERS)
    w: dict[str, Any] = {
        "fc.weight": torch.cat([torch.eye(HIDDEN)] + [torch.zeros(HIDDEN, HIDDEN)] * (n_aux - 1), 1),
        "norm.weight": torch.ones(HIDDEN),
        "midlayer.input_layernorm.weight": torch.ones(HIDDEN),
        "midlayer.hidden_norm.weight": torch.ones(HIDDEN),
        "midlayer.post_attention_layernorm.weight": torch.ones(HIDDEN),
    }
    w.update(_attention("midlayer.self_attn", seed, "eagle3", q_in=2 * HIDDEN))
    has_image = torch.tensor([1.0 if j >= 0 else 0.0 for j in f]).unsqueeze(1)
    image = emb[torch.tensor([max(j, 0) for j in f])]
    w["midlayer.mlp.gate_proj.weight"] = emb * has_image * (LOGIT / HIDDEN)  # 16 on the matching row, 0 elsewhere
    w["midlayer.mlp.up_proj.weight"] = emb * has_image / HIDDEN  # 1 on the matching row
    w["midlayer.mlp.down_proj.weight"] = ((image - emb) * has_image).t().contiguous() / LOGIT
    if draft_vocab is not None:
        offsets = d2t_offsets(draft_vocab)
        w["lm_head.weight"] = lm_head(seed, logit)[torch.tensor(list(draft_vocab))].contiguous()
        w["d2t"] = torch.tensor(offsets, dtype=torch.int64)
    return w


def dflash_weights(seed: int = 0) -> dict[str, Any]:
    """DFlash head: zero context, every mask query attends only to the bonus token, V/o_proj identity."""
    torch = _torch()
    emb = embeddings(seed)
    key = emb.sum(0) - 2 * emb[MASK_ID]  # key . e_t = +H for every token but the mask, -H for the mask
    key = key / HIDDEN
    slot = HEAD_DIM // 2 - 1  # neox RoPE pairs (i, i + 64): i = 63 rotates slowest
    q = torch.zeros(NUM_HEADS * HEAD_DIM, HIDDEN)
    k = torch.zeros(NUM_KV_HEADS * HEAD_DIM, HIDDEN)
    for h in range(NUM_HEADS):
        q[h * HEAD_DIM + slot] = -key  # the mask token's query points at +slot
    for h in range(NUM_KV_HEADS):
        k[h * HEAD_DIM + slot] = key  # tokens' keys point at +slot, the mask's at -slot
    p = "layers.0"
    w: dict[str, Any] = {
        "fc.weight": torch.zeros(HIDDEN, HIDDEN * len(DFLASH_TARGET_LAYERS)),
        "hidden_norm.weight": torch.ones(HIDDEN),
        "norm.weight": torch.ones(HIDDEN),
        f"{p}.input_layernorm.weight": torch.ones(HIDDEN),
        f"{p}.post_attention_layernorm.weight": torch.ones(HIDDEN),
        f"{p}.self_attn.q_proj.weight": q,
        f"{p}.self_attn.k_proj.weight": k,
        f"{p}.self_attn.v_proj.weight": torch.eye(HIDDEN),
        f"{p}.self_attn.o_proj.weight": _one_head_per_group(torch.eye(HIDDEN)),
        f"{p}.self_attn.q_norm.weight": torch.full((HEAD_DIM,), DFLASH_QK_NORM),
        f"{p}.self_attn.k_norm.weight": torch.full((HEAD_DIM,), DFLASH_QK_NORM),
    }
    w.update(_mlp(f"{p}.mlp", seed, "dflash"))
    return w


# ------------------------------------------------------------------------------------------------------- configs


def target_config(family: str) -> dict[str, Any]:
    if family in CONTEXT_FAMILIES:
        from portable_spec_harness.context_zoo import build

        return build.target_config(family)
    if family == "llama":
        return {**_base_config("llama", "LlamaForCausalLM", NUM_LAYERS), "mlp_bias": False}
    if family == "mixtral":
        cfg = _base_config("mixtral", "MixtralForCausalLM", NUM_LAYERS, intermediate=MOE_INTERMEDIATE)
        return {**cfg, "num_local_experts": MOE_EXPERTS, "num_experts_per_tok": MOE_TOP_K, "sliding_window": None,
                "output_router_logits": False, "router_aux_loss_coef": 0.0}
    if family == "qwen3":
        cfg = _base_config("qwen3", "Qwen3ForCausalLM", NUM_LAYERS, rope_theta=DFLASH_ROPE_THETA)
        return {**cfg, "use_sliding_window": False, "sliding_window": None, "max_window_layers": NUM_LAYERS}
    raise PortableSpecError(f"model_zoo: unknown target family {family!r}; use one of llama, mixtral, qwen3")


def draft_config(method: str, k: int = DEFAULT_NUM_SPECULATIVE_TOKENS, variant: str = "perfect",
                 family: str | None = None, draft_vocab_size: int = VOCAB) -> dict[str, Any]:
    """The draft head's config.json; ``family`` a context family for its heads (the MTP head is the target's);
    ``draft_vocab_size`` an EAGLE-3 head's draft vocabulary (smaller than the target's with a ``d2t`` map)."""
    if family in CONTEXT_FAMILIES:
        from portable_spec_harness.context_zoo import build, models

        return build.target_config(family) if method == "mtp" else models.draft_config(method, k)
    if method == "eagle":
        # Hub EAGLE-1 heads say LlamaForCausalLM; vLLM's EAGLEConfig renames it to EagleLlamaForCausalLM.
        return {**_base_config("llama", "LlamaForCausalLM", 1), "mlp_bias": False}
    if method == "eagle3":
        cfg = _base_config("llama", "LlamaForCausalLMEagle3", 1, intermediate=VOCAB)
        return {**cfg, "mlp_bias": False, "draft_vocab_size": draft_vocab_size,
                "eagle_aux_hidden_state_layer_ids": EAGLE3_AUX_LAYERS}
    if method == "dflash":
        cfg = _base_config("qwen3", "DFlashDraftModel", 1, rope_theta=DFLASH_ROPE_THETA)
        return {**cfg, "use_sliding_window": False, "sliding_window": None, "layer_types": ["full_attention"],
                "block_size": k + 1, "num_target_layers": NUM_LAYERS,
                "dflash_config": {"mask_token_id": MASK_ID, "target_layer_ids": DFLASH_TARGET_LAYERS}}
    raise PortableSpecError(f"model_zoo: unknown draft method {method!r}; use eagle, eagle3 or dflash")


# ------------------------------------------------------------------------------------------------------ writing


def _save(path: Path, weights: dict[str, Any], config: dict[str, Any], manifest: dict[str, Any],
          *, seed: int, with_tokenizer: bool) -> None:
    """Write into a temporary sibling, then rename: a half-written model directory never exists."""
    torch = _torch()
    from safetensors.torch import save_file

    tmp = path.with_name(path.name + f".tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    # Floating weights in bf16; integer ones (an EAGLE-3 head's d2t map) keep their dtype.
    save_file({k: (v.to(torch.bfloat16) if v.is_floating_point() else v).contiguous() for k, v in weights.items()},
              str(tmp / "model.safetensors"), metadata={"format": "pt"})
    _write_json(tmp / "config.json", config)
    if with_tokenizer:
        _write_tokenizer(tmp, seed)
        _write_json(tmp / "generation_config.json",
                    {"bos_token_id": BOS_ID, "eos_token_id": EOS_ID, "pad_token_id": PAD_ID})
    _write_json(tmp / MANIFEST, manifest)
    shutil.rmtree(path, ignore_errors=True)
    os.replace(tmp, path)


def _fresh(path: Path, manifest: dict[str, Any]) -> bool:
    try:
        return json.loads((path / MANIFEST).read_text()) == manifest and (path / "model.safetensors").is_file()
    except (OSError, ValueError):
        return False


def _logit_suffix(logit: float) -> str:
    """Directory suffix of a target with a non-default winning logit (its drafts get it too: they share its lm_head)."""
    return "" if logit == LOGIT else f"_logit{logit:g}"


def build_target(family: str, outdir: str | os.PathLike, *, seed: int = 0, logit: float = LOGIT) -> Path:
    """``OUTDIR/<family>_target[_logit<L>]`` (reused when already generated with the same seed and zoo version)."""
    path = Path(outdir) / f"{family}_target{_logit_suffix(logit)}"
    if family in CONTEXT_FAMILIES:
        from portable_spec_harness.context_zoo import build

        manifest = build.target_manifest(family, seed, logit, ZOO_VERSION)
        if not _fresh(path, manifest):
            _save(path, build.target_weights(family, seed, logit), target_config(family), manifest, seed=seed,
                  with_tokenizer=True)
        return path
    fn = zoo_function(seed)
    manifest = {"zoo_version": ZOO_VERSION, "role": "target", "family": family, "seed": seed, "f": list(fn.f),
                "cycle": list(fn.cycle), "mask_token_id": MASK_ID, "logit": logit}
    if not _fresh(path, manifest):
        _save(path, target_weights(family, seed, logit), target_config(family), manifest, seed=seed,
              with_tokenizer=True)
    return path


def pair_problem(name: str, variant: str) -> str | None:
    """Why ``name`` / ``variant`` is not a pair this zoo builds (naming the valid choices), or None. Cheap: the
    bench CLI asks before any model is generated or device touched."""
    if name not in PAIRS:
        return f"unknown pair {name!r}; use one of {', '.join(PAIRS)}"
    if variant not in PAIRS[name][2]:
        return f"pair {name} has no {variant!r} variant; use one of {', '.join(PAIRS[name][2])}"
    return None


def build_pair(name: str, outdir: str | os.PathLike, *, variant: str = "perfect", seed: int = 0,
               num_speculative_tokens: int = DEFAULT_NUM_SPECULATIVE_TOKENS,
               target_logit: float = LOGIT) -> dict[str, Any]:
    """Generate (or reuse) a target and its draft; return paths, the speculative_config and what to expect.

    ``expected`` holds ``f`` (the target's greedy successor table), ``g`` (the draft's first-step prediction for
    each bonus token), the agreement fraction of g with f over the printable cycle, the target's winning logit and,
    for perfect heads, the exact per-position acceptance: under greedy decoding, and for the EAGLE heads also under
    sampling with probabilistic draft sampling (draft distribution == target distribution). ``target_logit=
    SOFT_LOGIT`` builds the soft target whose sampled output really departs from greedy.
    """
    problem = pair_problem(name, variant)
    if problem:
        raise PortableSpecError(f"model_zoo: {problem}")
    family, method, _ = PAIRS[name]
    if num_speculative_tokens < 1:
        raise PortableSpecError("model_zoo: num_speculative_tokens must be >= 1")
    target = build_target(family, outdir, seed=seed, logit=target_logit)
    if family in CONTEXT_FAMILIES:
        return _build_context_draft(name, target, outdir, seed, num_speculative_tokens, target_logit)
    fn = zoo_function(seed)
    draft_vocab = draft_vocabulary(seed) if variant == "d2t" else None
    if method == "eagle":
        weights, g = eagle_weights(variant, seed), (partial_draft_function(seed) if variant == "partial" else fn.f)
    elif method == "eagle3":
        weights, g = eagle3_weights(seed, draft_vocab=draft_vocab, logit=target_logit), fn.f
    else:
        weights, g = dflash_weights(seed), fn.f
    on_cycle = fn.cycle
    agreement = sum(g[t] == fn.f[t] for t in on_cycle) / len(on_cycle)
    expected = {
        "f": list(fn.f),
        "g": list(g),
        "cycle": list(on_cycle),
        "agreement_on_cycle": agreement,
        "acceptance_per_position": expected_acceptance_per_position(method, variant, num_speculative_tokens),
        "target_logit": target_logit,
        "target_top_probability_t1": top_probability(target_logit),
        "mask_token_id": MASK_ID,
        "eos_token_id": EOS_ID,
        "draft_vocab_size": VOCAB if draft_vocab is None else len(draft_vocab),
    }
    draft = Path(outdir) / f"{family}_{method}_head_{variant}{_logit_suffix(target_logit)}"
    manifest = {"zoo_version": ZOO_VERSION, "role": "draft", "pair": name, "family": family, "method": method,
                "variant": variant, "seed": seed, "num_speculative_tokens": num_speculative_tokens,
                "target": target.name, "expected": expected}
    if not _fresh(draft, manifest):
        _save(draft, weights, draft_config(method, num_speculative_tokens, variant,
                                           draft_vocab_size=expected["draft_vocab_size"]),
              manifest, seed=seed, with_tokenizer=False)
    return {
        "pair": name,
        "variant": variant,
        "seed": seed,
        "method": method,
        "target": str(target),
        "draft": str(draft),
        "speculative_config": {"method": method, "model": str(draft),
                               "num_speculative_tokens": num_speculative_tokens},
        "expected": expected,
    }


def _build_context_draft(name: str, target: Path, outdir: str | os.PathLike, seed: int, k: int,
                         logit: float) -> dict[str, Any]:
    """A context pair's head (see ``context_zoo.build``); the MTP head is a link to the target's MTP layer."""
    from portable_spec_harness.context_zoo import build

    family, method, _ = PAIRS[name]
    expected = build.expected_block(method, seed, k, logit)
    draft = Path(outdir) / f"{family}_{method}_head_perfect{_logit_suffix(logit)}"
    manifest = {"zoo_version": ZOO_VERSION, "role": "draft", "pair": name, "family": family, "method": method,
                "variant": "perfect", "seed": seed, "num_speculative_tokens": k, "target": target.name,
                "expected": expected}
    if method == "mtp":
        if not build.fresh_link(draft, manifest):
            build.link_mtp_draft(target, draft, manifest)
    elif not _fresh(draft, manifest):
        _save(draft, build.draft_weights(method, seed, logit), draft_config(method, k, family=family), manifest,
              seed=seed, with_tokenizer=method == "draft_model")  # a separate draft model is a whole LLM
    return {"pair": name, "variant": "perfect", "seed": seed, "method": method, "target": str(target),
            "draft": str(draft),
            "speculative_config": {"method": method, "model": str(draft), "num_speculative_tokens": k},
            "expected": expected}


def expected_output(expected: dict[str, Any], prompt_ids: Sequence[int], max_tokens: int) -> list[int]:
    """The target's greedy output for any pair's ``expected`` block (f-chain or context) and any prompt."""
    if expected.get("kind") == "context":
        from portable_spec_harness.context_zoo.function import ContextFunction

        return ContextFunction.from_json(expected).continuation(prompt_ids, max_tokens)
    return expected_continuation(expected["f"], prompt_ids, max_tokens)


def context_prompts(seed: int = 0, *, max_model_len: int = 1024, max_tokens: int = 48) -> list[dict[str, Any]]:
    """Prompts for the context pairs with their greedy outputs (see ``context_zoo.function.context_prompts``)."""
    from portable_spec_harness.context_zoo.function import context_prompts as prompts

    return prompts(seed, max_model_len=max_model_len, max_tokens=max_tokens)


def load_expected(draft_dir: str | os.PathLike) -> dict[str, Any]:
    """The ``expected`` block written next to a generated draft."""
    path = Path(draft_dir) / MANIFEST
    try:
        return json.loads(path.read_text())["expected"]
    except (OSError, ValueError, KeyError):
        raise PortableSpecError(f"model_zoo: {path} is missing or not a zoo draft manifest; "
                                "regenerate with python -m portable_spec_harness.model_zoo OUTDIR") from None


# ------------------------------------------------------------------------------------------------------------ CLI


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m portable_spec_harness.model_zoo",
                                     description="Generate the tiny target/draft zoo (no downloads).")
    parser.add_argument("outdir")
    parser.add_argument("--which", nargs="+", default=list(PAIRS), metavar="PAIR",
                        help=f"pairs to build (default: all of {', '.join(PAIRS)})")
    parser.add_argument("--variant", nargs="+", default=None, choices=VARIANTS,
                        help="variants to build (default: every variant the pair has)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--num-speculative-tokens", type=int, default=DEFAULT_NUM_SPECULATIVE_TOKENS)
    parser.add_argument("--target-logit", type=float, default=LOGIT,
                        help=f"the target's winning logit ({LOGIT:g}: sampling == greedy; {SOFT_LOGIT:g}: soft target)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    try:
        built = []
        for name in args.which:
            if name not in PAIRS:
                raise PortableSpecError(f"model_zoo: unknown pair {name!r}; use one of {', '.join(PAIRS)}")
            for variant in args.variant or PAIRS[name][2]:
                if variant in PAIRS[name][2]:
                    built.append(build_pair(name, args.outdir, variant=variant, seed=args.seed,
                                            num_speculative_tokens=args.num_speculative_tokens,
                                            target_logit=args.target_logit))
    except PortableSpecError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    if args.json:
        print(json.dumps({"outdir": str(args.outdir), "pairs": [
            {k: v for k, v in b.items() if k != "expected"} for b in built]}))
    else:
        for b in built:
            print(f"{b['pair']:<18} {b['variant']:<8} target={b['target']} draft={b['draft']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
