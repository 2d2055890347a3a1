"""``python -m portable_spec_harness.results_pack [--check] [--json] PATH...``: each serving call's per-run client
files (its ``runs/`` folder) stored as one ``runs.tar.gz`` beside it.

Why: every device call carries the whole working tree, and the device tool counts it in whole 4 KiB blocks. A call's
``runs/`` folder holds one client output and one result file per run (dozens per call, most under 1 KiB once
gzipped), so thousands of them took about 14 MiB of blocks for 5 MiB of bytes, and the tree left too little room for
a staged vLLM part beside it. No reader opens them by name (the call's ``serve_bench.json`` holds every run's result
inline; pooling, coverage and the readback tests read that), so one archive per call keeps them for a person
(``tar xzf runs.tar.gz``) at a fraction of the blocks. The archive is deterministic (members sorted, times and owners
zeroed), so packing the same folder twice gives the same bytes.

``--check`` packs nothing and fails (exit 1) where a ``runs/`` folder is left; bad input is a one-line error, exit 2.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import shutil
import sys
import tarfile
from pathlib import Path

from portable_spec.errors import PortableSpecError
from portable_spec.output import emit_error

RUNS = "runs"
ARCHIVE = "runs.tar.gz"


def runs_folders(paths: list[Path]) -> list[Path]:
    """Every folder named ``runs`` at or under ``paths``, sorted; a path that does not exist is an error."""
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise PortableSpecError(f"no such path: {', '.join(missing)}; name results folders that exist")
    found = {p for p in paths if p.is_dir() and p.name == RUNS}
    found |= {d for p in paths if p.is_dir() for d in p.rglob(RUNS) if d.is_dir()}
    return sorted(found)


def members(folder: Path) -> dict[str, Path]:
    """``folder``'s files by their name in the archive (``runs/`` and the path below ``folder``), sorted."""
    return {f"{RUNS}/{p.relative_to(folder).as_posix()}": p for p in sorted(folder.rglob("*")) if p.is_file()}


def archive_bytes(folder: Path) -> bytes:
    """``folder``'s files as a gzipped tar under ``runs/``: members sorted by path, times, owners and modes fixed."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, path in members(folder).items():
            data = path.read_bytes()
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode, info.uid, info.gid = len(data), 0, 0o644, 0, 0
            tar.addfile(info, io.BytesIO(data))
    packed = io.BytesIO()
    with gzip.GzipFile(fileobj=packed, mode="wb", compresslevel=9, mtime=0) as out:
        out.write(raw.getvalue())
    return packed.getvalue()


def pack(folder: Path) -> dict[str, object]:
    """Writes ``runs.tar.gz`` beside ``folder`` and removes the folder, once the archive reads back with every file
    equal; an archive already there is an error (nothing is overwritten)."""
    target = folder.parent / ARCHIVE
    if target.exists():
        raise PortableSpecError(f"{target} exists beside {folder}: move one of them away, then pack again")
    files = members(folder)
    data = archive_bytes(folder)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        back = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
    if back != {name: path.read_bytes() for name, path in files.items()}:
        raise PortableSpecError(f"{target}: the archive did not read back equal to {folder}; nothing removed")
    target.write_bytes(data)
    shutil.rmtree(folder)
    return {"folder": str(folder), "archive": str(target), "files": len(files), "bytes": len(data)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m portable_spec_harness.results_pack",
                                     description="Store each serving call's runs/ folder as one runs.tar.gz.")
    parser.add_argument("paths", nargs="+", type=Path, help="results folders (or runs/ folders) to pack")
    parser.add_argument("--check", action="store_true", help="pack nothing; exit 1 where a runs/ folder is left")
    parser.add_argument("--json", action="store_true", help="print the outcome as JSON")
    args = parser.parse_args(argv)
    try:
        folders = runs_folders(args.paths)
        if args.check:
            outcome: dict[str, object] = {"left": [str(f) for f in folders]}
        else:
            outcome = {"packed": [pack(f) for f in folders]}
    except PortableSpecError as exc:
        return emit_error(str(exc), 2, args.json)
    if args.json:
        print(json.dumps(outcome, indent=2))
    elif args.check:
        print("\n".join(f"left unpacked: {f}" for f in outcome["left"]) or "no runs/ folder left")
    else:
        for item in outcome["packed"]:
            print(f"{item['archive']}: {item['files']} files, {item['bytes']} bytes")
    return 1 if args.check and outcome["left"] else 0


if __name__ == "__main__":
    sys.exit(main())
