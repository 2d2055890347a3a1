"""Where one decode step's time goes, per phase, from a torch-profiler trace of vLLM decoding (``profile_decode``):
host time and device time of the same phases for V1 and Model Runner V2, so the two runners (and our drafter) can be
compared phase by phase. Phases are read from ``record_function`` scopes: vLLM's own (V1 has them, switched on by
``offline.runner_scopes``) and ours where vLLM has none (``portable_spec_harness.vllm_door.profile_scopes``). ``SCOPE_PHASES`` is the map.

What each phase holds (V1 | MRV2):
- ``target_prep``: V1 ``gpu_model_runner: preprocess`` (batch state update, input ids/positions, attention metadata)
  plus the rest of ``execute_model`` (forward context) | MRV2 ``execute_model`` minus the forward (request states,
  ``prepare_inputs``, ``prepare_attn``; a step whose target runs eagerly or piecewise keeps its forward here).
- ``target_forward``: V1 ``gpu_model_runner: forward`` | MRV2 ``ModelCudaGraphManager.run_fullgraph`` (FULL replays).
- ``verify``: the target's logits at the verified positions and the rejection sampler: V1 ``gpu_model_runner:
  postprocess`` + ``gpu_model_runner: sample`` | MRV2 ``GPUModelRunner.sample``.
- ``draft_first``: the drafter up to its first draft token: V1 ``gpu_model_runner: draft`` outside ``propose`` (the
  runner's drafter inputs, the draft-token copy to the host) + ``propose`` up to its first sample (inputs, metadata,
  forward or replay, sample) | MRV2 the speculator's ``propose`` up to its decode steps: EAGLE's up to
  ``prepare_decode_inputs`` (inputs, prefill replay with its sample); the standalone draft model's (vLLM 0.33.0,
  vLLM's ``StandaloneARSpeculator`` and our graphed subclass) up to ``_multi_step_decode``: step 0, the expanded
  prefill/extend pass (its input kernel, slot mapping, metadata, forward or replay, sample).
- ``draft_chain``: the K-1 chain steps: V1 ``propose`` after the first sample (upstream's loop or our fused replays) |
  MRV2 EAGLE's from ``prepare_decode_inputs`` on (decode replays); the standalone draft model's ``_multi_step_decode``
  (steps 1..K-1: the loop's preamble, each step's inputs and metadata, forward or replay, sample).
- ``output``: ``sample_tokens`` outside verify and drafting (V1 state update, bookkeeping, outputs, async output;
  MRV2 ``postprocess_sampled``, outputs) and the LLM engine's ``process_outputs``.
- ``engine``: the scheduler (``schedule``, ``update_from_output``, vLLM's ``schedule:`` scopes) and the LLM engine's
  stats and aborts: the same code for every runner.
- ``host_wait``: the host blocked on a step's sampled tokens (the async output's ``get_output``: event sync, copy).
Unattributed: host time in no phase (engine-core glue, the ``generate`` loop); device time of work launched outside
every phase, or whose launching API call the trace lacks. Phases + unattributed = the measured total, host and device.
A scope nested in another phase's scope counts for the inner phase only. ``step_attribution`` does the counting.
Host times carry the profiler's own cost per recorded op: compare variants and phases, not absolute TPOT.
"""

from __future__ import annotations

from portable_spec_harness.vllm_door import profile_scopes as ours  # our scope names (the module imports no vLLM)

PHASES = ("target_prep", "target_forward", "verify", "draft_first", "draft_chain", "output", "engine", "host_wait")
PHASE_LABELS = {"target_prep": "target input prep", "target_forward": "target forward",
                "verify": "rejection / verify", "draft_first": "drafter first pass",
                "draft_chain": "drafter chain steps", "output": "output processing",
                "engine": "scheduler + engine", "host_wait": "host waits for tokens"}
UNATTRIBUTED = "unattributed"

V1_RUNNER_PY, ENGINE_PY, SCHEDULER_PY = ("v1/worker/gpu_model_runner.py", "v1/engine/llm_engine.py",
                                         "v1/core/sched/scheduler.py")
HARNESS = "harness"
# (scope name, phase, runners it appears in, where it comes from: a file of vLLM 0.26.0 or our harness hooks)
SCOPE_PHASES: tuple[tuple[str, str, str, str], ...] = (
    ("gpu_model_runner: preprocess", "target_prep", "v1", V1_RUNNER_PY),
    (ours.STEP, "target_prep", "v1 mrv2", HARNESS),
    ("gpu_model_runner: forward", "target_forward", "v1", V1_RUNNER_PY),
    (ours.MRV2_FORWARD, "target_forward", "mrv2", HARNESS),
    ("gpu_model_runner: postprocess", "verify", "v1", V1_RUNNER_PY),
    ("gpu_model_runner: sample", "verify", "v1", V1_RUNNER_PY),
    (ours.MRV2_VERIFY, "verify", "mrv2", HARNESS),
    ("gpu_model_runner: draft", "draft_first", "v1", V1_RUNNER_PY),
    (ours.DRAFT_FIRST, "draft_first", "v1 mrv2", HARNESS),
    (ours.DRAFT_CHAIN, "draft_chain", "v1 mrv2", HARNESS),
    ("gpu_model_runner: bookkeep", "output", "v1", V1_RUNNER_PY),
    ("gpu_model_runner: eplb", "output", "v1", V1_RUNNER_PY),
    ("gpu_model_runner: ModelRunnerOutput", "output", "v1", V1_RUNNER_PY),
    ("gpu_model_runner: AsyncGPUModelRunnerOutput", "output", "v1", V1_RUNNER_PY),
    ("gpu_model_runner: set_async_sampled_token_ids", "output", "v1", V1_RUNNER_PY),
    (ours.OUTPUT, "output", "v1 mrv2", HARNESS),
    ("llm_engine step: process_outputs", "output", "v1 mrv2", ENGINE_PY),
    (ours.SCHEDULER, "engine", "v1 mrv2", HARNESS),
    ("schedule: allocate_slots", "engine", "v1 mrv2", SCHEDULER_PY),
    ("schedule: get_num_common_prefix_blocks", "engine", "v1 mrv2", SCHEDULER_PY),
    ("schedule: make_cached_request_data", "engine", "v1 mrv2", SCHEDULER_PY),
    ("schedule: update_after_schedule", "engine", "v1 mrv2", SCHEDULER_PY),
    ("llm_engine step: record_stats", "engine", "v1 mrv2", ENGINE_PY),
    ("llm_engine step: abort_requests", "engine", "v1 mrv2", ENGINE_PY),
    (ours.WAIT, "host_wait", "v1 mrv2", HARNESS),
)
# vLLM scopes deliberately in no phase: this one holds a whole engine-core step (in-process engine), so mapping it
# would swallow everything the phases leave unattributed.
ENCLOSING_SCOPES = ("llm_engine step: get_output",)
PHASE_OF = {scope: phase for scope, phase, _, _ in SCOPE_PHASES}
STEP_SCOPES = (ours.STEP, "gpu_model_runner: preprocess")  # what starts a step (the first one present)

SCOPE_PREFIXES = ("gpu_model_runner:", "portable_spec:", "llm_engine step:", "schedule:")


def is_scope(name: str) -> bool:
    """A ``record_function`` scope of vLLM's (or ours), not an op or a kernel."""
    return name.startswith(SCOPE_PREFIXES)
