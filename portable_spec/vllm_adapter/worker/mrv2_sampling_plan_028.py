"""``mrv2_sampling_plan`` for vLLM 0.28.0 (vllm-musa's pin): which sampled rounds the boot-time warm-up adds under
Model Runner V2 so that no Triton kernel of MRV2's sampler or rejection sampler compiles at the first sampled request
(``mrv2_warmup`` picks this module's ``PLAN``, the 0.26.0 one's or the 0.33.0 one's with ``version_gate.pick``;
0.33.0's names, kernels and profiles are used from ``mrv2_sampling_plan_033`` itself). Pure Python; the
rounds are ``warmup_plan.Round``s turned into scheduler outputs by ``kernel_warmup.warmup_schedule``, as for the others.

Neither neighbour's model fits 0.28.0 (paths below are under ``vllm/``):

- 0.26.0's does not: 0.26.0 ran temperature, min-p and the rejection kernels on the model's logits or a raw-logprobs
  clone; 0.28.0 copies the logits of a batch that needs processing to a new FP32 tensor
  (``v1/worker/gpu/sample/sampler.py:192-196``, ``needs_logits_processing`` ``:75-87``) and samples the main
  sampler's tokens with ``_gumbel_sample_kernel`` (``sampler.py:287-295``), which 0.26.0's model has no key for.
- 0.33.0's dtype model does fit (same FP32 copy, same FlashInfer rule ``sampler.py:272-280``, same logprobs
  kernels), but three of its keys do not exist on 0.28.0 and one is missing:
  ``_topk_topp_kernel`` specializes its integer ``BATCH_SIZE`` as every integer (``v1/sample/ops/
  topk_topp_triton.py:94-103``: no ``do_not_specialize_on_alignment``; 0.33.0 specializes on 1 only) and has no
  ``SPLIT_COVERS_PONLY``; ``apply_top_k_top_p`` takes the torch sort below 8 rows on a GPU
  (``v1/sample/ops/topk_topp_sampler.py:349-364``), so its rows are 8 and more, in the classes 16k and other (0.26.0's
  rule); ``_compute_local_logits_stats_kernel`` and ``_compute_local_residual_mass_kernel`` take no ``num_logits``
  (``spec_decode/rejection_sampler_utils.py:192-225, 386-425``): one variant per logits dtype, no row class;
  ``_gather_draft_sampled_kernel`` does not exist (0.28.0 gathers the drafts with torch indexing,
  ``spec_decode/rejection_sampler.py:259-260``).

What vLLM 0.28.0 compiles at boot itself: ``v1/worker/gpu/warmup.py:201-417`` runs ONE batch of
``min(max_num_seqs, budget // (decode_query_len + 1))`` requests with ``SamplingParams.for_sampler_warmup()``
(``sampling_params.py:1164-1179``: temperature 0.9, top-k 50 AND top-p 0.9, min-p, penalties, logit bias, bad words,
``logprobs=5``, unseeded): a prefill (main sampler), then decode steps of all requests with drafts, two (one with
drafts), two without, one with, one without (``warmup.py:391-410``). Every one of those batches needs processing, so
it reaches the FP32 variants only, top-k AND top-p only (at the row classes of its shapes), a 6-column logprobs
softmax only; its unseeded prefill goes to FlashInfer's sampler where FlashInfer samples. No JIT warm-up registry
names a sampling kernel on 0.28.0 (``model_executor/warmup/``): every kernel below is plain ``triton.jit``.
``run_mixed_prefill_decode_warmup`` (``warmup.py:76-198``, greedy) runs only for FlashInfer sparse MLA.

What serving reaches, per kernel, with the arguments that vary with the request mix (everything else is fixed per
engine: vocab size, logits strides, FP64 Gumbel, draft logits, block verification, synthetic rates):

- Target-logits dtype, ``MODEL`` or ``FP32``: FP32 where a request of the batch needs processing (temperature not 0
  or 1, min-p, top-k, top-p, or a logits processor), else the model's dtype (a greedy or plain temperature-1 batch).
- ``_temperature_kernel`` (``sample/gumbel.py:17-58``, launched by ``sample/states.py:70-81`` for a temperature not in
  {0, 1}) and ``_min_p_kernel`` (``sample/min_p.py:8-60``, ``states.py:83-92``): FP32 logits always, nothing varies.
- ``_topk_topp_kernel``: ``TOPK_ENABLED`` / ``TOPP_ENABLED`` (``topk_topp_triton.py:949-966``) and ``BATCH_SIZE``'s
  class. Rows: one per request in the main sampler (steps without drafts) unless FlashInfer takes the batch (no
  greedy, no seeded request, no processed logprobs), one per logits row in the rejection sampler, which always
  filters (``rejection_sampler.py:146-154``: ``apply_sampling_params`` with top-k/top-p). Key: (top-k?, top-p?, class
  of rows), rows >= 8.
- ``_gumbel_sample_kernel`` in the main sampler (``sampler.py:287-295``, ``apply_temperature=False``, no logits
  cache): the logits' dtype. The draft's Gumbel sampling (``spec_decode/speculator.py:326-349``) varies with nothing
  per request: vLLM's warm-up drafts.
- Rejection sampler (``rejection_sampler_utils.py:922-1188``), only in a step with drafts
  (``v1/worker/gpu/model_runner.py:1351-1363``): ``_compute_local_logits_stats_kernel``, ``_rejection_kernel``,
  ``_resample_kernel``, with block verification ``_compute_cumulative_log_p_kernel`` and
  ``_compute_local_residual_mass_kernel`` (the latter only with draft logits; modeled with block verification
  either way). Key: (kernel, dtype). ``_insert_resampled_kernel`` takes no logits: one variant, vLLM's.
- Logprobs (``sample/logprob.py``): ``_topk_log_softmax_kernel`` (``:16-26``, launched ``:95-105``): constexpr
  ``TOPK_BLOCK_SIZE = next_power_of_2(1 + logprobs)`` (at most 1024) and the integer ``topk`` (``1 + logprobs``, the
  batch's largest), on the raw logits (model dtype) or, in a processed logprobs mode, on the processed ones;
  ``_ranks_kernel`` (``:60-80``): the logits' dtype. In ``raw_logits`` / ``processed_logits`` mode the softmax
  kernel does not run (a gather). ``_flatten_sampled_kernel`` (``rejection_sampler.py:55-72``): one variant.
  These keys are 0.33.0's (``mrv2_sampling_plan_033.logprobs_key``): the kernels did not change in what varies.

Not modeled (one variant each reached by vLLM's ``for_sampler_warmup`` batch, or opt-in per request): logits
processors (penalties, logit bias, bad words, allowed token ids, min tokens, thinking budget), prompt logprobs,
``logprob_token_ids`` (``_fill_logprob_token_ids_kernel``, ``logprob.py:140-164``); a verify step of more logits rows
than ``get_max_chunk_logits`` (``rejection_sampler.py:26-37``: 1 GiB of FP32 logits, 2093 rows at a 128256
vocabulary) is verified in chunks, whose row slices are not modeled; and engines with adaptive verification
(``mrv2_warmup`` does not run there). Over-approximating (a key costs a round, never a compile); what the rounds cannot
reach within the engine's limits is returned and named by the warm-up's log line. Deterministic.
``tests/test_mrv2_sampled_compiles_028.py`` drives vLLM 0.28.0's own ``Sampler`` and ``RejectionSampler`` and holds
this model to the Triton keys their launches specialize on.
"""

from __future__ import annotations

from portable_spec.vllm_adapter.worker import mrv2_sampling_plan as v026
from portable_spec.vllm_adapter.worker import mrv2_sampling_plan_033 as v033
from portable_spec.vllm_adapter.worker.sampling_plan import (
    TOPK_TOPP, TRITON_MIN_ROWS, Mrv2SamplingPlan, Sampling, SamplingLimits,
)
from portable_spec.vllm_adapter.worker.warmup_plan import Limits, Round, int_class, interval_classes


def _as_028(key: tuple) -> tuple | None:
    """0.33.0's key as 0.28.0 has it: the rejection kernels without a row class; no draft gather kernel (None).
    (``_topk_topp_kernel``'s keys are made per row count, ``_step_keys`` / ``reachable_keys``.)"""
    if key[0] == v033.GATHER:
        return None
    return key[:2] if key[0] in (v033.STATS, v033.RESIDUAL) else key


def reachable_keys(limits: Limits, sampling: SamplingLimits) -> frozenset:
    """Every MRV2 sampling-path variant serving can reach on this engine (see the module docstring): 0.33.0's, with
    ``_topk_topp_kernel`` at each class of 8 rows and more up to the most one launch can get (0.26.0's bound,
    ``mrv2_sampling_plan.max_rows``: a request each in the main sampler, 1+K per verifying request in the rejection
    sampler, within the step's token budget)."""
    keys = {_as_028(key) for key in v033.reachable_keys(limits, sampling) if key[0] != TOPK_TOPP} - {None}
    for cls in interval_classes(TRITON_MIN_ROWS, v026.max_rows(limits)):
        keys |= {(TOPK_TOPP, k, p, cls) for k, p in ((True, False), (False, True), (True, True))}
    return frozenset(keys)


def _step_keys(reqs: list[Sampling], rows: int, verify: bool, sampling: SamplingLimits) -> set:
    """What one sampler call on ``reqs`` compiles for sure on any platform (``rows``: its logits rows; ``verify``:
    the rejection sampler's, else the main sampler's): 0.33.0's, with ``_topk_topp_kernel`` from 8 rows only, keyed
    by their class."""
    keys: set = set()
    for key in v033._step_keys(reqs, rows, verify, sampling):
        if key[0] == TOPK_TOPP:
            if rows >= TRITON_MIN_ROWS:
                keys.add(key[:3] + (int_class(rows),))
        elif (key := _as_028(key)) is not None:
            keys.add(key)
    return keys


def round_keys(rnd: Round, limits: Limits, sampling: SamplingLimits) -> frozenset:
    """The MRV2 sampling-path variants ``rnd``'s steps compile: its prefill (main sampler) and its verify step."""
    return v033.round_keys(rnd, limits, sampling, step_keys=_step_keys)


def plan_rounds(limits: Limits, sampling: SamplingLimits, dropped: tuple[str, ...] = ()
                ) -> tuple[list[Round], frozenset]:
    """Rounds covering ``reachable_keys`` (0.33.0's profiles, 0.26.0's candidates and greedy cover) and the keys
    left uncovered. ``dropped`` leaves profiles out (tests drop one to see a key left)."""
    return v033.plan_rounds(limits, sampling, dropped, reachable=reachable_keys, keys_of=round_keys)


PLAN = Mrv2SamplingPlan("0.28.0", plan_rounds, v033.request_sampling)
"""What ``mrv2_warmup`` calls on vLLM 0.28: this model's rounds, with 0.33.0's profiles' request samplings."""
