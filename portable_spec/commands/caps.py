"""``portable-spec caps``: the declared attention-backend capability table, for any platform, no device needed; for a
platform whose vLLM port selects from the table (MUSA), which backend it picks with and without vendor attention.
Each row says whether a committed ``probe --verify`` report (``attention_caps/verified/``) checked its claims on a real
device, which device and which vLLM: a claim verified on one vLLM is only declared for another."""

from __future__ import annotations

import argparse
from typing import Any

from portable_spec.commands._common import platform_flag
from portable_spec.attention_caps import CLAIM_FIELDS, PLATFORMS, VLLM_VERSION, rows, verification_label
from portable_spec.attention_caps.model import CONDITIONS, describe_claim
from portable_spec.attention_caps.platform_pick import attention_picks, render_picks
from portable_spec.attention_caps.verification import load_reports, report_source, verification_record
from portable_spec.output import add_json_flag, emit


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("caps", help="print the declared attention-backend capabilities (no device needed)")
    parser.add_argument("--platform", metavar="P", type=platform_flag, help=f"only this platform's rows: one of {', '.join(PLATFORMS)}")
    parser.add_argument("--backend", metavar="B", help="only this vLLM backend (e.g. FLASH_ATTN, TRITON_ATTN)")
    add_json_flag(parser)
    parser.set_defaults(func=run)


def caps_payload(platform: str | None = None, backend: str | None = None) -> dict[str, Any]:
    reports = load_reports()
    out = []
    for row in rows(platform, backend):
        entry = row.to_dict()
        entry["verification"] = verification_label(row, reports)
        entry["verified_by"] = verification_record(row, reports)
        out.append(entry)
    payload = {"vllm_version": VLLM_VERSION, "conditions": {k: v[0] for k, v in CONDITIONS.items()}, "rows": out,
               "verify_reports": [{**report_source(r), "platform": r.get("platform"), "summary": r.get("summary")}
                                  for r in reports]}
    picks = attention_picks(platform) if platform and not backend else None  # a pick is among all rows
    if picks:
        payload["selection"] = picks
    return payload


def render(payload: dict[str, Any]) -> str:
    from portable_spec.attention_caps import get_row

    lines = [f"attention backend capabilities (declared against vLLM {payload['vllm_version']})"]
    for report in payload["verify_reports"]:
        tally = ", ".join(f"{n} {s}" for s, n in (report["summary"] or {}).items() if n) or "no claim counts"
        lines.append(f"checked on a device: {report['platform']} on {report['device']}, vLLM {report['vllm']}, "
                     f"{report['date']} ({tally}; verified/{report['file']})")
    for entry in payload["rows"]:
        row = get_row(entry["platform"], entry["backend"])
        lines.append("")
        lines.append(f"{row.platform} / {row.backend}  [{entry['verification']}]")
        lines.append(f"  class: {row.class_path or '(not shipped here)'}"
                     + (f"   requires: {', '.join(row.requires)}" if row.requires else ""))
        if row.vendor_class:
            lines.append(f"  vendor class: {row.vendor_class}")
        for name in CLAIM_FIELDS:
            lines.append(f"  {name.replace('_', ' ')}: {describe_claim(getattr(row, name))}")
        lines.append(f"  source: {row.source}")
        if entry["verified_by"]:
            lines.append(f"  on the device: {_claims_by_status(entry['verified_by']['claims'])}")
        lines.extend(f"  note: {note}" for note in row.notes)
    if "selection" in payload:
        lines += ["", render_picks(payload["rows"][0]["platform"], payload["selection"])]
    used = sorted({c for e in payload["rows"] for c in _conditions_of(e)})
    if used:
        lines.append("")
        lines.extend(f"with {name}: {payload['conditions'][name]}" for name in used)
    return "\n".join(lines)


def _claims_by_status(claims: dict[str, str]) -> str:
    """``verified non_causal, head_size=128; not-testable-here graph_support=ALWAYS``: each status with its claims."""
    by_status: dict[str, list[str]] = {}
    for claim, status in claims.items():
        by_status.setdefault(status, []).append(claim)
    return "; ".join(f"{status} {', '.join(names)}" for status, names in by_status.items())


def _conditions_of(entry: dict[str, Any]) -> list[str]:
    return [entry[f]["when"] for f in CLAIM_FIELDS if isinstance(entry[f], dict) and "when" in entry[f]]


def run(args: argparse.Namespace) -> int:
    emit(args, caps_payload(args.platform, args.backend), render)
    return 0
