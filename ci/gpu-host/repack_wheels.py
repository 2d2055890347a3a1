"""Rewrite a staged archive (``../shared/gpu-host/stage.sh``'s tar of ``w/*.whl``) with every wheel stored
uncompressed, for ``resplit.sh --xz`` to compress as one xz stream.

Why: a wheel is a zip whose members are deflated one by one; xz over those deflated bytes gains little, while xz over
the same wheels stored uncompressed took vLLM 0.33.0's staging from 310 to 185 MiB, so from 31 to 19 device calls at
the 10 MiB parts a 50 MiB tree leaves. A stored wheel is still a wheel: pip installs it alike (its RECORD hashes the
files, not their compression). The tar's order and every wheel's member order, names, dates and modes are kept, so a
second run gives the same bytes.

    python3 ci/gpu-host/repack_wheels.py ALL_TAR > STORED_TAR
"""

from __future__ import annotations

import io
import sys
import tarfile
import zipfile
from pathlib import Path


def stored(wheel: bytes) -> bytes:
    """``wheel`` with each member stored uncompressed, in its own order, with its own metadata."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(wheel)) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as dst:
        for info in src.infolist():
            data = src.read(info)  # before the info says stored: reading goes by it
            info.compress_type = zipfile.ZIP_STORED
            dst.writestr(info, data)
    return out.getvalue()


def repack(source: Path, sink: io.BufferedIOBase) -> int:
    """Writes ``source``'s tar to ``sink`` with its wheels stored; returns how many wheels it rewrote (an archive
    with none is refused: it is not stage.sh's)."""
    wheels = 0
    with tarfile.open(source) as src, tarfile.open(fileobj=sink, mode="w|", format=tarfile.GNU_FORMAT) as dst:
        for member in src:
            if not member.isfile():
                dst.addfile(member)
                continue
            data = src.extractfile(member).read()
            if member.name.endswith(".whl"):
                data = stored(data)
                wheels += 1
            member.size = len(data)
            dst.addfile(member, io.BytesIO(data))
    if not wheels:
        raise SystemExit(f"repack_wheels: {source} holds no .whl: give the tar stage.sh's parts join to")
    return wheels


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: repack_wheels.py ALL_TAR > STORED_TAR")
    count = repack(Path(sys.argv[1]), sys.stdout.buffer)
    print(f"repack_wheels: {count} wheels stored uncompressed", file=sys.stderr)
