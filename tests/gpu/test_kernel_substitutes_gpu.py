"""cuda lane: every MUSA kernel substitute against vLLM 0.26.0's own kernel on a CUDA GPU, outputs and time.

1. ``eagle_prepare_next_token_padded_kernel``: ours vs vLLM's, integer outputs bit for bit (graph-padding programs
   past ``num_reqs`` included), at the batch sizes vLLM serves and random ones.
2. TRITON_ATTN's ``unified_attention`` as vLLM ships it vs with the substitutes bound through the registry (derived
   ``kernel_unified_attention``, ``find_seq_idx``, ``compute_tile_loop_bounds``, tensor-descriptor stand-ins):
   bf16 Llama-shaped layers (32 query heads, 8 KV heads, head size 128, KV block 16), the 3D decode path with its
   reduction, spec-decode verify and prefill (2D), a non-causal DFlash block, and random lengths. The substitutes
   compile to the same program, so the outputs must be equal bit for bit.

Times are per launch (``kernel_timing.py``: CUDA graphs of many launches, interleaved rounds, median per shape). The
bar is substitute <= 1.05x vLLM: the geometric mean over each kernel's shapes must meet it, and no single shape may
exceed 1.15x (microsecond kernels jitter by a few percent).
Results go to ``$PORTABLE_SPEC_GPU_OUT/kernel_substitutes_gpu.json`` when that variable is set.
"""

from __future__ import annotations


import pytest
import torch
from kernel_timing import BAR, SHAPE_CAP, check_bar, compare_graphs, compare_times, graph, write_report

# The substitutes are derived from the installed vLLM's kernels, with each version's rewrite counts.
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

RESULTS: dict = {"bar": BAR, "shape_cap": SHAPE_CAP}


@pytest.fixture(scope="module", autouse=True)
def report():
    pytest.importorskip("vllm")
    yield RESULTS
    write_report(RESULTS, "kernel_substitutes_gpu.json")


# ------------------------------------------------------------------------------------------------ eagle kernel
def _eagle_case(gen: torch.Generator, batch: int, width: int, vocab: int = 128256) -> dict:
    accepted = torch.randint(0, width + 1, (batch,), generator=gen)
    tokens = torch.randint(0, vocab + vocab // 8, (batch, width), generator=gen, dtype=torch.int32)
    tokens[torch.arange(width).expand(batch, width) >= accepted.unsqueeze(1)] = -1
    return {"sampled": tokens.cuda(), "discard": (torch.rand(batch, generator=gen) < 0.2).cuda(),
            "backup": torch.randint(0, vocab, (batch,), generator=gen, dtype=torch.int32).cuda(), "vocab": vocab}


def test_eagle_prepare_next_token_substitute_is_bitwise_and_as_fast():
    import vllm.v1.spec_decode.utils as utils

    from portable_spec.kernels import eagle_prepare_next_token as ours
    from portable_spec.kernels import registry
    from portable_spec.vllm_adapter.patch import version_gate

    assert registry.installed() == []
    theirs = utils.eagle_prepare_next_token_padded_kernel
    assert hasattr(theirs, "fn"), "vLLM's kernel is not a Triton JIT function (vLLM found no GPU driver?)"
    gen = torch.Generator().manual_seed(12)
    shapes = [(b, w) for w in (4, 8) for b in (1, 8, 64, 256)] + [
        (int(torch.randint(1, 300, (1,), generator=gen)), int(torch.randint(2, 9, (1,), generator=gen)))
        for _ in range(3)]
    rows = []
    for batch, width in shapes:
        case = _eagle_case(gen, batch, width)
        outs = {}
        for name, kernel in (("vllm", theirs), ("ours", ours.eagle_prepare_next_token_padded_kernel)):
            full = ours.launch(kernel, case["sampled"], case["discard"], case["backup"], case["vocab"])
            sentinel = torch.full((batch,), -777, dtype=torch.int32, device="cuda")
            padded = ours.launch(kernel, case["sampled"], case["discard"], case["backup"], case["vocab"],
                                 grid_rows=batch, num_reqs=max(batch - 2, 1), next_token_ids=sentinel.clone(),
                                 valid_sampled_tokens_count=sentinel.clone())
            outs[name] = [t.cpu() for t in (*full, *padded)]
        assert all(torch.equal(a, b) for a, b in zip(outs["vllm"], outs["ours"])), (batch, width)

        def run(kernel, c=case):
            return lambda: ours.launch(kernel, c["sampled"], c["discard"], c["backup"], c["vocab"])

        rows.append({"batch": batch, "width": width, "bitwise_equal": True,
                     **compare_times(run(theirs), run(ours.eagle_prepare_next_token_padded_kernel), 200)})
    RESULTS["eagle_prepare_next_token_padded_kernel"] = rows
    check_bar(rows, "eagle_prepare_next_token_padded_kernel", RESULTS)


# ------------------------------------------------------------------------------------------------ unified attention
def _attention_inputs(gen: torch.Generator, seq_lens: list[int], query_lens: list[int], causal: bool,
                      use_3d: bool) -> dict:
    heads, kv_heads, dim, block = 32, 8, 128, 16
    num_seqs, tokens = len(seq_lens), sum(query_lens)
    blocks_per_seq = max(-(-s // block) for s in seq_lens)
    num_blocks = num_seqs * blocks_per_seq + 4
    kv = torch.randn(num_blocks, 2, block, kv_heads, dim, generator=gen).to(torch.bfloat16).cuda()
    table = torch.randperm(num_blocks, generator=gen)[:num_seqs * blocks_per_seq].view(num_seqs, blocks_per_seq)
    inputs = dict(
        q=torch.randn(tokens, heads, dim, generator=gen).to(torch.bfloat16).cuda(), k=kv[:, 0], v=kv[:, 1],
        out=torch.empty(tokens, heads, dim, dtype=torch.bfloat16, device="cuda"),
        cu_seqlens_q=torch.tensor([0] + torch.tensor(query_lens).cumsum(0).tolist(), dtype=torch.int32).cuda(),
        max_seqlen_q=max(query_lens), seqused_k=torch.tensor(seq_lens, dtype=torch.int32).cuda(),
        max_seqlen_k=max(seq_lens), softmax_scale=dim ** -0.5, causal=causal, window_size=(-1, -1),
        block_table=table.to(torch.int32).cuda(), softcap=0, q_descale=None,
        k_descale=torch.ones(num_seqs, kv_heads, device="cuda"),
        v_descale=torch.ones(num_seqs, kv_heads, device="cuda"))
    if use_3d:
        segments = 16
        inputs.update(seq_threshold_3D=128, num_par_softmax_segments=segments,
                      softmax_segm_output=torch.empty(tokens, heads, segments, dim, device="cuda"),
                      softmax_segm_max=torch.empty(tokens, heads, segments, device="cuda"),
                      softmax_segm_expsum=torch.empty(tokens, heads, segments, device="cuda"))
    return inputs


def test_unified_attention_with_substitutes_is_bitwise_and_as_fast():
    import vllm.v1.attention.ops.triton_unified_attention as ua

    from portable_spec.kernels import registry
    from portable_spec.vllm_adapter.patch import version_gate

    assert registry.installed() == []
    gen = torch.Generator().manual_seed(34)
    cases = [  # (name, seq_lens, query_lens, causal, 3D)
        ("decode_3d_bs1", [2048], [1], True, True),
        ("decode_3d_bs32", [int(x) for x in torch.randint(64, 2048, (32,), generator=gen)], [1] * 32, True, True),
        ("verify_k3_bs16", [int(x) for x in torch.randint(64, 2048, (16,), generator=gen)], [4] * 16, True, False),
        ("prefill_2x512", [512, 512], [512, 512], True, False),
        ("dflash_block_k8_bs8", [int(x) for x in torch.randint(64, 1024, (8,), generator=gen)], [9] * 8, False, False),
    ]
    for i in range(2):
        n = int(torch.randint(1, 24, (1,), generator=gen))
        seqs = [int(x) for x in torch.randint(16, 1500, (n,), generator=gen)]
        cases.append((f"random_verify{i}", seqs, [int(torch.randint(1, 9, (1,), generator=gen)) for _ in seqs],
                      True, False))
    rows = []
    for name, seqs, queries, causal, use_3d in cases:
        inputs = _attention_inputs(gen, seqs, queries, causal, use_3d)
        out = inputs["out"]

        def run(inputs=inputs):
            return lambda: ua.unified_attention(**inputs)

        run()()
        shipped = out.clone()
        graph_vllm = graph(run(), 20)
        try:
            registry.install_substitutions("musa", pick=version_gate.pick)
            assert ua.kernel_unified_attention.fn.__module__.startswith("portable_spec.derived.")
            run()()
            substituted = out.clone()
            graph_ours = graph(run(), 20)
        finally:
            registry.uninstall()
        assert torch.isfinite(shipped.float()).all(), name
        assert torch.equal(shipped, substituted), (name, float((shipped.float() - substituted.float()).abs().max()))
        rows.append({"case": name, "num_seqs": len(seqs), "tokens": sum(queries), "max_seq_len": max(seqs),
                     "path": "3d" if use_3d else "2d", "causal": causal, "bitwise_equal": True,
                     **compare_graphs(graph_vllm, graph_ours, 20)})
    RESULTS["unified_attention"] = rows
    check_bar(rows, "unified_attention", RESULTS)
