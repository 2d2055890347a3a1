"""The V1 drafter's replay decisions at their edges, drawn rather than pinned: every query-length mix of a first pass
(ragged totals that are and are not whole multiples of 1+K, a longest query above 1+K whose total still equals
requests x (1+K)), and every forward size against the announced key (smaller, equal, larger).

Why drawn: a ragged batch whose total happens to be a multiple of 1+K, or a forward larger than the key, is what the
hand-written cases fed, and a condition that only those inputs exercise can be deleted unnoticed. Each property
restates the rule the proposer's docstring gives and draws inputs on both sides of each of its terms."""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from portable_spec.draft.dispatcher import CHAIN, FIRST
from test_v1_drafter_logic import cad, eagle  # noqa: F401 - ``eagle`` is the fixture

DRAWN = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture],
                 phases=(Phase.explicit, Phase.generate))  # a failing draw is printed; shrinking it costs minutes
CAPTURED_FIRST = (1, 2, 4)  # the ``eagle`` fixture's first-pass graphs


def first_pass(proposer, query_lens: list[int]):
    """The first pass of ``len(query_lens)`` requests on the runner's persistent buffers (as vLLM hands it)."""
    runner = proposer.target_runner
    n, total = len(query_lens), sum(query_lens)
    starts = torch.tensor([0, *query_lens], dtype=torch.int32).cumsum(0, dtype=torch.int32)
    runner.query_start_loc.gpu[: n + 1] = starts
    return cad(runner.query_start_loc.gpu[: n + 1], runner.seq_lens[:n], n, total, max(query_lens),
               proposer._slot_mapping_buffer[:total])


def fits_a_uniform_graph(query_lens: list[int], q: int, ragged_ok: bool) -> bool:
    """The rule: uniform (every request brings 1+K) fits anywhere; ragged (the longest is 1+K, some bring fewer) only
    where the backend reads ``query_start_loc`` at replay, and only for a whole multiple of 1+K tokens."""
    n, total = len(query_lens), sum(query_lens)
    if all(length == q for length in query_lens):
        return True
    return ragged_ok and max(query_lens) == q and total < n * q and total % q == 0


@DRAWN
@given(query_lens=st.lists(st.integers(1, 8), min_size=1, max_size=4), ragged_ok=st.booleans())
@example(query_lens=[4, 4, 3, 2], ragged_ok=True)  # ragged, 13 tokens: not a multiple of 1+K
@example(query_lens=[4, 4, 3, 1], ragged_ok=True)  # ragged, 12 tokens
@example(query_lens=[5, 3], ragged_ok=False)  # 8 tokens = 2 x (1+K) with a 5-token query: not uniform
@example(query_lens=[5, 3], ragged_ok=True)
@example(query_lens=[4, 4], ragged_ok=False)
def test_a_first_pass_replays_a_graph_exactly_when_its_query_lengths_fit_one(eagle, query_lens, ragged_ok):
    q = eagle.verify_len
    assert q == 4, "the fixture's pair drafts K=3"
    eagle.ragged_first_pass = ragged_ok
    key = eagle._classify(first_pass(eagle, query_lens), draft_index=0)
    n = len(query_lens)
    expected = fits_a_uniform_graph(query_lens, q, ragged_ok) and n in CAPTURED_FIRST
    assert (key is not None) == expected, (query_lens, ragged_ok, key)
    if key is not None:
        assert (key.step, key.num_reqs, key.num_tokens) == (FIRST, n, n * q)


@DRAWN
@given(num_reqs=st.sampled_from(CAPTURED_FIRST), data=st.data())
def test_an_announced_first_pass_key_serves_only_a_forward_of_exactly_its_size(eagle, num_reqs, data):
    """A forward smaller or larger than the announced key is some other batch (upstream padded elsewhere):
    vLLM's path runs it. Either way the announcement is consumed."""
    key = eagle.graph_runner.dispatcher.dispatch(FIRST, num_reqs)
    side = data.draw(st.sampled_from(["smaller", "equal", "larger"]))
    tokens = {"smaller": st.integers(1, key.num_tokens - 1), "equal": st.just(key.num_tokens),
              "larger": st.integers(key.num_tokens + 1, key.num_tokens + 16)}[side]
    tokens = data.draw(tokens)
    eagle._pending = key
    got = eagle.pending_key(eagle._model_kwargs(tokens))
    assert (got == key) if side == "equal" else got is None, (key, tokens, got)
    assert eagle._pending is None


@pytest.mark.parametrize("delta", [-3, -1, 0, 2])
def test_an_announced_chain_key_serves_upstreams_padded_forward(eagle, delta):
    """Chain steps are the other rule: upstream pads the chain forward its own way and reads only the batch's rows,
    so our (larger or equal) graph serves whatever size it runs at."""
    key = eagle.graph_runner.dispatcher.dispatch(CHAIN, 8)
    eagle._pending = key
    assert eagle.pending_key(eagle._model_kwargs(key.num_tokens + delta)) == key
