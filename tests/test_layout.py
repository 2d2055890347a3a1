"""The package layout's two rules, checked on the source and on a real import:
- only ``portable_spec/vllm_adapter/`` imports vllm;
- nothing ``vllm serve`` loads through our entry points (plugins, platform classes, worker, V1 runner and drafters,
  kernel substitutions) imports the harness (generated models, synthetic drafts, benchmarks, e2e drivers)."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "portable_spec"
SERVE_PATH_MODULES = (
    "portable_spec.vllm_adapter.platform_probe", "portable_spec.vllm_adapter.general_plugin",
    "portable_spec.vllm_adapter.musa", "portable_spec.vllm_adapter.worker", "portable_spec.vllm_adapter.musa_worker",
    "portable_spec.vllm_adapter.v1_runner", "portable_spec.vllm_adapter.v1_drafter",
    "portable_spec.vllm_adapter.v1_fused_chain", "portable_spec.vllm_adapter.v1_draft_prep",
    "portable_spec.vllm_adapter.v1_warmup",
    "portable_spec.vllm_adapter.warmup_plan", "portable_spec.kernels.eagle_prepare_next_token",
)


def vllm_imports(path: Path) -> list[int]:
    lines = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
        if any(name == "vllm" or name.startswith("vllm.") for name in names):
            lines.append(node.lineno)
    return lines


def test_only_the_vllm_adapter_imports_vllm():
    offenders = {str(p.relative_to(PACKAGE)): vllm_imports(p) for p in PACKAGE.rglob("*.py")
                 if "vllm_adapter" not in p.parts}
    assert {p: lines for p, lines in offenders.items() if lines} == {}
    assert any(vllm_imports(p) for p in (PACKAGE / "vllm_adapter").glob("*.py"))  # the scan does find imports


def test_what_vllm_serve_loads_never_imports_the_harness():
    script = textwrap.dedent(f"""
        import importlib, sys
        import vllm.platforms
        from portable_spec.vllm_adapter.testing_platform import CpuGraphTestPlatform
        vllm.platforms._current_platform = CpuGraphTestPlatform()
        for name in {SERVE_PATH_MODULES!r}:
            importlib.import_module(name)
        loaded = sorted(m for m in sys.modules if m.startswith("portable_spec."))
        assert "portable_spec.draft.runner" in loaded, loaded   # the one runner is on the serve path
        print("HARNESS", [m for m in loaded if m.startswith("portable_spec.harness")])
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "HARNESS []" in proc.stdout, proc.stdout


def portable_spec_imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return {n for n in names if n.startswith("portable_spec.")}


def test_only_the_cli_imports_the_cli_layer():
    """``commands/`` and ``cli`` stand on top: a lower layer importing them is an arrow that runs back up."""
    top = ("portable_spec.commands", "portable_spec.cli")
    offenders = {str(p.relative_to(PACKAGE)): sorted(n for n in portable_spec_imports(p) if n.startswith(top))
                 for p in PACKAGE.rglob("*.py") if not {"commands"} & set(p.parts)
                 and p.name not in ("cli.py", "__main__.py")}
    assert {p: names for p, names in offenders.items() if names} == {}
    assert portable_spec_imports(PACKAGE / "cli.py")  # the scan does find our imports
