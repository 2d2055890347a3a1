"""Per-step FULL draft graphs, engine-agnostic: keys that carry the query length (``dispatcher``), static buffers
(``buffers``), the capture/replay runner on the platform port (``runner``), graph-vs-eager parity (``parity``),
synthetic EAGLE/DFlash steps (``synthetic``) and the draft micro-benchmark (``bench``). No vLLM import here."""

from portable_spec.draft.buffers import DraftModel, DraftOutputs, StaticInput
from portable_spec.draft.dispatcher import CHAIN, FIRST, DraftDispatcher, DraftKey
from portable_spec.draft.runner import DraftGraphRunner, DraftGraphWarning

__all__ = ["CHAIN", "FIRST", "DraftDispatcher", "DraftGraphRunner", "DraftGraphWarning", "DraftKey", "DraftModel",
           "DraftOutputs", "StaticInput"]
