"""The GPU host's staging round trip on CPU: ``ci/gpu-host/resplit.sh`` re-splits stage.sh's parts (plain, or with
``--xz``: wheels stored uncompressed by ``repack_wheels.py``, one xz stream), ``carry.sh`` gives each part a folder,
and ``ci/gpu-host/install.sh``, run once per carried folder as the device calls run it, installs the wheels when the
last part arrives. The staged "vLLM" is a small wheel whose ``vllm`` and ``torch`` packages print versions, so the
install script's own import check runs here."""

from __future__ import annotations

import base64
import hashlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GPU_HOST = ROOT / "ci" / "gpu-host"
VERSION = "9.9.9"
MODULE = ("# filler that compresses\n" + "x = 1\n" * 60_000).encode()


def wheel() -> bytes:
    """A pip-installable wheel with ``vllm`` (``__version__`` VERSION), ``torch`` and a large module, deflated."""
    files = {"vllm/__init__.py": f"__version__ = '{VERSION}'\n".encode(), "vllm/big.py": MODULE,
             "torch/__init__.py": b"__version__ = 'fake'\n",
             "fakevllm-9.9.9.dist-info/METADATA": b"Metadata-Version: 2.1\nName: fakevllm\nVersion: 9.9.9\n",
             "fakevllm-9.9.9.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                                              b"Tag: py3-none-any\n"}
    record = "".join(f"{name},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},"
                     f"{len(data)}\n" for name, data in files.items()) + "fakevllm-9.9.9.dist-info/RECORD,,\n"
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in {**files, "fakevllm-9.9.9.dist-info/RECORD": record.encode()}.items():
            z.writestr(zipfile.ZipInfo(name, (2026, 12, 2, 0, 0, 0)), data, zipfile.ZIP_DEFLATED)
    return out.getvalue()


def staged(proj: Path) -> Path:
    """stage.sh's output for the fake vLLM: ``.gpu-wheels/parts`` with the tar of ``w/`` split in two and a MANIFEST."""
    work = proj / ".gpu-wheels"
    (work / "w").mkdir(parents=True)
    (work / "w" / "fakevllm-9.9.9-py3-none-any.whl").write_bytes(wheel())
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        tar.add(work / "w", arcname="w")
    data = buf.getvalue()
    parts = work / "parts"
    parts.mkdir()
    half = len(data) // 2
    (parts / "p00").write_bytes(data[:half])
    (parts / "p01").write_bytes(data[half:])
    (parts / "MANIFEST").write_text(f"version {VERSION}\nsha256 {hashlib.sha256(data).hexdigest()}\nparts 2\n")
    return parts


def sh(proj: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", *args], cwd=proj, capture_output=True, text=True,
                          env={"PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", **env})


def manifest(folder: Path) -> dict[str, str]:
    return dict(line.split(" ", 1) for line in (folder / "MANIFEST").read_text().splitlines())


@pytest.mark.parametrize("flag, fmt", [((), "tar"), (("--xz",), "tar.xz")])
def test_resplit_carry_and_install_round_trip(tmp_path, flag, fmt):
    proj = tmp_path / "proj"
    staged(proj)
    split = sh(proj, str(GPU_HOST / "resplit.sh"), *flag, ".gpu-wheels/parts", ".gpu-wheels/small", "1")
    assert split.returncode == 0, split.stderr
    small = proj / ".gpu-wheels" / "small"
    facts = manifest(small)
    assert (facts["version"], facts["format"]) == (VERSION, fmt)
    joined = b"".join(p.read_bytes() for p in sorted(small.glob("p[0-9]*")))
    assert int(facts["parts"]) == len(list(small.glob("p[0-9]*"))) >= 1
    assert hashlib.sha256(joined).hexdigest() == facts["sha256"]
    carried = sh(proj, str(GPU_HOST / "carry.sh"), ".gpu-wheels/small", "all")
    assert carried.returncode == 0, carried.stderr
    folders = sorted((proj / ".gpu-wheels").glob("carry-[0-9]*"))
    assert len(folders) == int(facts["parts"])
    host = tmp_path / "host"
    outputs = []
    for folder in folders:  # one device call each, in order
        assert (folder / "install.sh").read_bytes() == (GPU_HOST / "install.sh").read_bytes()
        run = sh(proj, str(folder / "install.sh"), STAGE_ROOT=str(host))
        assert run.returncode == 0, run.stdout + run.stderr
        outputs.append(run.stdout)
    assert [o.splitlines()[0] for o in outputs] == [f"parts present: {i + 1}/{len(folders)}"
                                                    for i in range(len(folders))]
    assert outputs[-1].splitlines()[-1] == f"vllm {VERSION} torch fake"
    site = host / f"site-{VERSION}"
    assert (site / ".installed").is_file() and (site / "vllm" / "big.py").read_bytes() == MODULE
    assert not (host / f"gpu-wheels-{VERSION}" / f"all.{fmt}").exists()
    again = sh(proj, str(folders[0] / "install.sh"), STAGE_ROOT=str(host))
    assert again.stdout.splitlines()[-1] == f"already installed in {site}"


def test_an_xz_set_is_cut_again_without_recompressing_and_still_installs(tmp_path):
    proj = tmp_path / "proj"
    staged(proj)
    assert sh(proj, str(GPU_HOST / "resplit.sh"), "--xz", ".gpu-wheels/parts", ".gpu-wheels/xz", "1").returncode == 0
    first = proj / ".gpu-wheels" / "xz"
    stream = b"".join(p.read_bytes() for p in sorted(first.glob("p[0-9]*")))
    recut = sh(proj, str(GPU_HOST / "resplit.sh"), ".gpu-wheels/xz", ".gpu-wheels/recut", "2")  # no --xz needed
    assert recut.returncode == 0, recut.stdout + recut.stderr
    second = proj / ".gpu-wheels" / "recut"
    assert manifest(second) == {**manifest(first), "parts": str(len(list(second.glob("p[0-9]*"))))}
    assert b"".join(p.read_bytes() for p in sorted(second.glob("p[0-9]*"))) == stream  # the same stream, recut
    assert sh(proj, str(GPU_HOST / "carry.sh"), ".gpu-wheels/recut", "all").returncode == 0
    runs = [sh(proj, str(f / "install.sh"), STAGE_ROOT=str(tmp_path / "host"))
            for f in sorted((proj / ".gpu-wheels").glob("carry-[0-9]*"))]
    assert runs[-1].returncode == 0 and runs[-1].stdout.splitlines()[-1] == f"vllm {VERSION} torch fake"
    (first / "p00").write_bytes(b"x" + (first / "p00").read_bytes()[1:])  # a damaged part is refused, not cut
    bad = sh(proj, str(GPU_HOST / "resplit.sh"), ".gpu-wheels/xz", ".gpu-wheels/bad", "2")
    assert bad.returncode == 1 and "sha256 mismatch" in bad.stdout
    same = sh(proj, str(GPU_HOST / "resplit.sh"), ".gpu-wheels/recut", ".gpu-wheels/recut", "2")
    assert same.returncode == 2 and same.stdout.count("\n") == 1 and (second / "MANIFEST").is_file()


def test_a_host_without_the_xz_tool_unpacks_with_pythons_lzma(tmp_path):
    proj = tmp_path / "proj"
    staged(proj)
    assert sh(proj, str(GPU_HOST / "resplit.sh"), "--xz", ".gpu-wheels/parts", ".gpu-wheels/small", "1").returncode == 0
    assert sh(proj, str(GPU_HOST / "carry.sh"), ".gpu-wheels/small", "all").returncode == 0
    tools = tmp_path / "bin"  # what install.sh calls, xz left out
    tools.mkdir()
    for name in ("bash", "awk", "cat", "cp", "cut", "dirname", "ls", "mkdir", "rm", "sha256sum", "tar", "touch", "wc"):
        (tools / name).symlink_to(shutil.which(name))
    (tools / "python3").symlink_to(sys.executable)
    runs = [subprocess.run([str(tools / "bash"), str(f / "install.sh")], cwd=proj, capture_output=True, text=True,
                           env={"PATH": str(tools), "STAGE_ROOT": str(tmp_path / "host")})
            for f in sorted((proj / ".gpu-wheels").glob("carry-[0-9]*"))]
    assert subprocess.run(["bash", "-c", "command -v xz"], env={"PATH": str(tools)}).returncode == 1
    assert runs[-1].returncode == 0, runs[-1].stdout + runs[-1].stderr
    assert runs[-1].stdout.splitlines()[-1] == f"vllm {VERSION} torch fake"
    assert (tmp_path / "host" / f"site-{VERSION}" / "vllm" / "big.py").read_bytes() == MODULE


def test_the_xz_parts_are_smaller_and_hold_stored_wheels(tmp_path):
    proj = tmp_path / "proj"
    staged(proj)
    for flag, out in (((), "plain"), (("--xz",), "xz")):
        assert sh(proj, str(GPU_HOST / "resplit.sh"), *flag, ".gpu-wheels/parts", f".gpu-wheels/{out}",
                  "1").returncode == 0
    size = {out: sum(p.stat().st_size for p in (proj / ".gpu-wheels" / out).glob("p[0-9]*")) for out in
            ("plain", "xz")}
    assert size["xz"] < size["plain"] / 2, size
    joined = b"".join(p.read_bytes() for p in sorted((proj / ".gpu-wheels" / "xz").glob("p[0-9]*")))
    with tarfile.open(fileobj=io.BytesIO(joined), mode="r:xz") as tar:
        (member,) = [m for m in tar if m.name.endswith(".whl")]
        assert member.name == "w/fakevllm-9.9.9-py3-none-any.whl"
        with zipfile.ZipFile(io.BytesIO(tar.extractfile(member).read())) as z:
            infos = z.infolist()
            assert {i.compress_type for i in infos} == {zipfile.ZIP_STORED} and len(infos) == 6
            assert z.read("vllm/big.py") == MODULE
            with zipfile.ZipFile(io.BytesIO(wheel())) as original:
                assert [i.filename for i in infos] == [i.filename for i in original.infolist()]


def test_repack_is_deterministic_and_refuses_an_archive_without_wheels(tmp_path):
    proj = tmp_path / "proj"
    parts = staged(proj)
    whole = tmp_path / "all.tar"
    whole.write_bytes((parts / "p00").read_bytes() + (parts / "p01").read_bytes())
    runs = [subprocess.run([sys.executable, str(GPU_HOST / "repack_wheels.py"), str(whole)], capture_output=True)
            for _ in range(2)]
    assert runs[0].returncode == 0 and runs[0].stdout == runs[1].stdout and len(runs[0].stdout) > len(MODULE)
    assert runs[0].stderr.decode().strip() == "repack_wheels: 1 wheels stored uncompressed"
    empty = tmp_path / "empty.tar"
    with tarfile.open(empty, "w") as tar:
        info = tarfile.TarInfo("w/readme.txt")
        tar.addfile(info, io.BytesIO(b""))
    refused = subprocess.run([sys.executable, str(GPU_HOST / "repack_wheels.py"), str(empty)], capture_output=True,
                             text=True)
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1 and "holds no .whl" in refused.stderr


def test_install_refuses_a_wrong_sum_and_an_unknown_format_in_one_line(tmp_path):
    proj = tmp_path / "proj"
    staged(proj)
    assert sh(proj, str(GPU_HOST / "resplit.sh"), ".gpu-wheels/parts", ".gpu-wheels/small", "1").returncode == 0
    assert sh(proj, str(GPU_HOST / "carry.sh"), ".gpu-wheels/small", "all").returncode == 0
    folders = sorted((proj / ".gpu-wheels").glob("carry-[0-9]*"))
    for folder in folders:
        text = (folder / "MANIFEST").read_text()
        (folder / "MANIFEST").write_text(text.replace("sha256 ", "sha256 0"))
    runs = [sh(proj, str(f / "install.sh"), STAGE_ROOT=str(tmp_path / "host")) for f in folders]
    assert runs[-1].returncode == 1 and runs[-1].stdout.splitlines()[-1].startswith("sha256 mismatch: the parts of")
    for folder in folders:
        text = (folder / "MANIFEST").read_text().replace("sha256 0", "sha256 ").replace("format tar", "format zip")
        (folder / "MANIFEST").write_text(text)
    runs = [sh(proj, str(f / "install.sh"), STAGE_ROOT=str(tmp_path / "host2")) for f in folders]
    assert runs[-1].returncode == 2 and "format 'zip' is neither tar nor tar.xz" in runs[-1].stdout
    assert not (tmp_path / "host2" / f"site-{VERSION}").exists()
