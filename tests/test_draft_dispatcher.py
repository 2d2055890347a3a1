"""Draft keys and dispatch on the CPU: keys from the real capture-size planner, padding rules, eager fallbacks,
hypothesis properties, and the mapping onto real vLLM 0.26.0 ``CudagraphDispatcher`` objects (one per query length)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from portable_spec.capture_sizes import StepPlan, plan_capture_sizes
from portable_spec.draft.dispatcher import CHAIN, FIRST, DraftDispatcher, DraftKey, dispatcher_from_steps
from portable_spec.errors import PortableSpecError


@dataclass(frozen=True)
class FakeStep:
    """A StepPlan-like object, for plans the planner would not produce (PIECEWISE, odd sizes)."""

    query_len: int
    sizes: tuple[int, ...]
    mode: str

    def num_reqs(self, size: int) -> int:
        return size // self.query_len


def eagle(k: int, seqs: int) -> DraftDispatcher:
    return DraftDispatcher.from_plan(plan_capture_sizes("eagle", k, seqs))


# ---- keys from the planner -------------------------------------------------------------------------------------
def test_eagle_keys_carry_query_length_and_match_the_plan():
    plan = plan_capture_sizes("eagle", 3, 16)
    d = DraftDispatcher.from_plan(plan)
    first, chain = d.keys_for(FIRST), d.keys_for(CHAIN)
    assert [k.num_tokens for k in first] == [s for s in plan.first_step.sizes if s <= 4 * 16]
    assert all(k.query_len == 4 and k.uniform and k.mode == "FULL" and k.num_reqs == k.num_tokens // 4 for k in first)
    assert [k.num_tokens for k in chain] == list(plan.chain_step.sizes)
    assert all(k.query_len == 1 and k.num_reqs == k.num_tokens for k in chain)
    assert set(first).isdisjoint(chain)


def test_dflash_has_one_step_of_query_len_one_plus_k():
    d = DraftDispatcher.from_plan(plan_capture_sizes("dflash", 8, 8))
    assert d.step_kinds == (FIRST,)
    assert [k.num_tokens for k in d.keys_for(FIRST)] == [9, 18, 36, 72]
    assert d.dispatch(FIRST, 3) == DraftKey(FIRST, 9, 36, 4, True, "FULL")
    with pytest.raises(PortableSpecError, match="no 'chain' step"):
        d.dispatch(CHAIN, 1)


def test_first_step_pads_to_the_target_key_and_chain_steps_to_their_own():
    d = eagle(5, 64)
    assert d.dispatch(FIRST, 5) == DraftKey(FIRST, 6, 36, 6, True, "FULL")   # 30 tokens -> 36 = 6 requests
    assert d.dispatch(CHAIN, 5) == DraftKey(CHAIN, 1, 8, 8, True, "FULL")
    assert d.dispatch(FIRST, 64) == DraftKey(FIRST, 6, 384, 64, True, "FULL")


def test_non_uniform_first_step_runs_eagerly_under_full_and_relaxed_under_piecewise():
    full = eagle(2, 8)
    key = full.dispatch(FIRST, 2, num_tokens=5)
    assert key.mode == "NONE" and key.num_tokens == 5 and not key.uniform
    pw = dispatcher_from_steps(FakeStep(3, (4, 8, 16), "PIECEWISE"), None, 8)
    assert pw.dispatch(FIRST, 2, num_tokens=5) == DraftKey(FIRST, 3, 8, None, False, "PIECEWISE")
    assert pw.dispatch(FIRST, 6, num_tokens=17).mode == "NONE"


def test_above_the_largest_size_runs_eagerly_unpadded():
    d = dispatcher_from_steps(FakeStep(2, (2, 4, 8), "FULL"), FakeStep(1, (1, 2), "FULL"), 16)
    assert d.dispatch(FIRST, 5) == DraftKey(FIRST, 2, 10, 5, True, "NONE")
    assert d.dispatch(CHAIN, 3) == DraftKey(CHAIN, 1, 3, 3, True, "NONE")


def test_full_keys_stay_within_q_times_max_num_seqs():
    d = dispatcher_from_steps(FakeStep(2, (2, 4, 8, 16), "FULL"), None, 4)
    assert [k.num_tokens for k in d.keys_for(FIRST)] == [2, 4, 8]


def test_none_mode_step_has_no_keys():
    d = dispatcher_from_steps(FakeStep(4, (), "NONE"), FakeStep(1, (1, 2), "FULL"), 4)
    assert d.keys_for(FIRST) == [] and d.dispatch(FIRST, 2).mode == "NONE"


@pytest.mark.parametrize("steps, match", [
    ({FIRST: FakeStep(4, (4, 6), "FULL")}, "not multiples of query_len 4"),
    ({FIRST: FakeStep(2, (2,), "SOMETIMES")}, "unknown graph mode"),
    ({FIRST: None, CHAIN: None}, "needs at least one step plan"),
    ({FIRST: FakeStep(2, (2,), "FULL"), "third": FakeStep(1, (1,), "FULL")}, "unknown draft step kind"),
])
def test_bad_plans_raise_one_line_errors(steps, match):
    with pytest.raises(PortableSpecError, match=match) as err:
        DraftDispatcher(steps, 8)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("call, match", [
    (lambda d: d.dispatch(FIRST, 0), "num_reqs must be an integer >= 1"),
    (lambda d: d.dispatch(FIRST, 9), "exceed max_num_seqs 8"),
    (lambda d: d.dispatch(FIRST, 2, num_tokens=1), "num_tokens must be an integer >= num_reqs"),
    (lambda d: d.dispatch("third", 1), "unknown draft step kind"),
])
def test_bad_dispatch_raises_one_line_errors(call, match):
    with pytest.raises(PortableSpecError, match=match):
        call(eagle(2, 8))


def test_max_num_seqs_is_validated():
    with pytest.raises(PortableSpecError, match="max_num_seqs must be an integer >= 1"):
        DraftDispatcher({FIRST: FakeStep(1, (1,), "FULL")}, 0)


# ---- properties ------------------------------------------------------------------------------------------------
@st.composite
def plans(draw):
    q = draw(st.integers(1, 9))
    seqs = draw(st.integers(1, 64))
    first = tuple(sorted(set(draw(st.lists(st.integers(1, 80), min_size=1, max_size=12))))) 
    chain = tuple(sorted(set(draw(st.lists(st.integers(1, 80), min_size=1, max_size=12)))))
    with_chain = draw(st.booleans()) and q > 1
    return (FakeStep(q, tuple(s * q for s in first), "FULL"),
            FakeStep(1, chain, "FULL") if with_chain else None, seqs)


@settings(max_examples=300, deadline=None)
@given(plans(), st.data())
def test_dispatch_properties(plan, data):
    first, chain, seqs = plan
    d = dispatcher_from_steps(first, chain, seqs)
    reqs = data.draw(st.integers(1, seqs))
    for kind in d.step_kinds:
        key = d.dispatch(kind, reqs)
        q = d.query_len(kind)
        assert key.step == kind and key.query_len == q
        if key.mode == "NONE":
            # Eager only when no key is large enough, and then unpadded.
            assert all(k.num_tokens < reqs * q for k in d.keys_for(kind))
            assert (key.num_tokens, key.num_reqs) == (reqs * q, reqs)
            continue
        assert key in d.keys                                  # every dispatched key exists
        assert key.num_tokens >= reqs * q and key.num_reqs >= reqs  # padding never shrinks a batch
        assert key.num_tokens == key.num_reqs * q
        smaller = [k for k in d.keys_for(kind) if reqs * q <= k.num_tokens < key.num_tokens]
        assert not smaller                                    # the smallest key that fits
        if kind == CHAIN:                                     # chain steps never use a first-step key
            assert key not in set(d.keys_for(FIRST)) and key.query_len == 1


# ---- our padding is vLLM's (real CudagraphDispatcher, pinned CPU graph platform) -------------------------------
def build_vllm_dispatchers(draft: DraftDispatcher, vllm_config) -> dict:
    """``{query_len: CudagraphDispatcher}`` whose keys are ``draft``'s keys of that query length: a vLLM dispatcher
    fixes one ``uniform_decode_query_len`` and one size list, so each query length gets its own (FULL steps map to
    ``FULL_DECODE_ONLY``, since plain FULL makes only non-uniform keys; PIECEWISE to PIECEWISE)."""
    import copy

    from vllm.config import CUDAGraphMode
    from vllm.v1.cudagraph_dispatcher import CudagraphDispatcher

    seqs = vllm_config.scheduler_config.max_num_seqs
    if seqs != draft.max_num_seqs:
        raise PortableSpecError(f"the draft plan was made for max_num_seqs {draft.max_num_seqs} but the engine runs "
                                f"{seqs}: re-plan with the engine's max_num_seqs")
    modes = {"FULL": CUDAGraphMode.FULL_DECODE_ONLY, "PIECEWISE": CUDAGraphMode.PIECEWISE, "NONE": CUDAGraphMode.NONE}
    result = {}
    for kind in draft.step_kinds:
        q, mode = draft.query_len(kind), draft.mode(kind)
        assert q not in result, "one vLLM dispatcher per query length"
        sizes = sorted({k.num_tokens for k in draft.keys_for(kind)})
        cc = copy.copy(vllm_config.compilation_config)
        cc.cudagraph_mode = modes[mode if sizes else "NONE"]
        cc.cudagraph_capture_sizes = sizes
        cc.max_cudagraph_capture_size = sizes[-1] if sizes else 0
        cc.compile_sizes = []
        dispatcher = CudagraphDispatcher(vllm_config)
        dispatcher.compilation_config = cc
        dispatcher.uniform_decode_query_len = q
        dispatcher.initialize_cudagraph_keys(cc.cudagraph_mode, q)
        result[q] = dispatcher
    return result


def to_batch_descriptor(key):
    from vllm.forward_context import BatchDescriptor

    return BatchDescriptor(num_tokens=key.num_tokens, num_reqs=key.num_reqs, uniform=key.uniform)


def vllm_config_for(seqs: int):
    from vllm.config import SchedulerConfig, VllmConfig

    return VllmConfig(scheduler_config=SchedulerConfig(max_num_seqs=seqs, max_model_len=4096,
                                                       is_encoder_decoder=False))


CASES = [("eagle", k, 16) for k in range(1, 6)] + [("eagle", 5, 64), ("eagle3", 3, 7), ("dflash", 8, 8),
                                                    ("dflash", 4, 32), ("mtp", 2, 1)]


@pytest.mark.parametrize("method, k, seqs", CASES)
def test_every_key_maps_onto_one_vllm_dispatcher_per_query_length(vllm_platform, method, k, seqs):
    from vllm.config import CUDAGraphMode

    ours = DraftDispatcher.from_plan(plan_capture_sizes(method, k, seqs))
    theirs = build_vllm_dispatchers(ours, vllm_config_for(seqs))
    assert sorted(theirs) == sorted(ours.query_len(kind) for kind in ours.step_kinds)
    for q, keys in ours.keys_by_query_len().items():
        vd = theirs[q]
        assert vd.cudagraph_keys[CUDAGraphMode.FULL] == {to_batch_descriptor(key) for key in keys}
        for key in keys:
            mode, desc = vd.dispatch(key.num_tokens, uniform_decode=key.uniform)
            assert mode == CUDAGraphMode.FULL
            assert (desc.num_tokens, desc.num_reqs, desc.uniform) == (key.num_tokens, key.num_reqs, key.uniform)
    # Every uniform batch size dispatches to the same key (or to eager) in both.
    for kind in ours.step_kinds:
        q = ours.query_len(kind)
        for reqs in range(1, seqs + 1):
            key = ours.dispatch(kind, reqs)
            mode, desc = theirs[q].dispatch(reqs * q, uniform_decode=True)
            assert mode.name == key.mode
            if key.mode == "FULL":
                assert (desc.num_tokens, desc.num_reqs, desc.uniform) == (key.num_tokens, key.num_reqs, True)


def test_piecewise_steps_map_onto_relaxed_vllm_keys(vllm_platform):
    from vllm.config import CUDAGraphMode

    ours = dispatcher_from_steps(FakeStep(3, (3, 6, 12, 24), "PIECEWISE"), StepPlan(1, (1, 2, 4, 8), "FULL"), 8)
    theirs = build_vllm_dispatchers(ours, vllm_config_for(8))
    for tokens in range(1, 25):
        key = ours.dispatch(FIRST, 1, num_tokens=tokens, uniform=False)
        mode, desc = theirs[3].dispatch(tokens)
        assert mode == CUDAGraphMode.PIECEWISE and key.mode == "PIECEWISE"
        assert (desc.num_tokens, desc.num_reqs, desc.uniform) == (key.num_tokens, None, False)


def test_vllm_mapping_rejects_a_different_max_num_seqs(vllm_platform):
    with pytest.raises(PortableSpecError, match="re-plan with the engine's max_num_seqs"):
        build_vllm_dispatchers(eagle(2, 8), vllm_config_for(16))
