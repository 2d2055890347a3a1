"""The warm-up's sampled rounds (``vllm_adapter.worker.sampling_plan``, run by ``kernel_warmup``), on CPU.

Three checks, each independent of the plan's own key model: vLLM's source names exactly the kernels and arguments
the plan models (a new kernel, argument or constexpr fails); the plan covers what serving reaches over a grid of
engines; and the scheduler outputs the warm-up builds, fed through vLLM's real V1 ``InputBatch`` (as its runner feeds
them), give ``SamplingMetadata`` whose kernel variants (derived here from vLLM's code paths, not from the plan) cover
every reachable one. The planted bugs (a top-p dropped, a wrong constexpr, an unmodelled kernel) show each check
bites. The real steps run on the cuda lane: no "during inference:" line after boot (serve_bench's server check).
"""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest
import torch

from portable_spec.vllm_adapter.worker import sampling_plan as sp
from portable_spec.vllm_adapter.worker.warmup_plan import Limits, int_class
from vllm_configs import pair_config

VLLM_SAMPLE_FILES = ("v1/sample/rejection_sampler.py", "v1/sample/ops/topk_topp_triton.py",
                     "v1/sample/ops/topk_topp_sampler.py", "v1/sample/sampler.py", "v1/sample/ops/logprobs.py",
                     "v1/sample/ops/penalties.py", "v1/sample/ops/bad_words.py")


def vllm_root() -> Path:
    import vllm

    return Path(vllm.__file__).parent


def launched_kernels(files=VLLM_SAMPLE_FILES) -> dict[str, list[str]]:
    """Every ``@triton.jit`` function of ``files`` that is launched there (``name[grid](...)``), with its parameters."""
    found: dict[str, list[str]] = {}
    for rel in files:
        tree = ast.parse((vllm_root() / rel).read_text())
        jitted = {node.name: [a.arg for a in node.args.args] for node in ast.walk(tree)
                  if isinstance(node, ast.FunctionDef) and any("jit" in ast.unparse(d) for d in node.decorator_list)}
        launched = {node.func.value.id for node in ast.walk(tree)
                    if isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript)
                    and isinstance(node.func.value, ast.Name)}
        found.update({name: params for name, params in jitted.items() if name in launched})
    return found


def model_gaps(table: dict, source: dict) -> list[str]:
    """What the plan's kernel table and vLLM's source disagree on (kernels, then arguments)."""
    gaps = [f"kernel {k} launched by vLLM, not modelled" for k in sorted(set(source) - set(table))]
    gaps += [f"kernel {k} modelled, not launched by vLLM" for k in sorted(set(table) - set(source))]
    for kernel in sorted(set(source) & set(table)):
        for missing in sorted(set(source[kernel]) ^ set(table[kernel])):
            gaps.append(f"{kernel}.{missing}: in {'vLLM' if missing in source[kernel] else 'the table'} only")
    return gaps


# ---- vLLM's source ---------------------------------------------------------------------------------------------
def test_every_kernel_and_argument_of_vllms_sampling_path_is_modelled():
    source = launched_kernels()
    assert len(source) == len(sp.V1_SAMPLER_KERNELS) == 5
    assert model_gaps(sp.V1_SAMPLER_KERNELS, source) == []
    compared = sum(len(params) for params in source.values())
    assert compared == sum(len(v) for v in sp.V1_SAMPLER_KERNELS.values()) and compared > 40


def test_a_new_constexpr_or_kernel_in_vllm_is_caught():
    """Planted: the table misses a constexpr, and vLLM launches a kernel the table does not know."""
    source = launched_kernels()
    table = {k: {p: v for p, v in params.items() if p != "TOPP_ENABLED"} for k, params in sp.V1_SAMPLER_KERNELS.items()}
    assert model_gaps(table, source) == ["_topk_topp_kernel.TOPP_ENABLED: in vLLM only"]
    assert model_gaps(sp.V1_SAMPLER_KERNELS, {**source, "_new_kernel": ["X"]}) == [
        "kernel _new_kernel launched by vLLM, not modelled"]


def test_the_row_threshold_and_the_int32_top_k_are_vllms():
    """``TRITON_MIN_ROWS`` is vLLM's Triton threshold; the input batch holds top-k as int32 while vLLM's own sampler
    warm-up expands an int64 one (why the plan needs the int32 ``expand_kernel``)."""
    text = (vllm_root() / "v1/sample/ops/topk_topp_sampler.py").read_text()
    assert re.findall(r"HAS_TRITON and logits\.shape\[0\] >= (\d+)", text) == [str(sp.TRITON_MIN_ROWS)]
    batch = (vllm_root() / "v1/worker/gpu_input_batch.py").read_text()
    assert "self.top_k = torch.empty((max_num_reqs,), dtype=torch.int32" in batch
    runner = (vllm_root() / "v1/worker/gpu_model_runner.py").read_text()
    assert "top_k=dummy_tensors(logits.size(1) - 1)" in runner  # a Python int: an int64 tensor
    assert torch.full((2,), 5).dtype == torch.int64


def test_min_p_has_no_kernel_with_speculation_on_v1(vllm_platform, tmp_path, monkeypatch):
    """vLLM's V1 builds only the min-tokens processor when speculating: min-p needs no round."""
    import vllm.utils.torch_utils as torch_utils
    from vllm.v1.sample.logits_processor import build_logitsprocs

    from portable_spec_harness.model_zoo import build_pair

    pair = build_pair("llama_eagle", tmp_path, variant="perfect")
    cfg = pair_config(pair, max_model_len=512)
    monkeypatch.setattr(torch_utils, "PIN_MEMORY", False)  # no pinned-memory allocator on a CPU-only host
    procs = build_logitsprocs(cfg, torch.device("cpu"), False, False)
    names = [type(p).__name__ for p in procs.all]
    assert names == ["MinTokensLogitsProcessor"]


# ---- the plan --------------------------------------------------------------------------------------------------
GRID = [(max_reqs, k, probabilistic) for max_reqs in (1, 2, 3, 8, 16, 64, 256) for k in (1, 3, 4)
        for probabilistic in (False, True)]


def planned(max_reqs: int, k: int, probabilistic: bool, max_tokens: int = 8192):
    limits = Limits(max_reqs=max_reqs, max_tokens=max_tokens, max_len=2048, k=k, dflash=False)
    sampling = sp.SamplingLimits(probabilistic_drafts=probabilistic)
    plan = sp.plan_v1_warmup(limits, sampling)
    return limits, sampling, plan.greedy, plan.sampled, plan.left


@pytest.mark.parametrize("max_reqs,k,probabilistic", GRID)
def test_the_sampled_rounds_cover_what_serving_reaches(max_reqs, k, probabilistic):
    limits, sampling, greedy, rounds, uncovered = planned(max_reqs, k, probabilistic)
    goal = sp.sampled_reachable_keys(limits, sampling)
    assert goal and len(rounds) <= 8 and all(r.fits(limits) for r in rounds)
    assert uncovered == frozenset()  # rows of 16 with fewer than 16 requests: from rounds with trimmed drafts
    assert all(r.trimmed == 0 for r in rounds) or max_reqs < 16
    every = frozenset().union(*(sp.sampled_round_keys(r, limits, sampling) for r in greedy + rounds))
    assert every >= goal
    # Independently of the keys: each top-k/top-p combination at each row class where serving reaches 8+ rows.
    combos = {(key[1], key[2]) for key in every if key[0] == sp.TOPK_TOPP}
    if sp.max_rows(limits) >= 16 and max_reqs >= 16:
        assert combos == {(True, False), (False, True), (True, True)}


def test_the_plan_at_vllms_defaults():
    limits, sampling, _, rounds, uncovered = planned(256, 3, False)
    assert uncovered == frozenset()
    assert sorted((len(r.prompts), r.join, r.profile) for r in rounds) == [
        (1, 0, "top_k_top_p"), (3, 0, "top_k"), (3, 0, "top_p"), (15, 5, "mixed"), (16, 0, "top_k"), (16, 0, "top_p")]


# ---- the steps, through vLLM's real input batch ----------------------------------------------------------------
def metadata_keys(outputs, vocab_size: int, k: int, probabilistic: bool, max_reqs: int) -> tuple[set, int]:
    """The sampling-path variants vLLM's V1 runner would compile for ``outputs``, derived from the real
    ``SamplingMetadata`` its ``InputBatch`` builds for each step (vLLM 0.26.0's code paths, written out here); and
    how many steps were compared."""
    import vllm.v1.worker.gpu_input_batch as gib
    from vllm.v1.worker.gpu_input_batch import CachedRequestState, InputBatch

    saved, gib.PIN_MEMORY = getattr(gib, "PIN_MEMORY", False), False
    try:
        batch = InputBatch(max_num_reqs=max_reqs + 1, max_model_len=2048, max_num_batched_tokens=8192,
                           device=torch.device("cpu"), vocab_size=vocab_size, block_sizes=[16],
                           kernel_block_sizes=[16], max_num_blocks_per_req=[256], num_spec_tokens=k)
    finally:
        gib.PIN_MEMORY = saved
    keys: set = set()
    steps = 0
    probs_from_last_step = False
    for out in outputs:
        for req_id in out.finished_req_ids:
            batch.remove_request(req_id)
        for new in out.scheduled_new_reqs:
            params = new.sampling_params
            generator = None
            if params.seed is not None:
                generator = torch.Generator(device="cpu")
                generator.manual_seed(params.seed)
            batch.add_request(CachedRequestState(
                req_id=new.req_id, prompt_token_ids=new.prompt_token_ids, mm_features=[], sampling_params=params,
                generator=generator, block_ids=new.block_ids, num_computed_tokens=0, output_token_ids=[]))
        batch.condense()
        batch.refresh_metadata()
        if not out.total_num_scheduled_tokens:
            continue
        steps += 1
        meta = batch.sampling_metadata
        rows = batch.num_reqs
        drafts = sum(len(d) for d in out.scheduled_spec_decode_tokens.values())

        def topk_topp(n: int, sampler_path: bool) -> None:
            if sampler_path and n >= 8 and (meta.top_k is not None or meta.top_p is not None):
                keys.add((sp.TOPK_TOPP, meta.top_k is not None, meta.top_p is not None, int_class(n)))

        if not meta.all_greedy:
            topk_topp(rows, bool(meta.generators))  # main (and bonus) sampler: Triton with a generator
            if meta.max_num_logprobs is not None:
                keys.add((sp.LOGPROBS,))
        if drafts:
            if meta.all_greedy:
                keys.add((sp.GREEDY_REJECT, sp.ALL_GREEDY))
            else:
                if not meta.all_random:
                    keys.add((sp.GREEDY_REJECT, sp.MIXED))
                has_probs = probabilistic and probs_from_last_step
                keys |= {(sp.RANDOM_REJECT, has_probs), (sp.RECOVERED, has_probs)}
                for values in (meta.temperature, meta.top_k, meta.top_p):
                    if values is not None:
                        keys.add((sp.EXPAND, str(values.dtype).removeprefix("torch.")))
                topk_topp(drafts, True)
        # The drafter proposes after every step: with draft probabilities where the batch is not all greedy.
        probs_from_last_step = not meta.all_greedy
    return keys, steps


def schedule(max_reqs: int, k: int, probabilistic: bool, vocab_size: int = 4096):
    from portable_spec.vllm_adapter.worker.kernel_warmup import warmup_schedule

    limits, sampling, greedy, rounds, uncovered = planned(max_reqs, k, probabilistic)
    return limits, sampling, uncovered, warmup_schedule(greedy + rounds, limits, vocab_size, sampling.logprobs)


@pytest.mark.parametrize("max_reqs,k,probabilistic", [(64, 3, False), (256, 3, True), (16, 1, False), (3, 4, True),
                                                     (8, 3, False), (6, 5, True)])
def test_the_steps_give_vllms_sampler_every_reachable_variant(vllm_platform, max_reqs, k, probabilistic):
    limits, sampling, uncovered, outputs = schedule(max_reqs, k, probabilistic)
    derived, steps = metadata_keys(outputs, 4096, k, probabilistic, max_reqs)
    goal = sp.sampled_reachable_keys(limits, sampling)
    assert steps == sum(1 for o in outputs if o.total_num_scheduled_tokens) and steps >= 2
    assert goal and not uncovered and derived >= goal, sorted(map(str, goal - derived))
    # Real SamplingParams: vLLM validated each; seeded and unseeded sampled requests, top-k kept below the vocab.
    params = [n.sampling_params for o in outputs for n in o.scheduled_new_reqs]
    sampled = [p for p in params if p.temperature > 0]
    assert sampled and any(p.seed is not None for p in sampled) and any(p.seed is None for p in sampled)
    assert all(0 <= p.top_k < 4096 for p in params) and any(p.logprobs for p in sampled)


def test_without_trimmed_drafts_eight_requests_leave_the_16_row_variants(vllm_platform, monkeypatch):
    """Planted: no round with trimmed drafts. At most 8 requests and K=3 (the H200 server of 8 sequences whose
    warm-up left ``_topk_topp_kernel`` x3), vLLM's real input batch then never gets 16 draft rows."""
    monkeypatch.setattr(sp, "trimmed_rounds", lambda candidates, limits: [])
    limits, sampling, uncovered, outputs = schedule(8, 3, False)
    derived, steps = metadata_keys(outputs, 4096, 3, False, 8)
    assert steps >= 2 and uncovered == {(sp.TOPK_TOPP, k, p, "16") for k, p in ((True, False), (False, True),
                                                                                  (True, True))}
    assert not derived & uncovered and sp.sampled_reachable_keys(limits, sampling) - derived == uncovered


def test_a_dropped_top_p_is_caught(vllm_platform, monkeypatch):
    """Planted: the scheduler outputs lose the top-p (the plan still thinks it warmed it)."""
    from portable_spec.vllm_adapter.worker import kernel_warmup

    monkeypatch.setattr(kernel_warmup, "sampling_params", lambda s, vocab: kernel_warmup.SamplingParams(
        temperature=s.temperature, top_k=s.top_k, seed=s.seed, logprobs=s.logprobs))
    limits, sampling, uncovered, outputs = schedule(64, 3, False)
    derived, _ = metadata_keys(outputs, 4096, 3, False, 64)
    missing = sp.sampled_reachable_keys(limits, sampling) - uncovered - derived
    assert {key[:3] for key in missing} == {(sp.TOPK_TOPP, False, True), (sp.TOPK_TOPP, True, True)}


def test_a_wrong_constexpr_in_the_model_is_caught(vllm_platform, monkeypatch):
    """Planted: the model says a top-p-only batch compiles TOPK_ENABLED too, so it plans no top-p-only round."""
    real = sp._batch_keys

    def wrong(reqs, rows):
        return {(key[0], True, key[2], key[3]) for key in real(reqs, rows)}

    monkeypatch.setattr(sp, "_batch_keys", wrong)
    limits, sampling, uncovered, outputs = schedule(64, 3, False)
    derived, _ = metadata_keys(outputs, 4096, 3, False, 64)
    monkeypatch.setattr(sp, "_batch_keys", real)
    missing = sp.sampled_reachable_keys(limits, sampling) - derived
    assert {key[:3] for key in missing} == {(sp.TOPK_TOPP, False, True)}


def test_sampling_params_are_vllms_and_keep_top_k_below_the_vocab():
    from portable_spec.vllm_adapter.worker.kernel_warmup import sampling_params

    built = sampling_params(sp.request_sampling(sp.TOP_K_TOP_P, 0), 16)
    assert (built.temperature, built.top_k, built.top_p, built.seed, built.logprobs) == (0.8, 15, 0.95, 1000, 2)
    assert dataclasses.astuple(sp.request_sampling(sp.MIXED_PROFILE, 3)) == dataclasses.astuple(sp.GREEDY)
    assert sp.request_sampling(sp.TOP_P, 1).seed is None and sp.request_sampling(sp.TOP_P, 1).top_k == 0


def test_the_v1_plan_runs_greedy_rounds_first_and_plans_nothing_sampled_where_no_step_fits():
    roomy = sp.plan_v1_warmup(Limits(max_reqs=8, max_tokens=8192, max_len=2048, k=3, dflash=False),
                              sp.SamplingLimits())
    assert roomy.greedy and roomy.sampled and roomy.rounds == roomy.greedy + roomy.sampled and not roomy.left
    assert all(r.profile == "greedy" for r in roomy.greedy) and all(r.profile != "greedy" for r in roomy.sampled)
    starved_limits = Limits(max_reqs=8, max_tokens=8192, max_len=2048, k=3, dflash=False, free_blocks=0)
    starved = sp.plan_v1_warmup(starved_limits, sp.SamplingLimits())
    assert starved.rounds == []  # the warm-up is skipped, and its warning names the sampler's variants too
    topk = {key for key in sp.sampled_reachable_keys(starved_limits, sp.SamplingLimits()) if key[0] == sp.TOPK_TOPP}
    assert topk and {key for key in starved.left if key[0] == sp.TOPK_TOPP} == topk
