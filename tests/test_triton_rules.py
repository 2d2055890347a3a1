"""portable_spec.kernels.triton_rules: the static MUSA rules on synthetic kernels that carry (or avoid) each
construct, including through helpers resolved in the calling module's globals, as Triton resolves them."""

from __future__ import annotations

import sys

import pytest
from lane_tools import import_triton

triton = import_triton()
import triton.language as tl  # noqa: E402

from portable_spec.kernels import triton_rules  # noqa: E402
from portable_spec.kernels.triton_rules import RULES, scan  # noqa: E402


@triton.jit
def clean(out_ptr, n, BLOCK: tl.constexpr = 4):
    X: tl.constexpr = 2
    tl.store(out_ptr, n + X + BLOCK)


@triton.jit
def annotated_local(out_ptr, n):
    left: tl.int32 = 0
    tl.store(out_ptr, left + n)


@triton.jit
def annotated_param(out_ptr, n, stride: int | None = None):
    tl.store(out_ptr, n)


@triton.jit
def pdl(out_ptr, n):
    tl.extra.cuda.gdc_wait()
    tl.store(out_ptr, n)


@triton.jit
def descriptor(out_ptr, n, USE_TD: tl.constexpr):
    if USE_TD:
        desc = tl.make_tensor_descriptor(out_ptr, shape=(n,), strides=(1,), block_shape=(16,))
        desc.store([0], tl.zeros((16,), tl.int32))


@triton.jit
def guarded_descriptor(out_ptr, n):
    if hasattr(tl, "make_tensor_descriptor"):
        desc = tl.make_tensor_descriptor(out_ptr, shape=(n,), strides=(1,), block_shape=(16,))
        desc.store([0], tl.zeros((16,), tl.int32))


@triton.jit
def helper(x):
    y: tl.int32 = x
    return y


@triton.jit
def caller(out_ptr, n):
    tl.store(out_ptr, helper(n))


@triton.jit
def caller_of_caller(out_ptr, n):
    caller(out_ptr, n)


@triton.jit
def clean_helper(x):
    return x


@triton.jit
def _load_ptr(ptr_to_ptr, elem_dtype):
    return tl.load(ptr_to_ptr).to(tl.pointer_type(elem_dtype))


@triton.jit
def pointer_table(ptrs, out_ptr, MULTI: tl.constexpr):
    if MULTI:
        tl.store(_load_ptr(ptrs, tl.int32), tl.load(out_ptr))
    else:
        tl.store(out_ptr, 0)


@triton.jit
def unsigned_division(out_ptr, T: tl.constexpr):
    count = tl.zeros((), dtype=tl.uint32)
    count += tl.load(out_ptr).to(tl.uint32)
    tl.store(out_ptr, ((count + T - 1) // T).to(tl.int32))


@triton.jit
def signed_division(out_ptr, T: tl.constexpr):
    count = tl.zeros((), dtype=tl.uint32)
    count += tl.load(out_ptr).to(tl.uint32)
    both_unsigned = count // count
    unsigned_divisor = (count + T - 1) // tl.cast(T, tl.uint32)  # the unsigned-divisor rewrite's form
    tl.store(out_ptr, (count + T - 1).to(tl.int32) // T + both_unsigned.to(tl.int32) + unsigned_divisor.to(tl.int32))


@pytest.mark.parametrize("kernel, rule, code", [
    (annotated_local, "annotated-assignment", "left: tl.int32 = 0"),
    (annotated_param, "annotated-assignment", "parameter stride: int | None = None"),
    (pdl, "tl-extra-cuda", "tl.extra.cuda.gdc_wait"),
    (descriptor, "tensor-descriptor", "tl.make_tensor_descriptor"),
    (unsigned_division, "unsigned-division", "(count + T - 1) // T"),
])
def test_each_rule_rejects_its_construct_and_says_where(kernel, rule, code):
    result = scan(kernel)
    assert result.rejected and [f.rule for f in result.findings] == [rule]
    line = result.findings[0].line()
    assert line.startswith(f"{rule}: {__name__}.{kernel.fn.__name__} (")
    assert "test_triton_rules.py:" in line and code in line
    assert rule in RULES and RULES[rule].evidence


def test_constexpr_annotations_and_guarded_descriptors_pass_as_notes_or_silently():
    """Constexpr annotations take Triton's constexpr path before the annotated-assignment bug (measured on 3.0.0);
    a descriptor under a hasattr guard is what musa-rocm-notes section 5 recommends."""
    result = scan(clean)
    assert not result.rejected
    assert sorted(n.code for n in result.notes) == ["X: tl.constexpr = 2", "parameter BLOCK: tl.constexpr = 4"]
    assert not scan(guarded_descriptor).rejected


def test_a_helpers_rejection_rejects_every_caller_with_the_chain():
    result = scan(caller_of_caller)
    assert [f.line().split(": ", 1)[1] for f in result.findings] == [
        f"{__name__}.helper (test_triton_rules.py:{helper.fn.__code__.co_firstlineno + 2}) via caller -> "
        "helper: y: tl.int32 = x"]
    assert result.helpers == [f"{__name__}.caller", f"{__name__}.helper"]


def test_helpers_resolve_in_the_callers_module_globals_at_scan_time(monkeypatch):
    """Binding a clean helper under the caller's global name is what a helper substitute does: the caller passes."""
    assert scan(caller).rejected
    monkeypatch.setitem(vars(sys.modules[__name__]), "helper", clean_helper)
    after = scan(caller)
    assert not after.rejected and after.helpers == [f"{__name__}.clean_helper"]


def test_tritons_own_library_is_not_followed():
    """``tl.sum`` and friends are part of the compiler under test (MUSA's fork ships its own)."""
    @triton.jit
    def reduces(out_ptr):
        tl.store(out_ptr, tl.sum(tl.arange(0, 4), axis=0))

    assert scan(reduces).helpers == [] and not scan(reduces).rejected
    assert triton_rules.is_jit_function(reduces) and not triton_rules.is_jit_function(reduces.fn)


def test_rule_evidence_cites_nothing_outside_the_repository():
    """A user reads the evidence in ``kernels --check-triton``: it names public sources or files in this repo, never
    the developers' reference notes (which ship with neither)."""
    from pathlib import Path

    from portable_spec.kernels.triton_rules import RULES

    repo = Path(__file__).resolve().parents[1]
    assert RULES
    for rule in RULES.values():
        assert "musa-rocm-notes" not in rule.evidence and "/work/" not in rule.evidence, rule.name
        for word in rule.evidence.replace(",", " ").replace(";", " ").split():
            if word.startswith(("bench/", "portable_spec/", "docs/")):
                assert (repo / word.rstrip(").")).exists(), (rule.name, word)


def test_a_dtype_parameter_in_pointer_type_is_rejected_in_live_code_only():
    """``tl.pointer_type(elem_dtype)`` fails in front ends before 3.2 only when the code generator reaches it: with
    the launch's constexprs making the call dead (``MULTI=False``) the helper is checked by the hash-time rules
    alone; without constexprs, or with ``MULTI=True``, it is live."""
    for constexprs in (None, {"MULTI": True}):
        result = scan(pointer_table, constexprs)
        assert [f.rule for f in result.findings] == ["dtype-parameter-pointer"], constexprs
        assert "via _load_ptr: tl.pointer_type(elem_dtype)" in result.findings[0].line()
    dead = scan(pointer_table, {"MULTI": False})
    assert not dead.rejected and dead.helpers == [f"{__name__}._load_ptr"]


def test_hash_time_rules_hold_in_dead_branches():
    """Triton resolves ``tl.*`` attributes while hashing, dead branches included: a descriptor under a constexpr
    that is False at this launch still rejects."""
    assert [f.rule for f in scan(descriptor, {"USE_TD": False}).findings] == ["tensor-descriptor"]
    assert RULES["tensor-descriptor"].when == RULES["tl-extra-cuda"].when == "hash"
    assert {r.when for r in RULES.values()} == {"hash", "compile"}


def test_division_of_an_unsigned_count_cast_to_signed_or_by_an_unsigned_value_passes():
    assert not scan(signed_division).rejected
