"""The Model Runner V2 parts of the e2e matrix (issue 23): which zoo pair, K and engine variants each boots.

Each part boots, one after another, no speculation (V1 runner: the greedy reference), MRV2 on vLLM's built-in CUDA
platform and MRV2 on our CUDA platform (``VLLM_PLATFORM=cuda``), each with the runner vLLM picks (no
``VLLM_USE_V2_MODEL_RUNNER``): for these dense targets vLLM 0.26.0 picks MRV2 itself, and the checks assert it did
(``mrv2_checks``). MRV2 runs DFlash in 0.26.0 (``v1/worker/gpu/spec_decode/dflash``), so DFlash pairs are parts too;
the separate draft model from 0.33.0 only (``Mrv2Part.since``: ``--parts mrv2`` leaves it out below that).
``ci/gpu/v1_drafter_matrix.py`` runs them (``--parts mrv2`` or by name) through ``ci/gpu/mrv2_e2e.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

from portable_spec.versions import parse
from portable_spec_harness.e2e.configs import BUILTIN_MRV2, OURS_PLATFORM_MRV2, VARIANTS

DEFAULT_VARIANTS = ("nospec", BUILTIN_MRV2, OURS_PLATFORM_MRV2)


@dataclass(frozen=True)
class Mrv2Part:
    name: str
    pair: str
    model_variant: str
    k: int
    description: str
    variants: tuple[str, ...] = DEFAULT_VARIANTS
    seeds: tuple[int, ...] = (0,)
    since: str = "0.26.0"
    """The first vLLM whose MRV2 runs this part's method (the separate draft model from 0.33.0; before that vLLM
    sends it to the V1 runner, so MRV2's checks would judge an engine that never ran MRV2)."""

    def runs_on(self, vllm_version: str | None) -> bool:
        """Whether the installed vLLM (its version string; None: not installed) runs this part on MRV2."""
        return vllm_version is not None and parse(vllm_version) >= parse(self.since)

    def __post_init__(self) -> None:
        from portable_spec_harness.model_zoo import pair_problem

        problem = pair_problem(self.pair, self.model_variant)
        if problem:
            raise ValueError(f"part {self.name}: {problem}")
        unknown = [v for v in self.variants if v not in VARIANTS]
        if unknown:
            raise ValueError(f"part {self.name}: unknown engine variant(s) {unknown}; use names from "
                             "harness/portable_spec_harness/e2e/configs.py")
        missing = [v for v in (BUILTIN_MRV2, OURS_PLATFORM_MRV2) if v not in self.variants]
        if missing:
            raise ValueError(f"part {self.name} must boot {missing}: the checks compare MRV2 on our platform with "
                             "MRV2 on vLLM's")
        if self.k < 1:
            raise ValueError(f"part {self.name}: k must be >= 1 (got {self.k})")

    def args(self) -> list[str]:
        """``ci/gpu/mrv2_e2e.py``'s arguments for this part."""
        return ["--pair", self.pair, "--variant", self.model_variant, "--k", str(self.k),
                "--seeds", ",".join(map(str, self.seeds)), "--variants", ",".join(self.variants)]


PARTS: dict[str, Mrv2Part] = {p.name: p for p in (
    Mrv2Part("mrv2_perfect", "llama_eagle", "perfect", 3, "EAGLE K=3, the 100%-acceptance head"),
    Mrv2Part("mrv2_eagle3", "llama_eagle3", "perfect", 5, "EAGLE-3 K=5 (auxiliary hidden states), 100% head"),
    Mrv2Part("mrv2_dflash", "qwen3_dflash", "perfect", 3, "Qwen3 + DFlash K=3 (MRV2's DFlash speculator)"),
    Mrv2Part("mrv2_ctx_eagle", "llama_ctx_eagle", "perfect", 3,
             "the context-sensitive EAGLE pair: long, shared-prefix and max-length prompts, designed acceptance"),
    Mrv2Part("mrv2_ctx_eagle3", "llama_ctx_eagle3", "perfect", 3, "the context-sensitive EAGLE-3 pair"),
    Mrv2Part("mrv2_ctx_dflash", "qwen3_ctx_dflash", "perfect", 3,
             "the context-sensitive DFlash pair (designed acceptance [1, 1, 0])"),
    Mrv2Part("mrv2_ctx_draft_model", "llama_ctx_draft_model", "perfect", 3,
             "the separate draft model (a 4-layer Llama of the target's vocabulary) on MRV2's standalone speculator: "
             "vLLM's eager one on its platform, ours with FULL decode graphs on ours (issue 39 item 2)",
             seeds=(0, 1), since="0.33.0"),
)}


def runnable(vllm_version: str | None) -> list[str]:
    """The parts the installed vLLM runs on MRV2 (``--parts mrv2``), in the table's order."""
    return [name for name, part in PARTS.items() if part.runs_on(vllm_version)]
