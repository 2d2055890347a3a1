"""What a worker can say about the platform code path it ran (collected by ``child.worker_facts`` on every rank):
worker class, which of vLLM's runners it built, attention backends (target and draft: the V1 drafter's or Model
Runner V2's speculator's), kernel substitutes bound, the stored capture plan (ours for the V1 drafter, what Model
Runner V2 was left under MRV2), graph counts and pools (MRV2's managers included), and, under musa-sim, what the
simulated ``torch.musa`` recorded. The e2e checks judge these, not log text alone."""

from __future__ import annotations

from collections import Counter
from typing import Any

from portable_spec.kernels import bound
from portable_spec.vllm_adapter.platform import plan_state
from portable_spec.ports.current import installed_port
from portable_spec_harness.vllm_door.mrv2_graphs import mrv2_graph_facts
from portable_spec_harness.vllm_door.offline import vllm_graph_facts

SIM_CALLS = ("MUSAGraph", "graph", "MUSAGraph.replay", "graph_pool_handle", "manual_seed_all", "set_device")


def backend_names(groups: Any) -> list[str]:
    """Attention backend names of vLLM attention groups (nested lists allowed)."""
    names = set()
    for group in groups or ():
        for g in group if isinstance(group, (list, tuple)) else (group,):
            names.add(g.backend.get_name())
    return sorted(names)


def simulation_facts() -> dict[str, Any] | None:
    """What the simulated ``torch.musa`` of this process recorded, or None where none is installed."""
    port = installed_port("musa")
    sim = getattr(port, "device_module", None)
    if port is None or not hasattr(sim, "call_counts"):
        return None
    import torch

    counts: Counter = sim.call_counts()
    return {"label": port.label, "calls": {name: counts[name] for name in SIM_CALLS},
            "live_graphs": sim.live_graphs, "live_graph_cap": sim.live_graph_cap,
            # torchada's aliasing simulated (the MRV2 variants): vLLM's own torch.cuda graphs go through the sim
            "torch_cuda_aliased": getattr(torch.cuda, "CUDAGraph", None) is getattr(sim, "MUSAGraph", False)}


def wrapped_worker(worker: Any) -> Any:
    """The worker vLLM's ``WorkerWrapperBase`` holds (collective_rpc hands functions the wrapper, which forwards
    attribute reads but is not the worker class the platform chose), else ``worker`` itself."""
    return vars(worker).get("worker") or worker


def platform_facts(worker: Any) -> dict[str, Any]:
    worker = wrapped_worker(worker)
    runner = worker.model_runner
    drafter = getattr(runner, "drafter", None)
    speculator = getattr(runner, "speculator", None)  # Model Runner V2's drafter
    graphs = getattr(drafter, "graph_runner", None)
    state = plan_state.read(worker.vllm_config)
    draft_groups = (getattr(drafter, "draft_attn_groups", None) if drafter is not None
                    else getattr(speculator, "attn_groups", None))
    return {"worker": f"{type(worker).__module__}.{type(worker).__qualname__}",
            "attention_backends": backend_names(getattr(runner, "attn_groups", None)),
            "draft_attention_backends": backend_names(draft_groups),
            "substitutes_bound": sorted({sub.name for sub in bound().values()}),
            "capture_plan": state.dict_for_report(), "plan_warnings": list(state.warnings),
            "mrv2_sizes": state.mrv2, **mrv2_graph_facts(runner),
            "drafter_graphs": len(graphs.captured) if graphs is not None else 0,
            "drafter_live_graph_limit": graphs.live_graph_limit if graphs is not None else None,
            "drafter_port": graphs.platform.label if graphs is not None else None,
            **vllm_graph_facts(graphs.pool_ids() if graphs is not None else None),
            "simulation": simulation_facts()}
