"""portable_spec.kernels: our MUSA-Triton-subset kernels against their torch references and vLLM's own kernels (all
run by the Triton interpreter on CPU), and the registry that installs them on every vLLM binding site."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import json
import os
import subprocess
import sys
import textwrap

import pytest
from lane_tools import import_triton, require_interpreter
import torch

import_triton()

from portable_spec.errors import PortableSpecError  # noqa: E402
from portable_spec.kernels import eagle_prepare_next_token as ours  # noqa: E402
from portable_spec.kernels import registry  # noqa: E402
from portable_spec.vllm_adapter.patch import version_gate  # noqa: E402

KERNEL_TARGETS = ("vllm.v1.spec_decode.utils.eagle_prepare_next_token_padded_kernel",
                  "vllm.v1.spec_decode.llm_base_proposer.eagle_prepare_next_token_padded_kernel")


def _interpreted():
    require_interpreter()


def _random_case(gen: torch.Generator, batch: int, width: int, vocab: int) -> dict:
    """Rows shaped like rejection-sampler output: an accepted prefix, then -1; some tokens >= vocab (invalid)."""
    accepted = torch.randint(0, width + 1, (batch,), generator=gen)
    tokens = torch.randint(0, vocab + vocab // 4, (batch, width), generator=gen, dtype=torch.int32)
    tokens[torch.arange(width).expand(batch, width) >= accepted.unsqueeze(1)] = -1
    return {"sampled": tokens,
            "discard": torch.rand(batch, generator=gen) < 0.25,
            "backup": torch.randint(0, vocab, (batch,), generator=gen, dtype=torch.int32),
            "vocab": vocab}


def _edge_cases() -> dict[str, dict]:
    vocab = 50
    width = 4
    backup = torch.tensor([40, 41, 42, 43, 44], dtype=torch.int32)
    keep = torch.zeros(5, dtype=torch.bool)
    return {
        "all_rejected": {"sampled": torch.full((5, width), -1, dtype=torch.int32), "discard": keep,
                         "backup": backup, "vocab": vocab},
        "all_accepted": {"sampled": torch.arange(20, dtype=torch.int32).reshape(5, width), "discard": keep,
                         "backup": backup, "vocab": vocab},
        "all_discarded": {"sampled": torch.arange(20, dtype=torch.int32).reshape(5, width),
                          "discard": torch.ones(5, dtype=torch.bool), "backup": backup, "vocab": vocab},
        "mixed": {"sampled": torch.tensor([[3, -1, -1, -1], [3, 4, 5, 6], [-1, -1, -1, -1], [7, 8, -1, -1],
                                           [9, 60, -1, -1]], dtype=torch.int32),  # 60 >= vocab: not valid
                  "discard": torch.tensor([False, True, False, False, True]), "backup": backup, "vocab": vocab},
        "single_column": {"sampled": torch.tensor([[5], [-1], [7], [8], [-1]], dtype=torch.int32),
                          "discard": torch.tensor([False, False, True, False, True]), "backup": backup,
                          "vocab": vocab},
    }


def _check_against_reference(case: dict, **launch_kw) -> None:
    got = ours.launch(ours.eagle_prepare_next_token_padded_kernel, case["sampled"], case["discard"], case["backup"],
                      case["vocab"], **launch_kw)
    want = ours.prepare_next_token_padded_reference(
        case["sampled"], case["discard"], case["backup"], case["vocab"],
        num_sampled_tokens_per_req=launch_kw.get("num_sampled_tokens_per_req"), num_reqs=launch_kw.get("num_reqs"))
    rows = want[0].shape[0]
    assert torch.equal(got[0][:rows], want[0]) and torch.equal(got[1][:rows], want[1]), (case, got, want)


# ------------------------------------------------------------------------------------------------ kernel vs reference
def test_reference_states_the_semantics():
    """The torch reference on hand-worked rows (so the kernel comparisons below compare against the right thing)."""
    case = _edge_cases()["mixed"]
    next_ids, counts = ours.prepare_next_token_padded_reference(case["sampled"], case["discard"], case["backup"],
                                                                case["vocab"])
    assert next_ids.tolist() == [3, 41, 42, 8, 44] and counts.tolist() == [1, 0, 0, 2, 0]
    assert next_ids.dtype == counts.dtype == torch.int32


@pytest.mark.parametrize("name", sorted(_edge_cases()))
def test_kernel_matches_reference_on_edge_cases(name):
    _interpreted()
    _check_against_reference(_edge_cases()[name])


@pytest.mark.parametrize("seed,batch,width", [(0, 1, 2), (1, 7, 3), (2, 16, 5), (3, 33, 8)])
def test_kernel_matches_reference_on_random_rows(seed, batch, width):
    _interpreted()
    gen = torch.Generator().manual_seed(seed)
    _check_against_reference(_random_case(gen, batch, width, vocab=1000))


def test_padding_rows_and_columns_are_ignored():
    """Programs past ``num_reqs`` write nothing; columns past ``num_sampled_tokens_per_req`` (a wider row stride,
    BLOCK_SIZE_TOKENS above the token count) are never read as tokens."""
    _interpreted()
    gen = torch.Generator().manual_seed(7)
    case = _random_case(gen, 9, 8, vocab=100)
    case["sampled"][:, 5:] = 7  # valid-looking tokens in the padding columns: must not be picked
    sentinel = torch.full((9,), -777, dtype=torch.int32)
    next_ids, counts = sentinel.clone(), sentinel.clone()
    _check_against_reference(case, grid_rows=12, num_reqs=6, num_sampled_tokens_per_req=5,
                             next_token_ids=next_ids, valid_sampled_tokens_count=counts)
    assert next_ids[6:].tolist() == [-777] * 3 and counts[6:].tolist() == [-777] * 3
    assert (counts[:6] <= 5).all()


def test_kernel_source_stays_in_the_musa_triton_subset():
    """MUSA's Triton 3.2 rejects annotated assignments inside @triton.jit and PDL/TMA intrinsics."""
    fn = ours.eagle_prepare_next_token_padded_kernel
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn.fn)))
    (func,) = [node for node in tree.body if isinstance(node, ast.FunctionDef)]
    assert func.name == "eagle_prepare_next_token_padded_kernel"
    assert not [node for node in ast.walk(func) if isinstance(node, ast.AnnAssign)]
    names = {node.attr for node in ast.walk(func) if isinstance(node, ast.Attribute)}
    assert not {n for n in names if n.startswith("gdc_") or "tensor_descriptor" in n}


_FRONTEND = r"""
import importlib, json
from triton._C.libtriton import ir
from triton.backends.compiler import GPUTarget
from triton.compiler.compiler import ASTSource, make_backend
target = GPUTarget("cuda", 90, 32)
try:
    backend = make_backend(target)
except Exception as exc:
    print(json.dumps({"skip": f"Triton's CUDA backend does not load here: {exc}"}))
    raise SystemExit(0)
import vllm.platforms
from portable_spec_harness.vllm_door.cpu_graph_platform import CpuGraphTestPlatform
vllm.platforms._current_platform = CpuGraphTestPlatform()
import vllm.triton_utils.importing as importing
importing.HAS_TRITON = True  # vLLM disables Triton without a GPU driver; only the frontend runs here
import vllm.triton_utils
importlib.reload(vllm.triton_utils)
import vllm.v1.spec_decode.utils as upstream
from portable_spec.kernels import eagle_prepare_next_token as ours

def ttir(kernel):
    types = ["*i32", "*i1", "*i32", "*i32", "*i32", "i32", "i32", "i32", "i32", "constexpr"]
    src = ASTSource(kernel, dict(zip(kernel.arg_names, types)), constexprs={(9,): 8})
    options = backend.parse_options({})
    context = ir.context()
    ir.load_dialects(context)
    backend.load_dialects(context)
    return str(src.make_ir(target, options, backend.get_codegen_implementation(options), backend.get_module_map(),
                           context))

print(json.dumps({"ours": ttir(ours.eagle_prepare_next_token_padded_kernel),
                  "upstream": ttir(upstream.eagle_prepare_next_token_padded_kernel)}))
"""


def test_kernel_builds_with_tritons_compiler_frontend_and_merges_no_branch_values():
    """The interpreter runs Python; this runs Triton's real code generator (AST -> TTIR, no device needed). Our TTIR
    yields no value out of a branch (``scf.yield``), so no branch-merged dtype can mismatch on any Triton version;
    vLLM's kernel does yield ``valid_count`` (the negative control: uint32 here, int32 vs uint32 on MUSA's 3.2).
    A subprocess without TRITON_INTERPRET: under it Triton's library functions are interpreted objects. This is
    Triton 3.6's frontend, not MUSA's 3.2: only a MUSA run proves the kernel there."""
    env = {**{k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"},
           "VLLM_LOGGING_STREAM": "ext://sys.stderr", "VLLM_PLUGINS": ""}
    proc = subprocess.run([sys.executable, "-c", _FRONTEND], capture_output=True, text=True, env=env, timeout=300)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    report = json.loads(lines[-1])
    if "skip" in report:
        pytest.skip(report["skip"])
    mine, upstream = report["ours"], report["upstream"]
    assert "tt.func public @eagle_prepare_next_token_padded_kernel" in mine and mine.count("tt.store") == 2
    assert "scf.yield" not in mine and "scf.if" not in mine
    assert "scf.yield %valid_count" in upstream


def test_kernel_signature_matches_vllm():
    """Same parameters, same order: vLLM launches it positionally from prepare_next_token_ids_padded."""
    source = open(os.path.join(os.path.dirname(__import__("importlib").util.find_spec("vllm").origin),
                               "v1", "spec_decode", "utils.py")).read()
    upstream = next(node for node in ast.parse(source).body
                    if isinstance(node, ast.FunctionDef) and node.name == "eagle_prepare_next_token_padded_kernel")
    assert ours.eagle_prepare_next_token_padded_kernel.arg_names == [a.arg for a in upstream.args.args]


# ------------------------------------------------------------------------------------------------ vs vLLM's kernel
_VLLM_KERNEL = r"""
import importlib, json, os, sys
os.environ["TRITON_INTERPRET"] = "1"
import torch
import vllm.platforms
from portable_spec_harness.vllm_door.cpu_graph_platform import CpuGraphTestPlatform
vllm.platforms._current_platform = CpuGraphTestPlatform()
import vllm.triton_utils.importing as importing
importing.HAS_TRITON = True  # vLLM disables Triton without a GPU driver; the interpreter runs it on CPU
import vllm.triton_utils
importlib.reload(vllm.triton_utils)
import vllm.v1.spec_decode.utils as upstream
from portable_spec.kernels import eagle_prepare_next_token as ours
sys.path.insert(0, sys.argv[1])
import test_kernels as t
gen = torch.Generator().manual_seed(1234)
cases = dict(t._edge_cases())
for i, (batch, width) in enumerate([(1, 2), (8, 3), (17, 5), (32, 8)]):
    cases[f"random{i}"] = t._random_case(gen, batch, width, vocab=500)
out = {"upstream_is_jit": hasattr(upstream.eagle_prepare_next_token_padded_kernel, "fn")}
for name, c in cases.items():
    res = []
    for kernel in (upstream.eagle_prepare_next_token_padded_kernel, ours.eagle_prepare_next_token_padded_kernel):
        nxt, cnt = ours.launch(kernel, c["sampled"], c["discard"], c["backup"], c["vocab"])
        res.append([nxt.tolist(), cnt.tolist()])
    out[name] = res
print(json.dumps(out))
"""


def test_kernel_matches_vllms_own_kernel():
    """vLLM's upstream kernel (Triton forced on, run by the interpreter in a subprocess) and ours agree row for row."""
    env = {**os.environ, "VLLM_LOGGING_STREAM": "ext://sys.stderr", "VLLM_PLUGINS": ""}
    proc = subprocess.run([sys.executable, "-c", _VLLM_KERNEL, os.path.dirname(__file__)], capture_output=True,
                          text=True, env=env, timeout=600)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    report = json.loads(lines[-1])
    assert report.pop("upstream_is_jit") is True, "vLLM's kernel was not a real Triton JITFunction"
    assert len(report) == len(_edge_cases()) + 4
    for name, (upstream, mine) in report.items():
        assert upstream == mine, name


# ------------------------------------------------------------------------------------------------ registry
def _current(target: str):
    module, attr = target.rsplit(".", 1)
    return getattr(importlib.import_module(module), attr)


def test_musa_substitutions_cover_every_binding_site_and_are_reversible(vllm_platform):
    """Every target of every MUSA entry holds that entry's one replacement while installed (the eagle kernel is ours,
    derived entries are derived from vLLM's object), and vLLM's objects come back on uninstall."""
    subs = [s.at(version_gate.pick) for s in registry.substitutions_for("musa")]  # this vLLM's sites and counts
    subs = [s for s in subs if s.targets]  # an entry whose object this vLLM lacks binds nothing
    targets = [t for sub in subs for t in sub.targets]
    originals = {t: _current(t) for t in targets}
    try:
        assert registry.install_substitutions("musa", pick=version_gate.pick) == targets
        replacements = {t: _current(t) for t in targets}
        # idempotent: originals kept, same replacements
        assert registry.install_substitutions("MUSA", pick=version_gate.pick) == targets
        for sub in subs:
            objs = {id(_current(t)) for t in sub.targets}
            assert len(objs) == 1, sub.name
            assert all(_current(t) is replacements[t] and _current(t) is not originals[t] for t in sub.targets)
            assert registry.bound()[sub.targets[0]] == sub
        assert replacements[KERNEL_TARGETS[0]] is ours.eagle_prepare_next_token_padded_kernel
        for sub in subs:
            if sub.rewrites:
                derived = replacements[sub.targets[0]]
                assert derived.fn.__portable_spec_derived_from__ == (
                    f"{originals[sub.targets[0]].__module__}:{sub.name}")
                assert derived.fn.__globals__ is vars(importlib.import_module(originals[sub.targets[0]].__module__))
        assert sorted(registry.installed()) == sorted(targets)
    finally:
        assert sorted(registry.uninstall()) == sorted(targets)
    assert all(_current(t) is originals[t] for t in targets)
    assert registry.installed() == [] and registry.uninstall() == [] and registry.bound() == {}


def _vllm_binders(name: str) -> set[str]:
    """vLLM modules whose globals hold ``name``: a top-level ``def name`` or ``from ... import name``, read from
    vLLM's source files."""
    root = os.path.dirname(importlib.util.find_spec("vllm").origin)
    found = set()
    for dirpath, _, files in os.walk(root):
        for file in (f for f in files if f.endswith(".py")):
            path = os.path.join(dirpath, file)
            text = open(path, encoding="utf-8").read()
            if name not in text:
                continue
            for node in ast.parse(text).body:
                defines = isinstance(node, ast.FunctionDef) and node.name == name
                imports = isinstance(node, ast.ImportFrom) and any(a.name == name and a.asname in (None, name)
                                                                   for a in node.names)
                if defines or imports:
                    found.add(os.path.relpath(path, os.path.dirname(root))[:-3].replace(os.sep, "."))
    return found


def test_every_vllm_module_that_binds_a_substituted_object_is_a_target():
    """A vLLM module that defines or imports (at top level) a substituted kernel or helper but is missing from the
    entry would keep running vLLM's object: Triton resolves helpers in the caller's module. Read from vLLM's
    source, so it does not depend on which modules happen to be imported."""
    for sub in (s.at(version_gate.pick) for s in registry.SUBSTITUTIONS):
        if not sub.targets:  # this vLLM has no such object
            continue
        attr = sub.targets[0].rsplit(".", 1)[1]
        modules = {t.rsplit(".", 1)[0] for t in sub.targets}
        assert _vllm_binders(attr) == modules, (sub.name, _vllm_binders(attr) ^ modules)


def test_platforms_without_substitutions_install_nothing(vllm_platform):
    import vllm.v1.spec_decode.utils as utils

    upstream = utils.eagle_prepare_next_token_padded_kernel
    for name in ("rocm", "cpu"):
        assert registry.install_substitutions(name) == []
    assert utils.eagle_prepare_next_token_padded_kernel is upstream and registry.installed() == []
    with pytest.raises(PortableSpecError, match="unknown platform 'tpu'.*valid choices"):
        registry.install_substitutions("tpu")


def test_a_moved_attribute_is_a_one_line_error_and_changes_nothing(vllm_platform):
    import vllm.v1.spec_decode.utils as utils

    upstream = utils.eagle_prepare_next_token_padded_kernel
    moved = registry.Substitution(
        name="moved", platforms=("musa",), reason="test",
        targets=(KERNEL_TARGETS[0], "vllm.v1.spec_decode.llm_base_proposer.no_such_kernel"),
        replacement=registry.SUBSTITUTIONS[0].replacement)
    with pytest.raises(registry.KernelBindingMissing) as err:
        registry.install_substitutions("musa", (moved,), pick=version_gate.pick)
    message = str(err.value)
    assert "\n" not in message
    assert "vllm.v1.spec_decode.llm_base_proposer has no attribute 'no_such_kernel'" in message
    assert utils.eagle_prepare_next_token_padded_kernel is upstream and registry.installed() == []


def test_a_vanished_module_is_a_one_line_error_and_changes_nothing(vllm_platform):
    import vllm.v1.spec_decode.utils as utils

    upstream = utils.eagle_prepare_next_token_padded_kernel
    gone = registry.Substitution(name="gone", platforms=("musa",), reason="test",
                                 targets=(KERNEL_TARGETS[0], "vllm.v1.no_such_module.kernel"),
                                 replacement=registry.SUBSTITUTIONS[0].replacement)
    with pytest.raises(registry.KernelBindingMissing) as err:
        registry.install_substitutions("musa", (gone,), pick=version_gate.pick)
    assert "\n" not in str(err.value) and str(err.value).startswith("cannot import vllm.v1.no_such_module (")
    assert utils.eagle_prepare_next_token_padded_kernel is upstream and registry.installed() == []


def test_registry_imports_neither_vllm_nor_triton():
    code = ("import sys, portable_spec.kernels, portable_spec.kernels.registry; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('vllm', 'triton')))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", proc.stderr[-2000:]
