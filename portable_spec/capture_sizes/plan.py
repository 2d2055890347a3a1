"""The planner's result: target verify sizes plus one ``StepPlan`` per drafter step kind, JSON round-trippable.

The vLLM adapter stores ``CapturePlan.to_dict()`` in ``additional_config`` and the drafter rebuilds it with
``from_dict``, so the dict form is the contract between config time and capture time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

GRAPH_MODES = ("FULL", "PIECEWISE", "NONE")


@dataclass(frozen=True)
class StepPlan:
    """One drafter step kind: how many tokens each request brings, which padded sizes to capture, in which mode."""

    query_len: int
    sizes: tuple[int, ...]
    mode: str

    def __post_init__(self) -> None:
        if self.mode not in GRAPH_MODES:
            raise ValueError(f"unknown graph mode {self.mode!r}: use one of {', '.join(GRAPH_MODES)}")
        if self.query_len < 1:
            raise ValueError(f"query_len must be >= 1 (got {self.query_len}): a step reads at least one token")

    def num_reqs(self, size: int) -> int:
        """Requests in a uniform batch padded to ``size`` tokens."""
        return size // self.query_len

    def to_dict(self) -> dict[str, Any]:
        return {"query_len": self.query_len, "sizes": list(self.sizes), "mode": self.mode}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> StepPlan:
        return cls(query_len=int(d["query_len"]), sizes=tuple(int(s) for s in d["sizes"]), mode=str(d["mode"]))


@dataclass(frozen=True)
class CapturePlan:
    """Everything one speculative-decoding deployment captures.

    ``target_sizes`` is the one list for vLLM's ``cudagraph_capture_sizes`` (its last element is the effective
    ``max_capture_size``); ``first_step``/``chain_step`` are the drafter's own keys.
    """

    method: str
    num_spec: int
    max_num_seqs: int
    max_capture_size: int
    tp: int
    sp: bool
    target_sizes: tuple[int, ...]
    first_step: StepPlan
    chain_step: StepPlan | None
    live_graphs: int
    live_graph_limit: int | None
    warnings: tuple[str, ...] = ()
    graphs_per_target_size: int = 1
    target_graphs: int | None = None
    """Live graphs the target's sizes cost (None: ``graphs_per_target_size`` per size, as plans before the FULL
    decode graphs were counted)."""

    @property
    def target_live_graphs(self) -> int:
        """What the target's planned sizes take of the live-graph limit."""
        if self.target_graphs is not None:
            return self.target_graphs
        return len(self.target_sizes) * self.graphs_per_target_size

    @property
    def steps(self) -> tuple[StepPlan, ...]:
        """The drafter step kinds, first step first."""
        return (self.first_step,) if self.chain_step is None else (self.first_step, self.chain_step)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict (lists, ints, strings, None)."""
        return {
            "method": self.method,
            "num_spec": self.num_spec,
            "max_num_seqs": self.max_num_seqs,
            "max_capture_size": self.max_capture_size,
            "tp": self.tp,
            "sp": self.sp,
            "target_sizes": list(self.target_sizes),
            "first_step": self.first_step.to_dict(),
            "chain_step": None if self.chain_step is None else self.chain_step.to_dict(),
            "live_graphs": self.live_graphs,
            "live_graph_limit": self.live_graph_limit,
            "graphs_per_target_size": self.graphs_per_target_size,
            "target_graphs": self.target_live_graphs,
            "warnings": list(self.warnings),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CapturePlan:
        """Rebuild a plan from ``to_dict()``; a malformed dict raises ``ValueError`` naming the missing key."""
        try:
            chain = d["chain_step"]
            limit = d["live_graph_limit"]
            return cls(
                method=str(d["method"]), num_spec=int(d["num_spec"]), max_num_seqs=int(d["max_num_seqs"]),
                max_capture_size=int(d["max_capture_size"]), tp=int(d["tp"]), sp=bool(d["sp"]),
                target_sizes=tuple(int(s) for s in d["target_sizes"]),
                first_step=StepPlan.from_dict(d["first_step"]),
                chain_step=None if chain is None else StepPlan.from_dict(chain),
                live_graphs=int(d["live_graphs"]), live_graph_limit=None if limit is None else int(limit),
                warnings=tuple(str(w) for w in d.get("warnings", ())),
                graphs_per_target_size=int(d.get("graphs_per_target_size", 1)),
                target_graphs=None if d.get("target_graphs") is None else int(d["target_graphs"]))
        except KeyError as exc:
            raise ValueError(f"capture plan dict lacks key {exc.args[0]!r}: rebuild it with "
                             f"CapturePlan.to_dict()") from None
        except (TypeError, AttributeError) as exc:
            raise ValueError(f"capture plan dict is malformed ({exc}): rebuild it with CapturePlan.to_dict()") from None
