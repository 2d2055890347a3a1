"""ci/versions_report.py: versions.json from the lane's JUnit XML and version-gate verdicts, counted per version."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPAN = ["tests/test_a.py"]


def load_report():
    spec = importlib.util.spec_from_file_location("versions_report", ROOT / "ci" / "versions_report.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_version(out: Path, version: str, cases: str, unsupported: dict[str, str]) -> None:
    folder = out / version
    folder.mkdir(parents=True)
    (folder / "junit.xml").write_text(f'<testsuites><testsuite name="pytest">{cases}</testsuite></testsuites>')
    features = {"f": {"supported": True, "what": "x"}} | {
        name: {"supported": False, "what": "x", "why_not": why} for name, why in unsupported.items()}
    (folder / "gate.json").write_text(json.dumps({"vllm": version, "torch": "2.13.0+cpu", "features": features}))


def test_counts_span_and_whole_suite_per_version_with_skip_reasons(tmp_path):
    write_version(tmp_path, "0.26.0", '<testcase classname="tests.test_a" name="t1"/>'
                  '<testcase classname="tests.test_a" name="t2"><failure message="boom"/></testcase>'
                  '<testcase classname="tests.test_b" name="t3"><skipped message="Skipped: no GPU"/></testcase>', {})
    write_version(tmp_path, "0.33.0", '<testcase classname="tests.test_a" name="t1"/>'
                  '<testcase classname="tests.test_a" name="t2"><skipped message="v1 gone"/></testcase>',
                  {"v1": "v1 unsupported on vLLM 0.33.0: why"})
    write_version(tmp_path, "0.28.0", '<testcase classname="tests.test_a" name="t1"><error message="e"/></testcase>', {})
    report = load_report().report(tmp_path, SPAN)
    assert list(report["versions"]) == ["0.26.0", "0.28.0", "0.33.0"]  # numeric order
    main, mid, new = (report["versions"][v] for v in ("0.26.0", "0.28.0", "0.33.0"))
    assert main["span"] == {"passed": 1, "failed": 1, "skipped": 0, "errors": 0}
    assert main["all"] == {"passed": 1, "failed": 1, "skipped": 1, "errors": 0}
    assert main["skipped_because"] == {"no GPU": 1} and main["failed_tests"] == ["tests/test_a.py::t2"]
    assert mid["span"]["errors"] == 1 and "all" not in mid and mid["failed_tests"] == ["tests/test_a.py::t1"]
    assert new["span"] == {"passed": 1, "failed": 0, "skipped": 1, "errors": 0} and "all" not in new
    assert new["unsupported"] == {"v1": "v1 unsupported on vLLM 0.33.0: why"} and main["unsupported"] == {}
    lines = load_report().lines(report)
    assert lines[0].startswith("vLLM 0.26.0 (torch 2.13.0+cpu): span 1 passed, 1 failed, 0 skipped, 0 errors; whole")
    assert lines[2].endswith("; unsupported: v1")
