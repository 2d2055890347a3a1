"""Claim checks: run one attention kernel on small paged inputs, compare with the float32 reference, and say
verified / refuted / unavailable / not-testable-here.

"unavailable" means this host lacks the kernel (a package or compiled library is missing: ``KernelUnavailable`` or
``ImportError``); "refuted" means the kernel ran (or refused the input) and disagreed with the claim. The kernels
themselves live in ``portable_spec.vllm_adapter.tools.attention_verify``; here they are anything with ``run``, so the
logic is tested on CPU with stand-in kernels.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

import torch

from portable_spec.attention_caps.model import BackendCaps
from portable_spec.attention_caps.reference import (
    TOLERANCES,
    PagedCase,
    compare,
    make_case,
    reference_attention,
    subcase,
)

VERIFIED, REFUTED, UNAVAILABLE, NOT_TESTABLE = "verified", "refuted", "unavailable", "not-testable-here"
STATUSES = (VERIFIED, REFUTED, UNAVAILABLE, NOT_TESTABLE)
FP8_KV_DTYPES = ("fp8", "fp8_e4m3", "fp8_e5m2")
HEAD_SIZE_LIMIT = 512
"""Rule-based head-size claims ("any", ">= 32") are sampled up to this size."""


class KernelUnavailable(Exception):
    """This host cannot run the kernel (missing package, library or toolchain): not a refutation."""


class NotTestableHere(Exception):
    """The check was not run in this run (e.g. a JIT-build budget is spent): neither verified nor refuted."""


class AttentionKernel(Protocol):
    backend: str

    def unavailable_reason(self) -> str | None:
        """None when the kernel can run here, else one line saying what is missing."""

    def run(self, case: PagedCase, *, kv_cache_dtype: str = "auto", batch_invariant: bool = False) -> torch.Tensor:
        """Attention output ``[total_q, num_q_heads, head_size]`` for ``case``, computed the way vLLM calls it."""


def result(claim: str, status: str, detail: str, seconds: float = 0.0) -> dict[str, Any]:
    return {"claim": claim, "status": status, "detail": detail, "seconds": round(seconds, 3)}


def _fmt(cmp: dict[str, Any]) -> str:
    if "why" in cmp:
        return cmp["why"]
    return (f"max |err| {cmp['max_abs_err']:.3g} ({cmp['worst_err_over_bound']:.2f} of the bound), "
            f"worst token relative RMS {cmp['rel_rms']:.3g}")


def _one_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


def guarded(claim: str, body: Callable[[], tuple[str, str]]) -> dict[str, Any]:
    """Run one check; a missing kernel is "unavailable", any other exception from the kernel refutes the claim."""
    start = time.perf_counter()
    try:
        status, detail = body()
    except NotTestableHere as exc:
        status, detail = NOT_TESTABLE, _one_line(exc).removeprefix("NotTestableHere: ")
    except (KernelUnavailable, ImportError) as exc:
        status, detail = UNAVAILABLE, _one_line(exc)
    except Exception as exc:  # noqa: BLE001 - the kernel refused a claimed input: that refutes the claim
        status, detail = REFUTED, f"kernel raised {_one_line(exc)}"
    return result(claim, status, detail, time.perf_counter() - start)


def _dtype(name: str) -> torch.dtype:
    return getattr(torch, name)


# ------------------------------------------------------------------------------------------------ the checks
def check_non_causal(kernel: AttentionKernel, device: torch.device, dtype: str = "bfloat16") -> dict[str, Any]:
    """The DFlash case: each sequence's last 1+K = 9 tokens form a block that attends bidirectionally."""
    def body() -> tuple[str, str]:
        case = make_case([46, 109, 14], [9, 9, 9], causal=False, dtype=_dtype(dtype), device=device, seed=11)
        return right_not_wrong(kernel.run(case), reference_attention(case), reference_attention(case, causal=True),
                               TOLERANCES[dtype], verified=f"3 seqs, 9-token blocks, GQA 8/2, d=128, {dtype}",
                               wrong="the CAUSAL reference", wrong_means="the kernel applied a causal mask",
                               right="the non-causal reference")
    return guarded("non_causal", body)


def check_head_size(kernel: AttentionKernel, device: torch.device, head_size: int,
                    dtype: str = "bfloat16") -> dict[str, Any]:
    """A mixed batch (a decode, a 9-token verify, a 33-token prefill chunk), causal, at ``head_size``."""
    def body() -> tuple[str, str]:
        case = make_case([70, 45, 33], [1, 9, 33], num_q_heads=4, num_kv_heads=2, head_size=head_size,
                         dtype=_dtype(dtype), device=device, seed=head_size)
        cmp = compare(kernel.run(case), reference_attention(case), TOLERANCES[dtype])
        return (VERIFIED if cmp["ok"] else REFUTED), f"mixed decode/verify/prefill, {dtype}: {_fmt(cmp)}"
    return guarded(f"head_size={head_size}", body)


def check_sinks(kernel: AttentionKernel, device: torch.device, dtype: str = "bfloat16") -> dict[str, Any]:
    """Per-head sink logits (about +4, so they carry a large share of the softmax mass)."""
    def body() -> tuple[str, str]:
        case = make_case([20, 45, 33], [1, 9, 33], sinks=True, dtype=_dtype(dtype), device=device, seed=5)
        return right_not_wrong(kernel.run(case), reference_attention(case),
                               reference_attention(case, use_sinks=False), TOLERANCES[dtype], verified="",
                               wrong="attention WITHOUT sinks", wrong_means="sinks were ignored",
                               right="the sink reference")
    return guarded("sinks", body)


def right_not_wrong(out: torch.Tensor, right_ref: torch.Tensor, wrong_ref: torch.Tensor, tol: Any, *,
                    verified: str, wrong: str, wrong_means: str, right: str) -> tuple[str, str]:
    """Verified only when the output matches the right reference AND not the plausible wrong one (a kernel that
    ignores the feature must not pass because the two references happen to be close)."""
    ok, bad = compare(out, right_ref, tol), compare(out, wrong_ref, tol)
    if ok["ok"] and not bad["ok"]:
        return VERIFIED, f"{verified}: {_fmt(ok)}" if verified else _fmt(ok)
    if bad["ok"]:
        return REFUTED, f"output matches {wrong} ({_fmt(bad)}): {wrong_means}"
    return REFUTED, f"output differs from {right}: {_fmt(ok)}"


def check_kv_cache_dtype(kernel: AttentionKernel, device: torch.device, kv_cache_dtype: str,
                         dtype: str = "bfloat16") -> dict[str, Any]:
    """K/V written into an fp8 cache the way vLLM writes it, read back by the kernel; reference from the
    unquantized K/V, so the tolerance covers fp8 quantization."""
    def body() -> tuple[str, str]:
        case = make_case([70, 45, 33], [1, 9, 33], dtype=_dtype(dtype), device=device, seed=3)
        cmp = compare(kernel.run(case, kv_cache_dtype=kv_cache_dtype), reference_attention(case),
                      TOLERANCES["fp8"])
        return (VERIFIED if cmp["ok"] else REFUTED), f"{kv_cache_dtype} KV, {dtype} queries: {_fmt(cmp)}"
    return guarded(f"kv_cache_dtype={kv_cache_dtype}", body)


def check_batch_invariance(kernel: AttentionKernel, device: torch.device, dtype: str = "bfloat16",
                           batch: int = 8) -> dict[str, Any]:
    """One sequence solo vs the same sequence inside a batch of ``batch``: its output rows must be bit-identical.

    Two batches: all decodes (where split-KV heuristics depend on the batch) and a mixed batch with a 9-token block.
    The kernel runs as vLLM runs it under ``VLLM_BATCH_INVARIANT=1`` (``batch_invariant=True``).
    """
    def body() -> tuple[str, str]:
        gen = torch.Generator().manual_seed(1234)
        notes = []
        for label, qlens in (("decode", [1] * batch),
                             ("mixed", [int(x) for x in torch.tensor([1, 4, 9, 17])[
                                 torch.randint(0, 4, (batch,), generator=gen)]])):
            target = 3
            qlens[target] = 1 if label == "decode" else 9
            seq_lens = [int(x) for x in torch.randint(20, 400, (batch,), generator=gen)]
            seq_lens[target] = 333
            seq_lens = [max(s, q) for s, q in zip(seq_lens, qlens)]
            case = make_case(seq_lens, qlens, dtype=_dtype(dtype), device=device, seed=len(label))
            solo = subcase(case, target)
            out_batch = kernel.run(case, batch_invariant=True)[case.query_rows(target)]
            out_solo = kernel.run(solo, batch_invariant=True)
            sane = compare(out_solo, reference_attention(solo), TOLERANCES[dtype])
            if not sane["ok"]:
                return REFUTED, f"{label}: the solo run is wrong before invariance is in question: {_fmt(sane)}"
            if not torch.equal(out_batch, out_solo):
                diff = float((out_batch.float() - out_solo.float()).abs().max())
                return REFUTED, (f"{label} batch of {batch}: target rows differ from the solo run "
                                 f"(max |diff| {diff:.3g}); not bit-identical")
            notes.append(f"{label} (q={qlens[target]}, kv=333 in a batch of {batch}) bit-identical")
        return VERIFIED, "; ".join(notes)
    return guarded("batch_invariance", body)


# ------------------------------------------------------------------------------------------------ planning
def plan_claims(caps: BackendCaps) -> list[tuple[str, Callable[..., dict[str, Any]] | None, str]]:
    """Every claim of a resolved row: ``(claim, check(kernel, device) or None, why not testable)``."""
    plan: list[tuple[str, Callable[..., dict[str, Any]] | None, str]] = []
    if caps.non_causal:
        plan.append(("non_causal", check_non_causal, ""))
    # 128 first: the size the non-causal check just built/compiled, so a JIT budget covers it before the others.
    for h in sorted(caps.head_sizes.samples(HEAD_SIZE_LIMIT), key=lambda h: (h != 128, h)):
        plan.append((f"head_size={h}", (lambda k, d, h=h: check_head_size(k, d, h)), ""))
    if caps.batch_invariance:
        plan.append(("batch_invariance", check_batch_invariance, ""))
    if caps.sinks:
        plan.append(("sinks", check_sinks, ""))
    for kv in FP8_KV_DTYPES:
        if kv in caps.kv_cache_dtypes:
            plan.append((f"kv_cache_dtype={kv}", (lambda k, d, kv=kv: check_kv_cache_dtype(k, d, kv)), ""))
    if caps.mm_prefix:
        plan.append(("mm_prefix", None, "no mm-prefix kernel check in this verifier"))
    if caps.per_head_quant_scales:
        plan.append(("per_head_quant_scales", None, "no per-head quant-scale kernel check in this verifier"))
    plan.append((f"graph_support={caps.graph_support}", None,
                 "decided by vLLM's metadata builder, compared with the table by the cuda-lane agreement test"))
    return plan


def verify_kernel(caps: BackendCaps, kernel: AttentionKernel, device: torch.device,
                  progress: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Run every planned check of one resolved row against ``kernel``."""
    plan = plan_claims(caps)
    reason = kernel.unavailable_reason()
    if reason:
        claims = [result(c, UNAVAILABLE if check else NOT_TESTABLE, reason if check else why)
                  for c, check, why in plan]
        return {"status": "unavailable", "reason": reason, "claims": claims}
    claims = []
    for claim, check, why in plan:
        outcome = check(kernel, device) if check else result(claim, NOT_TESTABLE, why)
        outcome["claim"] = claim
        claims.append(outcome)
        if progress:
            progress(outcome)
    return {"status": "ran", "reason": None, "claims": claims}


def summarize(backends: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Counts by status, and the refuted claims named ``BACKEND claim: detail``."""
    counts = {s: 0 for s in STATUSES}
    refuted = []
    for name, entry in backends.items():
        for c in entry.get("claims", []):
            counts[c["status"]] = counts.get(c["status"], 0) + 1
            if c["status"] == REFUTED:
                refuted.append(f"{name} {c['claim']}: {c['detail']}")
    return {"summary": counts, "refuted": refuted}


def refutation_exit(report: dict[str, Any]) -> tuple[int, str | None]:
    """``(exit code, stderr line)`` for ``probe --verify``: 1 and the refuted claims when any claim is refuted."""
    refuted = report.get("refuted") or []
    if not refuted:
        return 0, None
    return 1, f"refuted attention claim(s): {'; '.join(refuted)}"


def render_verify(report: dict[str, Any]) -> str:
    """Text rendering of a verify report: one line per claim, grouped by backend."""
    lines = [f"attention verify on {report.get('device', report.get('platform'))} ({report.get('date', '')}): "
             + ", ".join(f"{n} {s}" for s, n in report.get("summary", {}).items() if n)]
    if report.get("note"):
        lines.append(f"  {report['note']}")
    for name, entry in report.get("backends", {}).items():
        head = f"  {name}" + (f" ({entry['status']}: {entry['reason']})" if entry.get("reason") else "")
        lines.append(head)
        lines.extend(f"    {c['claim']}: {c['status']} - {c['detail']}" for c in entry.get("claims", []))
    return "\n".join(lines)
