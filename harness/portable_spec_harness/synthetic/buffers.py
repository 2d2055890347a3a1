"""What a draft step must offer the runner: persistent static inputs, persistent outputs and the step scalar.

A graph bakes in the address of every tensor it reads. So each input lives in ONE max-sized buffer allocated before
capture, every key reads a leading slice of it, and new data is copied into that slice in place (never rebound).
Outputs are persistent too: ``draft_token_ids [max_reqs, K]`` and, for probabilistic rejection sampling,
``draft_logits [max_reqs, K, vocab]``; the 0-dim device tensor ``current_draft_step`` tells a replay which column
to write, so one graph per key serves every step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import torch

TOKENS = "tokens"
REQS = "reqs"


@dataclass
class StaticInput:
    """A persistent input buffer. ``unit``: whether its batch dimension ``dim`` counts tokens or requests.

    ``pad`` fills the padded tail of a key's slice: a number, a tensor broadcastable to the tail (e.g. one value per
    packed row), or None to leave the tail as it is (data that padded rows may read harmlessly)."""

    buffer: torch.Tensor
    unit: str
    dim: int = 0
    pad: float | int | torch.Tensor | None = None

    def __post_init__(self) -> None:
        if self.unit not in (TOKENS, REQS):
            raise ValueError(f"StaticInput.unit must be {TOKENS!r} or {REQS!r} (got {self.unit!r})")

    @property
    def capacity(self) -> int:
        return self.buffer.shape[self.dim]


@dataclass
class DraftOutputs:
    """The persistent outputs every replay writes, one column per draft step."""

    draft_token_ids: torch.Tensor
    draft_logits: torch.Tensor | None
    current_draft_step: torch.Tensor

    @classmethod
    def allocate(cls, max_reqs: int, num_spec: int, vocab: int, *, probabilistic: bool,
                 device: torch.device) -> DraftOutputs:
        return cls(
            draft_token_ids=torch.full((max_reqs, num_spec), -1, dtype=torch.int64, device=device),
            draft_logits=(torch.full((max_reqs, num_spec, vocab), float("nan"), dtype=torch.float32, device=device)
                          if probabilistic else None),
            current_draft_step=torch.zeros((), dtype=torch.int64, device=device))

    def clear(self) -> None:
        """Sentinels (−1 tokens, NaN logits) so that an unwritten column is visible."""
        self.draft_token_ids.fill_(-1)
        if self.draft_logits is not None:
            self.draft_logits.fill_(float("nan"))


class DraftModel(Protocol):
    """A synthetic drafter: step callables over static buffers, at a padded shape. ``step_call`` is the runner's
    ``DraftStepSource`` protocol (the same one vLLM's drafters implement); the rest serves ``SyntheticProposer``."""

    num_spec: int
    max_reqs: int
    outputs: DraftOutputs
    inputs: dict[str, StaticInput]

    def query_len(self, kind: str) -> int:
        """Tokens per request of a step kind (``first``: 1+K or the DFlash block; ``chain``: 1)."""

    def schedule(self) -> list[str]:
        """Step kinds of one proposal, in order (EAGLE: first + K-1 chain; DFlash: first)."""

    def step_call(self, key: Any) -> Any:
        """The runner's protocol: a ``StepCall`` running ``step`` at the key's padded shape."""

    def step(self, kind: str, num_tokens: int, num_reqs: int) -> None:
        """Run one step on the leading ``num_tokens``/``num_reqs`` of the static buffers; no host sync, no
        allocation that outlives the call; writes column ``current_draft_step`` of the outputs."""
