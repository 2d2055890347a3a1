"""Boot-time warm-up of a mixture-of-experts target at the token counts it runs eagerly, so that vLLM's fused-MoE Triton
kernel compiles at boot, not when the first long prompt arrives.

Why: vLLM's V1 runner compiles the model at its graph capture sizes and at the profile run's token count, and nowhere
between. A step larger than the largest capture size (a 1,024-token prompt, alone or joining a decode) runs eagerly at
its exact token count M, and the fused-MoE kernel specializes on M in two ways:
- its launch config (tile sizes, warps, stages) is looked up by M: a tuned table (``E=..,N=..,device_name=...json``)
  by the nearest tuned batch size, keyed on the batch sizes of vLLM's tuning script (1, 2, 4, 8, 16, 24, 32, 48, 64,
  96, 128, 256, 512, 1024, 1536, 2048, 3072, 4096), or the default config, which changes at M = 32, 64, 96, 128 and
  512 and where M per expert passes 128. Every such batch size is a power of two or three times one, so the ladder of
  those values up to the step's token budget (and the budget itself) reaches every config;
- Triton specializes the integer arguments ``num_valid_tokens`` (M times the experts per token) and ``EM`` (the sorted
  token ids' length, that product plus a config constant, or rounded up to the tile) on divisibility by 16, so within
  one config M mod 16 decides the variant through ``(M * top_k) mod 16``: 16 / gcd(top_k, 16) residues reach them all
  (2 for 8 experts per token).
So each ladder point p runs at p, p - 1, ..., p - (residues - 1). Observed: with 1,024-token prompts the MoE pair at
tensor parallel 2 compiled ``fused_moe_kernel`` after boot on vLLM's engine and on ours alike.

How: ``_dummy_run`` (vLLM's own profile and compile-size warm-up path) at each of those token counts above the floor
(the largest capture size where mixed batches replay graphs, padded to a capture size; 0 where they run eagerly),
through vLLM's cudagraph dispatch, which runs these sizes eagerly. Every tensor-parallel rank plans the same counts.
Dense targets, ``PORTABLE_SPEC_WARMUP=off`` and the engines ``kernel_warmup.engine_blockers`` names skip it with one
log line; a failing forward is one warning and the engine boots on (its first such request compiles then,
as on vLLM's engine). Model Runner V2 is not covered here (vLLM picks the V1 runner for the MoE pairs we serve).
"""

from __future__ import annotations

import logging
import time
from math import gcd
from typing import Any

import torch

from portable_spec.vllm_adapter.worker.kernel_warmup import (
    compile_summary, counted_triton_compiles, engine_blockers, failure_reason, max_step_tokens,
)

logger = logging.getLogger("portable_spec.vllm_adapter")

LOG_PREFIX = "portable_spec: MoE size warm-up"
RESIDUE_MODULUS = 16  # Triton's divisibility specialization of integer arguments


def ladder(top: int) -> list[int]:
    """Powers of two and three times a power of two, up to ``top``: every batch size vLLM's MoE configs change at."""
    out, power = set(), 1
    while power <= top:
        out.add(power)
        if 3 * power // 2 <= top and power >= 2:
            out.add(3 * power // 2)
        power *= 2
    return sorted(out)


def residues(top_k: int | None) -> int:
    """How many consecutive token counts reach every value of ``(M * top_k) mod 16`` (all 16 when top_k is unknown)."""
    return RESIDUE_MODULUS // gcd(top_k, RESIDUE_MODULUS) if top_k else RESIDUE_MODULUS


def moe_token_counts(floor: int, max_tokens: int, top_k: int | None) -> list[int]:
    """The token counts to run, largest first (as vLLM warms its compile sizes): each ladder point above ``floor``
    (and ``max_tokens``) and the residues below it, all within ``(floor, max_tokens]``."""
    points = {p for p in ladder(max_tokens) if p > floor} | ({max_tokens} if max_tokens > floor else set())
    counts = {p - r for p in points for r in range(residues(top_k)) if p - r > floor}
    return sorted(counts, reverse=True)


def eager_floor(vllm_config: Any) -> int:
    """Token counts up to this run inside captured graphs at a capture size (compiled at capture): the largest capture
    size where mixed batches replay graphs (piecewise or full); 0 where they run eagerly (no capture, or graphs for
    decode batches only)."""
    comp = vllm_config.compilation_config
    sizes = comp.cudagraph_capture_sizes or []
    mode = comp.cudagraph_mode
    mixed_graphs = mode is not None and mode.mixed_mode() != type(mode).NONE
    if vllm_config.model_config.enforce_eager or not sizes or not mixed_graphs:
        return 0
    return max(sizes)


def experts_per_token(model_config: Any) -> int | None:
    """The target's experts per token, as vLLM reads it (0.28+), else from the HF config; None if neither says."""
    getter = getattr(model_config, "get_num_experts_per_tok", None)
    if getter is not None:
        try:
            value = getter()
        except (AttributeError, TypeError):
            value = None
        if value:
            return int(value)
    text = getattr(model_config, "hf_text_config", None)
    for name in ("num_experts_per_tok", "experts_per_token", "moe_topk", "num_experts_per_token"):
        value = getattr(text, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def moe_warmup_blockers(runner: Any) -> list[str]:
    """Why this warm-up must not run (empty: it runs)."""
    checks = engine_blockers(runner) + [
        (not runner.model_config.is_moe, "dense target"),
        (runner.vllm_config.use_v2_model_runner, "Model Runner V2"),
    ]
    return [reason for blocked, reason in checks if blocked]


@torch.inference_mode()
def warm_up_moe_sizes(runner: Any) -> dict[str, Any]:
    """Run the target (and vLLM's drafter dummy run) at each planned token count; log one line, return the statistics
    (also ``runner.moe_warmup_stats``). Never raises: a failed forward ends the warm-up with one warning."""
    blockers = moe_warmup_blockers(runner)
    if blockers:
        logger.info("%s skipped (%s)", LOG_PREFIX, "; ".join(blockers))
        runner.moe_warmup_stats = {"skipped": blockers}
        return runner.moe_warmup_stats
    cfg = runner.vllm_config
    floor, top_k = eager_floor(cfg), experts_per_token(runner.model_config)
    counts = moe_token_counts(floor, max_step_tokens(cfg.scheduler_config), top_k)
    started, ran, failure = time.perf_counter(), [], None
    with counted_triton_compiles() as compiles:
        for count in counts:
            try:
                runner._dummy_run(count, skip_eplb=True, remove_lora=False)
            except Exception as exc:  # our layer never stops an engine vLLM would boot
                failure = failure_reason(exc)
                break
            ran.append(count)
        if torch.accelerator.is_available():
            torch.accelerator.synchronize()
    seconds = time.perf_counter() - started
    stats = {"floor": floor, "top_k": top_k, "planned": counts, "ran": ran, "seconds": round(seconds, 3),
             "triton_compiles": dict(compiles), "failure": failure}
    if failure:
        logger.warning("%s stopped at %d tokens (%s); %d of %d token counts ran; larger prompts may compile "
                       "fused-MoE kernels on their first requests", LOG_PREFIX, counts[len(ran)], failure, len(ran),
                       len(counts))
    else:
        logger.info("%s: %d token counts in (%d, %d] (%s experts per token) in %.2f s; %d Triton compiles (%s)",
                    LOG_PREFIX, len(ran), floor, counts[0] if counts else floor, top_k or "unknown", seconds,
                    sum(compiles.values()), compile_summary(compiles))
    runner.moe_warmup_stats = stats
    return stats
