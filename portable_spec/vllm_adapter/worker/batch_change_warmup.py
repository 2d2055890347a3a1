"""Boot-time compile of vLLM's batch-change correction, so a request joining or leaving a running decode does not
pause the engine while Dynamo compiles.

Why: under async speculative decoding, vLLM's V1 step corrects ``num_computed_tokens`` on the device with
``update_num_computed_tokens_for_batch_change`` (``vllm/v1/spec_decode/utils.py``), a ``torch.compile(dynamic=True)``
function that the runner calls once the previous step had requests. Dynamo specializes a size of 1, so the function
has one graph for each of (this step's requests, the previous step's requests) in {1, >= 2} x {1, >= 2}, and vLLM
compiles each the first time serving reaches it: a second request joining one running decode is (2, 1), the first
leaving is (1, 2). The engine core thread stops for the compile (100-750 ms on an H200, more on a cold cache); vLLM's
JIT monitor, which watches Triton, does not see it. The warm-up's own steps reach only (1, 1) and (2, 2).

So after the warm-up's steps, ``warm_batch_change`` calls vLLM's own function (the object ``gpu_model_runner``
calls) once per size class, on scratch tensors that match what the runner passes in dtype, device, and whether
each one is an inference tensor (Dynamo guards on all three). It writes only into those scratch tensors.
"""

from __future__ import annotations

import itertools
from typing import Any

import torch

SIZE_CLASSES = (1, 2)
"""One batch size per class Dynamo tells apart: 1 (specialized) and any larger size (symbolic)."""


def batch_change_fn() -> Any | None:
    """The compiled function as vLLM's V1 runner calls it (the name ``gpu_model_runner`` imported), or None where
    this vLLM has none."""
    from vllm.v1.worker import gpu_model_runner

    return getattr(gpu_model_runner, "update_num_computed_tokens_for_batch_change", None)


def size_pairs(max_num_reqs: int) -> list[tuple[int, int]]:
    """(this step's requests, the previous step's requests) for every class pair the engine can reach."""
    sizes = [s for s in SIZE_CLASSES if s <= max_num_reqs]
    return list(itertools.product(sizes, sizes))


def _like(tensor: torch.Tensor, size: int | None = None) -> torch.Tensor:
    """A zeroed scratch tensor of ``tensor``'s dtype and device (``size`` elements, else its shape), an inference
    tensor exactly when ``tensor`` is one."""
    shape = tensor.shape if size is None else (size,)
    with torch.inference_mode(tensor.is_inference()):
        return torch.zeros(shape, dtype=tensor.dtype, device=tensor.device)


def warm_batch_change(runner: Any, valid_counts: torch.Tensor | None, fn: Any | None = None) -> list[tuple[int, int]]:
    """Call vLLM's batch-change correction for every size-class pair (``size_pairs``) on scratch copies of the
    runner's buffers; returns the pairs called (none where vLLM would never call it: no async speculative decode,
    no valid counts from a step, or no such function). ``valid_counts``: the tensor the last warm-up step left as
    ``runner.valid_sampled_token_count_gpu`` (its dtype and kind are what serving hands over). Call it inside the
    warm-up's ``torch.inference_mode``, as vLLM's step runs."""
    fn = batch_change_fn() if fn is None else fn
    if fn is None or valid_counts is None or not getattr(runner, "use_async_spec_decode", False):
        return []
    computed = _like(runner.num_computed_tokens)
    accepted = _like(runner.num_accepted_tokens.gpu)
    positions = _like(runner.prev_positions.gpu)
    drafts = _like(runner.prev_num_draft_tokens.gpu)
    cpu_values = runner.input_batch.num_computed_tokens_cpu_tensor
    pairs = size_pairs(int(runner.max_num_reqs))
    for num_reqs, prev_reqs in pairs:
        counts = _like(valid_counts, prev_reqs)
        fresh = cpu_values[:num_reqs].to(device=computed.device, non_blocking=True)  # read only, as vLLM does
        fn(computed, accepted[:num_reqs], positions[:num_reqs], counts, drafts, fresh)
    return pairs
