"""The MUSA substitutes of TRITON_ATTN's kernels against vLLM 0.26.0's own, on CPU.

What is compared: vLLM's real Triton objects (Triton switched back on in a child process, see
``substitute_children.py``) run by the Triton interpreter as vLLM ships them, and again with our substitutes bound
through the registry; also both against the float32 torch reference of ``attention_caps.reference``. And, with
Triton's real front end (no interpreter), which helper functions the compiled IR of vLLM's kernels calls."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from lane_tools import import_triton, require_interpreter

import_triton()


def _children(names: tuple[str, ...], interpret: bool) -> dict:
    """The children ``names`` run in one process (one import of vLLM for all): name -> its report."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(VLLM_LOGGING_STREAM="ext://sys.stderr", VLLM_PLUGINS="",
               PYTHONPATH=os.pathsep.join(p for p in (os.path.dirname(os.path.dirname(__file__)),
                                                      env.get("PYTHONPATH", "")) if p))
    if interpret:
        require_interpreter()
        env["TRITON_INTERPRET"] = "1"
    proc = subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "substitute_children.py"), *names],
                          capture_output=True, text=True, env=env, timeout=600)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    return json.loads(lines[-1])


@pytest.fixture(scope="module")
def interpreted() -> dict:
    """The two interpreter children, in one process."""
    return _children(("unified_attention", "find_seq_idx"), interpret=True)


def test_unified_attention_with_substitutes_is_bitwise_vllms_on_random_and_padded_batches(interpreted):
    """2D verify batches with zero-length query rows, a non-causal DFlash block, the 3D split-softmax decode path
    (reduce_segments) and random shapes, each with trailing graph-padding requests (no queries, no K/V):
    the substituted path (derived kernel + derived helpers + stand-ins) gives vLLM's output bit for bit, and both
    match the torch reference (float32 tolerance)."""
    report = interpreted["unified_attention"]
    assert report["derived_kernel"] == "portable_spec.derived.vllm.v1.attention.ops.triton_unified_attention"
    assert len(report["cases"]) == 6
    for name, case in report["cases"].items():
        assert case["rows"] > 0 and case["bitwise_equal"], name
        assert case["vs_reference"] and case["vllm_vs_reference"], name


def test_find_seq_idx_substitute_matches_vllms_on_prefixes_with_zero_length_rows(interpreted):
    """Integer lookups, both search modes (q-block units for the attention kernel, raw tokens for
    reduce_segments), every target from -1 past the last block: vLLM's helper and ours agree exactly, and both
    equal a plain-Python statement of the search."""
    trials = interpreted["find_seq_idx"]["trials"]
    assert len(trials) == 6 and all(t["zero_rows"] > 0 for t in trials)
    assert all(t["equal"] and t["reference"] for t in trials), trials


def test_the_compiled_kernels_call_the_bound_substitutes():
    """Triton 3.6 resolves a helper in the calling kernel's module globals when it builds the IR, and memoizes the
    kernel's hash: with substitutes bound, ``reduce_segments`` (vLLM's, not replaced) calls our derived
    ``find_seq_idx`` and its hash changes; the replaced ``kernel_unified_attention`` calls our derived
    ``compute_tile_loop_bounds`` too; after ``uninstall`` the hash and the IR are vLLM's again."""
    out = _children(("compiled_helpers",), interpret=False)["compiled_helpers"]
    vllm_find = "vllm.v1.attention.ops.triton_attention_helpers.find_seq_idx"
    ours = "portable_spec.derived." + vllm_find
    (key_before, before), (key_bound, bound), (key_after, after) = out["before"], out["bound"], out["after"]
    assert vllm_find in before and ours not in before
    assert ours in bound and vllm_find not in bound and key_bound != key_before
    assert (key_after, after) == (key_before, before)
    _, kernel_calls = out["kernel"]
    assert ours in kernel_calls and vllm_find not in kernel_calls
    assert ours.replace("find_seq_idx", "compute_tile_loop_bounds") in kernel_calls
    assert out["kernel_object"] == "portable_spec.derived.vllm.v1.attention.ops.triton_unified_attention"
