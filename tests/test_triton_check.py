"""``portable-spec kernels --check-triton``: the kernel table against the kernels' real parameters, the command's
one-line errors, and (where the cpu lane built the triton==3.2.0 virtualenv and exported
PORTABLE_SPEC_TRITON32_PYTHON) the full check: vLLM 0.26.0's kernels as shipped, and with our substitutes bound."""

from __future__ import annotations

import ast
import importlib.util
import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from kernel_rows import VLLM_ROOT, check_row, jit_names, params
from lane_tools import import_triton, require_triton32_python

from portable_spec.errors import PortableSpecError
from portable_spec.kernels import triton_check
from portable_spec.kernels.triton_check import ENV_VAR, PROXY, merge
from portable_spec.kernels.triton_case import BASE
from portable_spec.kernels.triton_check_render import render_markdown, render_text
from portable_spec.kernels.triton_compile import first_error_line
from portable_spec_harness.synthetic.triton_cases import SOURCE as SYNTHETIC_SOURCE, SYNTHETIC_KERNELS
from portable_spec.kernels.triton_table import KERNELS, OUR_KERNELS, VLLM_KERNELS, kernel_cases

REPORT_VAR = "PORTABLE_SPEC_TRITON32_REPORT"
_TD = "make_tensor_descriptor"
_NONE = "'NoneType'"
_REDEFINES = "the else block redefines it as <[1], int1>"
EXPECTED_AS_SHIPPED = {  # kernel -> (rejecting layers in order, a piece of the first error of each)
    "eagle_prepare_next_token_padded_kernel": {"compile": "Mismatched type for valid_count",
                                               "compile-amd": "Mismatched type for valid_count"},
    "kernel_unified_attention[2d]": {"compile": _TD, "compile-amd": _TD, "static": "stride_ks_blk: int | None"},
    "kernel_unified_attention[2d-noncausal]": {"compile": _TD, "compile-amd": _TD,
                                               "static": "stride_ks_blk: int | None"},
    "kernel_unified_attention[3d]": {"compile": _TD, "compile-amd": _TD, "static": "stride_ks_blk: int | None"},
    "reduce_segments": {"static": "find_seq_idx (vllm/v1/attention/ops/triton_attention_helpers.py:94) via "
                                  "find_seq_idx: left: tl.int32 = 0"},
    # Model Runner V2 (portable_spec/kernels/triton_table_mrv2.py)
    "mrv2/buffer_utils._apply_write_kernel[multi-group]": {"static": "dtype-parameter-pointer"},
    "mrv2/block_table._gather_block_tables_kernel": {"static": "via _load_ptr: tl.pointer_type(elem_dtype)"},
    "mrv2/block_table._compute_slot_mappings_kernel[target]": {"static": "via _load_ptr: tl.pointer_type(elem_dtype)"},
    "mrv2/block_table._compute_slot_mappings_kernel[draft]": {"static": "via _load_ptr: tl.pointer_type(elem_dtype)"},
    "mrv2/sample.penalties._penalties_kernel": {"compile": "chained boolean operators",
                                                "compile-amd": "chained boolean operators"},
    # the NVIDIA backend's TritonGPUCombineTensorSelectAndIf pass breaks dominance; the AMD pipeline accepts it
    "mrv2/sample.ops.topk_topp_triton._topk_topp_kernel[top-k+top-p]": {"compile": "PassManager::run failed",
                                                                       "static": "unsigned-division"},
    "mrv2/sample.ops.topk_topp_triton._topk_topp_kernel[top-k]": {"static": "topk_topp_triton.py:200"},
    "mrv2/sample.ops.topk_topp_triton._topk_topp_kernel[top-p]": {"static": "topk_topp_triton.py:690"},
    # the NVIDIA backend accepts it; only the AMD one finds the pointer chosen in a run-time branch
    "mrv2/sample.logprob._fill_logprob_token_ids_kernel": {"compile-amd": "operand #0 does not dominate this use"},
    "mrv2/spec_decode.rejection_sampler_utils._rejection_kernel[greedy-draft]": {"compile": _NONE,
                                                                                "compile-amd": _NONE},
    "mrv2/spec_decode.rejection_sampler_utils._rejection_kernel[draft-logits]": {"compile": _NONE,
                                                                                "compile-amd": _NONE},
    "mrv2/spec_decode.rejection_sampler_utils._rejection_kernel[block-verification]": {
        "compile": _REDEFINES, "compile-amd": _REDEFINES},
}


@pytest.mark.parametrize("case", OUR_KERNELS + SYNTHETIC_KERNELS, ids=lambda c: c.key)
def test_each_of_our_rows_gives_every_parameter_a_type_or_a_value(case):
    import_triton()
    fn = getattr(importlib.import_module(case.module), case.attr).fn
    func = ast.parse(inspect.getsource(fn)).body[0]
    check_row(case, *params(func))


def test_the_table_covers_every_spec_decode_kernel_and_every_kernel_we_launch():
    table = kernel_cases((SYNTHETIC_SOURCE,))
    refs = {c.ref for c in table}
    for module in ("vllm.v1.spec_decode.utils", "vllm.v1.sample.rejection_sampler"):
        path = os.path.join(VLLM_ROOT, *module.split(".")) + ".py"
        assert {f"{module}:{name}" for name in jit_names(path)} <= refs, module
    root = os.path.join(os.path.dirname(__file__), "..")
    checked = 0
    for package, sub in (("portable_spec", "kernels"), ("portable_spec", "draft"),
                         ("harness/portable_spec_harness", "synthetic")):
        folder = os.path.join(root, package, sub)
        for file in os.listdir(folder):
            if file.endswith(".py"):
                module = f"{package.rpartition('/')[2]}.{sub}.{file[:-3]}"
                launched = {n for n in jit_names(os.path.join(folder, file)) if n.endswith("_kernel")}
                assert {f"{module}:{name}" for name in launched} <= refs, module
                checked += len(launched)
    assert checked >= 7  # our substitutes and the synthetic harness's kernels were found
    attention = {"vllm.v1.attention.ops.triton_unified_attention:kernel_unified_attention",
                 "vllm.v1.attention.ops.triton_unified_attention:reduce_segments",
                 "vllm.v1.attention.ops.triton_reshape_and_cache_flash:reshape_and_cache_kernel_flash"}
    assert attention <= refs
    assert len({c.key for c in table}) == len(table)


def test_each_vllm_row_names_the_line_that_launches_it():
    """``launched_at`` starts with ``vllm/<file>:<line>``; that line of vLLM 0.26.0 launches the row's kernel (the rows
    of kernels new later name their own vLLM's line: ``test_triton_table_span.py`` checks those there)."""
    for case in (c for c in VLLM_KERNELS if c.since == BASE):
        path, _, line = case.launched_at.split()[0].partition(":")
        text = open(os.path.join(VLLM_ROOT, path), encoding="utf-8").read().splitlines()[int(line) - 1]
        assert f"{case.attr}[" in text, (case.key, case.launched_at, text)


def test_the_product_table_names_no_harness_kernel_and_no_missing_file():
    """The serving path's table stands below the harness (the CLI adds the harness's rows); every row's
    ``launched_at`` that names one of our files names a file that exists (a stale path fails here)."""
    repo = os.path.join(os.path.dirname(__file__), "..")
    assert KERNELS and all(not c.module.startswith("portable_spec_harness") for c in KERNELS)
    ours = [c for c in kernel_cases((SYNTHETIC_SOURCE,)) if c.launched_at.startswith(("portable_spec/", "harness/"))]
    assert len(ours) >= len(SYNTHETIC_KERNELS)
    for case in ours:
        path = case.launched_at.split()[0]
        assert os.path.isfile(os.path.join(repo, path)), (case.key, path)
    with pytest.raises(ValueError, match="named twice"):
        kernel_cases((SYNTHETIC_SOURCE, SYNTHETIC_SOURCE))


def test_the_first_error_line_names_the_callees_problem():
    """Triton raises a call-site CompilationError whose own last line is the caret; the cause names the problem."""
    inner = ValueError("at 3:4:\n    x = a or b or c\n    ^\nchained boolean operators are not supported")
    outer = RuntimeError("at 47:43:\n    y = helper(x)\n                ^")
    outer.__cause__ = inner
    assert first_error_line(outer) == "ValueError: chained boolean operators are not supported [at 47:43]"
    assert first_error_line(AssertionError("AssertionError('Mismatched type')")) == "AssertionError('Mismatched type')"


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k not in (ENV_VAR, REPORT_VAR, "TRITON_INTERPRET")}
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "portable_spec", "kernels", *args], capture_output=True, text=True,
                          env=full, timeout=900)


def assert_one_line_error(proc: subprocess.CompletedProcess, *pieces: str) -> None:
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("portable-spec: error: "), proc.stderr
    assert all(p in lines[0] for p in pieces), lines[0]


def test_without_the_3_2_interpreter_the_check_says_how_to_get_one():
    assert_one_line_error(run_cli("--check-triton"), "needs a Python with triton==3.2.0", "ci/lanes/triton32_venv.sh",
                          ENV_VAR)
    assert_one_line_error(run_cli("--check-triton", "--triton32-python", "/nonexistent/python"),
                          "'/nonexistent/python' is not an executable Python interpreter")


def test_an_interpreter_with_another_triton_is_refused():
    import triton

    assert_one_line_error(run_cli("--check-triton", "--triton32-python", sys.executable),
                          f"has triton {triton.__version__}, not 3.2.x", "ci/lanes/triton32_venv.sh")


def test_bad_flags_are_one_line_errors():
    assert_one_line_error(run_cli("--check-triton", "--only", "no_such_kernel", "--triton32-python", sys.executable),
                          "unknown kernel 'no_such_kernel'; valid choices: eagle_step_slot_mapping_metadata_kernel")
    assert_one_line_error(run_cli("--only", "expand_kernel"), "go with --check-triton")
    assert_one_line_error(run_cli("--platform", "tpu"), "unknown platform 'tpu'")


def _layer_report(layer: str, verdicts: dict[str, str]) -> dict:
    rows = {k: {"verdict": v, "first_error": None if v == "ok" else f"{layer} says no", "bound": f"vllm.{k}"}
            for k, v in verdicts.items()}
    return {"layer": layer, "triton": "3.2.0", "python": "py", "vllm": "0.26.0", "raw": rows, "substituted": rows,
            "bound_targets": [], "lld": "/usr/bin/ld.lld" if layer == "compile-amd" else None}


def test_a_kernel_the_amd_backend_rejects_fails_the_check_even_when_the_nvidia_compile_passes():
    """The proxy is both backends: a MUSA-path kernel that only the AMD compile rejects is still rejected, with
    substitutes bound, and the report is not green."""
    first, second = [c.key for c in kernel_cases() if c.musa_path][:2]
    ok = {first: "ok", second: "ok"}
    report = merge({"compile": _layer_report("compile", ok),
                    "compile-amd": _layer_report("compile-amd", {first: "ok", second: "rejected"}),
                    "static": _layer_report("static", ok)})
    rows = {r["kernel"]: r for r in report["kernels"]}
    assert rows[first]["with_substitutes"]["verdict"] == "ok"
    amd_only = rows[second]["with_substitutes"]
    assert amd_only["verdict"] == "rejected" and amd_only["layers"] == ["compile-amd"]
    assert amd_only["first_error"] == "compile-amd says no" and amd_only["compile"]["verdict"] == "ok"
    assert not report["green"] and report["rejected_with_substitutes"] == [second]
    assert report["compile_amd"]["target"] == "hip:gfx942:64" and "compile-amd layer" in render_text(report)
    assert f"{second} [compile-amd]: compile-amd says no" in render_text(report)
    markdown = render_markdown(report)  # per kernel, per backend: shipped / substituted
    assert "| NVIDIA sm_90: shipped / substituted | AMD gfx942: shipped / substituted |" in markdown
    assert f"| `{second}` | " in markdown and "| ok / ok | rejected / rejected | ok / ok |" in markdown
    both = merge({"compile": _layer_report("compile", ok), "compile-amd": _layer_report("compile-amd", ok)})
    assert both["green"]


def test_layers_that_judged_other_rows_or_another_vllm_are_an_error_not_a_shorter_report():
    """A Triton 3.2 virtualenv built from another vLLM's interpreter judges that vLLM's rows: merged silently, the
    rows this vLLM has and that one lacks would drop out of a report that could still read green."""
    first, second = [c.key for c in kernel_cases() if c.musa_path][:2]
    ok = {first: "ok", second: "ok"}
    assert len(merge({"compile": _layer_report("compile", ok), "static": _layer_report("static", ok)})["kernels"]) == 2
    other = {**_layer_report("compile", ok), "vllm": "0.28.0"}
    with pytest.raises(PortableSpecError, match=r"imported different vLLMs \(compile 0\.28\.0, static 0\.26\.0\): "
                                                r"build the Triton 3\.2 virtualenv from this interpreter"):
        merge({"compile": other, "static": _layer_report("static", ok)})
    with pytest.raises(PortableSpecError, match=f"judged different rows \\({second} missing from some\\)"):
        merge({"compile": _layer_report("compile", {first: "ok"}), "static": _layer_report("static", ok)})
    with pytest.raises(PortableSpecError, match="no kernel row was checked"):
        merge({"compile": _layer_report("compile", {}), "static": _layer_report("static", {})})


def test_the_worker_leaves_no_compile_cache_behind(tmp_path):
    """Each layer compiles into a Triton cache of its own, removed with the run (runs used to leave it in the
    temporary folder, up to 16 MB each); the static layer of one row is enough to show it."""
    env = {**os.environ, "TMPDIR": str(tmp_path), "VLLM_PLUGINS": ""}
    env.pop("TRITON_CACHE_DIR", None)
    proc = subprocess.run([sys.executable, "-m", "portable_spec.vllm_adapter.tools.triton_check_worker", "--layer",
                           "static", "--only", "expand_kernel"], capture_output=True, text=True, env=env, timeout=600)
    report = json.loads([ln for ln in proc.stdout.splitlines() if ln.startswith("{")][-1])
    assert proc.returncode == 0 and list(report["raw"]) == ["expand_kernel"], proc.stderr[-2000:]
    assert list(tmp_path.iterdir()) == []


def test_the_amd_compile_finds_ld_lld_or_names_the_package(monkeypatch, tmp_path):
    lld = tmp_path / "ld.lld"
    lld.write_text("")
    monkeypatch.setenv("TRITON_HIP_LLD_PATH", str(lld))
    assert triton_check.hip_lld() == str(lld)
    monkeypatch.setenv("TRITON_HIP_LLD_PATH", str(tmp_path / "missing"))
    with pytest.raises(PortableSpecError, match="is not a file; install Debian's lld package \\(apt-get install lld"):
        triton_check.hip_lld()
    monkeypatch.delenv("TRITON_HIP_LLD_PATH")
    monkeypatch.setattr(triton_check.shutil, "which", lambda name: None)
    monkeypatch.setattr(triton_check.glob, "glob", lambda pattern: ["/usr/lib/llvm-9/bin/ld.lld",
                                                                    "/usr/lib/llvm-14/bin/ld.lld"])
    assert triton_check.hip_lld() == "/usr/lib/llvm-14/bin/ld.lld"  # the newest, not the last in name order
    monkeypatch.setattr(triton_check.glob, "glob", lambda pattern: [])
    with pytest.raises(PortableSpecError, match="needs ld.lld and found none; .*apt-get install lld"):
        triton_check.hip_lld()
    assert_one_line_error(run_cli("--check-triton", "--triton32-python", sys.executable,
                                  env={"TRITON_HIP_LLD_PATH": "/nonexistent/ld.lld"}),
                          "TRITON_HIP_LLD_PATH='/nonexistent/ld.lld' is not a file", "apt-get install lld")


def test_listing_says_what_each_substitute_replaces_and_why():
    proc = run_cli("--json")
    assert proc.returncode == 0, proc.stderr
    listing = json.loads(proc.stdout)
    names = [s["name"] for s in listing["substitutions"]]
    assert listing["platform"] == "musa" and names[0] == "eagle_prepare_next_token_padded_kernel"
    assert {"find_seq_idx", "compute_tile_loop_bounds", "kernel_unified_attention"} <= set(names)
    derived = next(s for s in listing["substitutions"] if s["name"] == "kernel_unified_attention")
    assert derived["replacement"] == "vLLM's source with unannotate-parameters x6" and derived["reason"]
    assert json.loads(run_cli("--platform", "rocm", "--json").stdout)["substitutions"] == []
    cuda = json.loads(run_cli("--platform", "cuda", "--json").stdout)["substitutions"]
    assert len(cuda) == 5 and all("unspecialized" in s["replacement"] and s["reason"] for s in cuda)


@pytest.fixture(scope="module")
def full_check(tmp_path_factory):
    """The check's JSON report and output folder: the one the cpu lane wrote just before pytest (``$REPORT_VAR``,
    same tree, same interpreters), else a fresh ``kernels --check-triton --json --out`` run."""
    if os.environ.get(REPORT_VAR):
        path = os.environ[REPORT_VAR]
        return json.load(open(path)), Path(os.path.dirname(path))
    python = require_triton32_python()
    out = tmp_path_factory.mktemp("triton32")
    proc = run_cli("--check-triton", "--json", "--out", str(out), env={ENV_VAR: python})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout), out


def test_triton_3_2_rejects_exactly_the_known_vllm_kernels_as_shipped(full_check):
    report, _ = full_check
    assert report["compile"]["triton"].startswith("3.2.") and report["vllm"] == "0.26.0"
    assert report["compile_amd"]["triton"] == report["compile"]["triton"]
    assert report["compile_amd"]["target"] == "hip:gfx942:64" and report["layers"] == ["compile", "compile-amd", "static"]
    rows = {r["kernel"]: r for r in report["kernels"]}
    assert set(report["rejected_as_shipped"]) == set(EXPECTED_AS_SHIPPED)
    for kernel, layers in EXPECTED_AS_SHIPPED.items():
        shipped = rows[kernel]["as_shipped"]
        assert shipped["verdict"] == "rejected" and shipped["layers"] == list(layers), kernel
        for layer, piece in layers.items():
            assert piece in shipped[layer]["first_error"], (kernel, shipped[layer]["first_error"])


def test_with_substitutes_bound_every_musa_path_kernel_passes_every_layer(full_check):
    report, _ = full_check
    assert report["green"] and report["rejected_with_substitutes"] == []
    rows = {r["kernel"]: r for r in report["kernels"]}
    assert all(r["musa_path"] and r["with_substitutes"]["verdict"] == "ok" for r in rows.values())
    assert rows["eagle_prepare_next_token_padded_kernel"]["with_substitutes"]["bound"] == (
        "portable_spec.kernels.eagle_prepare_next_token.eagle_prepare_next_token_padded_kernel")
    for key in ("kernel_unified_attention[2d]", "kernel_unified_attention[3d]"):
        checked = rows[key]["with_substitutes"]
        assert checked["bound"].startswith("portable_spec.derived.vllm.v1.attention.ops.triton_unified_attention")
        assert "portable_spec.derived.vllm.v1.attention.ops.triton_attention_helpers.find_seq_idx" in (
            checked["static"]["helpers"])
    assert rows["eagle_step_slot_mapping_metadata_kernel"]["with_substitutes"]["bound"].startswith("vllm.")
    logprob = rows["mrv2/sample.logprob._fill_logprob_token_ids_kernel"]["with_substitutes"]
    assert logprob["bound"] == "portable_spec.derived.vllm.v1.worker.gpu.sample.logprob._fill_logprob_token_ids_kernel"
    assert logprob["compile-amd"]["verdict"] == logprob["compile"]["verdict"] == "ok"


def test_a_green_text_report_reads_green(full_check):
    """A passing check's console prints no error lines: the kernels that need their substitute are one count (their
    first errors stay in the JSON), and only a kernel still rejected with substitutes bound gets its error printed."""
    report, _ = full_check
    text = render_text(report)
    needing = sum(r["as_shipped"]["verdict"] != "ok" for r in report["kernels"])
    assert needing >= 5 and f"{needing} kernels pass only with their substitute bound" in text
    assert "error" not in text.replace("first errors", "").lower().replace("why each is rejected", ""), text
    broken = json.loads(json.dumps(report))
    row = next(r for r in broken["kernels"] if r["as_shipped"]["verdict"] != "ok")
    row["with_substitutes"] = row["as_shipped"]
    assert f"  {row['kernel']} [" in render_text(broken)


def test_the_report_says_it_is_a_proxy_in_every_form(full_check):
    report, out = full_check
    assert report["proxy"] == PROXY and "MUSA's own backend may reject more" in PROXY
    assert PROXY in render_text(report) and PROXY in render_markdown(report)
    assert json.load(open(out / "triton32_check.json")) == report
    assert PROXY in (out / "triton32_check.md").read_text()
