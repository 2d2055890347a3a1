"""cuda lane: the MUSA substitutes of Model Runner V2's Triton kernels against vLLM 0.26.0's own on a CUDA GPU,
outputs bit for bit and time, at the bench's shapes (the zoo's pairs: vocab 1024, KV block 16, max_num_seqs up to
256, K = 3 draft tokens, so 1 + K logits per request).

Each kernel runs through vLLM's own launch function (``apply_penalties``, ``BlockTables`` and its fused staged
write, ``rejection_sample``, ``gumbel_sample``, ``apply_top_k_top_p_triton``) as vLLM ships it and with the MUSA
table bound through the registry (``_penalties_kernel``, ``_load_ptr``, ``_rejection_kernel`` with ``tl_rand32``,
``_topk_topp_kernel``; the others in the table are bound too and do not touch these launches). Outputs must be
equal bit for bit. Times come from ``kernel_timing.py`` (CUDA graphs, interleaved rounds, medians), and each kernel
must meet its bar: geometric mean of substitute/vLLM over its shapes <= 1.05, no shape above 1.15. Results go to
``$PORTABLE_SPEC_GPU_OUT/mrv2_kernel_substitutes_gpu.json`` when that variable is set.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from kernel_timing import BAR, SHAPE_CAP, check_bar, compare_graphs, graph, per_launch_us, write_report

# The substitutes are derived from the installed vLLM's kernels, with each version's rewrite counts.
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

VOCAB, K, BLOCK = 1024, 3, 16
BATCHES = (1, 64, 256)
LAUNCHES = 20
RESULTS: dict = {"bar": BAR, "shape_cap": SHAPE_CAP, "vocab": VOCAB, "num_speculative_tokens": K,
                 "kv_block_size": BLOCK}


@pytest.fixture(scope="module", autouse=True)
def report():
    pytest.importorskip("vllm")
    yield RESULTS
    write_report(RESULTS, "mrv2_kernel_substitutes_gpu.json")


def _bits(t: torch.Tensor) -> torch.Tensor:
    ints = {torch.float32: torch.int32, torch.bfloat16: torch.int16, torch.float64: torch.int64}
    return t.view(ints[t.dtype]) if t.dtype in ints else t


def _shipped_then_bound(fn: Callable[[], tuple], timed: Callable[[], object]) -> tuple:
    """``fn`` (a fresh launch per call, from the same inputs) as vLLM ships it and with the MUSA table bound: one
    call's outputs each; and a CUDA graph of ``LAUNCHES`` calls of ``timed`` each, captured while that binding
    holds (replays keep it)."""
    from portable_spec.kernels import registry
    from portable_spec.vllm_adapter.patch import version_gate

    assert registry.installed() == []
    shipped = [t.clone() for t in fn()]
    graph_vllm = graph(timed, LAUNCHES)
    try:
        registry.install_substitutions("musa", pick=version_gate.pick)
        ours = [t.clone() for t in fn()]
        graph_ours = graph(timed, LAUNCHES)
    finally:
        registry.uninstall()
    return shipped, ours, graph_vllm, graph_ours


def _measure(name: str, shape: dict, fn: Callable[[], tuple], timed: Callable[[], object] | None = None) -> dict:
    shipped, ours, graph_vllm, graph_ours = _shipped_then_bound(fn, timed or fn)
    torch.cuda.synchronize()
    assert len(shipped) == len(ours)
    for a, b in zip(shipped, ours):
        assert torch.equal(_bits(a), _bits(b)), (name, shape)
    return {**shape, "bitwise_equal": True, **compare_graphs(graph_vllm, graph_ours, LAUNCHES)}


def _record(name: str, rows: list[dict]) -> None:
    RESULTS[name] = rows
    check_bar(rows, name, RESULTS)


def _batch(gen: torch.Generator, reqs: int) -> dict:
    """A verify step: ``reqs`` requests of 1 + K logits each, request-state indices spread over 256 slots."""
    max_reqs = 256 + 2
    idx = torch.randperm(max_reqs, generator=gen)[:reqs].to(torch.int32)
    per = K + 1
    return {"max_reqs": max_reqs, "idx": idx, "expanded": idx.repeat_interleave(per),
            "local": torch.arange(per, dtype=torch.int32).repeat(reqs), "logits": reqs * per}


# ------------------------------------------------------------------------------------------------ penalties
def test_penalties_substitute_is_bitwise_and_as_fast():
    import vllm.v1.worker.gpu.sample.penalties as penalties

    gen = torch.Generator().manual_seed(5)
    rows = []
    for reqs in BATCHES:
        b = _batch(gen, reqs)
        n = b["max_reqs"]
        base = dict(
            logits=(torch.randn(b["logits"], VOCAB, generator=gen) * 4).to(torch.bfloat16),
            expanded_idx_mapping=b["expanded"],
            token_ids=torch.randint(0, VOCAB, (b["logits"],), generator=gen, dtype=torch.int32),
            expanded_local_pos=b["local"], repetition_penalty=1.0 + torch.rand(n, generator=gen),
            frequency_penalty=torch.rand(n, generator=gen) - 0.5, presence_penalty=torch.rand(n, generator=gen) - 0.5,
            prompt_bin_mask=torch.randint(-2**31, 2**31 - 1, (n, -(-VOCAB // 32)), generator=gen, dtype=torch.int32),
            output_bin_counts=torch.randint(0, 3, (n, VOCAB), generator=gen, dtype=torch.int32))
        base = {k: v.cuda() for k, v in base.items()}
        pristine = base["logits"].clone()

        def run(base=base, pristine=pristine):
            base["logits"].copy_(pristine)  # in place: the compared launches start from the same logits
            penalties.apply_penalties(**base)
            return (base["logits"],)

        def timed(base=base):  # the penalties' cost does not depend on the logits' values: no restore
            penalties.apply_penalties(**base)

        rows.append(_measure("penalties", {"reqs": reqs, "tokens": b["logits"]}, run, timed))
    _record("_penalties_kernel", rows)


# ------------------------------------------------------------------------------------------------ block tables
def _block_tables(groups: int, gen: torch.Generator):
    from vllm.v1.worker.gpu.block_table import BlockTables

    bt = BlockTables(block_sizes=[BLOCK] * groups, max_num_reqs=256, max_num_batched_tokens=8192,
                     max_num_blocks_per_group=[128] * groups, device=torch.device("cuda"),
                     kernel_block_sizes=[BLOCK] * groups)
    for req in range(256):
        blocks = int(torch.randint(1, 128, (1,), generator=gen))
        ids = tuple(torch.randint(0, 60000, (blocks,), generator=gen).tolist() for _ in range(groups))
        bt.append_block_ids(req, ids, overwrite=True)
    return bt


def _staged_writes(gen: torch.Generator, reqs: int, groups: int, rows: int, width: int) -> dict:
    """One staged write per request and KV cache group, as ``FusedStagedWriter.apply`` launches them (group ids,
    rows, starts, contents, cumulative lengths; the groups' writes interleaved). Each request owns its row, so no two
    programs write one cell: with overlapping writes the GPU's order between programs decides the result (the first
    H100 run of this test drew such writes and found vLLM's and the substitute's tables unequal at 256 requests)."""
    n = groups * reqs
    order = torch.randperm(n, generator=gen)
    row = torch.cat([torch.randperm(rows, generator=gen)[:reqs] for _ in range(groups)])[order]
    lens = torch.randint(1, 9, (n,), generator=gen)
    return {"groups": torch.arange(groups).repeat_interleave(reqs)[order].to(torch.int32),
            "rows": row.to(torch.int32), "starts": torch.randint(0, width - 8, (n,), generator=gen, dtype=torch.int32),
            "contents": torch.randint(0, 60000, (int(lens.sum()),), generator=gen, dtype=torch.int32),
            "cu_lens": lens.cumsum(0).to(torch.int32)}


def _written(writes: dict, groups: int, rows: int, width: int) -> list[torch.Tensor]:
    """The tables ``writes`` leave behind when applied to zeroed tables one after another (on the CPU)."""
    tables = [torch.zeros(rows, width, dtype=torch.int32) for _ in range(groups)]
    written = torch.zeros(groups, rows, width, dtype=torch.bool)
    ends = writes["cu_lens"].tolist()
    for w, end in enumerate(ends):
        g, r, s = int(writes["groups"][w]), int(writes["rows"][w]), int(writes["starts"][w])
        begin = ends[w - 1] if w else 0
        assert not written[g, r, s:s + end - begin].any(), "overlapping staged writes"
        written[g, r, s:s + end - begin] = True
        tables[g][r, s:s + end - begin] = writes["contents"][begin:end]
    return tables


def test_block_table_substitute_is_bitwise_and_as_fast():
    """``_load_ptr`` in ``gather_block_tables`` and ``compute_slot_mappings`` (one and two KV cache groups, tables
    filled by ``apply_staged_writes``), and in the fused staged write that fills two groups' tables."""
    gen = torch.Generator().manual_seed(7)
    rows = []
    for groups in (1, 2):
        for reqs in BATCHES:
            bt = _block_tables(groups, gen)
            bt.apply_staged_writes()
            b = _batch(gen, reqs)
            idx = (b["idx"] % 256).cuda()
            qsl = torch.arange(0, b["logits"] + 1, K + 1, dtype=torch.int32).cuda()
            lens = bt.num_blocks.cpu[0, idx.cpu().long()] * BLOCK
            pos = torch.cat([torch.randint(0, int(n), (K + 1,), generator=gen) for n in lens]).cuda()
            padded = max(reqs, 8)

            def run(bt=bt, idx=idx, qsl=qsl, pos=pos, padded=padded):
                tables = bt.gather_block_tables(idx, num_reqs_padded=padded)
                return (*tables, bt.compute_slot_mappings(idx, qsl, pos, num_tokens_padded=int(pos.numel()) + 8))

            rows.append(_measure("block_tables", {"launch": "gather+slot_mappings", "groups": groups, "reqs": reqs},
                                 run))
    import vllm.v1.worker.gpu.buffer_utils as buffer_utils

    for reqs in BATCHES:  # the launch FusedStagedWriter.apply makes: new block ids for `reqs` rows of two groups
        tables = [torch.zeros(256, 128, dtype=torch.int32, device="cuda") for _ in range(2)]
        ptrs = torch.tensor([t.data_ptr() for t in tables], dtype=torch.uint64, device="cuda")
        strides = torch.tensor([t.stride(0) for t in tables], dtype=torch.int64, device="cuda")
        writes = _staged_writes(gen, reqs, groups=2, rows=256, width=128)
        expected = [e.cuda() for e in _written(writes, groups=2, rows=256, width=128)]
        args = [writes[k].cuda() for k in ("rows", "starts", "contents", "cu_lens", "groups")]

        def launch(ptrs=ptrs, strides=strides, args=args, n=2 * reqs):  # idempotent: timed as is
            buffer_utils._apply_write_kernel[(n,)](ptrs, strides, *args, BLOCK_SIZE=1024, MULTI_GROUP=True)

        def write(tables=tables, launch=launch, expected=expected):  # from zeroed tables: a missed write shows
            for t in tables:
                t.zero_()
            launch()
            torch.cuda.synchronize()
            assert all(torch.equal(t, e) for t, e in zip(tables, expected)), "the staged write missed its cells"
            return tuple(tables)

        rows.append(_measure("block_tables", {"launch": "fused_staged_write", "groups": 2, "reqs": reqs}, write,
                             launch))
    _record("_load_ptr", rows)

    filled = []  # vLLM's own FusedStagedWriter.apply (block_table.py:129) fills two groups' tables alike
    for bound in (False, True):
        from portable_spec.kernels import registry
        from portable_spec.vllm_adapter.patch import version_gate

        try:
            if bound:
                registry.install_substitutions("musa", pick=version_gate.pick)
            bt = _block_tables(2, torch.Generator().manual_seed(11))
            bt.apply_staged_writes()
            torch.cuda.synchronize()
            filled.append([t.gpu.clone() for t in bt.block_tables])
        finally:
            registry.uninstall()
    assert all(torch.equal(a, b) for a, b in zip(*filled)) and filled[0][1].any()
    RESULTS["fused_staged_write_through_block_tables_bitwise_equal"] = True


# ------------------------------------------------------------------------------------------------ rejection
def _rejection_case(gen: torch.Generator, reqs: int, greedy: float, draft_logits: bool, first_pos: int = 0) -> dict:
    b = _batch(gen, reqs)
    target = torch.randn(b["logits"], VOCAB, generator=gen) * 3
    sampled = torch.randint(0, VOCAB, (b["logits"],), generator=gen, dtype=torch.int32)
    agree = torch.rand(b["logits"], generator=gen) < 0.7
    sampled[1:][agree[:-1]] = target[:-1].argmax(-1)[agree[:-1]].to(torch.int32)
    temperature = torch.where(torch.rand(b["max_reqs"], generator=gen) < greedy, 0.0, 1.0)
    case = dict(target_logits=target.to(torch.bfloat16),
                draft_logits=torch.randn(b["max_reqs"], K, VOCAB, generator=gen) * 3 if draft_logits else None,
                draft_sampled=sampled, cu_num_logits=torch.arange(0, b["logits"] + 1, K + 1, dtype=torch.int32),
                pos=first_pos + torch.randint(0, 4000, (b["logits"],), generator=gen), idx_mapping=b["idx"],
                expanded_idx_mapping=b["expanded"], expanded_local_pos=b["local"], temperature=temperature,
                seed=torch.randint(-2**62, 2**62, (b["max_reqs"],), generator=gen))
    return {k: v.cuda() if torch.is_tensor(v) else v for k, v in case.items()}


def test_rejection_substitute_is_bitwise_and_as_fast():
    """``rejection_sample`` end to end (its six kernels; ``_rejection_kernel`` and the ``tl_rand32`` its resampling
    and acceptance draw through are substituted): greedy, sampled with one-hot drafts, sampled with draft logits, and
    sampled at positions past 2**32 (the acceptance draw's Philox counter then has a high word)."""
    import vllm.v1.worker.gpu.spec_decode.rejection_sampler_utils as rejection

    gen = torch.Generator().manual_seed(13)
    rows = []
    for mode, greedy, draft_logits, first_pos in (("greedy", 1.0, False, 0), ("sampled", 0.0, False, 0),
                                                  ("sampled_draft_logits", 0.0, True, 0),
                                                  ("sampled_pos_past_2**32", 0.0, False, 5 * 2**32 + 9)):
        for reqs in BATCHES:
            case = _rejection_case(gen, reqs, greedy, draft_logits, first_pos)

            def run(case=case):
                sampled, num_sampled = rejection.rejection_sample(**case, num_speculative_steps=K)
                written = torch.arange(K + 1, device=sampled.device) < num_sampled[:, None]
                return torch.where(written, sampled, -9), num_sampled

            rows.append(_measure("rejection", {"mode": mode, "reqs": reqs}, run))
    _record("rejection_sample", rows)


def test_gumbel_sampling_stays_bitwise_with_tl_rand32_rebound():
    """MUSA's table rebinds ``tl_rand32`` in ``gumbel`` too (Triton resolves it there for the sampler): target
    sampling and probabilistic drafting draw the same tokens. Drafting maps each token to its own request, as MRV2's
    speculator does: tokens of one request would all write that request's processed-logits row, and the GPU's order
    between programs would decide which one stays (the first H100 run of this test drew such tokens and found the
    outputs unequal at 64 draft tokens)."""
    import vllm.v1.worker.gpu.sample.gumbel as gumbel

    gen = torch.Generator().manual_seed(17)
    rows = []
    for mode in ("target", "draft"):
        for reqs in BATCHES:
            b = _batch(gen, reqs)
            # Drafting samples one token per request (each writes its request's row of the processed logits);
            # the target samples 1 + K per request.
            mapping = b["expanded"] if mode == "target" else b["idx"]
            tokens = len(mapping)
            case = dict(logits=(torch.randn(tokens, VOCAB, generator=gen) * 2).to(torch.bfloat16),
                        expanded_idx_mapping=mapping, temperature=torch.full((b["max_reqs"],), 0.8),
                        seed=torch.randint(-2**62, 2**62, (b["max_reqs"],), generator=gen),
                        pos=torch.randint(0, 4000, (tokens,), generator=gen))
            case = {k: v.cuda() for k, v in case.items()}
            extra = {}
            if mode == "draft":
                extra = dict(output_processed_logits=torch.zeros(b["max_reqs"], K, VOCAB, device="cuda"),
                             output_processed_logits_col=torch.tensor(1, device="cuda"))

            def run(case=case, extra=extra, mode=mode):
                sampled = gumbel.gumbel_sample(**case, apply_temperature=mode == "draft", **extra)
                return (sampled, extra["output_processed_logits"]) if extra else (sampled,)

            rows.append(_measure("gumbel", {"mode": mode, "tokens": tokens}, run))
    _record("gumbel_sample", rows)


# ------------------------------------------------------------------------------------------------ top-k / top-p
def top_k_top_p_cases():
    """The top-k/top-p launches timed here: ``(shape, run, restore)`` per mode (top-k, top-p, both) and batch (8,
    64, 256 rows); ``run`` restores the logits and calls ``apply_top_k_top_p_triton`` (which masks in place),
    ``restore`` only restores them. Also used by ``bench/results/2026-11-25-triton32-check-mrv2-fix/gpu_probe.py``."""
    import vllm.v1.sample.ops.topk_topp_triton as topk_topp

    gen = torch.Generator().manual_seed(19)
    for mode in ("top_k", "top_p", "both"):
        for reqs in (8, 64, 256):
            pristine = (torch.randn(reqs, VOCAB, generator=gen) * 3).to(torch.bfloat16).cuda()
            logits = pristine.clone()
            k = torch.randint(5, 200, (reqs,), generator=gen, dtype=torch.int32).cuda() if mode != "top_p" else None
            p = (0.5 + 0.45 * torch.rand(reqs, generator=gen)).cuda() if mode != "top_k" else None

            def run(logits=logits, pristine=pristine, k=k, p=p):
                logits.copy_(pristine)
                return (topk_topp.apply_top_k_top_p_triton(logits, k, p),)

            yield {"mode": mode, "rows": reqs}, run, lambda logits=logits, pristine=pristine: logits.copy_(pristine)


def test_top_k_top_p_substitute_is_bitwise_and_as_fast():
    """``apply_top_k_top_p_triton`` (MRV2 calls it for 8 rows or more): top-k, top-p and both. The op masks in place,
    so every launch first restores the logits (``reset_us``: the restore alone, the same in both graphs)."""
    rows = []
    for shape, run, restore in top_k_top_p_cases():
        row = _measure("top_k_top_p", shape, run)
        row["reset_us"] = round(per_launch_us(graph(restore, LAUNCHES), LAUNCHES), 3)
        rows.append(row)
    _record("_topk_topp_kernel", rows)
