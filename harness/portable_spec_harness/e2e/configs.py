"""The engine configurations we compare end to end, as environment + speculative settings."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from portable_spec.envs import SIM_DEVICE_ENV, SIM_TORCHADA_GRAPHS_ENV, SIM_VLLM_MUSA_OPS_ENV, TORCHADA_CAP_ENV


@dataclass(frozen=True)
class EngineVariant:
    name: str
    env: dict[str, str] = field(default_factory=dict)
    speculative: bool = True
    drafter_enforce_eager: bool = False
    description: str = ""
    attention_backend: str | None = None
    """Forced for the target and the draft (vLLM never gives the draft the target's choice)."""
    engine_args: dict[str, Any] = field(default_factory=dict)
    """More ``LLM(...)`` keywords (``compilation_config`` is merged with the tensor-parallel switches')."""

    @property
    def simulated_device(self) -> str | None:
        """The device this variant simulates (its results are labelled ``<device>-sim``), or None."""
        return self.env.get(SIM_DEVICE_ENV)


V1 = {"VLLM_USE_V2_MODEL_RUNNER": "0"}
OURS = ("full_drafter", "full_drafter_unfused")
"""Our drafter's variants, in the order reports prefer them."""
BASELINES = ("upstream_v1", "mrv2")
"""What the bench divides ours by."""
OURS_PLATFORM_MRV2, BUILTIN_MRV2 = "ours_platform_mrv2", "builtin_mrv2"
RATIOS = (*((ours, base) for ours in OURS for base in BASELINES), (OURS_PLATFORM_MRV2, BUILTIN_MRV2))
"""The bench's ratios ``<ours>_over_<base>``: our drafter over upstream V1 and MRV2, and Model Runner V2 under our
CUDA platform over MRV2 on vLLM's built-in platform (issue 23's no-regression key)."""
BOUNDS = {(OURS_PLATFORM_MRV2, BUILTIN_MRV2): 0.98}
"""The bound a ratio is judged against by its paired passes (``paired.py``): issue 23's no regression."""
MUSA_SIM = {"VLLM_PLATFORM": "musa", SIM_DEVICE_ENV: "musa"}
MUSA_SIM_MRV2 = {**MUSA_SIM, SIM_TORCHADA_GRAPHS_ENV: "on", SIM_VLLM_MUSA_OPS_ENV: "on"}
"""musa-sim for Model Runner V2: torchada's aliasing of ``torch.cuda``'s graph API simulated, so MRV2's own graphs
are the simulated MUSAGraphs (MUSA rules, live-graph cap), as on MUSA; and vLLM's compiled ops in use
(``is_cuda_alike``), as vllm-musa's platform has them: MRV2 needs one for its UVA buffers, and a MUSA user meets MRV2
only through vllm-musa."""
MUSA_SIM_BUDGET_CAP = 8
"""The forced torchada cap of ``musa_sim_budget``: llama_eagle at K=3, 8 sequences, FULL graphs plans 18 live graphs
(target [4..64] 9, first step [4..32] 5, chain [1, 2, 4, 8] 4); 8 keeps target and first step at [4, 8]."""
MUSA_SIM_MRV2_BUDGET_CAP = 12
"""The forced torchada cap of ``musa_sim_mrv2_budget``: Model Runner V2 on llama_eagle at K=3, 8 sequences, FULL
graphs captures 26 live graphs from vLLM's 11 sizes [1..64] (target 11, first draft pass 11, draft decode step at
<= 8 requests 4); 12 keeps [1, 2, 4, 8] (4 + 4 + 4)."""
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
    # Model Runner V2 as vLLM picks it (dense targets in vLLM 0.26.0; every target from 0.29): no runner switch, so
    # the checks assert the runner the engine built.
    EngineVariant(BUILTIN_MRV2, {}, description="the runner vLLM picks (MRV2 for dense targets) on vLLM's built-in "
                                                "platform"),
    EngineVariant(OURS_PLATFORM_MRV2, {"VLLM_PLATFORM": "cuda"},
                  description="the runner vLLM picks (MRV2 for dense targets) on portable_spec's CUDA platform: our "
                              "config hook, worker and one graph pool under MRV2's own drafter"),
    EngineVariant("builtin_mrv2_triton", {}, attention_backend="TRITON_ATTN",
                  description="the runner vLLM picks on vLLM's built-in platform, TRITON_ATTN for target and draft: "
                              "what musa-sim under Model Runner V2 must equal"),
    EngineVariant("cuda_triton_full_drafter", {**V1, "VLLM_PLATFORM": "cuda"}, attention_backend="TRITON_ATTN",
                  description="V1 runner + portable_spec FULL drafter on our CUDA platform with TRITON_ATTN for target "
                              "and draft: what musa-sim's acceptance must equal"),
    EngineVariant("musa_sim_full_drafter", {**V1, **MUSA_SIM},
                  description="musa-sim: our MUSA platform class, MusaWorker, the MUSA attention rows and kernel "
                              "substitutes, drafter graphs through a simulated torch.musa; tensors on the CUDA device"),
    # FULL graphs only: the planner then counts exactly what vLLM captures (one graph per target size), so the live
    # total is checkable against the cap; FULL_AND_PIECEWISE adds the upstream drafter's piecewise graphs.
    EngineVariant("musa_sim_budget", {**V1, **MUSA_SIM, "TORCHADA_GRAPH_EXEC_CAP": str(MUSA_SIM_BUDGET_CAP)},
                  engine_args={"compilation_config": {"cudagraph_mode": "FULL"}},
                  description=f"musa-sim with torchada's cap forced to {MUSA_SIM_BUDGET_CAP}: sizes pruned with a "
                              "warning, the engine must still serve exactly"),
    EngineVariant("musa_sim_mrv2", dict(MUSA_SIM_MRV2),
                  description="musa-sim under the runner vLLM picks (MRV2 for dense targets): our MUSA platform "
                              "class, MusaWorker, the MUSA attention rows and kernel substitutes (MRV2's included), "
                              "MRV2's own graphs as simulated MUSAGraphs in the one pool"),
    # FULL graphs only, as for the V1 budget part: then every graph MRV2 captures is counted exactly.
    EngineVariant("musa_sim_mrv2_budget", {**MUSA_SIM_MRV2, TORCHADA_CAP_ENV: str(MUSA_SIM_MRV2_BUDGET_CAP)},
                  engine_args={"compilation_config": {"cudagraph_mode": "FULL"}},
                  description=f"musa-sim under MRV2 with torchada's cap forced to {MUSA_SIM_MRV2_BUDGET_CAP}: MRV2's "
                              "target and speculator graphs counted together, sizes pruned with a warning, the "
                              "engine must still serve exactly"),
)}
