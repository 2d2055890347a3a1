"""Our V1 model runner: vLLM's ``GPUModelRunner`` with a drafter whose steady-state forwards replay FULL graphs.

Two hooks, both scoped: while vLLM's ``__init__`` runs, ``EagleProposer`` and ``DFlashProposer`` in the runner
module are our subclasses (the runner builds its drafter by those names); after vLLM's ``capture_model`` the drafter
captures its graphs, at boot, never at request time, and ``v1_warmup`` runs real steps so that the drafter/verify-path
Triton kernels compile then too (the worker activates vLLM's JIT monitor right after).
"""

from __future__ import annotations

import vllm.v1.worker.gpu_model_runner as v1_runner_module
from vllm.v1.worker.gpu_model_runner import GPUModelRunner

from portable_spec.vllm_adapter.overrides import overridden
from portable_spec.vllm_adapter.v1_drafter import DrafterGraphMixin, FullGraphDFlashProposer, FullGraphEagleProposer
from portable_spec.vllm_adapter.v1_warmup import warm_up_kernels


class PortableV1ModelRunner(GPUModelRunner):
    def __init__(self, *args, **kwargs) -> None:
        with (overridden(v1_runner_module, "EagleProposer", FullGraphEagleProposer),
              overridden(v1_runner_module, "DFlashProposer", FullGraphDFlashProposer)):
            super().__init__(*args, **kwargs)

    def capture_model(self) -> int:
        result = super().capture_model()
        drafter = getattr(self, "drafter", None)
        if isinstance(drafter, DrafterGraphMixin):
            drafter.capture_graphs()  # logs one line: graphs, seconds, memory, sizes, failures
        warm_up_kernels(self)  # logs one line: steps, batch sizes, seconds, Triton compiles (or why it is skipped)
        return result
