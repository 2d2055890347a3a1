"""The declared table against the installed vLLM's real backend classes (cpu lane, every version of the span), and the
``probe --verify`` wiring.

The table is the one declared for the installed vLLM (``attention_agreement.declared_table``: 0.26.0's transcription
with the claims that moved since). Every backend module that imports without a GPU is observed through its real
classmethods and its builder's graph support, claim by claim. Device-independent claims must agree exactly;
device-dependent ones (a ``Cond`` in the table) must agree with the branch this GPU-less host resolves, and are
compared on the H100 by tests/gpu/test_attention_verify.py. A vLLM upgrade that changes a declaration fails here.
"""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace

import pytest
from lane_tools import import_triton

pytest.importorskip("vllm")

from portable_spec.attention_caps import CLAIM_FIELDS, HostFacts  # noqa: E402
from portable_spec.attention_caps.model import HeadSizes  # noqa: E402
from portable_spec.attention_caps.table import CLAIM_CHANGES, table_as_of  # noqa: E402
from portable_spec.vllm_adapter.patch import version_gate  # noqa: E402

TABLE = table_as_of(version_gate.pick(CLAIM_CHANGES))
"""As ``attention_agreement.declared_table()`` builds it (checked below), read here without importing vLLM, since the
parameters are collected before any fixture runs."""
ROWS_WITH_CLASSES = [r for r in TABLE if r.class_path is not None]
DOES_NOT_IMPORT_WITHOUT_GPU: set[str] = version_gate.pick({
    "0.26.0": {"FLASHINFER"},  # flashinfer.py initialises CUDA at import
    # The AITER module now calls into CUDA at import; flashinfer.py no longer does, but imports flashinfer, which the
    # cpu lane's virtualenvs leave out (ci/vllm_cpu_requirements.py: CUDA-only): compared on the cuda lane.
    "0.33.0": {"FLASHINFER", "ROCM_AITER_UNIFIED_ATTN"},
})


def get_row(platform: str, backend: str):
    return next(r for r in TABLE if r.platform == platform and r.backend == backend)


@pytest.fixture(scope="module")
def agreement(vllm_platform):
    from portable_spec.vllm_adapter.tools import attention_agreement

    return attention_agreement


@pytest.fixture(scope="module")
def cpu_facts(agreement) -> HostFacts:
    facts = agreement.observe_host_facts()
    assert facts == HostFacts(), f"this host resolved GPU facts {facts}: run the cuda-lane test instead"
    return facts


def _observe_or_skip(agreement, row):
    problem = agreement.import_problem(row.class_path)
    if problem is not None:
        assert row.backend in DOES_NOT_IMPORT_WITHOUT_GPU, f"{row.key} stopped importing on CPU: {problem}"
        pytest.skip(f"{row.key} does not import without a GPU ({problem}); compared on the cuda lane")
    assert row.backend not in DOES_NOT_IMPORT_WITHOUT_GPU, f"{row.key} now imports on CPU: compare it here"
    return agreement.observe_backend(row.class_path)


@pytest.mark.parametrize("row", ROWS_WITH_CLASSES, ids=lambda r: r.key)
def test_device_independent_claims_agree_with_the_vllm_class(agreement, cpu_facts, row):
    observed = _observe_or_skip(agreement, row)
    independent = tuple(c for c in CLAIM_FIELDS if c not in row.device_dependent())
    assert agreement.disagreements(row, observed, cpu_facts, independent) == []


@pytest.mark.parametrize("row", [r for r in ROWS_WITH_CLASSES if r.device_dependent()], ids=lambda r: r.key)
def test_device_dependent_claims_match_the_no_gpu_branch(agreement, cpu_facts, row):
    """Without a GPU vLLM resolves no FlashAttention version: every Cond must fall back to what the class says."""
    observed = _observe_or_skip(agreement, row)
    assert agreement.disagreements(row, observed, cpu_facts, tuple(row.device_dependent())) == []


@pytest.mark.parametrize("row", ROWS_WITH_CLASSES, ids=lambda r: r.key)
def test_row_class_is_the_one_vllm_registers_for_the_backend(agreement, row):
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    assert AttentionBackendEnum[row.backend].value == row.class_path


def test_the_table_here_is_the_one_the_agreement_tool_declares(agreement):
    assert agreement.declared_table() == TABLE


def test_exactly_the_listed_backends_do_not_import_without_a_gpu(agreement, cpu_facts):
    failing = {row.backend for row in ROWS_WITH_CLASSES if agreement.import_problem(row.class_path) is not None}
    assert failing == DOES_NOT_IMPORT_WITHOUT_GPU


def test_rocm_aiter_unified_contradiction_and_which_method_vllm_trusts(agreement, cpu_facts):
    row = get_row("rocm", "ROCM_AITER_UNIFIED_ATTN")
    if row.backend in DOES_NOT_IMPORT_WITHOUT_GPU:
        pytest.skip(f"{row.key} does not import without a GPU on this vLLM")
    observed = agreement.observe_backend(row.class_path)
    contradiction = observed["head_size_contradiction"]
    assert contradiction["get_supported_head_sizes"] == [32, 64, 80, 96, 128, 160, 192, 224, 256]
    assert contradiction["supports_head_size_accepts_unlisted"][:2] == [33, 34]
    assert contradiction["validate_configuration_uses"] == "supports_head_size"
    assert agreement.validate_head_size(row.class_path, 512) and not agreement.validate_head_size(row.class_path, 16)
    # The table follows validate_configuration and keeps the inherited list in a note.
    assert row.head_sizes == HeadSizes(minimum=32)
    assert any(str(contradiction["get_supported_head_sizes"]) in note for note in row.notes)


def test_a_drifted_declaration_is_caught(agreement, cpu_facts):
    """The comparison can fail: flip claims the way an out-of-tree copy drifts."""
    row = get_row("cuda", "TRITON_ATTN")
    observed = agreement.observe_backend(row.class_path)
    drifted = dataclasses.replace(row, non_causal=False, head_sizes=HeadSizes(minimum=32, maximum=256),
                                  kv_cache_dtypes=("auto",), graph_support="UNIFORM_BATCH")
    found = {d["claim"] for d in agreement.disagreements(drifted, observed, cpu_facts)}
    assert found == {"non_causal", "head_sizes", "kv_cache_dtypes", "graph_support"}


def test_agreement_report_covers_every_row(agreement, cpu_facts):
    report = agreement.agreement_report()
    assert set(report["rows"]) == {r.key for r in TABLE}
    assert report["rows"]["musa/FLASH_ATTN"]["skipped"].startswith("no vLLM class here")
    assert {r.split("/")[1] for r, e in report["rows"].items() if "import_error" in e} == DOES_NOT_IMPORT_WITHOUT_GPU
    assert all(not e.get("disagreements") for e in report["rows"].values())


# ------------------------------------------------------------------------------------------------ probe --verify
def _fake_report(refuted: bool) -> dict:
    claims = [{"claim": "non_causal", "status": "verified", "detail": "ok", "seconds": 0.1}]
    if refuted:
        claims.append({"claim": "head_size=512", "status": "refuted", "detail": "kernel raised X", "seconds": 0.1})
    from portable_spec.attention_caps.checks import summarize

    backends = {"FLEX_ATTENTION": {"status": "ran", "reason": None, "claims": claims}}
    return {"platform": "cpu", "backends": backends, **summarize(backends)}


@pytest.fixture
def device_host(monkeypatch):
    """``probe --verify`` refuses a host without a device: a stand-in port with graphs (named cpu, so the fake
    report fits), its probe stubbed."""
    port = SimpleNamespace(name="cpu", supports_graphs=True)
    # the probe command imports both when it runs: patched where they live
    monkeypatch.setattr("portable_spec.ports.select_platform", lambda choice=None: port)
    monkeypatch.setattr("portable_spec.probe.run_probe", lambda platform: {"platform": platform.name})


@pytest.mark.parametrize("refuted", [False, True])
def test_probe_verify_puts_the_report_in_the_probe_and_exits_1_naming_refuted_claims(vllm_platform, device_host,
                                                                                      monkeypatch, capsys, refuted):
    from portable_spec.cli import main
    from portable_spec.vllm_adapter.tools import attention_verify

    monkeypatch.setattr(attention_verify, "verify_attention", lambda platform: _fake_report(refuted))
    code = main(["probe", "--platform", "cpu", "--verify", "--json"])
    out, err = capsys.readouterr()
    payload = json.loads(out)
    assert payload["attention_verify"]["backends"]["FLEX_ATTENTION"]["claims"][0]["status"] == "verified"
    if refuted:
        assert code == 1
        assert "refuted attention claim(s): FLEX_ATTENTION head_size=512: kernel raised X" in err
    else:
        assert code == 0 and err == ""


def test_verify_on_a_host_without_rows_or_device_says_so(vllm_platform):
    from portable_spec.vllm_adapter.tools.attention_verify import verify_attention

    assert verify_attention("cpu")["note"] == "no attention capability rows for platform 'cpu'"
    report = verify_attention("cuda", quiet=True)
    assert set(report["backends"]) == {"FLASH_ATTN", "FLASHINFER", "TRITON_ATTN", "FLEX_ATTENTION"}
    statuses = {c["status"] for e in report["backends"].values() for c in e["claims"]}
    assert statuses == {"not-testable-here"} and report["refuted"] == []
    assert report["backends"]["FLASH_ATTN"]["reason"] == "no accelerator on this host"


def test_probe_verify_text_output(vllm_platform, device_host, monkeypatch, capsys):
    from portable_spec.cli import main
    from portable_spec.vllm_adapter.tools import attention_verify

    monkeypatch.setattr(attention_verify, "verify_attention", lambda platform: _fake_report(False))
    assert main(["probe", "--platform", "cpu", "--verify"]) == 0
    out = capsys.readouterr().out
    assert "FLEX_ATTENTION" in out and "non_causal: verified - ok" in out


# ------------------------------------------------------------------------------------------------ a real kernel on CPU
_INTERPRETED_TRITON = r"""
import importlib, json, os, sys
os.environ["TRITON_INTERPRET"] = "1"
import torch
import vllm.platforms
from portable_spec_harness.vllm_door.cpu_graph_platform import CpuGraphTestPlatform
vllm.platforms._current_platform = CpuGraphTestPlatform()
import vllm.triton_utils.importing as importing
importing.HAS_TRITON = True  # vLLM disables Triton without a GPU driver; the interpreter runs it on CPU
import vllm.triton_utils
importlib.reload(vllm.triton_utils)
from portable_spec.attention_caps import checks
from portable_spec.vllm_adapter.tools.attention_verify import TritonKernel
kernel, cpu = TritonKernel(), torch.device("cpu")
out = {"unavailable": kernel.unavailable_reason(), "results": [
    checks.check_non_causal(kernel, cpu, "float32"), checks.check_head_size(kernel, cpu, 80, "float32"),
    checks.check_sinks(kernel, cpu, "float32"), checks.check_batch_invariance(kernel, cpu, "float32")]}
print(json.dumps(out))
"""


def test_vllm_triton_kernel_under_the_interpreter_verifies_its_claims():
    """The TRITON_ATTN driver, on vLLM's real unified-attention kernel run by the Triton interpreter (float32: the
    interpreter mishandles bfloat16). This is the driver's wiring, not a device claim: the H100 run is that."""
    import os
    import subprocess
    import sys

    import_triton()
    env = {**os.environ, "VLLM_LOGGING_STREAM": "ext://sys.stderr", "VLLM_PLUGINS": ""}
    proc = subprocess.run([sys.executable, "-c", _INTERPRETED_TRITON], capture_output=True, text=True, env=env,
                          timeout=600)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    report = json.loads(lines[-1])
    assert report["unavailable"] is None
    assert {r["claim"]: r["status"] for r in report["results"]} == {
        "non_causal": "verified", "head_size=80": "verified", "sinks": "verified", "batch_invariance": "verified"}


class _Reference:
    """Stand-in kernel: the torch reference (right by construction)."""

    backend = "REF"

    def unavailable_reason(self):
        return None

    def run(self, case, *, kv_cache_dtype="auto", batch_invariant=False):
        from portable_spec.attention_caps.reference import reference_attention

        return reference_attention(case).to(case.q.dtype)


class _BackgroundReference(_Reference):
    BUILDS_OUT_OF_PROCESS = True


class _CausalOnly(_Reference):
    def run(self, case, **kw):
        from portable_spec.attention_caps.reference import reference_attention

        return reference_attention(case, causal=True).to(case.q.dtype)


def test_verify_orchestration_keeps_table_order_and_runs_builders_on_a_side_thread(vllm_platform):
    import torch

    from portable_spec.vllm_adapter.tools.attention_verify import verify_attention

    kernels = {"FLASH_ATTN": _Reference, "FLASHINFER": _BackgroundReference, "TRITON_ATTN": _CausalOnly}
    report = verify_attention("cuda", device=torch.device("cpu"), kernels=kernels, quiet=True)
    assert list(report["backends"]) == ["FLASH_ATTN", "FLASHINFER", "TRITON_ATTN", "FLEX_ATTENTION"]
    flashinfer = {c["claim"]: c["status"] for c in report["backends"]["FLASHINFER"]["claims"]}
    assert flashinfer["non_causal"] == flashinfer["head_size=512"] == "verified"
    flex = report["backends"]["FLEX_ATTENTION"]
    assert flex["reason"] == "portable_spec has no kernel driver for cuda/FLEX_ATTENTION"
    assert report["refuted"] and all(r.startswith("TRITON_ATTN non_causal") for r in report["refuted"])
    assert report["summary"]["refuted"] == 1 and report["schema"] == "portable_spec.attention_verify/1"


def test_selection_from_vllms_real_selector_config(vllm_platform, monkeypatch):
    """The MUSA platform's get_attn_backend_cls path: vLLM's AttentionSelectorConfig in, a table row out."""
    import torch
    from vllm.v1.attention.backends.registry import AttentionBackendEnum
    from vllm.v1.attention.selector import AttentionSelectorConfig

    from portable_spec.attention_caps import select_for_vllm, selection
    from portable_spec.errors import PortableSpecError

    monkeypatch.setattr(selection, "_package_missing", lambda name: name == "mate")
    dflash = AttentionSelectorConfig(head_size=128, dtype=torch.bfloat16, kv_cache_dtype="auto", block_size=16,
                                     use_non_causal=True)
    chosen = select_for_vllm("musa", None, dflash)
    assert chosen.backend == "TRITON_ATTN" and chosen.class_path == AttentionBackendEnum.TRITON_ATTN.value
    with pytest.raises(PortableSpecError, match=r"rejected: FLASH_ATTN \(mate not installed\)$|FLASH_ATTN \(mate"):
        select_for_vllm("musa", AttentionBackendEnum.FLASH_ATTN, dflash)
    with pytest.raises(PortableSpecError, match="MLA attention is not in the capability table"):
        select_for_vllm("musa", None, dflash._replace(use_mla=True))
    with pytest.raises(PortableSpecError, match="per-head quant scales not supported"):
        select_for_vllm("musa", None, dflash._replace(use_per_head_quant_scales=True))
