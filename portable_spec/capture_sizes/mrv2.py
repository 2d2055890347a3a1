"""Model Runner V2's graphs for one capture-size list, counted by the rules of vLLM's graph managers (the same on
0.26.0, 0.28.0 and 0.33.0 for what is modelled), and pruned to a live-graph budget. Pure Python (no ``import vllm``).

Why: under MRV2 our drafter does not run; MRV2 captures its target and speculator graphs itself, every one of them
through ``torch.cuda.CUDAGraph``/``torch.cuda.graph`` (on MUSA, torchada makes those MUSAGraphs that count against
its live-executable cap). A budget that lets MRV2 keep its own sizes must therefore count MRV2's graphs, not our
drafter's plan. MRV2 keeps vLLM's one size list; each of its graph managers derives its own batch descriptors from
it (``v1/worker/gpu/cudagraph_utils.py``, ``CudaGraphManager._init_candidates``; ``tests/test_mrv2_graph_count.py``
holds this mirror to the installed vLLM's managers):

- decode mode FULL with a separate decode routine (``FULL_DECODE_ONLY``, ``FULL_AND_PIECEWISE``): one FULL graph per
  distinct ``round_up(size, q)`` within ``max_num_seqs * q`` and the max capture size (q: the manager's tokens per
  request);
- a mixed mode: one descriptor per size, FULL (one graph) or PIECEWISE (one graph per piece of the compiled model:
  its attention layers split it into layers + 1 pieces).

Managers: the target (q = 1+K, the runner's mode); an autoregressive speculator (EAGLE, EAGLE-3, MTP) records its
first pass (q = 1+K, the same mode) and, for K > 1, one decode step (q = 1, ``FULL_DECODE_ONLY`` when the decode
mode is FULL, else none); DFlash its query block (q = 1+K, ``FULL_DECODE_ONLY`` when the decode mode is FULL,
else none; an upper bound, since MRV2 also drops it when the draft attention lacks uniform-batch graphs); the standalone
draft model (``draft_model``) only our graphed speculator's decode step (as EAGLE's; vLLM's own captures none). Not
modelled (``vllm_adapter.platform.mrv2_sizes.unmodelled`` names them, and then nothing is dropped): LoRA capture
cases, dynamic speculative decoding, adaptive verification's variable-length decode graphs, micro-batch twins,
recoverSSM, breakable CUDA graphs, data/pipeline parallelism.
"""

from __future__ import annotations

from dataclasses import dataclass

from portable_spec.capture_sizes.planner import CHAIN_METHODS, EXTENDING_METHODS
from portable_spec.capture_sizes.vllm_rules import round_up

MODES = {  # name -> (decode mode, mixed mode, separate decode routine), as vLLM's CUDAGraphMode defines them
    "NONE": ("NONE", "NONE", False),
    "PIECEWISE": ("PIECEWISE", "PIECEWISE", False),
    "FULL": ("FULL", "FULL", False),
    "FULL_DECODE_ONLY": ("FULL", "NONE", True),
    "FULL_AND_PIECEWISE": ("FULL", "PIECEWISE", True),
}


@dataclass(frozen=True)
class Manager:
    """One MRV2 graph manager: its name, mode, tokens per request, and graphs per PIECEWISE descriptor."""

    name: str
    mode: str
    query_len: int
    pieces: int

    def full_sizes(self, sizes: list[int], max_num_seqs: int) -> list[int]:
        """Token counts of this manager's FULL graphs (uniform-decode ones, then mixed ones)."""
        decode, mixed, separate = MODES[self.mode]
        cap, q = max(sizes), self.query_len
        uniform = sorted({round_up(s, q) for s in sizes if separate and decode == "FULL"
                          and round_up(s, q) <= min(max_num_seqs * q, cap)})
        return uniform + (list(sizes) if mixed == "FULL" else [])

    def piecewise_sizes(self, sizes: list[int]) -> list[int]:
        return list(sizes) if MODES[self.mode][1] == "PIECEWISE" else []

    def graphs(self, sizes: list[int], max_num_seqs: int) -> int:
        if not sizes:
            return 0
        return len(self.full_sizes(sizes, max_num_seqs)) + len(self.piecewise_sizes(sizes)) * self.pieces


def managers(method: str, num_spec: int, mode: str, target_pieces: int, draft_pieces: int) -> tuple[Manager, ...]:
    """MRV2's graph managers for a speculative ``method`` with K = ``num_spec`` under ``mode`` (a CUDAGraphMode name)."""
    if mode not in MODES:
        raise ValueError(f"unknown CUDA graph mode {mode!r}: use one of {', '.join(MODES)}")
    q = 1 + num_spec
    decode_only = "FULL_DECODE_ONLY" if MODES[mode][0] == "FULL" else "NONE"
    found = [Manager("target", mode, q, target_pieces)]
    if method == "dflash":
        found.append(Manager("draft_query", decode_only, q, draft_pieces))
    elif method in EXTENDING_METHODS:
        # MRV2's standalone draft model: vLLM 0.33.0 captures nothing for it, our graphed speculator
        # (vllm_adapter/spec_decode/standalone_ar.py) its step 0 (the expanded pass: 1 + K + the correction slot per
        # request) and its decode step; counted as ours (an over-count where vLLM's eager one runs).
        found.append(Manager("draft_prefill", decode_only, q + 1, draft_pieces))
        if num_spec > 1:
            found.append(Manager("draft_decode", decode_only, 1, draft_pieces))
    elif method in CHAIN_METHODS:
        found.append(Manager("draft_prefill", mode, q, draft_pieces))
        if num_spec > 1:
            found.append(Manager("draft_decode", decode_only, 1, draft_pieces))
    return tuple(found)


@dataclass(frozen=True)
class Mrv2Budget:
    """What a live-graph budget left MRV2: its sizes, the graphs each manager captures from them, the warnings."""

    sizes: tuple[int, ...]
    graphs: dict[str, int]
    live_graph_limit: int | None
    dropped: tuple[int, ...] = ()
    warnings: tuple[str, ...] = ()

    @property
    def live_graphs(self) -> int:
        return sum(self.graphs.values())

    def to_dict(self) -> dict:
        return {"sizes": list(self.sizes), "graphs": dict(self.graphs), "live_graphs": self.live_graphs,
                "live_graph_limit": self.live_graph_limit, "dropped": list(self.dropped),
                "warnings": list(self.warnings)}


def count(sizes: list[int], found: tuple[Manager, ...], max_num_seqs: int) -> dict[str, int]:
    return {m.name: m.graphs(sizes, max_num_seqs) for m in found}


def mrv2_budget(sizes: list[int], *, method: str, num_spec: int, max_num_seqs: int, mode: str,
                live_graph_limit: int | None, target_pieces: int = 1, draft_pieces: int = 1) -> Mrv2Budget:
    """MRV2's graphs for ``sizes``; with a ``live_graph_limit`` the largest sizes are dropped until they fit (one
    size always stays). The warnings say what was dropped, and when even one size exceeds the limit."""
    found = managers(method, num_spec, mode, target_pieces, draft_pieces)
    kept = sorted(set(sizes))
    if not kept:
        raise ValueError("no capture sizes to count: Model Runner V2 has nothing to capture")

    def total(candidate: list[int]) -> int:
        return sum(count(candidate, found, max_num_seqs).values())

    before, dropped = total(kept), []
    while live_graph_limit is not None and len(kept) > 1 and total(kept) > live_graph_limit:
        dropped.append(kept.pop())
    graphs = count(kept, found, max_num_seqs)
    after = sum(graphs.values())
    warnings = []
    per_manager = ", ".join(f"{name} {n}" for name, n in graphs.items())
    if dropped:
        warnings.append(f"{before} live graphs of Model Runner V2 exceed the live-graph limit {live_graph_limit}: "
                        f"dropped the largest capture sizes {sorted(dropped)}, now {after} live graphs "
                        f"({per_manager})")
    if live_graph_limit is not None and after > live_graph_limit:
        warnings.append(f"live-graph limit {live_graph_limit} cannot be met: Model Runner V2 needs {after} live "
                        f"graphs for one capture size ({per_manager}): raise the limit to {after} or more, or set "
                        "compilation_config.cudagraph_mode to FULL_DECODE_ONLY")
    return Mrv2Budget(sizes=tuple(kept), graphs=graphs, live_graph_limit=live_graph_limit,
                      dropped=tuple(sorted(dropped)), warnings=tuple(warnings))
