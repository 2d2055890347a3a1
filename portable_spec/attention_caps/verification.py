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


def verification_label(row: BackendCaps, reports: list[dict[str, Any]] | None = None) -> str:
    """One line saying how far this row's claims have been checked on a real device."""
    if row.platform not in DEVICES_HERE:
        return DECLARED_ONLY
    reports = load_reports() if reports is None else reports
    for report in reports:
        if report.get("platform") != row.platform or row.backend not in report["backends"]:
            continue
        entry = report["backends"][row.backend]
        where = f"{report.get('device', 'unknown device')} {report.get('date', '')}".strip()
        claims = entry.get("claims") or []
        tally = counts(claims)
        if tally["refuted"]:
            names = ", ".join(c["claim"] for c in claims if c.get("status") == "refuted")
            return f"refuted on {where}: {names}"
        if tally["verified"]:
            rest = ", ".join(f"{n} {s}" for s, n in tally.items() if n)
            return f"verified on {where} ({rest})"
        return f"{DECLARED} (unavailable on {where}: {entry.get('reason') or 'no claim could run'})"
    return DECLARED
