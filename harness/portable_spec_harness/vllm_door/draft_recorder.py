"""Records, per step and per request, the draft token ids the V1 runner's drafter returned, for the e2e harness's
per-step oracle (``harness.e2e.exactness.drafts_equal_per_step``: our FULL drafter's drafts = the eager drafter's).

Where: vLLM 0.26.0's ``GPUModelRunner.sample_tokens`` calls ``self.propose_draft_token_ids(scheduler_output,
sampled_token_ids, ...)`` once per step and keeps its return value (``[num_reqs, K]``, rows in the order of
``input_batch.req_ids``) as ``_draft_token_ids``; under async scheduling the scheduler reads them a step later,
but what is recorded here is what the drafter returned for the step it ran in. The recorder wraps that method on
the class that defines it for the runner in use (``PortableV1ModelRunner`` for our variant, vLLM's class for the
others), through ``patch.overrides.overridden`` (scoped, reversible), installed after boot by ``collective_rpc``
(every rank, the same at TP=1 and TP=2) and removed before the engine's facts are read: the capture and the boot's
warm-up steps are never recorded, and behaviour is unchanged (the wrapper copies tensors on the current stream and
returns what the method returned).

Alignment: each row carries the position its first draft goes to, from what the runner knew when it drafted:
``num_computed_tokens`` (the runner's device copy, already corrected for the previous step's rejections),
the tokens scheduled for the request this step and how many of them were drafts, and how many of its sampled
tokens are valid (vLLM marks rejected ones -1): position = computed + scheduled - drafts + valid. Two runs whose
drafts differ anywhere accept differently and draft for other positions afterwards; a run whose runner state is
off (a wrong ``num_computed_tokens`` hand-off) drafts for another position even when its tokens agree.

Nothing here is on the serve path (``tests/test_layout.py``); the census lists the override (``patch.manifest``).
"""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from portable_spec.vllm_adapter.patch.overrides import overridden

METHOD = "propose_draft_token_ids"
REJECTED = -1
"""vLLM's ``PLACEHOLDER_TOKEN_ID``: a rejected draft's slot in ``sampled_token_ids``."""


@dataclass
class StepRecord:
    """One drafter call as the runner saw it; device tensors stay on the device until ``rows``."""

    req_ids: list[str]
    num_computed: Any  # [num_reqs] device tensor (copied before the call: the drafter may write runner buffers)
    num_scheduled: list[int]
    num_drafts_scheduled: list[int]
    sampled: Any  # [num_reqs, 1+K] device tensor, or per-request lists (drafters run after bookkeeping)
    drafts: Any  # [num_reqs, K] device tensor, or per-request lists

    def rows(self, step: int) -> list[dict[str, Any]]:
        computed = _as_lists(self.num_computed)
        sampled, drafts = _as_lists(self.sampled), _as_lists(self.drafts)
        out = []
        for i, req_id in enumerate(self.req_ids):
            valid = sum(1 for token in sampled[i] if token != REJECTED)
            position = computed[i] + self.num_scheduled[i] - self.num_drafts_scheduled[i] + valid
            # a drafter that returned fewer rows than requests leaves the rest empty: the oracle fails, never crashes
            out.append({"step": step, "req_id": req_id, "position": position,
                        "drafts": list(drafts[i]) if i < len(drafts) else []})
        return out


def _as_lists(value: Any) -> list:
    return value.tolist() if hasattr(value, "tolist") else [list(v) if isinstance(v, (list, tuple)) else v
                                                           for v in value]


def _copy(value: Any) -> Any:
    return value.clone() if hasattr(value, "clone") else [list(v) for v in value]


class DraftRecorder:
    """The steps recorded while installed, in call order."""

    def __init__(self) -> None:
        self.steps: list[StepRecord] = []

    def wrap(self, original: Callable[..., Any]) -> Callable[..., Any]:
        recorder = self

        @functools.wraps(original)
        def propose_draft_token_ids(runner: Any, scheduler_output: Any, sampled_token_ids: Any, *args: Any,
                                    **kwargs: Any) -> Any:
            num_reqs = runner.input_batch.num_reqs
            req_ids = list(runner.input_batch.req_ids[:num_reqs])
            computed, sampled = runner.num_computed_tokens[:num_reqs].clone(), _copy(sampled_token_ids)
            drafts = original(runner, scheduler_output, sampled_token_ids, *args, **kwargs)
            spec = scheduler_output.scheduled_spec_decode_tokens
            recorder.steps.append(StepRecord(
                req_ids, computed, [scheduler_output.num_scheduled_tokens[r] for r in req_ids],
                [len(spec.get(r, ())) for r in req_ids], sampled, _copy(drafts)))
            return drafts

        return propose_draft_token_ids

    def take(self) -> list[dict[str, Any]]:
        """Every recorded row (one per request per step, in step order), as plain Python; clears the record."""
        steps, self.steps = self.steps, []
        return [row for n, step in enumerate(steps) for row in step.rows(n)]


def defining_class(cls: type, name: str = METHOD) -> type:
    """The class in ``cls``'s MRO that itself defines ``name`` (what ``sample_tokens``'s ``self.NAME`` reaches)."""
    for klass in cls.__mro__:
        if name in vars(klass):
            return klass
    raise AttributeError(f"{cls.__qualname__} has no {name}")


@contextlib.contextmanager
def recording(runner_cls: type) -> Iterator[DraftRecorder]:
    """Record the drafts of every runner of ``runner_cls`` while the block runs; the class attribute is restored
    on exit, also when the block raises."""
    owner = defining_class(runner_cls)
    recorder = DraftRecorder()
    with overridden(owner, "propose_draft_token_ids", recorder.wrap(vars(owner)[METHOD])):
        yield recorder


# -- the collective_rpc side: one recording per worker process ---------------------------------------------------
_active: dict[str, Any] = {}


def _runner(worker: Any) -> Any:
    return worker.model_runner  # vLLM's WorkerWrapperBase forwards attribute reads to the worker it wraps


def start_recording(worker: Any) -> str:
    """``llm.collective_rpc(start_recording)``: install on this worker's runner class; returns the class wrapped."""
    stop_recording(worker)
    stack = contextlib.ExitStack()
    runner_cls = type(_runner(worker))
    _active["recorder"] = stack.enter_context(recording(runner_cls))
    _active["stack"] = stack
    owner = defining_class(runner_cls)
    return f"{owner.__module__}.{owner.__qualname__}"


def take_recorded(worker: Any) -> list[dict[str, Any]]:
    """``llm.collective_rpc(take_recorded)``: this worker's rows so far (cleared); [] when not recording."""
    recorder = _active.get("recorder")
    return recorder.take() if recorder is not None else []


def stop_recording(worker: Any) -> None:
    """``llm.collective_rpc(stop_recording)``: restore the runner class (no-op when not recording)."""
    stack = _active.pop("stack", None)
    _active.pop("recorder", None)
    if stack is not None:
        stack.close()
