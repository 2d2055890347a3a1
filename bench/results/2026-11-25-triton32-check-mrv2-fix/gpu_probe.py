"""GPU follow-up of the first H100 run of tests/gpu/test_mrv2_substitutes_gpu.py
(``../2026-11-25-triton32-check-mrv2/gpu/``): why two comparisons failed, and what the top-k/top-p substitute's
rewrites cost. Run on a CUDA host with vLLM 0.26.0 and the repository on PYTHONPATH:

    python bench/results/2026-11-25-triton32-check-mrv2-fix/gpu_probe.py OUT.json

1. Races in the first run's inputs, with vLLM's kernels only (nothing substituted): the fused staged write drew
   random (row, start) pairs, so several programs wrote the same cells with different values; draft-mode gumbel
   sampling mapped 4 tokens to each request, so 4 programs wrote one request's processed-logits row. Each input is
   launched RUNS times from the same state and the distinct results are counted, for the first run's recipe and for
   the test's current one (disjoint writes, one token per request): more than one distinct result means the GPU's
   order between programs decides the output, whatever kernel runs.
2. Top-k/top-p time: vLLM's ``_topk_topp_kernel`` against the current substitute (``flip-integer-ternary``,
   ``unsigned-divisor``) and the first run's form (``tests/topk_int32_dividend.py``: the count cast to int32 before the
   division), same shapes and timing as the test (CUDA graphs of 20 launches, 7 interleaved rounds, medians).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys

RUNS = 200
VOCAB, K = 1024, 3


def _digest(*tensors) -> str:
    import torch

    h = hashlib.sha1()
    for t in tensors:
        h.update(t.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def _distinct(fn, runs: int = RUNS) -> int:
    import torch

    seen = set()
    for _ in range(runs):
        outs = fn()
        torch.cuda.synchronize()
        seen.add(_digest(*outs))
    return len(seen)


def _staged_write_inputs(gen, reqs: int, disjoint: bool) -> dict:
    import torch

    n = 2 * reqs
    lens = torch.randint(1, 9, (n,), generator=gen)
    if disjoint:  # the test's current recipe: each (group, row) written once
        order = torch.randperm(n, generator=gen)
        rows = torch.cat([torch.randperm(256, generator=gen)[:reqs] for _ in range(2)])[order]
        groups = torch.arange(2).repeat_interleave(reqs)[order]
        starts = torch.randint(0, 120, (n,), generator=gen)
    else:  # the first run's recipe
        rows = torch.randint(0, 256, (n,), generator=gen)
        starts = torch.randint(0, 100, (n,), generator=gen)
        groups = torch.arange(n) % 2
    contents = torch.randint(0, 60000, (int(lens.sum()),), generator=gen)
    cells: dict = {}
    begin = 0
    for w in range(n):  # cells written by more than one program with different values
        for j in range(int(lens[w])):
            cells.setdefault((int(groups[w]), int(rows[w]), int(starts[w]) + j), set()).add(int(contents[begin + j]))
        begin += int(lens[w])
    return {"args": [t.to(torch.int32).cuda() for t in (rows, starts, contents, lens.cumsum(0), groups)],
            "contested_cells": sum(len(v) > 1 for v in cells.values())}


def races() -> dict:
    import torch
    import vllm.v1.worker.gpu.buffer_utils as buffer_utils
    import vllm.v1.worker.gpu.sample.gumbel as gumbel

    out = {}
    gen = torch.Generator().manual_seed(7)
    for recipe, disjoint in (("first_run", False), ("current", True)):
        inputs = _staged_write_inputs(gen, 256, disjoint)
        tables = [torch.zeros(256, 128, dtype=torch.int32, device="cuda") for _ in range(2)]
        ptrs = torch.tensor([t.data_ptr() for t in tables], dtype=torch.uint64, device="cuda")
        strides = torch.tensor([t.stride(0) for t in tables], dtype=torch.int64, device="cuda")

        def write(tables=tables, ptrs=ptrs, strides=strides, args=inputs["args"]):
            for t in tables:
                t.zero_()
            buffer_utils._apply_write_kernel[(512,)](ptrs, strides, *args, BLOCK_SIZE=1024, MULTI_GROUP=True)
            return tables

        out[f"fused_staged_write_reqs256_{recipe}"] = {"contested_cells": inputs["contested_cells"],
                                                      "distinct_results": _distinct(write), "runs": RUNS}
    gen = torch.Generator().manual_seed(17)
    max_reqs = 258
    idx = torch.randperm(max_reqs, generator=gen)[:64].to(torch.int32)
    for recipe, mapping in (("first_run", idx.repeat_interleave(K + 1)[:64]), ("current", idx)):
        tokens = len(mapping)
        case = dict(logits=(torch.randn(tokens, VOCAB, generator=gen) * 2).to(torch.bfloat16),
                    expanded_idx_mapping=mapping, temperature=torch.full((max_reqs,), 0.8),
                    seed=torch.randint(-2**62, 2**62, (max_reqs,), generator=gen),
                    pos=torch.randint(0, 4000, (tokens,), generator=gen))
        case = {k: v.cuda() for k, v in case.items()}
        processed = torch.zeros(max_reqs, K, VOCAB, device="cuda")

        def draft(case=case, processed=processed):
            processed.zero_()
            sampled = gumbel.gumbel_sample(**case, apply_temperature=True, output_processed_logits=processed,
                                           output_processed_logits_col=torch.tensor(1, device="cuda"))
            return sampled, processed

        out[f"gumbel_draft_tokens64_{recipe}"] = {"tokens_per_request": tokens // len(set(mapping.tolist())),
                                                 "distinct_results": _distinct(draft), "runs": RUNS}
    return out


def top_k_top_p() -> dict:
    import torch
    import vllm.v1.sample.ops.topk_topp_triton as topk_topp
    from kernel_timing import compare_graphs, graph
    from test_mrv2_substitutes_gpu import top_k_top_p_cases
    from topk_int32_dividend import first_run_kernel

    from portable_spec.kernels.derive import derive
    from portable_spec.kernels.substitutions import SUBSTITUTIONS

    shipped = topk_topp._topk_topp_kernel
    entry = next(s for s in SUBSTITUTIONS if s.name == "_topk_topp_kernel")
    variants = {"current": derive(shipped, dict(entry.rewrites)), "first_run": first_run_kernel(shipped)}
    rows = []
    for shape, run, _ in top_k_top_p_cases():  # the GPU test's shapes and inputs
        reference = run()[0].clone()
        vllm_graph = graph(run, 20)
        row = dict(shape)
        for name, kernel in variants.items():
            topk_topp._topk_topp_kernel = kernel  # what the registry does; the graph keeps the kernel it captured
            try:
                row[f"{name}_bitwise_equal"] = torch.equal(run()[0].view(torch.int16), reference.view(torch.int16))
                ours_graph = graph(run, 20)
            finally:
                topk_topp._topk_topp_kernel = shipped
            timing = compare_graphs(vllm_graph, ours_graph, 20)
            row["vllm_us"] = timing["vllm_us"]
            row[f"{name}_us"], row[f"{name}_ratio"] = timing["substitute_us"], timing["ratio"]
        rows.append(row)
    summary = {f"{name}_geomean_ratio": round(math.exp(sum(math.log(r[f"{name}_ratio"]) for r in rows) / len(rows)), 4)
               for name in variants}
    return {"rows": rows, **summary}


if __name__ == "__main__":
    HERE = os.path.dirname(os.path.abspath(__file__))
    TESTS = os.path.join(HERE, "..", "..", "..", "tests")
    sys.path[:0] = [TESTS, os.path.join(TESTS, "gpu")]  # topk_int32_dividend; kernel_timing and the GPU test
    import torch
    import triton
    import vllm

    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
              "vllm": vllm.__version__, "races": races(), "top_k_top_p": top_k_top_p()}
    text = json.dumps(result, indent=1)
    print(text)
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as fh:
            fh.write(text + "\n")
