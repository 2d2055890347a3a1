"""The version span on the GPU host (issue 26 item 4): what matters on a vLLM other than 0.26.0, inside ~8 minutes.

    python ci/gpu/version_span.py OUTDIR [--parts perfect] [--budget-s 450] [--dry-run]

Run by ``ci/lanes/cuda.sh OUTDIR version-span`` with the staged vLLM on PYTHONPATH (``VLLM_SITE=/tmp/site-0.28.0``).
First the version gate's verdicts for the installed vLLM (``OUTDIR/span/version_gate.json``); then these steps, one
after another, each under what is left of ``--budget-s``:

1. ``hook_points``: ``tests/test_vllm_hook_points.py`` against that vLLM on the host's torch (the census);
2. ``gpu_tests``: ``tests/gpu`` (graph pool, draft runner, kernel substitutes, musa-sim runner);
3. where the gate says our V1 FULL drafter exists there (0.26-0.28): the e2e matrix's ``--parts`` (default
   ``perfect``: our platform plugin boots vLLM, the V1 runner runs our FULL drafter graphs, greedy output equals
   no-spec, every position accepted), variants booted at once; where it does not (0.29+, Model Runner V2), one line
   with the gate's reason and ``ci/gpu/vllm_boot.py --quick`` instead (our platform plugin boots vLLM's own runner).

Writes ``OUTDIR/span/version_span.json`` (versions, each step's command, exit code and seconds) and exits 0 only when
every step ran and passed; 1 when one failed or was cut short; 2 when no vLLM is importable.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from portable_spec.vllm_adapter.patch import version_gate  # noqa: E402  (the repository root goes first)

PYTEST = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]


def plan(out: Path, parts: str, version: version_gate.Version) -> tuple[list[dict], str | None]:
    """The steps for ``version``, and the gate's one-line reason where our V1 drafter does not exist there."""
    steps = [
        {"name": "hook_points", "cmd": [*PYTEST, "-m", "not gpu", "tests/test_vllm_hook_points.py",
                                        f"--junitxml={out / 'hook_points.xml'}"]},
        {"name": "gpu_tests", "cmd": [*PYTEST, "-m", "gpu", "tests/gpu", f"--junitxml={out / 'gpu_tests.xml'}"]},
    ]
    reason = version_gate.why_not("v1_full_drafter", version)
    if reason is None:
        steps.append({"name": "e2e", "cmd": [sys.executable, "ci/gpu/v1_drafter_matrix.py", str(out / "e2e"),
                                             "--parts", parts, "--parallel", "2", "--concurrent-variants"]})
    else:
        steps.append({"name": "boot", "cmd": [sys.executable, "ci/gpu/vllm_boot.py", str(out / "boot"), "--quick",
                                              "--budget-s", "300"]})
    return steps, reason


def run(steps: list[dict], deadline: float) -> None:
    """Run each step under what is left of the budget; record its exit code (124: cut short) and seconds."""
    for step in steps:
        left = deadline - time.monotonic()
        if left < 30:
            step.update(rc=124, seconds=0, note="skipped: --budget-s is spent")
            print(f"=== span {step['name']}: skipped, --budget-s is spent ===", flush=True)
            continue
        print(f"=== span {step['name']}: {' '.join(step['cmd'])} ===", flush=True)
        started = time.monotonic()
        try:
            step["rc"] = subprocess.run(step["cmd"], cwd=ROOT, timeout=left).returncode
        except subprocess.TimeoutExpired:
            step["rc"], step["note"] = 124, "cut short at --budget-s"
        step["seconds"] = round(time.monotonic() - started)
        print(f"=== span {step['name']}: exit {step['rc']} in {step['seconds']} s ===", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("outdir")
    parser.add_argument("--parts", default="perfect", help="e2e matrix parts where our V1 drafter exists")
    parser.add_argument("--budget-s", type=int, default=450, help="wall-clock seconds for every step together")
    parser.add_argument("--dry-run", action="store_true", help="print the plan as JSON and run nothing")
    args = parser.parse_args()
    version = version_gate.installed()
    if version is None:
        print("version_span: no vLLM importable; point PYTHONPATH at a staged one (ci/lanes/cuda.sh: VLLM_SITE=...)",
              file=sys.stderr)
        return 2
    out = Path(args.outdir) / "span"
    steps, reason = plan(out, args.parts, version)
    report = {"gate": version_gate.report(version), "steps": steps}
    if reason is not None:
        report["v1_full_drafter"] = reason
        print(f"portable_spec: {reason}", flush=True)
    if args.dry_run:
        print(json.dumps(report, indent=1))
        return 0
    out.mkdir(parents=True, exist_ok=True)
    (out / "version_gate.json").write_text(json.dumps(report["gate"], indent=1))
    run(steps, time.monotonic() + args.budget_s)
    report["ok"] = bool(steps) and all(step.get("rc") == 0 for step in steps)
    (out / "version_span.json").write_text(json.dumps(report, indent=1))
    print(f"=== span: {'passed' if report['ok'] else 'FAILED'} "
          f"({', '.join(str(s['name']) + '=' + str(s.get('rc')) for s in steps)}) on vLLM {report['gate']['vllm']}, "
          f"torch {report['gate']['torch']} ===", flush=True)
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
