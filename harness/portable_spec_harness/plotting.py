"""What the harness's PNG reports share: a legend only on a panel that has labelled artists (matplotlib warns "No
artists with labels found to put in legend" otherwise, a line that reads like a fault in a passing log), a title
wrapped to its figure's width, and the PNG written small (a palette PNG; ``python -m portable_spec_harness.plotting
PNG...`` re-encodes older ones)."""

from __future__ import annotations

import io
import sys
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


PALETTE_COLORS = 256
"""A PNG report's colours: matplotlib's antialiased plots hold 2,000-2,700 distinct colours, nearly all in the edge
pixels of lines and text; mapped to 256 (median cut, no dithering) the committed plots changed in at most 0.15% of
their pixels by 16 levels or more in a channel, and took 6.5 MiB of the carried tree instead of 15.6 MiB."""


def palette_png(image: Any, path: str | Path) -> None:
    """``image`` (a PIL image, any mode) written to ``path`` as an opaque PNG of ``PALETTE_COLORS`` colours with
    optimized compression. Deterministic: the same pixels give the same bytes."""
    from PIL import Image

    rgba = image.convert("RGBA")
    opaque = Image.alpha_composite(Image.new("RGBA", rgba.size, "white"), rgba).convert("RGB")
    opaque.quantize(PALETTE_COLORS, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(
        path, "PNG", optimize=True)


def save_png(fig: Any, path: str | Path, dpi: int = 110) -> None:
    """``fig`` as a palette PNG (``palette_png``): a plot has no transparency and few colours that matter, and
    committed results ride along with every GPU call, whose carried tree has a size limit (DEVELOPERS.md, "Committed
    results stay small"); a palette PNG takes about 40% of an RGB one's bytes."""
    from PIL import Image

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    buf.seek(0)
    palette_png(Image.open(buf), path)


def reencode(paths: list[Path]) -> dict[str, int]:
    """Each PNG in ``paths`` that is not yet a palette PNG, re-encoded in place by ``palette_png``: how committed
    reports written before it came to match it. Returns the files re-encoded and the bytes before and after."""
    from PIL import Image

    done = {"files": 0, "bytes_before": 0, "bytes_after": 0}
    for path in paths:
        with Image.open(path) as image:
            if image.mode == "P":
                continue
            image.load()
            before = path.stat().st_size
            palette_png(image, path)
        done["files"] += 1
        done["bytes_before"] += before
        done["bytes_after"] += path.stat().st_size
    return done


def main(argv: list[str] | None = None) -> int:
    """``python -m portable_spec_harness.plotting [--json] PNG...``: re-encode PNG reports as palette PNGs."""
    import argparse
    import json

    from portable_spec.output import emit_error

    parser = argparse.ArgumentParser(prog="python -m portable_spec_harness.plotting",
                                     description="re-encode PNG reports as palette PNGs (palette_png)")
    parser.add_argument("paths", nargs="+", type=Path, help="PNG files")
    parser.add_argument("--json", action="store_true", help="print the counts as JSON")
    args = parser.parse_args(argv)
    bad = [str(p) for p in args.paths if not p.is_file() or p.suffix.lower() != ".png"]
    if bad:
        return emit_error(f"not a PNG file: {', '.join(bad)}; name existing .png files", 2, args.json)
    done = reencode(args.paths)
    print(json.dumps(done) if args.json else
          f"{done['files']} PNG(s) re-encoded: {done['bytes_before']} -> {done['bytes_after']} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
