"""Graph-vs-eager parity: for N random batch compositions, the graph replay must reproduce, bit for bit, an eager run
AT THE SAME PADDED SHAPE (same keys, same buffers, same kernels), and it must write every draft column of every real
request while leaving every other row untouched.

What a composition varies: batch size (so the padding to the next key), which request slots are in the batch, each
request's context length (positions), accepted count (EAGLE sample index), greedy/temperature mix and seeds.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import torch

from portable_spec_harness.synthetic.proposer import SyntheticProposer
from portable_spec_harness.synthetic.steps import Composition


def _bits(t: torch.Tensor) -> torch.Tensor:
    """Integer view so that NaN sentinels compare equal and ``-0.0 != 0.0``: a bit-for-bit comparison."""
    return t.view(torch.int32) if t.dtype == torch.float32 else t


def _first_bad_column(ref: torch.Tensor, got: torch.Tensor, rows: torch.Tensor) -> int | None:
    for col in range(ref.shape[1]):
        if not torch.equal(_bits(ref[rows, col]), _bits(got[rows, col])):
            return col
    return None


def compare_outputs(runner: SyntheticProposer, comp: Composition, ref_tokens: torch.Tensor,
                    ref_logits: torch.Tensor | None) -> dict[str, Any] | None:
    """None when the graph run matches the eager reference; else what differs (column = draft step)."""
    out = runner.model.outputs
    dev = out.draft_token_ids.device
    rows = torch.tensor(comp.req_slots, device=dev, dtype=torch.long)
    others = torch.ones(out.draft_token_ids.shape[0], dtype=torch.bool, device=dev)
    others[rows] = False
    tokens = out.draft_token_ids
    problems: dict[str, Any] = {}
    if not torch.equal(ref_tokens, tokens):
        problems["tokens_differ_at_column"] = _first_bad_column(ref_tokens, tokens, rows)
    if bool((tokens[rows] < 0).any()):
        problems["unwritten_token_column"] = int((tokens[rows] < 0).any(dim=0).nonzero()[0])
    if bool((tokens[others] != -1).any()):
        problems["padded_row_wrote_tokens"] = True
    if ref_logits is not None:
        logits = out.draft_logits
        assert logits is not None
        if not torch.equal(_bits(ref_logits), _bits(logits)):
            problems["logits_differ_at_column"] = _first_bad_column(ref_logits, logits, rows)
        if bool(logits[rows].isnan().any()):
            problems["unwritten_logits_column"] = int(logits[rows].isnan().any(dim=2).any(dim=0).nonzero()[0])
        if not bool(logits[others].isnan().all()):
            problems["padded_row_wrote_logits"] = True
    return problems or None


def check_parity(runner: SyntheticProposer, *, compositions: int = 1000, seed: int = 0,
                 batch_sizes: list[int] | None = None, max_context: int | None = None,
                 progress: bool = False) -> dict[str, Any]:
    """Run ``compositions`` random batches eagerly and from graphs; count bit-exact matches, report the first
    mismatch with its key and step. ``batch_sizes`` defaults to every size from 1 to ``max_num_seqs``."""
    model = runner.model
    out = model.outputs
    gen = torch.Generator(device="cpu").manual_seed(seed)
    sizes = batch_sizes or list(range(1, runner.dispatcher.max_num_seqs + 1))
    matched = padded = graph_steps = eager_steps = 0
    first_mismatch: dict[str, Any] | None = None
    mismatches: list[int] = []
    keys_used: Counter = Counter()
    start = time.perf_counter()
    iterator: Any = range(compositions)
    if progress:
        try:
            from tqdm import tqdm
            iterator = tqdm(iterator, desc=f"parity {runner.platform.label} {getattr(model, 'method', '')}",
                            leave=False)
        except ImportError:
            pass
    for i in iterator:
        num_reqs = sizes[int(torch.randint(0, len(sizes), (1,), generator=gen))]
        comp = model.random_composition(num_reqs, gen, max_context=max_context)
        model.apply_context(comp)
        out.clear()
        keys = runner.propose(comp.inputs, num_reqs, eager=True)
        ref_tokens = out.draft_token_ids.clone()
        ref_logits = out.draft_logits.clone() if out.draft_logits is not None else None
        out.clear()
        runner.propose(comp.inputs, num_reqs)
        problems = compare_outputs(runner, comp, ref_tokens, ref_logits)
        keys_used.update(str(k) for k in keys)
        padded += int(any((k.num_reqs or num_reqs) > num_reqs for k in keys))
        for k in keys:
            if k in runner.graphs:
                graph_steps += 1
            else:
                eager_steps += 1
        if problems is None:
            matched += 1
            continue
        mismatches.append(i)
        if first_mismatch is None:
            col = next((v for name, v in problems.items() if name.endswith("_column") and v is not None), 0)
            step = min(int(col), len(keys) - 1)
            first_mismatch = {"composition": i, "step": int(col), "key": keys[step].to_dict(),
                              "problems": problems, "batch": comp.describe()}
    runner.platform.synchronize()
    return {
        "platform": runner.platform.label,
        "method": getattr(model, "method", type(model).__name__),
        "num_spec": model.num_spec,
        "probabilistic": out.draft_logits is not None,
        "compositions": compositions,
        "matched": matched,
        "mismatched_compositions": mismatches[:20],
        "first_mismatch": first_mismatch,
        "padded_compositions": padded,
        "graph_steps": graph_steps,
        "eager_steps": eager_steps,
        "distinct_keys": len(keys_used),
        "graphs_captured": len(runner.graphs),
        "eager_keys": {str(k): why for k, why in runner.eager_keys.items()},
        "seconds": round(time.perf_counter() - start, 2),
    }


PARITY_MODEL = dict(hidden=256, vocab=4096, head_dim=64, num_heads=4, num_kv_heads=2, intermediate=512,
                    max_model_len=512)
"""A small drafter: parity is about graph mechanics (keys, buffers, padding, step columns), not model size."""


def tensor_device_for(platform: Any) -> torch.device:
    """Where the platform's tensors live (musa-sim tensors live on the CUDA device backing the simulation)."""
    if platform.name == "musa" and getattr(platform, "injected", False):
        from portable_spec_harness.musa_sim_harness import sim_tensor_device
        return sim_tensor_device()
    return platform.device()


def build_parity_runner(platform: Any, method: str, num_spec: int, *, max_num_seqs: int = 32,
                        kv_layout: str = "paged", layers: int | None = None, probabilistic: bool = True,
                        seed: int = 0, progress: bool = False) -> SyntheticProposer:
    """A synthetic drafter + planner keys + runner on ``platform``, every FULL key captured."""
    from portable_spec.capture_sizes import plan_capture_sizes
    from portable_spec.draft.dispatcher import DraftDispatcher
    from portable_spec_harness.synthetic.steps import SyntheticDraftConfig, build_synthetic

    device = tensor_device_for(platform)
    n_layers = layers if layers is not None else (2 if method == "dflash" else 1)
    cfg = SyntheticDraftConfig(**PARITY_MODEL, layers=n_layers, kv_layout=kv_layout, seed=seed)
    model = build_synthetic(method, cfg, num_spec=num_spec, max_reqs=max_num_seqs, device=device,
                            probabilistic=probabilistic)
    dispatcher = DraftDispatcher.from_plan(plan_capture_sizes(method, num_spec, max_num_seqs))
    runner = SyntheticProposer(platform, dispatcher, model, device=device, progress=progress)
    runner.capture()
    return runner


def parity_suite(platform: Any, configs: list[tuple[str, int]], compositions: int, *, max_num_seqs: int = 32,
                 seed: int = 0, progress: bool = False) -> list[dict[str, Any]]:
    """``check_parity`` for each ``(method, K)``; KV layout alternates paged/contiguous over K."""
    results = []
    for i, (method, k) in enumerate(configs):
        layout = "paged" if (k % 2 == 1 or method == "dflash") else "contiguous"
        runner = build_parity_runner(platform, method, k, max_num_seqs=max_num_seqs, kv_layout=layout,
                                     seed=seed + i, progress=progress)
        try:
            result = check_parity(runner, compositions=compositions, seed=seed + 1000 + i, progress=progress)
            result["kv_layout"] = layout
            if platform.name == "musa" and getattr(platform, "injected", False):
                from portable_spec_harness.musa_sim_harness import musa_sim_evidence
                result["musa_sim"] = musa_sim_evidence(runner)
            results.append(result)
        finally:
            runner.close()
    return results
