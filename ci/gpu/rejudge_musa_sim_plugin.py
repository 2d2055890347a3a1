"""Re-judge the musa-sim plugin check in a committed ``musa_sim_e2e.json`` with the current definition
(``musa_sim_checks.platform_plugin_activated``).

The check first read vLLM's "Platform plugin portable_spec_musa_sim is activated" line. vLLM 0.33.0 resolves the
platform before an in-process engine configures its logging, so that line (and the plugin group's listing before it)
never reaches the log there, and every musa-sim part on 0.33.0 failed on it alone. The check now falls back to the
platform class vLLM resolved (only the musa-sim probe returns it) where the log has no plugin listing. The GPU data is
unchanged; this applies the current check to each stored row and writes what it found next to the input.

    python ci/gpu/rejudge_musa_sim_plugin.py musa_sim_e2e.json   -> rejudged_platform_plugin.json beside it
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from portable_spec_harness.e2e.musa_sim_checks import platform_plugin_activated

OLD = "log_names_platform_plugin"
NEW = "platform_plugin_activated"


def rejudge(report: dict) -> dict[str, dict]:
    """Per part: the recorded plugin checks, the rejudged ones, every other recorded check that is false, and
    whether the part passes with the rejudged checks (False when no row carried the old check)."""
    out = {}
    for name, part in report.get("parts", {}).items():
        recorded = part.get("checks", {})
        old = {k: v for k, v in recorded.items() if k.endswith("_" + OLD)}
        new = {}
        for row in part.get("rows", []):
            key = f"{row.get('variant')}_s{row.get('seed')}_"
            if key + OLD in old:
                new[key + NEW] = platform_plugin_activated(row)
        others_false = sorted(k for k, v in recorded.items() if not v and k not in old)
        out[name] = {"recorded": old, "rejudged": new, "other_checks_false": others_false,
                     "compared_rows": len(new),
                     "passes": bool(new) and len(new) == len(old) and all(new.values()) and not others_false}
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python ci/gpu/rejudge_musa_sim_plugin.py MUSA_SIM_E2E_JSON", file=sys.stderr)
        return 2
    path = Path(argv[1])
    found = rejudge(json.loads(path.read_text()))
    (path.parent / "rejudged_platform_plugin.json").write_text(json.dumps(found, indent=1) + "\n")
    for name, part in found.items():
        print(f"{name}: {part['compared_rows']} rows rejudged, passes: {part['passes']}")
    return 0 if found and all(part["passes"] for part in found.values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
