"""vLLM 0.33.0's Model Runner V2 sampled warm-up plan (``mrv2_sampling_plan_033``, issue 41 item 2): the rounds cover
every sampling-path kernel variant the model says serving reaches and dropping a profile leaves one to the first
request (both for 0.28.0's plan too, which plans on the same profiles), and the variants vLLM 0.33's own warm-up
misses are in the model. Pure Python: runs on every vLLM of the span (``tests/test_vllm_hook_points.py`` holds the model to 0.33.0's kernel sources)."""

from __future__ import annotations

import pytest

from portable_spec.vllm_adapter.worker import mrv2_sampling_plan_028 as plan028
from portable_spec.vllm_adapter.worker import mrv2_sampling_plan_033 as plan
from portable_spec.vllm_adapter.worker.sampling_plan import TOP_K, TOP_P, TOPK_TOPP, SamplingLimits
from portable_spec.vllm_adapter.worker.warmup_plan import ONE, OTHER, SIXTEEN, Limits, Round


def limits(max_reqs=256, k=3, max_tokens=8192, free_blocks=4096) -> Limits:
    return Limits(max_reqs=max_reqs, max_tokens=max_tokens, max_len=4096, k=k, dflash=False,
                  block_sizes=(16,), free_blocks=free_blocks)


def covered(rounds, lim, sampling, model=plan) -> frozenset:
    return frozenset().union(*(model.round_keys(r, lim, sampling) for r in rounds))


@pytest.mark.parametrize("model", [plan, plan028])
@pytest.mark.parametrize("max_reqs,k,sampling", [
    (256, 3, SamplingLimits()), (256, 1, SamplingLimits()), (4, 3, SamplingLimits()), (1, 3, SamplingLimits()),
    (2, 2, SamplingLimits(logprobs=False, max_logprobs=0)), (64, 7, SamplingLimits(max_logprobs=-1)),
    (256, 3, SamplingLimits(logprobs_mode="processed_logprobs")), (256, 3, SamplingLimits(logprobs_mode="raw_logits")),
    (16, 2, SamplingLimits(block_verification=True, max_logprobs=5)), (4, 1, SamplingLimits()),
    (8, 2, SamplingLimits()), (6, 4, SamplingLimits(block_verification=True)),
])
def test_the_plan_covers_every_reachable_sampling_variant(model, max_reqs, k, sampling):
    """0.33.0's plan and 0.28.0's (``mrv2_sampling_plan_028``, on the same profiles and candidates)."""
    lim = limits(max_reqs, k)
    rounds, uncovered = model.plan_rounds(lim, sampling)
    goal = model.reachable_keys(lim, sampling)
    assert not uncovered and goal <= covered(rounds, lim, sampling, model) and len(goal) >= 10
    assert all(r.fits(lim) for r in rounds) and len(rounds) <= 30


def test_the_variants_vllms_own_warm_up_misses_are_in_the_plan():
    """vLLM 0.33's warm-up: one for_sampler_warmup batch (unseeded: FlashInfer's sampler where it samples; 5 logprobs:
    a 6-column softmax) and one greedy batch. The first requests that compile more are in the model."""
    lim, sampling = limits(), SamplingLimits()
    keys = covered(plan.plan_rounds(lim, sampling)[0], lim, sampling)
    missed = {(plan.GUMBEL, plan.FP32),  # a seeded sampled request, on a FlashInfer platform
              (plan.LOG_SOFTMAX, plan.MODEL, 1, ONE), (plan.LOG_SOFTMAX, plan.MODEL, 2, OTHER),
              (plan.LOG_SOFTMAX, plan.MODEL, 16, SIXTEEN), (plan.LOG_SOFTMAX, plan.MODEL, 32, OTHER),
              (plan.STATS, plan.FP32, SIXTEEN), (plan.STATS, plan.FP32, OTHER),
              (plan.STATS, plan.MODEL, SIXTEEN), (plan.STATS, plan.MODEL, OTHER),
              (TOPK_TOPP, False, True, ONE), (TOPK_TOPP, True, False, plan.MANY)}  # MUSA: no registry
    assert missed <= keys and plan.logprobs_key(5) == (8, OTHER)
    assert {plan.logprobs_key(c) for c in plan.logprobs_counts(sampling)} == {
        (1, ONE), (2, OTHER), (4, OTHER), (8, OTHER), (16, OTHER), (16, SIXTEEN), (32, OTHER)}


def test_a_greedy_or_temperature_one_batch_keeps_the_model_dtype_and_a_filtered_one_is_fp32():
    lim, sampling = limits(k=3), SamplingLimits()
    greedy = plan.round_keys(Round((5,) * 4, True, profile=plan.GREEDY_PROFILE), lim, sampling)
    assert {(plan.GUMBEL, plan.MODEL), (plan.REJECTION, plan.MODEL), (plan.STATS, plan.MODEL, SIXTEEN)} <= greedy
    assert not {key for key in greedy if plan.FP32 in key}
    top_p = plan.round_keys(Round((5,), True, profile=TOP_P), lim, sampling)
    assert {(plan.GUMBEL, plan.FP32), (plan.REJECTION, plan.FP32), (TOPK_TOPP, False, True, ONE),
            (TOPK_TOPP, False, True, plan.MANY), (plan.TEMPERATURE,)} <= top_p
    assert not {key for key in top_p if plan.MODEL in key}


@pytest.mark.parametrize("model,dropped,missing", [
    (plan, (TOP_P,), (TOPK_TOPP, False, True, ONE)),
    (plan, (plan.MIN_P_PROFILE,), (plan.MIN_P,)),
    (plan, tuple(p for p in plan.profiles(SamplingLimits()) if p.startswith(plan.GREEDY_PROFILE)),
     (plan.REJECTION, plan.MODEL)),
    (plan, (plan.logprobs_profile(plan.GREEDY_PROFILE, 15), plan.logprobs_profile(plan.TEMPERATURE_ONLY, 15)),
     (plan.LOG_SOFTMAX, plan.MODEL, 16, SIXTEEN)),
    # vLLM 0.28.0's model (mrv2_sampling_plan_028) on the same profiles: its top-k/top-p rows are 8 and more
    (plan028, (TOP_P,), (TOPK_TOPP, False, True, SIXTEEN)),
    (plan028, (TOP_K,), (TOPK_TOPP, True, False, OTHER)),
    (plan028, (plan.MIN_P_PROFILE,), (plan.MIN_P,)),
    (plan028, tuple(p for p in plan.profiles(SamplingLimits()) if p.startswith(plan.GREEDY_PROFILE)),
     (plan.REJECTION, plan.MODEL)),
    (plan028, (plan.logprobs_profile(plan.GREEDY_PROFILE, 15), plan.logprobs_profile(plan.TEMPERATURE_ONLY, 15)),
     (plan.LOG_SOFTMAX, plan.MODEL, 16, SIXTEEN)),
])
def test_dropping_a_profile_leaves_a_kernel_variant_uncovered(model, dropped, missing):
    """The test bites: without those profiles a variant serving reaches is left to the first request."""
    lim, sampling = limits(), SamplingLimits()
    assert missing in model.reachable_keys(lim, sampling)
    _, uncovered = model.plan_rounds(lim, sampling, dropped)
    assert missing in uncovered


@pytest.mark.parametrize("model", [plan, plan028])
def test_a_kv_cache_too_small_for_any_round_plans_nothing_and_says_what_is_left(model):
    rounds, uncovered = model.plan_rounds(limits(free_blocks=0), SamplingLimits())
    assert not rounds and uncovered == model.reachable_keys(limits(), SamplingLimits())
