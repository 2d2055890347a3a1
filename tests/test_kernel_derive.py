"""portable_spec.kernels.derive: substitutes derived from a kernel's own source by named, counted rewrites.

The synthetic kernels below carry exactly the constructs the rewrites remove; each test runs the original and the
derived kernel under the Triton interpreter (TRITON_INTERPRET=1, cpu lane) and compares their outputs."""

from __future__ import annotations

import ast
import inspect
import os

import pytest
import torch

triton = pytest.importorskip("triton")
import triton.language as tl  # noqa: E402

from portable_spec.kernels.derive import DERIVED_MODULE_PREFIX, REWRITES, DerivationError, derive  # noqa: E402

OFFSET = tl.constexpr(3)


@triton.jit
def _helper(x):
    return x + OFFSET


@triton.jit
def annotated(out_ptr, n, scale: int | None = None, FLAG: tl.constexpr = True, STEP: tl.constexpr = 2):
    left: tl.int32 = 0
    K: tl.constexpr = 4
    total: tl.int32 = n
    while left < total:
        left = left + STEP
    both = FLAG or (n > 0) or (n < -K)
    tl.store(out_ptr, _helper(left) + tl.where(both, 1, 0))


def _run(kernel, n: int) -> int:
    out = torch.zeros(1, dtype=torch.int32)
    kernel[(1,)](out, n)
    return int(out.item())


def _interpreted():
    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("needs TRITON_INTERPRET=1 (set by the cpu lane) to run Triton kernels on CPU")


def test_every_rewrite_changes_what_it_names_and_keeps_the_program():
    _interpreted()
    derived = derive(annotated, {"unannotate-parameters": 1, "unannotate-assignments": 2, "split-boolean-chains": 1})
    func = ast.parse(inspect.getsource(derived.fn)).body[0]
    assert not [n for n in ast.walk(func) if isinstance(n, ast.AnnAssign) and "constexpr" not in ast.unparse(n)]
    assert [a.arg for a in func.args.args if a.annotation is not None] == ["FLAG", "STEP"]  # constexprs kept
    assert all(len(n.values) == 2 for n in ast.walk(func) if isinstance(n, ast.BoolOp))
    assert [n for n in ast.walk(func) if isinstance(n, ast.AnnAssign)], "the constexpr assignment stays"
    for n in (0, 5, 8, -3):
        assert _run(derived, n) == _run(annotated, n), n


def test_derived_function_lives_in_the_originals_globals_under_our_module_name():
    """Helper calls resolve where the original's do (so helper substitutes bound there apply), while Triton's IR and
    hashes name the function as ours."""
    derived = derive(annotated, {"unannotate-assignments": 2})
    assert derived.fn.__globals__ is annotated.fn.__globals__
    assert derived.fn.__module__ == DERIVED_MODULE_PREFIX + __name__
    assert derived.fn.__portable_spec_derived_from__ == f"{__name__}:annotated"
    assert derived is not annotated and __name__ in derived.fn.__module__
    assert globals()["annotated"] is annotated  # deriving binds nothing


@pytest.mark.parametrize("rewrites, changed", [({"unannotate-assignments": 3}, 2),
                                               ({"split-boolean-chains": 0}, 1),
                                               ({"unannotate-parameters": 2}, 1)])
def test_a_count_mismatch_is_a_one_line_error_naming_the_fix(rewrites, changed):
    (name, expected), = rewrites.items()
    with pytest.raises(DerivationError) as err:
        derive(annotated, rewrites)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"{name} changed {changed} place(s) in {__name__}:annotated, expected {expected}")
    assert "pin vllm==0.26.0" in message


def test_an_unknown_rewrite_is_refused():
    with pytest.raises(DerivationError, match="unknown rewrite.*known: " + ", ".join(REWRITES)):
        derive(annotated, {"inline-everything": 1})


def test_a_plain_function_is_accepted_where_vllm_runs_without_triton():
    """vLLM replaces ``triton.jit`` by a pass-through when it finds no GPU driver: its kernels are plain functions."""
    derived = derive(annotated.fn, {"unannotate-assignments": 2})
    assert derived.fn.__portable_spec_derived_from__ == f"{__name__}:annotated"
