"""Boot-time warm-up of structured output's one Triton kernel on our V1 runner: xgrammar's
``apply_token_bitmask_inplace_kernel``, which otherwise compiles at the first JSON-schema request, after vLLM
activates its JIT monitor (every committed soak showed it).

How serving reaches it (vLLM 0.26.0, 0.28.0, 0.33.0 alike): the V1 runner's ``sample_tokens(grammar_output)`` calls
``vllm.v1.structured_output.utils.apply_grammar_bitmask`` on the logits ``compute_logits`` returned (the model's dtype,
rows of the padded vocabulary sliced to the real one); that reorders the scheduler's bitmask to the logits rows and,
off the CPU, calls ``xgr.apply_token_bitmask_inplace(logits, bitmask, indices=...)``: ``indices`` None when every
logits row is structured, else an int32 device tensor of the structured rows. Every structured-output backend
(xgrammar, guidance, outlines, lm-format-enforcer) ends there, so what matters is that xgrammar is importable. Its
``backend="auto"`` picks Triton for a tensor on device type ``cuda`` (CUDA and ROCm); ``cpu`` gets a C++ kernel and any
other device (MUSA) ``torch.compile``. The launch's compile key: the logits dtype, the bitmask (int32), ``indices``
None or an int32 pointer, ``num_rows`` (rows masked: all logits rows, or the structured ones), ``vocab_size``,
``logits.stride(0)``, ``bitmask.stride(0)`` (Triton specializes an int equal to 1 and one divisible by 16), the
constexprs ``NUM_SMS`` (the device's) and ``BLOCK_SIZE`` (4096) and ``num_warps`` (from the logits' element size).
Per engine only ``indices`` and ``num_rows``'s class vary: the warm-up calls vLLM's own ``apply_grammar_bitmask`` on
logits from the runner's own ``compute_logits`` (the same dtype, width and row stride as serving's) for each
(indices or not) x (1 row, a multiple of 16, any other) an engine of these limits can reach: at most six launches.

Model Runner V2 does not reach this kernel: it masks with its own ``_apply_grammar_bitmask_kernel``
(``v1/worker/gpu/structured_outputs.py``), whose key holds no row count, and its own warm-up already passes a
``GrammarOutput`` (``v1/worker/gpu/warmup.py``) on 0.26.0, 0.28.0 and 0.33.0.
``PortableV1ModelRunner.capture_model`` calls ``warm_up_structured_output`` after ``kernel_warmup.warm_up_kernels``,
before the worker activates the JIT monitor. It never stops a boot: a failure is one warning, and the first
structured requests then compile as before.
"""

from __future__ import annotations

import importlib.util
import logging
import time
from dataclasses import dataclass
from math import ceil
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch
from vllm.v1.core.sched.output import GrammarOutput, SchedulerOutput
from vllm.v1.structured_output.utils import apply_grammar_bitmask

from portable_spec.vllm_adapter.patch import version_gate
from portable_spec.vllm_adapter.worker.kernel_warmup import (
    any_warmup_blockers, compile_summary, counted_triton_compiles, failure_reason, max_step_tokens,
)

logger = logging.getLogger("portable_spec.vllm_adapter")

LOG_PREFIX = "portable_spec: structured-output warm-up"
REQ_PREFIX = "_portable_spec_structured_"
KERNEL = "apply_token_bitmask_inplace_kernel"
ROW_CLASSES = (1, 2, 16)
"""The smallest row count of each class Triton tells apart (equal to 1, divisible by 16, any other): the easiest of
its class for an engine to reach, so a class is planned exactly when serving can reach it."""


def row_class(rows: int) -> str:
    """Triton's specialization of an int argument: ``1``, ``16k`` (divisible by 16) or ``other``."""
    return "1" if rows == 1 else "16k" if rows % 16 == 0 else "other"


@dataclass(frozen=True)
class Variant:
    """One launch: ``structured`` logits rows masked among ``rows`` (equal: ``indices`` is None), laid out as serving
    lays them out: each request 1 + its drafts rows (at most 1 + K), structured requests first."""

    rows: int
    structured: int

    @property
    def indexed(self) -> bool:
        return self.structured != self.rows

    @property
    def key(self) -> tuple[bool, str]:
        """What of the kernel's compile key this launch sets: (indices passed, ``num_rows``'s class)."""
        return self.indexed, row_class(self.structured)

    def requests(self, k: int) -> list[tuple[int, bool]]:
        """(logits rows, structured) per request, each at most 1 + ``k`` rows."""
        return _split(self.structured, k, True) + _split(self.rows - self.structured, k, False)


def _split(rows: int, k: int, structured: bool) -> list[tuple[int, bool]]:
    full, rest = divmod(rows, k + 1)
    return [(k + 1, structured)] * full + ([(rest, structured)] if rest else [])


def plan_variants(max_reqs: int, max_tokens: int, k: int) -> list[Variant]:
    """The launches that compile every key an engine of these limits can reach: every row of a step is a scheduled
    token (at most ``max_tokens``), every request brings 1 + at most ``k`` rows, at most ``max_reqs`` requests; a
    masked row count with ``indices`` needs a row left unmasked beside it."""
    variants = []
    for indexed in (False, True):
        for structured in ROW_CLASSES:
            variant = Variant(structured + indexed, structured)
            if variant.rows <= max_tokens and len(variant.requests(k)) <= max_reqs:
                variants.append(variant)
    return variants


def step_inputs(requests: list[tuple[int, bool]], k: int, vocab_size: int, prefix: str = REQ_PREFIX,
                fill: int = -1) -> tuple[SchedulerOutput, GrammarOutput, Any]:
    """The three inputs ``apply_grammar_bitmask`` reads for a step of ``requests`` ((logits rows, structured) each, in
    batch order), as the scheduler and the runner hand them over: the scheduler output's drafts per request, the
    ``GrammarOutput`` and the runner's batch order (its ``req_ids``, all the function reads of the input batch). The
    bitmask is the scheduler's width (``allocate_token_bitmask``: 32 tokens per int32), every int32 ``fill`` (-1
    allows every token), with the scheduler's rows per structured request: 1 + its drafts up to vLLM 0.28, 1 + K
    (``mask_stride``) from 0.33."""
    ids = [f"{prefix}{i}" for i in range(len(requests))]
    sched = SchedulerOutput.make_empty()
    sched.scheduled_spec_decode_tokens = {rid: [0] * (rows - 1) for rid, (rows, _) in zip(ids, requests) if rows > 1}
    structured = [(rid, rows) for rid, (rows, s) in zip(ids, requests) if s]
    per_request = version_gate.pick({"0.26.0": None, "0.33.0": k + 1})
    bitmask = np.full((sum(per_request or rows for _, rows in structured), ceil(vocab_size / 32)), fill, dtype=np.int32)
    grammar = GrammarOutput(structured_output_request_ids=[rid for rid, _ in structured], grammar_bitmask=bitmask)
    return sched, grammar, SimpleNamespace(req_ids=ids)


def apply_variant(logits: torch.Tensor, variant: Variant, k: int, vocab_size: int) -> None:
    """vLLM's ``apply_grammar_bitmask`` on the first ``variant.rows`` rows of ``logits`` (a row slice keeps serving's
    row stride and base pointer), every token allowed."""
    apply_grammar_bitmask(*step_inputs(variant.requests(k), k, vocab_size), logits[:variant.rows])


def structured_blockers(runner: Any) -> list[str]:
    """Why the structured-output warm-up must not run on this runner (empty: it runs)."""
    device = torch.device(runner.device)
    checks = any_warmup_blockers(runner) + [
        (device.type != "cuda", f"xgrammar masks {device.type} logits without Triton"),
        (importlib.util.find_spec("xgrammar") is None, "xgrammar is not installed: no structured output to serve"),
    ]
    return [reason for blocked, reason in checks if blocked]


def runner_limits(runner: Any) -> tuple[int, int, int]:
    """(max requests, max scheduled tokens, K) of this engine's steps."""
    sched = runner.vllm_config.scheduler_config
    max_tokens = max_step_tokens(sched)
    return runner.max_num_reqs, max_tokens, int(getattr(runner, "num_spec_tokens", 0) or 0)


def dummy_logits(runner: Any, rows: int) -> torch.Tensor:
    """Logits as serving's steps have them: the runner's own ``compute_logits`` on random hidden states (as vLLM's
    ``_dummy_sampler_run``), so dtype, width and row stride are the engine's."""
    mc = runner.model_config
    hidden = torch.rand(rows, mc.get_hidden_size(), dtype=mc.dtype, device=runner.device)
    return runner.model.compute_logits(hidden)


@torch.inference_mode()
def warm_up_structured_output(runner: Any) -> dict[str, Any]:
    """Compile the bitmask kernel for every key this engine can reach; log one line; return the statistics (also
    ``runner.structured_warmup_stats``). Never raises."""
    blockers = structured_blockers(runner)
    if blockers:
        logger.info("%s skipped (%s)", LOG_PREFIX, "; ".join(blockers))
        stats: dict[str, Any] = {"skipped": blockers}
    else:
        try:
            stats = _run(runner)
        except Exception as exc:  # never stop a boot vLLM would finish: the first structured requests compile
            reason = failure_reason(exc)
            logger.warning("%s failed (%s); the first structured-output requests may compile %s", LOG_PREFIX,
                           reason, KERNEL)
            stats = {"skipped": [f"error: {reason}"]}
    runner.structured_warmup_stats = stats
    return stats


def _run(runner: Any) -> dict[str, Any]:
    max_reqs, max_tokens, k = runner_limits(runner)
    variants = plan_variants(max_reqs, max_tokens, k)
    vocab = runner.model_config.get_vocab_size()
    started = time.perf_counter()
    with counted_triton_compiles() as compiles:
        logits = dummy_logits(runner, max(v.rows for v in variants))
        for variant in variants:
            apply_variant(logits, variant, k, vocab)
        if torch.accelerator.is_available():
            torch.accelerator.synchronize()
    seconds = time.perf_counter() - started
    shapes = [f"{v.structured}{'/' + str(v.rows) if v.indexed else ''}" for v in variants]
    stats = {"variants": [[v.rows, v.structured] for v in variants], "logits_dtype": str(logits.dtype).split(".")[-1],
             "vocab": int(logits.shape[-1]), "row_stride": int(logits.stride(0)), "seconds": round(seconds, 3),
             "triton_compiles": dict(compiles)}
    logger.info("%s: xgrammar's bitmask on %d launches (rows masked/of rows: %s; %s logits, vocabulary %d, row stride "
                "%d) in %.2f s; %d Triton compiles (%s)", LOG_PREFIX, len(variants), ", ".join(shapes),
                stats["logits_dtype"], stats["vocab"], stats["row_stride"], seconds, sum(compiles.values()),
                compile_summary(compiles))
    return stats
