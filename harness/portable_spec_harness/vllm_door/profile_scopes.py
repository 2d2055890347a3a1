"""``record_function`` scopes the harness adds to vLLM (0.26.0 to 0.33.0) for the bench's per-step breakdown, where
vLLM has none: Model Runner V2 has no runner scopes at all, and V1's ``gpu_model_runner: draft`` holds the drafter's
first pass and its chain steps together. Installed only for the profiled pass (``offline.runner_scopes``): class or
module attributes swapped for wrappers and restored on exit, so nothing of this runs outside a profile.

Kinds: ``scope`` wraps the whole call. ``region`` opens a scope for the call unless a region is already open on this
thread (so a subclass's ``propose`` and the ``super().propose`` it calls make one region). ``switch_after`` /
``switch_before`` close the open region's scope and open another (same region) after / before the call: the
drafter's first pass ends at its first draft sample (V1) or where the decode steps' inputs are prepared (MRV2:
``prepare_decode_inputs`` for EAGLE, ``_multi_step_decode`` for the standalone draft model).
A region's scopes are opened and closed at Python call boundaries where no other scope is open inside them, so
the profiler's scope stack stays properly nested.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import sys
import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterator

STEP = "portable_spec: execute_model"
OUTPUT = "portable_spec: sample_tokens"
MRV2_FORWARD = "portable_spec: mrv2 forward"
MRV2_VERIFY = "portable_spec: mrv2 sample"
DRAFT_FIRST = "portable_spec: drafter first pass"
DRAFT_CHAIN = "portable_spec: drafter chain steps"
SCHEDULER = "portable_spec: scheduler"
WAIT = "portable_spec: wait for sampled tokens"

KINDS = ("scope", "region", "switch_after", "switch_before")


@dataclass(frozen=True)
class ScopeHook:
    module: str
    attr: str  # "Class.method" or a module-level function
    scope: str
    kind: str = "scope"


V1_RUNNER, V1_PROPOSER = "vllm.v1.worker.gpu_model_runner", "vllm.v1.spec_decode.llm_base_proposer"
MRV2_RUNNER = "vllm.v1.worker.gpu.model_runner"
MRV2_SPECULATOR = "vllm.v1.worker.gpu.spec_decode.autoregressive.speculator"  # EAGLE's, vLLM 0.26.0 to 0.28.0
MRV2_TD_SPECULATOR = "vllm.v1.worker.gpu.spec_decode.target_dependent_ar.speculator"  # EAGLE's, vLLM 0.33.0
MRV2_STANDALONE = "vllm.v1.worker.gpu.spec_decode.standalone_ar.speculator"  # the draft model's, vLLM 0.33.0
OURS_STANDALONE = "portable_spec.vllm_adapter.spec_decode.standalone_ar"  # our graphed subclass of it
# Modules of the hooks below that only some vLLM of the span has (the others' hooks resolve on every one): a hook on
# one of them is skipped where that vLLM lacks it, as every hook on a module not loaded is.
VERSIONED_MODULES = (MRV2_SPECULATOR, MRV2_TD_SPECULATOR, MRV2_STANDALONE, OURS_STANDALONE)
HOOKS = (
    # V1 runner (its own scopes cover input prep, forward, logits, sample, draft, bookkeeping inside these two)
    ScopeHook(V1_RUNNER, "GPUModelRunner.execute_model", STEP),
    ScopeHook(V1_RUNNER, "GPUModelRunner.sample_tokens", OUTPUT),
    ScopeHook(V1_RUNNER, "AsyncGPUModelRunnerOutput.get_output", WAIT),
    # V1 drafters, upstream's and ours (ours overrides propose and calls upstream's for its first pass)
    ScopeHook(V1_PROPOSER, "SpecDecodeBaseProposer.propose", DRAFT_FIRST, "region"),
    ScopeHook("portable_spec.vllm_adapter.spec_decode.fused_chain", "FusedChainMixin.propose", DRAFT_FIRST, "region"),
    ScopeHook("portable_spec.vllm_adapter.spec_decode.draft_prep", "DraftPrepMixin.propose_with_prep", DRAFT_FIRST, "region"),
    ScopeHook(V1_PROPOSER, "SpecDecodeBaseProposer._sample_draft_tokens", DRAFT_CHAIN, "switch_after"),
    # our fused first pass samples inside its graph: the chain starts where our chain loop does
    ScopeHook("portable_spec.vllm_adapter.spec_decode.fused_chain", "FusedChainMixin._run_fused_chain", DRAFT_CHAIN,
              "switch_before"),
    # Model Runner V2
    ScopeHook(MRV2_RUNNER, "GPUModelRunner.execute_model", STEP),
    ScopeHook(MRV2_RUNNER, "GPUModelRunner.sample", MRV2_VERIFY),
    ScopeHook(MRV2_RUNNER, "GPUModelRunner.sample_tokens", OUTPUT),
    ScopeHook("vllm.v1.worker.gpu.cudagraph_utils", "ModelCudaGraphManager.run_fullgraph", MRV2_FORWARD),
    ScopeHook("vllm.v1.worker.gpu.async_utils", "AsyncOutput.get_output", WAIT),
    ScopeHook(MRV2_SPECULATOR, "AutoRegressiveSpeculator.propose", DRAFT_FIRST, "region"),
    ScopeHook(MRV2_SPECULATOR, "prepare_decode_inputs", DRAFT_CHAIN, "switch_before"),
    # vLLM 0.33.0: EAGLE's speculator is TargetDependentARSpeculator, the same propose shape
    ScopeHook(MRV2_TD_SPECULATOR, "TargetDependentARSpeculator.propose", DRAFT_FIRST, "region"),
    ScopeHook(MRV2_TD_SPECULATOR, "prepare_decode_inputs", DRAFT_CHAIN, "switch_before"),
    # vLLM 0.33.0's draft model: propose runs step 0 (``_prefill``, the expanded pass) then the decode steps
    # (``_multi_step_decode``, its preamble included); ours inherits propose and overrides _multi_step_decode (its
    # replays; vLLM's loop through super() where no graph fits: a second switch to the open scope is a no-op)
    ScopeHook(MRV2_STANDALONE, "StandaloneARSpeculator.propose", DRAFT_FIRST, "region"),
    ScopeHook(MRV2_STANDALONE, "StandaloneARSpeculator._multi_step_decode", DRAFT_CHAIN, "switch_before"),
    ScopeHook(OURS_STANDALONE, "GraphedStandaloneARSpeculator._multi_step_decode", DRAFT_CHAIN, "switch_before"),
    # the engine core, the same for every runner
    ScopeHook("vllm.v1.core.sched.scheduler", "Scheduler.schedule", SCHEDULER),
    ScopeHook("vllm.v1.core.sched.scheduler", "Scheduler.update_from_output", SCHEDULER),
)


DETAIL_PREFIX = "portable_spec detail: "  # not a phase scope (``step_breakdown.is_scope`` does not match it)


def _details(module: str, owner: str, names: tuple[str, ...], label: str) -> tuple[ScopeHook, ...]:
    return tuple(ScopeHook(module, f"{owner}.{name}", f"{DETAIL_PREFIX}{label} {name}") for name in names)


# Calls inside the phases, timed (inclusive) by the phase clock only, to say where a phase's time goes. None of them
# encloses a region switch (``switch_after``/``switch_before``), so the clock's scopes stay properly nested.
DETAIL_HOOKS = (
    *_details(V1_RUNNER, "GPUModelRunner", (
        "_update_states", "_prepare_inputs", "_calc_spec_decode_metadata", "_prepare_input_ids",
        "_determine_batch_execution_and_padding", "_build_attention_metadata", "_get_slot_mappings",
        "_get_valid_sampled_token_count", "propose_draft_token_ids", "_copy_valid_sampled_token_count",
        "_copy_draft_token_ids_to_cpu", "_bookkeeping_sync"), "v1"),
    *_details(V1_PROPOSER, "SpecDecodeBaseProposer", (
        "prepare_next_token_ids_padded", "prepare_inputs_padded", "set_inputs_first_pass"), "v1 proposer"),
    *_details("portable_spec.vllm_adapter.worker.v1_model_runner", "PortableV1ModelRunner", ("propose_draft_token_ids",), "ours"),
    *_details("portable_spec.vllm_adapter.spec_decode.draft_prep", "DraftPrepMixin", ("_fill_backup_tokens",), "ours"),
    ScopeHook("portable_spec.vllm_adapter.spec_decode.draft_prep", "hand_off_counts", f"{DETAIL_PREFIX}ours hand_off_counts"),
    ScopeHook("portable_spec.draft.runner", "DraftGraphRunner.replay", f"{DETAIL_PREFIX}ours DraftGraphRunner.replay"),
    # our MRV2 draft-model speculator (vLLM 0.33.0): where its host time between the replays goes
    *_details(OURS_STANDALONE, "GraphedStandaloneARSpeculator", (
        "prepare_prefill", "prepare_decode", "prepare_step", "replay"), "ours mrv2"),
    *_details(MRV2_RUNNER, "GPUModelRunner", (
        "finish_requests", "add_requests", "update_requests", "prepare_inputs", "prepare_attn",
        "postprocess_sampled"), "mrv2"),
    *_details("vllm.v1.core.sched.scheduler", "Scheduler", ("schedule", "update_from_output"), "engine"),
)


ENGINE_STEP = f"{DETAIL_PREFIX}engine EngineCoreProc._process_engine_step"
SERVED_HOOKS = (ScopeHook("vllm.v1.engine.core", "EngineCoreProc._process_engine_step", ENGINE_STEP),)
"""For a ``vllm serve`` engine core (``harness/serve_bench/worker_extension.py``): one engine step of its busy loop, timed
inclusive, so the served phase clock divides by the time the engine was busy and not by idle waits for requests.
It encloses whole steps (region switches included), which is sound: a region opens and closes inside it."""


class _Region(threading.local):
    scope: Any = None  # the open record_function of this thread's region
    name: str | None = None


_region = _Region()


_factory: Callable[[str], Any] | None = None  # what opens a scope while ``installed``: record_function by default


def _scope(name: str) -> Any:
    if _factory is not None:
        return _factory(name)
    import torch  # here, not at import: the CLI reads this module's scope names

    return torch.autograd.profiler.record_function(name)


def _open(name: str) -> None:
    scope = _scope(name)
    scope.__enter__()
    _region.scope, _region.name = scope, name


def _close() -> None:
    scope, _region.scope, _region.name = _region.scope, None, None
    scope.__exit__(None, None, None)


def _switch(name: str) -> None:
    if _region.scope is not None and _region.name != name:
        _close()
        _open(name)


def wrap(fn: Callable[..., Any], scope: str, kind: str) -> Callable[..., Any]:
    """``fn`` inside the profiler scope ``scope`` the way ``kind`` says (see the module docstring)."""
    if kind not in KINDS:
        raise ValueError(f"unknown scope kind {kind!r}; one of {', '.join(KINDS)}")

    @functools.wraps(fn)
    def scoped(*args: Any, **kwargs: Any) -> Any:
        if kind == "scope":
            with _scope(scope):
                return fn(*args, **kwargs)
        if kind == "region":
            if _region.scope is not None:
                return fn(*args, **kwargs)
            _open(scope)
            try:
                return fn(*args, **kwargs)
            finally:
                _close()
        if kind == "switch_before":
            _switch(scope)
        out = fn(*args, **kwargs)
        if kind == "switch_after":
            _switch(scope)
        return out

    return scoped


def resolve(hook: ScopeHook, import_missing: bool = False) -> tuple[Any, str]:
    """(owner, name) the hook swaps: the class (or module) that itself defines the attribute. Raises LookupError
    naming what is missing; a module not imported yet is missing unless ``import_missing``."""
    module = sys.modules.get(hook.module)
    if module is None:
        if not import_missing:
            raise LookupError(f"{hook.module} not imported (that runner is not in this process)")
        module = importlib.import_module(hook.module)
    *path, name = hook.attr.split(".")
    owner = module
    for part in path:
        owner = getattr(owner, part, None)
        if owner is None:
            raise LookupError(f"{hook.module} has no {part}")
    if name not in vars(owner):
        raise LookupError(f"{hook.module}.{hook.attr} is not defined there")
    return owner, name


@contextlib.contextmanager
def installed(hooks: tuple[ScopeHook, ...] = HOOKS,
              factory: Callable[[str], Any] | None = None) -> Iterator[dict[str, list[str]]]:
    """Install every hook whose target is loaded in this process; yields which were installed and which skipped
    (and why). ``factory(name)`` makes each scope's context manager (default: torch's ``record_function``; the
    harness's ``PhaseClock`` times phases without a profiler). Every swapped attribute is restored on exit, also
    when the body raises."""
    global _factory
    report: dict[str, list[str]] = {"installed": [], "skipped": []}
    swapped: list[tuple[Any, str, Any]] = []
    previous, _factory = _factory, factory
    try:
        for hook in hooks:
            label = f"{hook.module}.{hook.attr}"
            try:
                owner, name = resolve(hook)
            except LookupError as exc:
                report["skipped"].append(f"{label}: {exc}")
                continue
            original = vars(owner)[name]
            setattr(owner, name, wrap(original, hook.scope, hook.kind))
            swapped.append((owner, name, original))
            report["installed"].append(label)
        yield report
    finally:
        for owner, name, original in reversed(swapped):
            setattr(owner, name, original)
        _factory = previous
