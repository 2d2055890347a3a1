"""``probe --verify``: run every importable attention backend's kernel on this device against the float32 torch
reference and mark each claim of its table row verified / refuted / unavailable / not-testable-here.

Each backend's kernel is driven the way vLLM 0.26.0's impl calls it, as directly as reasonable:
FLASH_ATTN ``vllm.vllm_flash_attn.flash_attn_varlen_func`` with the FA version vLLM resolves for the head size;
TRITON_ATTN vLLM's ``unified_attention`` op with the builder's split-softmax buffers; FLASHINFER flashinfer's
``BatchPrefillWithPagedKVCacheWrapper`` (``backend="auto"``, as vLLM's prefill and non-causal paths use it);
FLEX_ATTENTION ``torch.compile(flex_attention)`` with a document mask over the gathered pages. FP8 caches are written
with the op vLLM uses for that backend. FlashInfer JIT-builds its kernels: the build cache lives under
``$FLASHINFER_WORKSPACE_BASE`` (default ``/tmp/portable_spec_flashinfer``), so repeated use in one run, or a second
run on the same machine, reuses it.

``python -m portable_spec.vllm_adapter.tools.attention_verify --json`` runs it alone.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import datetime
import importlib.metadata
import importlib.util
import json
import os
import shutil
import sys
import time
from typing import Any, Iterator

# Before vLLM / flashinfer are imported: vLLM logs to stdout by default (our --json must own stdout), and flashinfer
# reads its JIT cache location once, at import.
os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")
os.environ.setdefault("FLASHINFER_WORKSPACE_BASE", "/tmp/portable_spec_flashinfer")

import torch  # noqa: E402
import vllm  # noqa: E402,F401  (this module is one of the two places allowed to import vLLM)

from portable_spec import envs  # noqa: E402
from portable_spec.attention_caps import PLATFORMS, rows  # noqa: E402
from portable_spec.attention_caps.checks import (  # noqa: E402
    NOT_TESTABLE,
    KernelUnavailable,
    NotTestableHere,
    plan_claims,
    refutation_exit,
    result,
    summarize,
    verify_kernel,
)
from portable_spec.attention_caps.reference import TOLERANCES, PagedCase  # noqa: E402
from portable_spec.output import add_json_flag, emit  # noqa: E402

SCHEMA = "portable_spec.attention_verify/1"
DRIVEN_PLATFORMS = {"FLASH_ATTN": ("cuda",), "FLASHINFER": ("cuda",), "TRITON_ATTN": ("cuda", "rocm"),
                    "FLEX_ATTENTION": ("cuda", "rocm")}


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def _fp8_dtype() -> torch.dtype:
    from vllm.platforms import current_platform

    return current_platform.fp8_dtype()


def _unit_scale(device: torch.device) -> torch.Tensor:
    return torch.tensor(1.0, dtype=torch.float32, device=device)


def _quantize_query(q: torch.Tensor) -> torch.Tensor:
    """What vLLM's Attention layer does for an fp8/fp8_e4m3 KV cache when the impl takes fp8 queries (static
    per-tensor ``QuantFP8`` with the default ``_q_scale`` of 1.0)."""
    fp8 = _fp8_dtype()
    limit = torch.finfo(fp8).max
    return q.float().clamp(-limit, limit).to(fp8)


def _empty_fp8_caches(case: PagedCase) -> tuple[torch.Tensor, torch.Tensor]:
    """vLLM allocates quantized KV caches as uint8 and views them as the fp8 dtype where the kernel reads them."""
    return (torch.zeros(case.k_cache.shape, dtype=torch.uint8, device=case.k_cache.device),
            torch.zeros(case.v_cache.shape, dtype=torch.uint8, device=case.v_cache.device))


def _is_fp8(kv_cache_dtype: str) -> bool:
    return kv_cache_dtype.startswith("fp8")


# ------------------------------------------------------------------------------------------------ FLASH_ATTN
class FlashAttnKernel:
    """vLLM's FlashAttention (FA3 on Hopper): ``flash_attn_varlen_func`` on the paged cache, as
    ``FlashAttentionImpl.forward`` calls it."""

    backend = "FLASH_ATTN"

    def unavailable_reason(self) -> str | None:
        try:
            from vllm.v1.attention.backends.fa_utils import get_flash_attn_version
            from vllm.vllm_flash_attn import flash_attn_varlen_func  # noqa: F401
        except Exception as exc:  # noqa: BLE001
            return f"vllm.vllm_flash_attn does not import: {_first_line(exc)}"
        if get_flash_attn_version() is None:
            return "vLLM resolves no FlashAttention version on this device (FA kernels missing or unsupported)"
        return None

    def run(self, case: PagedCase, *, kv_cache_dtype: str = "auto", batch_invariant: bool = False) -> torch.Tensor:
        from vllm.v1.attention.backends.fa_utils import get_flash_attn_version
        from vllm.vllm_flash_attn import fa_version_unsupported_reason, flash_attn_varlen_func, is_fa_version_supported

        fa = get_flash_attn_version(head_size=case.head_size, has_sinks=case.sinks is not None)
        if fa is None:
            raise KernelUnavailable(f"vLLM resolves no FlashAttention version for head_size={case.head_size}")
        if not is_fa_version_supported(fa):
            raise KernelUnavailable(f"FA{fa}: {fa_version_unsupported_reason(fa)}")
        q, k_cache, v_cache = case.q, case.k_cache, case.v_cache
        descale = {}
        if _is_fp8(kv_cache_dtype):
            from vllm import _custom_ops as ops

            k_raw, v_raw = _empty_fp8_caches(case)
            one = _unit_scale(q.device)
            ops.reshape_and_cache_flash(case.key_tokens(), case.value_tokens(), k_raw, v_raw, case.slot_mapping,
                                        kv_cache_dtype, one, one)
            k_cache, v_cache = k_raw.view(_fp8_dtype()), v_raw.view(_fp8_dtype())
            q = _quantize_query(q)  # FlashAttentionImpl.supports_quant_query_input is True on CUDA
            shape = (len(case.seq_lens), case.num_kv_heads)
            descale = {"q_descale": one.expand(shape), "k_descale": one.expand(shape), "v_descale": one.expand(shape)}
        out = torch.empty(case.q.shape, dtype=case.q.dtype, device=case.q.device)
        flash_attn_varlen_func(
            q=q, k=k_cache, v=v_cache, out=out, cu_seqlens_q=case.cu_seqlens_q, max_seqlen_q=case.max_query_len,
            seqused_k=case.seqused_k, max_seqlen_k=case.max_seq_len, softmax_scale=case.scale, causal=case.causal,
            block_table=case.block_table, fa_version=fa, num_splits=1 if batch_invariant else 0,
            s_aux=None if case.sinks is None else case.sinks.to(torch.bfloat16),
            **descale)
        return out


# ------------------------------------------------------------------------------------------------ TRITON_ATTN
class TritonKernel:
    """vLLM's Triton ``unified_attention`` with the split-softmax buffers ``TritonAttentionMetadataBuilder`` makes."""

    backend = "TRITON_ATTN"

    def unavailable_reason(self) -> str | None:
        if importlib.util.find_spec("triton") is None:
            return "triton not installed"
        try:
            from vllm.triton_utils import HAS_TRITON

            if not HAS_TRITON:
                return "vLLM disabled Triton on this host (no active Triton driver)"
            import vllm.v1.attention.ops.triton_unified_attention  # noqa: F401
        except Exception as exc:  # noqa: BLE001
            return f"vLLM's Triton attention op does not import: {_first_line(exc)}"
        return None

    @contextlib.contextmanager
    def _batch_invariant(self, on: bool) -> Iterator[None]:
        """``VLLM_BATCH_INVARIANT=1`` as the op module saw it at import (it disables the 3D decode kernel)."""
        import vllm.v1.attention.ops.triton_unified_attention as op

        saved = op.is_batch_invariant
        op.is_batch_invariant = saved or on
        try:
            yield
        finally:
            op.is_batch_invariant = saved

    def run(self, case: PagedCase, *, kv_cache_dtype: str = "auto", batch_invariant: bool = False) -> torch.Tensor:
        from vllm.utils.math_utils import next_power_of_2
        from vllm.v1.attention.backends.triton_attn import MIN_LAUNCH_GRID_SIZE_2D, NUM_PAR_SOFTMAX_SEGMENTS
        from vllm.v1.attention.ops.triton_unified_attention import unified_attention
        from vllm.v1.kv_cache_interface import KVQuantMode, get_kv_quant_mode

        dev = case.q.device
        q, k_cache, v_cache = case.q, case.k_cache, case.v_cache
        one = _unit_scale(dev)
        shape = (len(case.seq_lens), case.num_kv_heads)
        q_descale = None
        mode = KVQuantMode.NONE
        if _is_fp8(kv_cache_dtype):
            from vllm.v1.attention.ops.triton_reshape_and_cache_flash import triton_reshape_and_cache_flash

            k_raw, v_raw = _empty_fp8_caches(case)
            triton_reshape_and_cache_flash(case.key_tokens(), case.value_tokens(), k_raw, v_raw, case.slot_mapping,
                                           kv_cache_dtype, one, one)
            k_cache, v_cache = k_raw.view(_fp8_dtype()), v_raw.view(_fp8_dtype())
            mode = get_kv_quant_mode(kv_cache_dtype)
            if kv_cache_dtype in ("fp8", "fp8_e4m3"):
                # TritonAttentionImpl.supports_quant_query_input is True on CUDA: the layer hands it fp8 queries.
                q = _quantize_query(q)
                q_descale = one
        threshold = MIN_LAUNCH_GRID_SIZE_2D // case.num_kv_heads
        padded = next_power_of_2(case.head_size)
        segm = (threshold, case.num_q_heads, NUM_PAR_SOFTMAX_SEGMENTS)
        out = torch.empty(case.q.shape, dtype=case.q.dtype, device=dev)
        with self._batch_invariant(batch_invariant):
            unified_attention(
                q=q, k=k_cache, v=v_cache, out=out, cu_seqlens_q=case.cu_seqlens_q, max_seqlen_q=case.max_query_len,
                seqused_k=case.seqused_k, max_seqlen_k=case.max_seq_len, softmax_scale=case.scale,
                causal=case.causal, window_size=(-1, -1), block_table=case.block_table, softcap=0,
                q_descale=q_descale, k_descale=one.expand(shape), v_descale=one.expand(shape),
                seq_threshold_3D=threshold, num_par_softmax_segments=NUM_PAR_SOFTMAX_SEGMENTS,
                softmax_segm_output=torch.empty(*segm, padded, dtype=torch.float32, device=dev),
                softmax_segm_max=torch.empty(segm, dtype=torch.float32, device=dev),
                softmax_segm_expsum=torch.empty(segm, dtype=torch.float32, device=dev),
                sinks=case.sinks, kv_quant_mode=mode)
        return out


# ------------------------------------------------------------------------------------------------ FLASHINFER
class FlashInferKernel:
    """flashinfer's paged prefill wrapper (``backend="auto"``), as vLLM's FlashInfer prefill / non-causal (DFlash)
    paths use it. Its kernels are JIT-built once per (q dtype, kv dtype, head size) and cached on disk.

    Each new build costs minutes on a cold host, so no new build starts once ``PORTABLE_SPEC_VERIFY_JIT_BUDGET_S``
    (default 150) seconds have gone into FlashInfer; the claims left are "not-testable-here" and a rerun on the same
    machine (cache warm) gets further. The verifier runs this backend on a side thread, overlapping the others.
    """

    backend = "FLASHINFER"
    BUILDS_OUT_OF_PROCESS = True
    WORKSPACE_BYTES = 256 * 1024 * 1024
    BUDGET_ENV = envs.VERIFY_JIT_BUDGET_ENV

    def __init__(self) -> None:
        self._workspace: torch.Tensor | None = None
        self._built: set[tuple[str, str, int]] = set()
        self._spent = 0.0
        self._budget = envs.verify_jit_budget_s()

    def run(self, case: PagedCase, *, kv_cache_dtype: str = "auto", batch_invariant: bool = False) -> torch.Tensor:
        key = (str(case.q.dtype), kv_cache_dtype, case.head_size)
        if key not in self._built and self._spent > self._budget:
            raise NotTestableHere(f"FlashInfer JIT budget spent ({self._spent:.0f}s > {self._budget:.0f}s) before "
                                  f"building {key}; raise {self.BUDGET_ENV} or rerun with the build cache warm")
        start = time.perf_counter()
        try:
            return self._run(case, kv_cache_dtype)
        finally:
            self._spent += time.perf_counter() - start
            self._built.add(key)

    def unavailable_reason(self) -> str | None:
        if importlib.util.find_spec("flashinfer") is None:
            return "flashinfer not installed"
        has_cache = importlib.util.find_spec("flashinfer_jit_cache") is not None
        if not has_cache and shutil.which("nvcc") is None and not envs.cuda_home():
            return "flashinfer needs nvcc (or flashinfer-jit-cache) to build its kernels; neither is here"
        try:
            import flashinfer  # noqa: F401
        except Exception as exc:  # noqa: BLE001
            return f"flashinfer does not import: {_first_line(exc)}"
        try:
            from vllm import _custom_ops  # noqa: F401  (imported here, on the caller's thread, not the side thread)
        except Exception:  # noqa: BLE001 - only the fp8 checks need it; they report it
            pass
        return None

    def _run(self, case: PagedCase, kv_cache_dtype: str) -> torch.Tensor:
        from flashinfer import BatchPrefillWithPagedKVCacheWrapper

        dev = case.q.device
        if self._workspace is None:
            self._workspace = torch.zeros(self.WORKSPACE_BYTES, dtype=torch.uint8, device=dev)
        k_cache, v_cache = case.k_cache, case.v_cache
        kv_dtype = case.q.dtype
        if _is_fp8(kv_cache_dtype):
            from vllm import _custom_ops as ops

            k_raw, v_raw = _empty_fp8_caches(case)
            one = _unit_scale(dev)
            ops.reshape_and_cache_flash(case.key_tokens(), case.value_tokens(), k_raw, v_raw, case.slot_mapping,
                                        kv_cache_dtype, one, one)
            # FlashInferBackend.get_dtype_for_flashinfer (not imported: that module initialises CUDA state)
            kv_dtype = torch.float8_e5m2 if kv_cache_dtype == "fp8_e5m2" else torch.float8_e4m3fn
            k_cache, v_cache = k_raw.view(kv_dtype), v_raw.view(kv_dtype)
        pages = [(s + case.block_size - 1) // case.block_size for s in case.seq_lens]
        table = case.block_table.cpu()
        indptr = torch.tensor([0] + torch.cumsum(torch.tensor(pages), 0).tolist(), dtype=torch.int32)
        indices = torch.cat([table[i, :n] for i, n in enumerate(pages)]).to(device=dev, dtype=torch.int32)
        last = torch.tensor([(s - 1) % case.block_size + 1 for s in case.seq_lens], dtype=torch.int32)
        wrapper = BatchPrefillWithPagedKVCacheWrapper(self._workspace, "NHD", backend="auto")
        wrapper.plan(case.cu_seqlens_q.cpu(), indptr, indices, last, case.num_q_heads, case.num_kv_heads,
                     case.head_size, case.block_size, causal=case.causal, sm_scale=case.scale,
                     q_data_type=case.q.dtype, kv_data_type=kv_dtype)
        scales = {"k_scale": 1.0, "v_scale": 1.0} if _is_fp8(kv_cache_dtype) else {}
        kwargs = {"sinks": case.sinks} if case.sinks is not None else {}
        return wrapper.run(case.q, (k_cache, v_cache), **scales, **kwargs)


# ------------------------------------------------------------------------------------------------ FLEX_ATTENTION
class FlexKernel:
    """``torch.compile(flex_attention, fullgraph=True)`` (as vLLM compiles it) over the pages gathered per sequence,
    each sequence starting on a 16-token boundary, with a document mask; 16x16 kernel blocks as vLLM uses under
    batch invariance (plus ``IS_DIVISIBLE=False`` there)."""

    backend = "FLEX_ATTENTION"
    ALIGN = 16

    def __init__(self) -> None:
        self._compiled = None

    def unavailable_reason(self) -> str | None:
        try:
            from torch.nn.attention.flex_attention import create_block_mask, flex_attention  # noqa: F401
        except Exception as exc:  # noqa: BLE001
            return f"torch flex_attention does not import: {_first_line(exc)}"
        return None

    def run(self, case: PagedCase, *, kv_cache_dtype: str = "auto", batch_invariant: bool = False) -> torch.Tensor:
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention

        if _is_fp8(kv_cache_dtype):
            raise ValueError("FLEX_ATTENTION has no fp8 KV cache path")
        if self._compiled is None:
            self._compiled = torch.compile(flex_attention, fullgraph=True, dynamic=False)
        dev = case.q.device
        ks, vs, kv_doc, kv_pos, q_doc, q_pos = [], [], [], [], [], []
        for i, (n, length) in enumerate(zip(case.query_lens, case.seq_lens)):
            span = -(-length // self.ALIGN) * self.ALIGN
            blocks = case.block_table[i, : -(-length // case.block_size)].long()
            ks.append(case.k_cache[blocks].flatten(0, 1)[:span])  # whole pages, then trimmed to the 16-aligned span
            vs.append(case.v_cache[blocks].flatten(0, 1)[:span])
            kv_doc.append(torch.where(torch.arange(span, device=dev) < length, i, -1))
            kv_pos.append(torch.arange(span, device=dev))
            q_doc.append(torch.full((n,), i, device=dev))
            q_pos.append(torch.arange(length - n, length, device=dev))
        kv_doc_t, kv_pos_t = torch.cat(kv_doc), torch.cat(kv_pos)
        q_doc_t, q_pos_t = torch.cat(q_doc), torch.cat(q_pos)
        causal = case.causal

        def mask_mod(b, h, q_idx, kv_idx):  # noqa: ANN001
            same = q_doc_t[q_idx] == kv_doc_t[kv_idx]
            return same & (kv_pos_t[kv_idx] <= q_pos_t[q_idx]) if causal else same

        q_len, kv_len = q_doc_t.numel(), kv_doc_t.numel()
        mask = create_block_mask(mask_mod, None, None, q_len, kv_len, device=dev, BLOCK_SIZE=(16, 16))
        query = case.q.transpose(0, 1).unsqueeze(0)
        key = torch.cat(ks).transpose(0, 1).unsqueeze(0)
        value = torch.cat(vs).transpose(0, 1).unsqueeze(0)
        options: dict[str, Any] = {"FORCE_USE_FLEX_ATTENTION": True, "BLOCK_M": 16, "BLOCK_N": 16}
        if batch_invariant:
            options["IS_DIVISIBLE"] = False
        import torch._dynamo.config as dynamo_config

        # Never fall back to eager flex (a math reference, not the kernel) because of a recompile limit.
        with dynamo_config.patch(recompile_limit=128, fail_on_recompile_limit_hit=True):
            out = self._compiled(query, key, value, block_mask=mask, scale=case.scale,
                                 enable_gqa=case.num_q_heads != case.num_kv_heads, kernel_options=options)
        return out.squeeze(0).transpose(0, 1).contiguous()


KERNELS = {"FLASH_ATTN": FlashAttnKernel, "TRITON_ATTN": TritonKernel, "FLASHINFER": FlashInferKernel,
           "FLEX_ATTENTION": FlexKernel}


# ------------------------------------------------------------------------------------------------ the run
def _versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {"torch": torch.__version__, "cuda": torch.version.cuda}
    for dist in ("vllm", "triton", "flashinfer-python"):
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[dist] = None
    return out


def _say(msg: str) -> None:
    print(f"[verify] {msg}", file=sys.stderr, flush=True)


def verify_attention(platform: str, *, backends: tuple[str, ...] | None = None, device: torch.device | None = None,
                     kernels: dict[str, Any] | None = None, quiet: bool = False) -> dict[str, Any]:
    """Verify every row of ``platform`` (optionally only ``backends``) on this device; one report dict.

    Anything the kernels' Python layers print goes to stderr: stdout belongs to the caller's JSON."""
    with contextlib.redirect_stdout(sys.stderr):
        return _verify_attention(platform, backends, device, kernels, quiet)


def _verify_attention(platform: str, backends: tuple[str, ...] | None, device: torch.device | None,
                      kernels: dict[str, Any] | None, quiet: bool) -> dict[str, Any]:
    from portable_spec.vllm_adapter.tools.attention_agreement import observe_host_facts

    start = time.perf_counter()
    kernels = KERNELS if kernels is None else kernels
    report: dict[str, Any] = {"schema": SCHEMA, "platform": platform,
                              "date": datetime.datetime.now(datetime.timezone.utc).date().isoformat(),
                              "tolerances": {k: v.to_dict() for k, v in TOLERANCES.items()}, "backends": {}}
    if platform not in PLATFORMS:
        report.update(note=f"no attention capability rows for platform {platform!r}", **summarize({}))
        return report
    if device is None:
        device = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else None
    facts = observe_host_facts()
    report.update(device=torch.cuda.get_device_name(device) if device is not None and device.type == "cuda"
                  else str(device), capability=list(facts.capability) if facts.capability else None,
                  host_facts=facts.to_dict(), versions=_versions(),
                  env=envs.recorded((envs.VLLM_BATCH_INVARIANT_ENV, envs.FLASHINFER_WORKSPACE_ENV)))
    jobs = []
    for row in rows(platform):
        if backends and row.backend not in backends:
            continue
        caps = row.resolved(facts)
        kernel_cls = kernels.get(row.backend)
        if kernel_cls is None or platform not in DRIVEN_PLATFORMS.get(row.backend, ()) or device is None:
            why = ("no accelerator on this host" if device is None
                   else f"portable_spec has no kernel driver for {platform}/{row.backend}")
            report["backends"][row.backend] = {
                "status": "not-testable-here", "reason": why,
                "claims": [result(c, NOT_TESTABLE, why) for c, _, _ in plan_claims(caps)]}
        else:
            report["backends"][row.backend] = None  # keeps the table's order in the report
            jobs.append((row.backend, caps, kernel_cls))

    def one(backend: str, caps: Any, kernel: Any) -> dict[str, Any]:
        if not quiet:
            _say(f"{backend}: {len(plan_claims(caps))} claims")
        progress = None if quiet else (lambda r: _say(f"  {backend} {r['claim']}: {r['status']} "
                                                      f"({r['seconds']:.1f}s) {r['detail']}"))
        entry = verify_kernel(caps, kernel, device, progress)
        if entry["status"] == "unavailable" and not quiet:
            _say(f"  {backend} unavailable: {entry['reason']}")
        return entry

    # Kernels that build out of process (FlashInfer's nvcc JIT) run on a side thread while the others compile and
    # run here, so the slow build overlaps the rest instead of adding to it. Their imports happen here first
    # (unavailable_reason), so the two threads never import the same modules at once.
    background = {}
    for backend, caps, kernel_cls in jobs:
        if getattr(kernel_cls, "BUILDS_OUT_OF_PROCESS", False):
            kernel = kernel_cls()
            kernel.unavailable_reason()
            background[backend] = (caps, kernel)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        pending = {b: pool.submit(one, b, caps, kernel) for b, (caps, kernel) in background.items()}
        for backend, caps, kernel_cls in jobs:
            if backend not in pending:
                report["backends"][backend] = one(backend, caps, kernel_cls())
        for backend, future in pending.items():
            report["backends"][backend] = future.result()
    report.update(summarize(report["backends"]))
    report["seconds"] = round(time.perf_counter() - start, 1)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--platform", default="cuda", help="table platform whose rows to verify (default: cuda)")
    parser.add_argument("--backend", action="append", help="only these backends (repeatable)")
    add_json_flag(parser)
    args = parser.parse_args(argv)
    report = verify_attention(args.platform, backends=tuple(args.backend) if args.backend else None)
    emit(args, report, lambda r: json.dumps({k: r[k] for k in ("summary", "refuted")}, indent=2))
    code, message = refutation_exit(report)
    if message:
        print(f"portable-spec: {message}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
