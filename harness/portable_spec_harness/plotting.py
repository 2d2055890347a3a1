"""What the harness's PNG reports share: a legend only on a panel that has labelled artists (matplotlib warns "No
artists with labels found to put in legend" otherwise, a line that reads like a fault in a passing log), and a title
wrapped to its figure's width."""

from __future__ import annotations

import textwrap
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
