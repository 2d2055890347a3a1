"""The musa-sim engine lane's parts: which zoo pair, K, seeds and engine variants each boots, and what it must show.

Every part boots real vLLM 0.26.0 engines; ``musa_sim_*`` variants run our MUSA platform class with only the device
identity simulated (``harness/musa_sim_platform.py``), ``cuda_triton_full_drafter`` the same pair on our CUDA
platform with the same attention backend (TRITON_ATTN), so per-position acceptance can be compared exactly.

The ``musa_sim_mrv2*`` parts (issue 23) run Model Runner V2, the runner vLLM picks for these dense targets: the MUSA
class, MusaWorker, TRITON_ATTN, the MUSA kernel substitutes (MRV2's included), MRV2's own target and speculator
graphs as simulated MUSAGraphs (torchada's aliasing simulated), compared with MRV2 on vLLM's built-in CUDA platform
with TRITON_ATTN (``builtin_mrv2_triton``).
"""

from __future__ import annotations

from dataclasses import dataclass

from portable_spec_harness.e2e.configs import MUSA_SIM_BUDGET_CAP, MUSA_SIM_MRV2_BUDGET_CAP, VARIANTS
from portable_spec.envs import TORCHADA_DEFAULT_EXEC_CAP
from portable_spec.versions import parse

MUSA_SIM = "musa_sim_full_drafter"
CUDA_TRITON = "cuda_triton_full_drafter"
MUSA_SIM_MRV2 = "musa_sim_mrv2"
BUILTIN_MRV2_TRITON = "builtin_mrv2_triton"
MRV2_VARIANTS = (MUSA_SIM_MRV2, "musa_sim_mrv2_budget", BUILTIN_MRV2_TRITON)
"""The variants that run Model Runner V2 (the runner vLLM picks); the rest force the V1 runner."""


@dataclass(frozen=True)
class MusaSimPart:
    name: str
    pair: str
    model_variant: str
    k: int
    seeds: tuple[int, ...]
    variants: tuple[str, ...]
    description: str
    capture_sizes: tuple[int, ...] | None = None
    """The capture sizes the engine must end with (None: not checked)."""
    live_graph_limit: int = TORCHADA_DEFAULT_EXEC_CAP
    """The live-graph budget the MUSA class must have planned with."""
    pruned: bool = False
    """The budget forces the planner to drop sizes: its warning must be in the plan and in the engine log."""
    max_num_seqs: int = 8
    since: str = "0.26.0"
    """The first vLLM on which our MUSA class can serve this part (the separate draft model from 0.28.0: its layers
    share the target's layer indices, and vLLM 0.26.0's ``bind_kv_cache`` refuses that on any platform but the
    CUDA-alike, XPU and CPU ones, where 0.28.0 asks the platform's ``check_runner_kv_caches_multi_layer``)."""

    def runs_on(self, vllm_version: str | None) -> bool:
        """Whether the installed vLLM (its version string; None: not installed) can run this part."""
        return vllm_version is not None and parse(vllm_version) >= parse(self.since)

    def __post_init__(self) -> None:
        unknown = [v for v in self.variants if v not in VARIANTS]
        if unknown:
            raise ValueError(f"part {self.name}: unknown engine variant(s) {unknown}; add them to "
                             "harness/portable_spec_harness/e2e/configs.py or use one of its VARIANTS")
        if not any(VARIANTS[v].simulated_device for v in self.variants):
            raise ValueError(f"part {self.name} boots no musa-sim variant: add one of "
                             f"{[v for v in VARIANTS if VARIANTS[v].simulated_device]}")
        sim = [v for v in self.variants if VARIANTS[v].simulated_device]
        if len({v in MRV2_VARIANTS for v in sim}) > 1:
            raise ValueError(f"part {self.name} mixes runners in its musa-sim variants {sim}: one runner per part")

    @property
    def mrv2(self) -> bool:
        """Whether the part's musa-sim variants run Model Runner V2."""
        return any(v in MRV2_VARIANTS for v in self.variants if VARIANTS[v].simulated_device)

    @property
    def prompt_set(self) -> str:
        """The e2e child's prompt set: a context pair's target follows its context, so its prompts (and the greedy
        output they must give) are the context pairs' own; every other pair runs the fixed prompts."""
        from portable_spec_harness.e2e.child import prompt_set_for  # here: the child module is the engine's

        return prompt_set_for(self.pair)

    @property
    def reference(self) -> str:
        """The CUDA engine whose per-position acceptance the musa-sim one must equal (same attention backend)."""
        return BUILTIN_MRV2_TRITON if self.mrv2 else CUDA_TRITON


PARTS: dict[str, MusaSimPart] = {p.name: p for p in (
    MusaSimPart("musa_sim_eagle", "llama_eagle", "partial", 3, (0, 1, 2), ("nospec", CUDA_TRITON, MUSA_SIM),
                "EAGLE K=3, a head that agrees ~60%: per-position acceptance must equal our CUDA platform's"),
    MusaSimPart("musa_sim_eagle_attention", "llama_eagle", "attention", 3, (0,), (CUDA_TRITON, MUSA_SIM),
                "EAGLE K=3, a head right only through correct draft positions, slots and KV reads: 100% everywhere"),
    MusaSimPart("musa_sim_eagle3", "llama_eagle3", "perfect", 3, (0,), ("nospec", CUDA_TRITON, MUSA_SIM),
                "EAGLE-3 K=3 (the head reads three target layers' hidden states), the 100% head: every position "
                "accepted, per-position acceptance equal to our CUDA platform's"),
    MusaSimPart("musa_sim_dflash", "qwen3_dflash", "perfect", 8, (0,), ("nospec", CUDA_TRITON, MUSA_SIM),
                "Qwen3 + DFlash K=8 at 8 sequences: block-aligned sizes [9, 18, 36, 72]",
                capture_sizes=(9, 18, 36, 72)),
    MusaSimPart("musa_sim_draft_model", "llama_ctx_draft_model", "perfect", 3, (0,), ("nospec", CUDA_TRITON, MUSA_SIM),
                "the separate draft model (method draft_model, a 4-layer Llama draft of the target's vocabulary) on "
                "the V1 runner: its first-pass and chain graphs through MUSAGraph, the expand kernel's MUSA path; "
                "per-position acceptance must equal our CUDA platform's", since="0.28.0"),
    MusaSimPart("musa_sim_mtp", "mimo_ctx_mtp", "perfect", 3, (0,), ("nospec", CUDA_TRITON, MUSA_SIM),
                "MTP K=3 on standard attention (a MiMo-shaped Qwen2 target with q/k/v bias and its MTP layer, vLLM "
                "mimo_mtp) on the V1 runner: the one MTP layer for the first pass and every chain step through "
                "MUSAGraph, right only with the target's hidden states and correct positions, slots and KV reads; "
                "per-position acceptance must equal our CUDA platform's"),
    MusaSimPart("musa_sim_budget", "llama_eagle", "attention", 3, (0, 1), ("musa_sim_budget",),
                f"torchada's cap forced to {MUSA_SIM_BUDGET_CAP}: sizes pruned with a warning, output still exact",
                capture_sizes=(4, 8), live_graph_limit=MUSA_SIM_BUDGET_CAP, pruned=True),
    MusaSimPart("musa_sim_mrv2_eagle", "llama_eagle", "partial", 3, (0, 1, 2),
                ("nospec", BUILTIN_MRV2_TRITON, MUSA_SIM_MRV2),
                "Model Runner V2, EAGLE K=3, a head that agrees ~60%: per-position acceptance must equal MRV2 on "
                "vLLM's CUDA platform with TRITON_ATTN"),
    MusaSimPart("musa_sim_mrv2_dflash", "qwen3_dflash", "perfect", 8, (0,), (BUILTIN_MRV2_TRITON, MUSA_SIM_MRV2),
                "Model Runner V2, Qwen3 + DFlash K=8: MRV2's DFlash speculator on the MUSA path"),
    MusaSimPart("musa_sim_mrv2_budget", "llama_eagle", "attention", 3, (0, 1), ("musa_sim_mrv2_budget",),
                f"Model Runner V2 under torchada's cap forced to {MUSA_SIM_MRV2_BUDGET_CAP}: its target and "
                "speculator graphs counted together, sizes pruned with a warning, output still exact",
                capture_sizes=(1, 2, 4, 8), live_graph_limit=MUSA_SIM_MRV2_BUDGET_CAP, pruned=True),
)}



def runnable(vllm_version: str | None) -> list[str]:
    """The parts the installed vLLM can run (``musa_sim_e2e.py``'s default), in the table's order."""
    return [name for name, part in PARTS.items() if part.runs_on(vllm_version)]


SIMULATED = (
    "device identity: tensors live on the CUDA device (device_type and device_name 'cuda'), vLLM's custom ops on the "
    "CUDA dispatch key, NCCL for MCCL, CUDA_VISIBLE_DEVICES for MUSA_VISIBLE_DEVICES",
    "torch.musa: SimulatedMusa backed by torch.cuda; it enforces the MUSA graph rules we know (MUSAGraph without "
    "keep_graph, capture under inference_mode, torchada's live-executable cap) and reports MUSA capability 3.1",
)
NOT_RUN = (
    "MUSA hardware, torch_musa, MCCL",
    "torchada: vLLM's own target graphs are CUDA graphs here under the V1 runner (on MUSA torchada makes them "
    "MUSAGraphs); the MRV2 parts simulate only its aliasing of torch.cuda's graph API",
    "MUSA's Triton 3.2: every kernel, the MUSA substitutes included, compiles with the host's Triton for the CUDA GPU",
    "vLLM's compiled ops (vllm._C) are CUDA kernels here; paths that call them directly (e.g. DFlash's context K/V "
    "projection: ops.rms_norm, ops.rotary_embedding) need vllm-musa's equivalents on MUSA",
)
RUN_FOR_REAL = (
    "a vLLM 0.26.0 engine on the V1 model runner (the musa_sim_mrv2 parts: on Model Runner V2, the runner vLLM picks "
    "for these dense targets) that selects our MUSA platform through its platform-plugin path",
    "PortableMusaPlatform's own code: the config hook (capture planner, block-aligned DFlash sizes), the live-graph "
    "budget from TORCHADA_GRAPH_EXEC_CAP (default 1900), attention chosen from the MUSA rows of the capability table, "
    "the shared graph pool",
    "MusaWorker: the MUSA kernel substitutes bound on vLLM's modules before the drafter is built, and executed",
    "our FULL drafter on the MUSA port: graphs captured under inference_mode through MUSAGraph into the ONE pool "
    "vLLM's graphs use, within the live-graph budget, replayed in steady state",
    "Model Runner V2 (musa_sim_mrv2 parts): its target and speculator graphs, and vLLM's piecewise ones, captured "
    "through the simulated torch.musa (torchada's aliasing of torch.cuda's graph API simulated) into the one pool, "
    "counted against the live-graph budget together, replayed; MRV2's Triton kernels with the MUSA substitutes bound",
)
