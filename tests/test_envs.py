"""``portable_spec/envs.py`` is the one reader of environment variables: a source scan finds no other, its table is
the one in ``docs/environment.md``, and its readers keep the meanings the call sites had."""

from __future__ import annotations

from pathlib import Path

import pytest

from env_reads import environment_reads
from portable_spec import envs
from portable_spec.errors import PortableSpecError

PACKAGE = Path(__file__).resolve().parents[1] / "portable_spec"
DOC = Path(__file__).resolve().parents[1] / "docs" / "environment.md"


# Pass-through of the caller's PYTHONPATH to a child process (the harness composes child environments).
PASS_THROUGH = {"PYTHONPATH"}


def test_only_envs_reads_the_environment():
    offenders = {}
    for path in PACKAGE.rglob("*.py"):
        if path.name == "envs.py" and path.parent == PACKAGE:
            continue
        reads = [(line, text) for line, text in environment_reads(path)
                 if not any(f"'{name}'" in text or f'"{name}"' in text for name in PASS_THROUGH)]
        if reads:
            offenders[str(path.relative_to(PACKAGE))] = reads
    assert offenders == {}
    assert environment_reads(PACKAGE / "envs.py")  # the scan does see a read


def test_the_scan_sees_each_form_of_read(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("import os\na = os.environ.get('X')\nb = os.getenv('Y')\nc = os.environ['Z']\n"
                      "d = 'W' in os.environ\nos.environ['V'] = '1'\ne = dict(os.environ.items())\n")
    assert [line for line, _ in environment_reads(sample)] == [2, 3, 4, 5]


def test_the_docs_table_is_the_modules():
    text = DOC.read_text()
    assert envs.render_markdown() in text
    assert len(envs.VARIABLES) >= 10 and all(f"`{v.name}`" in text for v in envs.VARIABLES)


def test_every_name_constant_is_in_the_table():
    constants = {value for name, value in vars(envs).items() if name.endswith("_ENV") and isinstance(value, str)}
    assert constants == set(envs.BY_NAME)


def test_one_default_per_variable_and_the_readers_keep_their_meanings(monkeypatch):
    for name in envs.BY_NAME:
        monkeypatch.delenv(name, raising=False)
    assert envs.requested_platform() is None and envs.draft_graph() is None
    assert envs.draft_chain() == "fused" and envs.warmup_enabled() and envs.torchada_graph_exec_cap() == 1900
    monkeypatch.setenv("VLLM_PLATFORM", " CUDA ")
    monkeypatch.setenv("PORTABLE_SPEC_DRAFT_GRAPH", "Piecewise")
    monkeypatch.setenv("PORTABLE_SPEC_WARMUP", "off")
    monkeypatch.setenv("TORCHADA_GRAPH_EXEC_CAP", " 40 ")
    assert envs.requested_platform() == "cuda" and envs.draft_graph() == "piecewise"
    assert not envs.warmup_enabled() and envs.torchada_graph_exec_cap() == 40
    monkeypatch.setenv("VLLM_PLATFORM", "")
    assert envs.requested_platform() == ""  # set but empty: not unset (the registry refuses it in one line)
    monkeypatch.setenv("PORTABLE_SPEC_DRAFT_GRAPH", "always")
    with pytest.raises(PortableSpecError, match="^PORTABLE_SPEC_DRAFT_GRAPH='always' is not one of full, piecewise, "
                                                "none; unset it or pick one of those$"):
        envs.draft_graph()
    assert envs.requested_platform({"VLLM_PLATFORM": "musa"}) == "musa"  # an explicit mapping wins
