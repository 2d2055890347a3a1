"""The musa-sim run on vLLM 0.28.0 as the README and docs state it, read back from the committed JSON: every part's
checks true (the draft model's from its re-run after the lane fix), the check totals the docs quote, and MRV2's live
graphs counted exactly (planned = captured through the simulated torch.musa). A changed number in either fails."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "bench" / "results" / "2026-11-29-h200-session26"
V1_CALLS = ("ms028v1a", "ms028v1b", "ms028dm")
MRV2_CALL = "ms028mrv2"


def parts(call: str) -> dict:
    report = json.loads((RUN / call / "musa_sim" / "musa_sim_e2e.json").read_text())
    assert report["vllm"] == "0.28.0" and report["device"] == "NVIDIA H200" and report["simulated"], call
    return report["parts"]


def judged(call: str) -> dict[str, dict]:
    """The parts a call judged (a part that failed before judging has no checks: the draft model's first run)."""
    return {name: p for name, p in parts(call).items() if p.get("checks")}


def test_every_v1_part_passed_with_the_total_the_docs_quote():
    v1 = {name: p for call in V1_CALLS for name, p in judged(call).items()}
    assert sorted(v1) == ["musa_sim_budget", "musa_sim_dflash", "musa_sim_draft_model", "musa_sim_eagle",
                          "musa_sim_eagle3", "musa_sim_eagle_attention"]
    failed = {name: [k for k, ok in p["checks"].items() if not ok] for name, p in v1.items()}
    assert not any(failed.values()), failed
    total = sum(len(p["checks"]) for p in v1.values())
    assert f"{total}/{total} checks" in (ROOT / "README.md").read_text()
    assert f"{total}/{total} checks" in (ROOT / "docs" / "platforms.md").read_text()
    assert parts("ms028v1a")["musa_sim_draft_model"]["error"].startswith("TypeError")  # as the results README says


def test_the_mrv2_parts_counted_their_live_graphs_exactly():
    mrv2 = judged(MRV2_CALL)
    counted = []
    for name in ("musa_sim_mrv2_eagle", "musa_sim_mrv2_dflash", "musa_sim_mrv2_budget"):
        checks = mrv2[name]["checks"]
        assert checks and all(checks.values()), name
        sims = [r for r in mrv2[name]["rows"] if r["variant"].startswith("musa_sim")]
        assert sims and all(r["mrv2_sizes"]["live_graphs"] == r["simulation"]["live_graphs"] for r in sims), name
        counted.append(str(sims[0]["mrv2_sizes"]["live_graphs"]))
    claim = " / ".join(counted)
    assert claim == "91 / 121 / 12"
    for doc in ("README.md", "docs/platforms.md", "bench/results/2026-11-29-h200-session26/README.md"):
        assert f"{claim} counted exactly" in (ROOT / doc).read_text(), doc
    assert f"{sum(len(p['checks']) for p in mrv2.values())})" in (ROOT / "README.md").read_text()
