"""Throwaway machines for pip: an empty virtualenv that pip targets with ``--python``, and distributions written into it
as installed by their metadata alone (what pip's resolver and conflict check read), so no wheel is unpacked."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path


def machine(root: Path) -> tuple[str, Path]:
    """An empty virtualenv (no pip, nothing installed): its interpreter and site-packages."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=60)
    python = root / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    return str(python), Path(site)


def run_pip(python: str, args: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``pip install ARGS`` on the machine ``python`` belongs to, with pip's configuration and PIP_* variables ignored
    (this machine's point at its local mirrors and a constraints file)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull  # also read by the pip that installs build dependencies (`-e .`)
    cmd = [sys.executable, "-m", "pip", "--python", python, "install", "--isolated", "--disable-pip-version-check",
           *args]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def metadata_text(name: str, version: str, requires: list[str] = (), requires_python: str | None = None,
                  extras: list[str] = ()) -> str:
    """Core metadata (the METADATA file) with the fields pip resolves by."""
    fields = [("Metadata-Version", "2.1"), ("Name", name), ("Version", version)]
    fields += [("Requires-Python", requires_python)] if requires_python else []
    fields += [("Requires-Dist", r) for r in requires] + [("Provides-Extra", e) for e in extras]
    return "".join(f"{k}: {v}\n" for k, v in fields)


def dist_info_name(name: str, version: str) -> str:
    return f"{re.sub(r'[-_.]+', '_', name)}-{version}.dist-info"


def write_installed(site: Path, name: str, version: str, **metadata) -> None:
    """``name==version`` installed in ``site`` by its metadata alone."""
    dist = site / dist_info_name(name, version)
    dist.mkdir()
    (dist / "METADATA").write_text(metadata_text(name, version, **metadata))
    (dist / "INSTALLER").write_text("tests/pip_machine.py\n")


def stub_wheel(folder: Path, name: str, version: str, requires: list[str] = ()) -> Path:
    """A wheel holding only metadata: a stand-in for a distribution whose requirements are what a test is about."""
    dist = dist_info_name(name, version)
    files = {f"{dist}/METADATA": metadata_text(name, version, requires),
             f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: tests/pip_machine.py\nRoot-Is-Purelib: true\n"
                              "Tag: py3-none-any\n"}
    files[f"{dist}/RECORD"] = "".join(f"{path},,\n" for path in files) + f"{dist}/RECORD,,\n"
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / f"{re.sub(r'[-_.]+', '_', name)}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for path, text in files.items():
            zf.writestr(path, text)
    return wheel
