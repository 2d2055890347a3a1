"""Reading committed GPU results back in the tests that hold a results README to its JSON: a result file, gzip-
compressed or not, and a README table as rows of cells."""

from __future__ import annotations

import gzip
import json
from pathlib import Path


def load(path: Path) -> dict:
    """A committed JSON result; ``.gz`` ones are read through gzip (results over 1 KiB are stored compressed)."""
    return json.loads(gzip.open(path, "rt").read() if path.suffix == ".gz" else path.read_text())


def table(text: str, header: str) -> dict[str, list[str]]:
    """The markdown table in ``text`` whose header row starts with ``header`` (indented or not): its rows' cells keyed
    by the first cell. No such table, or one without rows, fails."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith(header))
    rows = {}
    for line in lines[start + 2:]:
        line = line.strip()
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0]] = cells[1:]
    assert rows, header
    return rows
