"""What our fused first pass hands to vLLM's runner for its next step must be the kind of tensor vLLM's own step
leaves there (an inference tensor): ``torch.compile`` guards on a tensor's dispatch keys, and vLLM's compiled
``update_num_computed_tokens_for_batch_change`` reads the handed-off valid counts every step under async
speculative decoding. A normal tensor one step and vLLM's the next compiles it again during serving: the one-off
pause the join probe found on the H200 (``bench/results/2026-11-28-h200-session17``)."""

from __future__ import annotations

import pytest
import torch
from test_v1_drafter_logic import capturing, draft_both_ways, vllm_kernels  # noqa: F401 - fixtures

from portable_spec.draft.dispatcher import CHAIN_FUSED, FIRST_FUSED
from portable_spec.vllm_adapter.spec_decode.draft_prep import inference_alias


def test_an_inference_alias_is_an_inference_tensor_over_the_same_memory():
    with torch.inference_mode(False):
        buffer = torch.zeros(8, dtype=torch.int32)
    alias = inference_alias(buffer)
    assert alias.is_inference() and not buffer.is_inference()
    assert alias.data_ptr() == buffer.data_ptr() and alias.shape == buffer.shape
    buffer[3] = 7  # a replay (or any writer outside inference mode) writes the buffer; the alias sees it
    assert alias[3].item() == 7 and alias[:5].is_inference()


def compiles_of_vllms_correction(handed_counts: list[torch.Tensor]) -> int:
    """How many graphs Dynamo builds for vLLM's own ``update_num_computed_tokens_for_batch_change`` (as vLLM
    compiles it: ``dynamic=True``) over steps whose handed-off valid counts are ``handed_counts``."""
    from vllm.v1.spec_decode import utils

    graphs = []

    def counting(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    compiled = torch.compile(utils.update_num_computed_tokens_for_batch_change._torchdynamo_orig_callable,
                             dynamic=True, backend=counting)
    with torch.inference_mode():
        computed, accepted = torch.zeros(16, dtype=torch.int32), torch.zeros(4, dtype=torch.int32)
        for counts in handed_counts:
            n = 4
            compiled(computed, accepted[:n], torch.arange(n, dtype=torch.int32), counts,
                     torch.ones(16, dtype=torch.int32), torch.full((n,), 9, dtype=torch.int32))
    torch._dynamo.reset()
    return len(graphs)


def test_vllms_compiled_correction_compiles_once_for_vllms_counts_and_ours():
    with torch.inference_mode(False):
        buffer = torch.ones(16, dtype=torch.int32)
    with torch.inference_mode():
        vllms = [torch.ones(4, dtype=torch.int32) for _ in range(2)]  # fresh each step, as vLLM's step makes them
    assert compiles_of_vllms_correction([vllms[0], inference_alias(buffer)[:4], vllms[1]]) == 1
    # The bug this guards against: a normal tensor handed off compiles the function a second time.
    assert compiles_of_vllms_correction([vllms[0], buffer[:4], vllms[1]]) == 2


def test_the_fused_first_pass_hands_off_inference_tensors(capturing, monkeypatch):
    import portable_spec.vllm_adapter.spec_decode.draft_prep as draft_prep

    handed = []
    original = draft_prep.hand_off_counts

    def recording(runner, next_tokens, counts):
        handed.append((next_tokens.is_inference(), counts.is_inference()))
        return original(runner, next_tokens, counts)

    monkeypatch.setattr(draft_prep, "hand_off_counts", recording)
    ours, _ = draft_both_ways(capturing, 4)
    assert ours.replays[FIRST_FUSED] == 1 and ours.replays[CHAIN_FUSED] >= 1
    assert handed == [(True, True)]
