"""Our V1 model runner: vLLM's ``GPUModelRunner`` with a drafter whose steady-state forwards replay FULL graphs.

Three hooks: while vLLM's ``__init__`` runs (scoped), ``EagleProposer``, ``DFlashProposer`` and
``DraftModelProposer`` in the runner module are our subclasses (the runner builds its drafter by those names); after vLLM's ``capture_model`` the drafter
captures its graphs, at boot, never at request time, ``moe_size_warmup`` runs an MoE target at the token counts it runs
eagerly (its fused-MoE kernel), and ``kernel_warmup`` runs real steps so that the drafter/verify-path Triton kernels
compile then too, and ``structured_warmup`` compiles structured output's bitmask kernel (the worker
activates vLLM's JIT monitor right after), the three in the Triton cache folder the process had when the runner was
built (``triton_cache``: a restart finds them there); and each step's drafting
goes first to the drafter's ``propose_with_prep`` (the runner's draft prep inside the first pass's graph), which
declines, leaving vLLM's ``propose_draft_token_ids`` to run, wherever that is not exact.
"""

from __future__ import annotations

from typing import Any

import vllm.v1.worker.gpu_model_runner as v1_runner_module
from vllm.v1.worker.gpu_model_runner import GPUModelRunner

from portable_spec.envs import triton_cache_dir
from portable_spec.vllm_adapter.patch.overrides import overridden
from portable_spec.vllm_adapter.spec_decode.draft_model import FullGraphDraftModelProposer
from portable_spec.vllm_adapter.spec_decode.draft_prep import DraftPrepMixin
from portable_spec.vllm_adapter.spec_decode.proposer import DrafterGraphMixin, FullGraphDFlashProposer, FullGraphEagleProposer
from portable_spec.vllm_adapter.worker.kernel_warmup import warm_up_kernels
from portable_spec.vllm_adapter.worker.moe_size_warmup import warm_up_moe_sizes
from portable_spec.vllm_adapter.worker.structured_warmup import warm_up_structured_output
from portable_spec.vllm_adapter.worker.triton_cache import serve_in_start_folder


class PortableV1ModelRunner(GPUModelRunner):
    def __init__(self, *args, **kwargs) -> None:
        self.triton_cache_at_start = triton_cache_dir()  # before the model compiles (triton_cache says why)
        with (overridden(v1_runner_module, "EagleProposer", FullGraphEagleProposer),
              overridden(v1_runner_module, "DFlashProposer", FullGraphDFlashProposer),
              overridden(v1_runner_module, "DraftModelProposer", FullGraphDraftModelProposer)):
            super().__init__(*args, **kwargs)

    def propose_draft_token_ids(self, scheduler_output: Any, sampled_token_ids: Any, sampling_metadata: Any,
                                hidden_states: Any, sample_hidden_states: Any, aux_hidden_states: Any,
                                spec_decode_metadata: Any, common_attn_metadata: Any, slot_mappings: Any) -> Any:
        """Our fused first pass with the draft prep inside (``spec_decode.draft_prep``) where it applies; vLLM's otherwise."""
        drafter = getattr(self, "drafter", None)
        if isinstance(drafter, DraftPrepMixin):
            self._draft_probs = self._draft_prob_req_ids = None  # as vLLM's method starts
            drafts = drafter.propose_with_prep(self, scheduler_output, sampled_token_ids, sampling_metadata,
                                               hidden_states, aux_hidden_states, spec_decode_metadata,
                                               common_attn_metadata)
            if drafts is not None:
                return drafts
        return super().propose_draft_token_ids(scheduler_output, sampled_token_ids, sampling_metadata, hidden_states,
                                               sample_hidden_states, aux_hidden_states, spec_decode_metadata,
                                               common_attn_metadata, slot_mappings)

    def capture_model(self) -> int:
        result = super().capture_model()
        drafter = getattr(self, "drafter", None)
        if isinstance(drafter, DrafterGraphMixin):
            drafter.capture_graphs()  # logs one line: graphs, seconds, memory, sizes, failures
        # The warm-ups and the serving after them in the folder a restart looks in (triton_cache says why).
        serve_in_start_folder(self.triton_cache_at_start)
        warm_up_moe_sizes(self)  # an MoE target's eager token counts; one line, never raises
        warm_up_kernels(self)  # one line: steps, batch sizes, seconds, Triton compiles (or why it is skipped)
        warm_up_structured_output(self)  # xgrammar's bitmask kernel for every row class; one line, never raises
        return result
