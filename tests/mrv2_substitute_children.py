"""Child processes of tests/test_mrv2_substitutes.py (they print one JSON line, NAME -> result): Model Runner V2's
Triton kernels, run by the Triton interpreter through vLLM's own launch functions as vLLM ships them and again with
our MUSA substitutes bound, outputs compared bit for bit; ``ptx_identity`` (run without the interpreter) compiles
some of them for sm_90 instead and compares the PTX.

vLLM turns Triton off on a host without a GPU driver; ``enable_vllm_triton`` pins a CPU-importable vLLM platform and
turns it back on, so the objects compared are vLLM's real kernels. A name asked for as ``NAME:mutant`` also runs its
cases with each substitute replaced by a deliberately wrong one (derived entries get one more rewrite that shifts
the first random draw's offset, or in a function that draws none flips the first comparison, or in the staged write
gives the masked load another ``other``; ``_load_ptr`` points one element further), so the comparison must report
differences. Asked for both ways in one process, a child runs vLLM's kernels once per case and compares both bound
runs with that one output (the shipped run is the same computation either way: same cases, same seeds).

    python mrv2_substitute_children.py NAME[:mutant]...

prints ``{NAME: {"cases": ...}, "NAME:mutant": {"cases": ...}}`` for what was asked.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import json
import math
import os
import re
import sys
import types

import torch

from portable_spec.kernels import registry
from portable_spec.kernels.derive_rewrites import REWRITES
from portable_spec.kernels.substitutions import SUBSTITUTIONS
from portable_spec.vllm_adapter.patch import version_gate
from portable_spec.vllm_adapter.tools.triton_check_worker import enable_vllm_triton

enable_vllm_triton()

import triton  # noqa: E402
import triton.language as tl  # noqa: E402
import vllm.v1.sample.ops.topk_topp_triton as topk_topp  # noqa: E402
import vllm.v1.worker.gpu.block_table as block_table  # noqa: E402
import vllm.v1.worker.gpu.buffer_utils as buffer_utils  # noqa: E402
import vllm.v1.worker.gpu.sample.gumbel as gumbel  # noqa: E402
import vllm.v1.worker.gpu.sample.logprob as logprob  # noqa: E402
import vllm.v1.worker.gpu.sample.penalties as penalties  # noqa: E402
import vllm.v1.worker.gpu.spec_decode.rejection_sampler_utils as rejection  # noqa: E402

MRV2_SUBSTITUTES = ("_load_ptr", "_penalties_kernel", "tl_rand32", "tl_rand64", "_rejection_kernel",
                    "_topk_topp_kernel",
                    "_fill_logprob_token_ids_kernel", "_apply_write_kernel", "_mulhilo32",
                    "_update_committed_marker_cache_kernel", "gumbel_noised_argmax")
MODES: tuple[str, ...] = ("substituted",)
"""What the running child compares vLLM's output with: its substitutes (``substituted``), the mutants (``mutant``)."""


@triton.jit
def _log1p(x):
    return tl.log(1.0 + x)


# The interpreter implements no libdevice function (vLLM's tldevice.log1p returns None there): both runs, vLLM's
# kernels and ours, use this stand-in, so the comparison still sees every difference between the kernels. The
# compiler (ptx_identity, run without the interpreter) has libdevice: vLLM's own stays.
if os.environ.get("TRITON_INTERPRET") == "1":
    gumbel.tldevice = rejection.tldevice = types.SimpleNamespace(log1p=_log1p)
# vLLM's CPU test platform has no compute-unit count; the top-k/top-p op sizes its grid with it.
topk_topp.num_compute_units = lambda device_id=0: 4


@triton.jit
def _load_ptr_mutant(ptr_to_ptr, elem_dtype):
    ptr = tl.load(ptr_to_ptr)
    ptr = tl.cast(ptr, tl.pointer_type(tl.int32))
    return ptr + 1


_FLIP = {ast.Gt: ast.LtE, ast.GtE: ast.Lt, ast.Lt: ast.GtE, ast.LtE: ast.Gt, ast.Eq: ast.NotEq, ast.NotEq: ast.Eq}


_DRAWS = ("tl.rand", "tl.randint", "tl.philox")


def _mutate(func: ast.FunctionDef) -> int:
    """In a function that draws random numbers, add 1 to the first draw's offset (its low counter word); in any
    other, flip the first comparison."""
    for node in ast.walk(func):
        if isinstance(node, ast.Call) and ast.unparse(node.func) in _DRAWS:
            node.args[1] = ast.BinOp(left=node.args[1], op=ast.Add(), right=ast.Constant(1))
            return 1
    for node in ast.walk(func):
        if isinstance(node, ast.Compare) and type(node.ops[0]) in _FLIP:
            node.ops[0] = _FLIP[type(node.ops[0])]()
            return 1
    return 0


def _mutate_other(func: ast.FunctionDef) -> int:
    """Add 1 to the first masked load's ``other``: what a load the mask skips gives (in the staged write, where the
    first write's content starts: one element later, and one element shorter, so every access stays in bounds)."""
    for node in ast.walk(func):
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "tl.load":
            other = next((k for k in node.keywords if k.arg == "other"), None)
            if other is not None:
                other.value = ast.BinOp(left=other.value, op=ast.Add(), right=ast.Constant(1))
                return 1
    return 0


def _mutate_product(func: ast.FunctionDef) -> int:
    """Add 1 to the first product (the watermark Philox's low word)."""
    for node in ast.walk(func):
        for field, value in ast.iter_fields(node):
            if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Mult):
                setattr(node, field, ast.BinOp(left=value, op=ast.Add(), right=ast.Constant(1)))
                return 1
    return 0


MUTATIONS = {"_apply_write_kernel": "mutate-other", "_mulhilo32": "mutate-product"}
"""The mutation of a substitute whose compared comparison would send the interpreter's accesses out of bounds
(flipping the staged write's content mask writes past its table); every other derived entry gets ``mutate``."""


def _substitutions(mutant: bool = False) -> tuple:
    if not mutant:
        return SUBSTITUTIONS
    REWRITES.update({"mutate": _mutate, "mutate-other": _mutate_other, "mutate-product": _mutate_product})
    subs = []
    for sub in SUBSTITUTIONS:
        if sub.name == "_load_ptr":
            sub = dataclasses.replace(sub, name="_load_ptr:mutant", replacement="__main__:_load_ptr_mutant")
        elif sub.name in MRV2_SUBSTITUTES:
            sub = dataclasses.replace(sub, name=f"{sub.name}:mutant",
                                      rewrites=(*sub.rewrites, (MUTATIONS.get(sub.name, "mutate"), 1)))
        subs.append(sub)
    return tuple(subs)


def _bits(t: torch.Tensor) -> torch.Tensor:
    """The tensor's bit pattern (NaN and -0.0 compare as bits)."""
    ints = {torch.float32: torch.int32, torch.bfloat16: torch.int16, torch.float64: torch.int64}
    return t.view(ints[t.dtype]) if t.dtype in ints else t


def _compare(run, case: dict, summary=None) -> dict:
    """``run(**case)`` -> tuple of tensors, as vLLM ships the kernels and with our substitutes bound; ``summary``
    of vLLM's outputs says what the case exercised."""
    shipped = [t.clone() for t in run(**{k: v.clone() if torch.is_tensor(v) else v for k, v in case.items()})]
    out = {}
    for mode in MODES:
        try:
            bound = registry.install_substitutions("musa", _substitutions(mode == "mutant"), pick=version_gate.pick)
            subbed = [t.clone() for t in run(**{k: v.clone() if torch.is_tensor(v) else v for k, v in case.items()})]
        finally:
            registry.uninstall()
        out[mode] = {"equal": all(torch.equal(_bits(a), _bits(b)) for a, b in zip(shipped, subbed)),
                     "outputs": len(shipped), "bound": len(bound), **(summary(*shipped) if summary else {})}
    return out


# ------------------------------------------------------------------------------------------------ penalties
def _penalties_case(gen: torch.Generator, num_reqs: int, k: int, vocab: int, dtype: torch.dtype) -> dict:
    max_reqs = num_reqs + 3
    per_req = 1 + k
    idx = torch.randperm(max_reqs, generator=gen)[:num_reqs].to(torch.int32)
    tokens = num_reqs * per_req
    rep = 1.0 + torch.rand(max_reqs, generator=gen)
    freq = torch.rand(max_reqs, generator=gen) - 0.5
    pres = torch.rand(max_reqs, generator=gen) - 0.5
    off = torch.rand(max_reqs, generator=gen) < 0.3  # some requests use no penalty: the kernel returns early
    rep[off], freq[off], pres[off] = 1.0, 0.0, 0.0
    freq[0] = 0.0  # one request with repetition penalty only
    return dict(logits=(torch.randn(tokens, vocab, generator=gen) * 4).to(dtype),
                expanded_idx_mapping=idx.repeat_interleave(per_req),
                token_ids=torch.randint(0, vocab, (tokens,), generator=gen, dtype=torch.int32),
                expanded_local_pos=torch.arange(per_req, dtype=torch.int32).repeat(num_reqs),
                repetition_penalty=rep, frequency_penalty=freq, presence_penalty=pres,
                prompt_bin_mask=torch.randint(-2**31, 2**31 - 1, (max_reqs, -(-vocab // 32)), generator=gen,
                                              dtype=torch.int32),
                output_bin_counts=torch.randint(0, 3, (max_reqs, vocab), generator=gen, dtype=torch.int32))


def penalties_kernel() -> dict:
    def run(**case):
        penalties.apply_penalties(**case)
        return (case["logits"],)

    gen = torch.Generator().manual_seed(23)
    shapes = [(1, 0, 1024, torch.float32), (5, 3, 1024, torch.bfloat16), (9, 5, 1000, torch.float32),
              (16, 3, 1024, torch.float32)]
    return {"cases": {f"reqs{r}_k{k}_vocab{v}_{str(d)[6:]}": _compare(run, _penalties_case(gen, r, k, v, d))
                      for r, k, v, d in shapes}}


# ------------------------------------------------------------------------------------------------ block tables
def _block_tables(gen: torch.Generator, max_reqs: int, groups: int, block_size: int, max_blocks: int) -> object:
    """A ``BlockTables`` with MRV2's tensors on CPU (its constructor needs UVA; the launch methods need only these).
    The layout by version: up to 0.28.0 the kernels read ``kernel_block_sizes``; 0.33.0 reads ``block_sizes`` and adds
    per-group switches (slot mapping on, DCP sharding) and the sliding-window reach its gather nulls blocks with (group
    1 of a two-group table gets one, so its masked load runs)."""
    bt = object.__new__(block_table.BlockTables)
    tables = [torch.randint(0, 4096, (max_reqs, max_blocks), generator=gen, dtype=torch.int32) for _ in range(groups)]
    bt.num_kv_cache_groups, bt.cp_size, bt.cp_rank, bt.cp_interleave, bt.device = groups, 1, 0, 1, "cpu"
    bt.block_tables = [dataclasses.make_dataclass("Staged", ["gpu"])(t) for t in tables]
    bt.num_blocks = dataclasses.make_dataclass("Uva", ["gpu"])(
        torch.randint(0, max_blocks + 1, (groups, max_reqs), generator=gen, dtype=torch.int32))
    bt.input_block_tables = [torch.full_like(t, -5) for t in tables]
    reach = [0, 3 * block_size][:groups]
    layout = version_gate.pick({  # BlockTables' attributes its layout tensors and launches read
        "0.26.0": {"kernel_block_sizes": [block_size] * groups},
        "0.33.0": {"block_sizes": [block_size] * groups, "_slot_mapping_enabled": [True] * groups,
                   "dcp_sharded": torch.ones(groups, dtype=torch.bool), "_sliding_window_reach": reach,
                   "has_sliding_window_groups": any(reach), "_num_dirty_rows": 0}})
    for name, value in layout.items():
        setattr(bt, name, value)
    bt.slot_mappings = torch.full((groups, 512), -7, dtype=torch.int64)
    bt._keep = tables  # the pointer tables hold raw addresses
    bt.init_block_table_layout_tensors()
    return bt


def block_tables() -> dict:
    """``gather_block_tables`` (padded rows zeroed) and ``compute_slot_mappings`` through vLLM's methods, one and two
    KV cache groups; on vLLM >= 0.33 the gather also gets each request's computed tokens, so the sliding-window group
    nulls the blocks below its window."""
    gen = torch.Generator().manual_seed(32)
    sliding = version_gate.pick({"0.26.0": False, "0.33.0": True})  # gather_block_tables' num_computed_tokens
    out = {}
    for max_reqs, groups, num_reqs, padded in ((8, 1, 3, 4), (16, 2, 11, 16), (32, 1, 32, 32)):
        bt = _block_tables(gen, max_reqs, groups, 16, 64)
        idx = torch.randperm(max_reqs, generator=gen)[:num_reqs].to(torch.int32)
        lens = torch.randint(1, 9, (num_reqs,), generator=gen)
        qsl = torch.cat([torch.zeros(1, dtype=torch.int64), lens.cumsum(0)]).to(torch.int32)
        used = bt.num_blocks.gpu[0, idx.long()].clamp(min=1) * 16  # positions inside each request's blocks
        pos = torch.cat([torch.randint(0, int(u), (int(n),), generator=gen) for u, n in zip(used, lens)])
        computed = torch.randint(0, 64 * 16, (max_reqs,), generator=gen, dtype=torch.int32)
        extra = {"num_computed_tokens": computed} if sliding else {}

        def run(idx, qsl, pos, bt=bt, padded=padded, extra=extra):
            for t in bt.input_block_tables:  # each run writes into fresh buffers: nothing left by the previous one
                t.fill_(-5)
            bt.slot_mappings.fill_(-7)
            bt._num_dirty_rows = 0  # 0.33.0 also clears rows a larger previous batch left (read there only)
            tables = bt.gather_block_tables(idx, num_reqs_padded=padded, **extra)
            slots = bt.compute_slot_mappings(idx, qsl, pos, num_tokens_padded=int(qsl[-1]) + 4)
            return (*[t.clone() for t in tables], slots.clone())

        out[f"reqs{num_reqs}_groups{groups}"] = _compare(run, dict(idx=idx, qsl=qsl, pos=pos))
    return {"cases": out}


def staged_writes() -> dict:
    """The multi-group staged write (``FusedStagedWriter.apply``'s launch) into two int32 tables: one write per
    request and group, each request in its own row (as vLLM stages them: no two programs write one cell, whose result
    the GPU's order between programs would decide), up to the GPU test's largest shape (256 requests, 512 writes)."""
    out = {}
    for reqs, rows, width in ((1, 8, 64), (5, 8, 64), (12, 16, 64), (256, 256, 128)):
        def run(reqs=reqs, rows=rows, width=width):
            tables = [torch.zeros(rows, width, dtype=torch.int32) for _ in range(2)]
            ptrs = torch.tensor([t.data_ptr() for t in tables], dtype=torch.uint64)
            strides = torch.tensor([t.stride(0) for t in tables], dtype=torch.int64)
            g = torch.Generator().manual_seed(reqs)
            order = torch.randperm(2 * reqs, generator=g)
            row = torch.cat([torch.randperm(rows, generator=g)[:reqs] for _ in range(2)])[order].to(torch.int32)
            lens = torch.randint(1, 20, (2 * reqs,), generator=g)
            contents = torch.randint(0, 1000, (int(lens.sum()),), generator=g, dtype=torch.int32)
            starts = torch.randint(0, width - 19, (2 * reqs,), generator=g, dtype=torch.int32)
            group_ids = torch.arange(2).repeat_interleave(reqs)[order].to(torch.int32)
            buffer_utils._apply_write_kernel[(2 * reqs,)](ptrs, strides, row, starts, contents,
                                                          lens.cumsum(0).to(torch.int32), group_ids,
                                                          BLOCK_SIZE=1024, MULTI_GROUP=True)
            return tuple(tables)

        out[f"reqs{reqs}_groups2"] = _compare(run, {})
    return {"cases": out}


def apply_write() -> dict:
    """The single-group staged write (``StagedWriteTensor.apply_write``'s launch) into an int32 and a float32 table:
    writes of 1 to 40 elements at random rows and starts, so every write but the first reads where its content
    starts from the previous write's end (the load the substitute masks), over a grid of content blocks of 16
    (vLLM 0.33.0 launches one program per block; earlier versions loop over the blocks in every program, which
    writes the same values again)."""
    out = {}
    for writes, rows, width, dtype in ((1, 4, 64, torch.int32), (7, 8, 64, torch.float32), (33, 64, 96, torch.int32),
                                       (200, 256, 128, torch.float32)):
        def run(writes=writes, rows=rows, width=width, dtype=dtype):
            g = torch.Generator().manual_seed(writes)
            table = torch.zeros(rows, width, dtype=dtype)
            row = torch.randperm(rows, generator=g)[:writes].to(torch.int32)
            lens = torch.randint(1, 41, (writes,), generator=g)
            contents = torch.randn(int(lens.sum()), generator=g).mul(1000).to(dtype)
            starts = torch.randint(0, width - 40, (writes,), generator=g, dtype=torch.int32)
            grid = (writes, triton.cdiv(int(lens.max()), 16))
            buffer_utils._apply_write_kernel[grid](table, table.stride(0), row, starts, contents,
                                                   lens.cumsum(0).to(torch.int32), None, BLOCK_SIZE=16,
                                                   MULTI_GROUP=False)
            return (table,)

        out[f"writes{writes}_{str(dtype).removeprefix('torch.')}"] = _compare(run, {})
    return {"cases": out}


@triton.jit
def _philox_rounds_kernel(words_ptr, out_ptr, N: tl.constexpr):
    """vLLM 0.33.0's watermark Philox (``watermark._philox4x32_10``, ten rounds of ``_mulhilo32``) on N counters."""
    i = tl.arange(0, N)
    words = [tl.load(words_ptr + k * N + i).to(tl.uint32, bitcast=True) for k in range(6)]
    outs = watermark._philox4x32_10(words[0], words[1], words[2], words[3], words[4], words[5])
    for k in tl.static_range(4):
        tl.store(out_ptr + k * N + i, outs[k].to(tl.int32, bitcast=True))


def watermark_philox() -> dict:
    """The watermark Philox of vLLM >= 0.33 (MRV2's resample kernel draws through it when watermarking) on random
    counters and keys, all 32 bits used; a vLLM without the watermark module has nothing to compare."""
    try:
        globals()["watermark"] = importlib.import_module("vllm.v1.worker.gpu.sample.watermark")
    except ImportError as exc:
        return {"skipped": f"vLLM {version_gate.installed_text()} has no watermark module ({exc})"}
    out = {}
    for n in (16, 256, 1024):
        def run(n=n):
            g = torch.Generator().manual_seed(n)
            words = torch.randint(-2**31, 2**31, (6, n), generator=g, dtype=torch.int64).to(torch.int32)
            result = torch.zeros(4, n, dtype=torch.int32)
            _philox_rounds_kernel[(1,)](words, result, N=n)
            return (result,)

        out[f"counters{n}"] = _compare(run, {})
    return {"cases": out}


# ------------------------------------------------------------------------------------------------ thinking budget
_START, _NATURAL_END, _FORCED_END = [1, 7], [2], [5, 2]  # two-token start marker, a forced end string of two tokens


def _thinking_case(gen: torch.Generator, num_reqs: int, k: int, width: int, warm: bool) -> dict:
    """Requests with and without a budget, markers planted in their committed tokens (a start, sometimes an end
    after it), the marker cache empty (a cold scan) or holding a scan position (an incremental scan; one request's
    position past its length resets it)."""
    max_reqs, per_req, vocab = num_reqs + 3, 1 + k, 64
    tokens = torch.randint(10, vocab, (max_reqs, width), generator=gen, dtype=torch.int32)
    total = torch.randint(width // 2, width, (max_reqs,), generator=gen, dtype=torch.int32)
    for r in range(max_reqs):
        start = int(torch.randint(0, int(total[r]) // 2, (1,), generator=gen))
        tokens[r, start:start + 2] = torch.tensor(_START, dtype=torch.int32)
        if r % 3 == 0:  # thinking ended: the natural end marker after the start
            tokens[r, start + 4] = _NATURAL_END[0]
    budget = torch.randint(0, 12, (max_reqs,), generator=gen, dtype=torch.int32)
    budget[torch.rand(max_reqs, generator=gen) < 0.25] = -1  # requests without a budget
    scan_pos = (torch.randint(0, width // 4, (max_reqs,), generator=gen, dtype=torch.int32) if warm
                else torch.zeros(max_reqs, dtype=torch.int32))
    scan_pos[0] = width + 1 if warm else 0
    idx = torch.randperm(max_reqs, generator=gen)[:num_reqs].to(torch.int32)
    return dict(logits=torch.randn(num_reqs * per_req, vocab, generator=gen), req_ids=idx,
                expanded_idx_mapping=idx.repeat_interleave(per_req), thinking_token_budget=budget,
                all_token_ids=tokens, total_len=total,
                input_ids=torch.randint(10, vocab, (num_reqs * per_req,), generator=gen, dtype=torch.int32),
                expanded_local_pos=torch.arange(per_req, dtype=torch.int32).repeat(num_reqs),
                cached_last_start=torch.full((max_reqs,), -1, dtype=torch.int32),
                cached_last_end=torch.full((max_reqs,), -1, dtype=torch.int32), cached_scan_pos=scan_pos,
                reasoning_start_token_ids=torch.tensor(_START, dtype=torch.int32),
                natural_reasoning_end_token_ids=torch.tensor(_NATURAL_END, dtype=torch.int32),
                reasoning_end_token_ids=torch.tensor(_FORCED_END, dtype=torch.int32))


def thinking_budget() -> dict:
    """vLLM >= 0.28's thinking budget through ``apply_thinking_budget`` (the committed-marker scan, then the kernel
    that forces the end marker's logit); a vLLM without the module has nothing to compare."""
    try:
        budget = importlib.import_module("vllm.v1.worker.gpu.sample.thinking_budget")
    except ImportError as exc:
        return {"skipped": f"vLLM {version_gate.installed_text()} has no thinking budget ({exc})"}

    def run(**case):
        budget.apply_thinking_budget(**case)
        return (case["logits"], case["cached_last_start"], case["cached_last_end"], case["cached_scan_pos"])

    def summary(logits, last_start, last_end, scan_pos):
        forced = int((logits == 1.0e9).any(dim=1).sum())
        return {"forced": forced, "not_forced": logits.shape[0] - forced, "found": int((last_start >= 0).sum())}

    gen = torch.Generator().manual_seed(28)
    return {"cases": {f"reqs{r}_k{k}_len{w}_{'warm' if warm else 'cold'}": _compare(
        run, _thinking_case(gen, r, k, w, warm), summary)
        for r, k, w, warm in ((4, 0, 40, False), (6, 3, 64, False), (6, 3, 64, True), (9, 2, 2000, False))}}


# ------------------------------------------------------------------------------------------------ DFlash2 selector walk
def _selector_case(gen: torch.Generator, num_reqs: int, k: int, top_k: int, dtype: torch.dtype,
                   probabilistic: bool, fp64: bool) -> dict:
    """DFlash2's walk over ``top_k`` candidates per draft step, as its launch passes them (scores per step and
    previous choice, int64 candidate ids and positions, int32 request slots): some requests at temperature 0 (the
    helper's branches not taken), one padded row (slot -1)."""
    max_reqs, flat = num_reqs + 3, num_reqs * k
    reqs = torch.randperm(max_reqs, generator=gen)[:num_reqs].to(torch.int32)
    reqs[-1] = -1
    temperature = torch.rand(max_reqs, generator=gen) * 1.5 + 0.2
    temperature[torch.rand(max_reqs, generator=gen) < 0.3] = 0.0
    return dict(scores=(torch.randn(flat, top_k, top_k, generator=gen) * 2).to(dtype),
                candidates=torch.randint(0, 1024, (flat, top_k), generator=gen),
                sample_pos=torch.randint(1, 5000, (flat,), generator=gen), req_state=reqs.repeat_interleave(k),
                temperature=temperature, seeds=torch.randint(-2**62, 2**62, (max_reqs,), generator=gen),
                tokens=torch.full((flat,), -7, dtype=torch.int64), realized=torch.zeros(flat * top_k),
                num_steps=k, top_k=top_k, probabilistic=probabilistic, fp64=fp64)


def selector_walk() -> dict:
    """vLLM >= 0.28's DFlash2 ``_selector_walk_kernel`` launched with the arguments of vLLM's launch
    (``DFlash2Speculator._sample_path`` on 0.28.0, ``CandidateSampler.sample`` on 0.33.0: the same kernel signature,
    ``BLOCK_K = next_power_of_2(top_k)``, one warp), greedy and probabilistic, fp32 and fp64 Gumbel. The kernel stays
    vLLM's; the substitute is the Gumbel helper it inlines, bound in its module. Each case also counts the elements
    compared and, for a probabilistic walk, the tokens it draws that the greedy walk (vLLM's kernel) does not."""
    try:
        speculator = importlib.import_module("vllm.v1.worker.gpu.spec_decode.dflash2.speculator")
    except ImportError as exc:
        return {"skipped": f"vLLM {version_gate.installed_text()} has no DFlash2 ({exc})"}

    def run(scores, candidates, sample_pos, req_state, temperature, seeds, tokens, realized, num_steps, top_k,
            probabilistic, fp64):
        speculator._selector_walk_kernel[(req_state.numel() // num_steps,)](
            scores, candidates, sample_pos, req_state, temperature, seeds, tokens, realized, num_steps=num_steps,
            top_k=top_k, BLOCK_K=triton.next_power_of_2(top_k), SAMPLE_PROBABILISTIC=probabilistic, USE_FP64=fp64,
            num_warps=1)
        return (tokens, realized)

    gen = torch.Generator().manual_seed(40)
    out = {}
    for reqs, k, top_k, dtype, probabilistic, fp64 in ((5, 3, 8, torch.bfloat16, False, False),
                                                       (5, 3, 8, torch.bfloat16, True, False),
                                                       (9, 4, 5, torch.float32, True, False),
                                                       (6, 2, 8, torch.float32, True, True)):
        case = _selector_case(gen, reqs, k, top_k, dtype, probabilistic, fp64)
        greedy = run(**{n: v.clone() if torch.is_tensor(v) else v for n, v in case.items()
                        if n != "probabilistic"}, probabilistic=False)[0]

        def summary(tokens, realized, greedy=greedy, probabilistic=probabilistic):
            return {"compared": tokens.numel() + realized.numel(),
                    "noise_moved": int((tokens != greedy).sum()) if probabilistic else 0}

        name = f"reqs{reqs}_k{k}_top{top_k}_{str(dtype)[6:]}_{'probabilistic' if probabilistic else 'greedy'}"
        out[name + ("_fp64" if fp64 else "")] = _compare(run, case, summary)
    return {"cases": out}


# ------------------------------------------------------------------------------------------------ rejection
def _rejection_case(gen: torch.Generator, num_reqs: int, k: int, vocab: int, draft_logits: bool,
                    block: bool) -> dict:
    max_reqs = num_reqs + 2
    idx = torch.randperm(max_reqs, generator=gen)[:num_reqs].to(torch.int32)
    drafts = torch.randint(0, k + 1, (num_reqs,), generator=gen)
    counts = drafts + 1
    cu = torch.cat([torch.zeros(1, dtype=torch.int64), counts.cumsum(0)]).to(torch.int32)
    logits = int(cu[-1])
    local = torch.cat([torch.arange(int(c)) for c in counts]).to(torch.int32)
    target = torch.randn(logits, vocab, generator=gen) * 3
    sampled = torch.randint(0, vocab, (logits,), generator=gen, dtype=torch.int32)
    agree = torch.rand(logits, generator=gen) < 0.6  # many drafts are the target's argmax: long accepted runs
    sampled[1:][agree[:-1]] = target[:-1].argmax(-1)[agree[:-1]].to(torch.int32)
    sampled[torch.rand(logits, generator=gen) < 0.05] = -1  # padded draft ids are rejected
    temperature = torch.where(torch.rand(max_reqs, generator=gen) < 0.4, 0.0, 0.5 + torch.rand(max_reqs, generator=gen))
    return dict(target_logits=target, draft_logits=torch.randn(max_reqs, k, vocab, generator=gen) * 3 if draft_logits
                else None, draft_sampled=sampled, cu_num_logits=cu,
                pos=torch.randint(0, 4000, (logits,), generator=gen), idx_mapping=idx,
                expanded_idx_mapping=idx.repeat_interleave(counts), expanded_local_pos=local, temperature=temperature,
                seed=torch.randint(-2**62, 2**62, (max_reqs,), generator=gen), num_speculative_steps=k,
                use_block_verification=block)


def rejection_sample() -> dict:
    def run(**case):
        sampled, num_sampled = rejection.rejection_sample(**case)
        written = torch.arange(sampled.shape[1]) < num_sampled[:, None]  # the rest of each row is never written
        return torch.where(written, sampled, -9), num_sampled

    gen = torch.Generator().manual_seed(57)
    out = {}
    for num_reqs, k, vocab, draft_logits, block in ((1, 3, 1024, False, False), (6, 3, 1024, False, False),
                                                    (9, 5, 1000, True, False), (7, 3, 1024, True, True),
                                                    (12, 4, 1024, False, True)):
        case = _rejection_case(gen, num_reqs, k, vocab, draft_logits, block)
        name = f"reqs{num_reqs}_k{k}_vocab{vocab}{'_draft_logits' if draft_logits else ''}{'_block' if block else ''}"
        out[name] = _compare(run, case, lambda sampled, num: {
            "accepted": int((num - 1).clamp(min=0).sum()), "rejected_rows": int((num <= case["cu_num_logits"].diff()
                                                                                  - 1).sum())})
    for first_pos in (0, 5 * 2**32 + 9):  # positions past 2**32: the draw's Philox counter has a high word
        case = _coin_flip_case(gen, 16, 3, 1024, first_pos)
        out[f"coin_flips_pos{'_past_2**32' if first_pos else ''}"] = _compare(run, case, lambda sampled, num: {
            "accepted": int((num - 1).clamp(min=0).sum()), "rejected_rows": int((num <= 3).sum())})
    return {"cases": out}


def _coin_flip_case(gen: torch.Generator, num_reqs: int, k: int, vocab: int, first_pos: int) -> dict:
    """Every request drafts ``k`` tokens (one-hot drafts, temperature 1), each of target probability exactly 1/2:
    each acceptance is decided by its random draw alone (u < 1/2), so a substitute that draws other numbers at
    these positions changes the accepted lengths."""
    max_reqs = num_reqs + 2
    idx = torch.randperm(max_reqs, generator=gen)[:num_reqs].to(torch.int32)
    logits = num_reqs * (k + 1)
    sampled = torch.randint(0, vocab, (logits,), generator=gen, dtype=torch.int32)
    target = torch.zeros(logits, vocab)
    target[torch.arange(logits - 1), sampled[1:].long()] = math.log(vocab - 1)  # p = (vocab-1)/(2*(vocab-1))
    return dict(target_logits=target, draft_logits=None, draft_sampled=sampled,
                cu_num_logits=torch.arange(0, logits + 1, k + 1, dtype=torch.int32),
                pos=first_pos + torch.randint(0, 4000, (logits,), generator=gen), idx_mapping=idx,
                expanded_idx_mapping=idx.repeat_interleave(k + 1),
                expanded_local_pos=torch.arange(k + 1, dtype=torch.int32).repeat(num_reqs),
                temperature=torch.ones(max_reqs), seed=torch.randint(-2**62, 2**62, (max_reqs,), generator=gen),
                num_speculative_steps=k, use_block_verification=False)


def gumbel_sample() -> dict:
    """MRV2's sampler and probabilistic drafting draw through ``tl_rand32`` (``tl_rand64`` under
    ``--use-fp64-gumbel``), which the MUSA table rebinds in ``gumbel`` too: the draws must stay vLLM's."""
    cache, cache_col, drafting = version_gate.pick({  # the processed-logits output's keywords (renamed in 0.28)
        "0.26.0": ("output_processed_logits", "output_processed_logits_col", None),
        "0.28.0": ("logits_cache", "logits_cache_col", None),
        "0.33.0": ("logits_cache", "logits_cache_col", "is_drafting")})

    def run(**case):
        processed = case.get(cache)
        sampled = gumbel.gumbel_sample(**case)
        return (sampled,) if processed is None else (sampled, processed)

    gen = torch.Generator().manual_seed(61)
    out = {}
    # Drafting writes each token's processed logits to its (request, column) cell of output_processed_logits: one
    # token per request (EAGLE), or per (request, column) with per-token columns (DFlash), as MRV2's speculator does.
    for name, tokens, vocab, draft in (("target", 9, 1024, None), ("draft", 5, 1000, "scalar"),
                                       ("draft_per_token", 12, 1024, "per_token"), ("target_fp64", 9, 1024, None)):
        max_reqs = tokens + 2
        per_req = 3 if draft == "per_token" else 1
        reqs = torch.randperm(max_reqs, generator=gen)[:tokens // per_req].to(torch.int32)
        case = dict(logits=torch.randn(tokens, vocab, generator=gen) * 2,
                    expanded_idx_mapping=(torch.randint(0, max_reqs, (tokens,), generator=gen, dtype=torch.int32)
                                          if draft is None else reqs.repeat_interleave(per_req)),
                    temperature=torch.where(torch.rand(max_reqs, generator=gen) < 0.3, 0.0, 0.8),
                    seed=torch.randint(-2**62, 2**62, (max_reqs,), generator=gen),
                    pos=torch.randint(0, 4000, (tokens,), generator=gen), apply_temperature=draft is not None)
        if name.endswith("_fp64"):
            case["use_fp64"] = True
        if drafting:
            case[drafting] = draft is not None
        if draft:
            case[cache] = torch.zeros(max_reqs, 3, vocab)
            case[cache_col] = (torch.tensor(1) if draft == "scalar"
                               else torch.arange(3, dtype=torch.int32).repeat(tokens // 3))
        out[name] = _compare(run, case)
    return {"cases": out}


# ------------------------------------------------------------------------------------------------ top-k / top-p
def _tensor_range_in_interpreter() -> None:
    """The interpreter turns ``tl.range`` into Python's ``range``, whose ints have no ``.to()`` (the top-k/top-p
    kernel calls ``row_id.to(tl.int64)``); yield int32 interpreter tensors, as the compiler's loop variable is."""
    import numpy as np
    import triton.runtime.interpreter as interpreter

    patch_core = interpreter._patch_lang_core

    def patched(lang, scope):
        patch_core(lang, scope)
        plain = lang.range

        def tensor_range(*args, **kwargs):
            for i in plain(*args, **kwargs):
                yield tl.tensor(interpreter.TensorHandle(np.array([i], dtype=np.int32), tl.int32), tl.int32)

        scope.set_attr(lang, "range", tensor_range)

    interpreter._patch_lang_core = patched


def top_k_top_p() -> dict:
    def run(logits, k, p):
        return (topk_topp.apply_top_k_top_p_triton(logits, k, p),)

    _tensor_range_in_interpreter()

    gen = torch.Generator().manual_seed(71)
    out = {}
    for batch, vocab, use_k, use_p in ((8, 1024, True, True), (13, 1000, True, False), (9, 1024, False, True),
                                       (8, 1024, True, True)):
        logits = torch.randn(batch, vocab, generator=gen) * 3
        logits[0, : vocab // 2] = float("-inf")  # a grammar-masked row: fewer finite values than k
        k = torch.randint(1, 80, (batch,), generator=gen, dtype=torch.int32) if use_k else None
        if use_k:
            k[1] = vocab  # top-k off for one row
            k[0] = vocab // 2 + 10
        p = (0.5 + 0.5 * torch.rand(batch, generator=gen)) if use_p else None
        if use_p:
            p[2] = 1.0  # top-p off for one row
        out[f"batch{batch}_vocab{vocab}{'_k' if use_k else ''}{'_p' if use_p else ''}_{len(out)}"] = _compare(
            run, dict(logits=logits, k=k, p=p), lambda masked, before=logits: {
                "newly_masked": int((masked.isinf() & ~before.isinf()).sum())})
    return {"cases": out}


# ------------------------------------------------------------------------------------------------ logprob token ids
def _logprob_case(gen: torch.Generator, batch: int, num_logprobs: int, custom: list[int], vocab: int) -> dict:
    """``batch`` rows over ``len(custom)`` requests (each request's rows consecutive), request ``i`` asking for
    ``custom[i]`` token ids of its own (0: none, its rows take the top-k columns)."""
    max_reqs = len(custom) + 2
    width = max(max(custom), 1) + 3
    state = types.SimpleNamespace(
        num_token_ids=types.SimpleNamespace(gpu=torch.tensor(custom + [0, 0], dtype=torch.int32)),
        token_ids=types.SimpleNamespace(gpu=torch.randint(0, vocab, (max_reqs, width), generator=gen,
                                                          dtype=torch.int32)))
    mapping = torch.sort(torch.randint(0, len(custom), (batch,), generator=gen)).values.to(torch.int32)
    return dict(logits=torch.randn(batch, vocab, generator=gen), num_logprobs=num_logprobs,
                sampled_token_ids=torch.randint(0, vocab, (batch,), generator=gen, dtype=torch.int64),
                logprob_token_ids_state=state, expanded_idx_mapping=mapping,
                max_per_req_token_ids=max(custom), logits_mode=True)


def fill_logprob_token_ids() -> dict:
    """vLLM's ``compute_topk_scores`` on its custom-token-ids path (the kernel's two sources: a request's own token
    ids, or the top-k columns), with the top-k wider and narrower than the custom lists and with no top-k at all."""
    def run(**case):
        out = logprob.compute_topk_scores(**case)
        return out.logprob_token_ids, out.logprobs, out.selected_token_ranks

    def summary(token_ids, scores, ranks):
        valid = torch.isfinite(scores)
        return {"valid": int(valid.sum()), "masked": int((~valid).sum())}

    gen = torch.Generator().manual_seed(41)
    shapes = [(4, 5, [3, 0], 256), (7, 0, [2, 0, 6], 300), (9, 2, [0, 7, 1, 0], 512), (3, 4, [1], 128)]
    return {"cases": {f"batch{b}_topk{n}_custom{'-'.join(map(str, c))}_vocab{v}":
                      _compare(run, _logprob_case(gen, b, n, c, v), summary) for b, n, c, v in shapes}}


def _ptx_code(ptx: str) -> str:
    """PTX without its debug information (source file names and line numbers differ for a derived kernel)."""
    ptx = ptx.split(".section\t.debug")[0]
    lines = (re.sub(r"\.loc\s.*|\.file\s.*|//.*", "", line).strip() for line in ptx.splitlines())
    return "\n".join(line for line in lines if line)


def _ptx(case, substitutes: tuple | None = None) -> tuple[str, int]:
    """``case``'s kernel compiled for sm_90 by the running Triton (no GPU needed), as vLLM ships it or with
    ``substitutes`` bound: its PTX code and how many binding sites were bound."""
    import importlib

    from portable_spec.kernels.triton_compile import compile_for_target

    bound = ([] if substitutes is None
             else registry.install_substitutions("musa", substitutes, pick=version_gate.pick))
    try:
        kernel = getattr(importlib.import_module(case.module), case.attr)
        return _ptx_code(compile_for_target(kernel, case.signature, case.constexprs).asm["ptx"]), len(bound)
    finally:
        registry.uninstall()


def ptx_identity() -> dict:
    """Substitutes whose code must be vLLM's on the running Triton (3.6), compiled at the Triton 3.2 check's
    launches: the top-k/top-p kernel with the MUSA table bound (its rewrites' form decides that: the first H100
    run's, ``topk_int32_dividend.py``, compiles to other code), and gumbel sampling and the rejection kernel with
    ``tl_rand32`` alone bound (>= 3.3 already draws with two 32-bit counter words). Equal PTX runs in vLLM's time and
    computes vLLM's bits."""
    from topk_int32_dividend import first_run_kernel

    from portable_spec.kernels.triton_compile import compile_for_target
    from portable_spec.kernels.triton_case import resolved
    from portable_spec.kernels.triton_table_mrv2 import MRV2_KERNELS

    out = {}
    for case in resolved(MRV2_KERNELS):  # each launch as the installed vLLM makes it (0.28 renamed gumbel's)
        name = case.key.removeprefix("mrv2/")
        top = case.attr == "_topk_topp_kernel"
        if not (top or case.attr == "_gumbel_sample_kernel" or case.key.endswith("_rejection_kernel[draft-logits]")):
            continue
        shipped, _ = _ptx(case)  # compiled once, compared with each mode's
        extra = {}
        if top:
            signed = _ptx_code(compile_for_target(first_run_kernel(topk_topp._topk_topp_kernel), case.signature,
                                                  case.constexprs).asm["ptx"])
            extra = {"int32_dividend_equal": signed == shipped}
        out[name] = {}
        for mode in MODES:
            subs = _substitutions(mode == "mutant")
            ours, bound = _ptx(case, subs if top else tuple(s for s in subs if s.name.split(":")[0] == "tl_rand32"))
            out[name][mode] = {"equal": ours == shipped, "bound": bound, "ptx_lines": len(shipped.splitlines()),
                               **extra}
    return {"cases": out}


def _split(result: dict, modes: tuple[str, ...]) -> dict:
    """A child's result, whose cases hold one comparison per mode, as one result per mode."""
    if "cases" not in result:  # skipped: nothing compared either way
        return {mode: result for mode in modes}
    return {mode: {**result, "cases": {k: c[mode] for k, c in result["cases"].items()}} for mode in modes}


def main(asked: list[str]) -> dict:
    """Each child asked for once, in the modes asked for it (``NAME`` substituted, ``NAME:mutant`` the mutants)."""
    global MODES
    modes: dict[str, list[str]] = {}
    for arg in asked:
        name, _, mode = arg.partition(":")
        modes.setdefault(name, []).append(mode or "substituted")
    out = {}
    for name, wanted in modes.items():
        MODES = tuple(wanted)
        for mode, result in _split(globals()[name](), MODES).items():
            out[name if mode == "substituted" else f"{name}:{mode}"] = result
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))
