"""The e2e exactness checks cannot pass on nothing (issue 21): each fails on missing, empty or unequal-length input
and on one differing token, and says what it compared; the per-step draft recorder and the injected bugs install
and restore exactly what they name, and the injection does nothing when its variable is unset."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest
import torch

from portable_spec import envs
from portable_spec_harness.e2e import exactness
from portable_spec_harness.e2e.draft_steps import steps_by_prompt
from portable_spec_harness.e2e.v1_checks import bug_outcome, judge, mean_acceptance
from portable_spec_harness.vllm_door import bug_injection, draft_recorder

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from ci_scripts import load_ci_script  # noqa: E402
from test_e2e_harness import GOOD_FULL, STEPS, load_e2e_script, run  # noqa: E402

OUT = [[1, 2, 3], [4, 5]]


# -- each comparison ------------------------------------------------------------------------------------------------
def test_greedy_equals_nospec_counts_tokens_and_fails_on_nothing():
    ok = exactness.greedy_equals_nospec(OUT, OUT)
    assert ok.ok and ok.count == 5 and ok.as_json() == {"ok": True, "compared_tokens": 5}
    for ours, ref in ((None, OUT), (OUT, None), ([], []), ([[]], [[]]), (OUT, OUT[:1]), ([[1, 2], [4, 5]], OUT),
                      ([[1, 2, 3], [4, 6]], OUT)):
        verdict = exactness.greedy_equals_nospec(ours, ref)
        assert not verdict.ok and verdict.detail, (ours, ref)
    assert "prompt 1, token 1: 6 vs 5" in exactness.greedy_equals_nospec([[1, 2, 3], [4, 6]], OUT).detail


def test_drafts_equal_per_step_compares_position_and_every_draft():
    ok = exactness.drafts_equal_per_step(STEPS, STEPS)
    assert ok.ok and ok.as_json() == {"ok": True, "compared_drafts": 12}
    one_off = [[*STEPS[0][:2], [13, [11, 12, 14]], STEPS[0][3]]]
    moved = [[*STEPS[0][:2], [14, [11, 12, 13]], STEPS[0][3]]]
    cases = {"missing": (None, STEPS), "missing eager": (STEPS, None), "empty": ([], []),
             "a prompt without steps": ([[]], [[]]), "fewer prompts": (STEPS, STEPS * 2),
             "one step fewer": ([STEPS[0][:3]], STEPS), "one step more": (STEPS, [STEPS[0][:3]]),
             "fewer drafts": ([[[5, [3, 4]], *STEPS[0][1:]]], STEPS), "empty drafts": ([[[5, []]]], [[[5, []]]]),
             "one draft off": (one_off, STEPS), "another position": (moved, STEPS)}
    for case, (ours, ref) in cases.items():
        verdict = exactness.drafts_equal_per_step(ours, ref)
        assert not verdict.ok and verdict.detail, case
    off = exactness.drafts_equal_per_step(one_off, STEPS)
    assert off.count == 8 and "step 2 (position 13), draft 2: 14 vs 13" in off.detail
    assert "position 14 vs 13" in exactness.drafts_equal_per_step(moved, STEPS).detail
    assert "draft steps: 3 here vs 4" in exactness.drafts_equal_per_step([STEPS[0][:3]], STEPS).detail


COUNTS = {"drafts": 10, "draft_tokens": 30, "accepted": 24, "accepted_per_position": [10, 8, 6]}


def test_acceptance_counts_equal_fails_on_missing_empty_unequal_and_one_off():
    ok = exactness.acceptance_counts_equal(COUNTS, dict(COUNTS))
    assert ok.ok and ok.as_json() == {"ok": True, "compared_drafts": 30}
    cases = {"missing": (None, COUNTS), "missing eager": (COUNTS, {}),
             "no drafts": ({**COUNTS, "drafts": 0, "draft_tokens": 0}, {**COUNTS, "drafts": 0, "draft_tokens": 0}),
             "a counter missing": ({k: v for k, v in COUNTS.items() if k != "accepted"}, COUNTS),
             "no positions": ({**COUNTS, "accepted_per_position": []}, {**COUNTS, "accepted_per_position": []}),
             "fewer positions": ({**COUNTS, "accepted_per_position": [10, 8]}, COUNTS),
             "one off": ({**COUNTS, "accepted": 23, "accepted_per_position": [10, 8, 5]}, COUNTS)}
    for case, (ours, ref) in cases.items():
        assert not exactness.acceptance_counts_equal(ours, ref).ok, case


def test_every_position_tolerance_and_ranks_fail_on_nothing():
    assert exactness.every_position_accepted([1.0, 1.0]).as_json() == {"ok": True, "compared_positions": 2}
    for rates in (None, [], [1.0, 0.99]):
        assert not exactness.every_position_accepted(rates).ok
    assert exactness.within_tolerance([0.5, 0.3], [0.505, 0.3], 1).ok
    for ours, ref in ((None, [0.5]), ([0.5], []), ([0.5, 0.3], [0.5]), ([0.5], [0.52])):
        assert not exactness.within_tolerance(ours, ref, 1).ok
    graphs = {"first": [4, 8]}
    assert exactness.same_on_every_rank([graphs, dict(graphs)], 2).ok
    for values in ([None, None], [{}, {}], [graphs], [graphs, {"first": [4]}]):
        assert not exactness.same_on_every_rank(values, 2).ok, values


# -- the checks of one configuration -------------------------------------------------------------------------------
def correct_rows(**full_extra):
    return [run("nospec"), run("upstream_v1"), run("eager_drafter"), run("full_drafter", **{**GOOD_FULL,
                                                                                            **full_extra})]


def test_a_correct_run_has_every_new_check_named_and_counted():
    judged = judge(correct_rows(), [0], greedy=True, perfect=True)
    assert all(judged.checks.values()), judged.checks
    for name in ("full_drafter_s0_greedy_equals_nospec", "full_drafter_s0_drafts_equal_eager_per_step",
                 "full_drafter_s0_acceptance_counts_equal_eager", "upstream_v1_s0_drafts_equal_eager_per_step",
                 "upstream_v1_s0_acceptance_counts_equal_eager", "eager_drafter_s0_greedy_equals_nospec"):
        assert judged.checks[name] is True, name
    assert judged.evidence["full_drafter_s0_greedy_equals_nospec"] == {"ok": True, "compared_tokens": 3}
    assert judged.evidence["full_drafter_s0_drafts_equal_eager_per_step"] == {"ok": True, "compared_drafts": 12}
    assert judged.evidence["full_drafter_s0_acceptance_counts_equal_eager"]["compared_drafts"] == 12


def test_an_async_part_fails_each_engine_that_did_not_run_async():
    """``--async-scheduling`` parts (ctx_draft_model_async): an engine that ran synchronous steps anyway would pass
    every exactness check without testing the asynchronous path, so its own check fails."""
    rows = [dict(r, async_scheduling=True) for r in correct_rows()]
    judged = judge(rows, [0], greedy=True, perfect=True, async_scheduling=True)
    assert all(judged.checks.values()), judged.checks
    asked = [name for name in judged.checks if name.endswith("_async_scheduling")]
    assert sorted(asked) == ["eager_drafter_s0_async_scheduling", "full_drafter_s0_async_scheduling",
                             "upstream_v1_s0_async_scheduling"]
    rows[-1]["async_scheduling"] = False
    failing = [n for n, ok in judge(rows, [0], greedy=True, perfect=True, async_scheduling=True).checks.items()
               if not ok]
    assert failing == ["full_drafter_s0_async_scheduling"]
    del rows[2]["async_scheduling"]  # facts without the field: not a pass
    assert judge(rows, [0], greedy=True, perfect=True, async_scheduling=True).checks[
        "eager_drafter_s0_async_scheduling"] is False
    assert not any(n.endswith("_async_scheduling") for n in judge(correct_rows(), [0], greedy=True, perfect=True).checks)


def test_one_differing_draft_fails_only_the_per_step_oracle():
    steps = [[*STEPS[0][:3], [17, [15, 16, 99]]]]
    rows = [run("nospec"), run("eager_drafter"), run("full_drafter", steps=steps, **GOOD_FULL)]
    judged = judge(rows, [0], greedy=True, perfect=True)
    assert [name for name, ok in judged.checks.items() if not ok] == ["full_drafter_s0_drafts_equal_eager_per_step"]
    assert "draft 2: 99 vs 17" in judged.evidence["full_drafter_s0_drafts_equal_eager_per_step"]["detail"]


@pytest.mark.parametrize("broken,failing", [
    ({"draft_steps": None}, "full_drafter_s0_drafts_equal_eager_per_step"),
    ({"draft_steps": [[]]}, "full_drafter_s0_drafts_equal_eager_per_step"),
    ({"acceptance_counts": None}, "full_drafter_s0_acceptance_counts_equal_eager"),
    ({"acceptance_per_position": None}, "full_drafter_s0_every_position_100pct"),
    ({"outputs": []}, "full_drafter_s0_greedy_equals_nospec"),
])
def test_missing_or_empty_input_fails_its_check(broken, failing):
    judged = judge(correct_rows(**broken), [0], greedy=True, perfect=True)
    assert judged.checks[failing] is False and judged.evidence[failing][next(
        k for k in judged.evidence[failing] if k.startswith("compared_"))] == 0


def test_a_reference_that_crashed_fails_the_comparisons_instead_of_skipping_them():
    rows = [{"variant": "nospec", "seed": 0, "error": "exit 1"}, {"variant": "eager_drafter", "seed": 0,
                                                                   "error": "exit 1"},
            run("full_drafter", **GOOD_FULL)]
    checks = judge(rows, [0], greedy=True, perfect=True).checks
    assert checks["full_drafter_s0_greedy_equals_nospec"] is False
    assert checks["full_drafter_s0_drafts_equal_eager_per_step"] is False
    assert checks["full_drafter_s0_acceptance_counts_equal_eager"] is False
    # Without eager in the part (--variants), the comparisons with it are not asked for; greedy = nospec still is.
    alone = judge([run("full_drafter", **GOOD_FULL)], [0], greedy=True, perfect=True).checks
    assert "full_drafter_s0_drafts_equal_eager_per_step" not in alone
    assert alone["full_drafter_s0_greedy_equals_nospec"] is False


def test_our_variant_without_worker_facts_fails_instead_of_skipping_its_checks():
    facts_lost = {k: v for k, v in run("full_drafter", **GOOD_FULL).items() if k != "runner"}
    checks = judge([run("nospec"), run("eager_drafter"), facts_lost], [0], greedy=True, perfect=True).checks
    assert checks["full_drafter_s0_worker_facts"] is False
    assert judge(correct_rows(), [0], greedy=True, perfect=True).checks["full_drafter_s0_worker_facts"] is True


def test_chain_replays_are_required_by_k_not_by_what_acceptance_recorded():
    no_chain = {"replays": {"first": 3, "chain": 0}}
    rows = correct_rows(**no_chain, acceptance_per_position=[1.0])
    assert judge(rows, [0], greedy=True, perfect=True, k=3).checks["full_drafter_s0_chain_graphs_replayed"] is False
    assert "full_drafter_s0_chain_graphs_replayed" not in judge(rows, [0], greedy=True, perfect=True, k=1).checks


def test_the_tolerance_check_fails_on_missing_or_unequal_acceptance():
    rows = [run("eager_drafter", seed=s) for s in (0, 1)] + [run("full_drafter", seed=s, **GOOD_FULL)
                                                             for s in (0, 1)]
    assert judge(rows, [0, 1], greedy=True, perfect=False, tolerance_pts=1).checks[exactness.TOLERANCE]
    missing = rows[:3] + [{**rows[3], "acceptance_per_position": None}]
    assert mean_acceptance(missing, "full_drafter") is None
    assert judge(missing, [0, 1], greedy=True, perfect=False, tolerance_pts=1).checks[exactness.TOLERANCE] is False
    shorter = rows[:3] + [{**rows[3], "acceptance_per_position": [1.0, 1.0]}]
    assert judge(shorter, [0, 1], greedy=True, perfect=False, tolerance_pts=1).checks[exactness.TOLERANCE] is False


def test_same_graphs_on_every_rank_fails_when_no_rank_reports_its_graphs():
    none = {"graphs": 9, "num_tokens": None, "failed": {}}
    ranks = [{"rank": r, "capture_stats": none, "pointer_mismatches": 0} for r in (0, 1)]
    full = run("full_drafter", **{**GOOD_FULL, "tensor_parallel_size": 2, "ranks": ranks})
    checks = judge([run("nospec"), run("eager_drafter"), full], [0], greedy=True, perfect=True, tp=2).checks
    assert checks["full_drafter_s0_same_graphs_on_every_rank"] is False


def test_an_injected_bug_is_caught_only_by_an_exactness_check_on_a_run_that_fired():
    fired = {"injected_bug": {"name": "wrong_slot", "fired": {"wrong_slot": 40}}}
    steps = [[*STEPS[0][:3], [17, [15, 16, 99]]]]
    caught = judge([run("nospec"), run("eager_drafter"), run("full_drafter", steps=steps, **GOOD_FULL, **fired)],
                   [0], greedy=True, perfect=False, inject_bug="wrong_slot").checks
    outcome = bug_outcome(caught, "wrong_slot")
    assert outcome["caught"] and outcome["caught_by"] == ["full_drafter_s0_drafts_equal_eager_per_step"]
    assert outcome["caught_by_pre_oracle"] == [] and outcome["run_checks_failed"] == []
    unseen = judge(correct_rows(**fired), [0], greedy=True, perfect=False, inject_bug="wrong_slot").checks
    assert not bug_outcome(unseen, "wrong_slot")["caught"]
    never_fired = judge([run("nospec"), run("eager_drafter"), run("full_drafter", steps=steps, **GOOD_FULL)],
                        [0], greedy=True, perfect=False, inject_bug="wrong_slot").checks
    outcome = bug_outcome(never_fired, "wrong_slot")
    assert not outcome["caught"] and outcome["run_checks_failed"] == ["full_drafter_s0_injected_bug_fired"]


# -- regrouping the recorded rows ------------------------------------------------------------------------------------
def test_recorded_rows_regroup_per_prompt_by_external_request_id():
    rows = [{"step": 0, "req_id": "0-a1b2c3d4", "position": 5, "drafts": [1, 2]},
            {"step": 0, "req_id": "1-ffffffff", "position": 3, "drafts": [3, 4]},
            {"step": 1, "req_id": "1-ffffffff", "position": 6, "drafts": [5, 6]},
            {"step": 2, "req_id": "2-00000000", "position": 9, "drafts": [7, 8]},  # seed 1's prompt, ran late
            {"step": 2, "req_id": "99-12345678", "position": 1, "drafts": [0, 0]}]
    steps, summary = steps_by_prompt(rows, {0: ["0", "1"], 1: ["2"]})
    assert steps == {0: [[[5, [1, 2]]], [[3, [3, 4]], [6, [5, 6]]]], 1: [[[9, [7, 8]]]]}
    assert summary == {"rows": 5, "steps": 3, "unmatched_rows": 1}


def test_the_child_records_drafts_around_every_seed_and_always_stops():
    calls = []

    class Engine:
        def collective_rpc(self, fn):
            calls.append(fn.__name__)
            if fn is draft_recorder.take_recorded:
                return [[{"step": 0, "req_id": "0-x", "position": 3, "drafts": [1]}]]
            return ["Runner"]

    from portable_spec_harness.e2e.draft_steps import recorded_runs

    runs, summary = recorded_runs(Engine(), [0], lambda seed: {"seed": seed, "request_ids": ["0"]})
    assert calls == ["start_recording", "take_recorded", "stop_recording"]
    assert runs[0]["draft_steps"] == [[[3, [1]]]] and summary["wrapped"] == "Runner" and summary["ranks_agree"]

    def boom(seed):
        raise RuntimeError("engine died")

    calls.clear()
    with pytest.raises(RuntimeError):
        recorded_runs(Engine(), [0], boom)
    assert calls == ["start_recording", "stop_recording"]


# -- the recorder on vLLM's runner class -----------------------------------------------------------------------------
def fake_step(runner_cls):
    """A runner of ``runner_cls`` (not initialised: only what the recorder reads) and one decode step's inputs."""
    runner = runner_cls.__new__(runner_cls)
    runner.input_batch = types.SimpleNamespace(num_reqs=2, req_ids=["0-aaaaaaaa", "1-bbbbbbbb"])
    runner.num_computed_tokens = torch.tensor([10, 4, 0], dtype=torch.int32)
    scheduler_output = types.SimpleNamespace(num_scheduled_tokens={"0-aaaaaaaa": 4, "1-bbbbbbbb": 4},
                                             scheduled_spec_decode_tokens={"0-aaaaaaaa": [-1] * 3,
                                                                           "1-bbbbbbbb": [-1] * 3})
    # request 0 accepted 2 of 3 drafts (+ bonus): valid 3; request 1 accepted none: valid 1
    sampled = torch.tensor([[7, 8, 9, -1], [5, -1, -1, -1]], dtype=torch.int32)
    return runner, scheduler_output, sampled


def test_the_recorder_stamps_each_row_with_the_position_of_its_first_draft():
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    class Runner(GPUModelRunner):
        def propose_draft_token_ids(self, scheduler_output, sampled_token_ids, *rest):
            self.num_computed_tokens[:2] += 100  # a drafter writing runner buffers must not move the stamp
            return torch.tensor([[1, 2, 3], [4, 5, 6]])

    original = vars(Runner)["propose_draft_token_ids"]
    runner, scheduler_output, sampled = fake_step(Runner)
    with draft_recorder.recording(Runner) as recorder:
        assert vars(Runner)["propose_draft_token_ids"] is not original
        drafts = runner.propose_draft_token_ids(scheduler_output, sampled, None)
        assert drafts.tolist() == [[1, 2, 3], [4, 5, 6]]  # what the method returned, unchanged
        # request 0: 10 computed + 4 scheduled - 3 drafts + 3 valid = 14 (bonus at 13); request 1: 4 + 4 - 3 + 1
        assert recorder.take() == [{"step": 0, "req_id": "0-aaaaaaaa", "position": 14, "drafts": [1, 2, 3]},
                                   {"step": 0, "req_id": "1-bbbbbbbb", "position": 6, "drafts": [4, 5, 6]}]
        assert recorder.take() == []
    assert vars(Runner)["propose_draft_token_ids"] is original


def test_a_prefill_step_drafts_after_the_prompt():
    step = draft_recorder.StepRecord(["0-x"], torch.tensor([0]), [4], [0], torch.tensor([[42]]),
                                     torch.tensor([[1, 2, 3]]))
    assert step.rows(0) == [{"step": 0, "req_id": "0-x", "position": 5, "drafts": [1, 2, 3]}]
    short = draft_recorder.StepRecord(["0-x", "1-y"], [0, 0], [4, 4], [0, 0], [[42], [43]], [[1, 2, 3]])
    assert short.rows(0)[1]["drafts"] == []  # fewer draft rows than requests: the oracle fails, the fetch does not


def test_the_recorder_wraps_and_restores_vllms_own_class_and_ours():
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    from portable_spec.vllm_adapter.worker.v1_model_runner import PortableV1ModelRunner

    class Plain(GPUModelRunner):  # vLLM's own runner, as the upstream and eager variants use it
        pass

    vllms = vars(GPUModelRunner)["propose_draft_token_ids"]
    ours = vars(PortableV1ModelRunner)["propose_draft_token_ids"]
    assert draft_recorder.defining_class(Plain) is GPUModelRunner
    assert draft_recorder.defining_class(PortableV1ModelRunner) is PortableV1ModelRunner
    worker = types.SimpleNamespace(model_runner=Plain.__new__(Plain))
    assert draft_recorder.start_recording(worker) == "vllm.v1.worker.gpu_model_runner.GPUModelRunner"
    assert vars(GPUModelRunner)["propose_draft_token_ids"] is not vllms
    assert draft_recorder.take_recorded(worker) == []
    draft_recorder.stop_recording(worker)
    assert vars(GPUModelRunner)["propose_draft_token_ids"] is vllms
    assert "propose_draft_token_ids" not in vars(Plain)
    with pytest.raises(RuntimeError):
        with draft_recorder.recording(PortableV1ModelRunner):
            assert vars(PortableV1ModelRunner)["propose_draft_token_ids"] is not ours
            raise RuntimeError("the block failed")
    assert vars(PortableV1ModelRunner)["propose_draft_token_ids"] is ours
    assert vars(GPUModelRunner)["propose_draft_token_ids"] is vllms
    draft_recorder.stop_recording(worker)  # stopping twice is harmless


# -- the injected bugs ------------------------------------------------------------------------------------------------
def hook_points():
    return {name: vars(bug_injection.resolve_owner(bug.owner))[bug.attr] for name, bug in bug_injection.BUGS.items()}


def test_the_bug_names_are_one_list_in_envs_the_injector_and_the_matrix():
    matrix = load_ci_script("ci/gpu/v1_drafter_matrix.py")
    names = envs.BY_NAME[envs.INJECT_BUG_ENV].choices
    assert set(names) == set(bug_injection.BUGS) == set(matrix.BUGS) == set(load_e2e_script().INJECTABLE_BUGS)
    own = {"d2t_unmapped": "eagle3_d2t", "draft_position_off_by_one": "ctx_draft_model"}
    assert set(matrix.GROUPS["bugs"]) == {f"bug_{b}_{p}" for b in names if b not in own
                                          for p in ("ctx_eagle", "attention", "partial")} | {
        f"bug_{b}_{p}" for b, p in own.items()}  # only a head with a draft vocabulary takes the d2t gather; only
    # the draft model's chain takes its positions
    assert matrix.part_args("bug_d2t_unmapped_eagle3_d2t") == [
        *matrix.PARTS["eagle3_d2t"], "--variants", "nospec,eager_drafter,full_drafter", "--inject-bug", "d2t_unmapped"]
    assert matrix.part_args("bug_stale_seq_lens_perfect") == [
        *matrix.PARTS["perfect"], "--variants", "nospec,eager_drafter,full_drafter", "--inject-bug", "stale_seq_lens"]
    assert matrix.part_args("bug_stale_seq_lens_tp2_perfect") is None and matrix.part_args("bug_nope_partial") is None
    table = matrix.bug_table({"bug_wrong_slot_attention": {"caught": True}, "bug_wrong_slot_partial": {"caught": False},
                              "bug_stale_seq_lens_partial": None})
    assert table["wrong_slot"]["caught_somewhere"] and not table["stale_seq_lens"]["caught_somewhere"]


def test_unset_the_injection_installs_nothing(monkeypatch):
    monkeypatch.delenv(envs.INJECT_BUG_ENV, raising=False)
    assert envs.inject_bug() is None
    before = hook_points()
    with bug_injection.injected(envs.inject_bug()) as injection:
        assert injection is None and hook_points() == before
    monkeypatch.setenv(envs.INJECT_BUG_ENV, "off_by_two")
    with pytest.raises(Exception, match="is not one of"):
        envs.inject_bug()


@pytest.mark.parametrize("name", list(bug_injection.BUGS))
def test_each_bug_swaps_only_its_hook_point_and_restores_it(name):
    before = hook_points()
    with bug_injection.injected(name) as injection:
        during = hook_points()
        assert {n for n in before if during[n] is not before[n]} == {name}
        assert injection.report() == {"name": name, "fired": {}, "replays_with_bug": {}}
    assert hook_points() == before


def test_an_exported_bug_reaches_no_child_unless_the_driver_sets_it(monkeypatch):
    from portable_spec_harness.e2e.parent import variant_env

    monkeypatch.setenv(envs.INJECT_BUG_ENV, "wrong_slot")
    assert all(envs.INJECT_BUG_ENV not in variant_env(v) for v in ("nospec", "eager_drafter", "full_drafter"))


def test_the_child_refuses_a_bug_where_the_worker_is_another_process(monkeypatch):
    from portable_spec_harness.e2e import child

    monkeypatch.setenv(envs.INJECT_BUG_ENV, "wrong_slot")
    with pytest.raises(SystemExit, match="TP=1 only"):
        child.main(["--variant", "full_drafter", "--target", "t", "--tp", "2"])


class OurProposer:
    """Stands for our proposer: the wrappers act on DrafterGraphMixin instances only."""


def ours():
    from portable_spec.vllm_adapter.spec_decode.proposer import DrafterGraphMixin

    proposer = object.__new__(type("Proposer", (DrafterGraphMixin, OurProposer), {}))
    proposer.graph_k = 3
    proposer._slot_mapping_buffer = torch.arange(100, 116)
    proposer._draft_attn_layer_names = ["draft.attn"]
    return proposer


def test_wrong_slot_pads_the_last_requests_first_pass_rows_of_our_proposer_only():
    from vllm.v1.spec_decode.llm_base_proposer import SpecDecodeBaseProposer

    proposer, slots = ours(), torch.arange(8)
    with bug_injection.injected("wrong_slot") as injection:
        SpecDecodeBaseProposer._get_slot_mapping(proposer, 8, slots)
        assert proposer._slot_mapping_buffer[:8].tolist() == [0, 1, 2, 3, -1, -1, -1, -1]
        SpecDecodeBaseProposer._get_slot_mapping(proposer, 8)  # a chain step / capture: no slots handed in
        upstream = types.SimpleNamespace(_slot_mapping_buffer=torch.zeros(8, dtype=torch.long),
                                         _draft_attn_layer_names=[])
        SpecDecodeBaseProposer._get_slot_mapping(upstream, 8, slots)
        assert upstream._slot_mapping_buffer.tolist() == list(range(8))
    assert injection.fired["wrong_slot"] == 1


def test_stale_seq_lens_undoes_the_step_kernels_update_for_our_proposer():
    class Owner(OurProposer):
        def _update_positions_dependent_metadata(self, positions, common_attn_metadata, *rest):
            common_attn_metadata.seq_lens += 1
            return positions + 1

    proposer, cad = ours(), types.SimpleNamespace(seq_lens=torch.tensor([5, 9]))
    fired = []
    with bug_injection.BUGS["stale_seq_lens"].install(Owner, lambda: fired.append(1)):
        assert Owner._update_positions_dependent_metadata(proposer, torch.tensor([4, 8]), cad, 2, 2, 16).tolist() \
            == [5, 9]
        assert cad.seq_lens.tolist() == [5, 9] and fired == [1]
    Owner._update_positions_dependent_metadata(proposer, torch.tensor([4, 8]), cad, 2, 2, 16)
    assert cad.seq_lens.tolist() == [6, 10]


def test_position_off_by_one_starts_the_chain_one_position_too_far():
    seen = []

    class Owner:
        def _run_fused_chain(self, key, batch, positions, cad, num_rejected):
            seen.append(positions.tolist())

    with bug_injection.BUGS["position_off_by_one"].install(Owner, lambda: None):
        Owner()._run_fused_chain("key", 2, torch.tensor([7, 12]), None, None)
    Owner()._run_fused_chain("key", 2, torch.tensor([7, 12]), None, None)
    assert seen == [[8, 13], [7, 12]]


def test_wrong_num_computed_hands_off_one_requests_count_one_too_high():
    handed = []
    module = types.SimpleNamespace(hand_off_counts=lambda runner, tokens, counts: handed.append(counts.tolist()))
    counts = torch.tensor([4, 2, 1])
    with bug_injection.BUGS["wrong_num_computed"].install(module, lambda: None):
        module.hand_off_counts(None, torch.tensor([1, 2, 3]), counts)
    assert handed == [[5, 2, 1]] and counts.tolist() == [4, 2, 1]  # the drafter's own buffer is untouched


# -- the injections and the recorder on our drafter's real path (CPU stand-ins of the device work) -----------------
from test_v1_drafter_logic import (  # noqa: E402, F401 (capturing, vllm_kernels: fixtures, requested by name)
    MixingDraft, capturing, hand_off_of, runner_for, verify_step, vllm_kernels,
)

CHANGES = {"position_off_by_one": "drafts", "wrong_slot": "first_pass_slots", "stale_seq_lens": "seq_lens_after",
           "wrong_num_computed": "handed_off"}
"""What each bug changes in one verify-shaped step of our runner on CPU, where the draft stand-in reads token ids and
positions (``MixingDraft``) but no KV cache: on the GPU the KV slots and seq_lens change the drafts too."""


def our_step(capturing, monkeypatch):
    """Our runner's drafting of one verify-shaped step of 4 requests (fused first pass with the draft prep, fused
    chain), replayable: returns ``step() -> {what: value}``."""
    proposer, _, _ = capturing  # vLLM's own step kernel, interpreted, bound where the proposer calls it
    proposer.model = MixingDraft(proposer.hidden_states.shape[1])
    proposer.block_size = 16
    runner = runner_for(proposer)
    proposer.capture_graphs()
    for key, captured in proposer.graph_runner.captured.items():
        captured.graph.body = proposer.step_call(key).run
    buffers = ("input_ids", "positions", "hidden_states", "_slot_mapping_buffer")
    fresh = {name: getattr(proposer, name).clone() for name in buffers}

    def step():
        for name in buffers:
            getattr(proposer, name).copy_(fresh[name])
        runner.input_batch.prev_sampled_token_ids, runner.valid_sampled_token_count_event.records = None, 0
        args = verify_step(runner, proposer, 4)
        runner.num_computed_tokens = runner.seq_lens[:4] - (1 + proposer.graph_k)  # what the recorder stamps from
        args[0].num_scheduled_tokens = dict.fromkeys(runner.input_batch.req_ids, 1 + proposer.graph_k)
        args[0].scheduled_spec_decode_tokens = {rid: [-1] * d for rid, d in zip(runner.input_batch.req_ids,
                                                                                 args[6].num_draft_tokens)}
        with torch.inference_mode():
            drafts = runner.propose_draft_token_ids(*args)
        return {"drafts": drafts.tolist(), "handed_off": hand_off_of(runner),
                "seq_lens_after": runner.seq_lens[:4].tolist(),
                "first_pass_slots": proposer.model.slots[-proposer.graph_k]}

    return step, proposer


@pytest.mark.parametrize("bug", [b for b in bug_injection.BUGS if b in CHANGES])
def test_each_injected_bug_fires_on_our_drafters_path_and_changes_what_it_names(capturing, monkeypatch, bug):
    """(``d2t_unmapped`` needs a head with a draft vocabulary: ``tests/test_eagle3_draft_vocabulary.py``.)"""
    step, proposer = our_step(capturing, monkeypatch)
    clean = step()
    with bug_injection.injected(bug) as injection:
        buggy = step()
    assert injection.fired[bug] >= 1
    assert buggy[CHANGES[bug]] != clean[CHANGES[bug]]
    assert step() == clean  # restored: the next step is exact again
    if bug == "wrong_slot":  # the last request's 1+K first-pass rows write no KV
        q = 1 + proposer.graph_k
        assert buggy["first_pass_slots"][:3 * q] == clean["first_pass_slots"][:3 * q]
        assert buggy["first_pass_slots"][3 * q:4 * q] == [-1] * q


def test_the_recorder_sees_what_our_runner_returns_with_each_rows_draft_position(capturing, monkeypatch):
    from portable_spec.vllm_adapter.worker.v1_model_runner import PortableV1ModelRunner

    step, proposer = our_step(capturing, monkeypatch)
    with draft_recorder.recording(PortableV1ModelRunner) as recorder:
        out = step()
    rows = recorder.take()
    assert [row["drafts"] for row in rows] == out["drafts"] and [row["step"] for row in rows] == [0] * 4
    # seq_lens 20, 37, 40, 52 hold the 1+K verified tokens; rows accept 1, K, -, 2 drafts of K, K, 0, K: the
    # first draft goes after the last verified token (row 2 is a prompt chunk: one sampled token after it)
    k = proposer.graph_k
    assert [row["position"] for row in rows] == [20 - k + 2, 37 - k + k + 1, 40 + 1, 52 - k + 3]


def test_the_design_checks_fail_on_nothing_and_on_one_difference():
    good = exactness.greedy_equals_design([[1, 2], [3]], [[1, 2], [3]])
    assert good.ok and good.count == 3
    for ours, designed in (([], [[1]]), (None, [[1]]), ([[1]], None), ([[1, 2]], [[1, 3]]), ([[1]], [[1], [2]])):
        assert not exactness.greedy_equals_design(ours, designed).ok


def counts(drafts, per_position):
    return {"drafts": drafts, "accepted_per_position": per_position}


def test_designed_acceptance_allows_only_the_windows_a_requests_end_cuts():
    """What the H100 measured for vLLM's own eager drafter passes; what an injected bug cost there fails."""
    check = exactness.acceptance_as_designed
    assert check(counts(120, [120, 120, 119]), [1.0, 1.0, 1.0], 10).as_json() == {"ok": True, "compared_positions": 3}
    assert check(counts(160, [158, 158, 0]), [1.0, 1.0, 0.0], 10).ok
    assert not check(counts(155, [108, 108, 107]), [1.0, 1.0, 1.0], 10).ok  # wrong_slot on the context pair
    assert not check(counts(134, [116, 116, 115]), [1.0, 1.0, 1.0], 10).ok  # wrong_num_computed
    assert not check(counts(160, [158, 158, 1]), [1.0, 1.0, 0.0], 10).ok  # a designed 0 accepts nothing
    assert not check(counts(120, [120, 109, 120]), [1.0, 1.0, 1.0], 10).ok  # 11 short with 10 requests
    for bad in ((None, [1.0], 1), (counts(0, []), [1.0], 1), (counts(5, [5]), None, 1), (counts(5, [5]), [1.0], 0),
                (counts(5, [5, 5]), [1.0], 1), (counts(5, [5]), [0.5], 1)):
        assert not check(*bad).ok


def test_a_context_pair_is_judged_against_its_construction():
    """Greedy runs of a context pair: the no-speculation run must give the designed output and the drafters the
    designed acceptance; a run that drifts from either fails even where the two runs agree with each other."""
    from portable_spec_harness.e2e.v1_checks import judge

    design = {"outputs": {0: [[7, 8]]}, "acceptance": [1.0, 1.0, 0.0]}
    base = {"seed": 0, "use_v2_model_runner": False, "outputs": [[7, 8]], "acceptance_counts": counts(4, [4, 3, 0])}
    rows = [{**base, "variant": "nospec", "acceptance_counts": None}, {**base, "variant": "eager_drafter"}]
    checks = judge(rows, [0], True, False, design=design).checks
    assert checks["nospec_s0_greedy_equals_design"] and checks["eager_drafter_s0_acceptance_as_designed"]
    drifted = [{**r, "outputs": [[7, 9]]} if r["variant"] == "nospec" else r for r in rows]
    assert not judge(drifted, [0], True, False, design=design).checks["nospec_s0_greedy_equals_design"]
    low = [{**r, "acceptance_counts": counts(4, [4, 2, 0])} if r["variant"] == "eager_drafter" else r for r in rows]
    assert not judge(low, [0], True, False, design=design).checks["eager_drafter_s0_acceptance_as_designed"]
    assert not any("design" in name for name in judge(rows, [0], True, False).checks)  # f-chain pairs: none
