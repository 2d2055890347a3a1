"""versions.json from the cpu lane's runs over the vLLM version span (ci/lanes/cpu.sh writes the inputs).

Usage: python ci/versions_report.py OUT --span TEST_PATH... [--lines]
OUT holds one folder per vLLM version with pytest's ``junit.xml`` and the version gate's verdicts (``gate.json``,
``python -m portable_spec.vllm_adapter.patch.version_gate`` run in that version's virtualenv). Prints versions.json,
or with ``--lines`` one line per version (what the lane log shows).

Per version: the torch it ran on, passed / failed / skipped / error counts of the span's tests (every version runs
them) and, where the whole suite ran (vLLM 0.26.0), of the whole suite; each skip reason with its count; the failing
tests; and what is unsupported there and why (the gate's one-line reasons).
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

OUTCOMES = ("passed", "failed", "skipped", "errors")


def cases(junit: Path) -> list[dict]:
    """Each test case: its module's path (``tests/test_x.py``), id, outcome and skip/failure message."""
    out = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        module = case.get("classname", "").split(".")
        path = "/".join(module[:2]) + ".py" if len(module) >= 2 else case.get("file", "")
        outcome, message = "passed", ""
        for child in case:
            tag = {"failure": "failed", "error": "errors", "skipped": "skipped"}.get(child.tag)
            if tag:
                outcome, message = tag, (child.get("message") or "").strip()
                break
        out.append({"path": path, "id": f"{path}::{case.get('name')}", "outcome": outcome, "message": message})
    return out


def counts(selected: list[dict]) -> dict[str, int]:
    tally = Counter(case["outcome"] for case in selected)
    return {outcome: tally.get(outcome, 0) for outcome in OUTCOMES}


def skip_reason(message: str) -> str:
    """pytest's skip message without its ``Skipped: `` prefix."""
    return message.removeprefix("Skipped: ").strip()


def version_entry(folder: Path, span: set[str]) -> dict:
    runs = cases(folder / "junit.xml")
    gate = json.loads((folder / "gate.json").read_text())
    span_runs = [case for case in runs if case["path"] in span]
    whole = {case["path"] for case in runs} - span
    entry = {
        "vllm": gate["vllm"], "torch": gate.get("torch"),
        "tests": "the whole suite (the main run)" if whole else "the span's tests (tests/version_span.py)",
        "span": counts(span_runs),
    }
    if whole:
        entry["all"] = counts(runs)
    entry["skipped_because"] = dict(Counter(skip_reason(c["message"]) for c in runs if c["outcome"] == "skipped"))
    entry["failed_tests"] = [c["id"] for c in runs if c["outcome"] in ("failed", "errors")]
    entry["unsupported"] = {name: verdict["why_not"] for name, verdict in gate["features"].items()
                            if not verdict["supported"]}
    return entry


def commit() -> str | None:
    proc = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parent)
    return proc.stdout.strip() or None


def report(out: Path, span: list[str]) -> dict:
    folders = sorted((p for p in out.iterdir() if (p / "junit.xml").is_file()),
                     key=lambda p: tuple(int(x) for x in p.name.split(".")[:3]))
    return {"lane": "cpu-ci (ci/lanes/cpu.sh)", "date": datetime.date.today().isoformat(), "commit": commit(),
            "span_tests": span, "versions": {p.name: version_entry(p, set(span)) for p in folders}}


def lines(result: dict) -> list[str]:
    out = []
    for version, entry in result["versions"].items():
        span = entry["span"]
        text = (f"vLLM {version} (torch {entry['torch']}): span {span['passed']} passed, {span['failed']} failed, "
                f"{span['skipped']} skipped, {span['errors']} errors")
        if "all" in entry:
            text += ("; whole suite {passed} passed, {failed} failed, {skipped} skipped, {errors} errors"
                     .format(**entry["all"]))
        if entry["unsupported"]:
            text += f"; unsupported: {', '.join(entry['unsupported'])}"
        out.append(text)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--span", nargs="+", required=True, help="the span's test paths (tests/version_span.py)")
    parser.add_argument("--lines", action="store_true", help="one line per version instead of the JSON")
    args = parser.parse_args(argv)
    result = report(args.out, args.span)
    if args.lines:
        for line in lines(result):
            print(f"[cpu lane] {line}")
    else:
        print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
