"""The Triton 3.2 check's launch table on every vLLM of the span (issue 40 item 1): each row, with the changes it
states up to the installed vLLM applied (``KernelCase.at``), gives every parameter of that vLLM's kernel a type or a
value, so ``kernels --check-triton`` compiles each kernel with the signature this vLLM launches it with.

In ``tests/version_span.py``'s list: read from the installed vLLM's source, no import of vLLM or Triton."""

from __future__ import annotations

import dataclasses

import pytest
from kernel_rows import check_against_vllm

from portable_spec.kernels.triton_case import BASE, Change, KernelCase
from portable_spec.kernels.triton_table import VLLM_KERNELS, kernel_cases
from portable_spec.vllm_adapter.patch import version_gate

ROWS = {case.key: case for case in kernel_cases()}


@pytest.mark.parametrize("key", [c.key for c in VLLM_KERNELS])
def test_each_vllm_row_gives_every_parameter_of_this_vllms_kernel_a_type_or_a_value(key):
    """A row that misses a parameter, or types a constexpr, would not compile for reasons of its own; a vLLM that
    changes a kernel's parameters without a ``Change`` stating it fails here first."""
    check_against_vllm(ROWS[key])


def test_a_row_without_its_changes_misses_this_vllms_parameters():
    """The changes are needed: each row that states a change at or below the installed vLLM, stripped of its
    changes (vLLM 0.26.0's launch), fails the same check here (or names a module this vLLM no longer has)."""
    installed = version_gate.installed()
    changed = [c for c in VLLM_KERNELS if any(version_gate.parse(v) <= installed for v in c.changes)]
    if not changed:
        pytest.skip(f"vLLM {version_gate.installed_text()} launches every kernel as vLLM {BASE} does")
    for case in changed:
        with pytest.raises((AssertionError, FileNotFoundError)):
            check_against_vllm(dataclasses.replace(case, changes={}))


def test_every_change_names_a_later_version_of_the_span():
    later = set(version_gate.SPAN) - {BASE}
    assert all(set(c.changes) <= later for c in VLLM_KERNELS), [c.key for c in VLLM_KERNELS
                                                                  if not set(c.changes) <= later]
    assert sum(bool(c.changes) for c in VLLM_KERNELS) >= 20


def test_changes_apply_in_version_order_each_on_the_launch_before_it():
    row = KernelCase("k", "m:k", {"a": "*i32", "b": "i32"}, {"C": 1}, "here",
                     changes={"0.33.0": Change("d:i64", ("c",), dict(E=3), ref="m2:k", launched_at="there"),
                              "0.28.0": Change("c:*fp32", ("b",), dict(C=2), options=dict(num_warps=8))})

    def at(version: str) -> KernelCase:
        return row.at(lambda launches: version_gate.pick(launches, version_gate.parse(version)))

    assert at("0.26.0") == dataclasses.replace(row, changes={})
    assert (at("0.28.0").signature, at("0.28.0").constexprs) == ({"a": "*i32", "c": "*fp32"}, {"C": 2})
    newest = at("0.33.1")
    assert newest.signature == {"a": "*i32", "d": "i64"} and newest.constexprs == {"C": 2, "E": 3}
    assert (newest.ref, newest.launched_at, newest.options) == ("m2:k", "there", {"num_warps": 8})
    with pytest.raises(LookupError):
        at("0.25.0")
