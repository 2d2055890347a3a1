"""``portable-spec kernels --check-triton --target``: the ROCm path's kernel rows against vLLM's source (every kernel
a ROCm-path module launches has a row or a reason), the fp8 rule against vLLM's and our port's, and, with the real
Triton (the cpu lane's 3.6, whose AMD backend links in-process), compiles that can fail: a broken kernel on gfx942,
the fnuz fp8 KV type on gfx942 and gfx90a, and the command's exit code."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import subprocess
import sys
import textwrap

import pytest
from kernel_rows import MRV2_ROOT, VLLM_ROOT, check_against_vllm, jit_names, launched_jit_kernels
from lane_tools import import_triton, missing

from portable_spec.kernels.triton_case import BASE, launched, resolved
from portable_spec.kernels.triton_rocm_check import NOT_SERVED, checked_targets, merge, render_markdown, render_text
from portable_spec.kernels.triton_table import VLLM_KERNELS
from portable_spec.kernels.triton_table_mrv2 import EXCLUDED as MRV2_EXCLUDED
from portable_spec.kernels.triton_table_mrv2 import EXCLUDED_SINCE as MRV2_EXCLUDED_SINCE
from portable_spec.kernels.triton_table_rocm import (FP8_CASES, NOT_ON_ROCM_PATH, ROCM_ATTN, ROCM_OPTIONS,
                                                     REACHED_ON_ROCM, ROCM_PATH_MODULES, SERVED, TARGETS,
                                                     WATERMARK_ROWS, rocm_exclusions, rocm_rows)
from portable_spec.errors import PortableSpecError
from portable_spec.vllm_adapter.patch import version_gate

REPO = os.path.join(os.path.dirname(__file__), "..")
ROCM_ATTN_FILE = os.path.join(VLLM_ROOT, "vllm", "v1", "attention", "backends", "rocm_attn.py")
_OPS = "vllm.v1.attention.ops"


def _path(module: str) -> str:
    return os.path.join(VLLM_ROOT, *module.split(".")) + ".py"


HERE = resolved(ROCM_ATTN + FP8_CASES + WATERMARK_ROWS)  # the ROCm table's own rows as the installed vLLM launches


@pytest.mark.parametrize("case", HERE, ids=lambda c: c.key)
def test_each_rocm_row_gives_every_parameter_a_type_or_a_value(case):
    """Read from the installed vLLM's source, as the shared table's rows are (``test_triton_table_span.py``, on every
    vLLM of the span): a missing parameter or a typed constexpr fails."""
    check_against_vllm(case)


def test_each_rocm_row_names_the_line_that_launches_it_and_rocms_options():
    """``launched_at``'s ``vllm/<file>:<line>``, as the installed vLLM's row states it, launches the row's kernel;
    ROCm's launch options are the ones vLLM's ROCm branch sets (``triton_reshape_and_cache_flash.py``: 4 stages, 8 warps
    under ``is_rocm()``)."""
    assert len(HERE) == len(ROCM_ATTN + FP8_CASES) + len(resolved(WATERMARK_ROWS))  # ROCM_ATTN's: since 0.26.0
    for case in HERE:
        path, _, line = case.launched_at.split()[0].partition(":")
        text = open(os.path.join(VLLM_ROOT, path), encoding="utf-8").read().splitlines()[int(line) - 1]
        assert f"{case.attr}[" in text, (case.key, case.launched_at, text)
    source = open(_path(f"{_OPS}.triton_reshape_and_cache_flash"), encoding="utf-8").read()
    source = source.split("def triton_reshape_and_cache_flash(")[1].split("\ndef ")[0]
    rocm_branch = source.split("if current_platform.is_rocm() or current_platform.is_xpu():")[1].split("else")[0]
    assert "num_stages = 4" in rocm_branch and "num_warps = 8" in rocm_branch
    rows = {r.key: r for r in rocm_rows()}
    assert rows["reshape_and_cache_kernel_flash"].case.options == ROCM_OPTIONS["reshape_and_cache_kernel_flash"]


def rocm_path_modules() -> list[str]:
    """The ops modules ROCM_ATTN imports (at the top or inside a method) and the relative imports of those, read from
    vLLM's source, plus the shared modules the ROCm path runs (TRITON_ATTN's, the drafter's, the sampler's)."""
    found: list[str] = []
    todo = [("vllm.v1.attention.backends.rocm_attn", ROCM_ATTN_FILE)]
    while todo:
        module, path = todo.pop()
        for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
            if not isinstance(node, ast.ImportFrom):
                continue
            name = (module.rpartition(".")[0] + "." + (node.module or "")) if node.level else node.module or ""
            if name.startswith(_OPS + ".") and name not in found:
                found.append(name)
                todo.append((name, _path(name)))
    return found + [m for m in ROCM_PATH_MODULES if m not in found]


def uncovered(refs: set[str]) -> tuple[list[str], int]:
    """ROCm-path kernels (launched in their own module) with no ref in ``refs`` and no reason, and how many kernels
    the walk found (Model Runner V2's included, with its own exclusions)."""
    launched = set()
    for module in rocm_path_modules():
        path = _path(module)
        tree = ast.parse(open(path, encoding="utf-8").read())
        subscripted = {n.value.id for n in ast.walk(tree) if isinstance(n, ast.Subscript)
                       and isinstance(n.value, ast.Name)}
        launched |= {f"{module}:{name}" for name in jit_names(path) & subscripted}
    launched |= set(launched_jit_kernels(MRV2_ROOT))
    missing_rows = sorted(launched - refs - set(rocm_exclusions()))
    return missing_rows, len(launched)


def test_every_kernel_the_rocm_path_launches_has_a_row_or_a_reason():
    """A new ``@triton.jit`` kernel in a module ROCM_ATTN imports (or in the shared ROCm-path modules, or in Model
    Runner V2) fails here, on the vLLM installed, until it gets a row (in ``triton_table_rocm`` or the shared table,
    from the vLLM that first launches it: ``since``) or a reason (``triton_table_rocm.rocm_exclusions``)."""
    modules = rocm_path_modules()
    assert {f"{_OPS}.chunked_prefill_paged_decode", f"{_OPS}.prefix_prefill",
            f"{_OPS}.triton_reshape_and_cache_flash"} <= set(modules)  # derived from rocm_attn.py's imports
    refs = {r.case.ref for r in rocm_rows()}
    missing_rows, walked = uncovered(refs)
    assert walked >= 50, walked
    assert not missing_rows, f"ROCm-path kernels with no row in portable_spec/kernels/triton_table_rocm.py " \
                             f"on vLLM {version_gate.installed_text()}: {missing_rows}"
    assert all(why for why in rocm_exclusions().values()) and not set(rocm_exclusions()) & refs
    stale = [k for k in NOT_ON_ROCM_PATH if k.partition(":")[0] not in modules
             or k.partition(":")[2] not in jit_names(_path(k.partition(":")[0]))]
    assert not stale, stale


def test_what_rocm_reaches_of_mrv2s_exclusions_has_rows_from_the_version_that_launches_it():
    """An exclusion of Model Runner V2's table whose reason does not hold on ROCm (``REACHED_ON_ROCM``: MUSA's tensors
    are not device 'cuda', ROCm's are) is one ``triton_table_mrv2.EXCLUDED`` has, is no ROCm exclusion, and has rows
    (``WATERMARK_ROWS``) from the vLLM that first launches it; where this vLLM launches it, the rows are compiled."""
    assert set(REACHED_ON_ROCM) <= set(MRV2_EXCLUDED) and not set(REACHED_ON_ROCM) & set(rocm_exclusions())
    since = {c.ref: c.since for c in WATERMARK_ROWS}
    assert set(since) == set(REACHED_ON_ROCM)
    assert all(since[k] == MRV2_EXCLUDED_SINCE.get(k, BASE) for k in REACHED_ON_ROCM)
    here = {k for k in REACHED_ON_ROCM if launched(since[k], version_gate.pick)}
    assert here <= set(launched_jit_kernels(MRV2_ROOT))
    assert here == {r.case.ref for r in rocm_rows() if r.source == "rocm_mrv2"}


def watermark_specializations(rows) -> set[tuple[str, str, str, str]]:
    """(kernel, launch, the key halves' types or "-", the block maxima's type) of each watermark row."""
    out = set()
    for case in rows:
        launch = case.key.split("[", 1)[1].rstrip("]").split("-key-")[0].removesuffix("-fp64")
        keys = f"{case.signature['key_0_value']} {case.signature['key_1_value']}" if "key_0_value" in case.signature \
            else "-"
        out.add((case.attr, launch, keys, case.signature["local_max_ptr"]))
    return out


def test_the_watermark_rows_cover_every_key_half_type_and_fp64_where_a_launch_passes_it():
    """``_philox_gumbel_kernel`` types the key's two 32-bit halves by value (i32 below 2**31, i64 up to 2**32 - 1;
    ``do_not_specialize`` keeps only the types): every launch is compiled with all four signatures; the launches with
    a sampling state (``use_fp64=random_sampler.use_fp64``) and the draft step reading their maxima also with fp64
    maxima under ``--use-fp64-gumbel``. Dropping any one row fails here."""
    found = watermark_specializations(WATERMARK_ROWS)
    launches = {"sampler", "sampler-mixed", "draft", "draft-block"}
    halves = {f"{a} {b}" for a in ("i32", "i64") for b in ("i32", "i64")}
    assert {(k, la, h, "*fp32") for k in ["_philox_gumbel_kernel"] for la in launches for h in halves} <= found
    assert {("_philox_gumbel_kernel", la, "i64 i64", "*fp64") for la in launches - {"sampler"}} <= found
    assert {("_draft_step_kernel", la, "-", m) for la in ("first", "middle", "last") for m in ("*fp32", "*fp64")} \
        <= found
    assert not any(la == "sampler" and m == "*fp64" for _, la, _, m in found)  # gumbel.py:64 passes no use_fp64
    assert len(found) == len(WATERMARK_ROWS) == 16 + 3 + 6
    for row in WATERMARK_ROWS:
        assert watermark_specializations(tuple(r for r in WATERMARK_ROWS if r is not row)) != found, row.key


def test_a_missing_row_is_caught():
    """The coverage walk is not vacuous: drop ROCM_ATTN's decode kernel from the rows and it is reported."""
    dropped = "vllm.v1.attention.ops.chunked_prefill_paged_decode:kernel_paged_attention_2d"
    refs = {r.case.ref for r in rocm_rows()} - {dropped}
    assert uncovered(refs)[0] == [dropped]


def test_the_rows_are_this_vllms_launches_and_a_version_that_drops_its_new_kernels_is_caught():
    """The rows resolve per installed vLLM with the one resolver the MUSA check uses (``triton_case.resolved``): the
    shared table's rows are ``kernel_cases``' vLLM rows, kernels new after 0.26.0 included from their version on. The
    former table (vLLM 0.26.0's rows only, kernels new later left out) fails the coverage walk on 0.28.0 and 0.33.0,
    naming each left-out kernel; on 0.26.0 it leaves out nothing."""
    rows = rocm_rows()
    assert [r.case.key for r in rows if r.source == "table"] == [c.key for c in resolved(VLLM_KERNELS)]
    newer = [r for r in rows if r.case.since != BASE]
    assert all(launched(r.case.since, version_gate.pick) for r in newer)
    as_of_026 = {r.case.ref for r in rows if r.case.since == BASE}
    left_out = {r.case.ref for r in newer} - as_of_026
    assert uncovered(as_of_026)[0] == sorted(left_out)
    if version_gate.installed() > version_gate.parse(BASE):
        assert len(left_out) >= 10, sorted(left_out)  # 0.28.0's new MRV2 kernels with a row: 10 (2 excluded)
    else:
        assert not newer


def test_each_rocm_rows_change_names_a_later_version_of_the_span():
    def fits(c) -> bool:
        return c.since in version_gate.SPAN and all(
            v in version_gate.SPAN and version_gate.parse(v) > version_gate.parse(c.since) for v in c.changes)

    rows = ROCM_ATTN + FP8_CASES + WATERMARK_ROWS
    assert all(fits(c) for c in rows), [c.key for c in rows if not fits(c)]


def test_the_fp8_types_served_follow_vllms_rule_and_our_ports():
    """gfx942 is served the fnuz type (Triton's fp8e4b8), gfx90a the OCP one (fp8e4nv): our port's rule, vLLM's
    (``RocmPlatform.is_fp8_fnuz``: ``"gfx94" in _GCN_ARCH``, read from its source: vllm.platforms.rocm does not
    import on a CPU torch), and Triton's own names for the torch dtypes."""
    triton = import_triton()
    import torch

    from portable_spec.ports.rocm_port import fp8_dtype_for_arch

    names = triton._utils.type_canonicalisation_dict
    assert SERVED and set(SERVED) <= set(TARGETS) and "cuda:90" not in SERVED
    for target, fp8 in SERVED.items():
        dtype = fp8_dtype_for_arch(TARGETS[target][1])
        assert names[str(dtype).removeprefix("torch.")] == fp8, target
    assert SERVED["hip:gfx942"] == names["float8_e4m3fnuz"] and fp8_dtype_for_arch("gfx942") == torch.float8_e4m3fnuz
    source = open(os.path.join(VLLM_ROOT, "vllm", "platforms", "rocm.py"), encoding="utf-8").read()
    assert 'return "gfx94" in _GCN_ARCH' in source
    assert "if cls.is_fp8_fnuz():\n            return torch.float8_e4m3fnuz" in source
    rows = [r for r in rocm_rows() if r.fp8_kv]
    assert len(rows) == 2 * len(FP8_CASES) == 2 * len(resolved(FP8_CASES))
    served = {(r.key, t) for r in rows for t in TARGETS if r.served(t)}
    assert len(served) == len(FP8_CASES) * len(SERVED)


def _worker_report(results: dict[str, dict[str, dict]]) -> dict:
    return {"triton": "3.6.0", "python": sys.executable, "vllm": "0.26.0", "bound_targets": [], "rows": results}


def test_a_failure_fails_only_where_rocm_serves_it():
    """Merged from a worker's report (no Triton): a failure on a served target and type turns the check red; the
    unserved fp8 type on gfx90a and anything on cuda:90 read "not served on this target"; nothing compiled is red."""
    ok = {"verdict": "ok", "first_error": None, "registers": {"vgpr_count": 14, "vgpr_spill_count": 2},
          "seconds": 0.1}
    plain = {**ok, "registers": {"vgpr_count": 14, "vgpr_spill_count": 0}}
    bad = {"verdict": "failed", "first_error": "RuntimeError: PassManager::run failed", "registers": None,
           "seconds": 0.1}
    key = "reshape_and_cache_kernel_flash[fp8-kv]"
    targets = ["hip:gfx942", "hip:gfx90a", "cuda:90"]
    report = merge(_worker_report({
        f"{key}[fp8e4b8]": {"hip:gfx942": ok, "hip:gfx90a": bad, "cuda:90": bad},
        f"{key}[fp8e4nv]": {"hip:gfx942": plain, "hip:gfx90a": plain, "cuda:90": plain}}), targets)
    cells = {r["kernel"]: r["targets"] for r in report["kernels"]}
    assert cells[f"{key}[fp8e4b8]"]["hip:gfx90a"]["status"] == NOT_SERVED
    assert cells[f"{key}[fp8e4b8]"]["cuda:90"]["status"] == NOT_SERVED
    assert report["green"] and report["compiled"] == 6 and report["served_compiled"] == 2
    assert "2 spilled" in render_markdown(report) and "1 compiles spill" in render_text(report)
    red = merge(_worker_report({f"{key}[fp8e4b8]": {"hip:gfx942": bad, "hip:gfx90a": ok, "cuda:90": ok}}), targets)
    assert not red["green"] and red["failed_served"] == [f"{key}[fp8e4b8] on hip:gfx942"]
    assert "NOT green" in render_text(red)
    assert not merge(_worker_report({}), targets)["green"]


def test_targets_and_flags_are_one_line_errors():
    with pytest.raises(PortableSpecError, match="valid choices: hip:gfx942, hip:gfx90a, cuda:90"):
        checked_targets(["hip:gfx1100"])
    assert checked_targets(["cuda:90", "hip:gfx942", "cuda:90"]) == ["cuda:90", "hip:gfx942"]
    for extra in (["--target", "hip:gfx942"], ["--target", "hip:gfx942", "--check-triton", "--cases", "x:y"]):
        proc = subprocess.run([sys.executable, "-m", "portable_spec", "kernels", *extra], capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def _compile_env() -> dict[str, str]:
    """This interpreter's environment without the interpreter switch (a JIT function must be compilable); a missing
    triton fails under the lane and skips elsewhere."""
    if importlib.util.find_spec("triton") is None:
        missing("needs triton with its AMD backend installed")
    return {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}


_BROKEN = '''
import triton
import triton.language as tl

@triton.jit
def broken(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    a = tl.load(x_ptr + offs)
    tl.store(x_ptr + offs, tl.dot(a, a))  # a 1-D dot: Triton refuses it at code generation
'''


def test_a_broken_kernel_fails_on_gfx942_with_the_line_that_says_why(tmp_path):
    """The worker's isolated compiles (forked children), for hip:gfx942 with the real Triton: a kernel Triton refuses
    is "failed" with the error that names the problem; a job that aborts its process (as an LLVM assertion in the AMD
    backend does) is "failed" with its native message, and the next job still runs."""
    (tmp_path / "broken_kernel.py").write_text(textwrap.dedent(_BROKEN))
    script = textwrap.dedent('''
        import json
        import os

        from broken_kernel import broken
        from portable_spec.kernels.triton_case import KernelCase
        from portable_spec.kernels.triton_table_rocm import RocmRow, TARGETS
        from portable_spec.vllm_adapter.tools.triton_check_worker import _compile_on, isolated

        def _exit_hard():
            os.write(2, b"LLVM ERROR: a stand-in for an assertion\\n")
            os.abort()

        row = RocmRow(KernelCase("broken", "broken_kernel:broken", {"x_ptr": "*fp32"}, {"BLOCK": 64}, "test"), "t")
        jobs = [(_compile_on, broken, row, TARGETS["hip:gfx942"]), (_exit_hard,), (_compile_on, broken, row,
                TARGETS["hip:gfx942"])]
        print(json.dumps(isolated(jobs)))
    ''')
    env = {**_compile_env(), "PYTHONPATH": os.pathsep.join([str(tmp_path), REPO, os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    first, aborted, after = json.loads(proc.stdout.strip().splitlines()[-1])
    assert first["verdict"] == "failed" and "equal ranks >= 2" in first["first_error"], first
    assert aborted["verdict"] == "failed" and "SIGABRT" in aborted["first_error"], aborted
    assert "LLVM ERROR: a stand-in for an assertion" in aborted["first_error"], aborted
    assert after["first_error"] == first["first_error"]  # a new child went on after the job that ended one


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "portable_spec", "kernels", "--check-triton", *args, "--json"],
                          capture_output=True, text=True, env=_compile_env(), timeout=600)


def test_the_fnuz_kv_cache_compiles_on_gfx942_and_is_not_served_on_gfx90a(tmp_path):
    """The whole command on TRITON_ATTN's decode kernel with an fp8 KV cache, the installed vLLM's kernel and the real
    Triton: float8_e4m3fnuz (fp8e4b8) compiles for gfx942, where ROCm serves it; on gfx90a the AMD backend cannot
    select its conversion, which ROCm never asks for there (gfx90a is served e4m3fn, fp8e4nv, which compiles): "not
    served on this target", and exit 0."""
    key = "kernel_unified_attention[3d][fp8-kv]"
    proc = _cli("--target", "hip:gfx942", "--target", "hip:gfx90a", "--only", f"{key}[fp8e4b8]",
                "--only", f"{key}[fp8e4nv]", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    cells = {r["kernel"]: r["targets"] for r in report["kernels"]}
    fnuz, ocp = cells[f"{key}[fp8e4b8]"], cells[f"{key}[fp8e4nv]"]
    assert fnuz["hip:gfx942"]["status"] == "ok" and fnuz["hip:gfx942"]["served"]
    assert fnuz["hip:gfx942"]["registers"]["vgpr_count"] > 0
    assert fnuz["hip:gfx90a"]["status"] == NOT_SERVED and not fnuz["hip:gfx90a"]["served"]
    assert "fp8" in fnuz["hip:gfx90a"]["first_error"], fnuz["hip:gfx90a"]
    assert ocp["hip:gfx90a"]["status"] == "ok" and ocp["hip:gfx90a"]["served"]
    assert report["green"] and report["served_compiled"] == 2 and report["substitutes_bound"] == []
    assert report["vllm"] == version_gate.installed_text()
    assert {p.name for p in tmp_path.iterdir()} == {"rocm_compile.json", "rocm_compile.md"}


def test_a_row_that_fails_where_rocm_serves_it_fails_the_command(monkeypatch, capsys):
    """The command's exit code follows ``green``, with one stderr line naming each failed compile."""
    from portable_spec import cli
    from portable_spec.kernels import triton_rocm_check

    bad = {"verdict": "failed", "first_error": "x", "registers": None, "seconds": 0.0}
    report = merge(_worker_report({"reshape_and_cache_kernel_flash": {"hip:gfx942": bad}}), ["hip:gfx942"])
    monkeypatch.setattr(triton_rocm_check, "run_rocm_check", lambda targets, only=None: report)
    assert cli.main(["kernels", "--check-triton", "--target", "hip:gfx942"]) == 1
    assert "reshape_and_cache_kernel_flash on hip:gfx942" in capsys.readouterr().err



def test_this_module_is_in_the_version_span():
    """The rows resolve per vLLM: the cpu lane runs this module on every vLLM of the span."""
    from version_span import MODULES

    assert os.path.basename(__file__) in MODULES
