"""``ci/mutations.py`` on a tiny fake repository: a mutation a test sees is caught with that test named, one no
test sees survives, the working tree is never touched, and a mutation whose text is not in the code is refused."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from ci_scripts import load_ci_script

ROOT = Path(__file__).resolve().parents[1]


def tool():
    return load_ci_script("ci/mutations.py", "ci_mutations")


@pytest.fixture
def fake_repo(tmp_path):
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "calc.py").write_text("def add(a, b):\n    return a + b\n\n\ndef unused():\n    return 1\n")
    (repo / "tests" / "test_calc.py").write_text("from calc import add\n\n\ndef test_add():\n"
                                                 "    assert add(2, 3) == 5\n\n\ndef test_other():\n    pass\n")
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    return repo


def test_a_caught_and_a_surviving_mutation_are_told_apart(fake_repo, capsys):
    m = tool()
    caught = m.Mutation("minus", "calc", "calc.py", "return a + b", "return a - b", "add subtracts",
                        ("tests/test_calc.py",))
    missed = m.Mutation("unused", "calc", "calc.py", "return 1", "return 2", "nobody calls it",
                        ("tests/test_calc.py",))
    before = (fake_repo / "calc.py").read_text()
    assert m.main(["--json"], (caught, missed), fake_repo) == 1
    report = __import__("json").loads(capsys.readouterr().out)
    assert (report["caught"], report["total"], report["survived"]) == (1, 2, ["unused"])
    first, second = report["mutations"]
    assert first["caught"] and first["failing"] == ["tests.test_calc::test_add"] and first["pytest_exit"] == 1
    assert not second["caught"] and second["failing"] == [] and second["pytest_exit"] == 0
    assert (fake_repo / "calc.py").read_text() == before  # only the copy was mutated
    assert m.main(["--only", "minus"], (caught, missed), fake_repo) == 0
    assert "1 of 1 caught" in capsys.readouterr().out


def test_a_mutation_off_the_code_and_an_unknown_name_are_refused(fake_repo, capsys):
    m = tool()
    stale = m.Mutation("stale", "calc", "calc.py", "return a * b", "return 0", "-", ("tests/test_calc.py",))
    with pytest.raises(SystemExit, match="occurs 0 times"):
        m.main([], (stale,), fake_repo)
    assert m.main(["--only", "nope"], (stale,), fake_repo) == 2


def test_every_listed_mutation_applies_once_to_this_repository_and_each_area_is_covered():
    m = tool()
    for mutation in m.MUTATIONS:
        text = (ROOT / mutation.file).read_text()
        assert text.count(mutation.original) == 1, mutation.name
        assert all((ROOT / t.split("::")[0]).exists() for t in mutation.tests), mutation.name
    assert {x.area for x in m.MUTATIONS} == {"drafter", "planner", "budget", "kernels", "judges"}
    assert len(m.MUTATIONS) >= 15 and len({x.name for x in m.MUTATIONS}) == len(m.MUTATIONS)
