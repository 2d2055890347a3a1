"""vLLM 0.28.0's Model Runner V2 sampled warm-up plan (``mrv2_sampling_plan_028``, issues 40 and 41 item 2): the rounds
cover every sampling-path kernel variant the model says serving reaches, dropping a profile leaves one to the first
request (``tests/test_mrv2_sampling_plan_033.py`` runs both for both plans), the variants vLLM 0.28's own warm-up
misses are in the model, and where 0.28.0's keys differ from 0.33.0's. Pure Python: runs on every vLLM of the span
(``tests/test_vllm_hook_points.py`` holds the model to 0.28.0's kernel sources,
``tests/test_mrv2_sampled_compiles_028.py`` to the Triton keys of its sampler's launches)."""

from __future__ import annotations

import pytest
from test_mrv2_sampling_plan_033 import covered, limits

from portable_spec.vllm_adapter.worker import mrv2_sampling_plan as plan026
from portable_spec.vllm_adapter.worker import mrv2_sampling_plan_028 as plan
from portable_spec.vllm_adapter.worker import mrv2_sampling_plan_033 as plan033
from portable_spec.vllm_adapter.worker.sampling_plan import (
    TOP_K_TOP_P, TOP_P, TOPK_TOPP, TRITON_MIN_ROWS, SamplingLimits,
)
from portable_spec.vllm_adapter.worker.warmup_plan import ONE, OTHER, SIXTEEN, Round, interval_classes


@pytest.mark.parametrize("max_reqs,k", [(256, 3), (256, 1), (4, 3), (4, 1), (2, 3), (1, 3), (64, 7)])
def test_top_k_top_p_is_planned_at_each_class_of_8_rows_and_more(max_reqs, k):
    """``_topk_topp_kernel`` runs from 8 rows (the torch sort below them): a variant per class of 8 rows and more up to
    the most one launch gets, none for one row."""
    lim, sampling = limits(max_reqs, k), SamplingLimits()
    classes = {key[3] for key in plan.reachable_keys(lim, sampling) if key[0] == TOPK_TOPP}
    assert ONE not in classes and classes == interval_classes(TRITON_MIN_ROWS, plan026.max_rows(lim))
    assert classes == {key[3] for key in covered(plan.plan_rounds(lim, sampling)[0], lim, sampling, plan)
                       if key[0] == TOPK_TOPP}


def test_the_variants_vllms_own_warm_up_misses_are_in_the_plan():
    """vLLM 0.28's warm-up: one for_sampler_warmup batch (every request needs processing: FP32 only; top-k AND top-p;
    unseeded: FlashInfer's sampler where it samples; 5 logprobs: a 6-column softmax). The first requests that compile
    more are in the model: issue 41's temperature 0.8 / top-p 0.95 request filters with top-p alone."""
    lim, sampling = limits(), SamplingLimits()
    keys = covered(plan.plan_rounds(lim, sampling)[0], lim, sampling, plan)
    missed = {(plan033.GUMBEL, plan033.MODEL), (plan033.GUMBEL, plan033.FP32),
              (plan033.STATS, plan033.MODEL), (plan033.REJECTION, plan033.MODEL), (plan033.RESAMPLE, plan033.MODEL),
              (plan033.LOG_SOFTMAX, plan033.MODEL, 1, ONE), (plan033.LOG_SOFTMAX, plan033.MODEL, 2, OTHER),
              (plan033.LOG_SOFTMAX, plan033.MODEL, 16, SIXTEEN), (plan033.LOG_SOFTMAX, plan033.MODEL, 32, OTHER),
              (TOPK_TOPP, False, True, OTHER), (TOPK_TOPP, False, True, SIXTEEN),
              (TOPK_TOPP, True, False, OTHER), (TOPK_TOPP, True, False, SIXTEEN)}
    assert missed <= keys and plan033.logprobs_key(5) == (8, OTHER)


def test_where_0_28_differs_from_0_33():
    """0.28.0: ``_topk_topp_kernel`` specializes its row count (16k / other, from 8 rows), the rejection kernels take
    no row count, no draft gather kernel; 0.33.0: one row or more, a row class per rejection kernel, the gather."""
    lim, sampling = limits(), SamplingLimits()
    keys028, keys033 = plan.reachable_keys(lim, sampling), plan033.reachable_keys(lim, sampling)
    assert {(TOPK_TOPP, True, True, SIXTEEN), (plan033.STATS, plan033.FP32)} <= keys028 - keys033
    assert {(TOPK_TOPP, True, True, ONE), (plan033.STATS, plan033.FP32, SIXTEEN), (plan033.GATHER, OTHER)} \
        <= keys033 - keys028
    shared = {key for key in keys028 if key[0] not in (TOPK_TOPP, plan033.STATS)}
    assert shared and shared <= keys033  # the dtype model and the logprobs keys are 0.33.0's


def test_a_greedy_or_temperature_one_batch_keeps_the_model_dtype_and_a_filtered_one_is_fp32():
    lim, sampling = limits(k=3), SamplingLimits()
    greedy = plan.round_keys(Round((5,) * 4, True, profile=plan033.GREEDY_PROFILE), lim, sampling)
    assert {(plan033.GUMBEL, plan033.MODEL), (plan033.REJECTION, plan033.MODEL), (plan033.STATS, plan033.MODEL)} <= greedy
    assert not {key for key in greedy if plan033.FP32 in key}
    top_p = plan.round_keys(Round((5,) * 2, True, profile=TOP_P), lim, sampling)
    assert {(plan033.GUMBEL, plan033.FP32), (plan033.REJECTION, plan033.FP32), (TOPK_TOPP, False, True, OTHER),
            (plan033.TEMPERATURE,)} <= top_p
    assert not {key for key in top_p if plan033.MODEL in key}
    # under 8 rows the filter is torch's sort: no _topk_topp_kernel variant
    one = plan.round_keys(Round((5,), True, profile=TOP_K_TOP_P), lim, sampling)
    assert not {key for key in one if key[0] == TOPK_TOPP}
