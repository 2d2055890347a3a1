"""What the draft-graph runner needs from vLLM's distributed state: the tensor-parallel group to agree over on which
keys were captured (``portable_spec.draft.agreement``, over the group's CPU/gloo group), this rank's index, and a
progress bar on the first rank only."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from portable_spec.draft.agreement import all_ranks_agree


def tensor_parallel_agreement() -> tuple[Callable[[list[bool]], list[bool]] | None, int]:
    """``(agree, rank)`` for this process's tensor-parallel group; ``agree`` is None with one rank."""
    from vllm.distributed.parallel_state import get_tp_group, model_parallel_is_initialized

    if not model_parallel_is_initialized():
        return None, 0
    group = get_tp_group()
    if group.world_size <= 1:
        return None, group.rank_in_group
    return (lambda flags: all_ranks_agree(flags, group.cpu_group)), group.rank_in_group


def first_rank_progress(desc: str) -> Callable[[list], Iterable]:
    """A progress bar on the first rank (as vLLM shows its own captures); the plain list elsewhere."""
    def bar(items: list) -> Iterable:
        try:
            from tqdm import tqdm
            from vllm.distributed.parallel_state import is_global_first_rank
        except ImportError:
            return items
        return tqdm(items, desc=desc, disable=not is_global_first_rank())
    return bar
