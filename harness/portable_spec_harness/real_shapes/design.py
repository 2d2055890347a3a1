"""Designed weights at real shapes: the target's greedy next token and each head's drafts are known, so acceptance is
too (a perfect head and a ~60% head), and every weight is written on the device at load time (no checkpoint).

The zoo's construction (``portable_spec_harness.model_zoo``) at sizes where embeddings cannot be exactly orthogonal:

* **Tokens.** A seeded set ``C`` of ``active`` ordinary words (32000: the EAGLE-3 draft vocabulary) and ``f``: one
  seeded cycle through ``C``; every other token (other words, special tokens) maps to a seeded member of ``C``, each
  member getting the same number of them (preimages of 4 or 5 at 128256 / 151936). The target's greedy next token is
  ``f(current)``, so from the first generated token on the output walks the cycle (no EOS, no repeat for 32000
  tokens). The partial head disagrees on a seeded 40% ``D`` of ``C``: there it drafts ``f(f(t))``.
* **Embeddings.** Seeded +-1 rows (RMS exactly 1, every RMSNorm a no-op), column 0 is +1 for every token (the
  constant a position-only query reads). Random +-1 rows are only near-orthogonal: ``e_t . e_u / H`` has spread
  ``1 / sqrt(H)`` (1/64 at 4096). **Margin**: the lm_head row of ``j`` is ``L / H`` times the sum of the
  embeddings of ``f``'s preimage of ``j``, so the winning logit is ``L = 16`` plus the preimage's cross terms and
  every other logit is such cross terms: a margin of ~0.6-0.7 L at the real vocabularies (0 is every row outside
  ``C``). All of it is integers times a power of two: exact in bf16, exact fp32 sums. The loader measures the margin
  of every token on the device (:func:`target_readout`) and refuses a construction under ``MIN_MARGIN``.
* **Target** (Llama-3.1-8B / Qwen3-30B-A3B layout): every ``o_proj`` and ``down_proj`` (every expert's) is zero, the
  rest of each layer is seeded filler (std 0.02; router weights too, so routing spreads as with real weights): every
  matmul of the real model runs at its real size, and the residual stream stays ``e_t``.
* **EAGLE-1 head** (``EagleLlamaForCausalLM``): ``fc = [I | 0]`` keeps the input token's embedding, its layer adds
  nothing, and it shares the target's lm_head: it drafts ``f(input token)``. The partial head ships its own
  ``embed_tokens``: row ``t`` in ``D`` is ``e_f(t)``.
* **EAGLE-3 head** (``Eagle3LlamaForCausalLM``, 32000-token draft vocabulary, ``d2t`` maps draft id ``d`` to the
  ``d``-th smallest member of ``C``): ``fc == 0``. One query head per KV head is *position-only* (it reads column 0
  through the RoPE profile of ``context_zoo.rope_profile``: score peak at the query's own position, a gap >= 40 in
  softmax units to every other position up to 131072), so attention returns the row's own V. V carries the input
  token's code ``c_t`` (embedding columns ``1 .. kv_heads * head_dim``) minus the code already in the hidden state,
  and ``o_proj`` writes it into residual columns ``0 .. kv_heads * head_dim``: the residual becomes ``R(c_t)`` at the
  first pass (hidden 0) and at every chained step (hidden = the previous step's prenorm output ``R(c_prev)``, which
  V subtracts). The draft lm_head row of ``f(t)`` (partial: ``g(t)``) reads ``c_t``: it drafts ``f(input token)`` for
  every input token in ``C``, i.e. every token after the first generated one. Right only when the drafter's
  positions and KV slots are (the zoo's attention-variant property).
* **Draft model** (vLLM ``draft_model``, e.g. Llama-3.2-1B's shape; role ``draft_model``): the target's construction
  at the draft's own hidden size (its ``Design`` is the target's with ``hidden_size`` replaced: the token tables
  never read it, so ``f`` and ``D`` are the target's), with its own embeddings and an lm_head whose row ``j`` sums
  the embeddings of ``g``'s preimage of ``j`` (``g`` = :func:`draft_successor`): fed any token ``t`` it drafts
  ``g(t)``, the chain the EAGLE heads draft, so :func:`simulate` and :func:`expected_acceptance` hold for it too.
  Its lm_head cannot be its embeddings' transpose (that would read back ``t``, not ``g(t)``): a designed draft
  model is served with ``tie_word_embeddings`` false (the lm_head matmul runs either way; +vocab * hidden weights).

What a head drafts is exact on the tokens it can see; :func:`simulate` gives the exact acceptance of a prompt.
"""

from __future__ import annotations

import functools
import json
import math
import zlib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

from portable_spec.errors import PortableSpecError

FORMAT = "portable_spec_designed"
VERSION = 1
MARKER = "portable_spec_designed.json"
LOGIT = 16.0
PARTIAL_AGREEMENT = 0.6
FILLER_STD = 0.02
MIN_MARGIN = LOGIT / 4
MIN_ROPE_GAP = 20.0
ROLES = ("target", "eagle", "eagle3", "draft_model")
VARIANTS = ("perfect", "partial")
CHUNK = 4096


def _torch():
    import torch

    return torch


@dataclass(frozen=True)
class Design:
    """Everything the construction depends on besides the configs (stored in each model folder's marker)."""

    vocab_size: int
    hidden_size: int  # the target's (embedding width)
    words: int  # ids below are ordinary words (C is drawn from them)
    active: int  # |C|
    seed: int = 0
    logit: float = LOGIT
    agreement: float = PARTIAL_AGREEMENT

    def problem(self) -> str | None:
        if not 0 < self.active <= self.words <= self.vocab_size:
            return f"need 0 < active ({self.active}) <= words ({self.words}) <= vocab_size ({self.vocab_size})"
        scale = self.logit / self.hidden_size
        if self.logit <= 0 or scale != 2.0 ** round(math.log2(scale)):
            return f"logit / hidden_size ({self.logit:g} / {self.hidden_size}) must be a power of two (exact in bf16)"
        if not 0 < self.agreement < 1:
            return f"agreement {self.agreement} must lie in (0, 1)"
        return None


def _generator(seed: int, tag: str, device: Any = "cpu"):
    torch = _torch()
    g = torch.Generator(device=device)
    g.manual_seed(zlib.crc32(f"real-shapes/{tag}/{seed}".encode()) | (seed << 32))
    return g


# ------------------------------------------------------------------------------------------------ the token maps


@dataclass(frozen=True)
class Tables:
    active: Any  # LongTensor [A], sorted: draft id d <-> active[d]
    cycle: Any  # LongTensor [A], f(cycle[i]) == cycle[i + 1]
    f: Any  # LongTensor [V]
    disagree: Any  # BoolTensor [V]: D (the partial head's misses), a subset of C


@functools.lru_cache(maxsize=8)
def tables(design: Design) -> Tables:
    torch = _torch()
    g = _generator(design.seed, "tokens")
    cycle = torch.randperm(design.words, generator=g)[:design.active]
    f = torch.empty(design.vocab_size, dtype=torch.long)
    f[cycle] = torch.roll(cycle, -1)
    is_active = torch.zeros(design.vocab_size, dtype=torch.bool)
    is_active[cycle] = True
    rest = torch.nonzero(~is_active).flatten()
    rest = rest[torch.randperm(len(rest), generator=g)]
    f[rest] = cycle[torch.arange(len(rest)) % design.active]  # each member of C gets the same share
    misses = round((1 - design.agreement) * design.active)
    disagree = torch.zeros(design.vocab_size, dtype=torch.bool)
    disagree[cycle[torch.randperm(design.active, generator=g)[:misses]]] = True
    return Tables(torch.sort(cycle).values, cycle, f, disagree)


def draft_successor(design: Design, variant: str):
    """``g``: what a head drafts after each input token (``f``, or ``f(f(t))`` on ``D`` for the partial head)."""
    if variant not in VARIANTS:
        raise PortableSpecError(f"real_shapes: unknown variant {variant!r}; use one of {', '.join(VARIANTS)}")
    t = tables(design)
    g = t.f.clone()
    if variant == "partial":
        g[t.disagree] = t.f[t.f[t.disagree]]
    return g


def continuation(design: Design, prompt_ids: Sequence[int], max_tokens: int) -> list[int]:
    """The target's greedy output for any prompt (at least one token)."""
    if not prompt_ids:
        raise PortableSpecError("real_shapes: a continuation needs at least one prompt token")
    f, out, x = tables(design).f.tolist(), [], int(prompt_ids[-1])
    for _ in range(max_tokens):
        x = f[x]
        out.append(x)
    return out


def simulate(design: Design, variant: str, prompt_ids: Sequence[int], max_tokens: int, k: int) -> dict[str, Any]:
    """Ideal greedy speculative decoding with ``k`` drafts per step: the output, drafts and accepted tokens per
    position (vLLM trims a request's last drafts near ``max_tokens``: compare rates, not counts, there)."""
    from portable_spec_harness.model_zoo import simulate_greedy_spec_decode

    g = draft_successor(design, variant).tolist()

    def chain(bonus: int, k: int) -> list[int]:
        out = [g[bonus]]
        while len(out) < k:
            out.append(g[out[-1]])
        return out

    sim = simulate_greedy_spec_decode(tables(design).f.tolist(), chain, prompt_ids, max_tokens, k)
    steps = sim["num_drafts"]
    return {**sim, "acceptance_per_position": [n / steps for n in sim["accepted_per_position"]] if steps else [],
            "mean_acceptance_length": 1 + sim["num_accepted_tokens"] / steps if steps else None}


def expected_acceptance(variant: str, k: int, agreement: float = PARTIAL_AGREEMENT) -> list[float]:
    """Per-position acceptance over long outputs: 1 for the perfect head; ``agreement ** (i + 1)`` for the partial
    head (the cycle visits D in seeded order, so this is its rate, not an exact count; :func:`simulate` is exact)."""
    return [1.0] * k if variant == "perfect" else [agreement ** (i + 1) for i in range(k)]


# ---------------------------------------------------------------------------------------------------- weights


class Maker:
    """Makes the weights of one model on ``device`` in ``dtype``; the embeddings once (they are needed twice)."""

    def __init__(self, design: Design, device: Any, dtype: Any):
        self.design, self.device, self.dtype = design, device, dtype
        self._embeddings = None

    def zeros(self, *shape: int):
        return _torch().zeros(shape, device=self.device, dtype=self.dtype)

    def ones(self, *shape: int):
        return _torch().ones(shape, device=self.device, dtype=self.dtype)

    def filler(self, name: str, *shape: int):
        torch = _torch()
        g = _generator(self.design.seed, name, self.device)
        return (torch.randn(shape, generator=g, device=self.device) * FILLER_STD).to(self.dtype)

    def embeddings(self):
        """[V, H] +-1, column 0 == +1 (seeded on the device's own generator: the same on every load)."""
        if self._embeddings is None:
            torch = _torch()
            d = self.design
            g = _generator(d.seed, "embeddings", self.device)
            out = torch.empty(d.vocab_size, d.hidden_size, device=self.device, dtype=self.dtype)
            for start in range(0, d.vocab_size, CHUNK):
                rows = min(CHUNK, d.vocab_size - start)
                bits = torch.randint(0, 2, (rows, d.hidden_size), generator=g, device=self.device,
                                     dtype=torch.int8)
                out[start:start + rows] = (bits * 2 - 1).to(self.dtype)
            out[:, 0] = 1
            self._embeddings = out
        return self._embeddings

    def index(self, tensor):
        return tensor.to(self.device)


def target_lm_head(make: Maker, successor=None):
    """Row ``j`` = ``L / H`` * the sum of the embeddings of the preimage of ``j`` under ``successor`` (default f; a
    draft model's: ``g``), whose image lies in C: rows outside C are zero."""
    d = make.design
    w = make.zeros(d.vocab_size, d.hidden_size)
    w.index_add_(0, make.index(tables(d).f if successor is None else successor), make.embeddings())
    return w.mul_(d.logit / d.hidden_size)


def _attention(make: Maker, p: str, cfg: dict[str, Any], q_in: int, *, qk_norm: bool = False):
    heads, kv, hd, h = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"], cfg["hidden_size"]
    yield f"{p}.q_proj.weight", make.filler(f"{p}.q_proj", heads * hd, q_in)
    yield f"{p}.k_proj.weight", make.filler(f"{p}.k_proj", kv * hd, q_in)
    yield f"{p}.v_proj.weight", make.filler(f"{p}.v_proj", kv * hd, q_in)
    yield f"{p}.o_proj.weight", make.zeros(h, heads * hd)  # the layer adds nothing
    if qk_norm:
        yield f"{p}.q_norm.weight", make.ones(hd)
        yield f"{p}.k_norm.weight", make.ones(hd)


def _mlp(make: Maker, p: str, hidden: int, intermediate: int):
    yield f"{p}.gate_proj.weight", make.filler(f"{p}.gate_proj", intermediate, hidden)
    yield f"{p}.up_proj.weight", make.filler(f"{p}.up_proj", intermediate, hidden)
    yield f"{p}.down_proj.weight", make.zeros(hidden, intermediate)  # the layer adds nothing


def target_weights(make: Maker, cfg: dict[str, Any], family: str, successor=None) -> Iterator[tuple[str, Any]]:
    """HF checkpoint names of a Llama or Qwen3-MoE target (vLLM's own ``load_weights`` maps and shards them); its
    lm_head reads out ``successor`` (default f)."""
    h = cfg["hidden_size"]
    yield "model.embed_tokens.weight", make.embeddings()
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}"
        yield f"{p}.input_layernorm.weight", make.ones(h)
        yield f"{p}.post_attention_layernorm.weight", make.ones(h)
        yield from _attention(make, f"{p}.self_attn", cfg, h, qk_norm=family == "qwen3_moe")
        if family == "qwen3_moe":
            yield f"{p}.mlp.gate.weight", make.filler(f"{p}.mlp.gate", cfg["num_experts"], h)
            for e in range(cfg["num_experts"]):
                yield from _mlp(make, f"{p}.mlp.experts.{e}", h, cfg["moe_intermediate_size"])
        else:
            yield from _mlp(make, f"{p}.mlp", h, cfg["intermediate_size"])
    yield "model.norm.weight", make.ones(h)
    yield "lm_head.weight", target_lm_head(make, successor)


def draft_model_weights(make: Maker, cfg: dict[str, Any], variant: str) -> Iterator[tuple[str, Any]]:
    """A Llama draft model: the target's construction at its own size, its lm_head reading out ``g``."""
    if cfg.get("tie_word_embeddings"):
        raise PortableSpecError("real_shapes: a designed draft model needs its own lm_head; set tie_word_embeddings "
                                "false in its config.json (build_pair --mode designed does)")
    return target_weights(make, cfg, "llama", draft_successor(make.design, variant))


def eagle_weights(make: Maker, cfg: dict[str, Any], variant: str) -> Iterator[tuple[str, Any]]:
    """EAGLE-1 head in vLLM's EagleLlamaForCausalLM naming (no input norm, final norm or lm_head of its own)."""
    torch = _torch()
    h = cfg["hidden_size"]
    fc = make.zeros(h, 2 * h)
    fc[:, :h] = torch.eye(h, device=make.device, dtype=make.dtype)
    yield "fc.weight", fc
    yield "layers.0.post_attention_layernorm.weight", make.ones(h)
    yield from _attention(make, "layers.0.self_attn", cfg, h)
    yield from _mlp(make, "layers.0.mlp", h, cfg["intermediate_size"])
    if variant == "partial":
        t = tables(make.design)
        own = make.embeddings().clone()
        miss = make.index(torch.nonzero(t.disagree).flatten())
        own[miss] = make.embeddings()[make.index(t.f)[miss]]  # the head sees f(t) where the target sees t
        yield "embed_tokens.weight", own


@dataclass(frozen=True)
class Eagle3Geometry:
    """Where the EAGLE-3 head keeps a token's code: V rows / residual columns ``0 .. code``, embedding columns
    ``1 .. code + 1``; ``rms`` is the RMS of a residual holding one code (a power of two: exact in bf16)."""

    heads: int
    kv_heads: int
    head_dim: int
    hidden: int

    @property
    def code(self) -> int:
        return self.kv_heads * self.head_dim

    @property
    def rms(self) -> float:
        return math.sqrt(self.code / self.hidden)

    @classmethod
    def of(cls, cfg: dict[str, Any]) -> "Eagle3Geometry":
        return cls(cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"], cfg["hidden_size"])

    def problem(self) -> str | None:
        if self.code + 1 > self.hidden or self.rms != 2.0 ** round(math.log2(self.rms)):
            return (f"kv_heads * head_dim ({self.code}) must be below hidden ({self.hidden}) with a power-of-two "
                    "ratio (the head's code RMS must be exact in bf16)")
        return None


def self_profile(cfg: dict[str, Any]):
    """The position-only profile that peaks at the query's own position (``rope_profile``'s kappas, phase 0)."""
    from portable_spec_harness.context_zoo.rope_profile import Profile

    return Profile(pairs=cfg["head_dim"] // 2, interleaved=False, theta=float(cfg["rope_theta"]), kappa_first=30.0,
                   kappa_rest=8.0, rest=24, scale=cfg["head_dim"] ** -0.5, phase=0.0)


def eagle3_attention(make: Maker, cfg: dict[str, Any]) -> dict[str, Any]:
    """q / k / v / o of the head's layer (inputs: ``[input_layernorm(embedding), hidden_norm(hidden)]``): one
    position-only query head per KV head, V = the input token's code minus the hidden state's, o_proj writes it into
    residual columns ``0 .. code``."""
    torch = _torch()
    geo = Eagle3Geometry.of(cfg)
    h, hd, code, group = geo.hidden, geo.head_dim, geo.code, geo.heads // geo.kv_heads
    q, k = make.zeros(geo.heads * hd, 2 * h), make.zeros(code, 2 * h)
    v, o = make.zeros(code, 2 * h), make.zeros(h, geo.heads * hd)
    kappas = self_profile(cfg).kappas()
    for kv in range(geo.kv_heads):
        first = kv * group  # the group's first query head; the others stay zero and o_proj ignores them
        for i, kappa in enumerate(kappas):
            if kappa:
                q[first * hd + i, 0] = kappa
                k[kv * hd + i, 0] = kappa
        o[kv * hd:(kv + 1) * hd, first * hd:(first + 1) * hd] = torch.eye(hd, device=make.device, dtype=make.dtype)
    rows = torch.arange(code, device=make.device)
    v[rows, 1 + rows] = 1  # the input token's code
    v[rows, h + rows] = -geo.rms  # minus the code the hidden state carries (hidden_norm scaled it by 1 / rms)
    return {"q_proj": q, "k_proj": k, "v_proj": v, "o_proj": o}


def eagle3_weights(make: Maker, cfg: dict[str, Any], variant: str) -> Iterator[tuple[str, Any]]:
    """EAGLE-3 head in the public checkpoints' naming (``midlayer.``, ``d2t``, ``t2d``)."""
    torch = _torch()
    d, h, t = make.design, cfg["hidden_size"], tables(make.design)
    aux = len(cfg.get("eagle_aux_hidden_state_layer_ids") or (0, 0, 0))
    yield "fc.weight", make.zeros(h, aux * h)  # the target's states are read, and ignored
    for name in ("input_layernorm", "hidden_norm", "post_attention_layernorm"):
        yield f"midlayer.{name}.weight", make.ones(h)
    yield "norm.weight", make.ones(h)
    for name, tensor in eagle3_attention(make, cfg).items():
        yield f"midlayer.self_attn.{name}.weight", tensor
    yield from _mlp(make, "midlayer.mlp", h, cfg["intermediate_size"])
    yield "lm_head.weight", eagle3_lm_head(make, cfg, variant)
    active = make.index(t.active)
    yield "d2t", active - torch.arange(d.active, device=make.device)
    t2d = torch.zeros(d.vocab_size, dtype=torch.bool, device=make.device)
    t2d[active] = True
    yield "t2d", t2d


def eagle3_lm_head(make: Maker, cfg: dict[str, Any], variant: str):
    """Draft row ``d`` (token ``active[d]``) = ``L * rms / code`` times the codes of the members of C it follows."""
    torch = _torch()
    d, geo, t = make.design, Eagle3Geometry.of(cfg), tables(make.design)
    g = draft_successor(d, variant)
    rows = make.index(torch.searchsorted(t.active, g[t.active]))
    codes = make.embeddings()[make.index(t.active), 1:1 + geo.code]
    w = make.zeros(d.active, geo.hidden)
    w[:, :geo.code].index_add_(0, rows, codes)
    return w.mul_(d.logit * geo.rms / geo.code)


def weights(role: str, cfg: dict[str, Any], design: Design, family: str, variant: str | None, device: Any,
            dtype: Any) -> Iterator[tuple[str, Any]]:
    """The named tensors of one model folder, made on ``device``."""
    make = Maker(design, device, dtype)
    if role == "target":
        return target_weights(make, cfg, family)
    if role == "eagle":
        return eagle_weights(make, cfg, variant or "perfect")
    if role == "draft_model":
        return draft_model_weights(make, cfg, variant or "perfect")
    return eagle3_weights(make, cfg, variant or "perfect")


# ----------------------------------------------------------------------------------------------------- checks


def target_readout(make: Maker, lm_head=None, successor=None) -> dict[str, Any]:
    """Every token's logits ``e_t @ lm_head.T`` (in float32): how many argmaxes are not ``successor(t)`` (default
    f: the target; a draft model's ``g``), and the smallest winning margin (the zero rows outside C count as
    competitors at logit 0)."""
    torch = _torch()
    d, t = make.design, tables(make.design)
    lm = (target_lm_head(make, successor) if lm_head is None else lm_head)[make.index(t.active)].float()
    f, active = make.index(t.f if successor is None else successor), make.index(t.active)
    wrong, margin = 0, math.inf
    for start in range(0, d.vocab_size, CHUNK):
        logits = make.embeddings()[start:start + CHUNK].float() @ lm.t()
        top = logits.topk(2, -1)
        second = top.values[:, 1].clamp(min=0.0) if d.vocab_size > d.active else top.values[:, 1]
        wrong += int((active[top.indices[:, 0]] != f[start:start + CHUNK]).sum())
        margin = min(margin, float((top.values[:, 0] - second).min()))
    return {"tokens": d.vocab_size, "wrong": wrong, "min_margin": margin}


def eagle3_readout(make: Maker, cfg: dict[str, Any], variant: str, lm_head=None) -> dict[str, Any]:
    """For every input token in C: the draft logits of the state the head reaches (``R(c_t) / rms`` after the final
    norm) through its lm_head; how many argmaxes are not ``g(t)``, and the smallest margin."""
    d, geo, t = make.design, Eagle3Geometry.of(cfg), tables(make.design)
    lm = (eagle3_lm_head(make, cfg, variant) if lm_head is None else lm_head)[:, :geo.code].float()
    active = make.index(t.active)
    want = make.index(draft_successor(d, variant))[active]
    wrong, margin = 0, math.inf
    for start in range(0, d.active, CHUNK):
        states = make.embeddings()[active[start:start + CHUNK], 1:1 + geo.code].float() / geo.rms
        top = (states @ lm.t()).topk(2, -1)
        wrong += int((active[top.indices[:, 0]] != want[start:start + CHUNK]).sum())
        margin = min(margin, float((top.values[:, 0] - top.values[:, 1]).min()))
    return {"tokens": d.active, "wrong": wrong, "min_margin": margin}


def unscaled_pairs(cfg: dict[str, Any]) -> int:
    """How many of the fastest RoPE pairs keep theta's frequency under the config's scaling (llama3 leaves every pair
    whose wavelength is below original_max / high_freq_factor alone)."""
    pairs = cfg["head_dim"] // 2
    scaling = cfg.get("rope_scaling") or {}
    kind = scaling.get("rope_type", scaling.get("type"))
    if not kind or kind == "default":
        return pairs
    if kind != "llama3":
        return 0
    limit = scaling["original_max_position_embeddings"] / scaling["high_freq_factor"]
    return sum(2 * math.pi * float(cfg["rope_theta"]) ** (i / pairs) < limit for i in range(pairs))


def rope_gap(cfg: dict[str, Any], max_len: int) -> dict[str, Any]:
    """The EAGLE-3 head's position-only profile: peak, and its smallest gap (softmax units) to keys 1 .. max_len - 1
    positions back; which pairs it uses and whether the config's RoPE scaling leaves them alone."""
    from portable_spec_harness.context_zoo.rope_profile import gap

    profile = self_profile(cfg)
    return {"peak": profile.peak(), "gap": gap(profile, 1, max(max_len, 2)), "pairs_used": profile.rest + 1,
            "pairs_unscaled": unscaled_pairs(cfg), "max_len": max_len}


def self_check(role: str, cfg: dict[str, Any], design: Design, variant: str | None, device: Any, dtype: Any,
               max_len: int, loaded: dict[str, Any] | None = None) -> dict[str, Any]:
    """What the loader asserts before serving: the target's readout (every token), a draft model's (every token,
    against ``g``), the EAGLE-3 head's readout (every token of C), RoPE profile and geometry; on the tensors vLLM holds where ``loaded`` has them (``embed_tokens``,
    ``lm_head``), else on freshly made ones. Raises a one-line error when the construction does not hold."""
    make, loaded = Maker(design, device, dtype), loaded or {}
    if "embed_tokens" in loaded:
        make._embeddings = loaded["embed_tokens"]
    if role == "target":
        report = target_readout(make, loaded.get("lm_head"))
    elif role == "draft_model":
        report = target_readout(make, loaded.get("lm_head"), draft_successor(design, variant or "perfect"))
    elif role == "eagle3":
        problem = Eagle3Geometry.of(cfg).problem()
        if problem:
            raise PortableSpecError(f"real_shapes: the EAGLE-3 head's shape cannot carry the design: {problem}")
        report = {**eagle3_readout(make, cfg, variant or "perfect", loaded.get("lm_head")),
                  "rope": rope_gap(cfg, max_len)}
        rope = report["rope"]
        if rope["pairs_unscaled"] < rope["pairs_used"] or rope["gap"] < MIN_ROPE_GAP:
            raise PortableSpecError(f"real_shapes: the EAGLE-3 head's position-only attention does not hold at "
                                    f"max_model_len {max_len} ({rope}); serve a shorter --max-model-len")
    else:
        report = {"tokens": 0, "wrong": 0, "min_margin": None}  # the target's readout covers what it drafts
    if report["wrong"] or (report["min_margin"] is not None and report["min_margin"] < MIN_MARGIN):
        raise PortableSpecError(f"real_shapes: designed {role} weights miss their tokens ({report}); "
                                f"pick another --seed")
    return report


# ----------------------------------------------------------------------------------------------------- markers


def marker(role: str, family: str, design: Design, variant: str | None) -> dict[str, Any]:
    return {"format": FORMAT, "version": VERSION, "role": role, "family": family, "variant": variant,
            "design": asdict(design)}


def read_marker(model_dir: str | Path) -> tuple[dict[str, Any], Design]:
    """A model folder's marker and design (one-line error naming the fix when it is missing or not ours)."""
    path = Path(model_dir) / MARKER
    try:
        data = json.loads(path.read_text())
        design = Design(**data["design"])
    except (OSError, ValueError, KeyError, TypeError):
        raise PortableSpecError(f"real_shapes: {path} is missing or unreadable; build the folder with "
                                "python -m portable_spec_harness.real_shapes build --mode designed") from None
    if data.get("format") != FORMAT or data.get("version") != VERSION or data.get("role") not in ROLES:
        raise PortableSpecError(f"real_shapes: {path} is not a version-{VERSION} designed-weights marker; rebuild it")
    problem = design.problem()
    if problem:
        raise PortableSpecError(f"real_shapes: {path}: {problem}")
    return data, design
