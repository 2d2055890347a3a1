"""Agreement between the declared capability table and vLLM 0.26.0's real backend classes.

``observe_backend`` asks a real ``AttentionBackend`` subclass every question the table answers (its classmethods and
its metadata builder's graph support) in the table's vocabulary; ``disagreements`` compares a row, resolved for the
host's facts, claim by claim. The cpu lane runs this for every backend module that imports without a GPU; the cuda
lane runs it on the GPU, where the FlashAttention version and FlashInfer decide the device-dependent claims.

``python -m portable_spec.vllm_adapter.tools.attention_agreement --json`` prints the comparison for this host.
"""

from __future__ import annotations

import argparse
import os
import sys
import typing
from typing import Any

# vLLM logs to stdout unless told otherwise; --json output must be the only thing printed there.
os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")

import vllm  # noqa: E402,F401  (this module is one of the two places allowed to import vLLM)
from vllm.v1.attention.backends.registry import AttentionBackendEnum  # noqa: E402

from portable_spec.attention_caps import CLAIM_FIELDS, BackendCaps, HostFacts  # noqa: E402
from portable_spec.attention_caps.model import MM_PREFIX_TEXT_ONLY  # noqa: E402
from portable_spec.attention_caps.table import CLAIM_CHANGES, table_as_of  # noqa: E402
from portable_spec.vllm_adapter.patch import version_gate  # noqa: E402
from portable_spec.output import add_json_flag, emit  # noqa: E402

HEAD_SIZE_RANGE = range(1, 1025)
BLOCK_SIZE_PROBES = (1, 8, 16, 24, 32, 48, 64, 96, 128, 256, 512, 1024)
DTYPE_NAMES = ("float16", "bfloat16", "float32")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def load_class(class_path: str) -> type:
    from vllm.utils.import_utils import resolve_obj_by_qualname

    return resolve_obj_by_qualname(class_path)


def import_problem(class_path: str) -> str | None:
    """None when the backend class imports on this host, else the one-line reason."""
    try:
        load_class(class_path)
    except Exception as exc:  # noqa: BLE001 - any import failure means "does not import here"
        return _first_line(exc)
    return None


def observe_host_facts() -> HostFacts:
    """The facts the device-dependent claims depend on, as vLLM resolves them on this host."""
    from vllm.platforms import current_platform

    try:
        from vllm.v1.attention.backends.fa_utils import get_flash_attn_version, is_fa_version_supported

        fa_version = get_flash_attn_version()
        fa4 = bool(is_fa_version_supported(4))
    except Exception:  # noqa: BLE001 - no FlashAttention on this host
        fa_version, fa4 = None, False
    cap = current_platform.get_device_capability()
    capability = (cap.major, cap.minor) if cap is not None else None
    trtllm = False
    if capability is not None and capability[0] == 10:
        try:
            from vllm.utils.flashinfer import supports_trtllm_attention

            trtllm = bool(supports_trtllm_attention(is_prefill=True) and supports_trtllm_attention(is_prefill=False))
        except Exception:  # noqa: BLE001
            trtllm = False
    return HostFacts(fa_version=fa_version, fa4_available=fa4, capability=capability, trtllm_attention=trtllm)


def _block_entries(cls: type) -> list[Any]:
    from vllm.v1.attention.backend import MultipleOf

    return [{"multiple_of": s.base} if isinstance(s, MultipleOf) else int(s)
            for s in cls.get_supported_kernel_block_sizes()]


def _graph_support(cls: type) -> dict[str, Any]:
    builder = cls.get_builder_cls()
    out: dict[str, Any] = {"builder": f"{builder.__module__}.{builder.__qualname__}",
                           "class_attr": getattr(builder, "_cudagraph_support").name}
    try:
        # FlashAttention/Triton/Flex/ROCm builders ignore both arguments; FlashInfer's answers on SM90 before reading
        # them, and elsewhere needs a model config (recorded as not observable).
        out["level"] = builder.get_cudagraph_support(None, None).name
    except Exception as exc:  # noqa: BLE001
        out["level"] = None
        out["error"] = _first_line(exc)
    return out


def observe_backend(class_path: str) -> dict[str, Any]:
    """Every table claim as the real class states it on this host.

    Some classmethods consult the current vLLM config (FlashInfer's ``supports_sink`` asks whether TRT-LLM attention
    is forced), so the observation runs under a default ``VllmConfig``, as an engine with default settings would.
    """
    from vllm.config import VllmConfig, set_current_vllm_config

    with set_current_vllm_config(VllmConfig()):
        return _observe_backend(class_path)


def _observe_backend(class_path: str) -> dict[str, Any]:
    import torch
    from vllm.config.cache import CacheDType

    cls = load_class(class_path)
    listed = list(cls.get_supported_head_sizes())
    accepted = [h for h in HEAD_SIZE_RANGE if cls.supports_head_size(h)]
    observed: dict[str, Any] = {
        "class_path": f"{cls.__module__}.{cls.__qualname__}",
        "get_name": cls.get_name(),
        "head_sizes_accepted": accepted,
        "get_supported_head_sizes": listed,
        "dtypes": [d for d in DTYPE_NAMES if cls.supports_dtype(getattr(torch, d))],
        "kv_cache_dtypes": [d for d in typing.get_args(CacheDType) if cls.supports_kv_cache_dtype(d)],
        "kernel_block_sizes": _block_entries(cls),
        "block_sizes_accepted": [b for b in BLOCK_SIZE_PROBES if cls.supports_block_size(b)],
        "non_causal": bool(cls.supports_non_causal()),
        "mm_prefix": bool(cls.supports_mm_prefix()),
        "sinks": bool(cls.supports_sink()),
        "batch_invariance": bool(cls.supports_batch_invariance()),
        "per_head_quant_scales": bool(cls.supports_per_head_quant_scales()),
        "graph_support": _graph_support(cls),
    }
    if listed and set(accepted) != set(listed):
        observed["head_size_contradiction"] = head_size_contradiction(class_path, listed, accepted)
    return observed


def head_size_contradiction(class_path: str, listed: list[int], accepted: list[int]) -> dict[str, Any]:
    """Where ``get_supported_head_sizes()`` and ``supports_head_size()`` disagree, which one vLLM's own
    ``validate_configuration`` follows (asked with a size on which they differ)."""
    unlisted = [h for h in accepted if h not in listed]
    rejected = [h for h in listed if h not in accepted]
    probe = (unlisted or rejected)[0]
    try:
        follows_method = validate_head_size(class_path, probe) == (probe in accepted)
        uses = "supports_head_size" if follows_method else "get_supported_head_sizes"
    except Exception as exc:  # noqa: BLE001
        uses = f"unknown (validate_configuration raised {_first_line(exc)})"
    return {"get_supported_head_sizes": listed, "supports_head_size_accepts_unlisted": unlisted[:8],
            "supports_head_size_rejects_listed": rejected[:8], "probed_head_size": probe,
            "validate_configuration_uses": uses}


def validate_head_size(class_path: str, head_size: int) -> bool:
    """Whether vLLM's own ``validate_configuration`` accepts ``head_size`` (everything else at its easiest)."""
    import torch
    from vllm.platforms.interface import DeviceCapability

    cls = load_class(class_path)
    reasons = cls.validate_configuration(
        head_size=head_size, dtype=torch.bfloat16, kv_cache_dtype="auto", block_size=None, use_mla=False,
        has_sink=False, use_sparse=False, use_mm_prefix=False, use_per_head_quant_scales=False,
        device_capability=DeviceCapability(9, 0), attn_type="decoder")
    return "head_size not supported" not in reasons


def _declared_blocks(caps: BackendCaps) -> list[Any]:
    bs = caps.kernel_block_sizes
    return list(bs.values) + ([{"multiple_of": bs.multiple_of}] if bs.multiple_of else [])


def _span(sizes: list[int]) -> str:
    return f"{len(sizes)} sizes" + (f" ({sizes[0]}..{sizes[-1]})" if sizes else "")


def disagreements(row: BackendCaps, observed: dict[str, Any], facts: HostFacts,
                  claims: tuple[str, ...] = CLAIM_FIELDS) -> list[dict[str, Any]]:
    """Claims where the row (resolved for ``facts``) and the real class disagree; empty when they agree."""
    caps = row.resolved(facts)
    found: list[dict[str, Any]] = []

    def differ(claim: str, declared: Any, actual: Any) -> None:
        found.append({"claim": claim, "declared": declared, "vllm": actual,
                      "device_dependent": claim in row.device_dependent()})

    if "head_sizes" in claims:
        declared = [h for h in HEAD_SIZE_RANGE if caps.head_sizes.accepts(h)]
        if declared != observed["head_sizes_accepted"]:
            only_decl = sorted(set(declared) - set(observed["head_sizes_accepted"]))[:8]
            only_vllm = sorted(set(observed["head_sizes_accepted"]) - set(declared))[:8]
            differ("head_sizes", f"{caps.head_sizes.describe()}: {_span(declared)}, e.g. only here {only_decl}",
                   f"{_span(observed['head_sizes_accepted'])}, e.g. only in vLLM {only_vllm}")
    for name in ("dtypes", "kv_cache_dtypes"):
        if name in claims and set(getattr(caps, name)) != set(observed[name]):
            differ(name, sorted(getattr(caps, name)), sorted(observed[name]))
    if "kernel_block_sizes" in claims:
        declared_acc = [b for b in BLOCK_SIZE_PROBES if caps.kernel_block_sizes.accepts(b)]
        if _declared_blocks(caps) != observed["kernel_block_sizes"] or declared_acc != observed["block_sizes_accepted"]:
            differ("kernel_block_sizes", {"entries": _declared_blocks(caps), "accepted": declared_acc},
                   {"entries": observed["kernel_block_sizes"], "accepted": observed["block_sizes_accepted"]})
    for name in ("non_causal", "sinks", "batch_invariance", "per_head_quant_scales"):
        if name in claims and bool(getattr(caps, name)) != observed[name]:
            differ(name, getattr(caps, name), observed[name])
    if "mm_prefix" in claims:
        # "text-only" means the class says yes but only causal/window masks were validated.
        declared_flag = caps.mm_prefix is True or caps.mm_prefix == MM_PREFIX_TEXT_ONLY
        if declared_flag != observed["mm_prefix"]:
            differ("mm_prefix", caps.mm_prefix, observed["mm_prefix"])
    if "graph_support" in claims:
        level = observed["graph_support"].get("level")
        if level is not None and level != caps.graph_support:
            differ("graph_support", caps.graph_support, level)
    return found


def declared_table() -> tuple[BackendCaps, ...]:
    """The table as declared for the installed vLLM (claims that moved after 0.26.0 applied)."""
    return table_as_of(version_gate.pick(CLAIM_CHANGES))


def agreement_report(platforms: tuple[str, ...] = ("cuda", "rocm", "musa"),
                     backends: tuple[str, ...] | None = None) -> dict[str, Any]:
    """Observe and compare every row with a vLLM class on this host; rows whose class does not import say why."""
    facts = observe_host_facts()
    out: dict[str, Any] = {"vllm_version": vllm.__version__, "facts": facts.to_dict(), "rows": {}}
    for row in declared_table():
        if row.platform not in platforms or (backends and row.backend not in backends):
            continue
        entry: dict[str, Any] = {"class_path": row.class_path}
        if row.class_path is None:
            entry["skipped"] = "no vLLM class here (declared from " + row.source.split(" ")[0] + ")"
        elif (problem := import_problem(row.class_path)) is not None:
            entry["import_error"] = problem
        else:
            enum_path = AttentionBackendEnum[row.backend].value
            observed = observe_backend(row.class_path)
            entry.update(observed=observed, enum_class_path=enum_path,
                         disagreements=disagreements(row, observed, facts))
        out["rows"][row.key] = entry
    return out


def render_agreement(report: dict[str, Any]) -> str:
    lines = [f"vLLM {report['vllm_version']}, host facts {report['facts']}"]
    for key, entry in report["rows"].items():
        if "observed" not in entry:
            lines.append(f"{key}: {entry.get('import_error') or entry.get('skipped')}")
            continue
        bad = entry["disagreements"]
        lines.append(f"{key}: {'agrees' if not bad else 'DISAGREES'}")
        lines += [f"  {d['claim']}: declared {d['declared']} / vLLM {d['vllm']}" for d in bad]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--platform", action="append", help="table platform(s) to compare (default: all)")
    parser.add_argument("--backend", action="append", help="backend(s) to compare (default: all)")
    add_json_flag(parser)
    args = parser.parse_args(argv)
    report = agreement_report(tuple(args.platform or ("cuda", "rocm", "musa")),
                              tuple(args.backend) if args.backend else None)
    emit(args, report, render_agreement)
    rows = report["rows"].values()
    return 1 if any(e.get("disagreements") for e in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
