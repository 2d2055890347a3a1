"""Child process of tests/test_mrv2_standalone.py: vLLM's eager standalone decode loop against our replay path, on a
CPU, with vLLM's own Triton kernels run by the interpreter (slot mappings, Gumbel sampling). Prints one JSON line.

vLLM turns Triton off on a host without a GPU driver, so its kernels are placeholders in the test session; this
process pins the test platform (our hooks, CPU) and turns vLLM's Triton switch on before vLLM's kernel modules import
(as ``mrv2_substitute_children.py`` does), so both loops launch vLLM's real kernels.

Both speculators are vLLM-constructed from one real ``VllmConfig`` (Llama target, Llama draft, K=4, method
``draft_model``) and start from the same post-step-0 state. vLLM's ``StandaloneARSpeculator._multi_step_decode`` runs
eagerly; ours runs its replay path with a FULL descriptor of a padded size, where the replay (a CUDA graph on a GPU)
is the recorded body itself, run on the same persistent buffers a graph reads. The draft model is a small
deterministic module standing in for the network (not what is compared): at each forward it snapshots the buffers
the draft's layers read. What is compared, per step: input ids, positions, seq_lens, query_start_loc and the slot
mapping of the real rows, the step index the sampler reads, and the sampled drafts; and that the padding rows are
vLLM's padding (PAD slot, seq_len 0, no tokens, idx_mapping -1).

    python mrv2_standalone_child.py greedy|probabilistic [decode|prefill|scopes]
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import types
from types import SimpleNamespace

import torch


def enable_triton_on_the_test_platform() -> None:
    """The test platform pinned (as conftest pins it), and vLLM's Triton switch on before its kernels import."""
    import importlib

    import vllm.platforms

    from portable_spec.vllm_adapter.tools.triton_check_worker import stand_in_autotune_bench, stand_in_gluon
    from portable_spec_harness.vllm_door.cpu_graph_platform import CpuGraphTestPlatform

    vllm.platforms._current_platform = CpuGraphTestPlatform()
    import vllm.triton_utils
    import vllm.triton_utils.importing as importing

    importing.HAS_TRITON = True
    stand_in_gluon()
    stand_in_autotune_bench()
    importlib.reload(vllm.triton_utils)


enable_triton_on_the_test_platform()

import triton  # noqa: E402
import triton.language as tl  # noqa: E402
import vllm.v1.worker.gpu.sample.gumbel as gumbel  # noqa: E402


@triton.jit
def _log1p(x):
    return tl.log(1.0 + x)


# The interpreter implements no libdevice function: both loops sample through this one (mrv2_substitute_children.py).
gumbel.tldevice = types.SimpleNamespace(log1p=_log1p)

LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
         "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
         "vocab_size": 512, "max_position_embeddings": 2048, "torch_dtype": "float32", "rms_norm_eps": 1e-6,
         "rope_theta": 10000.0, "tie_word_embeddings": False}
K, MAX_SEQS, BLOCK, NUM_REQS, PADDED = 4, 8, 16, 3, 4


class RecordingDraft(torch.nn.Module):
    """Stands in for the draft network: deterministic hidden states from ids and positions, and at every forward a
    snapshot of the buffers the draft's attention reads (and, from compute_logits, the step the sampler reads).
    ``tokens`` real tokens and ``per_request`` tokens per request (a decode step: NUM_REQS and 1; step 0: the expanded
    total and 2 + K); ``slots`` names the slot mapping the pass hands its layers."""

    def __init__(self, speculator, hidden: int, vocab: int) -> None:
        super().__init__()
        gen = torch.Generator().manual_seed(0)
        self.embed = torch.randn(vocab, hidden, generator=gen)
        self.head = torch.randn(hidden, vocab, generator=gen)
        self.speculator, self.seen = speculator, []
        self.tokens, self.per_request = NUM_REQS, 1
        self.slots = lambda: speculator.block_tables.slot_mappings

    def forward(self, input_ids, positions):
        s, n, t, rows = self.speculator, NUM_REQS, self.tokens, input_ids.shape[0]
        padded_reqs = rows // self.per_request
        self.seen.append({"input_ids": input_ids[:t].clone(), "positions": positions[:t].clone(),
                          "seq_lens": s.input_buffers.seq_lens[:n].clone(),
                          "query_start_loc": s.input_buffers.query_start_loc[: n + 1].clone(),
                          "slot_mapping": self.slots()[0, :t].clone(),
                          "rows": torch.tensor(rows),
                          "pad_seq_lens": s.input_buffers.seq_lens[n:padded_reqs].clone(),
                          "pad_query_start_loc": s.input_buffers.query_start_loc[n + 1: padded_reqs + 1].clone(),
                          "pad_slot_mapping": self.slots()[0, t:rows].clone(),
                          "pad_idx_mapping": s.idx_mapping[n:padded_reqs].clone(),
                          "pad_last_token_indices": s.last_token_indices[n:padded_reqs].clone()})
        return self.embed[input_ids.long()] * torch.cos(positions.float())[:, None]

    def compute_logits(self, hidden_states):
        # Called inside sample_draft: the step index the sampler reads (logits_cache_col) as it samples.
        self.seen[-1]["step"] = self.speculator.current_draft_step.clone()
        # Row by row: a padded graph batch must not change a real row's numbers here (on a GPU a GEMM's result may
        # depend on its row count; that is the graph's batch shape, the same in vLLM's own graphed speculators).
        logits = torch.stack([row @ self.head for row in hidden_states])
        cache = self.speculator.draft_logits  # vLLM caches logits in the head's dtype, as a real head returns them
        return logits if cache is None else logits.to(cache.dtype)


def build(cfg, cls, inputs):
    from vllm.v1.kv_cache_interface import KVCacheConfig
    from vllm.v1.worker.gpu.block_table import BlockTables

    device = torch.device("cpu")
    s = cls(cfg, device)
    s.model = RecordingDraft(s, s.hidden_size, s.vocab_size)
    s.block_tables = BlockTables([BLOCK], MAX_SEQS, cfg.scheduler_config.max_num_batched_tokens, [32], device)
    # Slots come from the request-state rows idx_mapping names (what compute_slot_mappings reads).
    s.block_tables.block_tables[0].gpu[inputs["idx_mapping"]] = inputs["blocks"]
    s.block_tables.input_block_tables[0][:NUM_REQS] = inputs["blocks"]
    s.kv_cache_config = KVCacheConfig(num_blocks=128, kv_cache_tensors=[], kv_cache_groups=[])
    s.attn_groups = []
    s._copy_request_inputs(NUM_REQS, inputs["idx_mapping"], inputs["temperature"], inputs["seeds"])
    # The state vLLM's step 0 (_prefill, attention on) leaves for the decode loop.
    s.expanded_positions[: len(inputs["expanded_positions"])] = inputs["expanded_positions"]
    s.last_token_indices[:NUM_REQS] = inputs["last_token_indices"]
    s.draft_tokens[:NUM_REQS, 0] = inputs["draft0"]
    s.input_buffers.seq_lens.fill_(0)
    s.input_buffers.query_start_loc.fill_(99)  # the expanded pass's values: the loop must not rely on them
    return s


def engine_config(method: str):
    """One real VllmConfig: Llama target, Llama draft, K, ``method: draft_model`` with ``method`` draft sampling."""
    import vllm.config.vllm as config_module

    import vllm_configs  # this script's folder, tests/, is first on sys.path

    os.environ["VLLM_USE_V2_MODEL_RUNNER"] = "1"
    config_module.HAS_TRITON = True
    root = tempfile.mkdtemp()
    for name in ("target", "draft"):
        os.makedirs(f"{root}/{name}")
        with open(f"{root}/{name}/config.json", "w") as f:
            json.dump(LLAMA, f)
    spec = vllm_configs.speculative("draft_model", f"{root}/draft", K, draft_sample_method=method)
    return vllm_configs.engine_config(f"{root}/target", spec, max_num_seqs=MAX_SEQS, max_model_len=512)


def compare(eager, ours, keys, padding_of, column) -> tuple[int, list[str]]:
    """What each forward of vLLM's pass and of ours saw (``keys``), the padding rows of ours (``padding_of``: a
    snapshot to {fact: (got, want)}), the drafts of ``column`` (a slice of draft_tokens' columns) and the logits
    cache: (how many comparisons, the mismatches)."""
    compared, mismatches = 0, []
    assert len(eager.model.seen) == len(ours.model.seen) > 0, (len(eager.model.seen), len(ours.model.seen))
    for step, (a, b) in enumerate(zip(eager.model.seen, ours.model.seen)):
        for key in keys:
            compared += 1
            if not torch.equal(a[key], b[key]):
                mismatches.append(f"forward {step} {key}: vLLM {a[key].tolist()} ours {b[key].tolist()}")
        for key, (got, want) in padding_of(b).items():
            compared += 1
            if got != want:
                mismatches.append(f"forward {step} padding {key}: {got}, want {want}")
    compared += 1
    if not torch.equal(eager.draft_tokens[:NUM_REQS, column], ours.draft_tokens[:NUM_REQS, column]):
        mismatches.append(f"drafts: vLLM {eager.draft_tokens[:NUM_REQS].tolist()} ours "
                          f"{ours.draft_tokens[:NUM_REQS].tolist()}")
    compared += eager.draft_logits is not None
    if eager.draft_logits is not None and not torch.equal(eager.draft_logits, ours.draft_logits):
        where = (eager.draft_logits != ours.draft_logits).nonzero()
        mismatches.append(f"draft_logits cache differs at {where[:6].tolist()} ({len(where)} entries)")
    return compared, mismatches


def step0_inputs() -> tuple[dict, torch.Tensor, torch.Tensor]:
    """The decode batch's request state for step 0: 3 requests verifying 1 + K tokens each, 0, 1 and 2 of them
    rejected; (inputs for ``build``, num_rejected, last_sampled: the correction token per request state)."""
    inputs = {"blocks": torch.tensor([[3, 4, 5] + [0] * 29, [7, 8, 9] + [0] * 29, [11, 12, 13] + [0] * 29],
                                     dtype=torch.int32),
              "idx_mapping": torch.tensor([2, 0, 5]), "temperature": torch.tensor([0.7, 1.0, 0.0, 0, 0, 1.3, 0, 0]),
              "seeds": torch.arange(8, dtype=torch.int64) * 1000 + 17,
              "expanded_positions": torch.zeros(1, dtype=torch.int64), "last_token_indices": torch.zeros(3),
              "draft0": torch.zeros(3)}
    return inputs, torch.tensor([0, 1, 2], dtype=torch.int32), torch.arange(MAX_SEQS, dtype=torch.int64) * 7 + 300


def step0_batch(inputs: dict, buffers):
    """The decode batch (an ``InputBatch`` on a copy of ``buffers``): each request's 1 + K verified tokens from its
    first verified position (16, 28, 36)."""
    import copy

    from vllm.v1.worker.gpu.input_batch import InputBatch

    query, starts = K + 1, torch.tensor([16, 28, 36])
    batch = InputBatch.make_dummy(NUM_REQS, NUM_REQS * query, copy.deepcopy(buffers))
    batch.idx_mapping = inputs["idx_mapping"].clone()
    batch.input_ids.copy_(torch.arange(NUM_REQS * query, dtype=torch.int32) * 3 + 40)
    batch.positions.copy_((starts[:, None] + torch.arange(query)).flatten())
    batch.seq_lens = (starts + query).int()
    batch.seq_lens_cpu_upper_bound = batch.seq_lens.clone()
    return batch


def prefill_main(method: str) -> dict:
    """Step 0: vLLM's eager ``_prefill`` (attention on) against ours replaying a FULL step-0 descriptor of a padded
    size (PADDED requests of 2 + K tokens), both from the same decode batch: 3 requests verifying 1 + K tokens each,
    0, 1 and 2 of them rejected. Compared: the expanded ids and positions, seq_lens, query_start_loc and the slot
    mapping of the real rows and tokens (vLLM's in its expanded slot buffer, ours in the block tables' persistent
    one, the one a graph reads), the sampler's step, the step-0 drafts and the logits cache; and that the padding
    rows are vLLM's padding (PAD slot, seq_len 0, query start held at the total, idx_mapping -1, last index 0)."""
    from vllm.config import set_current_vllm_config
    from vllm.config.compilation import CUDAGraphMode
    from vllm.v1.worker.gpu.cudagraph_utils import BatchExecutionDescriptor
    from vllm.v1.worker.gpu.spec_decode.standalone_ar.speculator import StandaloneARSpeculator

    from portable_spec.vllm_adapter.spec_decode.standalone_ar import GraphedStandaloneARSpeculator

    cfg = engine_config(method)
    query = K + 1
    inputs, num_rejected, last_sampled = step0_inputs()
    decode_batch = lambda buffers: step0_batch(inputs, buffers)  # noqa: E731

    with set_current_vllm_config(cfg):
        eager = build(cfg, StandaloneARSpeculator, inputs)
        ours = build(cfg, GraphedStandaloneARSpeculator, inputs)
        for s in (eager, ours):
            # set_attn's buffer (built here without attention groups): vLLM's step 0 writes its slots there.
            s.expanded_slot_mappings = torch.full((1, s.max_num_tokens + s.max_num_reqs), -7, dtype=torch.int64)
            s.model.tokens, s.model.per_request = NUM_REQS * (query + 1), query + 1
        eager.model.slots = lambda: eager.expanded_slot_mappings
        StandaloneARSpeculator._prefill(eager, decode_batch(eager.input_buffers), num_rejected, last_sampled,
                                        NUM_REQS, False, None)
        full = BatchExecutionDescriptor(cg_mode=CUDAGraphMode.FULL, num_tokens=PADDED * (query + 1),
                                        num_reqs=PADDED, uniform_token_count=query + 1)
        # No CUDA graph on this host: the manager's replay is the recorded body itself, on the same persistent
        # buffers (our replay, and its counter, run as on a GPU).
        ours.prefill_batch = lambda input_batch, num_reqs, skip_attn: full
        ours.prefill_cudagraph_manager = SimpleNamespace(run_fullgraph=lambda desc: ours._prefill_step(
            desc.num_reqs, desc.num_tokens, None, None, None, CUDAGraphMode.NONE))
        ours._prefill(decode_batch(ours.input_buffers), num_rejected, last_sampled, NUM_REQS, False, None)

    total = NUM_REQS * (query + 1)
    padding = lambda b: {"rows": (b["rows"].item(), PADDED * (query + 1)),  # noqa: E731
                         "seq_lens": (b["pad_seq_lens"].tolist(), [0]),
                         "query_start_loc": (b["pad_query_start_loc"].tolist(), [total]),
                         "slot_mapping": (b["pad_slot_mapping"].tolist(), [-1] * (PADDED - NUM_REQS) * (query + 1)),
                         "idx_mapping": (b["pad_idx_mapping"].tolist(), [-1]),
                         "last_token_indices": (b["pad_last_token_indices"].tolist(), [0])}
    compared, mismatches = compare(eager, ours, ("input_ids", "positions", "seq_lens", "query_start_loc",
                                                 "slot_mapping", "step"), padding, slice(0, 1))
    seen = eager.model.seen[0]
    return {"compared": compared, "mismatches": mismatches, "drafts": eager.draft_tokens[:NUM_REQS, 0].tolist(),
            "distinct_rows": len(set(eager.draft_tokens[:NUM_REQS, 0].tolist())),
            "distinct_slots": len(set(seen["slot_mapping"].tolist())), "tokens": int(seen["input_ids"].numel()),
            "replays": {str(size): n for size, n in ours.prefill_replays.items()},
            "eager_prefills": ours.eager_prefills, "padded_tokens": PADDED * (query + 1)}


def decode_main(method: str) -> dict:
    """Steps 1..K-1: vLLM's eager loop against ours replaying a FULL decode descriptor of a padded size."""
    from vllm.config import set_current_vllm_config
    from vllm.config.compilation import CUDAGraphMode
    from vllm.v1.worker.gpu.cudagraph_utils import BatchExecutionDescriptor
    from vllm.v1.worker.gpu.input_batch import InputBatch
    from vllm.v1.worker.gpu.spec_decode.standalone_ar.speculator import StandaloneARSpeculator

    from portable_spec.vllm_adapter.spec_decode.standalone_ar import GraphedStandaloneARSpeculator

    cfg = engine_config(method)

    inputs = {"blocks": torch.tensor([[3, 4, 5] + [0] * 29, [7, 8, 9] + [0] * 29, [11, 12, 13] + [0] * 29],
                                     dtype=torch.int32),
              "idx_mapping": torch.tensor([2, 0, 5]), "temperature": torch.tensor([0.7, 1.0, 0.0, 0, 0, 1.3, 0, 0]),
              "seeds": torch.arange(8, dtype=torch.int64) * 1000 + 17,
              # three requests whose step-0 expanded rows end at 5, 11, 14 (positions 20, 33, 40)
              "expanded_positions": torch.arange(16, dtype=torch.int64) * 0 + torch.tensor(
                  [15, 16, 17, 18, 19, 20, 28, 29, 30, 31, 32, 33, 38, 39, 40, 41]),
              "last_token_indices": torch.tensor([5, 11, 14]), "draft0": torch.tensor([101, 202, 303])}
    seq_lens, num_rejected = torch.tensor([20, 32, 40], dtype=torch.int32), torch.tensor([0, 1, 2], dtype=torch.int32)

    with set_current_vllm_config(cfg):
        eager = build(cfg, StandaloneARSpeculator, inputs)
        ours = build(cfg, GraphedStandaloneARSpeculator, inputs)
        batch = InputBatch.make_dummy(NUM_REQS, NUM_REQS, eager.input_buffers)
        batch.idx_mapping = inputs["idx_mapping"].clone()
        batch.seq_lens = seq_lens
        batch.seq_lens_cpu_upper_bound = seq_lens.clone()
        StandaloneARSpeculator._multi_step_decode(eager, batch, num_rejected, NUM_REQS, False, None)

        full = BatchExecutionDescriptor(cg_mode=CUDAGraphMode.FULL, num_tokens=PADDED, num_reqs=PADDED,
                                        uniform_token_count=1)
        # No CUDA graph on this host: the manager's replay is the recorded body itself, on the same persistent
        # buffers (our replay, and its counter, run as on a GPU).
        ours.decode_batch = lambda num_reqs, skip_attn: full
        ours.decode_cudagraph_manager = SimpleNamespace(run_fullgraph=lambda desc: ours._decode_step(
            desc.num_reqs, desc.num_tokens, None, None, None, CUDAGraphMode.NONE))
        ours._multi_step_decode(batch, num_rejected, NUM_REQS, False, None)

    assert len(eager.model.seen) == len(ours.model.seen) == K - 1, (len(eager.model.seen), len(ours.model.seen))
    padding = lambda b: {"rows": (b["rows"].item(), PADDED), "seq_lens": (b["pad_seq_lens"].tolist(), [0]),  # noqa: E731
                         "query_start_loc": (b["pad_query_start_loc"].tolist(), [NUM_REQS]),
                         "slot_mapping": (b["pad_slot_mapping"].tolist(), [-1]),
                         "idx_mapping": (b["pad_idx_mapping"].tolist(), [-1])}
    compared, mismatches = compare(eager, ours, ("input_ids", "positions", "seq_lens", "query_start_loc",
                                                 "slot_mapping", "step"), padding, slice(None))
    distinct = len({tuple(r) for r in eager.draft_tokens[:NUM_REQS].tolist()})
    return {"compared": compared, "mismatches": mismatches, "drafts": eager.draft_tokens[:NUM_REQS].tolist(),
            "distinct_rows": distinct, "slot_mapping_step1": eager.model.seen[0]["slot_mapping"].tolist(),
            "replays": {str(size): n for size, n in ours.decode_replays.items()},
            "eager_decode_loops": ours.eager_decode_loops, "padded": PADDED, "k": K}


def scopes_main(method: str) -> dict:
    """The phase clock's draft scopes around whole ``propose`` calls: the harness's real hook table
    (``profile_scopes.HOOKS``, installed as the bench installs it, each scope opened through a recording factory),
    then ``propose`` (vLLM's method, inherited by ours) on the decode batch ``prefill_main`` builds, for vLLM's
    ``StandaloneARSpeculator`` (eager), ours replaying step 0 and the decode steps (the managers' replays the recorded
    bodies, as in the passes above) and ours without graphs (vLLM's eager steps through ``super()``). Per draft
    forward and per draft sample, the phase scope open then."""
    from vllm.config import set_current_vllm_config
    from vllm.config.compilation import CUDAGraphMode
    from vllm.v1.worker.gpu.cudagraph_utils import BatchExecutionDescriptor
    from vllm.v1.worker.gpu.spec_decode.standalone_ar.speculator import StandaloneARSpeculator

    from portable_spec.vllm_adapter.spec_decode.standalone_ar import GraphedStandaloneARSpeculator
    from portable_spec_harness.vllm_door import profile_scopes

    cfg = engine_config(method)
    query = K + 1
    inputs, num_rejected, last_sampled = step0_inputs()
    open_scopes: list[str] = []

    class Opened:
        def __init__(self, name: str) -> None:
            self.name = name

        def __enter__(self) -> None:
            open_scopes.append(self.name)

        def __exit__(self, *exc) -> None:
            assert open_scopes.pop() == self.name

    class ScopeRecordingDraft(RecordingDraft):
        def forward(self, input_ids, positions):
            self.seen.append({"forward": open_scopes[-1] if open_scopes else None})
            return self.embed[input_ids.long()] * torch.cos(positions.float())[:, None]

        def compute_logits(self, hidden_states):
            self.seen[-1]["sample"] = open_scopes[-1] if open_scopes else None
            return super().compute_logits(hidden_states)

    def speculator(cls, replays: bool):
        s = build(cfg, cls, inputs)
        s.model = ScopeRecordingDraft(s, s.hidden_size, s.vocab_size)
        s.expanded_slot_mappings = torch.full((1, s.max_num_tokens + s.max_num_reqs), -7, dtype=torch.int64)
        if replays:
            prefill = BatchExecutionDescriptor(cg_mode=CUDAGraphMode.FULL, num_tokens=PADDED * (query + 1),
                                               num_reqs=PADDED, uniform_token_count=query + 1)
            decode = BatchExecutionDescriptor(cg_mode=CUDAGraphMode.FULL, num_tokens=PADDED, num_reqs=PADDED,
                                              uniform_token_count=1)
            s.prefill_batch = lambda input_batch, num_reqs, skip_attn: prefill
            s.decode_batch = lambda num_reqs, skip_attn: decode
            s.prefill_cudagraph_manager = SimpleNamespace(run_fullgraph=lambda desc: s._prefill_step(
                desc.num_reqs, desc.num_tokens, None, None, None, CUDAGraphMode.NONE))
            s.decode_cudagraph_manager = SimpleNamespace(run_fullgraph=lambda desc: s._decode_step(
                desc.num_reqs, desc.num_tokens, None, None, None, CUDAGraphMode.NONE))
        return s

    out: dict = {}
    with set_current_vllm_config(cfg):
        runs = {"vllm": speculator(StandaloneARSpeculator, False),
                "ours_replayed": speculator(GraphedStandaloneARSpeculator, True),
                "ours_eager": speculator(GraphedStandaloneARSpeculator, False)}
        with profile_scopes.installed(profile_scopes.HOOKS, factory=Opened) as report:
            out["installed"] = [h for h in report["installed"] if "standalone_ar" in h]
            for name, s in runs.items():
                s.propose(step0_batch(inputs, s.input_buffers), {}, {}, None, None,
                          torch.ones(NUM_REQS, dtype=torch.int32), num_rejected, last_sampled,
                          torch.zeros(MAX_SEQS, dtype=torch.int32), inputs["temperature"], inputs["seeds"])
                out[name] = [[seen["forward"], seen.get("sample")] for seen in s.model.seen]
        out["left_open"] = list(open_scopes)
    out["counts"] = {"replays": [sum(runs["ours_replayed"].prefill_replays.values()),
                                 sum(runs["ours_replayed"].decode_replays.values())],
                     "eager": [runs["ours_eager"].eager_prefills, runs["ours_eager"].eager_decode_loops]}
    out["k"] = K
    return out


MAINS = {"decode": decode_main, "prefill": prefill_main, "scopes": scopes_main}

if __name__ == "__main__":
    print(json.dumps(MAINS[sys.argv[2] if len(sys.argv) > 2 else "decode"](sys.argv[1])))
