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
    jit_log = tmp_path / "built" / ".cache/flashinfer/0.6.14/90a/flashinfer_jit.log"
    jit_log.write_text("a server loaded the cached sampling module\n")  # FlashInfer logs each load: nothing built
    assert "unchanged since this host saved it" in run(tmp_path / "built", "save", str(again)).stdout
    assert list(again.iterdir()) == []
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


def test_a_restored_cache_is_not_saved_again_until_this_host_builds_more(tmp_path):
    """A later call of the lease that does not carry the cache (no SKIP) brings back nothing of what the first call
    restored; a file the host builds after the restore makes the version worth saving again."""
    carried = tmp_path / "carried"
    carried.mkdir()
    assert run(built_host(tmp_path), "save", str(carried)).returncode == 0
    host, later = tmp_path / "host", tmp_path / "later"
    later.mkdir()
    assert run(host, "restore", str(carried)).returncode == 0
    unchanged = run(host, "save", str(later))
    assert unchanged.returncode == 0, unchanged.stderr
    assert unchanged.stdout.strip() == ("jit cache: FlashInfer 0.6.14 unchanged since this host saved it or restored "
                                        "it; not saved again") and list(later.iterdir()) == []
    (host / SO).with_name("more.so").write_bytes(b"built after the restore")
    saved = run(host, "save", str(later))
    assert saved.stdout.strip() == f"jit cache: saved FlashInfer 0.6.14 as {later}/flashinfer-jit-0.6.14.tgz"
    with tarfile.open(later / "flashinfer-jit-0.6.14.tgz") as tgz:
        assert str(SO.relative_to(".cache").with_name("more.so")) in tgz.getnames()
    # a host that built its own module before the restore (kept, unlike the carried one) still saves it
    own, again = tmp_path / "own", tmp_path / "again"
    again.mkdir()
    (own / SO).parent.mkdir(parents=True)
    (own / SO).write_bytes(b"built on this host")
    assert run(own, "restore", str(carried)).returncode == 0
    assert "saved FlashInfer 0.6.14" in run(own, "save", str(again)).stdout


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


def fake_gpu(tmp_path: Path, cap: str | None) -> dict:
    """PATH with an ``nvidia-smi`` that names one GPU of compute capability ``cap`` (None: no GPU seen)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    smi = bin_dir / "nvidia-smi"
    smi.write_text("#!/bin/sh\n" + (f"echo {cap}\n" if cap else "exit 9\n"))
    smi.chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}"}


def staged_site(tmp_path: Path, version: str) -> Path:
    site = tmp_path / "site"
    (site / "flashinfer").mkdir(parents=True)
    (site / "flashinfer" / "_build_meta.py").write_text(f'"""Build metadata."""\n__version__ = "{version}"\n')
    return site


def test_restore_places_this_gpus_modules_where_flashinfer_loads_them_without_ninja(tmp_path):
    """With SITE, each cached ``<name>/<name>.so`` of this GPU's architecture lands in SITE's
    ``flashinfer/data/aot/<name>/<name>.so`` (FlashInfer's ahead-of-time path, loaded without running ninja, whose
    log on a fresh host always asks for a rebuild); not for another FlashInfer version, another architecture or no
    GPU, and a module SITE already has is kept."""
    carried = tmp_path / "carried"
    carried.mkdir()
    home = built_host(tmp_path)
    other_arch = home / ".cache/flashinfer/0.6.14/100a/cached_ops/norm/norm.so"
    other_arch.parent.mkdir(parents=True)
    other_arch.write_bytes(b"sm_100a")
    assert run(home, "save", str(carried)).returncode == 0
    aot = Path("flashinfer/data/aot/sampling/sampling.so")

    site = staged_site(tmp_path, "0.6.14")
    placed = run(tmp_path / "h1", "restore", str(carried), str(site), env=fake_gpu(tmp_path, "9.0"))
    assert placed.returncode == 0, placed.stderr
    assert placed.stdout.strip().splitlines()[-1] == (
        f"jit cache: placed 1 FlashInfer 0.6.14 module(s) of sm_90 as ahead-of-time builds in {site}/flashinfer/data/aot")
    assert (site / aot).read_bytes() == b"\x7fELF sampling"
    assert sorted(p.name for p in (site / "flashinfer/data/aot").iterdir()) == ["sampling"]  # not sm_100a's norm
    (site / aot).write_bytes(b"already here")
    assert run(tmp_path / "h2", "restore", str(carried), str(site), env=fake_gpu(tmp_path, "9.0")).returncode == 0
    assert (site / aot).read_bytes() == b"already here"

    for version, cap, why in (("0.6.16", "9.0", "holds FlashInfer 0.6.16, not 0.6.14"),
                              ("0.6.14", None, "nvidia-smi names no GPU")):
        other = staged_site(tmp_path / f"{version}-{cap}", version)
        done = run(tmp_path / f"h-{version}-{cap}", "restore", str(carried), str(other), env=fake_gpu(tmp_path, cap))
        assert done.returncode == 0 and why in done.stdout, done.stdout
        assert not (other / "flashinfer/data/aot").exists()
    without = run(tmp_path / "h3", "restore", str(carried))  # no SITE: the cache alone, as before
    assert without.stdout.strip() == f"jit cache: restored FlashInfer 0.6.14 into {tmp_path}/h3/.cache/flashinfer"
