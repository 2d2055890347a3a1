"""What the harness's PNG reports share: a legend only on a panel that has labelled artists (matplotlib warns "No
artists with labels found to put in legend" otherwise, a line that reads like a fault in a passing log), a title
wrapped to its figure's width, and the PNG written small."""

from __future__ import annotations

import io
import textwrap
from pathlib import Path
from typing import Any


def legend(ax: Any, **kwargs: Any) -> bool:
    """``ax.legend(**kwargs)`` when ``ax`` has a labelled artist; returns whether it drew one."""
    handles, _ = ax.get_legend_handles_labels()
    if handles:
        ax.legend(**kwargs)
    return bool(handles)


TITLE_CHARS_PER_INCH = 8
"""How many characters of a 12-point title fit in an inch of figure: a longer title is wrapped, so the device and
TP at its end stay on the PNG (a one-line title wider than the figure is cut at both edges)."""


def wrapped_title(text: str, width_in: float) -> str:
    """``text`` broken into lines that fit a figure ``width_in`` inches wide."""
    return textwrap.fill(text, max(20, int(width_in * TITLE_CHARS_PER_INCH)), break_on_hyphens=False,
                         break_long_words=False)


def save_png(fig: Any, path: str | Path, dpi: int = 110) -> None:
    """``fig`` as an opaque RGB PNG, its compression optimized: a plot has no transparency, and matplotlib's RGBA
    PNG at its default compression is about an eighth larger for the same pixels. Committed results ride along with
    every GPU call, whose carried tree has a size limit (DEVELOPERS.md, "Committed results stay small")."""
    from PIL import Image

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    buf.seek(0)
    rgba = Image.open(buf).convert("RGBA")
    opaque = Image.alpha_composite(Image.new("RGBA", rgba.size, "white"), rgba)
    opaque.convert("RGB").save(path, "PNG", optimize=True)
