"""Keep target + drafter graphs under a platform's live-graph budget by dropping the largest sizes first.

Large sizes are the rarest batches and the most memory per graph, so they go first. The lists stay coupled:
the drafter's first step uses the target's verify keys (for DFlash it IS the target list), so a size dropped from
the target leaves the first step too, and no chain size may exceed the target's (new) max capture size.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class SizeLists:
    """The mutable lists being pruned (ascending, unique)."""

    target: list[int]
    first: list[int]
    chain: list[int] | None
    graphs_per_target_size: int
    full_decode_range: tuple[int, int] | None = None
    """Target sizes in this closed range cost one more graph: the FULL uniform-decode graph vLLM's V1 runner
    captures beside the PIECEWISE ones (FULL_AND_PIECEWISE); None: no such graph."""
    dropped: dict[str, list[int]] = field(default_factory=lambda: {"target": [], "first step": [], "chain step": []})

    def target_graphs(self) -> int:
        """Live graphs the target's sizes cost: ``graphs_per_target_size`` each, plus the FULL decode graphs."""
        low, high = self.full_decode_range or (1, 0)
        return len(self.target) * self.graphs_per_target_size + sum(low <= s <= high for s in self.target)

    def live_graphs(self) -> int:
        return self.target_graphs() + len(self.first) + len(self.chain or ())

    def _named(self) -> dict[str, list[int]]:
        lists = {"target": self.target, "first step": self.first}
        if self.chain is not None:
            lists["chain step"] = self.chain
        return lists

    def drop_largest(self) -> bool:
        """Drop the largest size held by a list of 2+ sizes (from every such list holding it); False if none can."""
        shrinkable = [sizes for sizes in self._named().values() if len(sizes) > 1]
        if not shrinkable:
            return False
        size = max(sizes[-1] for sizes in shrinkable)
        for name, sizes in self._named().items():
            if len(sizes) > 1 and sizes[-1] == size:
                sizes.pop()
                self.dropped[name].append(size)
        # No chain size may exceed the target's max capture size (the chain's smallest size, 1, always fits).
        if self.chain is not None:
            while self.chain and self.chain[-1] > self.target[-1]:
                self.dropped["chain step"].append(self.chain.pop())
        return True


def prune_to_limit(lists: SizeLists, limit: int | None, *, strict: bool = False) -> list[str]:
    """Prune ``lists`` in place until ``live_graphs() <= limit``; returns the warnings (at most two). A limit that
    even one size per list exceeds is the second warning, or with ``strict`` a ``ValueError``."""
    if limit is None or lists.live_graphs() <= limit:
        return []
    before = lists.live_graphs()
    while lists.live_graphs() > limit and lists.drop_largest():
        pass
    after = lists.live_graphs()
    dropped = "; ".join(f"{name} {sorted(sizes)}" for name, sizes in lists.dropped.items() if sizes)
    warnings = [f"{before} live graphs exceed the live-graph limit {limit} "
                f"({lists.graphs_per_target_size} per target size): dropped the largest capture sizes "
                f"({dropped}), now {after} live graphs"]
    if after > limit:
        if strict:
            raise ValueError(unmet_limit(lists, limit))
        warnings.append(unmet_limit(lists, limit))
    return warnings


def unmet_limit(lists: SizeLists, limit: int) -> str:
    """Why the pruned ``lists`` (one size each) still exceed ``limit``, and only the fixes that meet it: a higher
    limit, or fewer graphs per target size where that alone is enough."""
    needed = lists.live_graphs()
    g = lists.graphs_per_target_size
    target = lists.target_graphs()
    parts = [f"target {len(lists.target)} size x {g} graph{'s' if g > 1 else ''}"
             + (f" + {target - len(lists.target) * g} FULL decode" if target > len(lists.target) * g else "")]
    parts += [f"{name} {len(sizes)}" for name, sizes in lists._named().items() if name != "target"]
    fixes = [f"pass --live-graph-limit {needed} or more"]
    per_size = (limit - (needed - target)) // len(lists.target)
    if 1 <= per_size < g:
        fixes.append(f"--graphs-per-size {per_size} or less (FULL target graphs need 1)")
    return (f"live-graph limit {limit} cannot be met: even one size per list needs {needed} live graphs "
            f"({', '.join(parts)}): {', or '.join(fixes)}")
