"""``ci/gpu-host/jit_cache.sh`` and its use in ``ci/gpu/lane_and_pack.sh``: FlashInfer's JIT cache saved from one GPU
host comes back on the next (restored, files already there kept), a carried version is not saved again, and bad
input gets one line and exit 2. Run on CPU against a temporary HOME; the lane itself is replaced by a stub cuda lane
in a copy of the two scripts' tree."""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "ci" / "gpu-host" / "jit_cache.sh"
SO = Path(".cache/flashinfer/0.6.14/90a/cached_ops/sampling/sampling.so")


def run(home: Path, *args: str, script: Path = SCRIPT, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(script), *args], capture_output=True, text=True,
                          env={"PATH": os.environ["PATH"], "HOME": str(home), **(env or {})})


def built_host(tmp_path: Path) -> Path:
    """A host whose FlashInfer built its sampling module (and left the build's lock file)."""
    home = tmp_path / "built"
    (home / SO).parent.mkdir(parents=True)
    (home / SO).write_bytes(b"\x7fELF sampling")
    lock = home / ".cache/flashinfer/0.6.14/90a/cached_ops/tmp/sampling.lock"
    lock.parent.mkdir(parents=True)
    lock.write_text("")
    return home


def test_a_saved_cache_restores_on_a_fresh_host_and_keeps_what_is_there(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    saved = run(built_host(tmp_path), "save", str(out))
    assert saved.returncode == 0, saved.stderr
    assert saved.stdout.strip() == f"jit cache: saved FlashInfer 0.6.14 as {out}/flashinfer-jit-0.6.14.tgz"
    with tarfile.open(out / "flashinfer-jit-0.6.14.tgz") as tgz:
        names = tgz.getnames()
    assert str(SO.relative_to(".cache")) in names and not any(n.endswith((".lock", ".jit_cache_saved"))
                                                              for n in names), names
    again = tmp_path / "again"
    again.mkdir()
    unchanged = run(tmp_path / "built", "save", str(again))  # a later call of the same lease, nothing new built
    assert "unchanged since this host saved it" in unchanged.stdout and list(again.iterdir()) == []
    (tmp_path / "built" / SO).with_name("more.so").write_bytes(b"built later")
    assert "saved FlashInfer 0.6.14" in run(tmp_path / "built", "save", str(again)).stdout
    assert [p.name for p in again.iterdir()] == ["flashinfer-jit-0.6.14.tgz"]
    fresh = tmp_path / "fresh"
    restored = run(fresh, "restore", str(out))
    assert restored.returncode == 0, restored.stderr
    assert restored.stdout.strip() == f"jit cache: restored FlashInfer 0.6.14 into {fresh}/.cache/flashinfer"
    assert (fresh / SO).read_bytes() == b"\x7fELF sampling"
    (fresh / SO).write_bytes(b"built here")
    assert run(fresh, "restore", str(out)).returncode == 0
    assert (fresh / SO).read_bytes() == b"built here"  # a file already there is kept


def test_a_carried_version_is_not_saved_again_and_an_empty_host_saves_nothing(tmp_path):
    carried, out = tmp_path / "carried", tmp_path / "out"
    carried.mkdir()
    out.mkdir()
    (carried / "flashinfer-jit-0.6.14.tgz").write_bytes(b"")
    skipped = run(built_host(tmp_path), "save", str(out), str(carried))
    assert skipped.returncode == 0 and "came carried; not saved again" in skipped.stdout
    assert list(out.iterdir()) == []
    empty = run(tmp_path / "empty", "save", str(out))
    assert empty.returncode == 0 and "nothing saved" in empty.stdout and list(out.iterdir()) == []
    nothing = run(tmp_path / "empty", "restore", str(out))
    assert nothing.returncode == 0 and "nothing restored" in nothing.stdout


def test_bad_input_gets_one_line_and_exit_2(tmp_path):
    for args, fragment in ((("sideways",), "'sideways' is no action"),
                           (("restore", str(tmp_path / "nowhere")), "carry .gpu-wheels/jit-cache"),
                           (("save", str(tmp_path / "nowhere")), "pass the folder that comes back")):
        result = run(tmp_path, *args)
        lines = (result.stdout + result.stderr).strip().splitlines()
        assert result.returncode == 2 and len(lines) == 1 and fragment in lines[0], (args, lines)


def test_the_lane_wrapper_restores_a_carried_cache_before_the_lane_and_saves_what_it_built(tmp_path):
    """``lane_and_pack.sh`` in a copy of the tree whose cuda lane only records whether the cache was in place when it
    started: with the cache carried, it was, and nothing is saved again; without it, the built cache comes back in
    OUT beside the lane's archive."""
    tree = tmp_path / "tree"
    for rel in ("ci/gpu/lane_and_pack.sh", "ci/gpu-host/jit_cache.sh"):
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, tree / rel)
    (tree / "ci/lanes").mkdir()
    (tree / "ci/lanes/cuda.sh").write_text(
        f'if [[ -e "$HOME/{SO}" ]]; then echo "cache in place"; else echo "no cache"; fi\n'
        f'mkdir -p "$(dirname "$HOME/{SO}")"; [[ -e "$HOME/{SO}" ]] || echo built > "$HOME/{SO}"\n')
    out, one, two = tmp_path / "out", f"one-{os.getpid()}", f"two-{os.getpid()}"
    out.mkdir()
    first = run(tmp_path / "host1", one, "60", "serve-bench", script=tree / "ci/gpu/lane_and_pack.sh",
                env={"OUT": str(out)})
    assert first.returncode == 0, first.stdout + first.stderr
    assert sorted(p.name for p in out.iterdir()) == ["flashinfer-jit-0.6.14.tgz", f"{one}.tgz"]
    with tarfile.open(out / f"{one}.tgz") as tgz:
        console = tgz.extractfile(f"lane-{one}/console.log").read().decode()
    assert "no cache" in console and "jit cache: saved FlashInfer 0.6.14" in console
    (tree / ".gpu-wheels/jit-cache").mkdir(parents=True)
    shutil.move(str(out / "flashinfer-jit-0.6.14.tgz"), tree / ".gpu-wheels/jit-cache")
    shutil.rmtree(out)
    out.mkdir()
    second = run(tmp_path / "host2", two, "60", "serve-bench", script=tree / "ci/gpu/lane_and_pack.sh",
                 env={"OUT": str(out)})
    assert second.returncode == 0, second.stdout + second.stderr
    assert [p.name for p in out.iterdir()] == [f"{two}.tgz"]
    with tarfile.open(out / f"{two}.tgz") as tgz:
        console = tgz.extractfile(f"lane-{two}/console.log").read().decode()
    assert "cache in place" in console and "jit cache: restored FlashInfer 0.6.14" in console
    assert "came carried; not saved again" in console
    assert "jit cache: restored FlashInfer 0.6.14" in second.stdout  # the call's tail shows it
    for name in (one, two):  # the wrapper works in /tmp/lane-NAME, as on the GPU host
        shutil.rmtree(f"/tmp/lane-{name}", ignore_errors=True)
