"""The layout's rules, checked on the source, on a real import and on the built wheel:
- the product (``portable_spec``, the wheel) never imports the harness (``portable_spec_harness``, the distribution
  ``portable-spec-harness`` in ``harness/``), and the wheel ships the product only;
- in the product only ``vllm_adapter`` imports vLLM; in the harness only ``vllm_door``;
- the product is layered (``PRODUCT_LAYERS``): a module imports only its own unit and the units of lower layers, so a
  new arrow that runs back up fails here;
- the adapter's inside mirrors vLLM's tree: what ``vllm serve`` loads never imports the fenced-off ``tools``."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "portable_spec"
HARNESS = ROOT / "harness" / "portable_spec_harness"
ADAPTER = PACKAGE / "vllm_adapter"
SERVE_PACKAGES = ("plugin", "platform", "worker", "spec_decode", "patch")
FENCED_PACKAGES = ("tools",)

PRODUCT_LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "output", "logs", "capture_sizes", "versions"),
    ("envs",),
    ("ports",),
    ("kernels", "draft"),
    ("attention_caps", "probe"),
    ("vllm_adapter.patch",),
    ("vllm_adapter.platform",),
    ("vllm_adapter.spec_decode",),
    ("vllm_adapter.worker",),
    ("vllm_adapter.plugin", "vllm_adapter.tools"),
    ("commands",),
    ("cli",),
    ("__main__",),
)
"""The product's units, lowest layer first (``docs/architecture.md`` draws them). A unit is a top-level module or
package of ``portable_spec``, or a package of the adapter."""


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(path: Path) -> list[tuple[int, str]]:
    """``(line, dotted name)`` for each absolute import; ``from a import b`` gives ``a`` and ``a.b``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found += [(node.lineno, node.module)] + [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
    return found


def unit_of(name: str) -> str | None:
    """The layer unit of a dotted ``portable_spec`` name: a top-level module or package, or an adapter package. None
    for anything else (the package's own attributes, such as ``__version__``)."""
    parts = name.split(".")
    if parts[0] != "portable_spec" or len(parts) < 2:
        return None
    depth = 3 if parts[1] == "vllm_adapter" else 2
    unit = parts[1:depth]
    if len(unit) < depth - 1:
        return None
    path = PACKAGE.joinpath(*unit)
    return ".".join(unit) if path.is_dir() or path.with_suffix(".py").is_file() else None


RANK = {unit: rank for rank, units in enumerate(PRODUCT_LAYERS) for unit in units}


def upward_imports(modules: dict[Path, str]) -> list[str]:
    """Every import from one unit to another of the same or a higher layer, as ``file:line: a -> b``, for
    ``{path: module name}``."""
    bad = []
    for path, name in modules.items():
        own = unit_of(name)
        arrows = {(line, unit_of(imported)) for line, imported in imported_names(path)}
        for line, other in sorted(arrows, key=lambda a: (a[0], a[1] or "")):
            if own is None or other is None or other == own:
                continue
            if other not in RANK or RANK[other] >= RANK[own]:
                bad.append(f"{path.name}:{line}: {own} -> {other}")
    return bad


def product_files() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_every_product_unit_has_a_layer():
    units = {unit_of(module_name(p, PACKAGE)) for p in product_files()} - {None}
    assert units and units <= set(RANK), units - set(RANK)


def test_the_product_imports_only_downward():
    assert upward_imports({p: module_name(p, PACKAGE) for p in product_files()}) == []


def test_the_layer_check_catches_an_arrow_that_runs_back_up(tmp_path):
    """A module of a low layer that imports a higher one (the kind of arrow issue 35 removed: the platform package
    importing the worker's log helper) is reported."""
    fake = tmp_path / "upward.py"
    fake.write_text("from portable_spec.vllm_adapter.worker.gpu_worker import PortableWorker\n"
                    "from portable_spec.capture_sizes import plan_capture_sizes\n")
    assert upward_imports({fake: "portable_spec.vllm_adapter.platform.upward"}) == [
        "upward.py:1: vllm_adapter.platform -> vllm_adapter.worker"]
    assert upward_imports({fake: "portable_spec.vllm_adapter.worker.upward"}) == []


def vllm_import_lines(path: Path) -> list[int]:
    return [line for line, name in imported_names(path) if name == "vllm" or name.startswith("vllm.")]


def test_only_the_vllm_adapter_imports_vllm():
    offenders = {str(p.relative_to(ROOT)): vllm_import_lines(p) for p in product_files()
                 if "vllm_adapter" not in p.parts}
    assert {p: lines for p, lines in offenders.items() if lines} == {}
    assert any(vllm_import_lines(p) for p in ADAPTER.rglob("*.py"))  # the scan does find imports


def test_inside_the_harness_only_its_vllm_door_imports_vllm():
    offenders = {str(p.relative_to(ROOT)): vllm_import_lines(p) for p in HARNESS.rglob("*.py")
                 if "vllm_door" not in p.parts}
    assert {p: lines for p, lines in offenders.items() if lines} == {}
    assert any(vllm_import_lines(p) for p in (HARNESS / "vllm_door").rglob("*.py"))


def test_the_product_never_imports_the_harness():
    offenders = {str(p.relative_to(ROOT)): [line for line, name in imported_names(p)
                                              if name.split(".")[0] == "portable_spec_harness"]
                 for p in product_files()}
    assert {p: lines for p, lines in offenders.items() if lines} == {}
    assert any(name.startswith("portable_spec.") for p in HARNESS.rglob("*.py") for _, name in imported_names(p))


def test_the_adapter_is_its_named_packages_only():
    """No module lies loose at the adapter's top: each has a place in the mirrored tree."""
    assert sorted(p.name for p in ADAPTER.glob("*.py")) == ["__init__.py"]
    packages = sorted(p.name for p in ADAPTER.iterdir() if p.is_dir() and (p / "__init__.py").exists())
    assert packages == sorted(SERVE_PACKAGES + FENCED_PACKAGES)
    assert len(serve_path_modules()) >= 20


def serve_path_modules() -> list[str]:
    """Every module of the serve packages, plus the product layers they stand on that load with them."""
    modules = [f"portable_spec.vllm_adapter.{pkg}.{path.stem}" for pkg in SERVE_PACKAGES
               for path in sorted((ADAPTER / pkg).glob("*.py")) if path.stem != "__init__"]
    return modules + ["portable_spec.kernels.eagle_prepare_next_token"]


def test_the_serve_packages_never_import_the_fenced_ones():
    fenced = tuple(f"portable_spec.vllm_adapter.{pkg}" for pkg in FENCED_PACKAGES)
    offenders = {str(p.relative_to(ROOT)): sorted(n for _, n in imported_names(p) if n.startswith(fenced))
                 for pkg in SERVE_PACKAGES for p in (ADAPTER / pkg).glob("*.py")}
    assert {p: names for p, names in offenders.items() if names} == {}


def test_what_vllm_serve_loads_never_imports_the_harness_or_the_fenced_packages():
    script = textwrap.dedent(f"""
        import importlib, sys
        import vllm.platforms
        from vllm.platforms.interface import Platform, PlatformEnum
        from portable_spec.vllm_adapter.platform.base import PortableSpecPlatformMixin

        class Pinned(PortableSpecPlatformMixin, Platform):  # no import of the harness's CPU test platform
            _enum = PlatformEnum.OOT
            device_name = device_type = "cpu"
            port_name = "cpu"

        vllm.platforms._current_platform = Pinned()
        # platform_error raises on import by design (vLLM imports it to show our error); vLLM's CUDA/ROCm platform
        # modules need a GPU, our classes composed on vllm-musa need vllm-musa (the AST checks above cover them all;
        # tests/test_vllm_musa_contract.py imports the last two on its stand-in).
        SKIP = (".platform_error", ".platform.cuda", ".platform.rocm", ".platform.vllm_musa_platform",
                ".worker.vllm_musa_worker")
        # Our MRV2 standalone speculator subclasses vLLM's, which exists from vLLM 0.33.0 (the worker imports it only
        # there; tests/test_mrv2_standalone.py imports it on such a vLLM).
        import importlib.util
        try:
            has_standalone = importlib.util.find_spec("vllm.v1.worker.gpu.spec_decode.standalone_ar") is not None
        except ModuleNotFoundError:
            has_standalone = False
        if not has_standalone:
            SKIP += (".spec_decode.standalone_ar",)
        for name in {serve_path_modules()!r}:
            if not name.endswith(SKIP):
                importlib.import_module(name)
        loaded = sorted(m for m in sys.modules if m.startswith("portable_spec"))
        assert "portable_spec.draft.runner" in loaded, loaded   # the one runner is on the serve path
        assert "portable_spec.vllm_adapter.worker.v1_model_runner" in loaded, loaded
        fenced = ("portable_spec_harness", "portable_spec.vllm_adapter.tools")
        print("FENCED", [m for m in loaded if m.startswith(fenced)])
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "FENCED []" in proc.stdout, proc.stdout


def test_the_wheel_ships_the_product_only(tmp_path):
    """Builds ``portable-spec``'s wheel from a copy of the repository (everything but git and the results) and lists
    it: every product module and the verified attention claims, nothing of the harness, tests or CI."""
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".git", "bench", "build", "*.egg-info", "__pycache__",
                                                             ".pytest_cache", ".hypothesis"))
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                           "--disable-pip-version-check", "-w", str(tmp_path / "dist"), str(src)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("portable_spec-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    dist_info = "-".join(wheel.name.split("-")[:2]) + ".dist-info"
    tops = {n.split("/")[0] for n in names}
    assert tops == {"portable_spec", dist_info}, tops
    shipped = {n for n in names if n.endswith(".py")}
    expected = {str(p.relative_to(ROOT)) for p in product_files()}
    assert shipped == expected, shipped ^ expected
    assert not [n for n in names if "harness" in n or n.startswith(("tests/", "ci/"))]
    entry_points = zipfile.ZipFile(wheel).read(f"{dist_info}/entry_points.txt")
    assert b"portable_spec.vllm_adapter.plugin.platform_plugin:platform_qualname" in entry_points


RUN_HISTORY = re.compile(r"\bissues? \d+|\bsessions? \d+|bench/results/|\b20\d\d-\d\d-\d\d\b", re.IGNORECASE)
"""What marks run history in a docstring or comment: which issue or session, a results folder, a date. Results and
their history belong in ``bench/results/<run>/README.md``; the product's text says why."""


def run_history(paths: list[Path]) -> list[str]:
    return [f"{p.relative_to(ROOT) if p.is_relative_to(ROOT) else p.name}:{n}: {line.strip()[:80]}"
            for p in paths for n, line in enumerate(p.read_text().splitlines(), 1) if RUN_HISTORY.search(line)]


def test_the_products_text_carries_no_run_history(tmp_path):
    assert run_history(product_files()) == []
    planted = tmp_path / "planted.py"
    planted.write_text('"""Measured in session 7 (bench/results/2026-11-25-h100-session11, issue 23)."""\n')
    assert len(run_history([planted])) == 1


def unit_arrows() -> dict[str, set[str]]:
    """Which units each product unit imports (its own unit left out)."""
    arrows: dict[str, set[str]] = {}
    for path in product_files():
        own = unit_of(module_name(path, PACKAGE))
        if own is not None:
            others = {unit_of(name) for _, name in imported_names(path)} - {None, own}
            arrows.setdefault(own, set()).update(others)
    return arrows


def render_import_graph(arrows: dict[str, set[str]]) -> str:
    """One line per unit, highest layer first: ``unit → what it imports``, each list lowest layer last."""
    order = sorted(arrows, key=lambda u: (-RANK[u], u))
    return "\n".join(f"{u} → {', '.join(sorted(arrows[u], key=lambda o: (-RANK.get(o, -1), o))) or '(nothing)'}"
                     for u in order)


def test_architecture_draws_the_import_graph_the_code_has():
    """``docs/architecture.md``'s import graph is the code's (regenerate it with ``render_import_graph``)."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    block = text.split("<!-- import-graph:begin -->\n```\n", 1)[1].split("```\n<!-- import-graph:end -->", 1)[0]
    assert block.strip() == render_import_graph(unit_arrows()), render_import_graph(unit_arrows())
    assert len(block.strip().splitlines()) == len(unit_arrows()) >= 15
