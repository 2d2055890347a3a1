"""What older Triton front ends do with the constructs Model Runner V2's rejected kernels use (the evidence behind
the static rules "dtype-parameter-pointer" and "unsigned-division" and the rewrites in
portable_spec/kernels/derive_rewrites.py).

Run with interpreters that have triton==3.0.0 (PyPI; its front end predates triton-lang/triton PR #4412, as MUSA's
fork does: same error texts), triton==3.2.0 and the main Triton (3.6), PYTHONPATH at the repository root. Compiles
small kernels for sm_90 on CPU; each pair is vLLM's construct and the form our substitute uses.
"""

import inspect

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource


@triton.jit
def _load_ptr(ptr_to_ptr, elem_dtype):  # vLLM 0.26.0 v1/worker/gpu/buffer_utils.py:313
    return tl.cast(tl.load(ptr_to_ptr), tl.pointer_type(elem_dtype))


@triton.jit
def _load_ptr_int32(ptr_to_ptr, elem_dtype):  # portable_spec/kernels/load_ptr.py
    tl.static_assert(elem_dtype == tl.int32)
    return tl.cast(tl.load(ptr_to_ptr), tl.pointer_type(tl.int32))


@triton.jit
def dtype_parameter_pointer(ptrs, out):
    tl.store(_load_ptr(ptrs, tl.int32), tl.load(out))


@triton.jit
def literal_dtype_pointer(ptrs, out):
    tl.store(_load_ptr_int32(ptrs, tl.int32), tl.load(out))


@triton.jit
def uint32_floordiv_int(out, T: tl.constexpr):  # v1/sample/ops/topk_topp_triton.py:200
    n = tl.zeros((), dtype=tl.uint32)
    n += tl.load(out).to(tl.uint32)
    tl.store(out, tl.cast((n + T - 1) // T, tl.int32))


@triton.jit
def int32_floordiv_int(out, T: tl.constexpr):  # rewrite int32-unsigned-division
    n = tl.zeros((), dtype=tl.uint32)
    n += tl.load(out).to(tl.uint32)
    tl.store(out, tl.cast((n + T - 1).to(tl.int32) // T, tl.int32))


@triton.jit
def constexpr_and(out, none_ptr, FLAG: tl.constexpr):  # v1/worker/gpu/spec_decode/rejection_sampler_utils.py:535
    x = tl.load(out)
    if FLAG and x > 0:
        x = tl.load(none_ptr)
    tl.store(out, x)


@triton.jit
def constexpr_ifexp(out, none_ptr, FLAG: tl.constexpr):  # rewrite short-circuit-constexpr-and
    x = tl.load(out)
    if (x > 0) if FLAG else False:
        x = tl.load(none_ptr)
    tl.store(out, x)


@triton.jit
def rand_int64_offset(out, pos_ptr, seed):  # v1/worker/gpu/sample/gumbel.py:78, from the rejection kernel
    pos = tl.load(pos_ptr)
    u = tl.rand(seed, pos)
    if pos > 3:
        u = 0.5
    tl.store(out, u)


@triton.jit
def rand_uint32_offset(out, pos_ptr, seed):  # rewrite rand-offsets-uint32
    pos = tl.load(pos_ptr)
    u = tl.rand(seed, pos.to(tl.uint32))
    if pos > 3:
        u = 0.5
    tl.store(out, u)


@triton.jit
def select_then_if(out, n_ptr, k_ptr):  # v1/sample/ops/topk_topp_triton.py:375-377
    n = tl.load(n_ptr).to(tl.uint32)
    k = tl.load(k_ptr)
    pivot = 1.0 if n > k else -float("inf")
    if n > k:
        pivot = pivot + 2.0
    tl.store(out, pivot)


@triton.jit
def negated_select_then_if(out, n_ptr, k_ptr):  # rewrite flip-integer-ternary
    n = tl.load(n_ptr).to(tl.uint32)
    k = tl.load(k_ptr)
    pivot = -float("inf") if n <= k else 1.0
    if n > k:
        pivot = pivot + 2.0
    tl.store(out, pivot)


CASES = [
    (dtype_parameter_pointer, {"ptrs": "*u64", "out": "*i32"}, {}),
    (literal_dtype_pointer, {"ptrs": "*u64", "out": "*i32"}, {}),
    (uint32_floordiv_int, {"out": "*i32"}, {"T": 4096}),
    (int32_floordiv_int, {"out": "*i32"}, {"T": 4096}),
    (constexpr_and, {"out": "*i32", "none_ptr": "none"}, {"FLAG": False}),
    (constexpr_ifexp, {"out": "*i32", "none_ptr": "none"}, {"FLAG": False}),
    (rand_int64_offset, {"out": "*fp32", "pos_ptr": "*i64", "seed": "i64"}, {}),
    (rand_uint32_offset, {"out": "*fp32", "pos_ptr": "*i64", "seed": "i64"}, {}),
    (select_then_if, {"out": "*fp32", "n_ptr": "*i32", "k_ptr": "*i32"}, {}),
    (negated_select_then_if, {"out": "*fp32", "n_ptr": "*i32", "k_ptr": "*i32"}, {}),
]


def source(fn, sig, consts):
    params = inspect.signature(ASTSource.__init__).parameters
    names = list(fn.arg_names)
    if "constexprs" in params:  # 3.3+: the project's own form
        from portable_spec.kernels.triton_compile import ast_source

        return ast_source(fn, sig, consts)
    values = {**consts, **{n: None for n, t in sig.items() if t == "none"}}
    types = {n: ("*i8" if t == "none" else t) for n, t in sig.items()}
    if triton.__version__ >= "3.2":  # keyed by name
        return ASTSource(fn, types, constants=values)
    return ASTSource(fn, {names.index(n): t for n, t in types.items()},  # 3.0: keyed by parameter index
                     {names.index(n): v for n, v in values.items()})


def last_error(exc):
    while exc.__cause__ is not None:
        exc = exc.__cause__
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip() and ln.strip() != "^"]
    return f"{type(exc).__name__}: {lines[-1] if lines else ''}"


print("triton", triton.__version__)
for fn, sig, consts in CASES:
    try:
        triton.compile(source(fn, sig, consts), target=GPUTarget("cuda", 90, 32))
        print(f"  {fn.__name__}: ok")
    except Exception as exc:  # the compiler's error is the result
        print(f"  {fn.__name__}: rejected: {last_error(exc)[:160]}")
