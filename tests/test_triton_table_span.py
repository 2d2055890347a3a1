"""The Triton 3.2 check's launch table on every vLLM of the span (issue 40 item 1): each row, with the changes it
states up to the installed vLLM applied (``KernelCase.at``), gives every parameter of that vLLM's kernel a type or a
value, so ``kernels --check-triton`` compiles each kernel with the signature this vLLM launches it with.

Also on each vLLM up to ``triton_table_mrv2.COVERED_THROUGH``: every kernel Model Runner V2 launches has a row or an
exclusion. In ``tests/version_span.py``'s list: read from the installed vLLM's source, no import of vLLM or Triton."""

from __future__ import annotations

import dataclasses
import os

import pytest
from kernel_rows import MRV2_ROOT, VLLM_ROOT, check_against_vllm, launched_jit_kernels

from portable_spec.kernels.triton_case import BASE, Change, KernelCase, launched
from portable_spec.kernels.triton_table import VLLM_KERNELS, kernel_cases
from portable_spec.kernels.triton_table_mrv2 import COVERED_THROUGH, EXCLUDED, EXCLUDED_SINCE
from portable_spec.vllm_adapter.patch import version_gate

ROWS = {case.key: case for case in kernel_cases()}  # this vLLM's launches, without the rows of newer kernels


@pytest.mark.parametrize("key", [c.key for c in VLLM_KERNELS if c.key in ROWS])
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
    """A row starts at a version of the span (``since``) and each change names a later one."""
    def fits(c: KernelCase) -> bool:
        return c.since in version_gate.SPAN and all(
            v in version_gate.SPAN and version_gate.parse(v) > version_gate.parse(c.since) for v in c.changes)

    assert all(fits(c) for c in VLLM_KERNELS), [c.key for c in VLLM_KERNELS if not fits(c)]
    assert sum(bool(c.changes) for c in VLLM_KERNELS) >= 20


def test_each_row_stated_at_this_vllm_names_the_line_that_launches_it():
    """A row's ``launched_at`` names the line of the vLLM that stated it (the row's ``since``, or a change that moved
    the launch); where that vLLM is the installed one, that line launches the row's kernel."""
    installed = version_gate.installed()
    checked = 0
    for row in VLLM_KERNELS:
        stated = {row.since: row.launched_at, **{v: c.launched_at for v, c in row.changes.items() if c.launched_at}}
        for version, where in stated.items():
            if version_gate.parse(version) == installed:
                path, _, line = where.split()[0].partition(":")
                text = open(os.path.join(VLLM_ROOT, path), encoding="utf-8").read().splitlines()[int(line) - 1]
                assert f"{ROWS[row.key].attr}[" in text, (row.key, where, text)
                checked += 1
    assert checked, f"no row states vLLM {version_gate.installed_text()}'s launch line"


def test_the_table_covers_every_kernel_model_runner_v2_launches():
    """Every ``@triton.jit`` kernel this vLLM's Model Runner V2 launches (``vllm/v1/worker/gpu/``, read from the
    source) has a row as this vLLM launches it, or is in ``EXCLUDED`` with why no dense serving launches it; a new MRV2
    kernel fails here. No exclusion is stale (each names a kernel this vLLM launches, unless it is newer than this
    vLLM: ``EXCLUDED_SINCE``), none has a row, and the top-k/top-p op MRV2 calls from the V1 sampler has rows too."""
    if version_gate.installed() > version_gate.parse(COVERED_THROUGH):
        pytest.skip(f"the table covers Model Runner V2's kernels up to vLLM {COVERED_THROUGH} "
                    "(triton_table_mrv2.COVERED_THROUGH says why)")
    refs = {c.ref for c in ROWS.values()}
    kernels = launched_jit_kernels(MRV2_ROOT)
    assert len(kernels) >= 35, sorted(kernels)  # the walk found MRV2
    missing = sorted(set(kernels) - refs - set(EXCLUDED))
    assert not missing, f"MRV2 kernels with no row in portable_spec/kernels/triton_table_mrv2.py: {missing}"
    assert "vllm.v1.sample.ops.topk_topp_triton:_topk_topp_kernel" in refs
    assert "vllm.v1.worker.utils:_zero_kv_blocks_kernel" in EXCLUDED
    here = [k for k in EXCLUDED if launched(EXCLUDED_SINCE.get(k, BASE), version_gate.pick)]
    stale = [k for k in here if k not in kernels and k != "vllm.v1.worker.utils:_zero_kv_blocks_kernel"]
    assert not stale and all(why for why in EXCLUDED.values()), stale
    assert not set(EXCLUDED) & refs


def test_a_row_new_in_a_later_vllm_is_absent_below_it_and_starts_from_its_own_launch():
    row = KernelCase("k", "m:k", {"a": "*i32"}, {}, "here", since="0.28.0",
                     changes={"0.33.0": Change("b:i64", ref="m2:k")})

    def at(version: str) -> KernelCase | None:
        return row.at(lambda launches: version_gate.pick(launches, version_gate.parse(version)))

    assert at("0.26.0") is None and at("0.27.9") is None
    assert at("0.28.0") == dataclasses.replace(row, changes={})
    assert (at("0.33.0").signature, at("0.33.0").ref) == ({"a": "*i32", "b": "i64"}, "m2:k")
    assert not launched("0.28.0", lambda v: version_gate.pick(v, (0, 26, 0)))
    assert launched(BASE, lambda v: version_gate.pick(v, (0, 26, 0)))


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
