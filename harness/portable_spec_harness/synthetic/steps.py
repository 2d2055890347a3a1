"""Synthetic draft steps with real shapes and random weights, for tests and benchmarks (no checkpoint, no vLLM): test
doubles of the ``DraftStepSource`` protocol that vLLM's drafters implement for the one runner (``step_call``).

- ``EagleDraft``: EAGLE-style. First step: ``fc([embedding, target hidden])``, L decoder layers (RMSNorm, QKV, RoPE,
  causal paged attention over the request's KV, SwiGLU MLP), final RMSNorm, lm_head on the sampled token, greedy or
  Gumbel sampling. Chain steps: the same at one token per request, fed in-graph by the previous step (token, hidden
  state, position, slot), like Model Runner V2's ``_update_draft_inputs_kernel``.
- ``DFlashDraft``: DFlash-style. One step over a non-causal block of 1+K tokens per request (bonus token + K mask
  tokens); context K/V is projected from target hidden states and written OUTSIDE the graph (``write_context_kv``);
  the K mask positions are sampled in one go (columns ``current_draft_step + j``).

KV caches are ``[num_slots, kv_heads, head_dim]`` per layer addressed through a block table: ``paged`` shuffles the
blocks across requests, ``contiguous`` gives each request one contiguous run. Padded rows carry request −1 and slot −1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import torch
import torch.nn.functional as F

from portable_spec.draft.dispatcher import CHAIN, FIRST, DraftKey
from portable_spec.draft.runner import StepCall
from portable_spec.errors import PortableSpecError
from portable_spec_harness.synthetic.buffers import REQS, TOKENS, DraftOutputs, StaticInput
from portable_spec_harness.synthetic.ops import Ops, default_backend, rope_cache

KV_LAYOUTS = ("paged", "contiguous")


@dataclass(frozen=True)
class SyntheticDraftConfig:
    """Sizes of a synthetic drafter. Unset head counts / MLP width follow Llama-like ratios."""

    hidden: int = 1024
    vocab: int = 32000
    layers: int = 1
    head_dim: int = 128
    num_heads: int | None = None
    num_kv_heads: int | None = None
    intermediate: int | None = None
    block_size: int = 16
    max_model_len: int = 1024
    kv_layout: str = "paged"
    dtype: torch.dtype = torch.bfloat16
    seed: int = 0

    def resolved(self) -> SyntheticDraftConfig:
        heads = self.num_heads or max(1, self.hidden // self.head_dim)
        kv = self.num_kv_heads or max(1, heads // 4)
        inter = self.intermediate or max(128, round(self.hidden * 8 / 3 / 128) * 128)
        cfg = replace(self, num_heads=heads, num_kv_heads=kv, intermediate=inter)
        cfg.validate()
        return cfg

    def validate(self) -> None:
        def bad(msg: str) -> None:
            raise PortableSpecError(f"synthetic draft config: {msg}")
        for name in ("hidden", "vocab", "layers", "block_size", "max_model_len"):
            if getattr(self, name) < 1:
                bad(f"{name} must be >= 1 (got {getattr(self, name)}); pass --{name.replace('_', '-')} 1 or more")
        if self.head_dim < 16 or self.head_dim & (self.head_dim - 1):
            bad(f"head_dim must be a power of two >= 16 (got {self.head_dim}); use 64 or 128")
        if self.num_heads is not None and self.num_kv_heads is not None and self.num_heads % self.num_kv_heads:
            bad(f"num_heads {self.num_heads} is not a multiple of num_kv_heads {self.num_kv_heads}; pick divisors")
        if self.block_size & (self.block_size - 1):
            bad(f"block_size must be a power of two (got {self.block_size}); use 16")
        if self.kv_layout not in KV_LAYOUTS:
            bad(f"kv_layout must be one of {', '.join(KV_LAYOUTS)} (got {self.kv_layout!r})")

    def to_dict(self) -> dict[str, Any]:
        return {"hidden": self.hidden, "vocab": self.vocab, "layers": self.layers, "head_dim": self.head_dim,
                "num_heads": self.num_heads, "num_kv_heads": self.num_kv_heads, "intermediate": self.intermediate,
                "block_size": self.block_size, "max_model_len": self.max_model_len, "kv_layout": self.kv_layout,
                "dtype": str(self.dtype).removeprefix("torch."), "seed": self.seed}


@dataclass
class _Layer:
    in_norm: torch.Tensor
    qkv: torch.Tensor
    o: torch.Tensor
    post_norm: torch.Tensor
    gate_up: torch.Tensor
    down: torch.Tensor
    k_cache: torch.Tensor
    v_cache: torch.Tensor
    ctx: torch.Tensor | None = None  # DFlash: target hidden -> context K/V


@dataclass
class Composition:
    """One random batch as the host sees it (for reports) plus the device tensors to copy into the static inputs."""

    num_reqs: int
    req_slots: list[int]
    context_lens: list[int]
    inputs: dict[str, torch.Tensor] = field(repr=False)
    extra: dict[str, Any] = field(default_factory=dict)
    context: dict[str, torch.Tensor] | None = field(default=None, repr=False)

    def describe(self) -> dict[str, Any]:
        return {"num_reqs": self.num_reqs, "req_slots": self.req_slots, "context_lens": self.context_lens,
                **self.extra}


class _SyntheticDraft:
    """Weights, KV caches, block table, per-request sampling state, outputs and the fused ops."""

    method = "synthetic"

    def __init__(self, config: SyntheticDraftConfig, *, num_spec: int, max_reqs: int, device: torch.device | str,
                 probabilistic: bool = False, backend: str | None = None, context_kv: bool = False) -> None:
        cfg = config.resolved()
        if num_spec < 1:
            raise PortableSpecError(f"num_spec must be >= 1 (got {num_spec}); pass --num-spec 1 or more")
        if max_reqs < 1:
            raise PortableSpecError(f"max_reqs must be >= 1 (got {max_reqs})")
        if cfg.max_model_len < 2 * (num_spec + 2):
            raise PortableSpecError(f"max_model_len {cfg.max_model_len} is too short for K={num_spec}: use at "
                                    f"least {2 * (num_spec + 2)}")
        self.cfg = cfg
        self.num_spec = num_spec
        self.max_reqs = max_reqs
        self.device = torch.device(device)
        self.probabilistic = probabilistic
        self.ops = Ops(backend or default_backend(self.device))
        gen = torch.Generator(device="cpu").manual_seed(cfg.seed)
        dev, dt = self.device, cfg.dtype
        h, v, hd = cfg.hidden, cfg.vocab, cfg.head_dim
        nh, kvh, inter = cfg.num_heads, cfg.num_kv_heads, cfg.intermediate

        def w(*shape: int, std: float) -> torch.Tensor:
            return (torch.randn(*shape, generator=gen) * std).to(device=dev, dtype=dt)

        self.embed = w(v, h, std=1.0)
        self.final_norm = torch.ones(h, dtype=dt, device=dev)
        self.lm_head = w(v, h, std=4.0 / math.sqrt(h))
        self.page = cfg.block_size
        self.blocks_per_req = -(-cfg.max_model_len // self.page)
        num_blocks = max_reqs * self.blocks_per_req
        order = (torch.randperm(num_blocks, generator=gen) if cfg.kv_layout == "paged"
                 else torch.arange(num_blocks))
        self.block_table = order.view(max_reqs, self.blocks_per_req).to(torch.int32).to(dev)
        self.block_table_host = order.view(max_reqs, self.blocks_per_req).clone()
        slots = num_blocks * self.page
        self.layers = []
        for _ in range(cfg.layers):
            self.layers.append(_Layer(
                in_norm=torch.ones(h, dtype=dt, device=dev), qkv=w((nh + 2 * kvh) * hd, h, std=1 / math.sqrt(h)),
                o=w(h, nh * hd, std=1 / math.sqrt(nh * hd)), post_norm=torch.ones(h, dtype=dt, device=dev),
                gate_up=w(2 * inter, h, std=1 / math.sqrt(h)), down=w(h, inter, std=1 / math.sqrt(inter)),
                k_cache=w(slots, kvh, hd, std=1.0), v_cache=w(slots, kvh, hd, std=1.0),
                ctx=w(2 * kvh * hd, h, std=1 / math.sqrt(h)) if context_kv else None))
        self.cos_sin = rope_cache(cfg.max_model_len, hd, device=dev)
        self.temperature = torch.zeros(max_reqs, dtype=torch.float32, device=dev)
        self.seeds = torch.zeros(max_reqs, dtype=torch.int64, device=dev)
        self.outputs = DraftOutputs.allocate(max_reqs, num_spec, v, probabilistic=probabilistic, device=dev)
        self._gen = gen

    # ---- shared pieces ---------------------------------------------------------------------------------------
    def _layers_forward(self, x: torch.Tensor, pos: torch.Tensor, slot: torch.Tensor, req: torch.Tensor,
                        seq: torch.Tensor, query_len: int, causal: bool) -> torch.Tensor:
        cfg, ops = self.cfg, self.ops
        for lw in self.layers:
            h = ops.rms_norm(x, lw.in_norm)
            qkv = F.linear(h, lw.qkv)
            q = ops.rope_store_kv(qkv, pos, slot, self.cos_sin, lw.k_cache, lw.v_cache, cfg.num_heads,
                                  cfg.num_kv_heads, cfg.head_dim)
            a = ops.attention(q, lw.k_cache, lw.v_cache, self.block_table, req, seq, query_len=query_len,
                              page=self.page, causal=causal, num_kv_heads=cfg.num_kv_heads)
            x = torch.addmm(x, a, lw.o.t())
            h = ops.rms_norm(x, lw.post_norm)
            x = torch.addmm(x, ops.silu_mul(F.linear(h, lw.gate_up)), lw.down.t())
        return x

    def set_sampling(self, req_slots: torch.Tensor, temperature: torch.Tensor, seeds: torch.Tensor) -> None:
        """Per-request sampling state (temperature 0 = greedy), written outside any graph."""
        idx = req_slots.to(self.device, torch.long)
        self.temperature[idx] = temperature.to(self.device, torch.float32)
        self.seeds[idx] = seeds.to(self.device, torch.int64)

    def _random_requests(self, num_reqs: int, gen: torch.Generator, top: int, query_len: int, min_context: int,
                         max_context: int | None) -> tuple[torch.Tensor, list[int], torch.Tensor, torch.Tensor]:
        """Distinct request slots, context lengths in [min_context, min(top, max_context)] and their query
        positions ``[R, query_len]``."""
        hi = min(top, max_context) if max_context is not None else top
        lo = max(1, min(min_context, hi))
        reqs = torch.randperm(self.max_reqs, generator=gen)[:num_reqs]
        ctx = torch.randint(lo, hi + 1, (num_reqs,), generator=gen)
        return reqs, reqs.tolist(), ctx, ctx[:, None] + torch.arange(query_len)[None, :]

    def _slots_for(self, reqs: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Slots of ``positions`` (``[R, n]``) of requests ``reqs`` (``[R]``) through the host block table."""
        pages = self.block_table_host[reqs[:, None], positions // self.page]
        return (pages * self.page + positions % self.page).to(torch.int32)

    def _random_sampling(self, slots: list[int], gen: torch.Generator) -> dict[str, Any]:
        if not self.probabilistic:
            self.set_sampling(torch.tensor(slots), torch.zeros(len(slots)), torch.zeros(len(slots), dtype=torch.long))
            return {"temperatures": "greedy"}
        greedy = torch.rand(len(slots), generator=gen) < 0.3
        temps = torch.where(greedy, torch.zeros(len(slots)), 0.5 + torch.rand(len(slots), generator=gen))
        seeds = torch.randint(0, 2**31 - 1, (len(slots),), generator=gen)
        self.set_sampling(torch.tensor(slots), temps, seeds)
        return {"greedy_reqs": int(greedy.sum())}

    def query_len(self, kind: str) -> int:
        raise NotImplementedError

    def step(self, kind: str, num_tokens: int, num_reqs: int) -> None:
        raise NotImplementedError

    def step_call(self, key: DraftKey) -> StepCall:
        """The ``DraftStepSource`` protocol the vLLM drafters implement too: the step at the key's padded shape.
        Inputs live in the static buffers, so there are no caller addresses to check."""
        num_reqs = key.num_reqs
        if num_reqs is None:
            raise PortableSpecError(f"{key} has no request count: only FULL keys are captured")
        return StepCall(lambda: self.step(key.step, key.num_tokens, num_reqs))

    def apply_context(self, comp: Composition) -> None:
        """Eager per-batch work outside the graphs (DFlash context K/V); nothing for EAGLE."""


class EagleDraft(_SyntheticDraft):
    """EAGLE-style drafter: first step at 1+K tokens per request, then K-1 chain steps at 1 (see module doc)."""

    method = "eagle"

    def __init__(self, config: SyntheticDraftConfig, *, num_spec: int, max_reqs: int, device: torch.device | str,
                 probabilistic: bool = False, backend: str | None = None) -> None:
        super().__init__(config, num_spec=num_spec, max_reqs=max_reqs, device=device, probabilistic=probabilistic,
                         backend=backend)
        cfg, dev = self.cfg, self.device
        h = cfg.hidden
        self.fc_embed = (torch.randn(h, h, generator=self._gen) / math.sqrt(2 * h)).to(dev, cfg.dtype)
        self.fc_hidden = (torch.randn(h, h, generator=self._gen) / math.sqrt(2 * h)).to(dev, cfg.dtype)
        q = 1 + num_spec
        max_tokens = max_reqs * q
        i32 = dict(dtype=torch.int32, device=dev)
        # Packed so that a step's host-side input copy is three copies, whatever the batch.
        self.tok = torch.zeros((3, max_tokens), **i32)      # token ids, positions, slots
        self.row = torch.zeros((3, max_reqs), **i32)        # request index, seq_len, sample index in [0, K]
        self.hidden_in = torch.zeros((max_tokens, h), dtype=cfg.dtype, device=dev)
        self.chain = torch.zeros((4, max_reqs), **i32)      # carried: token ids, positions, slots, seq_lens
        self.chain[2].fill_(-1)
        self.chain_hidden = torch.zeros((max_reqs, h), dtype=cfg.dtype, device=dev)
        self.inputs = {
            "tok": StaticInput(self.tok, TOKENS, dim=1, pad=torch.tensor([[0], [0], [-1]], **i32)),
            "row": StaticInput(self.row, REQS, dim=1, pad=torch.tensor([[-1], [0], [0]], **i32)),
            "hidden": StaticInput(self.hidden_in, TOKENS, dim=0, pad=None),
            "chain": StaticInput(self.chain, REQS, dim=1, pad=torch.tensor([[0], [0], [-1], [0]], **i32)),
            "chain_hidden": StaticInput(self.chain_hidden, REQS, dim=0, pad=None),
        }

    def query_len(self, kind: str) -> int:
        return 1 + self.num_spec if kind == FIRST else 1

    def schedule(self) -> list[str]:
        return [FIRST] + [CHAIN] * (self.num_spec - 1)

    def step(self, kind: str, num_tokens: int, num_reqs: int) -> None:
        q = self.query_len(kind)
        if num_tokens != num_reqs * q:
            raise PortableSpecError(f"synthetic EAGLE {kind} step needs a uniform batch of {q} tokens per request "
                                    f"(got {num_tokens} tokens for {num_reqs} requests)")
        r = num_reqs
        req = self.row[0, :r]
        ch = self.chain
        if kind == FIRST:
            ids, pos, slot = self.tok[0, :num_tokens], self.tok[1, :num_tokens], self.tok[2, :num_tokens]
            seq, sample_index, hidden = self.row[1, :r], self.row[2, :r], self.hidden_in[:num_tokens]
        else:
            ids, pos, slot, seq = ch[0, :r], ch[1, :r], ch[2, :r], ch[3, :r]
            sample_index, hidden = None, self.chain_hidden[:r]
        x = torch.addmm(F.linear(F.embedding(ids, self.embed), self.fc_embed), hidden, self.fc_hidden.t())
        x = self._layers_forward(x, pos, slot, req, seq, q, causal=True)
        # Next chain inputs (position + 1, seq_len, slot, hidden of the sampled token), then the head on that hidden.
        self.ops.advance(x, pos, sample_index, req, self.block_table, self.chain_hidden, ch[1], ch[3], ch[2],
                         rows=r, query_len=q, page=self.page, max_pos=self.cfg.max_model_len)
        logits = F.linear(self.ops.rms_norm(self.chain_hidden[:r], self.final_norm), self.lm_head)
        out = self.outputs
        self.ops.sample_record(logits, req, ch[1], self.temperature, self.seeds, out.current_draft_step,
                               out.draft_token_ids, out.draft_logits, ch[0], rows=r, cols=1, query_len=1, offset=0)

    def random_composition(self, num_reqs: int, gen: torch.Generator, *, min_context: int = 1,
                           max_context: int | None = None) -> Composition:
        """A random first-step batch: distinct request slots, per-request context lengths and accepted counts."""
        k, q, cfg = self.num_spec, 1 + self.num_spec, self.cfg
        reqs, slots, ctx, pos = self._random_requests(num_reqs, gen, cfg.max_model_len - q - k - 1, q,
                                                      min_context, max_context)
        tok = torch.stack([torch.randint(0, cfg.vocab, (num_reqs * q,), generator=gen),
                           pos.flatten(), self._slots_for(reqs, pos).flatten().long()]).to(torch.int32)
        row = torch.stack([reqs, ctx + q, torch.randint(0, k + 1, (num_reqs,), generator=gen)])
        hidden = torch.randn(num_reqs * q, cfg.hidden, generator=gen)
        extra = {"sample_index": row[2].tolist()} | self._random_sampling(slots, gen)
        dev = self.device
        return Composition(num_reqs, slots, ctx.tolist(), {
            "tok": tok.to(dev), "row": row.to(torch.int32).to(dev), "hidden": hidden.to(dev, cfg.dtype)}, extra)


class DFlashDraft(_SyntheticDraft):
    """DFlash-style parallel drafter: one non-causal step over 1+K tokens per request (see module doc)."""

    method = "dflash"

    def __init__(self, config: SyntheticDraftConfig, *, num_spec: int, max_reqs: int, device: torch.device | str,
                 probabilistic: bool = False, backend: str | None = None) -> None:
        super().__init__(config, num_spec=num_spec, max_reqs=max_reqs, device=device, probabilistic=probabilistic,
                         backend=backend, context_kv=True)
        q = 1 + num_spec
        i32 = dict(dtype=torch.int32, device=self.device)
        self.mask_token_id = self.cfg.vocab - 1
        self.tok = torch.zeros((3, max_reqs * q), **i32)  # token ids (bonus + K masks), positions, slots
        self.row = torch.zeros((2, max_reqs), **i32)      # request index, seq_len (context + 1 + K)
        self.inputs = {
            "tok": StaticInput(self.tok, TOKENS, dim=1, pad=torch.tensor([[0], [0], [-1]], **i32)),
            "row": StaticInput(self.row, REQS, dim=1, pad=torch.tensor([[-1], [0]], **i32)),
        }

    def query_len(self, kind: str) -> int:
        if kind != FIRST:
            raise PortableSpecError("DFlash drafts in one parallel step: it has no chain steps")
        return 1 + self.num_spec

    def schedule(self) -> list[str]:
        return [FIRST]

    def write_context_kv(self, context_hidden: torch.Tensor, positions: torch.Tensor, slots: torch.Tensor) -> None:
        """Project target hidden states to context K/V and store them: eager, outside any graph (as vLLM's
        ``precompute_and_store_context_kv``)."""
        cfg = self.cfg
        for lw in self.layers:
            kv = F.linear(context_hidden, lw.ctx)
            self.ops.rope_store_kv(kv, positions, slots, self.cos_sin, lw.k_cache, lw.v_cache, 0, cfg.num_kv_heads,
                                   cfg.head_dim)

    def step(self, kind: str, num_tokens: int, num_reqs: int) -> None:
        q = self.query_len(kind)
        if num_tokens != num_reqs * q:
            raise PortableSpecError(f"synthetic DFlash step needs a uniform batch of {q} tokens per request "
                                    f"(got {num_tokens} tokens for {num_reqs} requests)")
        ids, pos, slot = self.tok[0, :num_tokens], self.tok[1, :num_tokens], self.tok[2, :num_tokens]
        req, seq = self.row[0, :num_reqs], self.row[1, :num_reqs]
        x = self._layers_forward(F.embedding(ids, self.embed), pos, slot, req, seq, q, causal=False)
        logits = F.linear(self.ops.rms_norm(x, self.final_norm), self.lm_head)
        out = self.outputs
        self.ops.sample_record(logits, req, pos, self.temperature, self.seeds, out.current_draft_step,
                               out.draft_token_ids, out.draft_logits, None, rows=num_reqs, cols=self.num_spec,
                               query_len=q, offset=1)

    def random_composition(self, num_reqs: int, gen: torch.Generator, *, min_context: int = 1,
                           max_context: int | None = None, fresh_context: int = 4) -> Composition:
        """A random block batch. The last ``fresh_context`` context positions of each request get new context K/V
        through ``write_context_kv`` (eager, as in vLLM); older context is whatever the cache holds."""
        q, cfg = 1 + self.num_spec, self.cfg
        reqs, slots, ctx, pos = self._random_requests(num_reqs, gen, cfg.max_model_len - q, q, min_context,
                                                      max_context)
        ids = torch.full((num_reqs, q), self.mask_token_id, dtype=torch.long)
        ids[:, 0] = torch.randint(0, cfg.vocab - 1, (num_reqs,), generator=gen)
        tok = torch.stack([ids.flatten(), pos.flatten(), self._slots_for(reqs, pos).flatten().long()])
        tok = tok.to(torch.int32)
        # Fresh context: the last `fresh_context` positions before each block (clamped at 0; duplicates harmless).
        fresh = max(1, fresh_context)
        cpos = (ctx[:, None] - fresh + torch.arange(fresh)[None, :]).clamp(min=0)
        row = torch.stack([reqs, ctx + q]).to(torch.int32)
        extra = self._random_sampling(slots, gen)
        dev = self.device
        context = {"hidden": torch.randn(cpos.numel(), cfg.hidden, generator=gen).to(dev, cfg.dtype),
                   "positions": cpos.flatten().to(torch.int32).to(dev),
                   "slots": self._slots_for(reqs, cpos).flatten().to(dev)}
        return Composition(num_reqs, slots, ctx.tolist(), {"tok": tok.to(dev), "row": row.to(dev)}, extra, context)

    def apply_context(self, comp: Composition) -> None:
        """Write the composition's fresh context K/V (eager; call before the step)."""
        if comp.context is not None:
            self.write_context_kv(comp.context["hidden"], comp.context["positions"], comp.context["slots"])


def build_synthetic(method: str, config: SyntheticDraftConfig, *, num_spec: int, max_reqs: int,
                    device: torch.device | str, probabilistic: bool = False,
                    backend: str | None = None) -> EagleDraft | DFlashDraft:
    """``eagle`` (also eagle3/mtp: the same step shape) or ``dflash``."""
    name = method.strip().lower()
    if name in ("eagle", "eagle3", "mtp"):
        return EagleDraft(config, num_spec=num_spec, max_reqs=max_reqs, device=device, probabilistic=probabilistic,
                          backend=backend)
    if name == "dflash":
        return DFlashDraft(config, num_spec=num_spec, max_reqs=max_reqs, device=device, probabilistic=probabilistic,
                           backend=backend)
    raise PortableSpecError(f"unknown synthetic draft method {method!r}: use eagle or dflash")
