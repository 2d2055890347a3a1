"""Cross-rank agreement on which draft keys have graphs.

Ranks replay graphs that hold collectives (the draft's all-reduces, the fused chain's logits all-gather): if one rank
replays a graph where another runs eagerly, their collectives stop matching and the engine hangs or computes garbage.
So after capturing, the ranks AND their per-key successes, and a key that failed anywhere is dropped everywhere. A
different key list on some rank (a config that differs between ranks) cannot be reconciled: one line, no hang.
"""

from __future__ import annotations

from typing import Any

import torch

from portable_spec.errors import PortableSpecError


def all_ranks_agree(flags: list[bool], cpu_group: Any) -> list[bool]:
    """Element-wise AND of ``flags`` over every rank of ``cpu_group`` (a gloo group); every rank must pass the same
    number of flags, else one line names the mismatch."""
    import torch.distributed as dist

    counts = torch.tensor([len(flags), -len(flags)], dtype=torch.int64)
    dist.all_reduce(counts, op=dist.ReduceOp.MAX, group=cpu_group)
    if int(counts[0]) != len(flags) or int(-counts[1]) != len(flags):
        raise PortableSpecError(f"tensor-parallel ranks planned different drafter graphs ({int(-counts[1])} to "
                                f"{int(counts[0])} keys, this rank {len(flags)}): give every rank the same config, "
                                "or set PORTABLE_SPEC_DRAFT_GRAPH=piecewise")
    if not flags:
        return []
    ok = torch.tensor([int(f) for f in flags], dtype=torch.int32)
    dist.all_reduce(ok, op=dist.ReduceOp.MIN, group=cpu_group)
    return [bool(v) for v in ok.tolist()]
