"""The boot-time kernel warm-up (``vllm_adapter.worker.warmup_plan`` + ``vllm_adapter.worker.kernel_warmup``), on CPU.

vLLM's V1 runner cannot run here, so the warm-up drives a recording stand-in of our runner: it keeps the
bookkeeping vLLM's runner keeps (live requests, their lengths and blocks) and checks every scheduler output against
it; the outputs themselves are vLLM's real classes, the drafter is our real proposer on vLLM's real config, the KV
cache config vLLM's own. The plan's model of Triton's specialization is checked against Triton, and its reachable
set against a brute-force enumeration of small engines. The real steps run on the cuda lane (e2e, no JIT events).
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import time
import types
from math import ceil

import pytest
import torch

from portable_spec.capture_sizes import StepPlan
from portable_spec.draft.dispatcher import FIRST, DraftDispatcher
from portable_spec.draft.runner import DraftGraphRunner
from portable_spec_harness.model_zoo import build_pair
from portable_spec.ports.cpu_port import CpuPort
from portable_spec.vllm_adapter.worker.warmup_plan import (
    BATCH_PARAMS, DFLASH_INPUTS, EXPAND_INPUTS, MAX_ROUNDS, ONE, OTHER, SIXTEEN, Limits, Step, batch_agnostic_kernels,
    dflash_block, dflash_buckets, int_class, kernel_keys, plan_rounds, reachable_keys, round_keys, tile_block,
    tile_buckets,
)
from shared_zoo import shared_zoo
from vllm_configs import pair_config

K = 3


# ---- the plan (pure Python) ------------------------------------------------------------------------------------
def test_int_class_is_how_triton_specializes_an_integer_argument():
    jit_native = pytest.importorskip("triton._C.libtriton")
    from triton.backends.compiler import BaseBackend

    def triton_key(value):
        return jit_native.native_specialize_impl(BaseBackend, value, False, True, True)

    values = range(1, 300)
    for a, b in itertools.combinations(values, 2):
        assert (int_class(a) == int_class(b)) == (triton_key(a) == triton_key(b)), (a, b)


# The drafters whose kernels differ: EAGLE/MTP, DFlash, and those that add input slots per request (vLLM's separate
# draft model: one slot; parallel drafting: K slots, its inputs shifted, so K - 1 new ones).
KINDS = {"eagle": {}, "dflash": {"dflash": True}, "draft_model": {"expand_slots": 1},
         "parallel_drafting": {"expand_slots": 2, "parallel_drafting": True}}


def limits_for(kind: str, **kw) -> Limits:
    return Limits(**{"dflash": False, **KINDS[kind], **kw})


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("max_reqs", [1, 8, 64, 256])
@pytest.mark.parametrize("k", [1, 3, 4])
def test_the_plan_reaches_every_variant_serving_can_reach(kind, max_reqs, k):
    limits = limits_for(kind, max_reqs=max_reqs, max_tokens=8192, max_len=2048, k=k)
    dflash = limits.dflash
    rounds, uncovered = plan_rounds(limits)
    assert uncovered == frozenset()
    covered = frozenset().union(*(round_keys(r, limits) for r in rounds))
    assert covered >= reachable_keys(limits) and rounds and len(rounds) <= MAX_ROUNDS
    # Independently of the model: batches of 1, of a non-multiple of 16 and of 16 requests, with and without drafts.
    steps = [step for r in rounds for step in r.steps(k)]
    wanted = {ONE} | ({OTHER} if max_reqs >= 2 else set()) | ({SIXTEEN} if max_reqs >= 16 else set())
    for verify in (False, True):
        assert {int_class(s.num_reqs) for s in steps if s.verify == verify} >= wanted
    assert all(s.num_reqs <= max_reqs for s in steps)
    if dflash:  # every BLOCK_SIZE bucket of DFlash's input kernel, for prefills and (max_reqs > 1) for verify steps
        buckets = set(dflash_buckets(limits))
        assert {dflash_block(max(s.query_lens), k) for s in steps if not s.verify} == buckets
        if max_reqs > 1:
            assert {dflash_block(max(s.query_lens), k) for s in steps if s.verify} == {
                b for b in buckets if b >= dflash_block(k + 1, k)}
    if limits.expand_slots:  # every tile of the expand kernel, reached by some step (it has no verify flag)
        slots = limits.expand_slots
        assert {tile_block(max(s.query_lens), slots) for s in steps} == set(tile_buckets(limits, EXPAND_INPUTS))
        assert {tile_block(1, slots), 256} <= set(tile_buckets(limits, EXPAND_INPUTS))


def test_eagle_plans_three_rounds_and_tells_what_a_bound_leaves_out():
    limits = Limits(max_reqs=64, max_tokens=8192, max_len=2048, k=K, dflash=False)
    rounds, _ = plan_rounds(limits)
    assert [(len(r.prompts), r.verify, r.join) for r in rounds] == [(1, True, 0), (3, True, 0), (16, True, 0)]
    assert all(p == K + 2 for r in rounds for p in r.prompts)  # never a uniform decode batch in disguise
    rounds, uncovered = plan_rounds(limits, max_rounds=2)
    assert len(rounds) == 2 and uncovered and all(key[-1] == SIXTEEN for key in uncovered)


def test_cudas_bound_substitutes_make_every_modelled_kernel_batch_agnostic_and_musas_none():
    from portable_spec.kernels.registry import substitutions_for

    assert batch_agnostic_kernels(substitutions_for("cuda")) == frozenset(BATCH_PARAMS)
    assert batch_agnostic_kernels(substitutions_for("musa")) == frozenset()  # MUSA's entries keep vLLM's variants
    for tiled in (DFLASH_INPUTS, EXPAND_INPUTS):
        one_tile = next(s for s in substitutions_for("cuda") if s.name.startswith(tiled))
        assert tiled not in batch_agnostic_kernels([dataclasses.replace(one_tile, launcher=None)])


@pytest.mark.parametrize("kind", list(KINDS))
def test_batch_agnostic_kernels_need_one_round_per_request_class_and_no_more(kind):
    """With every modelled kernel bound batch-agnostic, DFlash and the draft model need no round per tile bucket or
    token class; each request class keeps its round (kernels outside the model may specialize on the batch)."""
    full = limits_for(kind, max_reqs=64, max_tokens=8192, max_len=2048, k=K)
    tiled = bool(full.tiled())
    lean = dataclasses.replace(full, batch_agnostic=frozenset(BATCH_PARAMS))
    rounds, uncovered = plan_rounds(lean)
    assert not uncovered and [(len(r.prompts), r.verify) for r in rounds] == [(1, True), (3, True), (16, True)]
    assert len(plan_rounds(full)[0]) > 3 if tiled else len(plan_rounds(full)[0]) == 3
    steps = [s for r in rounds for s in r.steps(K)]
    assert {(int_class(s.num_reqs), s.verify) for s in steps} == {(c, v) for c in (ONE, OTHER, SIXTEEN)
                                                                   for v in (False, True)}


def brute_force_keys(limits: Limits) -> frozenset:
    """Every step an engine under ``limits`` can schedule: requests verifying K drafts (1+K tokens each) and prompt
    chunks of any length the drafter still runs for, at most ``max_reqs`` requests and ``max_tokens`` tokens."""
    keys = set()
    k, top = limits.k, limits.longest_query
    for decoders in range(limits.max_reqs + 1):
        for chunks in range(limits.max_reqs - decoders + 1):
            if decoders + chunks == 0:
                continue
            for lens in itertools.combinations_with_replacement(range(1, top + 1), chunks):
                step = Step((k + 1,) * decoders + lens, verify=decoders > 0)
                if step.tokens <= limits.max_tokens:
                    keys |= kernel_keys(step, limits)
    return frozenset(keys)


@pytest.mark.parametrize("max_reqs,max_tokens,k,kind", [
    (1, 40, 1, "dflash"), (2, 40, 3, "dflash"), (3, 40, 1, "dflash"), (3, 24, 2, "dflash"), (3, 48, 3, "dflash"),
    (2, 16, 5, "dflash"), (3, 40, 3, "eagle"), (1, 20, 1, "eagle"), (1, 40, 3, "draft_model"),
    (3, 40, 3, "draft_model"), (2, 24, 1, "draft_model"), (3, 48, 3, "parallel_drafting")])
@pytest.mark.parametrize("agnostic", [False, True], ids=["vllm_kernels", "batch_agnostic"])
def test_the_reachable_model_matches_a_brute_force_enumeration(max_reqs, max_tokens, k, kind, agnostic):
    limits = limits_for(kind, max_reqs=max_reqs, max_tokens=max_tokens, max_len=64, k=k,
                        batch_agnostic=frozenset(BATCH_PARAMS) if agnostic else frozenset())
    assert reachable_keys(limits) == brute_force_keys(limits)
    assert not plan_rounds(limits)[1]


def test_rounds_that_need_more_blocks_than_exist_are_not_planned():
    roomy = Limits(max_reqs=64, max_tokens=8192, max_len=2048, k=K, dflash=False, free_blocks=1000)
    tight = Limits(max_reqs=64, max_tokens=8192, max_len=2048, k=K, dflash=False, free_blocks=8)
    assert not plan_rounds(roomy)[1]
    rounds, uncovered = plan_rounds(tight)
    assert all(r.blocks(tight) <= 8 for r in rounds) and {key[-1] for key in uncovered} == {SIXTEEN}
    assert plan_rounds(Limits(max_reqs=64, max_tokens=8192, max_len=2048, k=K, dflash=False, free_blocks=0))[0] == []


# ---- the warm-up on a recording runner ---------------------------------------------------------------------------
class RecordingRunner:
    """Stands for our V1 runner: the attributes the warm-up reads, and ``execute_model``/``sample_tokens`` that check
    each scheduler output against the bookkeeping vLLM's runner keeps, then leave step state behind as vLLM's do."""

    def __init__(self, cfg, drafter, kv_cache_config) -> None:
        self.vllm_config, self.model_config, self.drafter = cfg, cfg.model_config, drafter
        self.kv_cache_config = kv_cache_config
        self.max_num_reqs = cfg.scheduler_config.max_num_seqs
        self.num_spec_tokens = cfg.speculative_config.num_speculative_tokens
        self.max_model_len = self.effective_drafter_max_model_len = cfg.model_config.max_model_len
        self.is_pooling_model, self.calculate_kv_scales, self.eplb_state = False, False, None
        self.seq_lens = torch.zeros(self.max_num_reqs, dtype=torch.int32)
        self.input_batch = types.SimpleNamespace(prev_sampled_token_ids=None, prev_req_id_to_index=None,
                                                 sampled_token_ids_cpu=None, async_copy_ready_event=None)
        self.execute_model_state = self.kv_connector_output = self._draft_token_ids = None
        self._draft_token_req_ids = self._draft_probs = self._draft_prob_req_ids = None
        self.valid_sampled_token_count_gpu, self.prev_num_spec_tokens = None, self.num_spec_tokens
        self.live: dict[str, dict] = {}
        self.outputs, self.calls, self.pending = [], [], False
        self.trimmed = 0  # requests that verified fewer than K drafts
        self.lookahead = self.num_spec_tokens + (1 if cfg.speculative_config.method == "dflash" else 0)

    def execute_model(self, so):
        assert not self.pending, "execute_model while a step waits for sample_tokens"
        self.calls.append("execute")
        self.outputs.append(so)
        k, groups = self.num_spec_tokens, self.kv_cache_config.kv_cache_groups
        assert so.num_spec_tokens_to_schedule == k and len(so.num_common_prefix_blocks) == len(groups)
        for req_id in so.finished_req_ids:
            assert self.live.pop(req_id, None) is not None, f"finishing unknown request {req_id}"
        for new in so.scheduled_new_reqs:
            assert new.req_id not in self.live and new.num_computed_tokens == 0
            assert new.pooling_params is None and new.sampling_params.temperature in (0.0, 0.8)
            assert len(new.prompt_token_ids) == so.num_scheduled_tokens[new.req_id]
            assert max(new.prompt_token_ids) < self.model_config.get_vocab_size()
            self.live[new.req_id] = {"computed": 0, "outputs": 0, "blocks": [list(b) for b in new.block_ids]}
        cached = so.scheduled_cached_reqs
        for i, req_id in enumerate(cached.req_ids):
            state = self.live[req_id]
            assert cached.num_computed_tokens[i] == state["computed"] and cached.num_output_tokens[i] == 1
            assert not cached.resumed_req_ids
            for blocks, more in zip(state["blocks"], cached.new_block_ids[i] or [[]] * len(groups)):
                blocks.extend(more)
        assert so.total_num_scheduled_tokens == sum(so.num_scheduled_tokens.values())
        assert set(so.scheduled_spec_decode_tokens) <= set(so.num_scheduled_tokens)
        for req_id, tokens in so.num_scheduled_tokens.items():
            state = self.live[req_id]
            drafts = so.scheduled_spec_decode_tokens.get(req_id)
            if drafts is not None:  # K drafts, or fewer where the scheduler trims them (``Round.trimmed``)
                assert 1 <= len(drafts) <= k and tokens == len(drafts) + 1 and state["outputs"] == 1
                self.trimmed += len(drafts) < k
            state["computed"] += tokens
            for blocks, group in zip(state["blocks"], groups):  # as many as the scheduler gives: lookahead included
                assert len(blocks) == ceil((state["computed"] + self.lookahead) / group.kv_cache_spec.block_size)
        held = [b for state in self.live.values() for blocks in state["blocks"] for b in blocks]
        assert len(held) == len(set(held)), "a block id held twice"
        assert all(1 <= b < self.kv_cache_config.num_blocks for b in held)
        if not so.total_num_scheduled_tokens:
            return "no forward"
        self.pending = True
        self.stepped = [r for r in so.num_scheduled_tokens]
        # What vLLM's step leaves behind.
        self._draft_token_ids = torch.ones(len(self.live), k, dtype=torch.int64)
        self.input_batch.prev_sampled_token_ids = torch.ones(len(self.live), 1, dtype=torch.int32)
        self.input_batch.prev_req_id_to_index = {r: i for i, r in enumerate(self.live)}
        self.drafter.num_speculative_tokens = 1
        self.drafter._first_pass_cad = object()
        self.drafter.graph_runner.replays[FIRST] += 1
        self.seq_lens[: len(self.live)] = 7
        return None

    def sample_tokens(self, grammar_output):
        assert self.pending and grammar_output is None
        self.calls.append("sample")
        self.pending = False
        for req_id in self.stepped:
            self.live[req_id]["outputs"] += 1


def kv_cache_config(num_blocks: int, block_sizes=(16,), spec_cls=None):
    from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec

    spec_cls = spec_cls or FullAttentionSpec
    groups = [KVCacheGroupSpec([f"layers.{i}.attn"], spec_cls(block_size=size, num_kv_heads=1, head_size=64,
                                                                dtype=torch.float16))
              for i, size in enumerate(block_sizes)]
    return KVCacheConfig(num_blocks=num_blocks, kv_cache_tensors=[], kv_cache_groups=groups)


@pytest.fixture(scope="module")
def engines(tmp_path_factory):
    """vLLM configs and our real proposers for the EAGLE, the DFlash and the draft-model pair (max_num_seqs 64)."""
    import vllm.v1.spec_decode.llm_base_proposer as base
    from vllm.config import set_current_vllm_config

    from portable_spec.vllm_adapter.spec_decode.draft_model import FullGraphDraftModelProposer
    from portable_spec.vllm_adapter.spec_decode.proposer import FullGraphDFlashProposer, FullGraphEagleProposer

    saved, base.PIN_MEMORY = base.PIN_MEMORY, False  # no pinned-memory allocator on a CPU-only host
    out = {}
    try:
        for name, cls in (("llama_eagle", FullGraphEagleProposer), ("qwen3_dflash", FullGraphDFlashProposer),
                          ("llama_ctx_draft_model", FullGraphDraftModelProposer)):
            pair = build_pair(name, shared_zoo(tmp_path_factory), variant="perfect")
            cfg = pair_config(pair, max_num_seqs=64, max_model_len=1024)
            with set_current_vllm_config(cfg):
                out[name] = (cfg, cls(cfg, torch.device("cpu"), runner=None))
    finally:
        base.PIN_MEMORY = saved
    return out


def recording_runner(engines, name="llama_eagle", num_blocks=4096, cls=RecordingRunner, **kv):
    cfg, drafter = engines[name]
    drafter.graph_runner = DraftGraphRunner(CpuPort(), DraftDispatcher({FIRST: StepPlan(4, (4, 8), "FULL")}, 64),
                                            drafter)
    for name_ in ("_first_pass_cad", "_first_pass_token_indices"):
        vars(drafter).pop(name_, None)
    drafter.num_speculative_tokens = drafter.graph_k
    return cls(cfg, drafter, kv_cache_config(num_blocks, **kv))


@pytest.fixture(autouse=True)
def v1_runner_env(monkeypatch):
    monkeypatch.setenv("VLLM_USE_V2_MODEL_RUNNER", "0")
    monkeypatch.delenv("PORTABLE_SPEC_WARMUP", raising=False)


@pytest.mark.parametrize("name", ["llama_eagle", "qwen3_dflash"])
def test_warm_up_runs_valid_steps_and_leaves_boot_state(vllm_platform, engines, name, caplog):
    from portable_spec.vllm_adapter.worker.kernel_warmup import LOG_PREFIX, REQ_PREFIX, warm_up_kernels

    runner = recording_runner(engines, name, block_sizes=(16, 1))  # a 1-token block group: every slot counts
    boot_batch = dict(vars(runner.input_batch))
    with caplog.at_level(logging.INFO, logger="portable_spec"):
        stats = warm_up_kernels(runner)
    lines = [r for r in caplog.records if LOG_PREFIX in r.getMessage()]
    assert len(lines) == 1 and lines[0].levelno == logging.INFO, [r.getMessage() for r in lines]
    assert f"{stats['steps']} steps" in lines[0].getMessage() and "Triton compiles" in lines[0].getMessage()
    # Sequencing: sample_tokens after every step with tokens, a last step that finishes every warm-up request.
    assert runner.calls.count("sample") == sum(o.total_num_scheduled_tokens > 0 for o in runner.outputs)
    assert not runner.pending and runner.live == {}
    assert runner.outputs[-1].total_num_scheduled_tokens == 0 and runner.outputs[-1].finished_req_ids
    started = {n.req_id for o in runner.outputs for n in o.scheduled_new_reqs}
    assert started == set().union(*(o.finished_req_ids for o in runner.outputs))
    assert all(r.startswith(REQ_PREFIX) for r in started)
    verify = [o for o in runner.outputs if o.scheduled_spec_decode_tokens]
    drafts = [d for o in verify for d in o.scheduled_spec_decode_tokens.values()]
    assert verify and all(len(d) == runner.num_spec_tokens for d in drafts)
    # The batch classes: 1, a non-multiple of 16, 16 requests, with and without drafts.
    for with_drafts in (False, True):
        sizes = {len(o.num_scheduled_tokens) for o in runner.outputs
                 if o.total_num_scheduled_tokens and bool(o.scheduled_spec_decode_tokens) == with_drafts}
        assert {int_class(n) for n in sizes} >= {ONE, OTHER, SIXTEEN}
    assert stats["uncovered"] == [] and stats["drafter_replays"] == {FIRST: stats["steps"] - 1}
    assert set(stats["sampled_rounds"]) == {"top_k", "top_p", "top_k_top_p", "mixed"}  # sampling_plan's rounds too
    assert {n.sampling_params.temperature for o in runner.outputs for n in o.scheduled_new_reqs} == {0.0, 0.8}
    # Boot state is back: step bookkeeping, the drafter's per-step state and counters, seq_lens.
    assert runner._draft_token_ids is None and vars(runner.input_batch) == boot_batch
    drafter = runner.drafter
    assert drafter.num_speculative_tokens == drafter.graph_k and "_first_pass_cad" not in vars(drafter)
    assert not drafter.graph_runner.replays and drafter.graph_runner.pointer_mismatches == 0
    assert (runner.seq_lens == 0).all() and runner.warmup_stats is stats


class SlowStepRunner(RecordingRunner):
    """A recording runner whose steps take time where serving's may: the step where a sampled request joins greedy
    ones verifying (the mixed round's verify step) sleeps longest and compiles one Triton kernel, the first step
    (a greedy prefill) sleeps less and compiles none."""

    def execute_model(self, so):
        from triton import knobs

        if so.scheduled_spec_decode_tokens and any(n.sampling_params.temperature for n in so.scheduled_new_reqs):
            knobs.runtime.jit_post_compile_hook(fn=types.SimpleNamespace(name="fake_kernel"), key=None)
            time.sleep(1.0)
        elif not self.outputs:
            time.sleep(0.6)
        return super().execute_model(so)


def test_the_log_line_names_the_slowest_steps_with_what_they_held(vllm_platform, engines, caplog):
    """Each step is timed to its device sync: the statistics hold one time and one compile count per step, and the
    log line names the slowest steps first, each with its requests, tokens, sampled or greedy and compiles."""
    from portable_spec.vllm_adapter.worker.kernel_warmup import LOG_PREFIX, sampled_steps, warm_up_kernels

    pytest.importorskip("triton")  # the slow step compiles through Triton's post-compile hook
    runner = recording_runner(engines, cls=SlowStepRunner)
    with caplog.at_level(logging.INFO, logger="portable_spec"):
        stats = warm_up_kernels(runner)
    outputs = runner.outputs
    assert len(stats["step_seconds"]) == len(stats["step_triton_compiles"]) == stats["steps"] == len(outputs)
    mixed = next(i for i, o in enumerate(outputs) if o.scheduled_spec_decode_tokens and o.scheduled_new_reqs
                 and any(n.sampling_params.temperature for n in o.scheduled_new_reqs))
    assert stats["step_seconds"][mixed] >= 1.0 and stats["step_seconds"][0] >= 0.6
    assert sorted(stats["step_seconds"], reverse=True)[:2] == [stats["step_seconds"][mixed], stats["step_seconds"][0]]
    assert stats["step_triton_compiles"][mixed] == 1 and sum(stats["step_triton_compiles"]) == 1
    # Sampled is what a step's requests are: the mixed round's prefill (the step before) holds greedy ones only.
    sampled = sampled_steps(outputs)
    assert not outputs[mixed - 1].scheduled_spec_decode_tokens and outputs[mixed - 1].scheduled_new_reqs
    assert sampled[mixed] and not sampled[mixed - 1] and not sampled[0] and not sampled[-1]
    slow = outputs[mixed]
    line = next(r.getMessage() for r in caplog.records if LOG_PREFIX in r.getMessage())
    first = outputs[0]
    assert len(first.num_scheduled_tokens) == 1 < len(slow.num_scheduled_tokens)
    assert (f"; slowest steps: {mixed + 1} ({len(slow.num_scheduled_tokens)} requests, "
            f"{slow.total_num_scheduled_tokens:,} tokens, sampled, compiles 1) {stats['step_seconds'][mixed]:.2f} s, "
            f"1 (1 request, {first.total_num_scheduled_tokens:,} tokens, greedy, "
            f"compiles 0) {stats['step_seconds'][0]:.2f} s, ") in line, line


def test_dflash_warm_up_reaches_every_block_bucket(vllm_platform, engines):
    from portable_spec.vllm_adapter.worker.kernel_warmup import warm_up_kernels, warmup_limits

    runner = recording_runner(engines, "qwen3_dflash")
    warm_up_kernels(runner)
    limits = warmup_limits(runner)
    assert limits.dflash and limits.lookahead == limits.k + 1
    seen = {(bool(o.scheduled_spec_decode_tokens), dflash_block(max(o.num_scheduled_tokens.values()), limits.k))
            for o in runner.outputs if o.total_num_scheduled_tokens}
    assert {b for verify, b in seen if not verify} == set(dflash_buckets(limits))
    assert {b for verify, b in seen if verify} == {b for b in dflash_buckets(limits) if b >= dflash_block(
        limits.k + 1, limits.k)}
    assert any(key[0] == DFLASH_INPUTS for key in reachable_keys(limits))


def test_draft_model_warm_up_reaches_every_tile_of_the_expand_kernel(vllm_platform, engines):
    """vLLM's draft model adds one input slot per request (read from its real ``DraftModelProposer``), so its expand
    kernel's tile follows the longest query plus one: with vLLM's kernel (nothing bound here) the warm-up reaches
    every tile, with and without drafts; bound one-tile (CUDA) it needs no round for them."""
    from portable_spec.vllm_adapter.worker.kernel_warmup import warm_up_kernels, warmup_limits

    runner = recording_runner(engines, "llama_ctx_draft_model")
    stats = warm_up_kernels(runner)
    limits = warmup_limits(runner)
    assert limits.expand_slots == 1 and not limits.dflash and limits.tiled() == (EXPAND_INPUTS,)
    assert stats["uncovered"] == []
    tiles = {tile_block(max(o.num_scheduled_tokens.values()), 1) for o in runner.outputs if o.total_num_scheduled_tokens}
    assert tiles == set(tile_buckets(limits, EXPAND_INPUTS)) and {2, 256} <= tiles
    lean = dataclasses.replace(limits, batch_agnostic=frozenset(BATCH_PARAMS))
    assert len(plan_rounds(lean)[0]) == 3 < len(plan_rounds(limits)[0])


@pytest.mark.parametrize("case,reason", [
    ("env_off", "PORTABLE_SPEC_WARMUP=off"),
    ("mrv2", "Model Runner V2"),
    ("drafter_off", "our FULL drafter is off"),
    ("pipeline", "pipeline parallel"),
    ("kv_scales", "KV-cache scales"),
    ("mamba", "KV-cache groups"),
])
def test_no_warm_up_where_it_must_not_run(vllm_platform, engines, monkeypatch, caplog, case, reason):
    from vllm.v1.kv_cache_interface import MambaSpec

    from portable_spec.vllm_adapter.worker.kernel_warmup import LOG_PREFIX, warm_up_kernels

    runner = recording_runner(engines)
    if case == "env_off":
        monkeypatch.setenv("PORTABLE_SPEC_WARMUP", "off")
    elif case == "mrv2":
        monkeypatch.setenv("VLLM_USE_V2_MODEL_RUNNER", "1")
    elif case == "drafter_off":
        runner.drafter = object()  # vLLM's own proposer: our runner is not in charge of drafting
    elif case == "pipeline":
        monkeypatch.setattr(runner.vllm_config.parallel_config, "pipeline_parallel_size", 2)
    elif case == "kv_scales":
        runner.calculate_kv_scales = True
    else:
        spec = MambaSpec(block_size=16, shapes=((1,),), dtypes=(torch.float16,))
        runner.kv_cache_config.kv_cache_groups[0] = type(runner.kv_cache_config.kv_cache_groups[0])(["m"], spec)
    with caplog.at_level(logging.INFO, logger="portable_spec"):
        stats = warm_up_kernels(runner)
    assert runner.calls == [] and any(reason in s for s in stats["skipped"])
    lines = [r.getMessage() for r in caplog.records if LOG_PREFIX in r.getMessage()]
    assert len(lines) == 1 and "skipped" in lines[0] and reason in lines[0]


def uniform_type_group(*inner):
    """A KV-cache group as vLLM builds it for a separate draft model whose head size differs from its target's:
    one ``UniformTypeKVCacheSpecs`` over both layers' specs."""
    from vllm.v1.kv_cache_interface import KVCacheGroupSpec, UniformTypeKVCacheSpecs

    specs = {f"layers.{i}.attn": spec for i, spec in enumerate(inner)}
    merged = UniformTypeKVCacheSpecs(block_size=inner[0].block_size, kv_cache_specs=specs)
    return KVCacheGroupSpec(list(specs), merged)


def test_a_draft_models_merged_kv_group_is_warmed_and_a_merged_mamba_layer_is_not(vllm_platform, engines):
    """vLLM merges a draft model's attention layers (head size 64) with its target's (128) into one
    ``UniformTypeKVCacheSpecs`` group (seen on the 8B + 1B-shaped pair): the warm-up runs for it, and refuses a
    merged group that holds a layer kind it does not allocate for."""
    from vllm.v1.kv_cache_interface import FullAttentionSpec, MambaSpec

    from portable_spec.vllm_adapter.worker.kernel_warmup import warm_up_kernels

    target = FullAttentionSpec(block_size=16, num_kv_heads=8, head_size=128, dtype=torch.bfloat16)
    draft = FullAttentionSpec(block_size=16, num_kv_heads=8, head_size=64, dtype=torch.bfloat16)
    runner = recording_runner(engines, "llama_ctx_draft_model")
    runner.kv_cache_config.kv_cache_groups[:] = [uniform_type_group(target, draft)]
    stats = warm_up_kernels(runner)
    assert "skipped" not in stats and stats["steps"] > 3 and stats["uncovered"] == []
    mamba = MambaSpec(block_size=16, shapes=((1,),), dtypes=(torch.float16,))
    runner = recording_runner(engines, "llama_ctx_draft_model")
    runner.kv_cache_config.kv_cache_groups[:] = [uniform_type_group(target, mamba)]
    stats = warm_up_kernels(runner)
    assert runner.calls == [] and any("MambaSpec" in s for s in stats["skipped"]), stats


def test_too_few_kv_blocks_skip_with_one_warning(vllm_platform, engines, caplog):
    from portable_spec.vllm_adapter.worker.kernel_warmup import LOG_PREFIX, warm_up_kernels

    runner = recording_runner(engines, num_blocks=1)  # only the null block
    with caplog.at_level(logging.INFO, logger="portable_spec"):
        stats = warm_up_kernels(runner)
    lines = [r for r in caplog.records if LOG_PREFIX in r.getMessage()]
    assert runner.calls == [] and stats["skipped"] == ["KV-cache blocks"]
    assert len(lines) == 1 and lines[0].levelno == logging.WARNING and "too few" in lines[0].getMessage()


def test_a_small_kv_cache_warms_what_fits_and_warns_about_the_rest(vllm_platform, engines, caplog):
    from portable_spec.vllm_adapter.worker.kernel_warmup import LOG_PREFIX, warm_up_kernels

    runner = recording_runner(engines, num_blocks=9)  # 8 usable blocks: no round of 16 requests fits
    with caplog.at_level(logging.INFO, logger="portable_spec"):
        stats = warm_up_kernels(runner)
    lines = [r for r in caplog.records if LOG_PREFIX in r.getMessage()]
    assert runner.calls and runner.live == {}
    assert stats["uncovered"] and len(lines) == 1 and lines[0].levelno == logging.WARNING
    assert "left to the first requests" in lines[0].getMessage()


def test_fewer_than_16_requests_warm_16_draft_rows_with_trimmed_drafts(vllm_platform, engines, caplog):
    """At most 8 requests and K=3 (3 draft rows per request): no batch of whole requests has 16 draft rows, which
    serving reaches when the scheduler trims a request's drafts; rounds with trimmed requests warm them."""
    from portable_spec.vllm_adapter.worker.kernel_warmup import LOG_PREFIX, warm_up_kernels

    runner = recording_runner(engines)
    runner.max_num_reqs = 8
    assert runner.num_spec_tokens == 3
    with caplog.at_level(logging.INFO, logger="portable_spec"):
        stats = warm_up_kernels(runner)
    lines = [r for r in caplog.records if LOG_PREFIX in r.getMessage()]
    assert len(lines) == 1 and lines[0].levelno == logging.INFO, [r.getMessage() for r in lines]
    assert stats["uncovered"] == [] and "left to the first requests" not in lines[0].getMessage()
    rows = [sum(len(d) for d in o.scheduled_spec_decode_tokens.values()) for o in runner.outputs]
    sampled = [o for o in runner.outputs if any(n.sampling_params.temperature > 0 for n in o.scheduled_new_reqs)]
    assert runner.trimmed >= 1 and 16 in rows and sampled and runner.live == {}
