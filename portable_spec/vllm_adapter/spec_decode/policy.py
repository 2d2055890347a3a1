"""Whether the V1 drafter gets our FULL graphs: one decision, from the environment and the vLLM config.

``PORTABLE_SPEC_DRAFT_GRAPH``: ``full`` (default when our platform is selected), ``piecewise`` or ``none`` (leave the
upstream drafter alone). ``speculative_config.enforce_eager`` and ``disable_padded_drafter_batch`` also leave the
upstream drafter in charge, and so does a config with no capture plan (``plan_state``): one our platform could make
none for (vLLM's sizes were kept, so our drafter has no sizes of its own), or one no planner ran for (vLLM's built-in
platform: our drafter would have to re-plan at capture with fewer inputs than the config hook has), and so does a platform
stack that captures this drafter in FULL graphs itself (vllm-musa with its draft wrap on: ``stack_captures_drafter``).

LoRA (``lora_config`` set) declines every drafter graph kind, because each holds the draft forward. vLLM wraps the
target's modules for LoRA before the drafter loads (``load_lora_model``, then ``drafter.load_model(self.model)``),
and the draft shares the target's embedding where it has none of its own (always for MTP): a LoRA'd embedding
(``VocabParallelEmbeddingWithLoRA``) whose output follows each step's active adapters. vLLM keys its own graphs on
that state (``BatchDescriptor.has_lora``, ``num_active_loras``); our keys carry none of it, so a graph would replay
the adapters of its capture. (The lm_head's LoRA delta is the target's ``LogitsProcessorWithLoRA``, which the draft's
own logits do not run.) A draft holding no LoRA layer would be exact, but no run has shown it: it declines too.
"""

from __future__ import annotations

import logging
from typing import Any

from portable_spec.capture_sizes import METHODS
from portable_spec.envs import DRAFT_GRAPH_ENV
from portable_spec.vllm_adapter.platform import plan_state
from portable_spec.vllm_adapter.platform.drafter_request import requested_mode

logger = logging.getLogger("portable_spec.vllm_adapter")

NO_PLANNER = ("no capture planner ran for this config (it runs in our platform's config hook; vLLM's built-in "
              "platform has none): set VLLM_PLATFORM=cuda for our drafter graphs")


def stack_captures_drafter(method: str) -> str | None:
    """Why the platform's own stack captures this drafter in FULL graphs itself (vllm-musa: ``drafter_left_to_stack``
    on our class composed with it), or None. Two capture mechanisms on one draft model would fight over its forward,
    so ours steps aside there."""
    from vllm.platforms import current_platform

    # Read on the class: vLLM's Platform.__getattr__ logs a warning for a name an instance lacks.
    hook = getattr(type(current_platform), "drafter_left_to_stack", None)
    return hook(method) if callable(hook) else None


def draft_graph_mode(vllm_config: Any) -> str:
    """``full`` when our FULL drafter graphs apply to this config, else ``upstream`` (with the reason logged)."""
    spec = vllm_config.speculative_config
    if spec is None:
        return "upstream"
    mode = requested_mode()
    reason = None
    if mode != "full":
        reason = f"{DRAFT_GRAPH_ENV}={mode}"
    elif spec.method not in METHODS:
        reason = f"method {spec.method!r} (FULL drafter graphs cover {', '.join(METHODS)})"
    elif (captured := stack_captures_drafter(spec.method)) is not None:
        reason = captured
    elif spec.method == "draft_model" and getattr(spec, "use_heterogeneous_vocab", False):
        reason = ("use_heterogeneous_vocab: vLLM maps each draft step's ids between two vocabularies; no run has "
                  "shown our draft-model graphs under that mapping")
    elif spec.enforce_eager:
        reason = "speculative_config.enforce_eager=True"
    elif spec.disable_padded_drafter_batch:
        reason = "disable_padded_drafter_batch=True"
    elif vllm_config.lora_config is not None:
        reason = "LoRA: the draft may share LoRA-wrapped target modules; our graphs are not keyed on adapters"
    elif vllm_config.model_config is not None and vllm_config.model_config.enforce_eager:
        reason = "enforce_eager=True"
    elif not vllm_config.compilation_config.cudagraph_mode.has_full_cudagraphs():
        reason = f"cudagraph_mode={vllm_config.compilation_config.cudagraph_mode.name} has no FULL graphs"
    elif (state := plan_state.read(vllm_config)).plan is None:
        reason = f"no capture plan: {state.plan_error or NO_PLANNER}"
    if reason:
        logger.info("portable_spec: drafter left to upstream vLLM (%s)", reason)
        return "upstream"
    return "full"
