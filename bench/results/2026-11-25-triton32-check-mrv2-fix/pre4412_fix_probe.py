"""The two reworked rewrites as small kernels, compiled for sm_90 on a CPU by triton 3.0.0 (its front end predates
triton-lang/triton PR #4412, as MUSA's fork does), 3.2.0 and the main Triton (3.6): each must compile on all three.

- ``unsigned-divisor``: ``(n + T - 1) // tl.cast(T, tl.uint32)`` on a uint32 count (vLLM's ``// T`` is refused by
  3.0.0: ``../2026-11-25-triton32-check-mrv2/pre4412_mrv2_probe.txt``, ``uint32_floordiv_int``).
- ``rand-offsets-two-words``: ``tl.philox`` with an int64 offset's two 32-bit words, drawn in a branch whose other
  side assigns a scalar (vLLM's ``tl.rand(seed, int64)`` there is refused by 3.0.0 and 3.2.0: the same file,
  ``rand_int64_offset``), and on an int32 offset.

Run with an interpreter that has that Triton, PYTHONPATH at the repository root (3.0.0 needs nothing but triton).
"""

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from portable_spec.kernels.triton_compile import first_error_line


@triton.jit
def uint32_floordiv_uint32(out, T: tl.constexpr):  # rewrite unsigned-divisor
    n = tl.zeros((), dtype=tl.uint32)
    n += tl.load(out).to(tl.uint32)
    tl.store(out, tl.cast((n + T - 1) // tl.cast(T, tl.uint32), tl.int32))


@triton.jit
def two_word_rand(seed, pos):  # rewrite rand-offsets-two-words: tl.rand(seed, pos) as derived
    lo = pos.to(tl.uint32)
    hi = (pos >> 32).to(tl.uint32) if tl.constexpr(pos.dtype.primitive_bitwidth) > 32 else pos.to(tl.uint32) * 0
    return tl.uint_to_uniform_float(tl.philox(seed, lo, hi, pos.to(tl.uint32) * 0, pos.to(tl.uint32) * 0)[0])


@triton.jit
def rand_two_words(out, pos_ptr, seed):  # int64 offset, in a branch against a scalar
    pos = tl.load(pos_ptr)
    u = two_word_rand(seed, pos)
    if pos > 3:
        u = 0.5
    tl.store(out, u)


@triton.jit
def rand_two_words_int32(out, pos_ptr, seed):  # the same on an int32 offset (gumbel's vocabulary block)
    tl.store(out, two_word_rand(seed, tl.load(pos_ptr)))


CASES = [
    (uint32_floordiv_uint32, {"out": "*i32"}, {"T": 4096}),
    (rand_two_words, {"out": "*fp32", "pos_ptr": "*i64", "seed": "i64"}, {}),
    (rand_two_words_int32, {"out": "*fp32", "pos_ptr": "*i32", "seed": "i64"}, {}),
]


def source(fn, sig, consts):
    if triton.__version__ >= "3.2":  # the project's own form (it takes 3.2 and later)
        from portable_spec.kernels.triton_compile import ast_source

        return ast_source(fn, sig, consts)
    names = list(fn.arg_names)  # 3.0: keyed by parameter index
    return ASTSource(fn, {names.index(n): t for n, t in sig.items()}, {names.index(n): v for n, v in consts.items()})


if __name__ == "__main__":
    print("triton", triton.__version__)
    for fn, sig, consts in CASES:
        try:
            triton.compile(source(fn, sig, consts), target=GPUTarget("cuda", 90, 32))
            print(f"  {fn.__name__}: ok")
        except Exception as exc:  # the compiler's error is the result
            print(f"  {fn.__name__}: rejected: {first_error_line(exc)[:160]}")
