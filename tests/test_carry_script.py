"""``ci/gpu-host/carry.sh``: each staged part in a folder of its own that one device call carries, under
``.gpu-wheels`` or under a root of its own there, so two vLLMs' staging stays ready side by side (0.26.0's folders
are not touched when 0.33.0's are made). Run on CPU in a temporary project with fake parts."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "ci" / "gpu-host" / "carry.sh"


def project(tmp_path: Path) -> Path:
    """A project with two staged vLLMs' parts (two parts of 0.33.0, one of 0.26.0); each carried folder gets
    ``ci/gpu-host/install.sh`` (``test_gpu_host_staging`` runs it)."""
    proj = tmp_path / "proj"
    for version, parts in (("0.33.0", 2), ("0.26.0", 1)):
        folder = proj / ".gpu-wheels" / f"parts-{version}"
        folder.mkdir(parents=True)
        for i in range(parts):
            (folder / f"p{i:02d}").write_bytes(f"{version} part {i}".encode())
        (folder / "MANIFEST").write_text(f"version {version}\nsha256 0\nparts {parts}\n")
    return proj


def carry(proj: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], cwd=proj, capture_output=True, text=True,
                          env={"PATH": os.environ["PATH"]})


def test_each_version_gets_its_own_folders_and_leaves_the_others(tmp_path):
    proj = project(tmp_path)
    first = carry(proj, ".gpu-wheels/parts-0.26.0", "all")
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == "carry: 0.26.0, 1 folders .gpu-wheels/carry-00 .. carry-00"
    second = carry(proj, ".gpu-wheels/parts-0.33.0", "all", ".gpu-wheels/v0.33.0")
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip() == "carry: 0.33.0, 2 folders .gpu-wheels/v0.33.0/carry-00 .. carry-01"
    made = sorted(p.relative_to(proj / ".gpu-wheels").as_posix() for p in (proj / ".gpu-wheels").rglob("carry-*"))
    assert made == ["carry-00", "v0.33.0/carry-00", "v0.33.0/carry-01"]
    compared = 0
    for folder, version, part in (("carry-00", "0.26.0", 0), ("v0.33.0/carry-00", "0.33.0", 0),
                                  ("v0.33.0/carry-01", "0.33.0", 1)):
        here = proj / ".gpu-wheels" / folder
        assert sorted(p.name for p in here.iterdir()) == ["MANIFEST", "install.sh", f"p{part:02d}"], folder
        assert (here / f"p{part:02d}").read_bytes() == f"{version} part {part}".encode()
        assert (here / "MANIFEST").read_text().startswith(f"version {version}\n")
        compared += 1
    assert compared == 3


def test_one_part_goes_to_the_roots_carry_folder(tmp_path):
    proj = project(tmp_path)
    done = carry(proj, ".gpu-wheels/parts-0.33.0", "1", ".gpu-wheels/v0.33.0")
    assert done.returncode == 0 and done.stdout.strip() == "carry: 0.33.0 part 01 of 2"
    assert sorted(p.name for p in (proj / ".gpu-wheels" / "v0.33.0" / "carry").iterdir()) == \
        ["MANIFEST", "install.sh", "p01"]
    assert not (proj / ".gpu-wheels" / "carry").exists()


def test_a_root_outside_the_ignored_folder_is_refused(tmp_path):
    proj = project(tmp_path)
    refused = carry(proj, ".gpu-wheels/parts-0.33.0", "all", "wheels-0.33.0")
    assert refused.returncode == 2 and refused.stdout.count("\n") == 1
    assert "not under .gpu-wheels" in refused.stdout and "name .gpu-wheels/SOMETHING" in refused.stdout
    assert not (proj / "wheels-0.33.0").exists()
    bad = carry(proj, ".gpu-wheels/parts-0.33.0", "x")
    assert bad.returncode == 2 and "give N or all" in bad.stdout
