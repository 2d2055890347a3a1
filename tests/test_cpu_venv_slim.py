"""The cpu lane's virtualenvs lose what no CPU host can load, and nothing else (issue 36): ci/cpu_venv_slim.py reads
each shared object's needed libraries from its ELF dynamic section and removes the ones that need a library this
machine lacks; ci/bytecode_cache.py keeps the lane's bytecode cache to sources that exist."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from lane_tools import in_lane
from ci_scripts import load_ci_script

ROOT = Path(__file__).resolve().parents[1]


slim = load_ci_script("ci/cpu_venv_slim.py")
bytecode_cache = load_ci_script("ci/bytecode_cache.py")
TORCH_LIB = Path(torch.__file__).parent / "lib"
LIBSHM = TORCH_LIB / "libshm.so"  # small, and needs torch's own libtorch_cpu.so and libc10.so


def readelf_needed(path: Path) -> list[str]:
    out = subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True, check=True).stdout
    return [line.split("[", 1)[1].split("]", 1)[0] for line in out.splitlines() if "(NEEDED)" in line]


@pytest.mark.parametrize("name", ["libshm.so", "libtorch_python.so", "libtorch.so"])
def test_needed_libraries_agree_with_readelf(name):
    if shutil.which("readelf") is None:
        pytest.skip("readelf (binutils) not installed: nothing independent to compare with")
    path = TORCH_LIB / name
    ours = slim.needed_libraries(path)
    assert ours and ours == readelf_needed(path)


def test_a_file_that_is_not_an_elf_object_has_no_needed_list(tmp_path):
    text = tmp_path / "fake.so"
    text.write_text("not a shared object")
    assert slim.needed_libraries(text) is None


def _venv(tmp_path: Path) -> tuple[Path, Path]:
    venv = tmp_path / "venv"
    site = venv / "lib" / "python3.11" / "site-packages"
    (site / "pkg").mkdir(parents=True)
    return venv, site


def test_an_object_needing_a_library_nowhere_on_the_machine_is_removed_and_logged(tmp_path, monkeypatch):
    """libshm.so copied alone into a virtualenv: its libtorch_cpu.so and libc10.so are in no folder the dynamic
    linker would search, so it is removed; with torch's library folder on LD_LIBRARY_PATH it could load, and stays."""
    venv, site = _venv(tmp_path)
    shutil.copy(LIBSHM, site / "pkg" / "libshm.so")
    monkeypatch.setenv("LD_LIBRARY_PATH", str(TORCH_LIB))
    assert slim.slim(venv) == [] and (site / "pkg" / "libshm.so").is_file()

    monkeypatch.delenv("LD_LIBRARY_PATH")
    lines = slim.slim(venv)
    assert len(lines) == 1 and lines[0].startswith("pkg/libshm.so: needs ")
    assert "libtorch_cpu.so" in lines[0] and "libc10.so" in lines[0] and "libc.so.6" not in lines[0]
    assert not (site / "pkg" / "libshm.so").exists()
    assert (venv / "slimmed.txt").read_text() == lines[0] + "\n"
    assert slim.slim(venv) == []  # nothing more to remove: a second run changes nothing


def test_a_library_the_virtualenv_itself_holds_keeps_its_users(tmp_path, monkeypatch):
    """The same object beside the libraries it needs stays: the virtualenv provides them."""
    monkeypatch.delenv("LD_LIBRARY_PATH", raising=False)
    venv, site = _venv(tmp_path)
    shutil.copy(LIBSHM, site / "pkg" / "libshm.so")
    for name in ("libc10.so", "libtorch_cpu.so", "libgomp.so.1"):
        (site / "pkg" / name).write_bytes(b"")  # present by name, as the dynamic linker looks them up
    assert slim.slim(venv) == [] and (site / "pkg" / "libshm.so").is_file()


def test_removing_a_provider_that_cannot_load_removes_its_users_on_the_next_pass(tmp_path, monkeypatch):
    """libuser.so needs only libprovider.so, which the virtualenv holds but which needs a library no machine has: the
    first pass removes the provider, the second its user (the needed lists stand in for three ELF objects)."""
    monkeypatch.delenv("LD_LIBRARY_PATH", raising=False)
    venv, site = _venv(tmp_path)
    needs = {"libuser.so": ["libprovider.so"], "libprovider.so": ["libportable_spec_absent.so.1"]}
    for name in needs:
        (site / "pkg" / name).write_bytes(b"")
    monkeypatch.setattr(slim, "needed_libraries", lambda path: needs[Path(path).name])
    missing = "which this machine does not have"
    assert slim.slim(venv) == [f"pkg/libprovider.so: needs libportable_spec_absent.so.1, {missing}",
                               f"pkg/libuser.so: needs libprovider.so, {missing}"]
    assert not any((site / "pkg").iterdir())


def test_gpu_only_folders_go_with_their_reason(tmp_path, monkeypatch):
    monkeypatch.delenv("LD_LIBRARY_PATH", raising=False)
    venv, site = _venv(tmp_path)
    (folder,) = slim.GPU_ONLY
    (site / folder).mkdir(parents=True)
    (site / folder / "libcupti.so").write_bytes(b"")
    assert slim.slim(venv) == [f"{folder}/: {slim.GPU_ONLY[folder]}"] and not (site / folder).exists()


def test_the_lane_virtualenv_holds_no_object_this_machine_cannot_load():
    """Under the lane, the interpreter's own virtualenv was slimmed when it was built (ci/lanes/cpu_venv.sh)."""
    if not in_lane():
        pytest.skip("checks the cpu lane's own virtualenv (under ci/lanes/cpu.sh)")
    venv = Path(sys.prefix)
    assert (venv / "slimmed.txt").is_file(), f"{venv} was built without ci/cpu_venv_slim.py"
    assert slim.unloadable(venv, slim.available_libraries(venv)) == {}
    assert "vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so" in (venv / "slimmed.txt").read_text()


def test_the_bytecode_cache_drops_folders_whose_sources_are_gone(tmp_path):
    source = tmp_path / "src" / "checkout-a" / "pkg"
    source.mkdir(parents=True)
    prefix = tmp_path / "cache"
    kept = prefix / source.relative_to("/")
    gone = prefix / (tmp_path / "src" / "checkout-b" / "pkg").relative_to("/")
    for folder in (kept, gone):
        folder.mkdir(parents=True)
        (folder / "mod.cpython-311.pyc").write_bytes(b"")
    removed = bytecode_cache.prune(prefix)
    assert removed == [gone.parent] and (kept / "mod.cpython-311.pyc").is_file() and not gone.parent.exists()
    assert bytecode_cache.prune(prefix) == []


def test_the_lane_prunes_each_cache_once_where_it_prepares_the_virtualenv():
    """Pruned per process, the main virtualenv's cache was walked three times a run, twice at once (the Triton checks
    start beside the suite): the lane prunes in ``lane_python``, once per virtualenv, before any process uses it."""
    text = (ROOT / "ci" / "lanes" / "cpu.sh").read_text()
    calls = [i for i, line in enumerate(text.splitlines())
             if "bytecode_cache.py" in line and not line.lstrip().startswith("#")]
    body = text[text.index("lane_python() {"):text.index("\n}\n", text.index("lane_python() {"))]
    assert len(calls) == 1 and "bytecode_cache.py" in body, calls
