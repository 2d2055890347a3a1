"""What the harness's PNG reports share: a legend only on a panel that has labelled artists (matplotlib warns "No
artists with labels found to put in legend" otherwise, a line that reads like a fault in a passing log)."""

from __future__ import annotations

from typing import Any


def legend(ax: Any, **kwargs: Any) -> bool:
    """``ax.legend(**kwargs)`` when ``ax`` has a labelled artist; returns whether it drew one."""
    handles, _ = ax.get_legend_handles_labels()
    if handles:
        ax.legend(**kwargs)
    return bool(handles)
