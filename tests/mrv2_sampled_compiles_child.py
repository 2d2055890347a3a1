"""Child process of tests/test_mrv2_sampled_compiles_028.py: the Triton compile keys of Model Runner V2's sampler
steps, from vLLM's own ``Sampler`` and ``RejectionSampler`` (vLLM 0.28.0's classes, as the runner builds them:
``v1/worker/gpu/model_runner.py:397-418``) on CPU tensors.

vLLM turns Triton off on a host without a GPU driver; ``enable_vllm_triton`` pins a vLLM platform that is not vLLM's
CPU platform (so ``apply_top_k_top_p`` takes its GPU branch: Triton from 8 rows) and turns Triton back on, so every
kernel launched is vLLM's ``triton.jit`` object. Each launch is recorded, not run (``triton_launch_keys``: Triton's
own binder gives the key a launch compiles by). Outputs are then garbage (nothing ran), which no step here reads
back on the host. The one
other stand-in: ``UvaBuffer`` (pinned host memory seen by the device) is the host tensor itself, as no accelerator
exists here.

Reads a JSON object on stdin: ``vocab``, ``max_reqs``, ``k``, ``logprobs_mode``, ``model_dtype`` and ``steps``, each
``{"verify": bool, "reqs": [[SamplingParams kwargs, logits rows], ...]}`` (``verify``: the rejection sampler, rows
1+drafts per request; else the main sampler, one row each). Prints one JSON line: per step, its sorted keys
(``kernel|specialization|options``).
"""

from __future__ import annotations

import dataclasses
import json
import sys

import numpy as np
import torch

from portable_spec.vllm_adapter.tools.triton_check_worker import enable_vllm_triton

enable_vllm_triton()

from vllm.sampling_params import SamplingParams  # noqa: E402
from vllm.v1.sample.ops import topk_topp_triton  # noqa: E402
from vllm.v1.worker.gpu.input_batch import InputBatch, InputBuffers  # noqa: E402
from vllm.v1.worker.gpu.sample.sampler import Sampler  # noqa: E402
from vllm.v1.worker.gpu.spec_decode.rejection_sampler import RejectionSampler  # noqa: E402
from vllm.v1.worker.gpu.states import RequestState  # noqa: E402

from vllm.v1.worker.gpu import buffer_utils  # noqa: E402

from triton_launch_keys import LAUNCHES, record  # noqa: E402

topk_topp_triton.num_compute_units = lambda device_id=0: 4  # a device query (the grid): not part of a compile key


def host_uva_buffer(self, size, dtype) -> None:
    """``UvaBuffer`` on a host without an accelerator: a device view of pinned host memory is, on the CPU, the host
    tensor itself (no pinned allocator exists here)."""
    self.cpu = torch.zeros(size, dtype=dtype)
    self.np = self.cpu.numpy()
    self.uva = self.cpu


buffer_utils.UvaBuffer.__init__ = host_uva_buffer

def main() -> None:
    ask = json.load(sys.stdin)
    device, vocab, max_reqs, k = torch.device("cpu"), ask["vocab"], ask["max_reqs"], ask["k"]
    model_dtype = getattr(torch, ask["model_dtype"])
    max_tokens = max_reqs * (k + 1) + 1
    req_states = RequestState(max_reqs, 64, max_tokens, k, vocab, device)
    sampler = Sampler(max_reqs, vocab, device, req_states, logprobs_mode=ask["logprobs_mode"],
                      num_speculative_tokens=k + 1)
    spec = type("SpecConfig", (), {"num_speculative_tokens": k, "rejection_sample_method": "standard",
                                   "synthetic_acceptance_rates": None})()
    rejection = RejectionSampler(sampler, spec, device)
    assert not sampler.use_flashinfer, "MUSA's case: no FlashInfer sampler"
    buffers = InputBuffers(max_reqs, max_tokens, device)
    record()
    out = []
    for step in ask["steps"]:
        reqs = step["reqs"]
        for idx, (params, _) in enumerate(reqs):
            sampler.add_request(idx, 4, SamplingParams(**params))
        sampler.apply_staged_writes()
        rows = [r for _, r in reqs]
        num_logits = sum(rows)
        batch = InputBatch.make_dummy(len(reqs), max(num_logits, len(reqs)), buffers)
        cu = np.concatenate([[0], np.cumsum(rows)]).astype(np.int32)
        expanded = np.repeat(np.arange(len(reqs)), rows)
        local = np.concatenate([np.arange(r) for r in rows]).astype(np.int32)
        batch = dataclasses.replace(
            batch, expanded_idx_mapping=torch.from_numpy(expanded).to(torch.int64),
            expanded_local_pos=torch.from_numpy(local), logits_indices=torch.arange(num_logits),
            cu_num_logits=torch.from_numpy(cu), cu_num_logits_np=cu, num_draft_tokens=num_logits - len(reqs))
        logits = torch.randn(num_logits, vocab).to(model_dtype)
        LAUNCHES.clear()
        if step["verify"]:
            rejection(logits, batch, None)
        else:
            assert num_logits == len(reqs)
            sampler(logits, batch)
        out.append(sorted(set(LAUNCHES)))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
