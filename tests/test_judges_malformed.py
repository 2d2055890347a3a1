"""The judges fed what they exist to reject: the soak's judge, the e2e exactness comparisons and the V1 and Model
Runner V2 part judges each fail on empty, truncated, strict-prefix, extra or missing choices, unread (None) counters,
and per-position counts that differ while their totals agree. A judge that accepts any of these lets the GPU lane
report a match it never saw, so every case here must fail, and a well-formed twin of each must pass (so a case fails
for the reason it names, not because the fixture is broken)."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import pytest

from portable_spec_harness.e2e import exactness, mrv2_checks
from portable_spec_harness.e2e.v1_checks import judge as v1_judge
from portable_spec_harness.soak import conditions, judge, workload

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_e2e_harness import GOOD_FULL, run as e2e_row  # noqa: E402
from test_soak_judge import PLAN, SPECS, good_runs, outcome, rows  # noqa: E402

N2 = workload.RequestSpec("n2", "greedy", {"prompt": [1, 9], "max_tokens": 3, "temperature": 0.0, "n": 2}, 0.0,
                          "nospec")
PLAN_N2 = workload.Workload("p", 0, [*SPECS, N2], eos_ids=[])


def with_n2(runs, ours_choices=(0, 1), ref_choices=(0, 1)):
    """``runs`` where every server also answered the n=2 request, ours with ``ours_choices`` and the others with
    ``ref_choices`` (each choice the same tokens)."""
    for name, r in runs.items():
        o = outcome("n2", [3, 4])
        o.choices = {i: copy.deepcopy(o.choices[0]) for i in (ours_choices if name == "full_drafter" else ref_choices)}
        r.outcomes.append(o)
    return runs


def ours_greedy(runs, plan=PLAN) -> dict:
    row = rows(runs, plan=plan)["full_drafter"]
    return {"ok": "greedy_equals_nospec" not in row["failures"], **row["compared"]["greedy_vs_nospec"]}


def seeded(runs) -> bool:
    return "seeded_solo_equals_eager" not in rows(runs)["full_drafter"]["failures"]


# ------------------------------------------------------------------------------------------------ the soak's outputs
def test_the_well_formed_twins_pass():
    assert ours_greedy(good_runs())["ok"] and seeded(good_runs())
    assert ours_greedy(with_n2(good_runs()), PLAN_N2)["ok"]


def _cut(rid, keep):
    def cut(runs):
        for o in runs["full_drafter"].outcomes:
            if o.rid == rid:
                o.choices[0].token_ids = o.choices[0].token_ids[:keep]
    return cut


@pytest.mark.parametrize("break_it", [
    pytest.param(lambda runs: setattr(runs["full_drafter"], "outcomes", []), id="ours_empty"),
    pytest.param(lambda runs: setattr(runs["nospec"], "outcomes", []), id="reference_empty"),
    pytest.param(lambda runs: runs["full_drafter"].outcomes.pop(0), id="ours_truncated"),
    pytest.param(lambda runs: runs["nospec"].outcomes.pop(), id="reference_truncated"),
    pytest.param(_cut("g", 2), id="greedy_strict_prefix"),
    pytest.param(_cut("g", 0), id="greedy_no_tokens"),
    pytest.param(_cut("t", 1), id="stop_string_strict_prefix"),
    pytest.param(lambda runs: runs["full_drafter"].outcomes[0].choices.update(
        {1: copy.deepcopy(runs["full_drafter"].outcomes[0].choices[0])}), id="ours_extra_choice"),
    pytest.param(lambda runs: [r.outcomes[0].choices.update({1: copy.deepcopy(r.outcomes[0].choices[0])})
                               for r in runs.values()], id="extra_choice_on_both_sides"),
])
def test_malformed_greedy_outputs_fail(break_it):
    runs = good_runs()
    break_it(runs)
    assert not ours_greedy(runs)["ok"]


@pytest.mark.parametrize("ours_choices,ref_choices", [((0,), (0, 1)), ((0, 1), (1,)), ((0,), (0,)), ((), ())],
                         ids=["missing_here", "missing_in_reference", "missing_on_both_sides", "no_choices"])
def test_a_choice_the_request_asked_for_must_be_on_both_sides(ours_choices, ref_choices):
    verdict = ours_greedy(with_n2(good_runs(), ours_choices, ref_choices), PLAN_N2)
    assert not verdict["ok"] and verdict["mismatches"] >= 1


@pytest.mark.parametrize("break_it", [
    pytest.param(lambda runs: setattr(runs["full_drafter"], "solo_outcomes", []), id="ours_empty"),
    pytest.param(lambda runs: runs["full_drafter"].solo_outcomes[0].choices[0].token_ids.pop(), id="strict_prefix"),
    pytest.param(lambda runs: runs["eager_drafter"].solo_outcomes[0].choices[0].token_ids.append(3),
                 id="reference_longer"),
    pytest.param(lambda runs: runs["full_drafter"].solo_outcomes[0].choices.pop(0), id="choice_missing"),
])
def test_malformed_seeded_samples_fail(break_it):
    runs = good_runs()
    break_it(runs)
    assert not seeded(runs)


# ------------------------------------------------------------------------------------------------ the soak's counters
def _ours_checks(runs, conds=None, log=None):
    r = runs["full_drafter"]
    if log is not None:
        r.log = log
    row = rows(runs)["full_drafter"]
    return judge.server_checks(r, row["drafter"], None, None, row["conditions"] if conds is None else conds, 0)


@pytest.mark.parametrize("condition", conditions.expected(speculative=True, ours=True))
def test_a_condition_never_read_or_read_as_none_fails(condition):
    counted = {name: 5 for name in conditions.expected(speculative=True, ours=True)}
    good = _ours_checks(good_runs(), counted)
    assert all(good[f"condition_{c}"] for c in counted)
    unread = {k: v for k, v in counted.items() if k != condition}
    assert _ours_checks(good_runs(), unread)[f"condition_{condition}"] is False
    assert _ours_checks(good_runs(), {**counted, condition: None})[f"condition_{condition}"] is False


@pytest.mark.parametrize("key,check", [("eager_keys", "no_eager_draft_keys"), ("error_lines", "no_error_lines_in_log"),
                                       ("left_to_upstream", "not_left_to_upstream"),
                                       ("warmup_pointer_mismatches", "no_pointer_mismatch_in_warmup")])
def test_a_log_count_never_read_fails(key, check):
    log = dict(good_runs()["full_drafter"].log)
    assert _ours_checks(good_runs(), log=dict(log))[check] is True
    log.pop(key)
    assert _ours_checks(good_runs(), log=log)[check] is False


def test_probe_counters_never_read_fail():
    runs = good_runs()
    runs["full_drafter"].facts_after = None
    failed = rows(runs)["full_drafter"]["failures"]
    assert {"probe_read", "no_pointer_mismatch", "first_pass_graphs_replayed", "chain_graphs_replayed",
            "condition_draft_graph_replays"} <= set(failed)


# ------------------------------------------------------------------------------------------------ e2e comparisons
COUNTS = {"drafts": 4, "draft_tokens": 12, "accepted": 9, "accepted_per_position": [4, 3, 2]}


@pytest.mark.parametrize("ours,ref", [
    ([], [[1, 2]]), ([[1, 2]], []), (None, [[1, 2]]), ([[1, 2]], None),
    ([[1]], [[1, 2]]), ([[1, 2]], [[1]]),  # a strict prefix, either way
    ([[1, 2]], [[1, 2], [3]]), ([[1, 2], [3]], [[1, 2]]),  # a prompt missing or extra
    ([[1, 2], []], [[1, 2], []]), ([[1, 2], None], [[1, 2], None]),  # a prompt with nothing on both sides
])
def test_token_comparisons_reject_malformed_outputs(ours, ref):
    assert exactness.greedy_equals_nospec([[1, 2]], [[1, 2]]).ok
    for check in (exactness.greedy_equals_nospec, exactness.greedy_equals_design):
        verdict = check(ours, ref)
        assert not verdict.ok and verdict.detail, (check.__name__, verdict)


STEP = [[5, [1, 2, 3]], [9, [4, 5, 6]]]


@pytest.mark.parametrize("ours,ref", [
    ([STEP[:1]], [STEP]), ([STEP], [STEP[:1]]),  # a step missing (a strict prefix of the steps)
    ([[[5, [1, 2]], STEP[1]]], [STEP]),  # a strict prefix of one step's drafts
    ([[[5, None], STEP[1]]], [[[5, None], STEP[1]]]), ([[[5, []]]], [[[5, []]]]),  # nothing drafted, both sides
    ([], [STEP]), ([STEP], None),
])
def test_draft_steps_reject_malformed_steps(ours, ref):
    assert exactness.drafts_equal_per_step([STEP], [STEP]).ok
    assert not exactness.drafts_equal_per_step(ours, ref).ok


@pytest.mark.parametrize("ours,ref", [
    ({}, COUNTS), (COUNTS, {}), (None, COUNTS),
    ({**COUNTS, "accepted": None}, COUNTS), ({k: v for k, v in COUNTS.items() if k != "drafts"}, COUNTS),
    ({**COUNTS, "accepted_per_position": [None, None, None]}, {**COUNTS, "accepted_per_position": [None] * 3}),
    ({**COUNTS, "draft_tokens": True}, {**COUNTS, "draft_tokens": True}),  # a flag where a count belongs
    ({**COUNTS, "accepted_per_position": [3, 4, 2]}, COUNTS),  # equal totals, unequal per position
    ({**COUNTS, "accepted_per_position": [4, 3]}, COUNTS),  # a position missing
    ({**COUNTS, "accepted_per_position": [4, 3, 2, 0]}, COUNTS),  # a position extra
    ({**COUNTS, "drafts": 0, "draft_tokens": 0}, {**COUNTS, "drafts": 0, "draft_tokens": 0}),
])
def test_acceptance_counts_reject_malformed_counters(ours, ref):
    assert exactness.acceptance_counts_equal(COUNTS, dict(COUNTS)).ok
    assert not exactness.acceptance_counts_equal(ours, ref).ok


@pytest.mark.parametrize("ours,ref", [([], [1.0]), ([1.0], None), ([None], [None]), ([1.0], [1.0, 1.0]),
                                      ([0.5, 1.0], [1.0, 0.5])])
def test_per_position_rates_reject_malformed_rates(ours, ref):
    assert exactness.within_tolerance([1.0, 0.5], [1.0, 0.5], 1).ok
    assert not exactness.within_tolerance(ours, ref, 1).ok


@pytest.mark.parametrize("rates", [None, [], [None], [1.0, None], [1.0, 0.99]])
def test_every_position_rejects_malformed_rates(rates):
    assert exactness.every_position_accepted([1.0, 1.0]).ok
    assert not exactness.every_position_accepted(rates).ok


@pytest.mark.parametrize("counts", [None, {}, {"drafts": 4, "accepted_per_position": [None, 4]},
                                    {"drafts": 4, "accepted_per_position": [4]},
                                    {"drafts": 0, "accepted_per_position": [4, 0]},
                                    {"drafts": 4, "accepted_per_position": [2, 2]}])  # totals 4, positions off
def test_acceptance_as_designed_rejects_malformed_counters(counts):
    assert exactness.acceptance_as_designed({"drafts": 4, "accepted_per_position": [4, 0]}, [1.0, 0.0], 1).ok
    assert not exactness.acceptance_as_designed(counts, [1.0, 0.0], 1).ok


# ------------------------------------------------------------------------------------------------ part judges
def v1_rows():
    return [e2e_row("nospec"), e2e_row("upstream_v1"), e2e_row("eager_drafter"), e2e_row("full_drafter", **GOOD_FULL)]


@pytest.mark.parametrize("results,seeds", [([], [0]), (v1_rows(), []), ([], [])], ids=["no_rows", "no_seeds", "none"])
def test_the_part_judges_fail_on_nothing(results, seeds):
    assert all(v1_judge(v1_rows(), [0], greedy=True, perfect=True).checks.values())
    checks = v1_judge(results, seeds, greedy=True, perfect=True).checks
    assert checks and not all(checks.values()), checks
    mrv2 = mrv2_checks.judge(results, seeds, method="eagle", k=3, perfect=True).checks
    assert mrv2 and not all(mrv2.values()), mrv2


def test_a_v1_part_missing_one_variants_row_for_a_seed_fails():
    two_seeds = v1_rows() + [e2e_row(r["variant"], seed=1, **(GOOD_FULL if r["variant"] == "full_drafter" else {}))
                             for r in v1_rows()]
    assert all(v1_judge(two_seeds, [0, 1], greedy=True, perfect=True).checks.values())
    truncated = [r for r in two_seeds if (r["variant"], r["seed"]) != ("full_drafter", 1)]
    checks = v1_judge(truncated, [0, 1], greedy=True, perfect=True).checks
    assert checks["full_drafter_s1_ran"] is False
