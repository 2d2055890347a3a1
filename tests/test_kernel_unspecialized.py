"""CUDA's kernel substitutes (``portable_spec/kernels/substitutions.py``): vLLM's spec-decode kernels, unspecialized on
their batch-size arguments, and DFlash's input kernel launched at one tile size. They must change how many variants
Triton compiles and nothing else: the DFlash launch is compared with vLLM's own launch on vLLM's real kernel (run by
the Triton interpreter in a child process), and the specialization flags are read from real Triton JIT functions."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from lane_tools import import_triton

import_triton()

from portable_spec.kernels import registry  # noqa: E402
from portable_spec.kernels.derive import DerivationError, derive  # noqa: E402
from portable_spec.kernels.fixed_tile import FixedTileLauncher  # noqa: E402

CUDA = registry.substitutions_for("cuda")


def _child(code: str, *, interpret: bool, stdin: str | None = None) -> dict:
    env = {**os.environ, "VLLM_LOGGING_STREAM": "ext://sys.stderr", "VLLM_PLUGINS": ""}
    env.pop("TRITON_INTERPRET", None)
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=900,
                          input=stdin)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    return json.loads(lines[-1])


_ENABLE_TRITON = r"""
import json, torch
from portable_spec.vllm_adapter.tools.triton_check_worker import enable_vllm_triton
enable_vllm_triton()
from portable_spec.kernels import registry
"""

_FLAGS = _ENABLE_TRITON + r"""
import importlib
def current(target):
    module, attr = target.rsplit(".", 1)
    return getattr(importlib.import_module(module), attr)
out = {}
targets = registry.install_substitutions("cuda")
for sub in registry.substitutions_for("cuda"):
    obj = current(sub.targets[0])
    launched = type(obj).__name__ in ("FixedTileLauncher", "MinBlockLauncher")
    kernel = obj.kernel if launched else obj  # a launcher holds the derived JIT function
    out[sub.name] = {
        "type": type(obj).__name__, "kernel_type": type(kernel).__name__,
        "same_object_everywhere": all(current(t) is obj for t in sub.targets),
        "derived_from": getattr(kernel.fn, "__portable_spec_derived_from__", None),
        "unspecialized": sorted(p.name for p in kernel.params if p.do_not_specialize),
        "params": [p.name for p in kernel.params]}
out["targets"] = targets
out["restored"] = sorted(registry.uninstall())
print(json.dumps(out))
"""


def test_cuda_substitutes_are_vllms_kernels_with_fewer_specializations():
    """On real Triton JIT functions (no interpreter): each CUDA entry binds, at every site, vLLM's own kernel derived
    with exactly the named parameters unspecialized (and no other change of signature); DFlash's sits in the
    one-tile launcher; uninstall restores every site."""
    report = _child(_FLAGS, interpret=False)
    assert sorted(report.pop("targets")) == report.pop("restored") == sorted(t for s in CUDA for t in s.targets)
    assert set(report) == {sub.name for sub in CUDA} and len(CUDA) == 5
    for sub in CUDA:
        row = report[sub.name]
        kernel = sub.name.split(":")[0]
        assert row["kernel_type"] == "JITFunction" and row["same_object_everywhere"], row
        assert row["derived_from"] == f"vllm.v1.spec_decode.utils:{kernel}", row
        assert row["unspecialized"] == sorted(sub.unspecialize), row
        launchers = {"portable_spec.kernels.fixed_tile:one_tile_launcher": "FixedTileLauncher",
                     "portable_spec.kernels.fixed_tile:one_tile_tokens_launcher": "FixedTileLauncher",
                     "portable_spec.kernels.fixed_tile:min_block_launcher": "MinBlockLauncher", None: "JITFunction"}
        assert row["type"] == launchers[sub.launcher], row


_DFLASH = _ENABLE_TRITON + r"""
import vllm.v1.spec_decode.utils as utils
from vllm.triton_utils import triton
from portable_spec.kernels.derive import derive
from portable_spec.kernels.fixed_tile import one_tile_launcher

upstream = utils.copy_and_expand_dflash_inputs_kernel
ours = one_tile_launcher(derive(upstream, {}, ("total_input_tokens",)))  # what the registry binds
gen = torch.Generator().manual_seed(7)
K, BLOCK, MASK = 8, 16, 151669

def case(query_lens, rejected):
    batch = len(query_lens)
    qsl = torch.zeros(batch + 1, dtype=torch.int32)
    qsl[1:] = torch.tensor(query_lens).cumsum(0)
    starts = torch.randint(0, 200, (batch,), generator=gen)
    positions = torch.cat([s + torch.arange(n) for s, n in zip(starts.tolist(), query_lens)]).to(torch.int64)
    blocks = 40
    table = torch.randperm(batch * blocks, generator=gen).reshape(batch, blocks).to(torch.int32)
    nrej = None
    if rejected:
        nrej = torch.tensor([int(torch.randint(0, n, (1,), generator=gen)) for n in query_lens], dtype=torch.int32)
    return dict(next=torch.randint(0, 1000, (batch,), generator=gen, dtype=torch.int32), positions=positions,
                qsl=qsl, table=table, nrej=nrej, max_query=max(query_lens))

def launch(kernel, c, block_size_of):
    batch, ctx = len(c["qsl"]) - 1, c["positions"].numel()
    q = batch * (1 + K)
    outs = dict(ids=torch.full((q,), -7, dtype=torch.int32), cpos=torch.full((ctx,), -7, dtype=torch.int64),
                qpos=torch.full((q,), -7, dtype=torch.int64), cslot=torch.full((ctx,), -7, dtype=torch.int64),
                qslot=torch.full((q,), -7, dtype=torch.int64), tidx=torch.full((batch * K,), -7, dtype=torch.int32))
    per_req = c["max_query"] + 1 + K  # as DFlashProposer.set_inputs_first_pass picks the tile and the grid
    tile = block_size_of(per_req)
    kernel[(batch, triton.cdiv(per_req, tile))](
        next_token_ids_ptr=c["next"], target_positions_ptr=c["positions"], out_input_ids_ptr=outs["ids"],
        out_context_positions_ptr=outs["cpos"], out_query_positions_ptr=outs["qpos"],
        out_context_slot_mapping_ptr=outs["cslot"], out_query_slot_mapping_ptr=outs["qslot"],
        out_token_indices_ptr=outs["tidx"], block_table_ptr=c["table"], block_table_stride=c["table"].stride(0),
        query_start_loc_ptr=c["qsl"], num_rejected_tokens_ptr=c["nrej"] if c["nrej"] is not None else 0,
        parallel_drafting_token_id=MASK, block_size=BLOCK, num_query_per_req=1 + K, num_speculative_tokens=K,
        total_input_tokens=ctx, BLOCK_SIZE=tile, HAS_NUM_REJECTED=c["nrej"] is not None)
    return {k: v.tolist() for k, v in outs.items()}

vllm_tile = lambda n: min(256, triton.next_power_of_2(n))
specs = [([1 + K] * 4, True), ([1 + K] * 3 + [5], True), ([1], False), ([300, 7], False), ([130, 1 + K, 60], True),
         ([1 + K] * 16, True), ([250], False), ([33, 17, 1], True)]
result = {"upstream_is_jit": type(upstream).__name__ == "JITFunction" or hasattr(upstream, "fn"), "cases": []}
for lens, rejected in specs:
    c = case(lens, rejected)
    theirs = launch(upstream, c, vllm_tile)
    mine = launch(ours, c, vllm_tile)
    untouched = {k: sum(1 for x in v if x == -7) for k, v in theirs.items()}
    result["cases"].append({"lens": lens, "equal": theirs == mine, "tiles": vllm_tile(c["max_query"] + 1 + K),
                            "untouched": untouched, "ids_written": len(theirs["ids"]) - untouched["ids"]})
print(json.dumps(result))
"""


_IN_ONE = _ENABLE_TRITON + r"""
import contextlib, io, sys
reports = {}
for name, body in json.loads(sys.stdin.read()).items():  # each in its own namespace, its printed line its report
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(body, f"<{name}>", "exec"), {"json": json, "torch": torch, "registry": registry})
    reports[name] = json.loads([ln for ln in printed.getvalue().splitlines() if ln.startswith("{")][-1])
print(json.dumps(reports))
"""


@pytest.fixture(scope="module")
def interpreted() -> dict:
    """The three interpreter children's reports (``_DFLASH``, ``_EXPAND``, ``_NEXT_TOKEN``), run one after another in
    one process: one import of vLLM and torch instead of three. None binds a substitute (each derives its own)."""
    bodies = {name: code.removeprefix(_ENABLE_TRITON) for name, code in
              (("dflash", _DFLASH), ("expand", _EXPAND), ("next_token", _NEXT_TOKEN))}
    return _child(_IN_ONE, interpret=True, stdin=json.dumps(bodies))


def test_one_tile_dflash_launch_writes_what_vllms_launch_writes(interpreted):
    """vLLM's real DFlash input kernel (interpreter), launched as vLLM launches it (tile = next power of two of the
    longest query + 1 + K, up to 256) and through our one-tile launcher: every output buffer equal, element for
    element, over decode-only, mixed prefill and long-prompt batches, with and without rejected tokens (without:
    ours passes zeros with the flag on)."""
    report = interpreted["dflash"]
    assert report["upstream_is_jit"]
    cases = report["cases"]
    assert {c["tiles"] for c in cases} >= {16, 32, 256}, "the cases must cover tiles below, at and above ours"
    for c in cases:
        assert c["equal"], c
        assert c["ids_written"] == len(c["lens"]) * 9, c  # the comparison is over written outputs, not sentinels


_EXPAND = _ENABLE_TRITON + r"""
import vllm.v1.spec_decode.utils as utils
from vllm.triton_utils import triton
from portable_spec.kernels.derive import derive
from portable_spec.kernels.fixed_tile import one_tile_tokens_launcher

upstream = utils.copy_and_expand_eagle_inputs_kernel
ours = one_tile_tokens_launcher(derive(upstream, {}, ("total_input_tokens",)))  # what the registry binds
gen = torch.Generator().manual_seed(5)
PAD_ID, PARALLEL_ID = 0, 90001

def launch(kernel, lens, rejected, extra, shift):
    # As SpecDecodeBaseProposer.set_inputs_first_pass launches it (vLLM 0.26.0).
    batch, total_in = len(lens), sum(lens)
    qsl = torch.zeros(batch + 1, dtype=torch.int32)
    qsl[1:] = torch.tensor(lens).cumsum(0)
    qel = qsl[1:] - 1 - torch.tensor(rejected, dtype=torch.int32)
    g = torch.Generator().manual_seed(sum(lens) * 31 + extra)
    tokens = torch.randint(1, 1000, (total_in,), generator=g, dtype=torch.int32)
    positions = torch.cat([s + torch.arange(n) for s, n in zip(torch.randint(0, 500, (batch,), generator=g).tolist(),
                                                               lens)]).to(torch.int64)
    next_ids = torch.randint(1, 1000, (batch,), generator=g, dtype=torch.int32)
    net = extra - (1 if shift else 0)
    per_req = max(lens) + net
    tile = min(256, triton.next_power_of_2(per_req))
    total_out = total_in + net * batch
    outs = dict(ids=torch.full((total_out,), -7, dtype=torch.int32), pos=torch.full((total_out,), -7, dtype=torch.int64),
                rej=torch.zeros(total_out, dtype=torch.bool), masked=torch.zeros(total_out, dtype=torch.bool),
                new=torch.full((batch * extra,), -7, dtype=torch.int32),
                hidden=torch.full((total_in,), -7, dtype=torch.int32))
    kernel[(batch, triton.cdiv(per_req, tile))](
        target_token_ids_ptr=tokens, target_positions_ptr=positions, next_token_ids_ptr=next_ids,
        out_input_ids_ptr=outs["ids"], out_positions_ptr=outs["pos"], out_is_rejected_token_mask_ptr=outs["rej"],
        out_is_masked_token_mask_ptr=outs["masked"], out_new_token_indices_ptr=outs["new"],
        out_hidden_state_mapping_ptr=outs["hidden"], query_start_loc_ptr=qsl, query_end_loc_ptr=qel,
        padding_token_id=PAD_ID, parallel_drafting_token_id=PARALLEL_ID, total_input_tokens=total_in,
        num_padding_slots_per_request=extra, shift_input_ids=int(shift), BLOCK_SIZE_TOKENS=tile)  # the interpreter
    # takes no Python bool for a tl.bool argument (compiled Triton does: an int 0/1 specializes the same)
    return tile, {k: v.tolist() for k, v in outs.items()}

# (query lens, rejected per request, slots per request, shift): the draft model (1 slot, no shift) and parallel
# drafting (K slots, shifted), decode-only, verify with rejections, prefills up to past one 256-slot tile.
specs = [([5] * 4, [0, 1, 2, 4], 1, False), ([1], [0], 1, False), ([300, 7], [0, 0], 1, False),
         ([130, 5, 60], [0, 3, 0], 1, False), ([5] * 16, [2] * 16, 1, False), ([33, 17, 1], [0, 0, 0], 1, False),
         ([4] * 3, [1, 0, 3], 3, True), ([70, 4], [0, 2], 3, True), ([255], [0], 1, False)]
cases = []
for lens, rejected, extra, shift in specs:
    tile, theirs = launch(upstream, lens, rejected, extra, shift)
    _, mine = launch(ours, lens, rejected, extra, shift)
    cases.append({"lens": lens, "tile": tile, "equal": theirs == mine,
                  "ids_written": sum(1 for x in theirs["ids"] if x != -7), "ids": len(theirs["ids"]),
                  "new_written": sum(1 for x in theirs["new"] if x != -7)})
print(json.dumps({"upstream_is_jit": hasattr(upstream, "fn"), "cases": cases}))
"""


def test_one_tile_expand_launch_writes_what_vllms_launch_writes(interpreted):
    """vLLM's real expand kernel (interpreter: the draft model's and parallel drafting's input copy), launched as vLLM
    launches it (tile = next power of two of the longest query + new slots, up to 256) and through our one-tile
    launcher: every output buffer equal, element for element, for the draft model's single slot and parallel
    drafting's shifted K slots, decode-only, rejected tokens and prompts past one 256-slot tile."""
    report = interpreted["expand"]
    assert report["upstream_is_jit"]
    cases = report["cases"]
    assert {c["tile"] for c in cases} >= {2, 8, 256}, "the cases must cover tiles below, at and above ours"
    for c in cases:
        assert c["equal"], c
        assert c["ids_written"] == c["ids"] and c["new_written"] > 0, c  # compared written outputs, not sentinels


_NEXT_TOKEN = _ENABLE_TRITON + r"""
import vllm.v1.spec_decode.utils as utils
from vllm.triton_utils import triton
from portable_spec.kernels.derive import derive
from portable_spec.kernels.fixed_tile import min_block_launcher

upstream = utils.eagle_prepare_next_token_padded_kernel
ours = min_block_launcher(derive(upstream, {}, ("num_sampled_tokens_per_req", "num_reqs",
                                                "stride_sampled_token_ids")))
gen = torch.Generator().manual_seed(11)
VOCAB = 50

def launch(kernel, sampled, discard, backup):
    batch, width = sampled.shape
    next_ids = torch.full((batch,), -7, dtype=torch.int32)
    valid = torch.full((batch,), -7, dtype=torch.int32)
    kernel[(batch,)](sampled, discard, backup, next_ids, valid, VOCAB, width, batch, sampled.stride(0),
                     BLOCK_SIZE_TOKENS=triton.next_power_of_2(width))  # as vLLM launches it
    return next_ids.tolist(), valid.tolist()

cases = []
for batch, width in [(1, 1), (5, 1), (4, 4), (3, 6), (16, 4), (7, 9), (2, 16)]:
    sampled = torch.randint(0, VOCAB + 5, (batch, width), generator=gen, dtype=torch.int32)  # some >= vocab
    for row in range(batch):  # rejected tails are -1, as the rejection sampler writes them
        sampled[row, int(torch.randint(0, width + 1, (1,), generator=gen)):] = -1
    discard = torch.rand(batch, generator=gen) < 0.3
    backup = torch.randint(0, VOCAB, (batch,), generator=gen, dtype=torch.int32)
    theirs, mine = launch(upstream, sampled, discard, backup), launch(ours, sampled, discard, backup)
    cases.append({"shape": [batch, width], "equal": theirs == mine, "written": -7 not in theirs[0] + theirs[1],
                  "counts": theirs[1]})
print(json.dumps({"cases": cases}))
"""


def test_next_token_launch_at_sixteen_lanes_writes_what_vllms_launch_writes(interpreted):
    """vLLM's real next-token kernel (interpreter), launched as vLLM launches it (row tile = next power of two of the
    row width) and through our launcher (at least 16 lanes): equal next tokens and valid counts for rows with and
    without drafts, discarded rows, rejected tails and out-of-vocabulary tokens."""
    cases = interpreted["next_token"]["cases"]
    for c in cases:
        assert c["equal"] and c["written"], c
    counts = {n for c in cases for n in c["counts"]}
    assert 0 in counts and max(counts) >= 4  # the cases hold empty, discarded and long valid rows


class _Recorder:
    def __init__(self) -> None:
        self.calls = []

    def __getitem__(self, grid):
        def run(*args, **kwargs):
            self.calls.append((grid, kwargs["BLOCK_SIZE"]))
        return run


@pytest.mark.parametrize("grid, block, want", [((3, 1), 16, (3, 1)), ((3, 1), 32, (3, 1)), ((2, 2), 256, (2, 8)),
                                               ((5, 3), 64, (5, 3)), ((1, 1), 128, (1, 2))])
def test_fixed_tile_launch_covers_the_same_range_at_one_tile(grid, block, want):
    kernel = _Recorder()
    FixedTileLauncher(kernel, tile=64)[grid](BLOCK_SIZE=block)
    assert kernel.calls == [(want, 64)]
    assert want[1] * 64 >= grid[1] * block  # never less than vLLM's range


def test_min_block_launch_widens_only_narrower_row_tiles():
    from portable_spec.kernels.fixed_tile import MinBlockLauncher

    seen = []

    class Kernel:
        def __getitem__(self, grid):
            return lambda *args, **kwargs: seen.append((grid, kwargs["BLOCK_SIZE_TOKENS"]))

    launcher = MinBlockLauncher(Kernel(), block=16)
    for block in (1, 4, 16, 32):
        launcher[(3,)](BLOCK_SIZE_TOKENS=block)
    assert seen == [((3,), 16), ((3,), 16), ((3,), 16), ((3,), 32)]
    with pytest.raises(ValueError, match="not a power of two"):
        MinBlockLauncher(Kernel(), block=12)


def test_a_renamed_parameter_fails_derivation_in_one_line():
    def kernel(a_ptr, num_reqs):  # a stand-in for vLLM's source
        pass

    with pytest.raises(DerivationError) as err:
        derive(kernel, {}, ("batch_size",))
    assert "\n" not in str(err.value) and "has no parameter batch_size" in str(err.value)
    with pytest.raises(ValueError, match="not a power of two"):
        FixedTileLauncher(_Recorder(), tile=48)
