"""What a serving benchmark runs and in which order: the variants (each an e2e engine variant behind ``vllm serve``),
the prompts per run, and the interleaved order of the client runs.

Why interleaved: the host's speed drifts by tens of percent over minutes, so a variant measured all at once could
win by timing alone. Every round visits every variant at every concurrency, and the variant that goes first rotates
by round (``interleave.rotation``), so over the rounds each variant holds each position equally often.
"""

from __future__ import annotations

from dataclasses import dataclass

from portable_spec_harness.e2e.interleave import rotation

VARIANTS = {"upstream_v1": "upstream_v1", "ours": "full_drafter", "mrv2": "mrv2", "ours_mrv2": "ours_platform_mrv2"}
"""Bench name -> ``harness/e2e/configs.py`` variant: vLLM's drafter under PIECEWISE graphs on vLLM's own platform
and the V1 runner; our FULL drafter (``VLLM_PLATFORM=cuda``, V1 runner); Model Runner V2 with its own drafter;
the runner vLLM picks (MRV2 for a dense target) on our platform, with our worker's MRV2 sampled warm-up."""
DEFAULT_VARIANTS = ("upstream_v1", "ours", "mrv2")
DENSE_ONLY = {v: "MoE target: vLLM 0.26.0 serves it on the V1 runner only, so there is no MRV2 to compare"
              for v in ("mrv2", "ours_mrv2")}
RATIO_BASES = ("upstream_v1", "mrv2")
"""The ratios the report keys on: ``ours_over_upstream_v1`` and ``ours_over_mrv2``."""
TARGET_LINES = {"upstream_v1": (1.0, 1.1), "mrv2": (0.95,)}
"""Issue 24's targets, drawn on each ratio's plot: ours >= upstream V1 everywhere and >= 1.10x at c <= 2 (designed
acceptance); ours >= 0.95x MRV2 on a dense target."""


@dataclass(frozen=True)
class Run:
    """One timed client run: round, concurrency, variant."""

    round: int
    concurrency: int
    variant: str

    def as_json(self) -> dict[str, int | str]:
        return {"round": self.round, "concurrency": self.concurrency, "variant": self.variant}


def variants_for(asked: list[str], moe: bool) -> tuple[list[str], dict[str, str]]:
    """The variants this pair runs, in the asked order, and those skipped with the reason."""
    skipped = {v: DENSE_ONLY[v] for v in asked if moe and v in DENSE_ONLY}
    return [v for v in asked if v not in skipped], skipped


def num_prompts(concurrency: int, per_slot: int) -> int:
    """Prompts in one run: ``per_slot`` for every concurrent slot, so each slot serves the same number of requests
    at every concurrency (and the last wave is as full as the first)."""
    return concurrency * per_slot


def interleaved(variants: list[str], concurrency: list[int], rounds: int, first_round: int = 0) -> list[Run]:
    """Servers up together: per round, per concurrency, every variant once, the first rotating by round."""
    return [Run(r, c, v) for r in range(first_round, first_round + rounds) for c in concurrency
            for v in rotation(list(variants), r)]


def in_turn(variants: list[str], concurrency: list[int], rounds: int, first_round: int = 0) -> list[Run]:
    """One server at a time: per round, the variants in rotated order, each running every concurrency while its
    server is up (one boot per variant per round)."""
    return [Run(r, c, v) for r in range(first_round, first_round + rounds) for v in rotation(list(variants), r)
            for c in concurrency]


def order(mode: str, variants: list[str], concurrency: list[int], rounds: int, first_round: int = 0) -> list[Run]:
    return (interleaved if mode == "together" else in_turn)(variants, concurrency, rounds, first_round)


def max_model_len(input_len: int, output_len: int, k: int) -> int:
    """Each request's prompt and output, the drafts past its end and 64 tokens of slack (the client re-encodes
    its random prompts), rounded up to a KV block (16)."""
    need = input_len + output_len + k + 1 + 64
    return -(-need // 16) * 16
