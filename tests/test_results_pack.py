"""``results_pack`` stores a call's ``runs/`` folder as one deterministic ``runs.tar.gz``, checked to read back equal
before the folder goes; ``--check`` fails where a folder is left; bad input is one line and exit 2."""

from __future__ import annotations

import gzip
import io
import json
import tarfile

from portable_spec_harness import results_pack


def call_folder(root, name="call1"):
    runs = root / name / "serve-bench" / "runs"
    runs.mkdir(parents=True)
    (runs / "timed_ours_in128_greedy_c1_r0.json.gz").write_bytes(gzip.compress(b'{"x": 1}', mtime=0))
    (runs / "timed_ours_in128_greedy_c1_r0.txt").write_text("client output\n")
    (runs / "nested").mkdir()
    (runs / "nested" / "detail.json").write_text("{}")
    (root / name / "serve-bench" / "serve_bench.json").write_text("{}")
    return runs


def members(archive):
    with tarfile.open(archive, "r:gz") as tar:
        return {m.name: (tar.extractfile(m).read(), m.mtime, m.uid) for m in tar.getmembers()}


def test_packing_keeps_every_file_and_removes_only_the_runs_folder(tmp_path, capsys):
    runs = call_folder(tmp_path)
    before = {f"runs/{p.relative_to(runs).as_posix()}": p.read_bytes() for p in runs.rglob("*") if p.is_file()}
    assert results_pack.main([str(tmp_path), "--json"]) == 0
    outcome = json.loads(capsys.readouterr().out)
    assert [item["files"] for item in outcome["packed"]] == [3]
    archive = runs.parent / "runs.tar.gz"
    assert not runs.exists() and (runs.parent / "serve_bench.json").exists()
    found = members(archive)
    assert {name: data for name, (data, _, _) in found.items()} == before and len(before) == 3
    assert {(mtime, uid) for _, mtime, uid in found.values()} == {(0, 0)}
    assert results_pack.main([str(tmp_path), "--check"]) == 0


def test_the_same_folder_packs_to_the_same_bytes(tmp_path):
    first = results_pack.archive_bytes(call_folder(tmp_path / "a"))
    second = results_pack.archive_bytes(call_folder(tmp_path / "b"))
    assert first == second and len(first) > 0


def test_check_fails_on_a_folder_left_and_packs_nothing(tmp_path, capsys):
    runs = call_folder(tmp_path)
    assert results_pack.main([str(tmp_path), "--check"]) == 1
    assert runs.exists() and "left unpacked" in capsys.readouterr().out


def test_an_archive_already_there_is_refused_and_nothing_is_lost(tmp_path, capsys):
    runs = call_folder(tmp_path)
    (runs.parent / "runs.tar.gz").write_bytes(b"older")
    assert results_pack.main([str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "exists beside" in err[0]
    assert runs.exists() and (runs.parent / "runs.tar.gz").read_bytes() == b"older"


def test_a_missing_path_is_one_line_and_exit_2(tmp_path, capsys):
    assert results_pack.main([str(tmp_path / "nowhere"), "--json"]) == 2
    assert json.loads(capsys.readouterr().out)["exit"] == 2


def test_an_archive_that_reads_back_unequal_removes_nothing(tmp_path, monkeypatch):
    runs = call_folder(tmp_path)
    real = results_pack.archive_bytes

    def dropping_a_file(folder):
        data = real(folder)
        raw = gzip.decompress(data)
        out = io.BytesIO()
        with tarfile.open(fileobj=io.BytesIO(raw)) as src, tarfile.open(fileobj=out, mode="w") as dst:
            for member in src.getmembers()[1:]:
                dst.addfile(member, src.extractfile(member))
        return gzip.compress(out.getvalue(), mtime=0)

    monkeypatch.setattr(results_pack, "archive_bytes", dropping_a_file)
    assert results_pack.main([str(tmp_path)]) == 2
    assert runs.exists() and not (runs.parent / "runs.tar.gz").exists()
