"""Our ROCm platform class against vLLM's own ``RocmPlatform``, at config level, with vLLM's real classes on a stand-in
MI300 (gfx942) and MI250 (gfx90a) (``tests/rocm_platform_decisions.py``, a process per arch): the attention
backend per dtype, head size and KV-cache dtype with the graph support it declares, cudagraph support, custom
all-reduce, the fp8 dtype, the device capability. Where ours differs (the graph pool) a test says why. Runs on every
vLLM of the span (``tests/version_span.py``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import rocm_platform_decisions as decisions
from forked_children import run_forked

from portable_spec.kernels.triton_table_rocm import SERVED

ARCHES = {"hip:gfx942": "gfx942:sramecc+:xnack-", "hip:gfx90a": "gfx90a:sramecc+:xnack-"}
_FP8_TRITON = {"torch.float8_e4m3fnuz": "fp8e4b8", "torch.float8_e4m3fn": "fp8e4nv"}


@pytest.fixture(scope="module")
def every_arch(tmp_path_factory) -> dict:
    """Each arch's decisions, each arch in a process of its own forked from one that imported torch and vLLM (the
    arches were a subprocess each, both importing vLLM, ~12 s each on the lane's machine)."""
    env = {**{k: v for k, v in os.environ.items() if k not in ("VLLM_PLATFORM", "TRITON_INTERPRET")},
           "VLLM_PLUGINS": "", "VLLM_LOGGING_STREAM": "ext://sys.stderr"}
    runs = run_forked(lambda code, args: subprocess.run([sys.executable, "-c", code, *args], capture_output=True,
                                                        text=True, env=env, timeout=600),
                      decisions.FORK_IMPORTS, {arch: (decisions.case(arch), {}) for arch in ARCHES.values()},
                      tmp_path_factory.mktemp("rocm_arches"))
    out = {}
    for arch, proc in runs.items():
        assert proc.returncode == 0, f"{arch}: {proc.stderr[-3000:]}"
        out[arch] = json.loads([ln for ln in proc.stdout.splitlines() if ln.startswith("{")][-1])
    return out


@pytest.fixture(scope="module", params=sorted(ARCHES), ids=lambda t: t.partition(":")[2])
def decided(request, every_arch):
    return request.param, every_arch[ARCHES[request.param]]


def test_ours_decides_what_vllms_decides(decided):
    """Every config-level decision but the graph pool is vLLM's: our class adds hooks (config plan, worker, pool)
    and overrides none of these, so a vLLM upgrade that changes one changes both alike."""
    target, report = decided
    ours, theirs = dict(report["ours"]), dict(report["vllm"])
    assert ours.pop("graph_pool_from") != theirs.pop("graph_pool_from")
    assert ours == theirs
    assert len(theirs["attention"]) == 12 and not any(v.startswith("refused") for v in theirs["attention"].values())
    assert report["arch"] == ARCHES[target]


def test_the_fp8_dtype_is_fnuz_on_gfx942_only_and_is_what_the_compile_check_serves(decided):
    """vLLM's fp8 dtype for the arch is our port's (``fp8_dtype_for_arch``) and, in Triton's name, the fp8 KV type
    ``triton_table_rocm.SERVED`` compiles the fp8 rows in for that target."""
    target, report = decided
    fp8 = report["vllm"]["fp8_dtype"]
    assert fp8 == report["our_port_fp8_dtype"] == report["ours"]["fp8_dtype"]
    assert report["vllm"]["is_fp8_fnuz"] == (target == "hip:gfx942")
    assert _FP8_TRITON[fp8] == SERVED[target]
    assert report["vllm"]["supports_fp8"]


def test_rocm_attn_is_the_default_backend_with_full_graphs(decided):
    """With no ``--attention-backend`` and no AITER, vLLM picks ROCM_ATTN for every dtype, head size and KV dtype of
    the grid, and its builder declares graph support ALWAYS: the backend whose Triton kernels the compile check
    builds (``triton_table_rocm.ROCM_ATTN``), and a FULL cudagraph mode our drafter's graphs can run under."""
    _, report = decided
    assert set(report["vllm"]["attention"].values()) == {"RocmAttentionBackend (ALWAYS)"}
    assert report["vllm"]["support_static_graph_mode"]
    assert report["vllm"]["static_graph_wrapper"].endswith("CUDAGraphWrapper")


def test_custom_all_reduce_follows_the_arch(decided):
    """vLLM's custom all-reduce is on for MI300 (gfx94x) and off for MI250; ours inherits the decision (checked
    equal above), recorded here so a change in vLLM's rule is seen."""
    target, report = decided
    assert report["vllm"]["use_custom_allreduce"] == (target == "hip:gfx942")


def test_the_graph_pool_is_our_ports_and_why(decided):
    """The one divergence: ``get_global_graph_pool`` comes from ``SharedPoolMixin``, so vLLM's piecewise/full graphs
    and our drafter's graphs are captured into the ONE pool our port owns per device (vLLM's own pool would be a
    second one, and the live-graph budget counts one)."""
    _, report = decided
    assert report["vllm"]["graph_pool_from"] == "vllm.platforms.interface"
    assert report["ours"]["graph_pool_from"] == "portable_spec.vllm_adapter.platform.base"
