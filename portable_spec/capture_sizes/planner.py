"""``plan_capture_sizes``: one capture plan for the target verify pass and every drafter step.

Why a planner: vLLM 0.26.0 keeps ONE capture list, rounds it to multiples of 1+K for the target's uniform verify
batches, and has no keys for a FULL drafter. A FULL drafter needs the first step at 1+K tokens per request (at the
target's verify sizes), EAGLE-style chain steps at 1 token per request, and DFlash one block-aligned step at
``(1+K) * b``. Planning them together keeps the lists consistent, inside the max capture size and inside the
platform's live-graph budget. Pure Python: no vLLM import, so the CLI runs on any host.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from portable_spec.capture_sizes.budget import SizeLists, prune_to_limit
from portable_spec.capture_sizes.plan import CapturePlan, StepPlan
from portable_spec.capture_sizes.vllm_rules import (
    sequence_parallel_filter,
    spec_decode_multiple_of,
    vllm_default_ladder,
    vllm_default_max_capture_size,
    vllm_spec_decode_sizes,
)

logger = logging.getLogger("portable_spec.capture_sizes")

METHODS = ("eagle", "eagle3", "mtp", "dflash", "draft_model")
"""The speculative methods we plan for and run FULL drafter graphs for: the one list (the adapter's config hook and
drafter policy, the CLI and the harness import it)."""
CHAIN_METHODS = ("eagle", "eagle3", "mtp", "draft_model")
"""Methods that draft autoregressively: after the first step, K-1 chain steps at one token per request."""
EXTENDING_METHODS = ("draft_model",)
"""Methods whose first step brings one token more per request than the target verified (2+K): a separate draft
model has no target hidden states to shift against, so vLLM keeps each request's 1+K verified tokens and appends the
next token (``SpecDecodeBaseProposer.set_inputs_first_pass``, ``needs_extra_input_slots``)."""


def _positive_int(value: object, what: str, flag: str, hint: str = "") -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{what} must be an integer (got {value!r}): pass {flag} with a whole number")
    if value < 1:
        raise ValueError(f"{what} must be >= 1 (got {value}): pass {flag} 1 or more{hint}")
    return value


def _normalize_method(method: object) -> str:
    name = str(method).strip().lower()
    if name not in METHODS:
        raise ValueError(f"unknown speculative method {method!r}: pass --method one of {', '.join(METHODS)}")
    return name


def _sizes_arg(sizes: Iterable[int]) -> str:
    return ",".join(str(s) for s in sizes)


def _base_sizes(user_sizes: Iterable[int] | None, max_capture_size: int | None, num_spec: int, max_num_seqs: int,
                warnings: list[str]) -> tuple[list[int], bool, int]:
    """``(sizes, from_user, cap)``: the list vLLM starts from (user sizes or its default ladder) and the max capture
    size that bounds every planned size.

    The bound is the max capture size itself (vLLM's default when not given; the largest user size when only sizes
    are given), not the ladder's last element that vLLM truncates to. That keeps re-planning from
    ``target_sizes[-1]`` idempotent with or without the user's sizes (vLLM re-runs the hook on every replace).
    """
    if user_sizes is None:
        cap = max_capture_size if max_capture_size is not None else vllm_default_max_capture_size(
            num_spec, max_num_seqs)
        return vllm_default_ladder(cap), False, cap
    sizes = list(user_sizes)
    if not sizes:
        raise ValueError("the user capture-size list is empty: pass at least one size with --sizes, or omit it")
    bad = [s for s in sizes if isinstance(s, bool) or not isinstance(s, int) or s < 1]
    if bad:
        raise ValueError(f"capture sizes must be integers >= 1 (got {bad}): pass --sizes with positive sizes only")
    sizes = sorted(set(sizes))
    if max_capture_size is None:
        return sizes, True, sizes[-1]
    above = [s for s in sizes if s > max_capture_size]
    if above:
        warnings.append(f"capture sizes {above} exceed the max capture size {max_capture_size} and were dropped")
        sizes = [s for s in sizes if s <= max_capture_size]
    if not sizes:
        raise ValueError(f"every capture size is above the max capture size {max_capture_size}: pass --sizes "
                         f"with sizes <= {max_capture_size} or raise --max-capture-size")
    return sizes, True, max_capture_size


def _smallest_ladder_multiple(multiple: int) -> int:
    """The smallest default-ladder size that is a multiple of ``multiple`` (what --max-capture-size must reach)."""
    return next(s for s in vllm_default_ladder(256 + 16 * multiple) if s % multiple == 0)


def _no_draft_graph(q: int, multiple_of: int, cap: int, from_user: bool, require_full_draft: bool,
                    warnings: list[str]) -> None:
    """1+K (or, under SP, max(1+K, TP)) is above the max capture size: an error, or a warning when draft graphs
    are optional."""
    what = (f"1+num_speculative_tokens = {q}" if multiple_of == q
            else f"max(1+num_speculative_tokens, tensor_parallel_size) = {multiple_of}")
    fix = (f"include a size >= {multiple_of} in --sizes and keep --max-capture-size >= {multiple_of}" if from_user
           else f"pass --max-capture-size {multiple_of} or more")
    if require_full_draft:
        raise ValueError(f"{what} is above the max capture size {cap}, so no FULL draft graph fits: {fix}, "
                         f"or lower --num-spec")
    warnings.append(f"{what} is above the max capture size {cap}: the verify pass and the first draft step get no "
                    f"FULL graph ({fix} to get one)")


def _capped_warning(q: int, max_num_seqs: int, cap: int, first: list[int]) -> str | None:
    """The max capture size keeps the largest batches from a FULL draft graph: say which, from the sizes planned
    (rounded to 1+K, and pruned), not from the cap they were planned under."""
    if q * max_num_seqs <= cap or not first:
        return None
    largest = first[-1]
    planned = "" if largest == cap else f" (the largest planned size is {largest})"
    return (f"(1+num_speculative_tokens) * max_num_seqs = {q * max_num_seqs} exceeds the max capture size "
            f"{cap}{planned}: larger draft sizes dropped, so batches of more than {largest // q} requests draft "
            f"without a FULL graph")


def _dflash_sizes(base: list[int], from_user: bool, q: int, multiple_of: int, max_num_seqs: int, cap: int,
                  warnings: list[str]) -> list[int]:
    """Block-aligned sizes ``(1+K) * b``: b on vLLM's ladder up to max_num_seqs, or the user's multiples of 1+K."""
    top = min(cap, q * max_num_seqs)
    if from_user:
        sizes = [s for s in base if s % multiple_of == 0 and s <= top]
        dropped = [s for s in base if s not in sizes]
        if dropped:
            warnings.append(f"DFlash drafts blocks of {q} tokens per request: capture sizes {dropped} are not "
                            f"multiples of {multiple_of} up to {top} and were dropped")
        if not sizes and multiple_of <= top:
            warnings.append(f"no user capture size is block-aligned: falling back to [{multiple_of}]")
            sizes = [multiple_of]
        return sizes
    return sorted({q * b for b in vllm_default_ladder(max_num_seqs) if q * b <= cap and (q * b) % multiple_of == 0})


def first_step_plan(method: str, q: int, verify_sizes: list[int], mode: str) -> StepPlan:
    """The first draft step's plan from the verify sizes it follows (pruned with them, so a verify size dropped
    from the target leaves its first step too): the same sizes at query length 1+K, or for an extending method the
    same batches at 2+K tokens per request."""
    if method not in EXTENDING_METHODS:
        return StepPlan(query_len=q, sizes=tuple(verify_sizes), mode=mode)
    return StepPlan(query_len=q + 1, sizes=tuple((q + 1) * (s // q) for s in verify_sizes), mode=mode)


def plan_capture_sizes(method: str, num_spec: int, max_num_seqs: int, *, max_capture_size: int | None = None,
                       tp: int = 1, sp: bool = False, live_graph_limit: int | None = None,
                       user_sizes: Iterable[int] | None = None, graphs_per_target_size: int = 1,
                       full_decode_graphs: bool = False,
                       require_full_draft: bool = True, require_within_limit: bool = False) -> CapturePlan:
    """Plan target verify sizes and drafter step sizes for ``method`` with K = ``num_spec``.

    Bad input raises ``ValueError`` with one line naming the fix. Warnings (dropped sizes, pruning) are returned in
    ``plan.warnings`` and logged on ``portable_spec.capture_sizes``. A live-graph limit that even one size per list
    exceeds is a warning (serving keeps that plan; the drafter prunes to its budget at run time), or with
    ``require_within_limit`` (the CLI) a ``ValueError`` naming what meets it. Re-running with
    ``user_sizes=plan.target_sizes, max_capture_size=plan.target_sizes[-1]`` returns the same target sizes.
    """
    method = _normalize_method(method)
    num_spec = _positive_int(num_spec, "num_speculative_tokens", "--num-spec")
    max_num_seqs = _positive_int(max_num_seqs, "max_num_seqs", "--max-num-seqs")
    if max_capture_size is not None:
        max_capture_size = _positive_int(max_capture_size, "max capture size", "--max-capture-size",
                                         ", or omit it for vLLM's default")
    tp = _positive_int(tp, "tensor_parallel_size", "--tp")
    full_decode_graphs = bool(full_decode_graphs)
    if not (full_decode_graphs and graphs_per_target_size == 0):  # FULL_DECODE_ONLY: decode graphs alone
        graphs_per_target_size = _positive_int(graphs_per_target_size, "graphs per target size", "--graphs-per-size",
                                               " (a PIECEWISE target captures one graph per piece)")
    if live_graph_limit is not None:
        live_graph_limit = _positive_int(live_graph_limit, "live-graph limit", "--live-graph-limit",
                                         ", or omit it for no limit")
    sp = bool(sp)
    q = 1 + num_spec
    multiple_of = spec_decode_multiple_of(q, tp, sp)
    warnings: list[str] = []

    base, from_user, cap = _base_sizes(user_sizes, max_capture_size, num_spec, max_num_seqs, warnings)

    def sp_filtered() -> list[int]:
        """vLLM's sequence-parallel filter on the base list (DFlash's block-aligned sizes need no filter: every
        multiple of max(1+K, TP) is already a multiple of TP)."""
        kept = sequence_parallel_filter(base, tp, sp)
        if not kept:
            fix = (f"include a multiple of {tp} in --sizes" if from_user
                   else f"pass --max-capture-size {_smallest_ladder_multiple(tp)} or more")
            raise ValueError(f"no capture size <= {cap} is a multiple of tensor_parallel_size {tp}, as sequence "
                             f"parallelism requires: {fix}, or drop --sp")
        if from_user and len(kept) < len(base):
            warnings.append(f"sequence parallelism: capture sizes {[s for s in base if s % tp]} are not multiples "
                            f"of tensor_parallel_size {tp} and were dropped")
        return kept

    first_mode = "FULL"
    if multiple_of > cap:
        _no_draft_graph(q, multiple_of, cap, from_user, require_full_draft, warnings)
        target, first, first_mode = sp_filtered(), [], "NONE"
    elif method == "dflash":
        target = _dflash_sizes(base, from_user, q, multiple_of, max_num_seqs, cap, warnings)
        first = list(target)
        if not target:
            # Only under SP (TP > 1+K): no (1+K) * b with b <= max_num_seqs is a multiple of TP.
            need = multiple_of // q
            if require_full_draft:
                raise ValueError(f"no block-aligned size (1+num_speculative_tokens) * b with b <= max_num_seqs "
                                 f"({max_num_seqs}) is a multiple of {multiple_of} (sequence parallelism): pass "
                                 f"--max-num-seqs {need} or more, or drop --sp")
            warnings.append(f"no block-aligned size is a multiple of {multiple_of}: the drafter gets no FULL graph")
            target, first_mode = sp_filtered(), "NONE"
    else:
        kept = sp_filtered()
        target = vllm_spec_decode_sizes(kept, cap, q, tp, sp)
        if from_user and target != kept:  # vLLM rewrites the user's list too; the plan says so instead of hiding it
            warnings.append(f"vLLM rounds capture sizes up to multiples of {multiple_of} (the verify length 1+K"
                            f"{' or TP' if multiple_of != q else ''}) and keeps those <= {cap}: --sizes "
                            f"{_sizes_arg(kept)} became {_sizes_arg(target)}; pass multiples of {multiple_of} to "
                            "keep your list as given")
        first = [s for s in target if q <= s <= q * max_num_seqs]
        if not first:
            if require_full_draft:
                raise ValueError(f"no verify capture size lies in [1+K, (1+K) * max_num_seqs] = [{q}, "
                                 f"{q * max_num_seqs}], so the first draft step has no FULL graph: pass --max-num-seqs "
                                 f"{-(-target[0] // q)} or more, or include a size in that range in --sizes")
            warnings.append(f"no verify capture size lies in [{q}, {q * max_num_seqs}]: the first draft step gets "
                            f"no FULL graph")
            first_mode = "NONE"

    chain: list[int] | None = None
    if method in CHAIN_METHODS and num_spec > 1:
        # vLLM's ladder, plus the largest batch itself (when it fits) so a full batch off the ladder has a graph.
        # Only max_num_seqs is added, never a cap-derived size: re-planning from target_sizes[-1] stays idempotent.
        chain = sorted(set(vllm_default_ladder(min(max_num_seqs, target[-1])))
                       | ({max_num_seqs} if max_num_seqs <= target[-1] else set()))

    # vLLM's V1 dispatcher adds a FULL uniform-decode graph for each capture size in [1+K, (1+K) * max_num_seqs].
    lists = SizeLists(target=target, first=first, chain=chain, graphs_per_target_size=graphs_per_target_size,
                      full_decode_range=(q, q * max_num_seqs) if full_decode_graphs else None)
    pruned = prune_to_limit(lists, live_graph_limit, strict=require_within_limit)
    capped = None if from_user else _capped_warning(q, max_num_seqs, cap, lists.first)
    warnings += ([capped] if capped else []) + pruned
    for message in warnings:
        logger.warning(message)

    return CapturePlan(
        method=method, num_spec=num_spec, max_num_seqs=max_num_seqs, max_capture_size=lists.target[-1], tp=tp, sp=sp,
        target_sizes=tuple(lists.target),
        first_step=first_step_plan(method, q, lists.first, first_mode),
        chain_step=None if lists.chain is None else StepPlan(query_len=1, sizes=tuple(lists.chain), mode="FULL"),
        live_graphs=lists.live_graphs(), live_graph_limit=live_graph_limit, warnings=tuple(warnings),
        graphs_per_target_size=graphs_per_target_size, target_graphs=lists.target_graphs())
