"""Model Runner V2's boot-time sampled warm-up (issue 41 item 2): the plan of sampled rounds, the scheduler outputs
it builds (vLLM's own classes, valid as its scheduler builds them), the blockers, that every warm-up request is
finished (MRV2's request states as boot left them), and the hook around vLLM's ``warmup_kernels``."""

from __future__ import annotations

import dataclasses
import logging
import os
import types

import pytest
from autotuner_probe import tritons_default_folder_seen
from vllm.sampling_params import SamplingParams
from vllm.v1.core.sched.output import NewRequestData, SchedulerOutput

from portable_spec.vllm_adapter.patch import version_gate
from portable_spec.vllm_adapter.worker import mrv2_sampling_plan as plan
from portable_spec.vllm_adapter.worker import mrv2_warmup
from portable_spec.vllm_adapter.worker.kernel_warmup import warmup_schedule
from portable_spec.vllm_adapter.worker.sampling_plan import TOPK_TOPP, SamplingLimits
from portable_spec.vllm_adapter.worker.warmup_plan import OTHER, SIXTEEN, Limits

pytestmark = pytest.mark.skipif(not version_gate.has("mrv2_sampled_warmup"),
                                reason=str(version_gate.why_not("mrv2_sampled_warmup")))


def limits(max_reqs=256, k=3, max_tokens=8192, free_blocks=4096) -> Limits:
    return Limits(max_reqs=max_reqs, max_tokens=max_tokens, max_len=4096, k=k, dflash=False,
                  block_sizes=(16,), free_blocks=free_blocks)


@pytest.mark.parametrize("max_reqs,k,logprobs", [(256, 3, True), (256, 1, True), (4, 3, True), (2, 2, False),
                                                 (1, 3, True), (64, 7, True), (8, 2, True), (6, 4, False)])
def test_the_plan_covers_every_reachable_sampling_variant(max_reqs, k, logprobs):
    lim, sampling = limits(max_reqs, k), SamplingLimits(logprobs=logprobs)
    rounds, uncovered = plan.plan_rounds(lim, sampling)
    assert not uncovered
    covered = frozenset().union(*(plan.round_keys(r, lim, sampling) for r in rounds))
    assert plan.reachable_keys(lim, sampling) <= covered
    assert all(r.fits(lim) for r in rounds)
    # The kernels issue 41 saw compile at the first sampled request are all in the model.
    kernels = {key[0] for key in plan.reachable_keys(lim, sampling)}
    assert {"_temperature_kernel", "_rejection_kernel", "_resample_kernel", "_compute_local_logits_stats_kernel",
            "_min_p_kernel"} <= kernels
    assert (TOPK_TOPP in kernels) == (plan.max_rows(lim) >= 8)


def test_the_plan_reaches_top_p_alone_at_every_row_class():
    """The request issue 41 sent (temperature 0.8, top-p 0.95) filters with TOPP_ENABLED alone."""
    lim, sampling = limits(), SamplingLimits()
    keys = frozenset().union(*(plan.round_keys(r, lim, sampling) for r in plan.plan_rounds(lim, sampling)[0]))
    assert {(TOPK_TOPP, False, True, OTHER), (TOPK_TOPP, False, True, SIXTEEN)} <= keys


@pytest.mark.parametrize("dropped,missing", [
    ((plan.TOP_P, plan.TOP_P + plan.LOGPROBS_SUFFIX), (TOPK_TOPP, False, True, OTHER)),
    ((plan.TOP_K, plan.TOP_K + plan.LOGPROBS_SUFFIX), (TOPK_TOPP, True, False, SIXTEEN)),
    ((plan.MIN_P_PROFILE, plan.MIN_P_PROFILE + plan.LOGPROBS_SUFFIX), (plan.MIN_P, plan.MODEL)),
    (tuple(p for p in plan.PROFILES if p.endswith(plan.LOGPROBS_SUFFIX)), (plan.LOGPROBS, True)),
    (tuple(p for p in plan.PROFILES if p.endswith(plan.LOGPROBS_SUFFIX)), ("_rejection_kernel", plan.CLONE)),
])
def test_dropping_a_profile_leaves_a_kernel_variant_uncovered(dropped, missing):
    """The test bites: without those profiles a variant serving reaches is left to the first request."""
    lim, sampling = limits(), SamplingLimits()
    _, uncovered = plan.plan_rounds(lim, sampling, tuple(p for p in plan.PROFILES if p not in dropped))
    assert missing in uncovered


def test_a_kv_cache_too_small_for_any_round_plans_nothing_and_says_what_is_left():
    rounds, uncovered = plan.plan_rounds(limits(free_blocks=0), SamplingLimits())
    assert not rounds and uncovered == plan.reachable_keys(limits(), SamplingLimits())


def schedule(lim=None, vocab=1000):
    """The installed vLLM's plan (0.26.0's or 0.33.0's model) as its scheduler outputs."""
    lim, installed = lim or limits(), mrv2_warmup.installed_plan()
    rounds, _ = installed.plan_rounds(lim, SamplingLimits())
    return rounds, warmup_schedule(rounds, lim, vocab, True, sampler=installed.request_sampling,
                                   req_prefix=mrv2_warmup.REQ_PREFIX)


def test_each_version_of_the_span_has_one_plan_and_the_installed_one_is_picked():
    """The warm-up calls a plan only through ``Mrv2SamplingPlan`` (each module's ``PLAN``): one per version of the
    span, each its own module's rounds, and the installed vLLM's picked (0.28.0's rounds with 0.33.0's samplings)."""
    from portable_spec.vllm_adapter.worker import mrv2_sampling_plan_028 as plan028
    from portable_spec.vllm_adapter.worker import mrv2_sampling_plan_033 as plan033

    assert [p.vllm for p in mrv2_warmup.PLANS] == list(version_gate.SPAN)
    assert [(p.plan_rounds, p.request_sampling) for p in mrv2_warmup.PLANS] == [
        (plan.plan_rounds, plan.request_sampling), (plan028.plan_rounds, plan033.request_sampling),
        (plan033.plan_rounds, plan033.request_sampling)]
    installed = mrv2_warmup.installed_plan()
    assert installed is version_gate.pick({p.vllm: p for p in mrv2_warmup.PLANS})
    assert installed.vllm == version_gate.pick({v: v for v in version_gate.SPAN})


def test_the_scheduler_outputs_are_valid_and_finish_every_request():
    lim = limits()
    rounds, outputs = schedule(lim)
    live: dict[str, int] = {}
    held: dict[str, set[int]] = {}  # block ids per live request: never two live requests on one id
    used_blocks: set[int] = set()
    kinds = set()
    named = 0  # every attribute the warm-up sets is a field of vLLM's class (none dropped or renamed under us)
    for out in outputs:
        assert isinstance(out, SchedulerOutput)
        for obj in (out, out.scheduled_cached_reqs, *out.scheduled_new_reqs):
            assert set(vars(obj)) <= {f.name for f in dataclasses.fields(obj)}
            named += 1
        for req_id in out.finished_req_ids:
            del live[req_id], held[req_id]
        for new in out.scheduled_new_reqs:
            assert isinstance(new, NewRequestData) and isinstance(new.sampling_params, SamplingParams)
            assert new.req_id.startswith(mrv2_warmup.REQ_PREFIX) and new.req_id not in live
            # MRV2's add_requests asserts both; the scheduler sets prefill_token_ids to the prompt.
            assert new.prompt_token_ids is not None and new.prefill_token_ids == new.prompt_token_ids
            assert new.num_computed_tokens == 0
            live[new.req_id] = len(new.prompt_token_ids)
            held[new.req_id] = set()
            for group in new.block_ids:
                assert not set().union(*held.values()) & set(group)
                held[new.req_id] |= set(group)
                used_blocks |= set(group)
            sp = new.sampling_params
            kinds.add((sp.temperature > 0, sp.top_k > 0, sp.top_p < 1, sp.min_p > 0, sp.logprobs is not None,
                       sp.seed is not None))
        cached = out.scheduled_cached_reqs
        for req_id, blocks in zip(cached.req_ids, cached.new_block_ids):
            assert req_id in live
            for group in blocks or ():
                assert not set().union(*held.values()) & set(group)
                held[req_id] |= set(group)
                used_blocks |= set(group)
        for req_id, drafts in out.scheduled_spec_decode_tokens.items():
            assert len(drafts) == lim.k and out.num_scheduled_tokens[req_id] == lim.k + 1
        assert set(out.num_scheduled_tokens) <= set(live)
        assert out.total_num_scheduled_tokens == sum(out.num_scheduled_tokens.values())
        assert out.num_common_prefix_blocks == [0]
    assert not live, "every warm-up request is finished by the last step"
    assert named > 2 * len(outputs)
    assert min(used_blocks) == 1 and max(used_blocks) <= lim.free_blocks  # 0 is the null block
    # (sampled, top-k, top-p, min-p, logprobs, seeded): 0.26.0's plan: min-p with and without logprobs, top-p alone,
    # top-k with logprobs, top-k with top-p, seeded and not; 0.28.0's: greedy with logprobs, temperature with
    # logprobs, min-p, top-k, top-p and top-k with top-p alone at 8 rows and more, seeded and not; 0.33.0's: greedy
    # with logprobs, temperature with logprobs, top-k, top-p and top-k with top-p alone, min-p, seeded and not.
    assert version_gate.pick({
        "0.26.0": {(True, False, False, True, False, True), (True, False, False, True, True, True),
                   (True, False, True, False, False, True), (True, False, True, False, False, False),
                   (True, True, False, False, True, True), (True, True, True, False, False, True)},
        "0.28.0": {(False, False, False, False, True, False), (True, False, False, False, True, True),
                   (True, False, False, True, False, True), (True, False, True, False, False, True),
                   (True, False, True, False, False, False), (True, True, False, False, False, True),
                   (True, True, False, False, False, False), (True, True, True, False, False, True),
                   (True, True, True, False, False, False)},
        "0.33.0": {(False, False, False, False, True, False),
                   (True, False, False, False, True, True), (True, True, False, False, False, True),
                   (True, False, True, False, False, True), (True, True, True, False, False, True),
                   (True, False, False, True, False, True), (True, False, False, True, False, False)}}) <= kinds
    assert len(kinds) >= 6


class Mrv2Runner:
    """MRV2's runner as the warm-up sees it: request states added and removed as vLLM's ``add_requests`` and
    ``finish_requests`` do, a KV connector switch, the config parts the blockers read."""

    def __init__(self, *, v2=True, spec=True, pp=1, dp=1, kv_transfer=None, num_blocks=4096, adaptive=False,
                 sharded=False, watermark=False):
        parallel = types.SimpleNamespace(pipeline_parallel_size=pp, data_parallel_size=dp, enable_eplb=False)
        spec_cfg = types.SimpleNamespace(method="eagle3", rejection_sample_method="standard",
                                         draft_sample_method="greedy") if spec else None
        self.vllm_config = types.SimpleNamespace(parallel_config=parallel, speculative_config=spec_cfg,
                                                 kv_transfer_config=kv_transfer, ec_transfer_config=None,
                                                 use_v2_model_runner=v2)
        self.scheduler_config = types.SimpleNamespace(max_num_batched_tokens=8192, max_num_scheduled_tokens=None)
        group = types.SimpleNamespace(kv_cache_spec=_full_attention())
        self.kv_cache_config = types.SimpleNamespace(kv_cache_groups=[group], num_blocks=num_blocks)
        self.model_config = types.SimpleNamespace(max_logprobs=20, get_vocab_size=lambda: 1000)
        self.max_num_reqs, self.max_model_len, self.num_speculative_steps = 64, 4096, 3 if spec else 0
        self.is_pooling_model, self.sampler = False, object()
        # vLLM 0.33's runner parts the 0.33 plan does not model (absent on 0.26's runner: getattr reads None).
        self.adaptive_verification = object() if adaptive else None
        self.batch_sharder = object() if sharded else None
        self.rejection_sampler = types.SimpleNamespace(watermark_key=7 if watermark else None)
        self.req_states = types.SimpleNamespace(req_id_to_index={})
        self.kv_connector = types.SimpleNamespace(disabled=[], set_disabled=lambda d: self.kv_connector.disabled.append(d))
        self.steps: list[SchedulerOutput] = []
        self.sampled = 0

    def execute_model(self, out):
        for req_id in out.finished_req_ids:
            self.req_states.req_id_to_index.pop(req_id, None)
        for new in out.scheduled_new_reqs:
            self.req_states.req_id_to_index[new.req_id] = len(self.req_states.req_id_to_index)
        self.steps.append(out)
        return None if out.total_num_scheduled_tokens else "empty"

    def sample_tokens(self, grammar):
        self.sampled += 1


def _full_attention():
    import torch
    from vllm.v1.kv_cache_interface import FullAttentionSpec

    return FullAttentionSpec(block_size=16, num_kv_heads=1, head_size=8, dtype=torch.float32)


def test_the_warm_up_runs_after_vllms_and_leaves_no_request_behind(caplog, monkeypatch):
    """Both warm-ups build in the Triton folder the worker started with (unset here: Triton's default, named in the
    variable), not the one compiling the model left set, and the engine serves in it after (worker/triton_cache.py)."""
    runner, order = Mrv2Runner(), []
    monkeypatch.setenv("TRITON_CACHE_DIR", "/compiled-model/inductor_cache/triton/0")
    folders = []
    real_sample = runner.sample_tokens
    runner.sample_tokens = lambda *a, **k: folders.append(os.environ.get("TRITON_CACHE_DIR")) or real_sample(*a, **k)

    def vllms_warmup(model_runner, execute, sample):
        order.append("vllm")
        folders.append(os.environ.get("TRITON_CACHE_DIR"))
        assert not model_runner.req_states.req_id_to_index

    hooked, zeroed = mrv2_warmup.with_sampled_rounds(vllms_warmup, None), []
    runner.kv_block_zeroer = types.SimpleNamespace(zero_block_ids=zeroed.append)  # vLLM 0.33's runner has one
    with caplog.at_level(logging.INFO, logger="portable_spec.vllm_adapter"):
        hooked(runner, runner.execute_model, runner.sample_tokens)
    assert zeroed == [[0]]
    stats = runner.portable_spec_sampled_warmup
    assert order == ["vllm"] and stats["steps"] == len(runner.steps) > 2 and not stats["uncovered"]
    assert runner.sampled == sum(1 for s in runner.steps if s.total_num_scheduled_tokens)
    assert runner.req_states.req_id_to_index == {}
    assert runner.kv_connector.disabled == [True, False]
    assert len(folders) > 2 and set(folders) == {tritons_default_folder_seen(monkeypatch)}
    assert os.environ["TRITON_CACHE_DIR"] == folders[0]  # serving keeps it
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith(mrv2_warmup.LOG_PREFIX)]
    assert len(lines) == 1 and "rounds" in lines[0]


def test_a_launcher_vllms_warm_up_built_is_found_while_serving_after_a_compiling_boot(monkeypatch, tmp_path):
    """The pause at a compiling boot's first sampled batch of two on Model Runner V2: vLLM's warm-up (through our
    wrapper) launches a kernel, building its launcher in the start folder; serving later first-launches a sibling
    specialisation with the same launcher source, which must come from disk, not the C compiler (one build in all).
    With inductor's folder put back after the warm-ups, the serving launch built it again."""
    from launcher_probe import build_launcher, c_builds

    monkeypatch.setenv("TRITON_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "model" / "inductor_cache" / "triton" / "0"))
    builds = c_builds(monkeypatch)
    monkeypatch.setattr(mrv2_warmup, "run_sampled_rounds", lambda *args: None)
    hooked = mrv2_warmup.with_sampled_rounds(lambda *args: build_launcher(), None)
    hooked(None, None, None)
    build_launcher()  # serving
    assert builds == [tritons_default_folder_seen(monkeypatch)]


def test_a_request_left_in_the_runner_fails_loudly():
    runner = Mrv2Runner()
    runner.execute_model = lambda out, real=runner.execute_model: real(types.SimpleNamespace(
        finished_req_ids=set(), scheduled_new_reqs=out.scheduled_new_reqs,
        total_num_scheduled_tokens=out.total_num_scheduled_tokens))
    with pytest.raises(RuntimeError, match="left in the runner"):
        mrv2_warmup.run_sampled_rounds(runner, runner.execute_model, runner.sample_tokens)
    assert runner.kv_connector.disabled == [True, False]


def test_a_failing_step_is_named_and_the_engine_boots_on_with_its_requests_finished(caplog):
    """The step loop is the V1 warm-up's (``kernel_warmup.run_steps``): the step that failed and the switch that boots
    without the warm-up, in one line; then every warm-up request still in the runner is finished (one clean-up step,
    as vLLM's warm-up ends) and the engine boots as vLLM would, with one warning; the KV connector is enabled again."""
    runner = Mrv2Runner()

    def sample_tokens(grammar):
        if runner.sampled == 2:
            raise ValueError("a sampler kernel failed")
        runner.sampled += 1

    with caplog.at_level(logging.INFO, logger="portable_spec.vllm_adapter"):
        stats = mrv2_warmup.run_sampled_rounds(runner, runner.execute_model, sample_tokens)
    clean = Mrv2Runner()
    total = mrv2_warmup.run_sampled_rounds(clean, clean.execute_model, clean.sample_tokens)["steps"]
    failed = len(runner.steps) - 1  # the last step is the clean-up
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert errors == [
        f"{mrv2_warmup.LOG_PREFIX} failed at step {failed} of {total}; PORTABLE_SPEC_WARMUP=off boots without it"]
    cleanup = runner.steps[-1]
    assert cleanup.total_num_scheduled_tokens == 0 and cleanup.finished_req_ids
    assert all(r.startswith(mrv2_warmup.REQ_PREFIX) for r in cleanup.finished_req_ids)
    assert mrv2_warmup.live_requests(runner) == 0 and stats["finished_after_error"] == len(cleanup.finished_req_ids)
    assert stats["skipped"] == ["error: ValueError: a sampler kernel failed"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "the engine boots as vLLM would" in warnings[0]
    assert 1 < failed < total and runner.kv_connector.disabled == [True, False]


def test_a_failed_step_whose_requests_cannot_be_finished_raises_its_error():
    """Where the clean-up leaves a warm-up request behind, the engine must not serve beside it: the step's error."""
    runner = Mrv2Runner()
    finish = runner.execute_model

    def execute_model(out):
        if out.total_num_scheduled_tokens == 0 and out.finished_req_ids and not out.scheduled_new_reqs:
            return "empty"  # a runner that ignores the clean-up
        return finish(out)

    def sample_tokens(grammar):
        if runner.sampled == 2:
            raise ValueError("a sampler kernel failed")
        runner.sampled += 1

    with pytest.raises(ValueError, match="a sampler kernel failed"):
        mrv2_warmup.run_sampled_rounds(runner, execute_model, sample_tokens)
    assert mrv2_warmup.live_requests(runner) > 0


def test_a_request_live_before_it_skips_the_warm_up_with_one_warning(caplog):
    """Never at boot; if ever, the engine is left as vLLM built it (our layer never stops an engine vLLM boots)."""
    runner = Mrv2Runner()
    runner.req_states.req_id_to_index["someone"] = 0
    with caplog.at_level(logging.INFO, logger="portable_spec.vllm_adapter"):
        stats = mrv2_warmup.run_sampled_rounds(runner, runner.execute_model, runner.sample_tokens)
    assert stats == {"skipped": ["requests live before the warm-up"]} and runner.steps == []
    lines = [r for r in caplog.records if r.getMessage().startswith(mrv2_warmup.LOG_PREFIX)]
    assert len(lines) == 1 and lines[0].levelno == logging.WARNING


@pytest.mark.parametrize("kwargs,reason", [
    (dict(adaptive=True), "adaptive verification"),
    (dict(sharded=True), "batch-sharded sampling"),
    (dict(watermark=True), "watermarking"),
    (dict(v2=False), "not Model Runner V2"),
    (dict(spec=False), "no speculative decoding"),
    (dict(pp=2), "pipeline parallel"),
    (dict(dp=2), "data parallel"),
    (dict(kv_transfer=object()), "KV/EC transfer"),
])
def test_no_sampled_warm_up_where_it_must_not_run(kwargs, reason, caplog):
    runner = Mrv2Runner(**kwargs)
    with caplog.at_level(logging.INFO, logger="portable_spec.vllm_adapter"):
        stats = mrv2_warmup.run_sampled_rounds(runner, runner.execute_model, runner.sample_tokens)
    assert any(reason in r for r in stats["skipped"]) and not runner.steps
    assert any(reason in r.getMessage() for r in caplog.records)


def test_warmup_off_skips_it(monkeypatch):
    monkeypatch.setenv("PORTABLE_SPEC_WARMUP", "off")
    runner = Mrv2Runner()
    stats = mrv2_warmup.run_sampled_rounds(runner, runner.execute_model, runner.sample_tokens)
    assert stats["skipped"] == ["PORTABLE_SPEC_WARMUP=off"] and not runner.steps


def test_the_worker_swaps_warmup_kernels_for_the_one_call_under_mrv2(monkeypatch):
    import vllm.v1.worker.gpu_worker as module
    from vllm.v1.worker.gpu_worker import Worker

    from portable_spec.vllm_adapter.worker.gpu_worker import PortableWorker

    original, seen = module.warmup_kernels, []

    def fake_compile(self):
        seen.append(module.warmup_kernels)
        return "times"

    monkeypatch.setattr(Worker, "compile_or_warm_up_model", fake_compile)
    worker = PortableWorker.__new__(PortableWorker)
    worker.vllm_config = types.SimpleNamespace(use_v2_model_runner=True)
    worker.triton_cache_at_start = None
    assert worker.compile_or_warm_up_model() == "times"
    worker.vllm_config = types.SimpleNamespace(use_v2_model_runner=False)
    assert worker.compile_or_warm_up_model() == "times"
    assert seen[0] is not original and seen[0].__name__ == "warmup_kernels" and seen[1] is original
    assert module.warmup_kernels is original


def test_under_mrv2_the_worker_reads_the_folder_before_vllm_builds_the_runner(monkeypatch):
    """The MRV2 branch of ``init_device``: the Triton folder is read before vLLM's ``init_device`` builds the runner
    (the model compiles after, in ``load_model``)."""
    import contextlib

    from vllm.config import CompilationConfig, CompilationMode
    from vllm.v1.worker.gpu_worker import Worker

    from portable_spec.vllm_adapter.worker import gpu_worker, mrv2_speculator

    order = []
    monkeypatch.setenv("TRITON_CACHE_DIR", "/callers/folder")
    monkeypatch.setattr(gpu_worker, "bind_kernel_substitutes", lambda config: [])
    monkeypatch.setattr(mrv2_speculator, "installed", lambda config: contextlib.nullcontext())
    monkeypatch.setattr(Worker, "init_device", lambda self: order.append(("vllm", self.triton_cache_at_start)))
    worker = gpu_worker.PortableWorker.__new__(gpu_worker.PortableWorker)
    worker.vllm_config = types.SimpleNamespace(
        use_v2_model_runner=True, speculative_config=None,
        compilation_config=CompilationConfig(mode=CompilationMode.VLLM_COMPILE))
    worker.init_device()
    assert order == [("vllm", "/callers/folder")]


def test_the_version_span_runs_this_module():
    from version_span import MODULES

    assert {"test_mrv2_warmup.py", "test_mrv2_sampling_plan_028.py", "test_mrv2_sampled_compiles_028.py",
            "test_mrv2_sampling_plan_033.py"} <= set(MODULES)
