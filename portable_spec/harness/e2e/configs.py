"""The engine configurations we compare end to end, as environment + speculative settings."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class EngineVariant:
    name: str
    env: dict[str, str] = field(default_factory=dict)
    speculative: bool = True
    drafter_enforce_eager: bool = False
    description: str = ""


V1 = {"VLLM_USE_V2_MODEL_RUNNER": "0"}
VARIANTS = {v.name: v for v in (
    EngineVariant("nospec", dict(V1), speculative=False, description="V1 runner, no speculation"),
    EngineVariant("upstream_v1", dict(V1), description="V1 runner, upstream drafter (PIECEWISE)"),
    EngineVariant("eager_drafter", {**V1, "VLLM_PLATFORM": "cuda"}, drafter_enforce_eager=True,
                  description="V1 runner, eager drafter"),
    EngineVariant("full_drafter", {**V1, "VLLM_PLATFORM": "cuda"}, description="V1 runner + portable_spec FULL drafter"),
    EngineVariant("full_drafter_unfused", {**V1, "VLLM_PLATFORM": "cuda", "PORTABLE_SPEC_DRAFT_CHAIN": "forward"},
                  description="V1 runner + portable_spec FULL drafter, chain steps replay the forward only"),
    EngineVariant("platform_only", {**V1, "VLLM_PLATFORM": "cuda", "PORTABLE_SPEC_DRAFT_GRAPH": "piecewise"},
                  description="V1 runner on portable_spec's platform, upstream drafter (isolates platform costs)"),
    EngineVariant("mrv2", {"VLLM_USE_V2_MODEL_RUNNER": "1"}, description="Model Runner V2 (its own FULL drafter)"),
)}
