"""What a row's claims have been checked against: the committed ``probe --verify`` reports in ``verified/``.

A row is "declared" until a report from a real device covers it; MUSA and ROCm rows stay "declared-only" because no
device of theirs is available to this project. Reports are the JSON that ``portable-spec probe --verify --json``
prints (the whole probe object, or just its ``attention_verify`` part).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from portable_spec.attention_caps.model import BackendCaps
from portable_spec.attention_caps.table import DEVICES_HERE

VERIFIED_DIR = Path(__file__).with_name("verified")
DECLARED_ONLY = "declared-only (no device here)"
DECLARED = "declared"
STATUSES = ("verified", "refuted", "unavailable", "not-testable-here")


def load_reports(directory: Path = VERIFIED_DIR) -> list[dict[str, Any]]:
    """Every committed verify report, newest date first. A file that is not a report is skipped."""
    reports = []
    for path in sorted(directory.glob("*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        data = data.get("attention_verify", data) if isinstance(data, dict) else None
        if isinstance(data, dict) and isinstance(data.get("backends"), dict):
            data.setdefault("_file", path.name)
            reports.append(data)
    return sorted(reports, key=lambda r: str(r.get("date", "")), reverse=True)


def counts(claims: list[dict[str, Any]]) -> dict[str, int]:
    return {s: sum(1 for c in claims if c.get("status") == s) for s in STATUSES}


def report_source(report: dict[str, Any]) -> dict[str, Any]:
    """Where a report was run: its file, device, vLLM version and date (``unknown`` where the report lacks one), so a
    reader can tell which vLLM a "verified" was true for."""
    return {"file": report.get("_file"), "device": report.get("device") or "unknown device",
            "vllm": (report.get("versions") or {}).get("vllm") or "unknown", "date": report.get("date") or "unknown"}


def verification_record(row: BackendCaps, reports: list[dict[str, Any]] | None = None) -> dict[str, Any] | None:
    """The newest report covering ``row``: its source, the outcome (``verified``, ``refuted`` or ``unavailable``),
    the claim counts, each claim's status and the refuted claims' names; None when no report covers the row."""
    if row.platform not in DEVICES_HERE:
        return None
    reports = load_reports() if reports is None else reports
    for report in reports:
        if report.get("platform") != row.platform or row.backend not in report["backends"]:
            continue
        entry = report["backends"][row.backend]
        claims = entry.get("claims") or []
        tally = counts(claims)
        outcome = "refuted" if tally["refuted"] else "verified" if tally["verified"] else "unavailable"
        return {**report_source(report), "outcome": outcome, "counts": tally,
                "claims": {c["claim"]: c.get("status") for c in claims},
                "refuted": [c["claim"] for c in claims if c.get("status") == "refuted"],
                "reason": entry.get("reason") or ("no claim could run" if outcome == "unavailable" else None)}
    return None


def verification_label(row: BackendCaps, reports: list[dict[str, Any]] | None = None) -> str:
    """One line saying how far this row's claims have been checked on a real device, and on which vLLM."""
    if row.platform not in DEVICES_HERE:
        return DECLARED_ONLY
    record = verification_record(row, reports)
    if record is None:
        return DECLARED
    where = f"{record['device']}, vLLM {record['vllm']}, {record['date']}"
    if record["outcome"] == "refuted":
        return f"refuted on {where}: {', '.join(record['refuted'])}"
    if record["outcome"] == "verified":
        rest = ", ".join(f"{n} {s}" for s, n in record["counts"].items() if n)
        return f"verified on {where} ({rest})"
    return f"{DECLARED} (unavailable on {where}: {record['reason']})"
