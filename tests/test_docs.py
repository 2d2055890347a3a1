"""The docs cannot drift from the code: every repository path and every ``portable_spec`` module the user-facing docs
name exists, the architecture page names every part of the vLLM adapter, the README's status says the lane of every
claim, and the README is a guide, not a log of past runs.

Checked by reading files only: modules are resolved to source files and their definitions read with ``ast``; nothing
is imported. ``<placeholder>`` segments match anything. The imaginary accelerator "Acme" of ``docs/platforms.md``
mirrors the MUSA port file for file, so its paths and modules are checked as MUSA's (``platforms/acme.py`` must stand
where ``ports/musa_port.py`` does).
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "portable_spec"
ADAPTER = PACKAGE / "vllm_adapter"
DOCS = ("README.md", "DEVELOPERS.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")))

TOP_DIRS = ("portable_spec", "harness", "ci", "tests", "docs", "bench")
"""Repository paths the docs may name whole (``ci/lanes/cpu.sh``)."""
SUBPACKAGES = tuple(sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()))
"""The package's own subpackages: a path or dotted name starting with one (``vllm_adapter/worker/``,
``platforms.registry``) is read relative to ``portable_spec/``."""
LANES = ("cpu-ci", "cuda-h100", "cuda-h200x2", "musa-sim", "vllm-musa-contract", "declared", "not run")
"""Every lane a claim may name (README "Status", ``docs/platforms.md``)."""
EXAMPLE = {"acme": "musa", "Acme": "Musa", "ACME": "MUSA"}
"""docs/platforms.md's imaginary accelerator, and the real one its files mirror."""

_PATH = re.compile(r"(?<![\w./-])((?:%s)/[\w./{},*<>-]*)" % "|".join(TOP_DIRS + SUBPACKAGES))
_DOTTED = re.compile(r"(?<![\w./-])((?:portable_spec_harness|portable_spec|%s)(?:[.:][A-Za-z_]\w*)+)"
                     % "|".join(SUBPACKAGES))
_LINK = re.compile(r"!?\[([^\]]*)\]\(([^)]*)\)")


def doc_text(name: str) -> str:
    return (ROOT / name).read_text()


def expand_braces(path: str) -> list[str]:
    """``ci/lanes/{cpu,cuda}.sh`` -> both paths (one brace group at a time)."""
    match = re.search(r"\{([^{}]*)\}", path)
    if not match:
        return [path]
    return [p for alt in match.group(1).split(",")
            for p in expand_braces(path[:match.start()] + alt + path[match.end():])]


def path_exists(path: str) -> bool:
    """A repository path (or one relative to ``portable_spec/``) exists; ``*`` and ``<placeholder>`` match any."""
    path = path.rstrip(".,;:")
    if path.split("/")[0] in SUBPACKAGES and not (ROOT / path.split("/")[0]).exists():
        path = f"portable_spec/{path}"
    pattern = re.sub(r"<[^<>/]*>", "*", path).rstrip("/")
    if "*" in pattern:
        return any(ROOT.glob(pattern))
    return (ROOT / pattern).exists()


def referenced_paths(text: str) -> set[str]:
    found = {p for raw in _PATH.findall(text) for p in expand_braces(raw)}
    return {p for p in found if p.rstrip(".,;:/")}


@functools.lru_cache(maxsize=None)
def module_names(path: Path) -> dict[str, set[str]]:
    """Top-level names a module defines or imports, each with the names its class body defines (empty otherwise)."""
    names: dict[str, set[str]] = {}
    for node in ast.parse(path.read_text(), str(path)).body:
        if isinstance(node, ast.ClassDef):
            names[node.name] = {n.name for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                              ast.ClassDef))}
            names[node.name] |= {t.id for n in node.body if isinstance(n, (ast.Assign, ast.AnnAssign))
                                 for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
                                 if isinstance(t, ast.Name)}
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names[node.name] = set()
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(target, ast.Name):
                    names[target.id] = set()
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names[(alias.asname or alias.name).split(".")[0]] = set()
    return names


def module_resolves(dotted: str) -> bool:
    """``portable_spec.a.b[.Name[.member]]`` (or ``a.b`` for a subpackage, ``:`` before the name allowed) names a
    module file or package, then at most a name it defines and a member of that class."""
    parts = dotted.replace(":", ".").split(".")
    if parts[0] not in ("portable_spec", "portable_spec_harness"):
        parts = ["portable_spec", *parts]
    root = ROOT / "harness" if parts[0] == "portable_spec_harness" else ROOT
    for cut in range(len(parts), 0, -1):
        base = root.joinpath(*parts[:cut])
        source = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
        if source.exists():
            rest = parts[cut:]
            break
    else:
        return False
    if not rest:
        return True
    if len(rest) > 2 or rest[0] not in module_names(source):
        return False
    return len(rest) == 1 or rest[1] in module_names(source)[rest[0]]


def referenced_modules(text: str) -> set[str]:
    return {m.rstrip(".") for m in _DOTTED.findall(text)} - {"portable_spec", "portable_spec_harness"}


@functools.lru_cache(maxsize=None)
def module_stems() -> dict[str, tuple[Path, ...]]:
    """Every module of the package by its file's stem (``musa`` is two files: a port and a vLLM platform class)."""
    stems: dict[str, list[Path]] = {}
    for path in PACKAGE.rglob("*.py"):
        if path.stem != "__init__":
            stems.setdefault(path.stem, []).append(path)
    return {stem: tuple(paths) for stem, paths in stems.items()}


RETIRED = ("mixin", "v1_drafter", "v1_fused_chain", "v1_draft_prep", "draft_graph_policy", "v1_runner", "v1_warmup")
"""Adapter modules the move into ``vllm_adapter/``'s packages renamed or split (``spec_decode/``, ``worker/``,
``platform/base.py``); a doc naming one by its old stem is stale. A stem that exists again is not retired."""
_CODE_SPAN = re.compile(r"`([^`\n]+)`")
_SHORT = re.compile(r"([a-z_][a-z0-9_]*)(?:[.:]([A-Za-z_]\w*))?")
EXTENSIONS = {"py", "md", "sh", "json", "png", "txt", "toml", "log", "xml", "yml"}


def short_references(text: str) -> list[str]:
    """Stale ``stem.Name`` references in code spans, where ``stem`` is one of our module files (``config_hook.x``,
    ``musa_worker.MusaWorker``), and code spans that start with a retired module's stem."""
    stale = []
    for span in _CODE_SPAN.findall(text):
        stem, name = _SHORT.match(span).groups() if _SHORT.match(span) else (None, None)
        if stem in RETIRED and stem not in module_stems():
            stale.append(f"retired module {stem}")
        elif stem in module_stems() and name and name not in EXTENSIONS and not any(
                name in module_names(path) for path in module_stems()[stem]):
            stale.append(f"name {stem}.{name}")
    return stale


def as_real_platform(text: str) -> str:
    return re.sub("|".join(EXAMPLE), lambda m: EXAMPLE[m.group(0)], text)


def missing_references(text: str) -> list[str]:
    text = as_real_platform(text)
    return sorted({f"path {p}" for p in referenced_paths(text) if not path_exists(p)}
                  | {f"module {m}" for m in referenced_modules(text) if not module_resolves(m)}
                  | set(short_references(text)))


@pytest.mark.parametrize("doc", DOCS)
def test_every_path_and_module_a_doc_names_exists(doc):
    text = doc_text(doc)
    assert missing_references(text) == []
    assert referenced_paths(text) or referenced_modules(text)  # the scan does find references


def test_the_scan_catches_a_stale_path_and_module():
    """What this file exists for: a moved module or a renamed folder fails, in either form a doc may use."""
    assert missing_references("`portable_spec/vllm_adapter/mixin.py` and `vllm_adapter/v1_drafter.py`") == [
        "path portable_spec/vllm_adapter/mixin.py", "path vllm_adapter/v1_drafter.py"]
    assert missing_references("`portable_spec.vllm_adapter.musa_worker.MusaWorker`") == [
        "module portable_spec.vllm_adapter.musa_worker.MusaWorker"]
    assert missing_references("`portable_spec.vllm_adapter.worker.musa_worker.MusaWorkr`") == [
        "module portable_spec.vllm_adapter.worker.musa_worker.MusaWorkr"]
    assert missing_references("`ci/lanes/{cpu,cuda,sparc}.sh` and `bench/results/<date>-nowhere/`") == [
        "path bench/results/<date>-nowhere/", "path ci/lanes/sparc.sh"]
    assert missing_references("`musa_worker.MusaWorkr`, `config_hook.apply_capture_plan`, "
                              "`v1_runner.PortableV1ModelRunner`, `draft_graph_policy`") == [
        "name musa_worker.MusaWorkr", "retired module draft_graph_policy", "retired module v1_runner"]
    assert missing_references("`ci/lanes/{cpu,cuda}.sh`, `tests/test_cli_*.py`, `bench/results/<folder>/README.md`, "
                              "`portable_spec.kernels.registry:install_substitutions`, "
                              "`ports.registry.platform_class`, "
                              "`portable_spec.vllm_adapter.worker.gpu_worker.PortableWorker.init_device`, "
                              "`portable_spec/ports/acme_port.py`, "
                              "`portable_spec.vllm_adapter.platform.acme.PortableAcmePlatform` (the example)") == []
    # The example moves with the MUSA files it mirrors: the old place of a vLLM platform class fails.
    assert missing_references("`portable_spec/vllm_adapter/acme.py`") == ["path portable_spec/vllm_adapter/musa.py"]


def test_architecture_names_every_adapter_subpackage():
    text = doc_text("docs/architecture.md")
    subpackages = sorted(p.name for p in ADAPTER.iterdir() if (p / "__init__.py").exists())
    assert len(subpackages) >= 6
    assert [s for s in subpackages if f"vllm_adapter/{s}/" not in text and f"vllm_adapter.{s}" not in text] == []


def test_architecture_names_every_package_layer():
    """Each of ``portable_spec``'s subpackages stands in the layer table (``kernels`` was once left out)."""
    table = doc_text("docs/architecture.md").split("## Layers", 1)[1].split("\n## ", 1)[0]
    assert [s for s in SUBPACKAGES if f"`{s}/`" not in table] == []


def cli_commands() -> list[str]:
    """``COMMANDS`` of ``portable_spec/cli.py``, read from its source."""
    for node in ast.parse((PACKAGE / "cli.py").read_text()).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "COMMANDS":
            return list(ast.literal_eval(node.value))
    raise AssertionError("portable_spec/cli.py defines no COMMANDS")


def test_every_cli_command_is_named_in_the_layers_and_the_readme():
    """The CLI's layer lists every command (``kernels`` was once left out), and so does the README."""
    table = doc_text("docs/architecture.md").split("## Layers", 1)[1].split("\n## ", 1)[0]
    cli_row = next(line for line in table.splitlines() if "`commands/`" in line)
    assert len(cli_commands()) >= 5
    assert [c for c in cli_commands() if not re.search(rf"\b{c}\b", cli_row)] == []
    assert [c for c in cli_commands() if f"`{c}`" not in doc_text("README.md")
            and f"portable-spec {c}" not in doc_text("README.md")] == []


def table_rows(text: str, heading: str) -> tuple[list[str], list[list[str]]]:
    """The header cells and body rows of the first table under ``heading`` (a line starting with it)."""
    section = text.split(f"\n{heading}", 1)[1]
    lines = [line for line in section.split("\n\n## ")[0].splitlines() if line.startswith("|")]
    cells = [[c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]] for line in lines]
    return cells[0], cells[2:]


def lanes_of(cell: str) -> list[str]:
    return [lane for lane in LANES if lane in cell]


@pytest.mark.parametrize("doc,heading", [("README.md", "## Status"),
                                         ("docs/platforms.md", "## Every claim and the lane that showed it")])
def test_every_status_row_names_its_lane(doc, heading):
    header, rows = table_rows(doc_text(doc), heading)
    columns = [i for i, name in enumerate(header) if "lane" in name.lower()]
    assert columns, f"{doc}: the table under {heading!r} has no lane column ({header})"
    assert len(rows) >= 5
    unlaned = [row[0] for row in rows if not any(lanes_of(row[i]) for i in columns)]
    assert unlaned == [], f"rows without a lane ({', '.join(LANES)})"


def outside_links(text: str) -> str:
    """The text with markdown links (their words and targets) removed."""
    return _LINK.sub("", text)


RUN_LABELS = re.compile(r"\bsession[\s_-]?\d+|\blease[\s_-]?\d+|\b20\d\d-\d\d-\d\d\b", re.IGNORECASE)


def run_labels(text: str) -> list[str]:
    return RUN_LABELS.findall(outside_links(text))


def test_the_readme_is_a_guide_not_a_run_log():
    """Run-by-run history belongs in ``bench/results/<folder>/README.md``; the README links to the folders."""
    assert run_labels(doc_text("README.md")) == []
    assert run_labels("session 8 measured, lease 2 and 2026-11-24 [folder](bench/results/2026-11-24-h100-session8/)"
                      ) == ["session 8", "lease 2", "2026-11-24"]
    assert run_labels("[the latest H100 run](bench/results/2026-11-24-h100-session8/)") == []


def test_the_readme_links_resolve():
    targets = [t.split("#")[0] for _, t in _LINK.findall(doc_text("README.md")) if "://" not in t]
    assert targets and [t for t in targets if t and not (ROOT / t).exists()] == []
