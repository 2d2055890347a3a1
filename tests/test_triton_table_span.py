"""The Triton 3.2 check's launch table on every vLLM of the span (issue 40 item 1): each row, with the changes it
states up to the installed vLLM applied (``KernelCase.at``), gives every parameter of that vLLM's kernel a type or a
value, so ``kernels --check-triton`` compiles each kernel with the signature this vLLM launches it with.

Also on each vLLM up to ``triton_table_mrv2.COVERED_THROUGH``: every kernel Model Runner V2 launches has a row or an
exclusion; and each row's request-index pointers have the type that vLLM builds idx_mapping and its copies with.
In ``tests/version_span.py``'s list: read from the installed vLLM's source, no import of vLLM or Triton."""

from __future__ import annotations

import ast
import dataclasses
import os

import numpy as np
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


def _names(case: KernelCase) -> set[str]:
    return set(case.signature) | set(case.constexprs)


def test_a_row_without_its_changes_misses_this_vllms_parameters():
    """The changes are needed: each row whose changes up to the installed vLLM add or drop a parameter or constexpr,
    stripped of its changes (vLLM 0.26.0's launch), fails the same check here (or names a module this vLLM no longer
    has). A change that only retypes parameters is held to vLLM's buffers by the request-index test below."""
    installed = version_gate.installed()
    changed = [c for c in VLLM_KERNELS if any(version_gate.parse(v) <= installed for v in c.changes)
               and _names(ROWS[c.key]) != _names(dataclasses.replace(c, changes={}))]
    if not changed:
        pytest.skip(f"vLLM {version_gate.installed_text()} launches every kernel as vLLM {BASE} does")
    for case in changed:
        with pytest.raises((AssertionError, FileNotFoundError)):
            check_against_vllm(dataclasses.replace(case, changes={}))


_GPU = "vllm/v1/worker/gpu"
REQUEST_INDEX_SOURCES = {  # a buffer of request indices -> (file, the name its construction assigns)
    "model runner": (f"{_GPU}/model_runner.py", "idx_mapping"),  # InputBatch.idx_mapping and all made from it
    "speculator copy": (f"{_GPU}/spec_decode/speculator.py", "self.idx_mapping"),  # copy_ casts into it
    "DFlash samples": (f"{_GPU}/spec_decode/dflash/speculator.py", "self.sample_idx_mapping"),
    "penalties list": (f"{_GPU}/sample/penalties.py", "idx_mapping"),  # the new requests' indices, for bincount
}
FED_BY_A_COPY = {  # row key -> parameter -> the source above it reads, where that is not the model runner's mapping
    "mrv2/block_table._compute_slot_mappings_kernel[draft]": {"idx_mapping": "speculator copy"},
    **{f"mrv2/sample.gumbel._gumbel_sample_kernel[draft{fp64}]": {"expanded_idx_mapping_ptr": "speculator copy"}
       for fp64 in ("", "-fp64")},
    **{f"mrv2/sample.gumbel._gumbel_sample_kernel[draft-per-token{fp64}]": {"expanded_idx_mapping_ptr":
                                                                              "DFlash samples"}
       for fp64 in ("", "-fp64")},
    "mrv2/sample.penalties._bincount_kernel": {"expanded_idx_mapping_ptr": "penalties list"},
    "mrv2/spec_decode.dflash.speculator._prepare_dflash_inputs_kernel": {"out_sample_idx_mapping_ptr":
                                                                         "DFlash samples"},
    **{f"mrv2/spec_decode.dflash2.speculator._selector_walk_kernel{variant}": {"req_state_ptr": "DFlash samples"}
       for variant in ("", "[greedy]", "[fp64]", "[greedy-fp64]")},
    "mrv2/spec_decode.dflash2.speculator._cache_draft_logits_kernel": {"req_state_ptr": "DFlash samples"},
    "mrv2/spec_decode.multi_module_mtp.speculator._cache_inputs_kernel": {"idx_mapping_ptr": "speculator copy"},
    "mrv2/spec_decode.multi_module_mtp.speculator._shift_input_ids_kernel": {"idx_mapping_ptr": "speculator copy"},
    # sample_draft's indices (a draft model's speculator)
    "mrv2/spec_decode.acceptance_estimator._local_max_sumexp_kernel": {"idx_mapping_ptr": "speculator copy"},
    "mrv2/spec_decode.acceptance_estimator._predict_kernel": {"idx_mapping_ptr": "speculator copy"},
}
_HOST_TO_DEVICE_COPIES = ("async_copy_to_gpu", "async_tensor_h2d")  # without a dtype: the array's own


def _constructed_pointer_type(path: str, name: str) -> str:
    """The Triton pointer type of what ``path`` (in the installed vLLM) assigns to ``name``: the ``dtype=`` of the call
    that builds it, or, for a host-to-device copy without one, the dtype of the array it copies (followed the same
    way). numpy resolves the dtype (``np.intp`` is this platform's pointer-sized int)."""
    tree = ast.parse(open(os.path.join(VLLM_ROOT, path), encoding="utf-8").read())
    builds = [n.value for n in ast.walk(tree) if isinstance(n, ast.Assign) and len(n.targets) == 1
              and ast.unparse(n.targets[0]) == name and isinstance(n.value, ast.Call)]
    assert len(builds) == 1, (path, name, [ast.unparse(b) for b in builds])
    call = builds[0]
    dtype = next((k.value for k in call.keywords if k.arg == "dtype"), None)
    if dtype is None:
        assert ast.unparse(call.func).rpartition(".")[2] in _HOST_TO_DEVICE_COPIES, (path, ast.unparse(call))
        assert isinstance(call.args[0], ast.Name), (path, ast.unparse(call))
        return _constructed_pointer_type(path, call.args[0].id)
    module, _, attr = ast.unparse(dtype).rpartition(".")
    assert module in ("torch", "np"), (path, ast.unparse(dtype))
    resolved = np.dtype(getattr(np, attr))
    assert resolved.kind == "i", (path, resolved)
    return f"*i{resolved.itemsize * 8}"


def _request_index_parameters(case: KernelCase) -> dict[str, str]:
    """The row's pointer parameters that hold request indices, each with the source it reads."""
    copies = FED_BY_A_COPY.get(case.key, {})
    named = {p for p, t in case.signature.items() if t.startswith("*")
             and ("idx_mapping" in p or p in ("batch_idx_to_req_idx", "req_ids_ptr"))}
    return {p: copies.get(p, "model runner") for p in named | set(copies)}


def test_each_rows_request_indices_have_the_type_this_vllm_builds_them_with():
    """idx_mapping and the buffers made from it or copied from it: int32 in vLLM 0.26.0, int64 from the model runner
    on in 0.28.0 and in the copies in 0.33.0. Each row's request-index pointer, at the installed vLLM, has the type
    that vLLM's source builds its buffer with (``REQUEST_INDEX_SOURCES``, followed through host-to-device copies), so
    the Triton 3.2 check compiles what this vLLM launches; every copy named in ``FED_BY_A_COPY`` is a parameter of its
    row."""
    built = {source: _constructed_pointer_type(*where) for source, where in REQUEST_INDEX_SOURCES.items()}
    keys = {c.key for c in VLLM_KERNELS}
    assert set(FED_BY_A_COPY) <= keys, set(FED_BY_A_COPY) - keys
    compared, wrong = 0, []
    for row in ROWS.values():
        for parameter, source in _request_index_parameters(row).items():
            assert parameter in row.signature, (row.key, parameter)
            compared += 1
            if row.signature[parameter] != built[source]:
                wrong.append((row.key, parameter, row.signature[parameter], f"{source}: {built[source]}"))
    # vLLM 0.26.0's rows alone hold 37: fewer means the names above no longer find them
    assert compared >= 30, f"only {compared} request-index parameters found on vLLM {version_gate.installed_text()}"
    assert not wrong, wrong


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
