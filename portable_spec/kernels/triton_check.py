"""The Triton 3.2 front-end check: which kernels on the MUSA serving path a MUSA-like Triton rejects, as vLLM ships
them and with our substitutes bound.

Three layers, each run in its own subprocess (``triton_check_worker``; vLLM is imported only there): ``compile``
builds every kernel with upstream triton==3.2.0 for a CUDA target (the 3.2 virtualenv's interpreter, from
``--triton32-python`` or ``PORTABLE_SPEC_TRITON32_PYTHON``); ``compile-amd`` builds it with the same Triton for an AMD
target (``hip:gfx942``; Triton 3.2 links AMD code objects with ``ld.lld``, found by ``hip_lld``), because one backend's
passes accept what another's reject and MUSA's Triton has a backend of its own; ``static`` applies ``triton_rules``
(what MUSA's fork rejects beyond 3.2) with the main interpreter. A kernel passes only if every layer accepts it. It is
a proxy: MUSA's own backend may reject more.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from portable_spec import envs
from portable_spec.envs import HIP_LLD_ENV, TRITON32_PYTHON_ENV as ENV_VAR
from portable_spec.errors import PortableSpecError
from portable_spec.kernels.triton_rules import RULES
from portable_spec.kernels.triton_table import kernel_cases

TARGET = "cuda:90:32"
AMD_TARGET = "hip:gfx942:64"
LAYERS = ("compile", "compile-amd", "static")
PROXY = ("proxy: upstream triton 3.2.0 compiling for a CUDA sm_90 target and for an AMD gfx942 target (a kernel "
         "passes only if both backends accept it), plus static rules for what MUSA's Triton fork is known to reject "
         "beyond 3.2; MUSA's own backend may reject more, and only a MUSA host proves a kernel there")
_LLD_FIX = f"install Debian's lld package (apt-get install lld) or set {HIP_LLD_ENV} to an ld.lld"
_FIX = ("build it with ci/lanes/triton32_venv.sh (it prints the interpreter) and pass --triton32-python PATH or set "
        f"{ENV_VAR}")


def triton32_python(flag: str | None) -> str:
    """The 3.2 virtualenv's interpreter: ``--triton32-python``, else ``$PORTABLE_SPEC_TRITON32_PYTHON``."""
    path = flag or envs.triton32_python()
    if not path:
        raise PortableSpecError(f"--check-triton needs a Python with triton==3.2.0; {_FIX}")
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise PortableSpecError(f"{path!r} is not an executable Python interpreter; {_FIX}")
    return path


def _llvm_version(path: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"llvm-(\d+)", path)) or (0,)


def hip_lld() -> str:
    """The ``ld.lld`` Triton 3.2's AMD backend links with: ``$TRITON_HIP_LLD_PATH``, else ``ld.lld`` on ``PATH``, else
    the newest ``/usr/lib/llvm-*/bin/ld.lld`` (where Debian's versioned lld packages put it); a one-line error naming
    ``apt-get install lld`` when there is none."""
    path = envs.hip_lld_path()
    if path:
        if not os.path.isfile(path):
            raise PortableSpecError(f"{HIP_LLD_ENV}={path!r} is not a file; {_LLD_FIX}")
        return path
    found = shutil.which("ld.lld") or max(glob.glob("/usr/lib/llvm-*/bin/ld.lld"), key=_llvm_version, default=None)
    if not found:
        raise PortableSpecError(f"the Triton 3.2 check's AMD compile needs ld.lld and found none; {_LLD_FIX}")
    return found


def triton_version(python: str) -> str:
    """The Triton version ``python`` imports (one short subprocess), or a one-line error naming the fix."""
    code = "import triton; print(triton.__version__)"
    proc = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=120,
                          env={k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"})
    if proc.returncode != 0:
        raise PortableSpecError(f"{python} cannot import triton; {_FIX}")
    return proc.stdout.strip().splitlines()[-1]


def _package_root() -> str:
    return str(Path(__file__).resolve().parents[2])


def run_worker(python: str, layer: str, only: list[str] | None = None, timeout: int = 900,
               case_sources: tuple[str, ...] = (), extra_args: tuple[str, ...] = (),
               extra_env: dict[str, str] | None = None) -> dict[str, Any]:
    """One layer of the check in a subprocess (``extra_args`` appended to the worker's command line, ``extra_env``
    added to its environment); its JSON report."""
    cache = tempfile.mkdtemp(prefix="portable-spec-triton-cache-")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(PYTHONPATH=os.pathsep.join(p for p in (_package_root(), env.get("PYTHONPATH", "")) if p),
               VLLM_LOGGING_STREAM="ext://sys.stderr", VLLM_PLUGINS="", TRITON_CACHE_DIR=cache, **(extra_env or {}))
    cmd = [python, "-m", "portable_spec.vllm_adapter.tools.triton_check_worker", "--layer", layer]
    for key in only or ():
        cmd += ["--only", key]
    for source in case_sources:
        cmd += ["--cases", source]
    cmd += list(extra_args)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise PortableSpecError(f"the {layer} layer of the Triton check ran past {timeout} s; rerun with fewer "
                                "kernels (--only KEY)") from None
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise PortableSpecError(f"the {layer} layer of the Triton check failed with {python} (exit "
                                f"{proc.returncode}): {tail}; run {' '.join(cmd[1:])} with it to see why")
    return json.loads(lines[-1])


def _verdict(per_layer: dict[str, dict[str, Any]]) -> dict[str, Any]:
    rejecting = [layer for layer, r in per_layer.items() if r["verdict"] != "ok"]
    first = per_layer[rejecting[0]] if rejecting else None
    return {"verdict": ("error" if any(per_layer[la]["verdict"] == "error" for la in rejecting)
                        else "rejected" if rejecting else "ok"),
            "layers": rejecting, "first_error": first["first_error"] if first else None,
            "bound": next(iter(per_layer.values())).get("bound"), **per_layer}


def _same_rows_everywhere(reports: dict[str, dict[str, Any]]) -> None:
    """Every layer judged the same vLLM's rows. The compile layers run in the Triton 3.2 virtualenv, which has the
    vLLM of the interpreter it was built from: built from another version's, it would silently leave out the rows
    that version lacks (a check green on fewer kernels)."""
    versions = {layer: r.get("vllm") for layer, r in reports.items()}
    if len(set(versions.values())) > 1:
        raise PortableSpecError(
            f"the check's layers imported different vLLMs ({', '.join(f'{la} {v}' for la, v in versions.items())}): "
            f"build the Triton 3.2 virtualenv from this interpreter (ci/lanes/triton32_venv.sh {sys.executable}) "
            f"and pass it with --triton32-python or {ENV_VAR}")
    rows = {layer: set(r["raw"]) for layer, r in reports.items()}
    uneven = sorted(set().union(*rows.values()) - set.intersection(*rows.values())) if rows else []
    if uneven:
        raise PortableSpecError(f"the check's layers judged different rows ({', '.join(uneven[:3])}"
                                f"{' ...' if len(uneven) > 3 else ''} missing from some): run every layer with "
                                "the same --only and --cases")


def merge(reports: dict[str, dict[str, Any]], case_sources: tuple[str, ...] = ()) -> dict[str, Any]:
    """Rows (one per table entry) with the verdict as shipped and with substitutes bound, from the layer reports."""
    _same_rows_everywhere(reports)
    table = kernel_cases(case_sources)
    keys = [c.key for c in table if all(c.key in r["raw"] for r in reports.values())]
    if not keys:
        raise PortableSpecError(f"no kernel row was checked (layers {', '.join(reports)} returned none of this "
                                "vLLM's table)")
    cases = {c.key: c for c in table}
    rows = []
    for key in keys:
        case = cases[key]
        rows.append({"kernel": key, "ref": case.ref, "owner": case.owner, "musa_path": case.musa_path,
                     "launched_at": case.launched_at,
                     "as_shipped": _verdict({la: r["raw"][key] for la, r in reports.items()}),
                     "with_substitutes": _verdict({la: r["substituted"][key] for la, r in reports.items()})})
    still = [r["kernel"] for r in rows if r["musa_path"] and r["with_substitutes"]["verdict"] != "ok"]
    first = next(iter(reports.values()))
    return {
        "check": "triton32", "proxy": PROXY, "layers": list(reports),
        "compile": ({"triton": reports["compile"]["triton"], "target": TARGET, "python": reports["compile"]["python"]}
                    if "compile" in reports else None),
        "compile_amd": ({"triton": reports["compile-amd"]["triton"], "target": AMD_TARGET,
                         "python": reports["compile-amd"]["python"], "lld": reports["compile-amd"].get("lld")}
                        if "compile-amd" in reports else None),
        "static": ({"rules": {n: {"rejects": r.rejects, "evidence": r.evidence} for n, r in RULES.items()},
                    "triton": reports["static"]["triton"]} if "static" in reports else None),
        "vllm": first.get("vllm"),
        "substitutes_bound": first.get("bound_targets", []),
        "kernels": rows,
        "rejected_as_shipped": [r["kernel"] for r in rows if r["as_shipped"]["verdict"] != "ok"],
        "rejected_with_substitutes": [r["kernel"] for r in rows if r["with_substitutes"]["verdict"] != "ok"],
        "green": not still,
    }


def run_check(python: str, layers: tuple[str, ...] = LAYERS, only: list[str] | None = None,
              case_sources: tuple[str, ...] = ()) -> dict[str, Any]:
    """Every layer (compile and compile-amd with ``python``'s Triton, which must be 3.2.x; static with this
    interpreter), over the serving path's kernels and those ``case_sources`` add (``triton_table.kernel_cases``)."""
    table = kernel_cases(case_sources)
    unknown = [key for key in only or () if key not in {c.key for c in table}]
    if unknown:
        raise PortableSpecError(f"unknown kernel {unknown[0]!r}; valid choices: {', '.join(c.key for c in table)}")
    lld = hip_lld() if "compile-amd" in layers else None  # before minutes of compiling
    if {"compile", "compile-amd"} & set(layers):
        version = triton_version(python)
        if not version.startswith("3.2."):
            raise PortableSpecError(f"{python} has triton {version}, not 3.2.x; {_FIX}")
    reports = {}
    for layer in layers:
        amd = layer == "compile-amd"
        reports[layer] = run_worker(sys.executable if layer == "static" else python, layer, only,
                                    case_sources=case_sources, extra_env={HIP_LLD_ENV: lld} if amd and lld else None)
        if amd:
            reports[layer]["lld"] = lld
    return merge(reports, case_sources)
