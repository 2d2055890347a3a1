"""The capture-size planner: hand-computed plans, every user-facing error, pruning, and properties checked against
vLLM 0.26.0's own size code (``VllmConfig._set_cudagraph_sizes`` and ``adjust_cudagraph_sizes_for_spec_decode``)."""

from __future__ import annotations

import functools
import json
import logging
import subprocess
import sys
import types

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from portable_spec.capture_sizes import (
    CapturePlan,
    StepPlan,
    plan_capture_sizes,
    vllm_default_ladder,
    vllm_default_max_capture_size,
    vllm_spec_decode_sizes,
)
from portable_spec.envs import TORCHADA_DEFAULT_EXEC_CAP
from version_span import needs

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ---------------------------------------------------------------- vLLM's rules, checked against vLLM itself


def pass_config(sp: bool):
    """vLLM's PassConfig with sequence parallelism on or off. vLLM 0.33 has no sequence-parallelism pass (no
    ``PassConfig.enable_sp``, no SP size filter): there only ``sp=False`` exists, and hypothesis drops the rest."""
    from vllm.config import PassConfig

    from portable_spec.vllm_adapter.patch import version_gate

    has_sp_pass = version_gate.pick({"0.26.0": True, "0.33.0": False})
    assume(has_sp_pass or not sp)
    return PassConfig(enable_sp=sp) if has_sp_pass else PassConfig()


def adjust_for_spec_decode(cc, uniform_decode_query_len: int, tp: int) -> None:
    """vLLM's ``adjust_cudagraph_sizes_for_spec_decode`` (0.33 dropped its ``tensor_parallel_size``: no SP pass)."""
    from portable_spec.vllm_adapter.patch import version_gate

    args = version_gate.pick({"0.26.0": (uniform_decode_query_len, tp), "0.33.0": (uniform_decode_query_len,)})
    cc.adjust_cudagraph_sizes_for_spec_decode(*args)


@functools.lru_cache(maxsize=None)
def _parallel_config(tp: int):
    from vllm.config import ParallelConfig

    return ParallelConfig(tensor_parallel_size=tp)


def vllm_set_cudagraph_sizes(num_spec: int, max_num_seqs: int, *, max_capture_size: int | None = None,
                             user_sizes: list[int] | None = None, tp: int = 1, sp: bool = False):
    """Run vLLM's real ``VllmConfig._set_cudagraph_sizes`` on real sub-configs; returns the CompilationConfig.

    Only ``self`` is a namespace: a real VllmConfig needs a model checkpoint, and this method reads nothing else
    from the model config than ``enforce_eager``.
    """
    from vllm.config import CompilationConfig, PassConfig, SchedulerConfig, VllmConfig
    from vllm.config.compilation import CUDAGraphMode

    given_sizes = {} if user_sizes is None else {"cudagraph_capture_sizes": user_sizes}
    cc = CompilationConfig(cudagraph_mode=CUDAGraphMode.FULL_DECODE_ONLY, pass_config=pass_config(sp),
                           max_cudagraph_capture_size=max_capture_size, **given_sizes)
    sched = SchedulerConfig(max_num_seqs=max_num_seqs, max_num_batched_tokens=1 << 16, max_model_len=1 << 16,
                            is_encoder_decoder=False)
    self = types.SimpleNamespace(model_config=types.SimpleNamespace(enforce_eager=False), compilation_config=cc,
                                 scheduler_config=sched, parallel_config=_parallel_config(tp),
                                 performance_mode="balanced", num_speculative_tokens=num_spec,
                                 uniform_decode_query_len=1 + num_spec, speculative_config=None)  # 0.33 reads both
    if hasattr(VllmConfig, "update_sizes_for_sequence_parallelism"):  # gone with 0.33's SP pass
        self.update_sizes_for_sequence_parallelism = types.MethodType(
            VllmConfig.update_sizes_for_sequence_parallelism, self)
    VllmConfig._set_cudagraph_sizes(self)
    return cc


def test_default_ladder_examples():
    assert vllm_default_ladder(0) == []
    assert vllm_default_ladder(1) == [1]
    assert vllm_default_ladder(7) == [1, 2, 4]
    assert vllm_default_ladder(16) == [1, 2, 4, 8, 16]
    assert vllm_default_ladder(300)[-6:] == [232, 240, 248, 256, 272, 288]
    assert vllm_default_max_capture_size(8, 8) == 144
    assert vllm_default_max_capture_size(3, 4) == 32
    assert vllm_default_max_capture_size(3, 256) == 512


@settings(max_examples=60, deadline=None)
@given(num_spec=st.integers(0, 12), max_num_seqs=st.integers(1, 300),
       max_capture_size=st.none() | st.integers(1, 700))
@needs("planner_mirrors_vllm_sizes")
def test_ladder_and_default_max_match_vllm(vllm_platform, num_spec, max_num_seqs, max_capture_size):
    cc = vllm_set_cudagraph_sizes(num_spec, max_num_seqs, max_capture_size=max_capture_size)
    cap = max_capture_size or vllm_default_max_capture_size(num_spec, max_num_seqs)
    assert cc.cudagraph_capture_sizes == vllm_default_ladder(cap)


@settings(max_examples=200, deadline=None)
@given(sizes=st.lists(st.integers(1, 600), min_size=1, max_size=12, unique=True), max_size=st.integers(1, 600),
       num_spec=st.integers(0, 9), tp=st.sampled_from([1, 2, 3, 4, 8]), sp=st.booleans())
def test_spec_decode_rounding_matches_vllm(vllm_platform, sizes, max_size, num_spec, tp, sp):
    from vllm.config import CompilationConfig, PassConfig

    sizes = sorted(s for s in sizes if s <= max_size) or [max_size]
    cc = CompilationConfig(cudagraph_capture_sizes=sizes, max_cudagraph_capture_size=sizes[-1],
                           pass_config=pass_config(sp))
    try:
        adjust_for_spec_decode(cc, 1 + num_spec, tp)
    except ValueError:
        with pytest.raises(ValueError) as ours:
            vllm_spec_decode_sizes(sizes, sizes[-1], 1 + num_spec, tp, sp)
        assert "\n" not in str(ours.value) and ": " in str(ours.value)
        return
    assert vllm_spec_decode_sizes(sizes, sizes[-1], 1 + num_spec, tp, sp) == cc.cudagraph_capture_sizes


@settings(max_examples=80, deadline=None)
@given(method=st.sampled_from(["eagle", "mtp", "draft_model"]), num_spec=st.integers(1, 9),
       max_num_seqs=st.integers(1, 300),
       tp=st.sampled_from([1, 2, 4, 8]), sp=st.booleans())
@example(method="eagle", num_spec=2, max_num_seqs=1, tp=8, sp=True)  # SP leaves vLLM nothing; 3 and 8 incompatible
@example(method="eagle", num_spec=1, max_num_seqs=1, tp=8, sp=True)  # SP leaves vLLM nothing; 2 divides 8
@needs("planner_mirrors_vllm_sizes")
def test_eagle_target_sizes_equal_vllms_own_pipeline(vllm_platform, method, num_spec, max_num_seqs, tp, sp):
    """With the max vLLM hands our hook (after _set_cudagraph_sizes), the verify sizes are exactly vLLM's."""
    cc = vllm_set_cudagraph_sizes(num_spec, max_num_seqs, tp=tp, sp=sp)
    hook_max = cc.max_cudagraph_capture_size
    kwargs = dict(tp=tp, sp=sp, require_full_draft=False)  # compare the target list only
    if not cc.cudagraph_capture_sizes:  # SP left vLLM nothing to capture: we say so instead
        # Where 1+K and TP do not divide one another, the planner's first rule (vLLM's spec-decode check) names
        # that; otherwise the sequence-parallel filter names the missing multiple of TP.
        q = 1 + num_spec
        incompatible = sp and tp > 1 and max(q, tp) % min(q, tp) != 0
        match = (r"multiples of both 1\+num_speculative_tokens" if incompatible
                 else "is a multiple of tensor_parallel_size")
        with pytest.raises(ValueError, match=match):
            plan_capture_sizes(method, num_spec, max_num_seqs, **kwargs)
        return
    try:
        adjust_for_spec_decode(cc, 1 + num_spec, tp)
    except ValueError:
        with pytest.raises(ValueError):
            plan_capture_sizes(method, num_spec, max_num_seqs, max_capture_size=hook_max, **kwargs)
        return
    plan = plan_capture_sizes(method, num_spec, max_num_seqs, max_capture_size=hook_max, **kwargs)
    assert list(plan.target_sizes) == cc.cudagraph_capture_sizes
    assert plan.max_capture_size == cc.max_cudagraph_capture_size


@settings(max_examples=80, deadline=None)
@given(method=st.sampled_from(["eagle", "eagle3", "mtp", "dflash", "draft_model"]), num_spec=st.integers(1, 9),
       max_num_seqs=st.integers(1, 300), max_capture_size=st.none() | st.integers(2, 600),
       tp=st.sampled_from([1, 2, 4]), sp=st.booleans())
def test_planned_sizes_survive_vllm_unchanged(vllm_platform, method, num_spec, max_num_seqs, max_capture_size, tp,
                                              sp):
    """Written into vLLM's config, our list passes _set_cudagraph_sizes and the spec-decode rounding untouched."""
    kw = dict(method=method, num_spec=num_spec, max_num_seqs=max_num_seqs, max_capture_size=max_capture_size, tp=tp,
              sp=sp, live_graph_limit=None, user_sizes=None, graphs_per_target_size=1, require_full_draft=True)
    plan = plan_or_none(kw)
    if plan is None:
        return
    sizes = list(plan.target_sizes)
    cc = vllm_set_cudagraph_sizes(num_spec, max_num_seqs, user_sizes=sizes, max_capture_size=sizes[-1], tp=tp,
                                  sp=sp)
    adjust_for_spec_decode(cc, 1 + num_spec, tp)
    assert cc.cudagraph_capture_sizes == sizes
    assert cc.max_cudagraph_capture_size == sizes[-1]


# ---------------------------------------------------------------- hand-computed plans


def test_dflash_k8_is_block_aligned():
    plan = plan_capture_sizes("dflash", 8, 8)  # default max capture size min(8 * 9 * 2, 512) = 144
    assert plan.target_sizes == (9, 18, 36, 72)
    assert plan.first_step == StepPlan(query_len=9, sizes=(9, 18, 36, 72), mode="FULL")
    assert [plan.first_step.num_reqs(s) for s in plan.first_step.sizes] == [1, 2, 4, 8]
    assert plan.chain_step is None
    assert plan.max_capture_size == 72
    assert plan.live_graphs == 8 and plan.warnings == ()


def test_eagle_k3_by_hand():
    # max = min(4 * 4 * 2, 512) = 32; ladder [1, 2, 4, 8, 16, 24, 32] rounded up to multiples of 4, <= 32.
    plan = plan_capture_sizes("eagle", 3, 4)
    assert plan.target_sizes == (4, 8, 16, 24, 32)
    # First step: uniform verify keys in [1+K, (1+K) * max_num_seqs] = [4, 16].
    assert plan.first_step == StepPlan(query_len=4, sizes=(4, 8, 16), mode="FULL")
    # Chain steps: one token per request, batch sizes on the ladder up to max_num_seqs = 4.
    assert plan.chain_step == StepPlan(query_len=1, sizes=(1, 2, 4), mode="FULL")
    assert plan.live_graphs == 5 + 3 + 3
    assert plan.max_capture_size == 32


def test_mtp_k2_by_hand():
    # max = min(2 * 3 * 2, 512) = 12; ladder [1, 2, 4, 8] -> multiples of 3: [3, 3, 6, 9].
    plan = plan_capture_sizes("mtp", 2, 2)
    assert plan.target_sizes == (3, 6, 9)
    assert plan.first_step.sizes == (3, 6)
    assert plan.chain_step.sizes == (1, 2)
    assert plan.live_graphs == 7


def test_k1_has_no_chain_step():
    plan = plan_capture_sizes("eagle3", 1, 2)  # max 8: ladder [1, 2, 4, 8] -> [2, 4, 8]
    assert plan.target_sizes == (2, 4, 8)
    assert plan.first_step.sizes == (2, 4)
    assert plan.chain_step is None


def test_sequence_parallel_rounds_to_tp():
    # K=1 -> 1+K = 2, TP 4 with SP -> multiple of max(2, 4) = 4; max = min(4 * 2 * 2, 512) = 16.
    plan = plan_capture_sizes("eagle", 1, 4, tp=4, sp=True)
    assert plan.target_sizes == (4, 8, 16)
    assert plan.first_step.sizes == (4, 8)
    assert all(s % 4 == 0 for s in plan.target_sizes)


def test_max_capture_size_wins_for_dflash(caplog):
    with caplog.at_level(logging.WARNING, logger="portable_spec.capture_sizes"):
        plan = plan_capture_sizes("dflash", 8, 8, max_capture_size=40)
    assert plan.target_sizes == (9, 18, 36)
    expected = ("(1+num_speculative_tokens) * max_num_seqs = 72 exceeds the max capture size 40 (the largest planned "
                "size is 36): larger draft sizes dropped, so batches of more than 4 requests draft without a FULL "
                "graph")
    assert plan.warnings == (expected,)
    assert [r.getMessage() for r in caplog.records if r.name == "portable_spec.capture_sizes"] == [expected]


def test_max_capture_size_wins_for_eagle_chain():
    plan = plan_capture_sizes("eagle", 3, 64, max_capture_size=32)
    assert plan.target_sizes == (4, 8, 16, 24, 32)
    assert plan.first_step.sizes == (4, 8, 16, 24, 32)
    assert plan.chain_step.sizes == (1, 2, 4, 8, 16, 24, 32)
    assert len(plan.warnings) == 1 and "exceeds the max capture size 32" in plan.warnings[0]


@pytest.mark.parametrize("method, k, seqs, kw, planned, batches", [
    ("eagle3", 5, 256, {"live_graph_limit": 1900}, 498, 83),  # `sizes --platform musa`: 512 rounds to 6 * 83
    ("dflash", 5, 256, {}, 480, 80),  # blocks of 6 * b, b on vLLM's ladder: 80
    ("eagle3", 3, 256, {"graphs_per_target_size": 61, "live_graph_limit": 1900}, 232, 58),  # then pruned
    ("eagle", 3, 64, {"max_capture_size": 32}, 32, 8),  # the cap itself is planned: no second number
])
def test_capped_warning_names_the_sizes_planned_not_the_cap(method, k, seqs, kw, planned, batches):
    """Regression: it printed max_capture_size=498 and warned of 512 and "more than 85 requests"."""
    plan = plan_capture_sizes(method, k, seqs, **kw)
    capped = [w for w in plan.warnings if "exceeds the max capture size" in w]
    assert plan.max_capture_size == plan.first_step.sizes[-1] == planned and len(capped) == 1
    assert f"more than {batches} requests draft without a FULL graph" in capped[0]
    assert ("(the largest planned size is" in capped[0]) == (planned != (kw.get("max_capture_size") or 512))
    assert batches * (1 + k) <= planned < (batches + 1) * (1 + k)


def test_dflash_user_sizes_keep_multiples_only():
    plan = plan_capture_sizes("dflash", 8, 8, user_sizes=[27, 9, 10, 18, 100, 9])
    assert plan.target_sizes == (9, 18, 27)
    assert plan.warnings == ("DFlash drafts blocks of 9 tokens per request: capture sizes [10, 100] are not "
                             "multiples of 9 up to 72 and were dropped",)


def test_dflash_user_sizes_fall_back_to_one_block():
    plan = plan_capture_sizes("dflash", 8, 8, user_sizes=[10, 20])
    assert plan.target_sizes == (9,)
    assert plan.first_step.sizes == (9,)
    assert plan.warnings[-1] == "no user capture size is block-aligned: falling back to [9]"


def test_eagle_user_sizes_are_rounded_like_vllm():
    # The largest user size (30) is the max: 1 -> 4, 5 -> 8, 6 -> 8, 30 -> 32 (above 30, dropped).
    plan = plan_capture_sizes("eagle", 3, 8, user_sizes=[1, 5, 6, 30])
    assert plan.target_sizes == (4, 8)
    assert plan.first_step.sizes == (4, 8)
    assert plan.chain_step.sizes == (1, 2, 4, 8)


def test_user_sizes_above_max_capture_size_are_dropped_with_a_warning():
    plan = plan_capture_sizes("eagle", 3, 8, user_sizes=[4, 8, 64], max_capture_size=16)
    assert plan.target_sizes == (4, 8)
    assert plan.warnings[0] == "capture sizes [64] exceed the max capture size 16 and were dropped"


def test_optional_draft_graphs_warn_instead_of_failing():
    plan = plan_capture_sizes("dflash", 8, 8, max_capture_size=8, require_full_draft=False)
    assert plan.target_sizes == (1, 2, 4, 8)
    assert plan.first_step == StepPlan(query_len=9, sizes=(), mode="NONE")
    assert plan.warnings == ("1+num_speculative_tokens = 9 is above the max capture size 8: the verify pass and the "
                             "first draft step get no FULL graph (pass --max-capture-size 9 or more to get one)",)


# ---------------------------------------------------------------- errors: one line naming the fix


@pytest.mark.parametrize("args, kwargs, message", [
    (("eagle", 0, 8), {}, "num_speculative_tokens must be >= 1 (got 0): pass --num-spec 1 or more"),
    (("eagle", 3, 0), {}, "max_num_seqs must be >= 1 (got 0): pass --max-num-seqs 1 or more"),
    (("eagle", 3, 8), {"max_capture_size": 0},
     "max capture size must be >= 1 (got 0): pass --max-capture-size 1 or more, or omit it for vLLM's default"),
    (("eagle", 3, 8), {"tp": 0}, "tensor_parallel_size must be >= 1 (got 0): pass --tp 1 or more"),
    (("eagle", 3, 8), {"graphs_per_target_size": 0},
     "graphs per target size must be >= 1 (got 0): pass --graphs-per-size 1 or more "
     "(a PIECEWISE target captures one graph per piece)"),
    (("eagle", 3, 8), {"live_graph_limit": 0},
     "live-graph limit must be >= 1 (got 0): pass --live-graph-limit 1 or more, or omit it for no limit"),
    (("medusa", 3, 8), {}, "unknown speculative method 'medusa': pass --method one of eagle, eagle3, mtp, dflash, draft_model"),
    (("eagle", "3", 8), {}, "num_speculative_tokens must be an integer (got '3'): pass --num-spec with a whole number"),
    (("dflash", 8, 8), {"max_capture_size": 8},
     "1+num_speculative_tokens = 9 is above the max capture size 8, so no FULL draft graph fits: "
     "pass --max-capture-size 9 or more, or lower --num-spec"),
    (("eagle", 8, 8), {"user_sizes": [2, 4]},
     "1+num_speculative_tokens = 9 is above the max capture size 4, so no FULL draft graph fits: include a size >= 9 "
     "in --sizes and keep --max-capture-size >= 9, or lower --num-spec"),
    (("eagle", 2, 8), {"tp": 2, "sp": True},
     "sequence parallelism needs capture sizes that are multiples of both 1+num_speculative_tokens (3) and "
     "tensor_parallel_size (2), and max of the two (3) is not: pick --num-spec so that 1+K divides or is a multiple "
     "of --tp, or drop --sp"),
    (("eagle", 1, 8), {"tp": 6, "sp": True, "max_capture_size": 16},
     "no capture size <= 16 is a multiple of tensor_parallel_size 6, as sequence parallelism requires: "
     "pass --max-capture-size 24 or more, or drop --sp"),
    (("eagle", 3, 8), {"tp": 2, "sp": True, "max_capture_size": 2},
     "1+num_speculative_tokens = 4 is above the max capture size 2, so no FULL draft graph fits: "
     "pass --max-capture-size 4 or more, or lower --num-spec"),
    (("dflash", 1, 2), {"tp": 8, "sp": True},
     "no block-aligned size (1+num_speculative_tokens) * b with b <= max_num_seqs (2) is a multiple of 8 (sequence "
     "parallelism): pass --max-num-seqs 4 or more, or drop --sp"),
    (("eagle", 1, 8), {"tp": 4, "sp": True, "max_capture_size": 2},
     "max(1+num_speculative_tokens, tensor_parallel_size) = 4 is above the max capture size 2, so no FULL draft "
     "graph fits: pass --max-capture-size 4 or more, or lower --num-spec"),
    (("eagle", 3, 8), {"user_sizes": []},
     "the user capture-size list is empty: pass at least one size with --sizes, or omit it"),
    (("eagle", 3, 8), {"user_sizes": [4, 0]},
     "capture sizes must be integers >= 1 (got [0]): pass --sizes with positive sizes only"),
    (("eagle", 3, 8), {"user_sizes": [64], "max_capture_size": 16},
     "every capture size is above the max capture size 16: pass --sizes with sizes <= 16 or raise --max-capture-size"),
    (("eagle", 3, 2), {"user_sizes": [64]},
     "no verify capture size lies in [1+K, (1+K) * max_num_seqs] = [4, 8], so the first draft step has no FULL graph: "
     "pass --max-num-seqs 16 or more, or include a size in that range in --sizes"),
])
def test_bad_input_is_one_line_naming_the_fix(args, kwargs, message):
    with pytest.raises(ValueError) as exc:
        plan_capture_sizes(*args, **kwargs)
    assert str(exc.value) == message
    assert "\n" not in message


def test_sp_rule_accepts_when_one_divides_the_other():
    assert plan_capture_sizes("eagle", 3, 8, tp=2, sp=True).target_sizes[0] == 4   # max(4, 2) = 4
    assert plan_capture_sizes("eagle", 1, 8, tp=8, sp=True).target_sizes[0] == 8   # max(2, 8) = 8
    assert plan_capture_sizes("eagle", 2, 8, tp=2, sp=False).target_sizes[0] == 3  # no SP: no TP rule


# ---------------------------------------------------------------- live-graph budget


def test_musa_budget_prunes_piecewise_target_largest_first(caplog):
    # A PIECEWISE target of a 60-layer model: 61 graphs per captured size; EAGLE3 K=3, 256 seqs -> max 512.
    unpruned = plan_capture_sizes("eagle3", 3, 256, graphs_per_target_size=61)
    assert unpruned.live_graphs == 49 * 61 + 49 + 35  # 3073: way over torchada's 1900
    with caplog.at_level(logging.WARNING, logger="portable_spec.capture_sizes"):
        plan = plan_capture_sizes("eagle3", 3, 256, graphs_per_target_size=61,
                                  live_graph_limit=TORCHADA_DEFAULT_EXEC_CAP)
    assert plan.live_graphs <= TORCHADA_DEFAULT_EXEC_CAP == 1900
    # Largest first: what is left is a prefix of each unpruned list.
    assert plan.target_sizes == unpruned.target_sizes[:len(plan.target_sizes)]
    assert plan.first_step.sizes == unpruned.first_step.sizes[:len(plan.first_step.sizes)]
    assert plan.chain_step.sizes == unpruned.chain_step.sizes[:len(plan.chain_step.sizes)]
    assert plan.target_sizes[-1] == 232 and plan.live_graphs == 1892
    # Removing one more target size would have been unnecessary: 1892 + 61 + 1 + 1 > 1900.
    assert max(plan.chain_step.sizes) <= plan.max_capture_size
    pruning = [w for w in plan.warnings if "live-graph limit" in w]
    assert len(pruning) == 1 and pruning[0].startswith("3073 live graphs exceed the live-graph limit 1900")
    assert pruning[0].endswith("now 1892 live graphs")
    assert any(r.getMessage() == pruning[0] for r in caplog.records)


def test_small_budget_prunes_across_lists():
    # Unpruned: target [4, 8, 16, 24, 32], first [4, 8, 16], chain [1, 2, 4] = 11 graphs. Limit 8: drop 32, 24
    # (target only), then 16 (target and first) -> 2 + 2 + 3 = 7.
    plan = plan_capture_sizes("eagle", 3, 4, live_graph_limit=8)
    assert plan.target_sizes == (4, 8)
    assert plan.first_step.sizes == (4, 8)
    assert plan.chain_step.sizes == (1, 2, 4)
    assert plan.live_graphs == 7
    assert plan.warnings == ("11 live graphs exceed the live-graph limit 8 (1 per target size): dropped the largest "
                             "capture sizes (target [16, 24, 32]; first step [16]), now 7 live graphs",)


def test_dflash_budget_keeps_target_and_draft_lists_equal():
    plan = plan_capture_sizes("dflash", 8, 8, live_graph_limit=6)
    assert plan.target_sizes == plan.first_step.sizes == (9, 18, 36)
    assert plan.live_graphs == 6


def test_unmeetable_budget_keeps_one_size_per_list_and_says_so():
    plan = plan_capture_sizes("eagle", 3, 4, live_graph_limit=2)
    assert (plan.target_sizes, plan.first_step.sizes, plan.chain_step.sizes) == ((4,), (4,), (1,))
    assert plan.live_graphs == 3
    # Already 1 graph per target size: only a higher limit helps, so that is the only advice.
    assert plan.warnings[-1] == ("live-graph limit 2 cannot be met: even one size per list needs 3 live graphs "
                                 "(target 1 size x 1 graph, first step 1, chain step 1): pass --live-graph-limit 3 or "
                                 "more")


@pytest.mark.parametrize("method, g, limit, advice", [
    ("eagle", 1, 1, "pass --live-graph-limit 3 or more"),
    ("dflash", 1, 1, "pass --live-graph-limit 2 or more"),
    ("eagle", 5, 2, "pass --live-graph-limit 7 or more"),  # even 1 per size needs 3 > 2: no --graphs-per-size advice
    ("eagle", 20, 10, "pass --live-graph-limit 22 or more, or --graphs-per-size 8 or less (FULL target graphs need 1)"),
])
def test_unmeetable_budget_advises_only_what_meets_it(method, g, limit, advice):
    """Regression: the advice named --graphs-per-size even at 1, where lowering it cannot help."""
    plan = plan_capture_sizes(method, 3, 64, graphs_per_target_size=g, live_graph_limit=limit)
    assert plan.warnings[-1].endswith(f"): {advice}")
    with pytest.raises(ValueError) as exc:
        plan_capture_sizes(method, 3, 64, graphs_per_target_size=g, live_graph_limit=limit, require_within_limit=True)
    assert str(exc.value) == plan.warnings[-1]
    needed = int(advice.split("--live-graph-limit ")[1].split()[0])
    assert plan_capture_sizes(method, 3, 64, graphs_per_target_size=g, live_graph_limit=needed,
                              require_within_limit=True).live_graphs <= needed
    if "--graphs-per-size" in advice:
        fewer = int(advice.split("--graphs-per-size ")[1].split()[0])
        assert plan_capture_sizes(method, 3, 64, graphs_per_target_size=fewer, live_graph_limit=limit,
                                  require_within_limit=True).live_graphs <= limit


# ---------------------------------------------------------------- serialisation and purity


def test_plan_round_trips_through_json():
    plan = plan_capture_sizes("eagle", 3, 64, max_capture_size=32, live_graph_limit=12)
    d = json.loads(json.dumps(plan.to_dict()))
    assert CapturePlan.from_dict(d) == plan
    dflash = plan_capture_sizes("dflash", 8, 8)
    assert CapturePlan.from_dict(json.loads(json.dumps(dflash.to_dict()))) == dflash


def test_from_dict_names_the_missing_key():
    d = plan_capture_sizes("dflash", 8, 8).to_dict()
    del d["first_step"]
    with pytest.raises(ValueError, match="^capture plan dict lacks key 'first_step': rebuild it with "
                                         "CapturePlan.to_dict\\(\\)$"):
        CapturePlan.from_dict(d)


def test_step_plan_rejects_unknown_mode():
    with pytest.raises(ValueError, match="unknown graph mode 'EAGER'"):
        StepPlan(query_len=1, sizes=(1,), mode="EAGER")


def test_planner_never_imports_vllm():
    code = ("import sys, portable_spec.capture_sizes as c, portable_spec.commands.sizes; "
            "c.plan_capture_sizes('dflash', 8, 8); "
            "print(sorted(m for m in sys.modules if m == 'vllm' or m.startswith('vllm.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]"


# ---------------------------------------------------------------- properties

METHOD = st.sampled_from(["eagle", "eagle3", "mtp", "dflash"])
USER_SIZES = st.none() | st.lists(st.integers(1, 600), min_size=1, max_size=16)


@st.composite
def plan_inputs(draw):
    return dict(method=draw(METHOD), num_spec=draw(st.integers(1, 12)), max_num_seqs=draw(st.integers(1, 300)),
                max_capture_size=draw(st.none() | st.integers(1, 600)), tp=draw(st.sampled_from([1, 2, 3, 4, 8])),
                sp=draw(st.booleans()), live_graph_limit=draw(st.none() | st.integers(1, 120)),
                user_sizes=draw(USER_SIZES), graphs_per_target_size=draw(st.integers(1, 4)),
                require_full_draft=draw(st.booleans()))


def _cap(kw) -> int:
    """The max capture size the planner plans under: the given one, else the largest user size, else vLLM's."""
    if kw["max_capture_size"] is not None:
        return kw["max_capture_size"]
    return max(kw["user_sizes"]) if kw["user_sizes"] else vllm_default_max_capture_size(kw["num_spec"],
                                                                                          kw["max_num_seqs"])


def _multiple_of(kw) -> int:
    q, tp = 1 + kw["num_spec"], kw["tp"]
    return max(q, tp) if tp > 1 and kw["sp"] else q


REFUSALS: tuple[tuple[str, object], ...] = (
    # (the refusal's words, the inputs for which the planner's stated rule says it must refuse)
    ("sequence parallelism needs capture sizes that are multiples of both",
     lambda kw: kw["tp"] > 1 and kw["sp"] and max(1 + kw["num_spec"], kw["tp"]) % min(1 + kw["num_spec"], kw["tp"])),
    ("every capture size is above the max capture size",
     lambda kw: kw["user_sizes"] and kw["max_capture_size"] is not None
     and min(kw["user_sizes"]) > kw["max_capture_size"]),
    ("so no FULL draft graph fits", lambda kw: kw["require_full_draft"] and _multiple_of(kw) > _cap(kw)),
    ("is a multiple of tensor_parallel_size", lambda kw: kw["tp"] > 1 and kw["sp"]),
    ("no block-aligned size", lambda kw: kw["method"] == "dflash" and kw["require_full_draft"] and kw["sp"]
     and kw["tp"] > 1 + kw["num_spec"]),
    ("no verify capture size lies in", lambda kw: kw["require_full_draft"] and kw["method"] != "dflash"),
    ("cannot be met", lambda kw: kw["live_graph_limit"] is not None
     and kw["live_graph_limit"] < kw["graphs_per_target_size"] + 2),
)
"""Every way the planner may refuse drawn inputs, with the condition its rule states: a refusal whose condition does
not hold (a planner refusing what it should plan) fails the property tests instead of passing them."""


def refusal_is_legitimate(kw, msg: str) -> bool:
    rules = [rule for words, rule in REFUSALS if words in msg]
    return len(rules) == 1 and bool(rules[0](kw))


def plan_or_none(kw):
    """The plan, or None after checking that the ValueError is one line naming a fix and one of the planner's stated
    refusals whose condition holds for ``kw``."""
    kwargs = dict(kw)
    try:
        return plan_capture_sizes(kwargs.pop("method"), kwargs.pop("num_spec"), kwargs.pop("max_num_seqs"), **kwargs)
    except ValueError as exc:
        msg = str(exc)
        assert "\n" not in msg and ": " in msg and any(w in msg for w in ("pass", "pick", "include")), msg
        assert refusal_is_legitimate(kw, msg), (kw, msg)
        return None


def all_lists(plan):
    return [plan.target_sizes] + [step.sizes for step in plan.steps]


@FAST
@given(plan_inputs())
def test_property_lists_sorted_unique_and_bounded(kw):
    plan = plan_or_none(kw)
    if plan is None:
        return
    assert plan.target_sizes and plan.target_sizes[-1] == plan.max_capture_size
    for sizes in all_lists(plan):
        assert list(sizes) == sorted(set(sizes))
        assert all(1 <= s <= plan.max_capture_size for s in sizes)
    bound = kw["max_capture_size"]
    if bound is None:
        bound = max(kw["user_sizes"]) if kw["user_sizes"] else vllm_default_max_capture_size(
            kw["num_spec"], kw["max_num_seqs"])
    assert plan.max_capture_size <= bound


@FAST
@given(plan_inputs())
def test_property_step_shapes(kw):
    plan = plan_or_none(kw)
    if plan is None:
        return
    q = 1 + kw["num_spec"]
    assert plan.first_step.query_len == q
    if plan.first_step.mode == "FULL":
        assert plan.first_step.sizes
        assert all(s % q == 0 for s in plan.first_step.sizes)
        assert all(plan.first_step.num_reqs(s) <= kw["max_num_seqs"] for s in plan.first_step.sizes)
        assert set(plan.first_step.sizes) <= set(plan.target_sizes)
        if kw["tp"] > 1 and kw["sp"]:
            assert all(s % kw["tp"] == 0 for s in plan.target_sizes)
    else:
        assert plan.first_step.sizes == () and not kw["require_full_draft"]
    if kw["method"] == "dflash":
        assert plan.chain_step is None
        if plan.first_step.mode == "FULL":  # one list for verify and draft, all block-aligned
            assert plan.first_step.sizes == plan.target_sizes
    elif kw["num_spec"] == 1:
        assert plan.chain_step is None
    else:
        assert plan.chain_step.query_len == 1 and plan.chain_step.mode == "FULL"
        assert plan.chain_step.sizes[0] == 1
        assert all(b <= kw["max_num_seqs"] for b in plan.chain_step.sizes)


@FAST
@given(plan_inputs())
def test_property_live_graph_budget(kw):
    plan = plan_or_none(kw)
    if plan is None:
        return
    g = kw["graphs_per_target_size"]
    assert plan.live_graphs == len(plan.target_sizes) * g + sum(len(step.sizes) for step in plan.steps)
    limit = kw["live_graph_limit"]
    if limit is None:
        return
    smallest = g + sum(1 for step in plan.steps if step.sizes)
    if smallest <= limit:
        assert plan.live_graphs <= limit
    else:
        assert all(len(sizes) == 1 for sizes in all_lists(plan) if sizes)
        assert any("cannot be met" in w for w in plan.warnings)


@FAST
@given(plan_inputs())
def test_property_idempotent(kw):
    plan = plan_or_none(kw)
    if plan is None:
        return
    again = dict(kw, user_sizes=list(plan.target_sizes), max_capture_size=plan.target_sizes[-1])
    replanned = plan_or_none(again)
    assert replanned is not None and replanned.target_sizes == plan.target_sizes
    assert replanned.first_step == plan.first_step
    if kw["user_sizes"] is None:  # the vLLM adapter's re-run: no user sizes, max = our last size
        from_default = plan_or_none(dict(kw, max_capture_size=plan.target_sizes[-1]))
        assert from_default is not None and from_default.target_sizes == plan.target_sizes


def test_chain_step_sizes_include_a_max_num_seqs_off_the_ladder():
    plan = plan_capture_sizes("eagle", 3, 5)
    assert plan.chain_step.sizes == (1, 2, 4, 5)
    assert plan_capture_sizes("eagle", 3, 8).chain_step.sizes == (1, 2, 4, 8)


def test_idempotent_under_pruning_when_max_num_seqs_is_off_the_ladder():
    """Found by the idempotence property: adding the full batch to the chain sizes must not depend on the cap."""
    kw = dict(num_spec=4, max_num_seqs=11, live_graph_limit=8, require_full_draft=False)
    plan = plan_capture_sizes("eagle", **kw)
    again = plan_capture_sizes("eagle", **dict(kw, user_sizes=list(plan.target_sizes),
                                                max_capture_size=plan.target_sizes[-1]))
    assert again.target_sizes == plan.target_sizes


@pytest.mark.parametrize("limit", [None, 9])
def test_a_draft_model_first_step_brings_two_plus_k_tokens_per_request_for_each_verify_batch(limit):
    """vLLM's draft model appends the next token to each request's 1+K verified tokens: its first step has a graph
    of (2+K) * b tokens for every verify size (1+K) * b, pruned together with it; verify and chain sizes are
    EAGLE's."""
    eagle = plan_capture_sizes("eagle", 3, 8, live_graph_limit=limit)
    plan = plan_capture_sizes("draft_model", 3, 8, live_graph_limit=limit)
    assert plan.target_sizes == eagle.target_sizes and plan.chain_step == eagle.chain_step
    assert plan.first_step.query_len == 5 and eagle.first_step.query_len == 4
    assert [s // 5 for s in plan.first_step.sizes] == [s // 4 for s in eagle.first_step.sizes]
    assert len(plan.first_step.sizes) > 1 and all(s % 5 == 0 for s in plan.first_step.sizes)
    assert CapturePlan.from_dict(plan.to_dict()) == plan


ACCEPTED_FLOOR = 0.6
"""The share of drawn planner inputs that must get a plan: a planner that refuses most inputs would pass every
property test above vacuously. Over the draws below it is 0.68."""


def test_the_property_tests_mostly_see_plans_not_refusals():
    """The property tests' own input distribution (``plan_inputs``), drawn with a fixed seed: at least
    ``ACCEPTED_FLOOR`` of it is planned, every refusal is a stated one, and each side is seen."""
    import random

    from hypothesis.strategies import SearchStrategy

    assert isinstance(plan_inputs(), SearchStrategy)
    rng = random.Random(20261128)
    draws = [dict(method=rng.choice(["eagle", "eagle3", "mtp", "dflash"]), num_spec=rng.randint(1, 12),
                  max_num_seqs=rng.randint(1, 300), max_capture_size=rng.choice([None, rng.randint(1, 600)]),
                  tp=rng.choice([1, 2, 3, 4, 8]), sp=rng.random() < 0.5,
                  live_graph_limit=rng.choice([None, rng.randint(1, 120)]),
                  user_sizes=rng.choice([None, [rng.randint(1, 600) for _ in range(rng.randint(1, 16))]]),
                  graphs_per_target_size=rng.randint(1, 4), require_full_draft=rng.random() < 0.5)
             for _ in range(400)]
    planned = [kw for kw in draws if plan_or_none(kw) is not None]
    assert len(draws) == 400 and 0 < len(planned) < len(draws)
    assert len(planned) / len(draws) >= ACCEPTED_FLOOR, len(planned) / len(draws)


def test_a_refusal_outside_the_planners_rules_fails_the_property_tests(monkeypatch):
    """What the legitimacy check exists for: a planner that refuses an input its rules accept."""
    kw = dict(method="eagle", num_spec=3, max_num_seqs=8, max_capture_size=None, tp=1, sp=False,
              live_graph_limit=None, user_sizes=None, graphs_per_target_size=1, require_full_draft=True)
    assert plan_or_none(kw) is not None

    def refuses(*args, **kwargs):
        raise ValueError("no verify capture size lies in [4, 32]: pass --max-num-seqs 9 or more")

    monkeypatch.setattr(sys.modules[__name__], "plan_capture_sizes", refuses)
    with pytest.raises(AssertionError):
        plan_or_none(dict(kw, require_full_draft=False))
