"""The synthetic drafters' proposer: what vLLM's proposer is to its drafter, on the one runner.

It keys a proposal (``keys_for_batch``), copies new inputs in place into the static buffers and fills every padded
tail the keys read (``prepare``), then runs the K steps: ``current_draft_step.fill_(i)`` and a replay from the runner,
or the same step eagerly at the same padded shape (``run_step``). Capture, replay, budget and fallback are the
runner's (``portable_spec.draft.runner``), exactly as for vLLM's drafters.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import torch

from portable_spec.draft.dispatcher import FIRST, DraftDispatcher, DraftKey
from portable_spec.draft.runner import CaptureReport, DraftGraphRunner
from portable_spec.errors import PortableSpecError
from portable_spec_harness.synthetic.buffers import TOKENS, DraftModel
from portable_spec.ports.interface import DevicePort


class SyntheticProposer:
    """Proposals of a synthetic ``model`` through a ``DraftGraphRunner`` over ``dispatcher``'s keys."""

    def __init__(self, platform: DevicePort, dispatcher: DraftDispatcher, model: DraftModel, *,
                 device: torch.device | None = None, live_graph_limit: int | None = None, warmup_runs: int = 1,
                 progress: bool = False) -> None:
        self.model = model
        self.device = device if device is not None else platform.device()
        self.runner = DraftGraphRunner(platform, dispatcher, model, live_graph_limit=live_graph_limit,
                                       warmup_runs=warmup_runs, progress=progress)
        self.schedule = list(model.schedule())
        self.kinds = list(dict.fromkeys(self.schedule))
        self._step_scalar = model.outputs.current_draft_step
        self._check_compatible()

    # The runner's view, for callers that hold the proposer.
    platform = property(lambda self: self.runner.platform)
    dispatcher = property(lambda self: self.runner.dispatcher)
    graphs = property(lambda self: self.runner.graphs)
    eager_keys = property(lambda self: self.runner.eager_keys)
    live_graph_limit = property(lambda self: self.runner.live_graph_limit)

    def graph_keys(self) -> list[DraftKey]:
        return self.runner.graph_keys()

    def capture(self, keys: Iterable[DraftKey] | None = None) -> CaptureReport:
        return self.runner.capture(keys)

    def close(self) -> None:
        self.runner.close()

    def pool_ids(self) -> set:
        return self.runner.pool_ids()

    def _check_compatible(self) -> None:
        dispatcher = self.runner.dispatcher
        for kind in self.kinds:
            if not dispatcher.has_step(kind):
                raise PortableSpecError(f"the draft model runs {kind!r} steps but the capture plan has none: plan "
                                        f"with the model's method and num_spec")
            dq, mq = dispatcher.query_len(kind), self.model.query_len(kind)
            if dq != mq:
                raise PortableSpecError(f"{kind} step: the capture plan keys query length {dq} but the model "
                                        f"runs {mq}; plan with the same num_spec")
        if dispatcher.max_num_seqs > self.model.max_reqs:
            raise PortableSpecError(f"the capture plan allows {dispatcher.max_num_seqs} requests but the "
                                    f"draft buffers hold {self.model.max_reqs}: build the model with "
                                    "max_reqs >= max_num_seqs")
        keys = [k for kind in self.kinds for k in dispatcher.keys_for(kind)]
        for name, si in self.model.inputs.items():
            need = max((k.num_tokens if si.unit == TOKENS else (k.num_reqs or 0) for k in keys), default=0)
            if need > si.capacity:
                raise PortableSpecError(f"static input {name!r} holds {si.capacity} {si.unit} but a key needs "
                                        f"{need}: allocate the model for the plan's largest size")

    def keys_for_batch(self, num_reqs: int, num_tokens: int | None = None, uniform: bool = True) -> list[DraftKey]:
        """The key of every step of one proposal, in schedule order."""
        dispatcher = self.runner.dispatcher
        by_kind = {FIRST: dispatcher.dispatch(FIRST, num_reqs, num_tokens, uniform)}
        for kind in self.kinds:
            if kind != FIRST:
                by_kind[kind] = dispatcher.dispatch(kind, num_reqs)
        return [by_kind[kind] for kind in self.schedule]

    def prepare(self, inputs: Mapping[str, torch.Tensor], keys: list[DraftKey], num_reqs: int,
                num_tokens: int) -> None:
        """Copy ``inputs`` in place into the static buffers and fill every padded tail the keys will read."""
        model_inputs = self.model.inputs
        unknown = set(inputs) - set(model_inputs)
        if unknown:
            raise PortableSpecError(f"unknown draft inputs {sorted(unknown)}: the model takes {sorted(model_inputs)}")
        ext_tokens = max(k.num_tokens for k in keys)
        ext_reqs = max(k.num_reqs or num_reqs for k in keys)
        for name, si in model_inputs.items():
            n = num_tokens if si.unit == TOKENS else num_reqs
            src = inputs.get(name)
            if src is not None:
                if src.shape[si.dim] != n:
                    raise PortableSpecError(f"draft input {name!r} has {src.shape[si.dim]} {si.unit} along dim "
                                            f"{si.dim}, expected {n}")
                si.buffer.narrow(si.dim, 0, n).copy_(src, non_blocking=True)
            if si.pad is None:
                continue
            ext = min(ext_tokens if si.unit == TOKENS else ext_reqs, si.capacity)
            if ext > n:
                tail = si.buffer.narrow(si.dim, n, ext - n)
                if isinstance(si.pad, torch.Tensor):
                    tail.copy_(si.pad.expand_as(tail))
                else:
                    tail.fill_(si.pad)

    def run_step(self, key: DraftKey, step_index: int, num_reqs: int, *, eager: bool = False) -> None:
        """Write the step scalar, then replay ``key``'s graph (or run it eagerly at the same padded shape)."""
        self._step_scalar.fill_(step_index)
        if not eager and self.runner.replay(key) is not None:
            return
        reqs = key.num_reqs if key.mode == "FULL" else num_reqs
        tokens = key.num_tokens if key.mode == "FULL" else num_reqs * self.model.query_len(key.step)
        with torch.inference_mode():
            self.model.step(key.step, tokens, reqs)

    def propose(self, inputs: Mapping[str, torch.Tensor], num_reqs: int, num_tokens: int | None = None, *,
                eager: bool = False) -> list[DraftKey]:
        """One proposal: dispatch every step, copy the inputs, run the K steps; returns the keys used.

        ``eager=True`` runs the same keys eagerly at the same padded shapes (the parity reference)."""
        q = self.model.query_len(FIRST)
        tokens = num_reqs * q if num_tokens is None else num_tokens
        keys = self.keys_for_batch(num_reqs, tokens)
        self.prepare(inputs, keys, num_reqs, tokens)
        for i, key in enumerate(keys):
            self.run_step(key, i, num_reqs, eager=eager)
        return keys

    def describe(self) -> dict[str, Any]:
        return self.runner.describe() | {"schedule": self.schedule}
