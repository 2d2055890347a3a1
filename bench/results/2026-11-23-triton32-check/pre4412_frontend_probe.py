"""Which annotated forms a pre-#4412 Triton front end rejects (the evidence behind the static rule
"annotated-assignment" in portable_spec/kernels/triton_rules.py).

Run with an interpreter that has triton==3.0.0 (PyPI; its front end predates triton-lang/triton PR #4412, as MUSA's
fork does: same error text) and with one that has triton==3.2.0. Compiles four two-line kernels for sm_90 on CPU.
"""

import inspect

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource


@triton.jit
def ann_int(out_ptr, n):
    left: tl.int32 = 0
    tl.store(out_ptr, left + n)


@triton.jit
def ann_constexpr(out_ptr, n):
    X: tl.constexpr = 3
    tl.store(out_ptr, X + n)


@triton.jit
def param_typed_default(out_ptr, n, s: int = 1):
    tl.store(out_ptr, n)


@triton.jit
def param_constexpr_default(out_ptr, n, S: tl.constexpr = 4):
    tl.store(out_ptr, n + S)


CASES = [(ann_int, {}, {}), (ann_constexpr, {}, {}), (param_typed_default, {"s": "i32"}, {}),
         (param_constexpr_default, {}, {"S": 4})]
by_name = "constants" in inspect.signature(ASTSource.__init__).parameters and triton.__version__ >= "3.2"
print("triton", triton.__version__)
for fn, extra_sig, consts in CASES:
    sig = {"out_ptr": "*i32", "n": "i32", **extra_sig}
    if not by_name:  # triton 3.0 keys the signature and constants by parameter index
        sig = {fn.arg_names.index(k): v for k, v in sig.items()}
        consts = {fn.arg_names.index(k): v for k, v in consts.items()}
    try:
        triton.compile(ASTSource(fn, sig, consts), target=GPUTarget("cuda", 90, 32))
        print(f"{fn.__name__}: ok")
    except Exception as exc:
        print(f"{fn.__name__}: rejected: {str(exc).strip().splitlines()[-1]}")
