"""The numbers tl.rand / tl.randint draw from int64 and from uint32 offsets, under the Triton interpreter of the
running Triton (run with the triton==3.2.0 virtualenv's interpreter and with the main one, 3.6): the evidence that
the "rand-offsets-uint32" rewrite (portable_spec/kernels/derive_rewrites.py) gives Triton >= 3.3's numbers on 3.2,
and that 3.2 draws other numbers from an int64 offset (64-bit Philox: a uint64, in a block of one)."""
import json
import os

os.environ["TRITON_INTERPRET"] = "1"
import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402


@triton.jit
def draw(out, pos_ptr, seed, AS_U32: tl.constexpr):
    i = tl.program_id(0)
    pos = tl.load(pos_ptr + i)
    if AS_U32:
        pos = pos.to(tl.uint32)
    u = tl.rand(seed, pos)
    r = tl.randint(seed, pos).to(tl.float64)
    one = tl.zeros_like(u).to(tl.int32)  # 3.2's int64 path returns blocks of one: store them as such
    tl.store(out + 2 * i + one, u.to(tl.float64))
    tl.store(out + 2 * i + 1 + one, r)


pos = torch.tensor([0, 1, 4095, 123456, 2**31 + 7], dtype=torch.int64)
result = {"triton": triton.__version__, "positions": pos.tolist()}
for name, as_u32 in (("int64 offset", False), ("uint32 offset", True)):
    out = torch.zeros(2 * len(pos), dtype=torch.float64)
    draw[(len(pos),)](out, pos, 987654321, AS_U32=as_u32)
    result[name] = {"rand": out[0::2].tolist(), "randint": [int(x) for x in out[1::2].tolist()]}
print(json.dumps(result))
