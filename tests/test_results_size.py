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
BLOCK = 4 << 10
TREE_LIMIT = 44 << 20
"""In whole 4 KiB blocks, as the device tool counts the tree it carries (bytes alone hid ~13 MiB of small-file
overhead: the tree read 35 MiB of bytes when a 15 MiB part and FlashInfer's 6.4 MiB cache no longer fitted beside it).
``resplit.sh`` gives parts 60 MiB minus the tree; 44 MiB leaves parts of 16 MiB. Each lease adds 0.5-2 MiB (its
plots, compressed logs and one ``runs.tar.gz`` per call); a ceiling near the tree is raised rather than results
dropped, and the staged parts re-split then (``resplit.sh`` without a size). Raised from 46 to 48 and 50 MiB as
sessions 48 and 50's results grew the tree; lowered to 44 MiB when the PNG reports became palette PNGs (49.5 MiB to
40.4 MiB, ``test_every_committed_png_is_a_palette_png``)."""
RUNS_FOLDER = "/runs/"
"""A serving call's per-run client files are stored as one ``runs.tar.gz`` (``python -m
portable_spec_harness.results_pack``): a tracked path with this part under ``bench/results/`` is a folder left
unpacked, dozens of small files of whole blocks each."""

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


def carried_size(sizes: dict[str, int]) -> int:
    """The tree as the device tool counts it: each file in whole ``BLOCK`` s."""
    return sum(-(-size // BLOCK) * BLOCK for size in sizes.values())


def unpacked_runs(sizes: dict[str, int]) -> list[str]:
    """The ``runs/`` folders under ``bench/results/`` that hold tracked files (each one listed once)."""
    return sorted({p[:p.index(RUNS_FOLDER) + len(RUNS_FOLDER)] for p in sizes
                   if p.startswith(RESULTS) and RUNS_FOLDER in p})


def test_the_tracked_tree_fits_beside_a_part():
    sizes = tracked_sizes()
    assert len(sizes) > 0
    total = carried_size(sizes)
    assert total <= TREE_LIMIT, (f"the tracked tree takes {total / (1 << 20):.1f} MiB of 4 KiB blocks, over "
                                 f"{TREE_LIMIT >> 20} MiB: compress raw results and pack runs/ folders (DEVELOPERS.md, "
                                 "'Committed results stay small')")


def test_every_calls_runs_folder_is_packed():
    sizes = tracked_sizes()
    assert any(p.startswith(RESULTS) for p in sizes), "no tracked result under bench/results/"
    assert unpacked_runs(sizes) == [], ("pack them: python -m portable_spec_harness.results_pack FOLDER "
                                        f"({unpacked_runs(sizes)[:3]})")


def test_the_block_count_and_the_runs_check_catch_what_they_guard():
    assert carried_size({"a": 1, "b": BLOCK, "c": BLOCK + 1, "d": 0}) == 4 * BLOCK
    sizes = {f"{RESULTS}s/call1/serve-bench/runs/timed_a.json.gz": 10, f"{RESULTS}s/call1/serve-bench/runs/b.txt": 3,
             f"{RESULTS}s/call2/serve-bench/runs.tar.gz": 9, "tests/runs/x.py": 1}
    assert unpacked_runs(sizes) == [f"{RESULTS}s/call1/serve-bench/runs/"]


def test_the_check_catches_a_large_uncompressed_result():
    sizes = {f"{RESULTS}run/big.json": LIMIT + 1, f"{RESULTS}run/big.json.gz": LIMIT * 2, f"{RESULTS}run/small.log": 10,
             f"{RESULTS}run/needed.txt": LIMIT * 2, "tests/big.json": LIMIT * 2}
    assert uncompressed_oversized(sizes, {f"{RESULTS}run/needed.txt"}) == (3, [f"{RESULTS}run/big.json (256 KiB)"])
    assert uncompressed_oversized({}, set()) == (0, [])


def test_every_committed_png_is_a_palette_png():
    """PNG reports are palette PNGs (``plotting.save_png``; ``python -m portable_spec_harness.plotting PNG...``
    re-encodes one written otherwise): an RGB plot takes about two and a half times the blocks."""
    from PIL import Image

    pngs = [p for p in tracked_sizes() if p.lower().endswith(".png")]
    assert pngs, "no committed PNG was checked"
    modes = {p: Image.open(ROOT / p).mode for p in pngs}
    assert [p for p, mode in modes.items() if mode != "P"] == [], "re-encode: python -m portable_spec_harness.plotting"

