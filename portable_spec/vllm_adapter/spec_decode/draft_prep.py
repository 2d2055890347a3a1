"""The V1 runner's draft prep, folded into the fused first pass's graph (EAGLE/EAGLE3, greedy, verify-shaped batches).

Before the drafter's first pass, vLLM 0.26.0's V1 runner (``GPUModelRunner.propose_draft_token_ids``, padded
drafter batch) launches ``eagle_prepare_next_token_padded_kernel`` (each request's next token and its count of
valid sampled tokens; a per-request Python loop first fills the backup tokens), copies the counts to the host on a
side stream, launches ``eagle_prepare_inputs_padded_kernel`` (the row to sample and the rejected count per request),
builds a new ``CommonAttentionMetadata`` with two host ``.item()`` reads, and the first pass then shifts the token
ids and scatters the next tokens in (``set_inputs_first_pass``): host work around one replay, which Model Runner V2
does inside its first pass's graph.

Here those steps are part of the fused first pass's graph (``FIRST_FUSED``): the two kernels (vLLM's own, through the
names vLLM's proposer calls them by, so the bound substitutes serve) write into persistent buffers, then the token
shift, the scatter and the positions, then the forward, the sample and the chain's first inputs. What the host still
does per step: the backup tokens (vLLM's semantics, one list comprehension), copies of the sampled tokens and the
draft counts into persistent buffers, the target's hidden states into the drafter's (EAGLE-3: combined, as
upstream), the slot mapping, one replay, then the hand-off vLLM's ``_copy_valid_sampled_token_count`` makes (same
values, copied on this stream after the replay: ``hand_off_counts``) and the fused chain.

Exact where it applies (``prep_blockers`` and the per-step checks otherwise, and upstream's runner path runs): every
request's next token, valid count, sample row and rejected count are what vLLM's kernels compute from the same
inputs, at a captured size equal to the batch (vLLM hands the drafter unpadded metadata, so no row is padding). A
ragged batch (requests of fewer than 1+K tokens beside full ones) replays only where the draft attention reads each
request's range from ``query_start_loc`` (``first_pass_key``); the kernels read the same ``query_start_loc``.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
import vllm.v1.spec_decode.llm_base_proposer as base

from portable_spec.draft.dispatcher import FIRST_FUSED
from portable_spec.kernels.fixed_tile import next_pow2


def inference_alias(tensor: torch.Tensor) -> torch.Tensor:
    """An inference tensor over ``tensor``'s memory (same storage, offset, shape and strides).

    What we hand to vLLM in place of a tensor vLLM itself would have made inside inference mode must be an inference
    tensor too: ``torch.compile`` guards on a tensor's dispatch keys, which differ between normal and inference
    tensors, so a compiled vLLM helper that receives ours one step and vLLM's the next compiles again once, during
    serving (``update_num_computed_tokens_for_batch_change`` reads the valid counts every step under async
    speculative decoding: a one-off ~0.1-0.6 s pause). The alias costs no copy: replays that write the buffer are
    seen through it."""
    with torch.inference_mode():
        alias = torch.empty(0, dtype=tensor.dtype, device=tensor.device)
        alias.set_(tensor.untyped_storage(), tensor.storage_offset(), tensor.shape, tensor.stride())
    return alias


def hand_off_counts(runner: Any, next_token_ids: torch.Tensor, valid_counts: torch.Tensor) -> None:
    """What vLLM's ``GPUModelRunner._copy_valid_sampled_token_count`` hands to the runner's next step (the valid
    counts copied to the host behind an event, the counts on the device for its GPU-side correction, the next tokens
    as ``prev_sampled_token_ids``), with the copy on the current stream right after the replay that wrote them,
    where vLLM switches to a side stream and waits for this one (a host-side cost every step). Stream order
    also keeps the next step's replay from rewriting the buffers before the copy reads them."""
    event = runner.valid_sampled_token_count_event
    if event is None:
        return
    runner.valid_sampled_token_count_cpu[: valid_counts.shape[0]].copy_(valid_counts, non_blocking=True)
    event.record()
    if runner.use_async_spec_decode:
        runner.valid_sampled_token_count_gpu = valid_counts
    runner.input_batch.prev_sampled_token_ids = next_token_ids.unsqueeze(1)


class DraftPrepMixin:
    """Mixed into our EAGLE proposer beside ``FusedChainMixin``: the persistent prep buffers, the graph's prologue
    (``_draft_prep_body``) and the per-step host path (``propose_with_prep``)."""

    draft_prep_off: tuple[str, ...] | list[str] = ()  # why not (``prep_blockers``, set before capture)
    prep_declines: dict[str, int]
    """Steps the fused first pass left to vLLM's path, by reason (host integers; read by the soak's probe): a
    reason that grows with every step shows where a workload never reaches the fused first pass."""

    def _init_draft_prep(self, max_reqs: int) -> None:
        device, rows = self.input_ids.device, max_reqs
        self.prep_declines = {}
        with torch.inference_mode(False):  # normal tensors: written in place from outside inference mode too
            self.prep_sampled = torch.full((rows, self.verify_len), -1, dtype=torch.int32, device=device)
            self.prep_cu_draft = torch.zeros(rows, dtype=torch.int32, device=device)
            self.prep_next_tokens = torch.zeros(rows, dtype=torch.int32, device=device)
            self.prep_valid_counts = torch.zeros(rows, dtype=torch.int32, device=device)
            self.prep_num_rejected = torch.zeros(rows, dtype=torch.int32, device=device)
        # What the runner's next step reads of ours, as the inference tensors vLLM's own step would leave there.
        self.handoff_next_tokens = inference_alias(self.prep_next_tokens)
        self.handoff_valid_counts = inference_alias(self.prep_valid_counts)

    def _draft_prep_body(self, num_reqs: int) -> None:
        """Recorded before the forward inside a FIRST_FUSED capture: vLLM's two prep kernels over ``num_reqs`` rows,
        then upstream's ``set_inputs_first_pass`` (default EAGLE pathway) minus the hidden states, which the host
        copies. Reads only persistent buffers (ours and the target runner's)."""
        runner, query_len = self.target_runner, self.verify_len
        num_tokens = num_reqs * query_len
        base.eagle_prepare_next_token_padded_kernel[(num_reqs,)](
            self.prep_sampled, runner.discard_request_mask.gpu, self.backup_next_token_ids.gpu,
            self.prep_next_tokens, self.prep_valid_counts, runner.input_batch.vocab_size, query_len, num_reqs,
            self.prep_sampled.stride(0), BLOCK_SIZE_TOKENS=next_pow2(query_len))
        base.eagle_prepare_inputs_padded_kernel[(num_reqs,)](
            self.prep_cu_draft, self.prep_valid_counts, runner.query_start_loc.gpu, self.sample_indices,
            self.prep_num_rejected, num_reqs)
        self.input_ids[: num_tokens - 1] = runner.input_ids.gpu[1:num_tokens]
        self.input_ids[self.sample_indices[:num_reqs]] = self.prep_next_tokens[:num_reqs]
        self._set_positions(num_tokens, runner._get_positions(num_tokens))

    def prep_blockers(self, runner: Any) -> list[str]:
        """Why the runner's draft prep cannot be folded into the first pass here (empty: it can). Read once.
        Whatever keeps the chain unfused (multimodal draft inputs among it) is one reason here."""
        checks = [
            (self.fused_chain_off, "the chain steps are not fused"),
            (getattr(runner, "uses_mrope", False) or getattr(runner, "uses_xdrope_dim", 0) > 0,
             "M-RoPE/XD-RoPE target positions"),
            (getattr(runner.get_model(), "get_mtp_target_hidden_states", None) is not None,
             "the target overrides the drafter's hidden states"),
        ]
        return [reason for blocked, reason in checks if blocked]

    def propose_with_prep(self, runner: Any, scheduler_output: Any, sampled_token_ids: Any, sampling_metadata: Any,
                          hidden_states: torch.Tensor, aux_hidden_states: list[torch.Tensor] | None,
                          spec_decode_metadata: Any, common_attn_metadata: Any) -> torch.Tensor | None:
        """The drafts for this step with the runner's prep inside the first pass's replay, or None (nothing done:
        the runner runs vLLM's path) when this step is not a verify-shaped greedy batch at a captured size."""
        k, cad = self.graph_k, common_attn_metadata
        if self.graph_runner is None or self.draft_prep_off:
            return None  # decided at boot, logged once there
        why = step_blocker(self, scheduler_output, sampled_token_ids, spec_decode_metadata, cad)
        chain_key = None if why else self._fused_step_for(k, (), {
            "common_attn_metadata": cad, "sampling_metadata": sampling_metadata, "mm_embed_inputs": None})
        if not why and chain_key is None:
            why = "chain step not fused (sampling, size or draft vocabulary)"
        first_key = None
        if not why:
            first_key, why = self.first_pass_lookup(FIRST_FUSED, cad)
        # vLLM hands the drafter unpadded metadata (``CommonAttentionMetadata.unpadded``): one row per request.
        if not why and sampled_token_ids.shape[0] != cad.num_reqs:
            why = "sampled rows != requests"
        if why:
            self.prep_declines[why] = self.prep_declines.get(why, 0) + 1
            return None
        batch, num_tokens = first_key.num_reqs, cad.num_actual_tokens
        self.num_speculative_tokens, self._last_draft_probs = k, None
        self._fill_backup_tokens(runner)
        self.prep_sampled[:batch].copy_(sampled_token_ids)
        self.prep_cu_draft[:batch].copy_(spec_decode_metadata.cu_num_draft_tokens)
        if runner.use_aux_hidden_state_outputs:
            target_hidden = torch.cat([h[:num_tokens] for h in aux_hidden_states], dim=-1)
        else:
            target_hidden = hidden_states[:num_tokens]
        if self.method == "eagle3":
            target_hidden = self.model.combine_hidden_states(target_hidden)
        self.hidden_states[:num_tokens] = target_hidden
        self._get_slot_mapping(first_key.num_tokens, cad.slot_mapping[:num_tokens])
        self.graph_runner.replay(first_key)
        hand_off_counts(runner, self.handoff_next_tokens[:batch], self.handoff_valid_counts[:batch])
        return self._run_fused_chain(chain_key, batch, self.chain_positions[:batch], copy.copy(cad),
                                     self.prep_num_rejected[:batch])

    def _fill_backup_tokens(self, runner: Any) -> None:
        """vLLM's backup next tokens (``prepare_next_token_ids_padded``): each request's last token before drafts."""
        batch, requests = runner.input_batch, runner.requests
        num_reqs = batch.num_reqs
        lengths = batch.num_tokens_no_spec[:num_reqs].tolist()
        self.backup_next_token_ids.np[:num_reqs] = [
            requests[req_id].get_token_id(length - 1) for req_id, length in zip(batch.req_ids[:num_reqs], lengths)]
        self.backup_next_token_ids.copy_to_gpu(num_reqs)


def step_blocker(proposer: Any, scheduler_output: Any, sampled_token_ids: Any, spec_decode_metadata: Any,
                 cad: Any) -> str | None:
    """Why this step's shape keeps the fused first pass out (host facts only), or None."""
    if spec_decode_metadata is None or cad is None:
        return "no drafts verified this step"
    if not isinstance(sampled_token_ids, torch.Tensor):
        return "sampled tokens on the host"
    if sampled_token_ids.shape[1] != proposer.verify_len:
        return "fewer than K drafts scheduled for every request"
    if scheduler_output.num_spec_tokens_to_schedule != proposer.graph_k:
        return "the scheduler asks for another K"
    return None
