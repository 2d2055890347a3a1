"""Fused draft steps for the V1 EAGLE drafter. Each chain step is ONE graph replay holding the draft forward, the
greedy sample (``spec_decode.draft_sample``), the write of the sampled token into a persistent ``[requests, K]`` draft
buffer at the device-side ``current_draft_step``, and the in-place update of the next step's inputs (token ids, hidden
states).
The first pass, at verify shape, is ONE graph replay too (``first_fused``): the runner's draft prep and the first
pass's inputs (``spec_decode.draft_prep``), the forward, the gather of each request's sampled row, the greedy sample into
column 0 of the draft buffer, and the chain's first inputs (token ids, hidden states, the positions vLLM's step
kernel advances).

Why: with per-forward graphs the drafter's forwards are cheap, but upstream's Python around each forward (a metadata
build, batch padding, a forward context, the sampling ops, input copies) still costs more host time than the forward
(Model Runner V2's first pass is one graph, and it pays none of this).
Here the host does what must stay outside a graph, and nothing else. First pass: see ``spec_decode.draft_prep``. Chain step:
vLLM's own step kernel (positions, slot mapping and ``seq_lens`` advanced in place, padding rows given the padding
slot), one fill of ``current_draft_step``, one replay. Chain steps stay one graph each (never the whole chain:
vllm-musa MUSA-0203).

A first pass that is not verify-shaped at a captured size (a prefill in the batch) comes through vLLM's runner path
to ``propose``: upstream's first pass (``super().propose(1)``, replaying no graph or our per-forward ``first`` graph),
and the chain continues from there.

At tensor parallel the graph holds the draft's vocab-parallel lm_head and its TP group's logits all-gather (vLLM's
graph-safe pynccl path, as in the target's graphs; with local argmax reduction, vLLM's all-gather of each shard's
best value and id), so every rank samples the same token from the same logits.

Applies only where that is exact (greedy draft sampling as vLLM does it, ``vocab_flags``: an EAGLE-3 draft
vocabulary with its ``d2t`` map and vLLM's local argmax reduction are in, heterogeneous vocabularies out; plain
EAGLE/EAGLE3 inputs; and a draft attention backend whose drafting metadata build writes nothing a replay reads, so
skipping it is safe); anything else runs upstream's loop with per-forward graphs. ``PORTABLE_SPEC_DRAFT_CHAIN=forward``
turns fusion off.
"""

from __future__ import annotations

import logging
from typing import Any

import torch

from portable_spec.draft.dispatcher import CHAIN_FUSED
from portable_spec.envs import DRAFT_CHAIN_ENV as CHAIN_ENV, draft_chain
from portable_spec.vllm_adapter.spec_decode.draft_sample import VLLM, choose_draft_sample, greedy_draft_tokens

logger = logging.getLogger("portable_spec.vllm_adapter")

# Backends whose build_for_drafting only wraps persistent buffers (FLASH_ATTN: fast_build, so no AOT schedule is
# written): a replay reads nothing the build would have written, so the lean loop may skip the build.
BUILD_FREE_BACKENDS = frozenset({"FLASH_ATTN"})


def chain_mode() -> str:
    return draft_chain()


def fused_chain_blockers(proposer: Any) -> list[str]:
    """Why fused chain steps cannot serve this drafter (empty: they can). Read once, at capture."""
    spec = proposer.vllm_config.speculative_config
    checks = [
        (chain_mode() == "forward", f"{CHAIN_ENV}=forward"),
        (proposer.method not in ("eagle", "eagle3"), f"method {proposer.method!r}"),
        (proposer.graph_k < 2, "one speculative token (no chain steps)"),
        (getattr(proposer, "uses_mrope", False) or getattr(proposer, "uses_xdrope_dim", 0) > 0, "M-RoPE/XD-RoPE"),
        (getattr(proposer, "constant_draft_positions", False), "constant draft positions"),
        (getattr(proposer, "supports_mm_inputs", False), "multimodal draft inputs"),
        (bool(vocab_flags(proposer)), f"draft vocabulary mapping ({', '.join(vocab_flags(proposer))})"),
        (getattr(proposer, "_share_mtp_indices", False), "shared MTP indices"),
        (getattr(proposer, "needs_extra_input_slots", False) or getattr(proposer, "parallel_drafting", False),
         "parallel drafting"),
        (spec.disable_padded_drafter_batch, "disable_padded_drafter_batch"),
        (any(getattr(cfg, "rswa_window", None) is not None
             for cfg in (proposer.vllm_config.model_config, proposer.draft_model_config)),
         "R-SWA attention (FLASH_ATTN's build copies its prefix lengths into persistent buffers)"),
    ]
    reasons = [reason for blocked, reason in checks if blocked]
    backends = {group.backend.get_name() for group in proposer.draft_attn_groups}
    if not backends <= BUILD_FREE_BACKENDS:
        reasons.append(f"draft attention {', '.join(sorted(backends))} needs its metadata built every step")
    return reasons


VOCAB_FLAGS = ("use_heterogeneous_vocab",)


def vocab_flags(proposer: Any) -> list[str]:
    """The vLLM switches under which the fused graphs cannot draft as vLLM does (empty: they can).

    The fused graphs (``first_fused``, ``chain_fused``) hold the greedy sample (``draft_sample``: vLLM's own
    ``_greedy_sample``, or for an EAGLE-3 draft vocabulary the argmax over the draft logits and the ``d2t`` gather,
    shown the same token) and feed the sampled id back as the next input id, which is vLLM's next input unless
    ``use_heterogeneous_vocab`` is on: then vLLM also maps each step's input ids into the draft vocabulary, which
    the graphs do not, so the fused kinds decline it and the per-forward graphs (forward only; vLLM samples and maps
    ids eagerly around them) serve. ``use_local_argmax_reduction`` samples with the model's ``get_top_tokens``
    (a per-shard argmax, then the d2t gather), which ``_greedy_sample`` records as vLLM calls it."""
    return [flag for flag in VOCAB_FLAGS if getattr(proposer, flag, False)]


class FusedChainMixin:
    """Mixed into our EAGLE proposer (before ``DrafterGraphMixin``): the fused graphs' bodies (the first pass's
    sample and chain inputs, each chain step), and ``propose`` = upstream's first pass + the lean chain loop whenever
    a fused chain graph covers the batch (the fused first pass is reached through ``DraftPrepMixin``)."""

    def _init_fused_chain(self, max_reqs: int) -> None:
        device = self.input_ids.device
        # Normal tensors, as vLLM's own persistent buffers are (capture runs under inference mode; an inference
        # tensor would refuse in-place writes from any caller outside it).
        with torch.inference_mode(False):
            self.current_draft_step = torch.ones(1, dtype=torch.int64, device=device)
            self.draft_tokens = torch.zeros(max_reqs, self.graph_k, dtype=torch.int64, device=device)
            # The fused first pass reads each request's sampled row here and leaves the chain's first positions here.
            self.sample_indices = torch.zeros(max_reqs, dtype=torch.int32, device=device)
            self.chain_positions = torch.zeros(max_reqs, dtype=self.positions.dtype, device=device)
        self.fused_chain_off = fused_chain_blockers(self)
        self.draft_sample = VLLM
        if self.fused_chain_off:
            logger.info("portable_spec: chain steps replay the forward only (%s)", "; ".join(self.fused_chain_off))
        else:
            logger.info("portable_spec: chain steps are fused graphs (forward + greedy sample + next inputs)")
            self.draft_sample = choose_draft_sample(self)

    def _fused_chain_body(self, num_tokens: int, out: Any) -> torch.Tensor:
        """Recorded after the forward inside a CHAIN_FUSED capture: sample, store, feed the next step."""
        last, hidden = out if self.model_returns_tuple() else (out, out)
        tokens = greedy_draft_tokens(self, self.draft_sample, last)
        self.input_ids[:num_tokens].copy_(tokens)
        self.hidden_states[:num_tokens].copy_(hidden)
        self.draft_tokens[:num_tokens].index_copy_(1, self.current_draft_step, tokens.unsqueeze(1))
        return tokens

    def _fused_first_body(self, num_reqs: int, out: Any) -> torch.Tensor:
        """Recorded after the forward inside a FIRST_FUSED capture: upstream's first sample and the chain's inputs."""
        last, hidden = out if self.model_returns_tuple() else (out, out)
        rows = self.sample_indices[:num_reqs]
        tokens = greedy_draft_tokens(self, self.draft_sample, last[rows])
        self.chain_positions[:num_reqs].copy_(self.positions[rows])
        self._begin_chain(tokens, hidden[rows])
        return tokens

    def _begin_chain(self, first: torch.Tensor, hidden_rows: torch.Tensor) -> None:
        """The chain's first inputs, as upstream sets them after its first sample: the hidden states at each
        request's sampled row and the sampled tokens, which are also column 0 of the drafts."""
        batch = first.shape[0]
        self.hidden_states[:batch].copy_(hidden_rows)
        self.input_ids[:batch].copy_(first)
        self.draft_tokens[:batch, 0].copy_(first)

    def _fused_step_for(self, num_speculative_tokens: int, args: tuple, kwargs: dict[str, Any]) -> Any:
        """The fused chain key this call can use, or None (upstream's loop then runs, with per-forward graphs).

        Decided from what every tensor-parallel rank has alike (the scheduled batch and its sampling metadata, and
        the keys all ranks agreed on at capture), so every rank takes the same branch and replays the same graphs."""
        if self.graph_runner is None or self.fused_chain_off or args or num_speculative_tokens != self.graph_k:
            return None
        cad, sampling = kwargs.get("common_attn_metadata"), kwargs.get("sampling_metadata")
        if cad is None or kwargs.get("mm_embed_inputs") is not None or self.eplb_state is not None:
            return None
        if self._enable_probabilistic_draft_probs and not (sampling is not None and sampling.all_greedy):
            return None
        return self.captured_key(CHAIN_FUSED, cad.batch_size())

    def propose(self, num_speculative_tokens: int, *args: Any, **kwargs: Any) -> torch.Tensor:
        """vLLM's runner path (a step ``DraftPrepMixin.propose_with_prep`` declined): upstream's first pass, then
        the fused chain when a fused chain graph covers the batch."""
        key = self._fused_step_for(num_speculative_tokens, args, kwargs)
        if key is None:
            return super().propose(num_speculative_tokens, *args, **kwargs)
        # The chain starts from state the first pass leaves behind: clear it so a stale value can never be used.
        self.graphs.last_output = self._first_pass_cad = self._first_pass_token_indices = None
        first = super().propose(1, **kwargs)[:, 0]  # upstream's first pass and first sample
        self.num_speculative_tokens = num_speculative_tokens
        if self.graphs.last_output is None or self._first_pass_cad is None:
            raise RuntimeError("portable_spec: vLLM's first draft pass bypassed our hooks (no forward output or "
                               "metadata recorded); set PORTABLE_SPEC_DRAFT_CHAIN=forward and report this vLLM version")
        return self._run_fused_chain(key, first.shape[0], self._chain_inputs_from(first), self._first_pass_cad,
                                     kwargs.get("num_rejected_tokens_gpu"))

    def _chain_inputs_from(self, first: torch.Tensor) -> torch.Tensor:
        """The chain's inputs after upstream's first pass and first sample, as upstream prepares them; returns the
        positions vLLM's step kernel advances."""
        token_indices, out = self._first_pass_token_indices, self.graphs.last_output
        hidden = out[1] if self.model_returns_tuple() else out
        self._begin_chain(first, hidden[token_indices])
        return self.positions[token_indices]

    def _run_fused_chain(self, key: Any, batch: int, positions: torch.Tensor, cad: Any,
                         num_rejected: torch.Tensor | None) -> torch.Tensor:
        """Chain steps 1..K-1 from the first pass's outputs (inputs already in the persistent buffers)."""
        k = self.num_speculative_tokens
        cad.num_actual_tokens, cad.max_query_len = batch, 1
        cad.query_start_loc = self.arange[: batch + 1]
        if num_rejected is not None:
            cad.seq_lens -= num_rejected  # in place, on the runner's persistent buffer (as upstream)
            cad._seq_lens_cpu = None
            cad._num_computed_tokens_cpu = None
        replay = self.graph_runner.captured[key].graph.replay
        for index in range(1, k):
            positions = self._update_positions_dependent_metadata(positions, cad, batch, key.num_reqs,
                                                                  self.block_size)
            self.current_draft_step.fill_(index)
            replay()
        self.graph_runner.count_replays(CHAIN_FUSED, k - 1)
        return self.draft_tokens[:batch, :k].clone()

    def set_inputs_first_pass(self, *args: Any, **kwargs: Any):
        num_tokens, token_indices, cad = super().set_inputs_first_pass(*args, **kwargs)
        self._first_pass_token_indices, self._first_pass_cad = token_indices, cad
        return num_tokens, token_indices, cad
