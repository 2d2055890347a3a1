"""Does a warm-up's Triton kernel built after an inductor kernel land where a restart looks for it, and does a
kernel first launched while serving find the launcher the warm-up built?

Run on the GPU host (no vLLM needed): ``python3 ci/gpu/triton_folder_probe.py OUT.json``. For each scope of the
warm-up's Triton folder it runs two fresh processes on one empty folder tree (``TRITON_HOME`` and
``TORCHINDUCTOR_CACHE_DIR`` under it, ``TRITON_CACHE_DIR`` unset, as a server starts):

* ``compiling``: ``torch.compile`` runs a function first (the model's compile: inductor sets ``TRITON_CACHE_DIR`` to
  its folder where unset), then, in the warm-up's scope, launches Triton kernel ``k1``, compiles (not launches) a
  sibling specialisation of it as vLLM's JIT warm-up registry does, compiles and runs a second function (an inductor
  kernel built during the warm-up, as vLLM's sampler and drafter code gives one) and launches kernel ``k2``; after the
  scope (serving) it launches the sibling, whose launcher, a C module keyed by its source alone, the scope built for
  ``k1``;
* ``loading``: the same without the two ``torch.compile`` calls (a restart loads the compiled model and builds no
  inductor kernel).

Scopes: ``unset`` (the variable unset for the warm-up, then put back: before session 43), ``restored`` (Triton's
default folder named for the warm-up, then put back: sessions 43 to 59) and ``named``
(``worker/triton_cache.serve_in_start_folder(None)``: Triton's default folder named from the warm-up on, kept).
Each build's name, whether it came from disk and the folder it was stored in or read from come from Triton's
compilation listener; each C build (``triton.runtime.build._build``) in the serving phase is counted with the folder
named then. Expected: ``unset`` stores ``k2`` in inductor's folder and the loading process compiles it again;
``named`` finds both on disk (``verdict``); the compiling process of ``unset`` and ``restored`` runs the C compiler
for the sibling's launcher while serving, ``named`` never does (``serving_verdict``). The exit code is 0 only where
``named`` passes both.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CHILD = r'''
import contextlib, json, os, sys
sys.path.insert(0, sys.argv[3])
import torch, triton, triton.language as tl
import triton.runtime.build as triton_build
from portable_spec.vllm_adapter.worker.triton_cache import serve_in_start_folder, tritons_default_folder

builds = []
def listen(src, metadata, metadata_group, times, cache_hit):
    name = getattr(getattr(src, "fn", None), "__name__", "")
    paths = list((metadata_group or {}).values())
    builds.append({"name": name, "from_disk": bool(cache_hit), "key": metadata.get("hash"),
                   "folder": os.path.dirname(os.path.dirname(paths[0])) if paths else None})
triton.knobs.compilation.listener = listen

c_builds = []  # one entry per C build (a launcher compiled), with the folder named then
real_build = triton_build._build
def counted_build(*args, **kwargs):
    c_builds.append(os.environ.get("TRITON_CACHE_DIR"))
    return real_build(*args, **kwargs)
triton_build._build = counted_build

@contextlib.contextmanager
def restored_scope():
    before = os.environ.get("TRITON_CACHE_DIR")
    os.environ["TRITON_CACHE_DIR"] = tritons_default_folder()
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TRITON_CACHE_DIR", None)
        else:
            os.environ["TRITON_CACHE_DIR"] = before

@contextlib.contextmanager
def named_scope():
    serve_in_start_folder(None)
    yield

@contextlib.contextmanager
def unset_scope():
    before = os.environ.pop("TRITON_CACHE_DIR", None)
    try:
        yield
    finally:
        if before is not None:
            os.environ["TRITON_CACHE_DIR"] = before

@triton.jit
def k1(x, y, n, scale, B: tl.constexpr):  # a float argument: no inductor kernel here shares its launcher
    i = tl.program_id(0) * B + tl.arange(0, B)
    m = i < n
    tl.store(y + i, tl.load(x + i, mask=m) * scale, mask=m)

@triton.jit
def k2(x, y, n, B: tl.constexpr):
    i = tl.program_id(0) * B + tl.arange(0, B)
    m = i < n
    tl.store(y + i, tl.load(x + i, mask=m) + 3, mask=m)

role, scope = sys.argv[1], sys.argv[2]
x = torch.ones(1000, device="cuda"); y = torch.empty_like(x)
if role == "compiling":
    torch.compile(lambda a: (a * 3).sin() + 1)(x); torch.cuda.synchronize()
after_model_compile = os.environ.get("TRITON_CACHE_DIR")
scopes = {"unset": unset_scope, "restored": restored_scope, "named": named_scope}
with scopes[scope]():
    k1[(8,)](x, y, 1000, 2.0, B=128)
    k1.warmup(x, y, 1024, 2.0, B=128, grid=(8,))  # the sibling: compiled, its launcher not built
    if role == "compiling":
        torch.compile(lambda a: (a - 1).cos() * 2)(x)
    k2[(8,)](x, y, 1000, B=128)
    torch.cuda.synchronize()
    inside = os.environ.get("TRITON_CACHE_DIR")
before_serving = len(c_builds)
k1[(8,)](x, y, 1024, 2.0, B=128)  # serving's first launch of the sibling
torch.cuda.synchronize()
print(json.dumps({"after_model_compile": after_model_compile, "at_scope_end": inside,
                  "after_scope": os.environ.get("TRITON_CACHE_DIR"), "builds": builds,
                  "c_builds_in_scope": len(c_builds[:before_serving]), "serving_launches": 1,
                  "serving_c_builds": c_builds[before_serving:]}))
'''


def run_child(role: str, scope: str, base: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_CACHE_DIR"}
    env.update(TRITON_HOME=str(base / "home"), TORCHINDUCTOR_CACHE_DIR=str(base / "inductor"))
    script = base / "child.py"  # Triton reads a kernel's source from its file: no ``python -c``
    script.write_text(CHILD)
    done = subprocess.run([sys.executable, str(script), role, scope, str(ROOT)], env=env, capture_output=True,
                          text=True, timeout=240)
    out = {"role": role, "scope": scope, "rc": done.returncode}
    try:
        out["child"] = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        out["stderr_tail"] = done.stderr[-2000:]
    return out


PROBED = ("k1", "k2")


def probed_builds(run: dict) -> dict[str, dict]:
    """The run's builds of the probed kernels by name (the first of each: inductor's own kernels are left out)."""
    found: dict[str, dict] = {}
    for build in (run.get("child") or {}).get("builds") or []:
        if build.get("name") in PROBED:
            found.setdefault(build["name"], build)
    return found


def verdict(report: dict) -> dict:
    """What the two scopes showed, judged from the builds alone; ``compared`` counts the probed builds read.

    ``named_finds_both_on_disk`` (the fix holds) needs, in the ``named`` scope, both processes to have run (rc 0),
    the compiling one to have built ``k1`` and ``k2`` in one folder, and the loading one to have read both from disk
    in that same folder. ``unset_loading_compiled`` lists what the loading process compiled again in the ``unset``
    scope (``["k2"]`` is the restart's miss reproduced; empty says the host does not show it). A run or build that is
    missing fails the first and leaves the second None."""
    compared = 0
    outcome: dict = {"named_finds_both_on_disk": False, "unset_loading_compiled": None, "problems": []}
    for scope in ("named", "unset"):
        runs = {run.get("role"): run for run in report.get("scopes", {}).get(scope) or []}
        compiling, loading = runs.get("compiling"), runs.get("loading")
        if not compiling or not loading or compiling.get("rc") != 0 or loading.get("rc") != 0:
            outcome["problems"].append(f"{scope}: a process is missing or failed")
            continue
        built, loaded = probed_builds(compiling), probed_builds(loading)
        compared += len(built) + len(loaded)
        if set(built) != set(PROBED) or set(loaded) != set(PROBED):
            outcome["problems"].append(f"{scope}: builds missing (compiling {sorted(built)}, loading {sorted(loaded)})")
            continue
        if scope == "unset":
            outcome["unset_loading_compiled"] = [name for name in PROBED if not loaded[name]["from_disk"]]
            continue
        folders = {built[name]["folder"] for name in PROBED}
        outcome["named_finds_both_on_disk"] = (
            len(folders) == 1 and not any(built[name]["from_disk"] for name in PROBED)
            and all(loaded[name]["from_disk"] and loaded[name]["folder"] in folders for name in PROBED))
    outcome["compared"] = compared
    return outcome


SCOPES = ("unset", "restored", "named")


def serving_verdict(report: dict) -> dict:
    """How many launchers each scope's processes compiled while serving; ``compared`` counts the processes read.

    ``named_serves_without_c_builds`` (the fix holds) needs both ``named`` processes to have run (rc 0) and launched
    the sibling while serving with no C build then, and the ``restored`` compiling process to have run the C compiler
    then (the control: a probe that sees no build anywhere proves nothing). ``c_builds_while_serving`` maps
    ``scope/role`` to the count (None where the process is missing or failed): 1 in ``restored/compiling`` is the
    pause's mechanism reproduced."""
    counts: dict[str, int | None] = {}
    for scope in SCOPES:
        runs = {run.get("role"): run for run in report.get("scopes", {}).get(scope) or []}
        for role in ("compiling", "loading"):
            run = runs.get(role) or {}
            child = run.get("child") or {}
            ok = run.get("rc") == 0 and isinstance(child.get("serving_c_builds"), list) \
                and child.get("serving_launches", 0) >= 1
            counts[f"{scope}/{role}"] = len(child["serving_c_builds"]) if ok else None
    named = [counts["named/compiling"], counts["named/loading"]]
    control = counts["restored/compiling"]
    return {"named_serves_without_c_builds": named == [0, 0] and bool(control),
            "c_builds_while_serving": counts, "compared": sum(c is not None for c in counts.values())}


def main(out_path: str) -> int:
    import torch
    import triton

    report = {"torch": torch.__version__, "triton": triton.__version__, "scopes": {}}
    for scope in SCOPES:
        with tempfile.TemporaryDirectory() as tmp:
            base = Path(tmp)
            runs = [run_child(role, scope, base) for role in ("compiling", "loading")]
            for run in runs:  # folders relative to the probe's tree, so two scopes compare
                for build in (run.get("child") or {}).get("builds") or []:
                    if build.get("folder"):
                        build["folder"] = os.path.relpath(build["folder"], base)
                child = run.get("child") or {}
                for key in ("after_model_compile", "at_scope_end", "after_scope"):
                    if child.get(key):
                        child[key] = os.path.relpath(child[key], base)
            report["scopes"][scope] = runs
    report["verdict"] = verdict(report)
    report["serving_verdict"] = serving_verdict(report)
    Path(out_path).write_text(json.dumps(report, indent=1))
    for scope, runs in report["scopes"].items():
        for run in runs:
            builds = (run.get("child") or {}).get("builds") or []
            line = ", ".join(f"{b['name']} {'disk' if b['from_disk'] else 'compiled'} in {b['folder']}"
                             for b in builds if b["name"] in PROBED)
            print(f"{scope:6} {run['role']:9} rc={run['rc']}: {line or run.get('stderr_tail', '')[-300:]}")
    print(json.dumps(report["verdict"]))
    print(json.dumps(report["serving_verdict"]))
    fixed = report["verdict"]["named_finds_both_on_disk"] and report["serving_verdict"]["named_serves_without_c_builds"]
    return 0 if fixed else 1


if __name__ == "__main__":
    with contextlib.suppress(BrokenPipeError):
        sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "triton_folder_probe.json"))
