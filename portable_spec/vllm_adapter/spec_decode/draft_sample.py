"""The greedy draft sample our fused graphs record: vLLM's own (``_greedy_sample``), except for an EAGLE-3 draft
vocabulary, where the graph takes the argmax over the draft's logits and gathers the target id through ``d2t``.

Why: vLLM 0.26.0's ``Eagle3*ForCausalLM.compute_logits`` (``SCATTER_HEADS``) turns the draft's logits over its
``draft_vocab_size`` ids into target-vocabulary logits: a ``[tokens, vocab_size]`` tensor of -inf, the draft logits
written at ``i + d2t[i]``, then vLLM's greedy sample takes the argmax over all of it. For a published head at
Llama-3.1-8B shape that is a 128256-wide fill, scatter and argmax per token for a 32000-wide head. The gather reads
only the draft logits: ``i* = argmax(draft logits)``, token ``i* + d2t[i*]``.

Why it is the same token (``torch.argmax`` returns the first index of the maximum, on every device):
- the scattered row holds the draft logits at their targets and -inf elsewhere, so both argmaxes see the same maximum
  unless it is -inf;
- ties: the full-vocabulary argmax takes the tied draft id with the smallest target id, the draft argmax the smallest
  draft id. They are one id when the map rises strictly (``i < j`` gives ``target(i) < target(j)``), as in published
  heads (built from a sorted token set); it is checked once, at capture (``gather_problem``). A map that does not
  (duplicate targets, where the scatter keeps an unspecified write) keeps vLLM's scatter in the graph;
- NaN: both return the first NaN, the same id by the same order;
- a row that is -inf throughout: the full-vocabulary argmax is 0, and so is the gather's token (``torch.where``).
Every other model, and vLLM's local argmax reduction (``get_top_tokens``), records ``_greedy_sample`` itself: vLLM's
eager sample, op for op. Heterogeneous vocabularies also map each step's input ids; ``fused_chain`` declines them.
Greedy only: a batch that samples from the draft (probabilistic draft sampling) runs vLLM's path
(``FusedChainMixin._fused_step_for``), whose draft probabilities are over the scattered target vocabulary.
"""

from __future__ import annotations

import logging
from typing import Any

import torch

logger = logging.getLogger("portable_spec.vllm_adapter")

GATHER = "d2t_gather"
VLLM = "vllm_greedy_sample"


def scatter_heads() -> tuple[type, ...]:
    """vLLM's EAGLE-3 heads whose ``compute_logits`` is the d2t scatter (``tests/test_vllm_hook_points.py`` pins
    each one's source and ``tests/test_eagle3_draft_vocabulary.py`` its behaviour against the gather)."""
    from vllm.model_executor.models.deepseek_eagle3 import Eagle3DeepseekV2ForCausalLM
    from vllm.model_executor.models.llama_eagle3 import Eagle3LlamaForCausalLM
    from vllm.model_executor.models.qwen3_eagle3 import Eagle3Qwen3ForCausalLM

    return Eagle3LlamaForCausalLM, Eagle3Qwen3ForCausalLM, Eagle3DeepseekV2ForCausalLM


def gather_problem(proposer: Any) -> str | None:
    """Why the gather cannot stand for vLLM's sample of this drafter (None: it can, exactly). Read once, at capture
    (the map is a loaded weight: one device read)."""
    if getattr(proposer, "use_local_argmax_reduction", False) or getattr(proposer, "use_heterogeneous_vocab", False):
        return "vLLM samples with its own vocabulary switch"
    model = getattr(proposer, "model", None)
    compute_logits = getattr(type(model), "compute_logits", None)
    if not any(compute_logits is head.compute_logits for head in scatter_heads()):
        return f"{type(model).__name__}.compute_logits is not vLLM's EAGLE-3 d2t scatter"
    d2t = getattr(model, "draft_id_to_target_id", None)
    if d2t is None:
        return "no d2t map"
    targets = torch.arange(d2t.shape[0], device=d2t.device) + d2t
    if d2t.shape[0] != model.config.draft_vocab_size:
        return f"a d2t map of {d2t.shape[0]} ids for draft_vocab_size {model.config.draft_vocab_size}"
    in_range = bool(((targets >= 0) & (targets < model.config.vocab_size)).all())
    if not in_range or not bool((targets[1:] > targets[:-1]).all()):
        return "its d2t map does not rise strictly inside the target vocabulary (ties could break differently)"
    return None


def choose_draft_sample(proposer: Any) -> str:
    """``GATHER`` or ``VLLM`` for this drafter's fused graphs, with one log line when it has a d2t map."""
    problem = gather_problem(proposer)
    d2t = getattr(getattr(proposer, "model", None), "draft_id_to_target_id", None)
    if problem is None:
        logger.info("portable_spec: fused graphs take the argmax over the %d-token draft vocabulary and gather its "
                    "target id through d2t", d2t.shape[0])
        return GATHER
    if d2t is not None:
        logger.info("portable_spec: fused graphs sample as vLLM does (%s)", problem)
    return VLLM


def greedy_draft_tokens(proposer: Any, mode: str, hidden_states: torch.Tensor) -> torch.Tensor:
    """The greedy draft tokens (target ids) for ``hidden_states``, recorded inside a fused graph."""
    if mode != GATHER:
        return proposer._greedy_sample(hidden_states)
    model = proposer.model
    logits = model.logits_processor(model.lm_head, hidden_states)  # compute_logits before its scatter
    best = logits.argmax(dim=-1)
    tokens = best + model.draft_id_to_target_id[best]
    # A row that is -inf throughout: the scattered row's argmax is 0.
    all_inf = logits.gather(-1, best.unsqueeze(-1)).squeeze(-1) == float("-inf")
    return torch.where(all_inf, torch.zeros_like(tokens), tokens)
