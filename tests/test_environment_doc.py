"""Every environment variable a module or script of this repository reads is in ``docs/environment.md``.

A knob a lane reads that no doc names is one a user cannot find (issue 36: the docs omitted the lane variables the
README names). The scan (``tests/env_reads.py``) reads the source of the product, the harness, ``ci/``, ``.ci/`` and
the tests; the docs page is the rendering of two tables, the product's (``portable_spec/envs.py``) and the lanes'
(``portable_spec_harness/lane_envs.py``), so a name missing from the page is a name missing from both tables.
"""

from __future__ import annotations

from env_reads import ROOT, bash_reads, bash_scripts, every_read, python_reads
from portable_spec import envs
from portable_spec_harness import lane_envs

DOC = ROOT / "docs" / "environment.md"

STANDARD = {
    "BASH_SOURCE": "bash's own: where a script lies, to find the repository root",
    "PIPESTATUS": "bash's own: the exit status of a pipeline's first command",
    "SECONDS": "bash's own: seconds since the shell started, to time a lane step",
    "HOME": "the user's home, only as the root of a default path",
    "PYTHONPATH": "Python's own search path: the lanes prepend to it and children inherit it, never a switch of ours",
    "LD_LIBRARY_PATH": "the dynamic linker's search path: ci/cpu_venv_slim.py looks where the linker would look",
}
"""Variables read that are no switch of this repository's, each with why."""

GENERIC_READERS = {("portable_spec/envs.py", "os.environ.get(name)")}
"""Reads whose name is a parameter: ``envs.recorded(names)``, whose callers the scan reads instead."""


def test_every_variable_read_is_in_the_docs():
    readers, unresolved, files = every_read()
    assert files >= 300 and len(readers) >= 50, (files, len(readers))  # the scan sees the tree, and reads in it
    assert {(path, text) for path, _, text in unresolved} <= GENERIC_READERS, unresolved
    documented = set(envs.BY_NAME) | set(lane_envs.BY_NAME)
    missing = {name: sorted(paths) for name, paths in readers.items() if name not in documented | set(STANDARD)}
    assert missing == {}, f"read but not in docs/environment.md (add a row to envs.py or lane_envs.py): {missing}"
    text = DOC.read_text()
    assert [name for name in sorted(documented) if f"| `{name}` |" not in text] == []


def test_the_lane_table_says_who_reads_each_variable_and_nothing_more():
    """A row whose files no longer read it is stale; "read by" is the scan's set of files."""
    readers, _, _ = every_read()
    wrong = {var.name: (var.read_by, sorted(readers.get(var.name, ()))) for var in lane_envs.VARIABLES
             if set(var.read_by) != readers.get(var.name, set())}
    assert wrong == {}
    assert not set(lane_envs.BY_NAME) & set(envs.BY_NAME), "a variable belongs to one table"
    assert not set(STANDARD) & (set(lane_envs.BY_NAME) | set(envs.BY_NAME))


def test_the_docs_page_is_both_tables():
    text = DOC.read_text()
    assert envs.render_markdown() in text and lane_envs.render_markdown() in text
    assert len(lane_envs.VARIABLES) >= 40


def test_the_bash_scan_sees_reads_and_skips_what_the_script_sets(tmp_path):
    script = tmp_path / "lane.sh"
    script.write_text('#!/usr/bin/env bash\n'
                      'out="${OUTER:-x}"; py="${PYTHON:-python3}"\n'      # 2: reads OUTER, PYTHON
                      'MINE=1\necho "$MINE"\n'                              # 3-4: its own
                      'KEPT="${KEPT:-required}"\n'                          # 5: reads the caller's KEPT
                      'ONLY_CHILD=1 cmd "$out"\n'                           # 6: sets for cmd, reads nothing
                      '# a comment naming $COMMENTED\n'
                      'echo ${#arr[@]} ${E2E_PARTS:+--parts "$E2E_PARTS"}\n')  # 8
    assert bash_reads(script) == {"OUTER": [2], "PYTHON": [2], "KEPT": [5], "E2E_PARTS": [8, 8]}


def test_the_python_scan_resolves_names_and_skips_what_the_file_hands_its_children(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("import os\nfrom portable_spec import envs\nVAR = 'CONST_NAME'\n"
                      "a = os.environ.get('LITERAL')\nb = os.getenv(VAR)\nc = os.environ[envs.PLATFORM_ENV]\n"
                      "d = 'OWN' in os.environ\nenv = {'OWN': '1'}\ne = envs.recorded(('REC',))\n"
                      "f = os.environ.get(some_name())\n")
    names, unresolved = python_reads(sample)
    assert names == {"LITERAL": [4], "CONST_NAME": [5], "VLLM_PLATFORM": [6], "REC": [9]}
    assert [line for line, _ in unresolved] == [10]


def test_the_scan_reaches_the_lanes_and_the_tests():
    readers, _, _ = every_read()
    seen = {path for paths in readers.values() for path in paths}
    for path in ("ci/lanes/cpu.sh", "ci/lanes/cuda.sh", "ci/gpu/tp2.sh", "tests/lane_tools.py",
                 "portable_spec/vllm_adapter/tools/attention_verify.py"):
        assert path in seen, path
    assert ROOT / ".ci" / "run" in bash_scripts()  # an extension-less bash script is scanned too
