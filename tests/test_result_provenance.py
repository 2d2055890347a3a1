"""Every result JSON carries the commit it ran at and how many paths of the checkout differ from it
(``soak.report.environment``): a GPU host ran a tree whose HEAD was older than the code it held, and the results named
that HEAD alone."""

from __future__ import annotations

import subprocess

from portable_spec_harness.soak.report import environment, git_state


def _git(root, *args):
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True,
                   env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin"})


def test_a_clean_checkout_has_no_changes_and_an_edited_one_counts_them(tmp_path):
    _git(tmp_path, "init", "-q")
    (tmp_path / "a.py").write_text("x = 1\n")
    _git(tmp_path, "add", "a.py")
    _git(tmp_path, "commit", "-q", "-m", "one")
    head, changes = git_state(tmp_path)
    assert len(head) == 40 and changes == 0
    (tmp_path / "a.py").write_text("x = 2\n")
    (tmp_path / "new.py").write_text("y = 1\n")
    assert git_state(tmp_path) == (head, 2)


def test_no_repository_is_none_not_a_guess(tmp_path):
    assert git_state(tmp_path / "nowhere") == (None, None)


def test_the_report_carries_both():
    info = environment()
    assert "commit" in info and "tree_changes" in info
    assert info["commit"] is None or isinstance(info["tree_changes"], int)
