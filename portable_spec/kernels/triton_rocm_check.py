"""The AMD compile check: every Triton kernel of the ROCm serving path (``triton_table_rocm``) compiled ahead of time
for AMD targets (and sm_90 for comparison) with the installed Triton, on a machine with no GPU and no ROCm.

Triton 3.3 and later ship their AMD backend in the pip wheel and link it in-process, so ``triton.compile`` runs every
stage (TTIR, TTGIR with the AMD passes, LLVM IR, AMDGCN, the HSACO code object) on a CPU. A compile proves a kernel
gets through Triton's AMD passes and code generation to a loadable binary; it proves nothing at run time (results,
speed, what the HIP runtime or a driver would say). The compile runs in the Triton-check worker's subprocess (vLLM is
imported only there), with the interpreter running this command.
"""

from __future__ import annotations

import sys
from typing import Any

from portable_spec.errors import PortableSpecError
from portable_spec.kernels.triton_check import run_worker, triton_version
from portable_spec.kernels.triton_table_rocm import SERVED, TARGETS, rocm_rows

PROVES = ("a compile proves the kernel gets through Triton's AMD passes and code generation to a loadable code "
          "object for the target; it proves nothing at run time (results, speed, the HIP runtime)")
NOT_SERVED = "not served on this target"
_FIX = "install the cpu lane's triton (pip install triton==3.6.0; its wheel carries the AMD backend)"


def checked_targets(names: list[str]) -> list[str]:
    """``--target`` values, validated and deduplicated in order; an unknown one is a one-line error naming the
    valid ones."""
    unknown = [n for n in names if n not in TARGETS]
    if unknown:
        raise PortableSpecError(f"unknown --target {unknown[0]!r}; valid choices: {', '.join(TARGETS)}")
    return list(dict.fromkeys(names))


def _check_triton() -> str:
    version = triton_version(sys.executable)
    major, minor = (int(p) for p in version.split(".")[:2])
    if (major, minor) < (3, 3):
        raise PortableSpecError(f"--target needs triton 3.3 or later with its AMD backend ({sys.executable} has "
                                f"triton {version}); {_FIX}")
    return version


def _cell(result: dict[str, Any], served: bool) -> dict[str, Any]:
    status = "ok" if result["verdict"] == "ok" else ("FAILED" if served else NOT_SERVED)
    return {**result, "served": served, "status": status}


def merge(worker: dict[str, Any], targets: list[str]) -> dict[str, Any]:
    """Rows with one cell per target (``ok``, ``FAILED`` where ROCm serves the target and type, else ``not served on
    this target``), the counts, and ``green``: every compile ROCm serves passed, and there was one to pass."""
    rows = []
    for row in rocm_rows():
        results = worker["rows"].get(row.key)
        if results is None:
            continue
        rows.append({"kernel": row.key, "ref": row.case.ref, "source": row.source, "fp8_kv": row.fp8_kv,
                     "options": row.case.options, "launched_at": row.case.launched_at,
                     "targets": {t: _cell(results[t], row.served(t)) for t in targets}})
    cells = [(r["kernel"], t, c) for r in rows for t, c in r["targets"].items()]
    served = [(k, t, c) for k, t, c in cells if c["served"]]
    failed = [f"{k} on {t}" for k, t, c in served if c["verdict"] != "ok"]
    return {
        "check": "rocm_compile", "proves": PROVES, "triton": worker["triton"], "python": worker["python"],
        "vllm": worker.get("vllm"), "targets": targets, "served_fp8": {t: SERVED[t] for t in targets if t in SERVED},
        "substitutes_bound": worker.get("bound_targets", []), "kernels": rows,
        "compiled": len(cells), "served_compiled": len(served), "failed_served": failed,
        "not_served_failures": [f"{k} on {t}" for k, t, c in cells if c["status"] == NOT_SERVED],
        "seconds": round(sum(c.get("seconds", 0.0) for _, _, c in cells), 1),
        "green": bool(served) and not failed,
    }


def run_rocm_check(targets: list[str], only: list[str] | None = None) -> dict[str, Any]:
    """The check over ``targets`` (``TARGETS`` names), all rows or the ``only`` keys."""
    targets = checked_targets(targets)
    keys = [r.key for r in rocm_rows()]
    unknown = [k for k in only or () if k not in keys]
    if unknown:
        raise PortableSpecError(f"unknown kernel {unknown[0]!r}; valid choices: {', '.join(keys)}")
    _check_triton()
    extra = tuple(a for t in targets for a in ("--target", t))
    return merge(run_worker(sys.executable, "rocm", only, timeout=1800, extra_args=extra), targets)


def _spills(cell: dict[str, Any]) -> int:
    regs = cell.get("registers") or {}
    return regs.get("vgpr_spill_count", 0) + regs.get("sgpr_spill_count", 0)


def _registers(cell: dict[str, Any]) -> str:
    regs = cell.get("registers")
    if not regs:
        return "-"
    return f"{regs.get('vgpr_count', '?')}v/{regs.get('sgpr_count', '?')}s, {_spills(cell)} spilled"


def _summary(report: dict[str, Any]) -> list[str]:
    served = ", ".join(f"{t} ({fp8})" for t, fp8 in report["served_fp8"].items()) or "none"
    return [f"triton {report['triton']} ({report['python']}), vLLM {report['vllm']}, targets "
            f"{', '.join(report['targets'])}; ROCm serves (fp8 KV type): {served}",
            f"{len(report['kernels'])} rows, {report['compiled']} compiles ({report['served_compiled']} on a target "
            f"ROCm serves) in {report['seconds']} s; ROCm substitution sites bound: {len(report['substitutes_bound'])}",
            report["proves"]]


def render_text(report: dict[str, Any]) -> str:
    rows, targets = report["kernels"], report["targets"]
    width = max([len(r["kernel"]) for r in rows] + [6]) + 2
    lines = ["ROCm-path Triton kernels compiled for AMD targets", *_summary(report), "",
             f"{'kernel':<{width}}" + "".join(f"{t:<28}" for t in targets)]
    for r in rows:
        lines.append(f"{r['kernel']:<{width}}" + "".join(f"{r['targets'][t]['status']:<28}" for t in targets))
    errors = [(r["kernel"], t, c) for r in rows for t, c in r["targets"].items() if c["verdict"] != "ok"]
    if errors:
        lines += ["", "first errors:"]
        lines += [f"  {k} on {t} ({c['status']}): {c['first_error']}" for k, t, c in errors]
    spilled = [(r["kernel"], t, c) for r in rows for t, c in r["targets"].items() if _spills(c)]
    lines += ["", f"register spills: {len(spilled)} compiles spill"
              + "".join(f"\n  {k} on {t}: {_registers(c)}" for k, t, c in spilled)]
    failed = ", ".join(report["failed_served"]) or "no compile on a target ROCm serves"
    lines.append("result: " + ("green: every compile on a target ROCm serves passed" if report["green"] else
                               f"NOT green: {failed}"))
    return "\n".join(lines)


def render_markdown(report: dict[str, Any]) -> str:
    targets = report["targets"]
    lines = ["## ROCm-path Triton kernels compiled for AMD targets", "", *(f"- {ln}" for ln in _summary(report)), "",
             "| kernel | launched at | " + " | ".join(targets) + " | first error |",
             "|---|---|" + "---|" * len(targets) + "---|"]
    for r in report["kernels"]:
        cells = [f"{c['status']} ({_registers(c)})" if c.get("registers") else c["status"]
                 for c in (r["targets"][t] for t in targets)]
        errors = "; ".join(f"{t}: {c['first_error']}" for t, c in r["targets"].items() if c["first_error"])
        lines.append(f"| `{r['kernel']}` | {r['launched_at']} | " + " | ".join(cells)
                     + f" | {errors.replace('|', '/') or '-'} |")
    lines += ["", "green (every compile on a target ROCm serves passed): " + ("yes" if report["green"] else "no")]
    return "\n".join(lines)
