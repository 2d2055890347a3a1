"""The soak's fixed sizes, in one place, each with the reason it has its value.

Three of them exist to keep the seeded-sampling comparison sound. A seeded request's output is a function of its
per-request random draws, and vLLM draws per step a number that depends on how many draft tokens the request had
scheduled that step (``rejection_sampler.generate_uniform_probs``, the recovered and bonus samples). Two servers
under the same load but different timing give a request the same steps only if nothing timing-dependent changes its
step structure, and in vLLM 0.26.0 two things do:

* **preemption** recomputes the request and samples its next token from a prefill instead of a verify step. The
  servers run ``--scheduling-policy priority``; seeded sampled requests have priority 0, every other request 1, and
  vLLM's scheduler preempts ``max(running, key=(priority, arrival_time))`` (``v1/core/sched/scheduler.py``), so
  they are preempted only when no priority-1 request runs. ``SAMPLED_MAX_TOKENS``/``SAMPLED_MAX_PROMPT`` keep all
  ``MAX_NUM_SEQS`` of them at once well inside ``NUM_GPU_BLOCKS`` (``assert`` below);
* **token-budget trimming**: the scheduler gives a running request ``min(needed, token_budget)`` tokens and cuts its
  scheduled drafts to what fits. Every running request is capped at ``LONG_PREFILL_TOKEN_THRESHOLD`` tokens a step
  (prefill chunks) or needs ``1 + K`` (a decode), so ``MAX_NUM_BATCHED_TOKENS >= MAX_NUM_SEQS * max(threshold,
  1 + K)`` means no request is ever cut (``assert`` below), while long prompts are still chunked beside decodes.
  The same bound admits a new seeded request's whole prompt in one step (at most ``MAX_NUM_SEQS - n`` others run,
  each taking at most the threshold), so its prefill is never chunked either.

Greedy output needs none of this: it is the same whatever the schedule (the zoo's targets win by 4 logits or more),
so greedy requests are the ones that get preempted, chunked and cut at every length.
"""

from __future__ import annotations

K = 3
"""Speculative tokens (the zoo's default; its context heads are built for it)."""
MAX_MODEL_LEN = 1024
"""As the e2e child's (``harness/e2e/child.py``): the zoo's context prompt set has one prompt ending there."""
MAX_NUM_SEQS = 8
"""Fewer than the first burst of requests (``BURST``): the rest wait in vLLM's queue."""
LONG_PREFILL_TOKEN_THRESHOLD = 100
"""Prefill tokens per request per step. A bucket bound of ``vllm:request_prefill_kv_computed_tokens``
(``build_1_2_5_buckets(1024)``: 1, 2, 5, ..., 100, 200, ...), so the engine's own histogram counts the requests whose
computed prefill exceeded it: those vLLM split into chunks."""
MAX_NUM_BATCHED_TOKENS = 1024
"""Token budget per step: >= ``MAX_NUM_SEQS * max(LONG_PREFILL_TOKEN_THRESHOLD, 1 + K)`` (see the module text)."""
BLOCK_SIZE = 16
NUM_GPU_BLOCKS = 128
"""KV-cache blocks (``--num-gpu-blocks-override``): 2,048 tokens, so eight running requests with the workload's
300-900-token prompts do not fit and vLLM preempts (at 160 blocks the H100 run of 2026-11-25 saw 0 preemptions on
llama_ctx_eagle: prefix-cache hits shrink the long prompts); one ``MAX_MODEL_LEN`` request (64 blocks) always fits,
and the seeded requests hold at most half (``sampled_blocks_bound``)."""
KV_CACHE_MEMORY_BYTES = 1 << 30
"""``--kv-cache-memory-bytes``: set only so vLLM skips memory profiling (other servers share the GPU); the block
count above decides the cache's size."""
GPU_MEMORY_UTILIZATION = 0.05
"""vLLM checks at start that this share of the GPU is free; eleven servers start on one GPU."""
SAMPLED_MAX_PROMPT = 64
SAMPLED_MAX_TOKENS = 48
"""Seeded sampled requests (priority 0) stay short: running sequences (an ``n = 2`` request is two) hold at most
``MAX_NUM_SEQS * ceil((SAMPLED_MAX_PROMPT + SAMPLED_MAX_TOKENS + K) / BLOCK_SIZE)`` blocks between them."""
SAMPLED_MAX_N = 2

PRESSURE_PROMPT = 96
PRESSURE_MAX_TOKENS = 400
"""The pressure wave (``Workload.pressure``): ``MAX_NUM_SEQS`` greedy requests sent at once to the server the
load left idle, each needing ``ceil((96 + 400 + K) / 16) = 32`` blocks, 256 between them, twice the cache. The
scheduler admits all eight (their prompts take 48 blocks) and they grow step by step, so the cache runs out while
all are running: vLLM must preempt (the load's own preemptions depend on its timing; the H100 runs of 2026-11-25
saw 0 on two of eleven servers). Even with the others at half their output when the first finishes,
``32 + 7 * 19 = 165`` blocks are asked of 128."""

BURST = 2 * MAX_NUM_SEQS
"""Requests sent at once at the start (queueing from the first step); the rest arrive staggered."""
MEAN_GAP_S = 0.12
"""Mean gap between the staggered arrivals (exponential, seeded)."""
REQUESTS = 96
"""Requests per server (the plan is the same for every server of a pair)."""
REQUEST_DEADLINE_S = 120.0
"""A request not finished this long after it was sent is a hang."""
LOAD_WALL_S = 200.0
"""The load's wall time per server; requests still open then are hangs."""
DRAIN_S = 30.0
"""After the load, vLLM's running and waiting gauges must reach 0 within this (aborted requests freed)."""
BOOT_S = 330.0
"""Every server must answer ``/health`` within this (all boot at once on one GPU, cold compile caches)."""
METRICS_EVERY_S = 0.25
"""How often the client samples ``/metrics`` during the load (the waiting gauge's peak)."""
TOTAL_S = 520.0
"""The whole run's wall deadline (pair generation, boots, load, drain, reads; stopping the servers comes after),
under ``ci/gpu/lane_and_pack.sh``'s 570 s limit for the lane call, which also installs the project."""
STOP_GRACE_S = 20.0
"""After SIGTERM, how long a server may take to shut its engine down before its process group is killed."""


def blocks(tokens: int) -> int:
    """KV blocks ``tokens`` tokens of one sequence hold."""
    return -(-tokens // BLOCK_SIZE)


def pressure_blocks(progress: float = 1.0) -> int:
    """KV blocks the pressure wave asks for when one request has finished and the others are at ``progress`` of
    their output."""
    finished = blocks(PRESSURE_PROMPT + PRESSURE_MAX_TOKENS + K)
    return finished + (MAX_NUM_SEQS - 1) * blocks(PRESSURE_PROMPT + int(progress * PRESSURE_MAX_TOKENS))


def sampled_blocks_bound() -> int:
    """The most KV blocks the priority-0 sequences can hold at once (each sequence its prompt and output)."""
    return MAX_NUM_SEQS * blocks(SAMPLED_MAX_PROMPT + SAMPLED_MAX_TOKENS + K)


assert MAX_NUM_BATCHED_TOKENS >= MAX_NUM_SEQS * max(LONG_PREFILL_TOKEN_THRESHOLD, 1 + K)
assert (MAX_NUM_BATCHED_TOKENS - (MAX_NUM_SEQS - SAMPLED_MAX_N) * max(LONG_PREFILL_TOKEN_THRESHOLD, 1 + K)
        >= SAMPLED_MAX_N * SAMPLED_MAX_PROMPT)
assert NUM_GPU_BLOCKS * BLOCK_SIZE >= MAX_MODEL_LEN + K
assert sampled_blocks_bound() <= NUM_GPU_BLOCKS // 2
assert pressure_blocks(0.5) > NUM_GPU_BLOCKS and PRESSURE_PROMPT + PRESSURE_MAX_TOKENS + K <= MAX_MODEL_LEN
assert MAX_NUM_SEQS * blocks(PRESSURE_PROMPT) < NUM_GPU_BLOCKS  # all eight are admitted at once


def as_json() -> dict[str, float | int]:
    """Every size, for the report."""
    return {name.lower(): value for name, value in globals().items()
            if name.isupper() and isinstance(value, (int, float))}
