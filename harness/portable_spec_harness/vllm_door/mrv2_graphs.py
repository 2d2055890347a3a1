"""What a worker's Model Runner V2 built and captured, read for the e2e and musa-sim checks (issue 23).

- ``runner_kind``: which of vLLM's runners a worker built, by ``isinstance`` on vLLM's own classes (a subclass, e.g. a
  platform's own MRV2 runner, still counts as MRV2); an MRV2 runner exists only where vLLM imported its module.
- ``mrv2_graph_facts``: MRV2's graph managers (the target's ``cudagraph_manager`` and every ``CudaGraphManager`` its
  speculator holds: EAGLE's first pass and decode step, DFlash's query block), each with its mode, the token counts
  of its FULL graphs, the pool it was given and the pool each captured graph reports (``CUDAGraph.pool()``); plus our
  port's pool when the platform is ours. The checks compare the graphs' pools with our port's: MRV2 calls
  ``torch.cuda.graph(graph, pool)`` with ``current_platform.get_global_graph_pool()``, which our platforms answer
  with the port's one pool.
"""

from __future__ import annotations

import sys
from typing import Any

MRV2_RUNNER_MODULE = "vllm.v1.worker.gpu.model_runner"
V1_RUNNER_MODULE = "vllm.v1.worker.gpu_model_runner"
SPECULATOR_MANAGERS = {"prefill_cudagraph_manager": "draft_prefill", "decode_cudagraph_manager": "draft_decode",
                       "query_cudagraph_manager": "draft_query"}
"""MRV2's speculator managers by attribute (vLLM 0.26.0); any other ``CudaGraphManager`` is named ``draft:<attr>``."""


def _jsonable(pool: Any) -> Any:
    return list(pool) if isinstance(pool, tuple) else None if pool is None else repr(pool)


def _replays(counts: dict[int, int] | None) -> dict[str, int] | None:
    """Replays per captured size, keyed as JSON keys them (None: a speculator that counts none)."""
    return None if counts is None else {str(size): int(n) for size, n in sorted(counts.items())}


def runner_kind(runner: Any) -> str:
    """``"mrv2"``, ``"v1"`` or ``"other"``, by the classes vLLM defines (only modules vLLM already imported)."""
    for kind, module in (("mrv2", MRV2_RUNNER_MODULE), ("v1", V1_RUNNER_MODULE)):
        loaded = sys.modules.get(module)
        if loaded is not None and isinstance(runner, loaded.GPUModelRunner):
            return kind
    return "other"


def _graph_pool(graph: Any) -> Any:
    """The pool a captured graph reports; a graph that cannot say is recorded as why (a check then fails on it,
    and the worker's other facts are kept)."""
    try:
        return _jsonable(graph.pool())
    except Exception as exc:  # diagnostics
        return f"no pool: {type(exc).__name__}: {exc}"


def _manager_facts(manager: Any) -> dict[str, Any]:
    graphs = dict(getattr(manager, "graphs", {}) or {})
    mode = getattr(manager, "cudagraph_mode", None)
    return {"mode": getattr(mode, "name", str(mode)),
            "full_sizes": sorted(desc.num_tokens for desc in graphs),
            "pool": _jsonable(getattr(manager, "pool", None)),
            "graph_pools": [_graph_pool(graph) for graph in graphs.values()]}


def graph_managers(runner: Any) -> dict[str, Any]:
    """The target's manager and every graph manager the speculator holds, by name."""
    from vllm.v1.worker.gpu.cudagraph_utils import CudaGraphManager

    found = {}
    target = getattr(runner, "cudagraph_manager", None)
    if isinstance(target, CudaGraphManager):
        found["target"] = target
    speculator = getattr(runner, "speculator", None)
    for attr, value in sorted(vars(speculator).items() if speculator is not None else ()):
        if isinstance(value, CudaGraphManager):
            found[SPECULATOR_MANAGERS.get(attr, f"draft:{attr}")] = value
    return found


def port_pool() -> Any:
    """Our port's one graph pool where the platform is ours and has graphs (None on vLLM's own platforms, where no
    port is made, and on a port without device graphs)."""
    from vllm.platforms import current_platform

    if getattr(type(current_platform), "port_name", None) is None:
        return None
    from portable_spec.ports.current import current_port

    port = current_port(current_platform)
    return _jsonable(port.graph_pool()) if port.supports_graphs else None


def mrv2_graph_facts(runner: Any) -> dict[str, Any]:
    """The runner's kind and, for MRV2, its managers' facts, their FULL graph total and our port's pool."""
    kind = runner_kind(runner)
    facts: dict[str, Any] = {"runner_kind": kind, "port_pool": port_pool()}
    if kind != "mrv2":
        return facts
    managers = {name: _manager_facts(m) for name, m in graph_managers(runner).items()}
    speculator = getattr(runner, "speculator", None)
    facts.update({"mrv2_managers": managers,
                  "mrv2_full_graphs": sum(len(m["full_sizes"]) for m in managers.values()),
                  "speculator": f"{type(speculator).__module__}.{type(speculator).__qualname__}"
                  if speculator is not None else None,
                  # our graphed standalone draft model's counters (spec_decode/standalone_ar.py); None elsewhere
                  "speculator_replays": _replays(getattr(speculator, "decode_replays", None)),
                  "speculator_eager_loops": getattr(speculator, "eager_decode_loops", None),
                  "speculator_prefill_replays": _replays(getattr(speculator, "prefill_replays", None)),
                  "speculator_eager_prefills": getattr(speculator, "eager_prefills", None)})
    return facts
