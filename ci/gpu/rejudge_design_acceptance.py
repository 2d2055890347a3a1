"""Re-judge ``acceptance_as_designed`` in committed e2e JSON with the current definition (``harness.e2e.exactness``).

The first H100 run of the context pairs (2026-11-25) judged the designed acceptance on vLLM's per-position *rates*;
those divide by every verified draft window, so the windows a request's end cuts short (``max_tokens`` reached
inside one, drafts trimmed at ``max_model_len``) made vLLM's own eager drafter fail a perfect head's design by one
draft in 120. The check now reads the accepted-token counts and allows one cut window per request. The GPU data is
unchanged; this script applies the corrected check to it and writes what it found next to the input.

    python ci/gpu/rejudge_design_acceptance.py RESULTS_DIR   -> RESULTS_DIR/rejudged_design_acceptance.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from portable_spec_harness.e2e import exactness


def rejudge(report: dict) -> dict[str, dict]:
    designed = report.get("expected_acceptance_per_position")
    out = {}
    for row in report.get("results", []):
        if row.get("variant") in ("eager_drafter", "full_drafter") and "error" not in row:
            name = f"{row['variant']}_s{row.get('seed')}_{exactness.DESIGN_ACCEPTANCE}"
            out[name] = exactness.acceptance_as_designed(row.get("acceptance_counts"), designed,
                                                         len(row.get("outputs") or ())).as_json()
    return out


def main(argv: list[str]) -> int:
    folder = Path(argv[1])
    found = {}
    for path in sorted(folder.glob("v1_drafter_e2e_*.json")):
        report = json.loads(path.read_text())
        if not any(k.endswith(exactness.DESIGN_ACCEPTANCE) for k in report.get("checks", {})):
            continue
        found[path.name] = {"recorded": {k: v for k, v in report["checks"].items()
                                         if k.endswith(exactness.DESIGN_ACCEPTANCE)},
                            "rejudged": rejudge(report)}
    (folder / "rejudged_design_acceptance.json").write_text(json.dumps(found, indent=1))
    for name, verdicts in found.items():
        print(name, {k: v["ok"] for k, v in verdicts["rejudged"].items()})
    return 0 if found else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
