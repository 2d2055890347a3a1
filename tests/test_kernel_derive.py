"""portable_spec.kernels.derive: substitutes derived from a kernel's own source by named, counted rewrites.

The synthetic kernels below carry exactly the constructs the rewrites remove; each test runs the original and the
derived kernel under the Triton interpreter (TRITON_INTERPRET=1, cpu lane) and compares their outputs."""

from __future__ import annotations

import ast
import inspect
import os

import pytest
from lane_tools import import_triton, require_interpreter
import torch

triton = import_triton()
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
    require_interpreter()


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


@triton.jit
def constexpr_guards(out_ptr, x_ptr, FLAG: tl.constexpr, OTHER: tl.constexpr):
    x = tl.load(x_ptr)
    y = 0
    if FLAG and x > 0:
        y += 1
    if OTHER and x > 1 and x < 9:
        y += 10
    tl.store(out_ptr, y)


@triton.jit
def unsigned_counts(out_ptr, x_ptr, k_ptr, T: tl.constexpr):
    count = tl.zeros((), dtype=tl.uint32)
    count += tl.load(x_ptr).to(tl.uint32)
    k = tl.load(k_ptr)
    pivot = 1.5 if count > k else -2.5
    tl.store(out_ptr, tl.cast((count + T - 1) // T, tl.int32) * 100 + pivot.to(tl.int32))


@triton.jit
def draws(out_ptr, bits_ptr, seed, pos_ptr):
    pos = tl.load(pos_ptr)
    later = pos + 7
    tl.store(out_ptr, tl.rand(seed, pos))
    tl.store(bits_ptr, tl.randint(seed, later))


@triton.jit
def low_word_draws(out_ptr, bits_ptr, seed, pos_ptr):  # the form before rand-offsets-two-words: the low 32 bits only
    pos = tl.load(pos_ptr)
    later = pos + 7
    tl.store(out_ptr, tl.rand(seed, pos.to(tl.uint32)))
    tl.store(bits_ptr, tl.randint(seed, later.to(tl.uint32)))


def _draws(kernel, seed: int, pos: torch.Tensor) -> tuple[int, int]:
    """The kernel's uniform draw at ``pos`` (as its float32 bits) and its integer draw at ``pos + 7``."""
    out, bits = torch.zeros(1, dtype=torch.float32), torch.zeros(1, dtype=torch.int32)
    kernel[(1,)](out, bits, seed, pos)
    return int(out.view(torch.int32).item()), int(bits.item())


def _scalar(kernel, *args, dtype=torch.int32, **constexprs):
    out = torch.zeros(1, dtype=dtype)
    kernel[(1,)](out, *args, **constexprs)
    return out.item()


def test_short_circuit_turns_constexpr_ands_into_compile_time_choices():
    _interpreted()
    derived = derive(constexpr_guards, {"short-circuit-constexpr-and": 2})
    func = ast.parse(inspect.getsource(derived.fn)).body[0]
    tests = [ast.unparse(n.test) for n in ast.walk(func) if isinstance(n, ast.If)]
    assert tests == ["x > 0 if FLAG else False", "x > 1 and x < 9 if OTHER else False"]
    for flag in (False, True):
        for other in (False, True):
            for x in (0, 1, 5, 12):
                xs = torch.tensor([x], dtype=torch.int32)
                assert (_scalar(derived, xs, FLAG=flag, OTHER=other)
                        == _scalar(constexpr_guards, xs, FLAG=flag, OTHER=other)), (flag, other, x)


def test_unsigned_counts_divide_by_a_uint32_divisor_and_the_ternary_flips():
    _interpreted()
    derived = derive(unsigned_counts, {"unsigned-divisor": 1, "flip-integer-ternary": 1})
    source = inspect.getsource(derived.fn)
    assert "(count + T - 1) // tl.cast(T, tl.uint32)" in source and "-2.5 if count <= k else 1.5" in source
    for count, k in ((0, 0), (7, 3), (4096, 5000), (9000, 1), (2**31 + 5, 3)):
        args = (torch.tensor([count], dtype=torch.int64).to(torch.int32), torch.tensor([k], dtype=torch.int32))
        assert _scalar(derived, *args, T=4096) == _scalar(unsigned_counts, *args, T=4096), (count, k)


@pytest.mark.parametrize("dtype, seed, pos", [
    (torch.int64, 0, 0), (torch.int64, 12345, 4095), (torch.int64, -2**40, 2**31 + 5),
    (torch.int64, 7, 2**32 + 3), (torch.int64, 99, 5 * 2**40 + 11), (torch.int64, -3, -2**35 - 1),
    (torch.int64, 11, -1), (torch.int32, 5, -9), (torch.int32, 5, 2**31 - 8)])
def test_random_offsets_pass_both_32_bit_words_and_draw_the_same_numbers(dtype, seed, pos):
    """Triton >= 3.3 (the interpreter's) draws from an int64 offset's two 32-bit halves as Philox counter words (an
    int32 offset: its bits and a zero word); the derived draw passes both explicitly, so it matches at every offset.
    The low word alone (the earlier form) matches below 2**32 only."""
    _interpreted()
    derived = derive(draws, {"rand-offsets-two-words": 2})
    source = inspect.getsource(derived.fn)
    assert source.count("tl.philox(") == 2 and "tl.rand(" not in source and "tl.randint(" not in source
    p = torch.tensor([pos], dtype=dtype)
    shipped = _draws(draws, seed, p)
    assert _draws(derived, seed, p) == shipped, (seed, pos)
    low = _draws(low_word_draws, seed, p)
    high_words = [dtype == torch.int64 and not 0 <= offset < 2**32 for offset in (pos, pos + 7)]
    assert [a != b for a, b in zip(low, shipped)] == high_words, (seed, pos, low, shipped)


@triton.jit
def four_word_draws(words_ptr, seed, pos_ptr):
    pos = tl.load(pos_ptr)
    w0, w1, w2, w3 = tl.randint4x(seed, pos)
    tl.store(words_ptr, w0.to(tl.uint32, bitcast=True).to(tl.int64))
    tl.store(words_ptr + 1, w1.to(tl.uint32, bitcast=True).to(tl.int64))
    tl.store(words_ptr + 2, w2.to(tl.uint32, bitcast=True).to(tl.int64))
    tl.store(words_ptr + 3, w3.to(tl.uint32, bitcast=True).to(tl.int64))


@pytest.mark.parametrize("dtype, seed, pos", [
    (torch.int64, 12345, 4095), (torch.int64, -2**40, 2**31 + 5), (torch.int64, 7, 2**32 + 3),
    (torch.int64, -3, -2**35 - 1), (torch.int32, 5, -9)])
def test_randint4x_passes_both_32_bit_words_and_returns_the_same_four_words(dtype, seed, pos):
    """``tl.randint4x`` (vLLM's fp64 Gumbel draw, ``tl_rand64``) is rewritten to the same Philox call with all four
    results: the interpreter's (Triton >= 3.3) four 32-bit words at every offset, int64 ones past 2**32 included."""
    _interpreted()
    derived = derive(four_word_draws, {"rand-offsets-two-words": 1})
    source = inspect.getsource(derived.fn)
    assert source.count("tl.philox(") == 1 and "tl.randint4x(" not in source and ")[0]" not in source

    def words(kernel):
        out = torch.zeros(4, dtype=torch.int64)
        kernel[(1,)](out, seed, torch.tensor([pos], dtype=dtype))
        return out.tolist()

    assert words(derived) == words(four_word_draws), (seed, pos)


def test_a_random_offset_that_is_an_expression_is_not_rewritten():
    """The offset is read five times in the two-word form: only a plain name is rewritten (else the count fails)."""
    with pytest.raises(DerivationError, match="rand-offsets-two-words changed 0 place"):
        derive(low_word_draws, {"rand-offsets-two-words": 2})


@triton.jit
def branch_pointers(out_ptr, a_ptr, b_ptr, n_ptr, N: tl.constexpr, FLAG: tl.constexpr):
    n = tl.load(n_ptr)
    col = tl.arange(0, 8)
    if n > 0:  # run-time: rewritten
        src = a_ptr + 1
        valid = col < n
    else:
        src = b_ptr
        valid = col < N
    if FLAG:  # constexpr: left alone
        src = src + 0
    else:
        src = src + 0
    if n > 5:  # loads in a branch: left alone
        x = tl.load(a_ptr)
    else:
        x = tl.load(b_ptr)
    tl.store(out_ptr + col, tl.load(src + col, mask=valid, other=-1) + x)


def test_values_chosen_in_a_run_time_branch_become_selects_with_the_same_outputs():
    """Only the run-time ``if`` whose branches assign call-free values is rewritten; the kernel writes the same."""
    _interpreted()
    derived = derive(branch_pointers, {"branch-values-to-where": 1})
    source = inspect.getsource(derived.fn)
    assert "src = tl.where(n > 0, a_ptr + 1, b_ptr)" in source and "valid = tl.where(n > 0, col < n, col < N)" in source
    assert "if FLAG:" in source and "x = tl.load(a_ptr)" in source
    a, b = torch.arange(100, 116, dtype=torch.int32), torch.arange(200, 216, dtype=torch.int32)
    for n in (0, 3, 7):
        outs = []
        for kernel in (branch_pointers, derived):
            out = torch.zeros(8, dtype=torch.int32)
            kernel[(1,)](out, a, b, torch.tensor([n], dtype=torch.int32), N=5, FLAG=True)
            outs.append(out)
        assert torch.equal(*outs), (n, outs)


@triton.jit
def branch_without_else(out_ptr, x_ptr, t_ptr, n_ptr, seed, pos, FLAG: tl.constexpr):
    col = tl.arange(0, 8)
    x = tl.load(x_ptr + col)
    t = tl.load(t_ptr)
    n = tl.load(n_ptr)
    mask = col < n
    if t != 0.0 and FLAG:  # run-time and constexpr operands: rewritten under 'if FLAG:'
        x = x / t
    if t != 0.0:  # a pure draw into the branch's own names, then the masked add: rewritten
        bits = tl.randint(seed, pos + col)
        if FLAG:
            noise = tl.uint_to_uniform_float(bits)
        else:
            noise = tl.uint_to_uniform_float(bits) * 2.0
        x = tl.where(mask, x + noise, float("-inf"))
    if FLAG:  # constexpr: left alone
        x = x + 1.0
    if n > 5:  # a store in the branch: left alone
        tl.store(out_ptr + 8 + col, x)
    tl.store(out_ptr + col, x)


@triton.jit
def guarded_load(out_ptr, x_ptr, t):
    y = 0.0
    if t != 0.0:
        y = tl.load(x_ptr)
    tl.store(out_ptr, y)


@triton.jit
def branch_reassigns_its_condition(out_ptr, n):
    y = 0
    if n > 0:
        n = n - 1
        y = n
    tl.store(out_ptr, y + n)


@triton.jit
def unknown_helper_in_branch(out_ptr, t):
    y = 0.0
    if t != 0.0:
        y = _helper(t)
    tl.store(out_ptr, y)


def _branch_without_else(kernel, t: float, n: int, flag: bool) -> torch.Tensor:
    out = torch.zeros(16)
    x = torch.arange(8, dtype=torch.float32) - 3.5
    kernel[(1,)](out, x, torch.tensor([t]), torch.tensor([n], dtype=torch.int32), 1234, 7, FLAG=flag)
    return out


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")  # t = 0.0: the select discards x / t
def test_an_if_without_else_becomes_selects_with_the_branch_temporaries_run_unconditionally():
    """``if-to-where``: both run-time ``if``s without ``else`` are rewritten (counted 2), a constexpr operand of the
    ``and`` stays a compile-time ``if``, the draw runs unconditionally; the constexpr ``if`` and the ``if`` with a
    store are left alone. The kernel writes the same bits with and without the branches taken."""
    _interpreted()
    derived = derive(branch_without_else, {"if-to-where": 2})
    source = inspect.getsource(derived.fn)
    assert "if FLAG:\n        x = tl.where(t != 0.0, x / t, x)" in source, source
    assert "\n    bits = tl.randint(seed, pos + col)" in source, source
    assert "x = tl.where(t != 0.0, tl.where(mask, x + noise, float('-inf')), x)" in source, source
    assert "noise = tl.where" not in source and "bits = tl.where" not in source, source  # the branch's own names
    assert "if n > 5:\n        tl.store" in source, source
    compared = 0
    for t, n, flag in ((0.0, 3, True), (0.7, 3, True), (0.7, 8, False), (-2.0, 6, True), (0.0, 6, False)):
        shipped, ours = _branch_without_else(branch_without_else, t, n, flag), _branch_without_else(derived, t, n, flag)
        assert torch.equal(shipped.view(torch.int32), ours.view(torch.int32)), (t, n, flag, shipped, ours)
        compared += shipped.numel()
    assert compared == 80


@pytest.mark.parametrize("kernel, refusal", [
    (guarded_load, r"'if t != 0.0:' calls tl.load, not known to be side-effect free"),
    (unknown_helper_in_branch, r"'if t != 0.0:' calls _helper, not known"),
    (branch_reassigns_its_condition, r"'if n > 0:' assigns n, which its condition reads"),
])
def test_an_if_whose_body_cannot_run_unconditionally_is_refused(kernel, refusal):
    with pytest.raises(DerivationError, match=refusal):
        derive(kernel, {"if-to-where": 1})


def test_an_if_to_where_count_of_zero_where_one_is_expected_fails():
    with pytest.raises(DerivationError, match="if-to-where changed 0 place"):
        derive(annotated, {"if-to-where": 1})
