"""The warm-up compiles vLLM's batch-change correction for every size class serving reaches, so a request joining or
leaving a running decode compiles nothing (``worker/batch_change_warmup.py``). vLLM's own function is compiled here
as vLLM compiles it (``dynamic=True``) with a counting backend; the runner's buffers are vLLM's ``CpuGpuBuffer``s of
vLLM's dtypes, made outside inference mode as the runner's ``__init__`` makes them; each serving call is built the
way ``GPUModelRunner._prepare_inputs`` builds it. The H200 join probe saw the pause this guards against
(``bench/results/2026-11-28-h200-session18``)."""

from __future__ import annotations

import inspect
from types import SimpleNamespace

import pytest
import torch

from portable_spec.vllm_adapter.worker.batch_change_warmup import batch_change_fn, size_pairs, warm_batch_change

MAX_NUM_REQS = 8
JOIN_AND_LEAVE = [(1, 1), (2, 1), (2, 2), (3, 2), (2, 3), (1, 2), (1, 1), (8, 8), (5, 8)]
"""(requests, previous requests) as serving meets them: one decoding, a second joins, a third, one leaves, ..."""


def runner(max_num_reqs: int = MAX_NUM_REQS, async_spec: bool = True) -> SimpleNamespace:
    from vllm.v1.utils import CpuGpuBuffer

    with torch.inference_mode(False):
        def buffer(dtype: torch.dtype) -> CpuGpuBuffer:
            return CpuGpuBuffer(max_num_reqs, dtype=dtype, device=torch.device("cpu"), pin_memory=False)

        return SimpleNamespace(
            use_async_spec_decode=async_spec, max_num_reqs=max_num_reqs,
            num_computed_tokens=torch.zeros(max_num_reqs, dtype=torch.int32),
            num_accepted_tokens=buffer(torch.int32), prev_positions=buffer(torch.int64),
            prev_num_draft_tokens=buffer(torch.int32),
            input_batch=SimpleNamespace(num_computed_tokens_cpu_tensor=torch.zeros(max_num_reqs, dtype=torch.int32)))


def counting_fn() -> tuple[object, list]:
    """vLLM's correction compiled as vLLM compiles it, with a backend that counts the graphs Dynamo builds."""
    from vllm.v1.spec_decode import utils

    graphs: list = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    return torch.compile(utils.update_num_computed_tokens_for_batch_change._torchdynamo_orig_callable,
                         dynamic=True, backend=backend), graphs


def fresh_counts(size: int) -> torch.Tensor:
    with torch.inference_mode():  # made each step by the sampler / drafter, as vLLM's step makes it
        return torch.ones(size, dtype=torch.int32)


def serve(fn: object, r: SimpleNamespace, pairs: list[tuple[int, int]]) -> int:
    """vLLM's call for each step, as ``_prepare_inputs`` makes it; returns how many calls were made."""
    with torch.inference_mode():
        for num_reqs, prev_reqs in pairs:
            fn(r.num_computed_tokens, r.num_accepted_tokens.gpu[:num_reqs], r.prev_positions.gpu[:num_reqs],
               fresh_counts(prev_reqs), r.prev_num_draft_tokens.gpu,
               r.input_batch.num_computed_tokens_cpu_tensor[:num_reqs].to(device="cpu", non_blocking=True))
    return len(pairs)


def test_after_the_warm_up_joining_and_leaving_compile_nothing():
    fn, graphs = counting_fn()
    r = runner()
    with torch.inference_mode():
        pairs = warm_batch_change(r, fresh_counts(2), fn)
    assert pairs == [(1, 1), (1, 2), (2, 1), (2, 2)]
    warmed = len(graphs)
    assert warmed == 4, graphs
    assert serve(fn, r, JOIN_AND_LEAVE) == len(JOIN_AND_LEAVE)
    assert len(graphs) == warmed, f"{len(graphs) - warmed} compile(s) during serving after the warm-up"
    torch._dynamo.reset()


def test_without_the_warm_up_serving_compiles_once_per_class():
    """What the warm-up removes: the steps where a request joins or leaves compile (the join probe's pause)."""
    fn, graphs = counting_fn()
    r = runner()
    with torch.inference_mode():  # the warm-up's own steps reach only equal sizes
        warm_batch_change(r, fresh_counts(2), lambda *args: None)
    serve(fn, r, [(1, 1), (2, 2)])
    before = len(graphs)
    serve(fn, r, JOIN_AND_LEAVE)
    assert len(graphs) - before == 2  # (2, 1) and (1, 2): a join and a leave, each compiled mid-serving
    torch._dynamo.reset()


def test_scratch_tensors_match_the_runners_kinds_and_leave_its_buffers_alone():
    r = runner()
    r.num_computed_tokens[:] = 5
    seen: list = []
    with torch.inference_mode():
        warm_batch_change(r, fresh_counts(3), lambda *args: seen.append(args))
    assert len(seen) == 4
    for args in seen:
        computed, accepted, positions, counts, drafts, cpu_values = args
        assert not computed.is_inference() and computed.dtype == torch.int32 and computed.shape == (MAX_NUM_REQS,)
        assert computed.data_ptr() != r.num_computed_tokens.data_ptr()
        assert not accepted.is_inference() and not positions.is_inference() and not drafts.is_inference()
        assert positions.dtype == torch.int64 and counts.is_inference() and counts.dtype == torch.int32
        assert accepted.shape == positions.shape == cpu_values.shape
    assert int(r.num_computed_tokens.sum()) == 5 * MAX_NUM_REQS


@pytest.mark.parametrize("case", ["sync", "no_counts", "one_request"])
def test_calls_only_what_vllm_would_call(case):
    calls: list = []
    r = runner(max_num_reqs=1 if case == "one_request" else MAX_NUM_REQS, async_spec=case != "sync")
    with torch.inference_mode():
        pairs = warm_batch_change(r, None if case == "no_counts" else fresh_counts(1), lambda *a: calls.append(a))
    expected = [(1, 1)] if case == "one_request" else []
    assert pairs == expected and len(calls) == len(expected)
    assert size_pairs(1) == [(1, 1)] and size_pairs(4) == [(1, 1), (1, 2), (2, 1), (2, 2)]


def test_vllms_runner_calls_the_function_with_the_buffers_we_mirror():
    """Fails if vLLM moves: the function the runner calls, and each argument the warm-up mirrors."""
    from vllm.v1.worker import gpu_model_runner

    fn = batch_change_fn()
    assert fn is not None and hasattr(fn, "_torchdynamo_orig_callable")
    source = inspect.getsource(gpu_model_runner.GPUModelRunner._prepare_inputs)
    call = source[source.index("update_num_computed_tokens_for_batch_change("):]
    call = call[:call.index(")\n") + 1]
    for argument in ("self.num_computed_tokens", "self.num_accepted_tokens.gpu[:num_reqs]",
                     "self.prev_positions.gpu[:num_reqs]", "self.valid_sampled_token_count_gpu",
                     "self.prev_num_draft_tokens.gpu", "cpu_values"):
        assert argument in call, (argument, call)
    assert "num_computed_tokens_cpu_tensor[:num_reqs].to(" in source
    assert "self.use_async_spec_decode" in source
