"""vLLM 0.28.0's Model Runner V2 sampler against ``mrv2_sampling_plan_028`` (issues 40 and 41 item 2): the Triton
kernels a sampled request compiles, counted from vLLM's own ``Sampler`` and ``RejectionSampler``.

A child process (``mrv2_sampled_compiles_child.py``) builds both as the runner does and runs sampler steps through
them, recording each Triton launch's compile key (Triton's own binder: constexprs, argument types, value and
alignment specialization) instead of compiling it. Three sets of steps:

- the warm-up's: ``kernel_warmup.warmup_schedule`` of the plan's rounds (vLLM's ``SchedulerOutput``s), each step's
  requests with their ``SamplingParams`` and logits rows (1 + drafts);
- serving's: a broad set of request mixes an engine of these limits can get (every sampling kind seeded and not,
  with each logprobs count, alone or beside greedy requests, in main-sampler steps of 1 to 20 requests and verify
  steps of 1 to 20 requests, with and without a prompt joining);
- vLLM 0.28.0's own warm-up's (``v1/worker/gpu/warmup.py``: one ``for_sampler_warmup`` batch, its decode steps).

Every key serving reaches must be one the planned steps compile; vLLM's warm-up alone must leave some (else the plan
would not be needed); per kernel, serving must reach no more variants than the model counts (a specialization the
model does not know fails here); and the plan without a profile, or without one of its rounds, must leave a serving
key uncompiled (the test bites). MUSA's case: no FlashInfer sampler, no JIT registry.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter

import pytest

from portable_spec.vllm_adapter.patch import version_gate
from portable_spec.vllm_adapter.worker import mrv2_sampling_plan_028 as plan
from portable_spec.vllm_adapter.worker import mrv2_sampling_plan_033 as plan033
from portable_spec.vllm_adapter.worker import mrv2_warmup
from portable_spec.vllm_adapter.worker.kernel_warmup import warmup_schedule
from portable_spec.vllm_adapter.worker.sampling_plan import TOP_P, TOPK_TOPP, SamplingLimits
from portable_spec.vllm_adapter.worker.warmup_plan import Limits

pytestmark = pytest.mark.skipif(version_gate.pick({"0.26.0": True, "0.28.0": False, "0.33.0": True}),
                                reason="vLLM 0.28.0's MRV2 sampler is held to mrv2_sampling_plan_028 on 0.28.0 only")

VOCAB, MAX_REQS, K, MAX_LOGPROBS = 1000, 20, 3, 20
LIMITS = Limits(max_reqs=MAX_REQS, max_tokens=8192, max_len=4096, k=K, dflash=False, block_sizes=(16,),
                free_blocks=4096)
SAMPLING = SamplingLimits(max_logprobs=MAX_LOGPROBS)
KINDS = {  # SamplingParams per kind of request (temperature 1 with top-p: processed, no temperature kernel)
    "greedy": {"temperature": 0.0}, "temperature_1": {"temperature": 1.0}, "temperature": {"temperature": 0.8},
    "top_k": {"temperature": 0.8, "top_k": 20}, "top_p": {"temperature": 0.8, "top_p": 0.95},
    "top_k_top_p": {"temperature": 0.8, "top_k": 20, "top_p": 0.95}, "min_p": {"temperature": 0.8, "min_p": 0.1},
    "temperature_1_top_p": {"temperature": 1.0, "top_p": 0.9},
}
LOGPROBS = (None, 0, 1, 5, 15, 20)


def params_of(sp) -> dict:
    return {"temperature": sp.temperature, "top_k": sp.top_k, "top_p": sp.top_p, "min_p": sp.min_p,
            "seed": sp.seed, "logprobs": sp.logprobs}


def scheduled_steps(rounds) -> list[dict]:
    """The sampler steps of the warm-up's scheduler outputs, as MRV2's runner samples them: every scheduled request
    one logits row, 1 + drafts where it verifies drafts (the rejection sampler), else the main sampler."""
    outputs = warmup_schedule(rounds, LIMITS, VOCAB, True, sampler=plan.PLAN.request_sampling,
                              req_prefix=mrv2_warmup.REQ_PREFIX)
    params, steps = {}, []
    for out in outputs:
        for new in out.scheduled_new_reqs:
            params[new.req_id] = params_of(new.sampling_params)
        if not out.total_num_scheduled_tokens:
            continue
        drafts = out.scheduled_spec_decode_tokens
        steps.append({"verify": bool(drafts), "reqs": [[params[r], 1 + len(drafts.get(r, ()))]
                                                       for r in out.num_scheduled_tokens]})
    return steps


def serving_steps() -> list[dict]:
    kinds = [{**p, "seed": seed, "logprobs": lp} for p in KINDS.values() for seed in (None, 7) for lp in LOGPROBS]
    steps = []
    for kind in kinds:
        for n in (1, 2, 7, 8, 9, 15, 16, 17, 20):
            steps.append({"verify": False, "reqs": [[kind, 1]] * n})
            steps.append({"verify": False, "reqs": [[KINDS["greedy"], 1]] * (n - 1) + [[kind, 1]]})
        for n in (1, 2, 3, 4, 5, 8, 20):
            steps.append({"verify": True, "reqs": [[kind, K + 1]] * n})
            steps.append({"verify": True, "reqs": [[KINDS["greedy"], K + 1]] * (n - 1) + [[kind, K + 1]]})
            if n < MAX_REQS:
                steps.append({"verify": True, "reqs": [[kind, K + 1]] * n + [[kind, 1]]})
    return steps


def vllm_warmup_steps() -> list[dict]:
    """vLLM 0.28.0's ``warmup_kernels`` (``v1/worker/gpu/warmup.py:256-410``) on these limits: one batch of
    ``for_sampler_warmup`` requests, prefilled, then decode steps of all (with drafts), two (one with drafts), two
    without, one with, one without."""
    from vllm.sampling_params import SamplingParams

    warm = params_of(SamplingParams.for_sampler_warmup())
    n = min(MAX_REQS, LIMITS.max_tokens // (K + 2))
    shapes = [(False, [1] * n), (True, [K + 1] * n), (True, [K + 1, 1]), (False, [1, 1]), (True, [K + 1]),
              (False, [1])]
    return [{"verify": verify, "reqs": [[warm, r] for r in rows]} for verify, rows in shapes]


def compile_keys(steps: list[dict]) -> list[set[str]]:
    ask = {"vocab": VOCAB, "max_reqs": MAX_REQS, "k": K, "logprobs_mode": SAMPLING.logprobs_mode,
           "model_dtype": "bfloat16", "steps": steps}
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(VLLM_LOGGING_STREAM="ext://sys.stderr", VLLM_PLUGINS="",
               PYTHONPATH=os.pathsep.join(p for p in (os.path.dirname(os.path.dirname(__file__)),
                                                      env.get("PYTHONPATH", "")) if p))
    proc = subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "mrv2_sampled_compiles_child.py")],
                          input=json.dumps(ask), capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0 and proc.stdout.strip(), proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(out) == len(steps)
    return [set(keys) for keys in out]


@pytest.fixture(scope="module")
def observed():
    """One child run: the keys of every step of the plan, of the plan without its top-p profile, of each planned
    round, of serving and of vLLM's warm-up."""
    rounds, uncovered = plan.plan_rounds(LIMITS, SAMPLING)
    assert rounds and not uncovered
    per_round = [scheduled_steps([rnd]) for rnd in rounds]
    without_top_p = scheduled_steps(plan.plan_rounds(LIMITS, SAMPLING, dropped=(TOP_P,))[0])
    groups = {"serving": serving_steps(), "vllm_warmup": vllm_warmup_steps(), "without_top_p": without_top_p}
    groups.update({f"round{i}": steps for i, steps in enumerate(per_round)})
    flat = [step for steps in groups.values() for step in steps]
    keys = iter(compile_keys(flat))
    found = {name: set().union(*(next(keys) for _ in steps)) for name, steps in groups.items()}
    found["planned"] = set().union(*(found[f"round{i}"] for i in range(len(rounds))))
    return rounds, found


def kernel(key: str) -> str:
    return key.split("|", 1)[0]


def test_every_kernel_variant_serving_reaches_is_compiled_by_the_planned_rounds(observed):
    _, found = observed
    serving, planned = found["serving"], found["planned"]
    assert len(serving) >= 25, Counter(kernel(k) for k in serving)
    assert not serving - planned, sorted(serving - planned)
    assert {"_temperature_kernel", "_min_p_kernel", "_topk_topp_kernel", "_gumbel_sample_kernel",
            "_compute_local_logits_stats_kernel", "_rejection_kernel", "_resample_kernel",
            "_topk_log_softmax_kernel", "_ranks_kernel", "_flatten_sampled_kernel"} <= {kernel(k) for k in serving}


def test_vllms_own_warm_up_leaves_variants_to_the_first_requests(observed):
    """What MRV2's own 0.28.0 warm-up compiles is not enough: serving reaches more (without the plan they compile at
    the first sampled requests, after vLLM activates its JIT monitor)."""
    _, found = observed
    left = found["serving"] - found["vllm_warmup"]
    by_kernel = Counter(kernel(k) for k in left)
    assert {"_topk_topp_kernel", "_gumbel_sample_kernel", "_compute_local_logits_stats_kernel",
            "_rejection_kernel", "_resample_kernel", "_topk_log_softmax_kernel"} <= set(by_kernel), by_kernel


def test_serving_reaches_no_more_variants_per_kernel_than_the_model_counts(observed):
    """The model's keys are at least as fine as Triton's: per modeled kernel, the variants serving compiles are no
    more than the model's reachable keys of that kernel (a specialization the model misses would exceed it)."""
    _, found = observed
    model = Counter(key[0] for key in plan.reachable_keys(LIMITS, SAMPLING))
    real = Counter(kernel(k) for k in found["serving"])
    assert set(model) <= set(real) | {plan033.CUMULATIVE, plan033.RESIDUAL}
    over = {name: (real[name], model[name]) for name in model if real[name] > model[name]}
    assert not over, over
    assert real[TOPK_TOPP] == model[TOPK_TOPP] == 6  # (top-k, top-p, both) x (16k rows, other rows >= 8)


def test_without_a_profile_or_a_round_a_served_variant_is_left(observed):
    """The test bites: the plan without its top-p rounds, or without any one of its rounds, compiles less than
    serving reaches."""
    rounds, found = observed
    assert found["serving"] - found["without_top_p"]
    assert any(kernel(k) == TOPK_TOPP for k in found["serving"] - found["without_top_p"])
    needed = 0
    for i in range(len(rounds)):
        others = set().union(*(found[f"round{j}"] for j in range(len(rounds)) if j != i))
        needed += bool(found["serving"] - others)
    assert needed >= len(rounds) // 2, (needed, len(rounds))


def test_the_version_span_runs_this_module():
    from version_span import MODULES

    assert {"test_mrv2_sampled_compiles_028.py", "test_mrv2_sampling_plan_028.py"} <= set(MODULES)


def test_the_serving_steps_hold_every_kind_at_every_row_class():
    steps = serving_steps()
    rows = {sum(r for _, r in s["reqs"]) for s in steps if s["verify"]}
    assert {4, 8, 16, 17, 80} <= rows and max(rows) <= MAX_REQS * (K + 1)
    assert all(len(s["reqs"]) <= MAX_REQS for s in steps)
    kinds = {json.dumps(p, sort_keys=True) for s in steps for p, _ in s["reqs"]}
    assert len(kinds) == len(KINDS) * 2 * len(LOGPROBS) + 1  # and the plain greedy requests beside one of a kind
    assert all(lp is None or lp <= MAX_LOGPROBS for lp in LOGPROBS)
