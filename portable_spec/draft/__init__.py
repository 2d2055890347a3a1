"""The one per-step FULL draft-graph runner every engine uses: keys that carry the query length (``dispatcher``),
capture / replay / live-graph budget / per-key eager fallback / cross-rank agreement (``runner``), the capture log
line (``capture_log``). No vLLM import here; vLLM's drafters reach it through ``portable_spec.vllm_adapter``."""

from portable_spec.draft.dispatcher import BLOCK, CHAIN, CHAIN_FUSED, FIRST, FIRST_FUSED, DraftDispatcher, DraftKey
from portable_spec.draft.runner import (
    CaptureReport, CapturedStep, DraftGraphRunner, DraftGraphWarning, DraftStepSource, StepCall, live_graphs,
)

__all__ = ["BLOCK", "CHAIN", "CHAIN_FUSED", "FIRST", "FIRST_FUSED", "CaptureReport", "CapturedStep", "DraftDispatcher",
           "DraftGraphRunner", "DraftGraphWarning", "DraftKey", "DraftStepSource", "StepCall", "live_graphs"]
