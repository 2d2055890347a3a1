"""The package layout's rules, checked on the source and on a real import:
- only ``portable_spec/vllm_adapter/`` imports vllm;
- the adapter's inside mirrors vLLM's tree: what ``vllm serve`` loads (``plugin``, ``platform``, ``worker``,
  ``spec_decode``, ``patch``) never imports the fenced-off packages (``tools``, ``harness_door``) nor the harness
  (generated models, synthetic drafts, benchmarks, e2e drivers);
- the CLI layer stands on top."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "portable_spec"
ADAPTER = PACKAGE / "vllm_adapter"
SERVE_PACKAGES = ("plugin", "platform", "worker", "spec_decode", "patch")
FENCED_PACKAGES = ("tools", "harness_door")


def serve_path_modules() -> list[str]:
    """Every module of the serve packages, plus the product layers they stand on that load with them."""
    modules = [f"portable_spec.vllm_adapter.{pkg}.{path.stem}" for pkg in SERVE_PACKAGES
               for path in sorted((ADAPTER / pkg).glob("*.py")) if path.stem != "__init__"]
    return modules + ["portable_spec.kernels.eagle_prepare_next_token"]


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
    assert any(vllm_imports(p) for p in ADAPTER.rglob("*.py"))  # the scan does find imports


def test_the_adapter_is_its_named_packages_only():
    """No module lies loose at the adapter's top: each has a place in the mirrored tree."""
    assert sorted(p.name for p in ADAPTER.glob("*.py")) == ["__init__.py"]
    packages = sorted(p.name for p in ADAPTER.iterdir() if p.is_dir() and (p / "__init__.py").exists())
    assert packages == sorted(SERVE_PACKAGES + FENCED_PACKAGES)
    assert len(serve_path_modules()) >= 20


def test_the_serve_packages_never_import_the_fenced_ones_or_the_harness():
    fenced = tuple(f"portable_spec.vllm_adapter.{pkg}" for pkg in FENCED_PACKAGES) + ("portable_spec.harness",)
    offenders = {}
    for pkg in SERVE_PACKAGES:
        for path in (ADAPTER / pkg).glob("*.py"):
            bad = sorted(n for n in portable_spec_imports(path) if n.startswith(fenced))
            if bad:
                offenders[str(path.relative_to(PACKAGE))] = bad
    assert offenders == {}


def test_what_vllm_serve_loads_never_imports_the_harness_or_the_fenced_packages():
    script = textwrap.dedent(f"""
        import importlib, sys
        import vllm.platforms
        from vllm.platforms.interface import Platform, PlatformEnum
        from portable_spec.vllm_adapter.platform.base import PortableSpecPlatformMixin

        class Pinned(PortableSpecPlatformMixin, Platform):  # no import of tools/ (where the CPU test platform is)
            _enum = PlatformEnum.OOT
            device_name = device_type = "cpu"
            port_name = "cpu"

        vllm.platforms._current_platform = Pinned()
        # platform_error raises on import by design (vLLM imports it to show our error); vLLM's CUDA/ROCm platform
        # modules need a GPU, our classes composed on vllm-musa need vllm-musa (the AST check above covers them all;
        # tests/test_vllm_musa_contract.py imports the last two on its stand-in).
        SKIP = (".platform_error", ".platform.cuda", ".platform.rocm", ".platform.vllm_musa_platform",
                ".worker.vllm_musa_worker")
        for name in {serve_path_modules()!r}:
            if not name.endswith(SKIP):
                importlib.import_module(name)
        loaded = sorted(m for m in sys.modules if m.startswith("portable_spec."))
        assert "portable_spec.draft.runner" in loaded, loaded   # the one runner is on the serve path
        assert "portable_spec.vllm_adapter.worker.v1_model_runner" in loaded, loaded
        fenced = ("portable_spec.harness", "portable_spec.vllm_adapter.tools", "portable_spec.vllm_adapter.harness_door")
        print("FENCED", [m for m in loaded if m.startswith(fenced)])
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "FENCED []" in proc.stdout, proc.stdout


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
