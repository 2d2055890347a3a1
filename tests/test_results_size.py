"""The committed results stay small enough for the GPU host: every call carries the whole working tree beside one part
of the staged vLLM install, 64 MiB in all, and ``ci/gpu-host/resplit.sh`` sizes the parts from what the tree leaves.
So a large raw result under ``bench/results/`` is stored gzip-compressed unless a reader needs it by name
(``DEVELOPERS.md``, "Committed results stay small"), and the tracked tree has a ceiling."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = "bench/results/"
RAW = (".json", ".log", ".txt", ".console", ".xml", ".csv")
"""Raw result text; anything over ``LIMIT`` with one of these suffixes is stored as ``NAME.gz``."""
LIMIT = 256 << 10
TREE_LIMIT = 36 << 20
"""In bytes. The device tool measures the tree in 4 KiB blocks, ~8 MiB more than its bytes across ~3,500 small files,
and resplit.sh gives parts 60 MiB minus that: 34 MiB of bytes leave parts of about 18 MiB (vLLM 0.28.0 in 13 calls,
0.33.0 in 17), with room for a few leases of results (each adds 1-2 MiB compressed, mostly its plots, and ~200
files). A ceiling near the tree is raised rather than results dropped: a staging call more costs seconds (raised from
30 MiB when the tree reached 31.1, and from 34 MiB at 34.5; re-split the staged parts then, ``resplit.sh`` without a
size)."""

NEEDED_BY_NAME = {
    # session-20/summarize.py (committed beside it) globs vllm-*/triton32_check.json to write summary.json.
    "bench/results/2026-11-28-musa-launch-table-span/session-20/vllm-0.33.0/triton32_check.json",
}
"""Uncompressed raw files over ``LIMIT`` that a reader opens by name; each with the reader that needs it."""


def tracked_sizes() -> dict[str, int]:
    """Every tracked file of the working tree and its size in bytes (a tracked file deleted here is not carried)."""
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    paths = [p for p in out.decode().split("\0") if p]
    return {p: (ROOT / p).stat().st_size for p in paths if (ROOT / p).is_file()}


def uncompressed_oversized(sizes: dict[str, int], allowed: set[str]) -> tuple[int, list[str]]:
    """(how many raw result files were checked, those over ``LIMIT`` stored uncompressed and not ``allowed``)."""
    raw = {p: s for p, s in sizes.items() if p.startswith(RESULTS) and p.endswith(RAW)}
    return len(raw), sorted(f"{p} ({s >> 10} KiB)" for p, s in raw.items() if s > LIMIT and p not in allowed)


def test_large_raw_results_are_stored_compressed():
    sizes = tracked_sizes()
    checked, found = uncompressed_oversized(sizes, NEEDED_BY_NAME)
    assert checked > 0, "no raw result file under bench/results/ was checked"
    assert found == [], f"store these as NAME.gz (gzip -9 -n NAME), or add their reader to NEEDED_BY_NAME: {found}"
    assert [p for p in NEEDED_BY_NAME if p not in sizes] == [], "NEEDED_BY_NAME names a file that is not tracked"


def test_the_tracked_tree_fits_beside_a_part():
    sizes = tracked_sizes()
    assert len(sizes) > 0
    total = sum(sizes.values())
    assert total <= TREE_LIMIT, (f"the tracked tree is {total / (1 << 20):.1f} MiB, over {TREE_LIMIT >> 20} MiB: "
                                 "compress raw results (DEVELOPERS.md, 'Committed results stay small')")


def test_the_check_catches_a_large_uncompressed_result():
    sizes = {f"{RESULTS}run/big.json": LIMIT + 1, f"{RESULTS}run/big.json.gz": LIMIT * 2, f"{RESULTS}run/small.log": 10,
             f"{RESULTS}run/needed.txt": LIMIT * 2, "tests/big.json": LIMIT * 2}
    assert uncompressed_oversized(sizes, {f"{RESULTS}run/needed.txt"}) == (3, [f"{RESULTS}run/big.json (256 KiB)"])
    assert uncompressed_oversized({}, set()) == (0, [])
