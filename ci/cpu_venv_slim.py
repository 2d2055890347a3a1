"""Removes from a cpu-lane virtualenv the binaries that cannot run on the machine it serves (issue 36).

vLLM's wheel is its CUDA build: its compiled extensions (FlashAttention 2 and 3, ``_C``, ``_moe_C``, ...: about
570 MB of the 0.26.0 wheel's 750) link ``libtorch_cuda.so``, ``libcudart`` and ``libcuda``, which a CPU torch and a
machine without a GPU do not have, so no import of them can succeed there: vLLM's import of one fails with an
ImportError either way (the dynamic linker's "cannot open shared object file" when the file is there,
"No module named" when it is not). Triton's CUPTI libraries (NVIDIA's GPU profiling interface, loaded only by
Triton's proton profiler on a GPU) are the same kind of weight.

What it removes:
- an ELF shared object one of whose needed libraries (``DT_NEEDED``) is found neither in the virtualenv nor in the
  system's library folders (``LD_LIBRARY_PATH`` included): it cannot load on this machine;
- each folder of ``GPU_ONLY``, with its reason.
Each removal is written, with its reason, to ``$venv/slimmed.txt``. Run again, it removes nothing more. The lane runs
it once, when it builds a virtualenv (``ci/lanes/cpu_venv.sh``).

Usage: python ci/cpu_venv_slim.py VENV
"""

from __future__ import annotations

import mmap
import os
import shutil
import struct
import sys
from pathlib import Path

GPU_ONLY = {
    "triton/backends/nvidia/lib/cupti": "CUPTI, NVIDIA's GPU profiling interface: Triton's proton profiler loads it "
                                        "on a GPU only",
}
"""Folders of site-packages no CPU test reaches, each with why."""

SYSTEM_LIBRARY_DIRS = ("/lib", "/lib64", "/usr/lib", "/usr/lib64", "/usr/local/lib", "/lib/x86_64-linux-gnu",
                       "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu")

_DT_NEEDED = 1  # the dynamic section's tag of a needed library's name
_SHT_DYNAMIC = 6  # the dynamic section's type


def needed_libraries(path: str | os.PathLike) -> list[str] | None:
    """The ``DT_NEEDED`` names of a 64-bit little-endian ELF shared object; None when ``path`` is not one. Mapped,
    not read: the headers and the dynamic section are all it touches of torch's 400 MB library."""
    with open(path, "rb") as f:
        if f.read(6) != b"\x7fELF\x02\x01":
            return None
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            (shoff,) = struct.unpack_from("<Q", data, 0x28)
            shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
            sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
            for _, kind, _, _, offset, size, link, _, _, entsize in sections:
                if kind != _SHT_DYNAMIC:
                    continue
                strtab = sections[link][4]
                names = []
                for at in range(offset, offset + size, entsize or 16):
                    tag, value = struct.unpack_from("<qQ", data, at)
                    if tag == 0:
                        break
                    if tag == _DT_NEEDED:
                        names.append(data[strtab + value:data.find(b"\0", strtab + value)].decode())
                return names
    return []


def available_libraries(venv: Path) -> set[str]:
    """The library names a shared object in ``venv`` could be linked against on this machine: the virtualenv's own
    (any folder) and the system's library folders' (``LD_LIBRARY_PATH`` included)."""
    names = {p.name for p in venv.rglob("*.so*")}
    folders = [Path(d) for d in SYSTEM_LIBRARY_DIRS]
    folders += [Path(d) for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d]
    for folder in folders:
        if folder.is_dir():
            names.update(entry.name for entry in folder.iterdir())
    return names


def unloadable(venv: Path, available: set[str]) -> dict[Path, list[str]]:
    """Each shared object under ``venv`` that needs a library not in ``available``, with the missing names."""
    out = {}
    for path in venv.rglob("*.so*"):
        if path.is_symlink() or not path.is_file():
            continue
        missing = [name for name in needed_libraries(path) or [] if name not in available]
        if missing:
            out[path] = missing
    return out


def site_packages(venv: Path) -> Path:
    (site,) = venv.glob("lib/python3*/site-packages")
    return site


def slim(venv: Path) -> list[str]:
    """Removes what ``unloadable`` and ``GPU_ONLY`` name; returns one line per removal (also appended to
    ``venv/slimmed.txt``). Repeated until nothing more is unloadable: a removed library may have been another's
    only source of a name."""
    site = site_packages(venv)
    lines = []
    while found := unloadable(venv, available_libraries(venv)):
        for path, missing in sorted(found.items()):
            lines.append(f"{path.relative_to(site)}: needs {', '.join(missing)}, which this machine does not have")
            path.unlink()
    for folder, why in GPU_ONLY.items():
        if (site / folder).is_dir():
            shutil.rmtree(site / folder)
            lines.append(f"{folder}/: {why}")
    if lines:
        with open(venv / "slimmed.txt", "a") as log:
            log.write("".join(line + "\n" for line in lines))
    return lines


def main(argv: list[str]) -> int:
    (venv,) = argv
    for line in slim(Path(venv)):
        print(f"[cpu venv] removed {line}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
