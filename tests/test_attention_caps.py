"""The declared attention capability table, ``portable-spec caps``, selection from the table (MUSA), the torch
reference and the verify logic (claims -> verified / refuted / unavailable) with stand-in kernels on CPU."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch
import torch.nn.functional as F

from portable_spec.attention_caps import (
    GRAPH_LEVELS,
    PLATFORMS,
    TABLE,
    BackendCaps,
    Cond,
    HeadSizes,
    HostFacts,
    get_row,
    rows,
    select_backend,
    verification_label,
)
from portable_spec.attention_caps import checks, selection
from portable_spec.attention_caps.model import DTYPES, BlockSizes
from portable_spec.attention_caps.reference import (
    TOLERANCES,
    compare,
    make_case,
    reference_attention,
    subcase,
)
from portable_spec.attention_caps.verification import DECLARED, DECLARED_ONLY, load_reports
from portable_spec.cli import main
from portable_spec.errors import PortableSpecError

EXPECTED_ROWS = {
    "cuda": ["FLASH_ATTN", "FLASHINFER", "TRITON_ATTN", "FLEX_ATTENTION"],
    "rocm": ["ROCM_ATTN", "ROCM_AITER_FA", "ROCM_AITER_UNIFIED_ATTN", "TRITON_ATTN"],
    "musa": ["FLASH_ATTN", "TRITON_ATTN"],
}
H100 = HostFacts(fa_version=3, fa4_available=True, capability=(9, 0), trtllm_attention=False)


# ------------------------------------------------------------------------------------------------ the table
def test_table_has_exactly_the_issue_rows_in_vllm_priority_order():
    assert {p: [r.backend for r in rows(p)] for p in PLATFORMS} == EXPECTED_ROWS
    assert len({r.key for r in TABLE}) == len(TABLE)


@pytest.mark.parametrize("row", TABLE, ids=lambda r: r.key)
def test_every_row_is_well_formed_and_cites_its_source(row: BackendCaps):
    assert row.source.strip()
    if row.platform in ("cuda", "rocm"):
        assert "vLLM 0.26.0" in row.source and "vllm/v1/attention/backends/" in row.source
        assert row.class_path and row.class_path.startswith("vllm.v1.attention.backends.")
    else:
        assert "vllm-musa" in row.source or "upstream" in row.source
    for facts in (HostFacts(), H100, HostFacts(capability=(10, 0), trtllm_attention=True, fa_version=4)):
        caps = row.resolved(facts)
        assert caps.device_dependent() == []
        assert caps.graph_support in GRAPH_LEVELS
        assert set(caps.dtypes) <= set(DTYPES) and caps.dtypes
        assert "auto" in caps.kv_cache_dtypes
        assert isinstance(caps.head_sizes, HeadSizes) and isinstance(caps.kernel_block_sizes, BlockSizes)
        assert caps.mm_prefix in (True, False, "text-only")
        for flag in ("non_causal", "sinks", "batch_invariance", "per_head_quant_scales"):
            assert isinstance(getattr(caps, flag), bool)


def test_musa_flash_attn_needs_mate_and_has_no_class_here_and_is_text_only_for_mm_prefix():
    row = get_row("musa", "FLASH_ATTN")
    assert row.class_path is None and row.requires == ("mate",)
    assert row.mm_prefix == "text-only" and row.non_causal is True
    assert get_row("musa", "TRITON_ATTN").class_path == "vllm.v1.attention.backends.triton_attn.TritonAttentionBackend"


def test_conditions_decide_the_device_dependent_claims():
    fa = get_row("cuda", "FLASH_ATTN")
    assert set(fa.device_dependent()) == {"head_sizes", "kv_cache_dtypes", "mm_prefix", "sinks",
                                          "per_head_quant_scales", "graph_support"}
    none = fa.resolved(HostFacts())
    assert not none.head_sizes.accepts(512) and none.head_sizes.accepts(256) and not none.head_sizes.accepts(100)
    assert none.graph_support == "UNIFORM_BATCH" and none.sinks is False and "fp8" not in none.kv_cache_dtypes
    hopper = fa.resolved(H100)
    assert hopper.head_sizes.accepts(512) and hopper.graph_support == "ALWAYS" and hopper.sinks is True
    assert "fp8" in hopper.kv_cache_dtypes and "fp8_e5m2" not in hopper.kv_cache_dtypes
    assert get_row("cuda", "FLASHINFER").resolved(H100).graph_support == "UNIFORM_SINGLE_TOKEN_DECODE"
    with pytest.raises(ValueError, match="unknown condition"):
        Cond(False, "sm75", True)


def test_head_and_block_size_rules_follow_vllm_semantics():
    assert HeadSizes(minimum=32).samples() == [32, 64, 80, 128, 256, 512]
    assert HeadSizes(multiple_of=8, maximum=256).samples()[-1] == 256
    assert HeadSizes(values=(64, 128, 256, 512)).samples() == [64, 128, 256, 512]
    assert HeadSizes().accepts(7) and not HeadSizes().accepts(0)
    # vLLM's supports_block_size: any multiple of one listed size (hybrid blocks).
    assert BlockSizes(values=(16, 32)).accepts(48) and not BlockSizes(values=(16, 32)).accepts(8)
    assert BlockSizes(multiple_of=16).accepts(544) and not BlockSizes(multiple_of=16).accepts(24)


def test_rocm_aiter_unified_row_records_the_head_size_contradiction():
    row = get_row("rocm", "ROCM_AITER_UNIFIED_ATTN")
    assert row.head_sizes == HeadSizes(minimum=32) and row.non_causal is False
    assert any("get_supported_head_sizes()" in n and "validate_configuration()" in n for n in row.notes)


# ------------------------------------------------------------------------------------------------ caps CLI
def test_caps_json_labels_musa_and_rocm_declared_only(capsys):
    assert main(["caps", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    labels = {(r["platform"], r["backend"]): r["verification"] for r in payload["rows"]}
    assert len(labels) == len(TABLE)
    for (platform, _), label in labels.items():
        if platform in ("musa", "rocm"):
            assert label == DECLARED_ONLY
        else:
            assert label == DECLARED or label.startswith(("verified on ", "refuted on "))
    fa = next(r for r in payload["rows"] if r["platform"] == "cuda" and r["backend"] == "FLASH_ATTN")
    assert fa["graph_support"] == {"default": "UNIFORM_BATCH", "when": "fa==3",
                                   "when_means": "vLLM resolves FlashAttention 3 on this host", "then": "ALWAYS"}
    assert fa["source"] and "graph_support" in fa["device_dependent"]


def test_caps_text_filters_by_platform_and_backend(capsys):
    assert main(["caps", "--platform", "musa", "--backend", "flash_attn"]) == 0
    out = capsys.readouterr().out
    assert "musa / FLASH_ATTN  [declared-only (no device here)]" in out
    assert "mm prefix: text-only" in out and "requires: mate" in out and "TRITON_ATTN" not in out


@pytest.mark.parametrize("argv, needle", [
    (["caps", "--platform", "xpu"], "no attention capability rows for platform 'xpu'; valid choices: cuda, rocm, musa"),
    (["caps", "--platform", "cuda", "--backend", "ROCM_ATTN"], "valid choices: FLASH_ATTN, FLASHINFER"),
])
def test_caps_bad_input_is_one_line_naming_the_choices(capsys, argv, needle):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1


def test_verification_label_reads_committed_reports(tmp_path):
    report = {"platform": "cuda", "device": "NVIDIA H100 80GB HBM3", "date": "2026-11-22",
              "versions": {"vllm": "0.26.0"}, "backends": {
        "FLASH_ATTN": {"status": "ran", "claims": [{"claim": "non_causal", "status": "verified"},
                                                   {"claim": "head_size=512", "status": "unavailable"}]},
        "FLEX_ATTENTION": {"status": "ran", "claims": [{"claim": "head_size=512", "status": "refuted"}]},
        "FLASHINFER": {"status": "unavailable", "reason": "flashinfer not installed",
                       "claims": [{"claim": "non_causal", "status": "unavailable"}]}}}
    (tmp_path / "cuda-h100.json").write_text(json.dumps({"platform": "cuda", "attention_verify": report}))
    (tmp_path / "junk.json").write_text("not json")
    reports = load_reports(tmp_path)
    assert len(reports) == 1
    label = verification_label(get_row("cuda", "FLASH_ATTN"), reports)
    assert label == "verified on NVIDIA H100 80GB HBM3, vLLM 0.26.0, 2026-11-22 (1 verified, 1 unavailable)"
    assert verification_label(get_row("cuda", "FLEX_ATTENTION"), reports).startswith("refuted on NVIDIA H100")
    assert "unavailable on NVIDIA H100" in verification_label(get_row("cuda", "FLASHINFER"), reports)
    assert verification_label(get_row("cuda", "TRITON_ATTN"), reports) == DECLARED
    assert verification_label(get_row("rocm", "TRITON_ATTN"), reports) == DECLARED_ONLY


# ------------------------------------------------------------------------------------------------ selection
def _mate(monkeypatch, present: bool):
    real = selection._package_missing
    monkeypatch.setattr(selection, "_package_missing", lambda name: (not present) if name == "mate" else real(name))


def test_musa_dflash_selection_skips_flash_attn_without_mate(monkeypatch):
    _mate(monkeypatch, present=False)
    chosen = select_backend("musa", head_size=128, dtype="bfloat16", use_non_causal=True)
    assert chosen.backend == "TRITON_ATTN"
    assert chosen.class_path == "vllm.v1.attention.backends.triton_attn.TritonAttentionBackend"


def test_musa_selection_prefers_mate_flash_attn_when_installed(monkeypatch):
    _mate(monkeypatch, present=True)
    chosen = select_backend("musa", head_size=128, dtype="bfloat16", use_non_causal=True, block_size=16)
    assert (chosen.backend, chosen.class_path) == ("FLASH_ATTN", None)


def test_dflash_refusal_names_every_rejected_candidate_on_one_line(monkeypatch):
    _mate(monkeypatch, present=False)
    causal_only = dataclasses.replace(get_row("musa", "TRITON_ATTN"), non_causal=False)
    with pytest.raises(PortableSpecError) as info:
        select_backend("musa", head_size=128, dtype="bfloat16", use_non_causal=True,
                       candidates=["FLASH_ATTN", causal_only])
    msg = str(info.value)
    assert "\n" not in msg
    assert "fits head_size=128, dtype=bfloat16, kv_cache_dtype=auto, non-causal (DFlash)" in msg
    assert "rejected: FLASH_ATTN (mate not installed); TRITON_ATTN (non-causal attention not supported)" in msg
    assert "portable-spec caps --platform musa" in msg


def test_real_rocm_row_without_non_causal_is_refused_for_dflash():
    with pytest.raises(PortableSpecError, match=r"ROCM_AITER_UNIFIED_ATTN \((aiter not installed, )?non-causal "
                                                r"attention not supported\)"):
        select_backend("rocm", head_size=128, dtype="bfloat16", use_non_causal=True,
                       candidates=["ROCM_AITER_UNIFIED_ATTN"])


def test_selection_reasons_cover_every_claim(monkeypatch):
    _mate(monkeypatch, present=True)
    fa = get_row("musa", "FLASH_ATTN")
    reasons = selection.rejection_reasons(fa, head_size=100, dtype="float32", kv_cache_dtype="fp8", block_size=8,
                                          use_mm_prefix=True)
    assert reasons == ["head_size 100 not supported (multiple of 8, <= 512)", "dtype float32 not supported",
                       "kv_cache_dtype fp8 not supported", "block_size 8 not supported (multiple of 16)",
                       "mm-prefix is text-only (only causal/window masks validated)"]
    rocm_attn = get_row("rocm", "ROCM_ATTN")
    assert selection.rejection_reasons(rocm_attn, head_size=128, dtype="bfloat16", has_sink=True,
                                       use_batch_invariant=True) == [
        "attention sinks not supported", "batch invariance not supported"]
    # Host facts decide device-dependent claims: FA sinks only with FA3/4.
    cuda_fa = get_row("cuda", "FLASH_ATTN")
    assert "attention sinks not supported" in selection.rejection_reasons(cuda_fa, head_size=128, dtype="bfloat16",
                                                                         has_sink=True)
    assert selection.rejection_reasons(cuda_fa, head_size=128, dtype="bfloat16", has_sink=True, facts=H100) == []


@pytest.mark.parametrize("kwargs, needle", [
    ({"platform": "xpu"}, "valid choices: cuda, rocm, musa"),
    ({"platform": "musa", "dtype": "fp64"}, "unknown dtype 'fp64'"),
    ({"platform": "musa", "candidates": ["FLASHINFER"]}, "no attention backend 'FLASHINFER' on musa"),
])
def test_selection_bad_input(kwargs, needle):
    args = {"head_size": 128, "dtype": "bfloat16", **kwargs}
    with pytest.raises(PortableSpecError, match=needle):
        select_backend(args.pop("platform"), **args)


# ------------------------------------------------------------------------------------------------ reference
@pytest.mark.parametrize("causal", [True, False])
def test_reference_matches_sdpa_per_sequence(causal):
    case = make_case([46, 109, 14], [9, 9, 9], causal=causal, dtype=torch.float32, seed=2)
    ref = reference_attention(case)
    group = case.num_q_heads // case.num_kv_heads
    for i, (n, length) in enumerate(zip(case.query_lens, case.seq_lens)):
        q = case.q[case.query_rows(i)].transpose(0, 1)[None]
        k = case.keys[i].repeat_interleave(group, 1).transpose(0, 1)[None]
        v = case.values[i].repeat_interleave(group, 1).transpose(0, 1)[None]
        mask = None
        if causal:
            mask = torch.arange(length)[None, :] <= torch.arange(length - n, length)[:, None]
        want = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)[0].transpose(0, 1)
        torch.testing.assert_close(ref[case.query_rows(i)], want, atol=1e-5, rtol=1e-5)


def test_reference_sinks_add_a_zero_value_logit_per_head():
    case = make_case([5], [2], num_q_heads=2, num_kv_heads=1, head_size=8, sinks=True, dtype=torch.float32)
    q, k, v = case.q.transpose(0, 1), case.keys[0].transpose(0, 1), case.values[0].transpose(0, 1)
    scores = (q @ k.transpose(1, 2)) * case.scale
    scores = scores.masked_fill(torch.arange(5)[None, None, :] > torch.arange(3, 5)[None, :, None], float("-inf"))
    weights = scores.exp() / (scores.exp().sum(-1, keepdim=True) + case.sinks[:, None, None].exp())
    torch.testing.assert_close(reference_attention(case), (weights @ v).transpose(0, 1), atol=1e-6, rtol=1e-5)


def test_paged_layout_matches_the_logical_kv_and_subcase_is_the_same_sequence():
    case = make_case([33, 16, 1], [1, 16, 1], block_size=16, dtype=torch.float32)
    for i, length in enumerate(case.seq_lens):
        gathered = torch.stack([case.k_cache[case.block_table[i, t // 16], t % 16] for t in range(length)])
        assert torch.equal(gathered, case.keys[i])
    flat = case.k_cache.view(-1, case.num_kv_heads, case.head_size)
    assert torch.equal(flat[case.slot_mapping], case.key_tokens())
    solo = subcase(case, 0)
    assert torch.equal(reference_attention(solo), reference_attention(case)[case.query_rows(0)])


def test_fp8_tolerance_covers_a_simulated_fp8_pipeline_with_margin():
    """Quantize Q, K, V to e4m3 as an fp8 kernel sees them: the error stays well inside TOLERANCES['fp8']."""
    case = make_case([70, 45, 33], [1, 9, 33], dtype=torch.bfloat16, seed=3)
    f8 = torch.float8_e4m3fn
    quant = lambda ts: [t.float().to(f8).float() for t in ts]  # noqa: E731
    out = reference_attention(case, keys=quant(case.keys), values=quant(case.values), q=quant([case.q])[0])
    cmp = compare(out, reference_attention(case), TOLERANCES["fp8"])
    assert cmp["ok"] and cmp["worst_err_over_bound"] < 0.3 and cmp["rel_rms"] < 0.075, cmp
    # ... and a kernel that reads one page of garbage is far outside it.
    keys = [k.clone() for k in case.keys]
    keys[0][:16] = 50.0
    assert not compare(reference_attention(case, keys=keys), reference_attention(case), TOLERANCES["fp8"])["ok"]


# ------------------------------------------------------------------------------------------------ verify logic
class RefKernel:
    """A stand-in kernel that is right: the torch reference, rounded to the query dtype."""

    backend = "FAKE"

    def unavailable_reason(self):
        return None

    def run(self, case, *, kv_cache_dtype="auto", batch_invariant=False):
        keys, values = case.keys, case.values
        if kv_cache_dtype.startswith("fp8"):
            f8 = torch.float8_e5m2 if kv_cache_dtype == "fp8_e5m2" else torch.float8_e4m3fn
            keys = [k.float().to(f8).float() for k in keys]
            values = [v.float().to(f8).float() for v in values]
        return reference_attention(case, keys=keys, values=values).to(case.q.dtype)


class CausalKernel(RefKernel):
    def run(self, case, **kw):
        return reference_attention(case, causal=True).to(case.q.dtype)


class SinklessKernel(RefKernel):
    def run(self, case, **kw):
        return reference_attention(case, use_sinks=False).to(case.q.dtype)


class BatchVariantKernel(RefKernel):
    def run(self, case, **kw):
        out = super().run(case, **kw)
        return out + (len(case.seq_lens) > 1) * 2 ** -7  # a split heuristic that shifts results in batches


class NoHead512Kernel(RefKernel):
    def run(self, case, **kw):
        if case.head_size == 512:
            raise RuntimeError("head dim 512 not supported\nmore text")
        return super().run(case, **kw)


class MissingKernel(RefKernel):
    def unavailable_reason(self):
        return "fake_kernels not installed"


class LazyMissingKernel(RefKernel):
    def run(self, case, **kw):
        raise ImportError("No module named 'cutlass'")


class BudgetSpentKernel(RefKernel):
    def run(self, case, **kw):
        if case.head_size != 128:
            raise checks.NotTestableHere("JIT budget spent before building head 64")
        return super().run(case, **kw)


def _claims(entry):
    return {c["claim"]: c for c in entry["claims"]}


def small_row(**changes) -> BackendCaps:
    base = dataclasses.replace(get_row("cuda", "TRITON_ATTN"), head_sizes=HeadSizes(values=(64, 512)))
    return dataclasses.replace(base, **changes)


def test_right_kernel_verifies_every_testable_claim():
    entry = checks.verify_kernel(small_row(), RefKernel(), torch.device("cpu"))
    got = _claims(entry)
    for claim in ("non_causal", "head_size=64", "head_size=512", "batch_invariance", "sinks", "kv_cache_dtype=fp8",
                  "kv_cache_dtype=fp8_e4m3", "kv_cache_dtype=fp8_e5m2"):
        assert got[claim]["status"] == "verified", got[claim]
    assert got["mm_prefix"]["status"] == got["graph_support=ALWAYS"]["status"] == "not-testable-here"
    assert checks.refutation_exit(checks.summarize({"FAKE": entry})) == (0, None)


@pytest.mark.parametrize("kernel, claim, needle", [
    (CausalKernel(), "non_causal", "the kernel applied a causal mask"),
    (SinklessKernel(), "sinks", "sinks were ignored"),
    (BatchVariantKernel(), "batch_invariance", "not bit-identical"),
    (NoHead512Kernel(), "head_size=512", "kernel raised RuntimeError: head dim 512 not supported"),
])
def test_a_disagreeing_kernel_refutes_the_claim_and_exits_nonzero(kernel, claim, needle):
    entry = checks.verify_kernel(small_row(), kernel, torch.device("cpu"))
    got = _claims(entry)[claim]
    assert got["status"] == "refuted" and needle in got["detail"] and "\n" not in got["detail"]
    code, message = checks.refutation_exit(checks.summarize({"FAKE": entry}))
    assert code == 1 and f"FAKE {claim}: " in message


def test_missing_kernel_is_unavailable_not_refuted():
    entry = checks.verify_kernel(small_row(), MissingKernel(), torch.device("cpu"))
    assert entry["status"] == "unavailable" and entry["reason"] == "fake_kernels not installed"
    assert {c["status"] for c in entry["claims"]} == {"unavailable", "not-testable-here"}
    lazy = _claims(checks.verify_kernel(small_row(), LazyMissingKernel(), torch.device("cpu")))
    assert lazy["head_size=64"]["status"] == "unavailable" and "cutlass" in lazy["head_size=64"]["detail"]
    assert checks.refutation_exit(checks.summarize({"FAKE": entry}))[0] == 0


def test_a_spent_build_budget_is_not_testable_here_not_a_verdict():
    got = _claims(checks.verify_kernel(small_row(head_sizes=HeadSizes(values=(64, 128))), BudgetSpentKernel(),
                                       torch.device("cpu")))
    assert got["head_size=128"]["status"] == "verified"
    assert got["head_size=64"] == {**got["head_size=64"], "status": "not-testable-here",
                                   "detail": "JIT budget spent before building head 64"}


def test_only_claimed_features_are_checked():
    plan = [c for c, _, _ in checks.plan_claims(get_row("rocm", "ROCM_AITER_UNIFIED_ATTN"))]
    assert "non_causal" not in plan and "batch_invariance" not in plan and "sinks" in plan
    flex = [c for c, _, _ in checks.plan_claims(get_row("cuda", "FLEX_ATTENTION"))]
    assert "sinks" not in flex and not any(c.startswith("kv_cache_dtype") for c in flex)
    assert "head_size=512" in flex and "head_size=256" in flex
