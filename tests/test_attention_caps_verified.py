"""The verified table ``caps`` ships (``portable_spec/attention_caps/verified/``): every JSON there is a ``probe
--verify`` report that parses, its claims are the ones the current table plans for the same host, and the CUDA rows
the README and ``docs/platforms.md`` call verified on the GPU are marked verified, with device and vLLM, in
``caps``'s text and JSON."""

from __future__ import annotations

import json
import re
from pathlib import Path

from portable_spec.attention_caps import get_row
from portable_spec.attention_caps.checks import plan_claims
from portable_spec.attention_caps.model import HostFacts
from portable_spec.attention_caps.verification import VERIFIED_DIR, load_reports
from portable_spec.cli import main

ROOT = Path(__file__).resolve().parents[1]
CUDA_BACKENDS = ("FLASH_ATTN", "FLASHINFER", "TRITON_ATTN", "FLEX_ATTENTION")
"""The CUDA rows the GPU lane's verify report covers (the docs' "33 claims verified")."""


def documented_verified_count() -> int:
    """The number of CUDA claims README.md and docs/platforms.md say the GPU verified (they must agree)."""
    found = []
    for doc in ("README.md", "docs/platforms.md"):
        found += [int(n) for n in re.findall(r"(\d+) (?:CUDA )?claims verified", (ROOT / doc).read_text())]
    assert len(found) >= 2 and len(set(found)) == 1, f"the docs' verified-claim counts: {found}"
    return found[0]


def test_every_shipped_json_is_a_report_that_parses():
    files = sorted(VERIFIED_DIR.glob("*.json"))
    reports = load_reports()
    assert files, f"no verify report in {VERIFIED_DIR}"
    assert sorted(r["_file"] for r in reports) == [f.name for f in files]  # none skipped as unreadable
    for report in reports:
        assert report["platform"] == "cuda" and report["device"] and report["versions"]["vllm"]
        assert report["backends"], report["_file"]


def test_shipped_claims_are_the_ones_the_table_plans_for_that_host():
    """A report of claims the table no longer makes would mark rows verified for claims nobody checked."""
    compared = 0
    for report in load_reports():
        facts = HostFacts(**{k: tuple(v) if isinstance(v, list) else v for k, v in report["host_facts"].items()})
        for backend, entry in report["backends"].items():
            planned = [name for name, _, _ in plan_claims(get_row(report["platform"], backend).resolved(facts))]
            assert [c["claim"] for c in entry["claims"]] == planned, (report["_file"], backend)
            compared += len(planned)
    assert compared > 0


def test_caps_marks_the_documented_cuda_rows_verified_with_device_and_vllm(capsys):
    assert main(["caps", "--platform", "cuda", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    rows = {r["backend"]: r for r in payload["rows"]}
    verified = 0
    for backend in CUDA_BACKENDS:
        record = rows[backend]["verified_by"]
        assert record and record["outcome"] == "verified", (backend, rows[backend]["verification"])
        assert record["device"] == "NVIDIA H100 80GB HBM3" and record["vllm"] == "0.26.0"
        assert rows[backend]["verification"].startswith("verified on NVIDIA H100 80GB HBM3, vLLM 0.26.0, ")
        verified += record["counts"]["verified"]
    assert verified == documented_verified_count()
    assert [r["vllm"] for r in payload["verify_reports"]] == ["0.26.0"]

    assert main(["caps", "--platform", "cuda"]) == 0
    text = capsys.readouterr().out
    assert "checked on a device: cuda on NVIDIA H100 80GB HBM3, vLLM 0.26.0" in text
    assert text.count("[verified on NVIDIA H100 80GB HBM3, vLLM 0.26.0, ") == len(CUDA_BACKENDS)
    assert text.count("  on the device: verified ") == len(CUDA_BACKENDS)
