"""The MoE size warm-up (``worker/moe_size_warmup.py``): the token counts it runs reach every fused-MoE kernel variant a
step above the capture sizes can compile, judged with vLLM's own config lookup; and on a runner it runs them through
``_dummy_run``, skips dense targets, and never stops a boot.

The mechanism (H200 x2, vLLM 0.28.0, TP=2): with 1,024-token prompts the Qwen3-30B-A3B-shaped pair compiled
``fused_moe_kernel`` after boot on vLLM's engine and ours: a step of M tokens above the capture sizes (up to 256 there)
picks the tuned table's entry nearest M (1,024 and 4,096 differ), which neither the capture sizes nor the profile run
(the 8,192-token budget) compiled, or compiled only for the other parity of M.
"""

from __future__ import annotations

import functools
import logging
import types

import pytest
import torch

from portable_spec.vllm_adapter.worker.moe_size_warmup import (
    LOG_PREFIX, eager_floor, experts_per_token, ladder, moe_token_counts, residues, warm_up_moe_sizes,
)

FUSED_MOE = "vllm.model_executor.layers.fused_moe.fused_moe"
# Qwen3-30B-A3B: 128 experts, 8 per token, hidden 2048, expert intermediate 768 (384 per rank at TP=2); Mixtral:
# 8 experts, 2 per token, hidden 4096, intermediate 14336.
SHAPES = {"qwen3_30b_a3b_tp2": (128, 384, 2048, 8), "qwen3_30b_a3b_tp1": (128, 768, 2048, 8),
          "mixtral_8x7b_tp1": (8, 14336, 4096, 2)}
CAPTURE_512 = [1, 2, 4] + list(range(8, 513, 8))  # vLLM's default capture sizes up to 512


def kernel_variant(fm, shape: str, m: int) -> tuple:
    """What a fused-MoE launch at ``m`` tokens compiles as: vLLM's config for ``m`` and ``(m * top_k) mod 16``, which
    decides the divisibility class of ``num_valid_tokens`` and ``EM`` (a superset of Triton's distinction)."""
    e, n, hidden, top_k = SHAPES[shape]
    config = fm.try_get_optimal_moe_config((e, 2 * n, hidden), (e, hidden, n), top_k, None, m)
    return tuple(sorted(config.items())), (m * top_k) % 16


@pytest.fixture(params=["tuned_h200", "default"])
def moe_config(request, monkeypatch):
    """vLLM's fused-MoE config lookup as on an H200 (its tuned tables) or on a device with no table (its default)."""
    fm = pytest.importorskip(FUSED_MOE)
    name = "NVIDIA_H200" if request.param == "tuned_h200" else "NO_SUCH_DEVICE"
    monkeypatch.setattr(fm, "get_device_name_as_file_name", lambda: name)
    fm.get_moe_configs.cache_clear()
    yield fm, request.param
    fm.get_moe_configs.cache_clear()


@pytest.mark.parametrize("shape, floor, max_tokens", [
    ("qwen3_30b_a3b_tp2", 256, 8192),  # the served pair: max_num_seqs 32, K=3, capture sizes up to 256
    ("qwen3_30b_a3b_tp2", 512, 8192), ("qwen3_30b_a3b_tp1", 512, 8192), ("qwen3_30b_a3b_tp2", 512, 2048),
    ("qwen3_30b_a3b_tp2", 0, 4096), ("mixtral_8x7b_tp1", 512, 8192), ("mixtral_8x7b_tp1", 256, 16384),
])
def test_the_planned_counts_reach_every_variant_an_eager_step_compiles(moe_config, shape, floor, max_tokens):
    fm, table = moe_config
    top_k = SHAPES[shape][3]
    if table == "tuned_h200" and shape.startswith("qwen3"):  # the table the GPU run used is there to be read
        e, n = SHAPES[shape][:2]
        assert fm.get_moe_configs(e, n, None), "vLLM ships no tuned table for this shape on the H200 any more"
    counts = moe_token_counts(floor, max_tokens, top_k)
    assert counts and all(floor < c <= max_tokens for c in counts)
    compiled = {kernel_variant(fm, shape, s) for s in counts + [s for s in CAPTURE_512 if s <= floor]}
    reached = {kernel_variant(fm, shape, m) for m in range(floor + 1, max_tokens + 1)}
    missed = reached - compiled
    assert len(reached) >= 2 and not missed, f"{len(missed)} of {len(reached)} variants left to requests"
    # Without the warm-up (what vLLM compiles: its capture sizes and the profile run's token budget) the same
    # comparison fails: the bug this module fixes.
    if floor:
        vllm_only = {kernel_variant(fm, shape, s) for s in CAPTURE_512 if s <= floor} | {
            kernel_variant(fm, shape, max_tokens)}
        assert reached - vllm_only


def test_the_ladder_holds_every_batch_size_vllms_moe_configs_change_at():
    tuning_batch_sizes = [1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 256, 512, 1024, 1536, 2048, 3072, 4096]
    assert set(tuning_batch_sizes) <= set(ladder(4096))
    assert {32, 64, 96, 128, 512} <= set(ladder(512))  # get_default_config's thresholds
    assert ladder(1) == [1] and max(ladder(5000)) == 4096


@pytest.mark.parametrize("top_k, expected", [(8, 2), (2, 8), (1, 16), (6, 8), (16, 1), (None, 16)])
def test_residues_reach_every_product_class_mod_16(top_k, expected):
    assert residues(top_k) == expected
    if top_k:
        assert len({(m * top_k) % 16 for m in range(100, 100 + expected)}) == len({(m * top_k) % 16 for m in range(16)})


def test_counts_stay_in_the_eager_range_largest_first():
    counts = moe_token_counts(512, 8192, 8)
    assert counts == sorted(counts, reverse=True) and counts[0] == 8192 and min(counts) > 512
    assert {1024, 1023, 1536, 1535, 768, 767} <= set(counts) and len(counts) == 16
    assert moe_token_counts(8192, 8192, 8) == []


# ---- on a runner -------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def mixtral_config(tmp_path_factory):
    """A real VllmConfig of the zoo's Mixtral pair (an MoE target, 2 experts per token) with EAGLE."""
    from portable_spec_harness.model_zoo import build_pair
    from shared_zoo import shared_zoo
    from vllm_configs import pair_config

    pair = build_pair("mixtral_eagle", shared_zoo(tmp_path_factory), variant="perfect")
    return pair_config(pair, max_num_seqs=64, max_model_len=1024)


@pytest.fixture(scope="module")
def llama_config(tmp_path_factory):
    from portable_spec_harness.model_zoo import build_pair
    from shared_zoo import shared_zoo
    from vllm_configs import pair_config

    pair = build_pair("llama_eagle", shared_zoo(tmp_path_factory), variant="perfect")
    return pair_config(pair, max_num_seqs=64, max_model_len=1024)


class DummyRunRunner:
    """Stands for our V1 runner: its config and a ``_dummy_run`` that records the token counts (and may fail)."""

    def __init__(self, cfg, fail_at: int | None = None) -> None:
        self.vllm_config, self.model_config = cfg, cfg.model_config
        self.is_pooling_model, self.calculate_kv_scales, self.eplb_state = False, False, None
        self.fail_at, self.runs = fail_at, []

    def _dummy_run(self, num_tokens: int, **kwargs):
        assert kwargs == {"skip_eplb": True, "remove_lora": False}
        assert num_tokens <= self.vllm_config.scheduler_config.max_num_batched_tokens
        if num_tokens == self.fail_at:
            raise RuntimeError("CUDA out of memory\nsecond line")
        self.runs.append(num_tokens)
        return torch.zeros(1), torch.zeros(1)


@pytest.fixture(autouse=True)
def warmup_on(monkeypatch):
    monkeypatch.delenv("PORTABLE_SPEC_WARMUP", raising=False)
    monkeypatch.setenv("VLLM_USE_V2_MODEL_RUNNER", "0")


def test_an_moe_target_runs_every_planned_count_through_dummy_run(mixtral_config, caplog):
    runner = DummyRunRunner(mixtral_config)
    assert experts_per_token(mixtral_config.model_config) == 2
    with caplog.at_level(logging.INFO, logger="portable_spec.vllm_adapter"):
        stats = warm_up_moe_sizes(runner)
    floor = eager_floor(mixtral_config)
    max_tokens = mixtral_config.scheduler_config.max_num_batched_tokens
    assert stats["planned"] == moe_token_counts(floor, max_tokens, 2) and runner.runs == stats["planned"]
    assert len(runner.runs) >= 8 and stats["failure"] is None and stats["top_k"] == 2
    assert sum(LOG_PREFIX in r.message and "token counts" in r.message for r in caplog.records) == 1


def test_a_dense_target_and_warmup_off_skip_with_one_line(llama_config, mixtral_config, monkeypatch, caplog):
    dense = DummyRunRunner(llama_config)
    with caplog.at_level(logging.INFO, logger="portable_spec.vllm_adapter"):
        assert warm_up_moe_sizes(dense) == {"skipped": ["dense target"]}
        monkeypatch.setenv("PORTABLE_SPEC_WARMUP", "off")
        moe = DummyRunRunner(mixtral_config)
        assert warm_up_moe_sizes(moe)["skipped"] == ["PORTABLE_SPEC_WARMUP=off"]
    assert dense.runs == [] and moe.runs == []
    assert sum(LOG_PREFIX in r.message and "skipped" in r.message for r in caplog.records) == 2


def test_a_failing_forward_is_one_warning_and_the_boot_goes_on(mixtral_config, caplog):
    planned = moe_token_counts(eager_floor(mixtral_config),
                               mixtral_config.scheduler_config.max_num_batched_tokens, 2)
    runner = DummyRunRunner(mixtral_config, fail_at=planned[2])
    with caplog.at_level(logging.INFO, logger="portable_spec.vllm_adapter"):
        stats = warm_up_moe_sizes(runner)
    assert runner.runs == planned[:2] and stats["failure"] == "RuntimeError: CUDA out of memory"
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and LOG_PREFIX in r.message]
    assert len(warnings) == 1 and str(planned[2]) in warnings[0].message


def test_the_floor_is_the_largest_capture_size_only_where_mixed_batches_replay_graphs(mixtral_config):
    from vllm.config import CUDAGraphMode

    cfg = types.SimpleNamespace(model_config=types.SimpleNamespace(enforce_eager=False),
                                compilation_config=types.SimpleNamespace(cudagraph_capture_sizes=[1, 2, 4, 8, 512],
                                                                         cudagraph_mode=None))
    for mode, floor in ((CUDAGraphMode.FULL_AND_PIECEWISE, 512), (CUDAGraphMode.PIECEWISE, 512),
                        (CUDAGraphMode.FULL, 512), (CUDAGraphMode.FULL_DECODE_ONLY, 0), (CUDAGraphMode.NONE, 0)):
        cfg.compilation_config.cudagraph_mode = mode
        assert eager_floor(cfg) == floor, mode
    cfg.model_config.enforce_eager = True
    cfg.compilation_config.cudagraph_mode = CUDAGraphMode.FULL_AND_PIECEWISE
    assert eager_floor(cfg) == 0


def test_the_v1_runner_runs_it_after_the_drafters_capture_and_before_the_kernel_warm_up():
    import inspect

    from portable_spec.vllm_adapter.worker.v1_model_runner import PortableV1ModelRunner

    source = inspect.getsource(PortableV1ModelRunner.capture_model)
    order = [source.index(name) for name in ("super().capture_model()", "capture_graphs()", "warm_up_moe_sizes(self)",
                                             "warm_up_kernels(self)")]
    assert order == sorted(order)


def test_vllms_dummy_run_still_takes_the_arguments_the_warm_up_passes():
    import inspect

    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    params = inspect.signature(GPUModelRunner._dummy_run).parameters
    assert {"num_tokens", "skip_eplb", "remove_lora"} <= set(params)
    assert functools.reduce(lambda ok, n: ok and params[n].default is not inspect.Parameter.empty,
                            ("skip_eplb", "remove_lora"), True)
