"""The numbers tl.rand draws from int64 offsets, under the Triton interpreter of the running Triton (run with the
triton==3.2.0 virtualenv's interpreter and with the main one, 3.6): vLLM's ``tl.rand(seed, offset)``, the earlier
rewrite (``rand-offsets-uint32``: the offset's low 32 bits) and the current one (``rand-offsets-two-words``: both
32-bit words as Philox counter words, portable_spec/kernels/derive_rewrites.py). On 3.6 the two-word form must equal
vLLM's at every offset, the low word only below 2**32; on 3.2 the two-word form must draw 3.6's numbers."""
import json
import os

os.environ["TRITON_INTERPRET"] = "1"
import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402


@triton.jit
def draw(out, pos_ptr, seed, FORM: tl.constexpr):
    i = tl.program_id(0)
    pos = tl.load(pos_ptr + i)
    if FORM == 0:  # vLLM 0.26.0 (tl_rand32)
        u = tl.rand(seed, pos)
    elif FORM == 1:  # rand-offsets-uint32
        u = tl.rand(seed, pos.to(tl.uint32))
    else:  # rand-offsets-two-words, as derived
        u = tl.uint_to_uniform_float(tl.philox(seed, pos.to(tl.uint32), (pos >> 32).to(tl.uint32)
                                               if tl.constexpr(pos.dtype.primitive_bitwidth) > 32
                                               else pos.to(tl.uint32) * 0, pos.to(tl.uint32) * 0,
                                               pos.to(tl.uint32) * 0)[0])
    one = tl.zeros_like(u).to(tl.int32)  # 3.2's int64 path returns blocks of one: store them as such
    tl.store(out + i + one, u.to(tl.float64))


if __name__ == "__main__":
    pos = torch.tensor([0, 4095, 2**31 + 7, 2**32 - 1, 2**32, 2**32 + 3, 5 * 2**40 + 11, -1, -2**35 - 1],
                       dtype=torch.int64)
    result = {"triton": triton.__version__, "positions": pos.tolist()}
    for form, name in enumerate(("vllm tl.rand(int64)", "low word (rand-offsets-uint32)",
                                 "two words (rand-offsets-two-words)")):
        out = torch.zeros(len(pos), dtype=torch.float64)
        draw[(len(pos),)](out, pos, 987654321, FORM=form)
        result[name] = out.tolist()
    print(json.dumps(result))
