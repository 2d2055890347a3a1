"""The harness's PNG panels draw a legend only when a panel has labelled artists: matplotlib's "No artists with
labels found to put in legend" warning must not appear in a passing log."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from portable_spec_harness.plotting import legend

plt = pytest.importorskip("matplotlib.pyplot")


def test_an_unlabelled_panel_gets_no_legend_and_no_warning():
    fig, ax = plt.subplots()
    ax.plot([1, 2], [3, 4])  # no label
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert legend(ax, fontsize=8) is False
    assert ax.get_legend() is None
    plt.close(fig)


def test_a_labelled_panel_gets_its_legend():
    fig, ax = plt.subplots()
    ax.plot([1, 2], [3, 4], label="ours")
    assert legend(ax, fontsize=8) is True and [t.get_text() for t in ax.get_legend().get_texts()] == ["ours"]
    plt.close(fig)


def test_no_harness_plot_calls_matplotlib_legend_directly():
    """Every panel goes through ``plotting.legend`` (a figure-level legend built from collected handles is fine)."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "harness" / "portable_spec_harness"
    direct = [f"{p.name}:{n}" for p in root.rglob("*.py") if p.name != "plotting.py"
              for n, line in enumerate(p.read_text().splitlines(), 1) if re.search(r"\bax\w*\.legend\(", line)]
    assert direct == []


def drawn(tmp_path: Path) -> tuple[Path, Path]:
    """A two-panel-like figure as matplotlib writes it and as ``save_png`` does."""
    from portable_spec_harness.plotting import save_png

    fig, ax = plt.subplots(figsize=(6, 3))
    ax.plot(range(50), [i * i % 17 for i in range(50)], label="ours")
    ax.bar(range(5), [3, 1, 4, 1, 5])
    ax.set_title("llama8b_eagle3 (designed-partial), K=3, NVIDIA H200")
    legend(ax, fontsize=8)
    plain, small = tmp_path / "plain.png", tmp_path / "small.png"
    fig.savefig(plain, dpi=110)
    save_png(fig, small, dpi=110)
    plt.close(fig)
    return plain, small


def off_pixels(a: "Image.Image", b: "Image.Image", levels: int = 16) -> float:
    """The share of pixels where any channel of ``a`` and ``b`` differs by ``levels`` or more."""
    from PIL import ImageChops

    worst = ImageChops.difference(a.convert("RGB"), b.convert("RGB")).split()
    hist = ImageChops.lighter(ImageChops.lighter(worst[0], worst[1]), worst[2]).histogram()
    return sum(hist[levels:]) / sum(hist)


def test_a_saved_png_is_an_opaque_palette_png_with_matplotlibs_picture_and_smaller(tmp_path):
    """``save_png`` writes matplotlib's pixels (alpha dropped where every pixel is opaque) as a 256-colour palette
    PNG: nearly every pixel as drawn, in under 60% of the bytes of matplotlib's own PNG."""
    from PIL import Image

    plain, small = drawn(tmp_path)
    before, after = Image.open(plain), Image.open(small)
    assert before.mode == "RGBA" and before.getchannel("A").getextrema() == (255, 255)
    assert after.mode == "P" and after.size == before.size and len(after.getcolors(1 << 16)) <= 256
    assert len(before.convert("RGB").getcolors(1 << 24)) > 256  # antialiasing: the palette had to choose
    assert off_pixels(before, after) < 0.001
    assert small.stat().st_size < 0.6 * plain.stat().st_size


def test_reencode_turns_an_rgb_png_into_the_palette_png_save_png_writes_and_skips_a_palette_one(tmp_path, capsys):
    from PIL import Image

    from portable_spec_harness import plotting

    plain, small = drawn(tmp_path)
    rgb = tmp_path / "rgb.png"
    Image.open(plain).convert("RGB").save(rgb, "PNG", optimize=True)
    size = rgb.stat().st_size
    done = plotting.reencode([rgb, small])
    assert done == {"files": 1, "bytes_before": size, "bytes_after": rgb.stat().st_size} and done["bytes_after"] < size
    assert rgb.read_bytes() == small.read_bytes()  # the same pixels give the same bytes
    assert plotting.main([str(rgb), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["files"] == 0  # a palette PNG is left as it is
    assert plotting.main([str(tmp_path / "missing.png")]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_no_harness_plot_calls_savefig_directly():
    """Every PNG report goes through ``plotting.save_png``."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "harness" / "portable_spec_harness"
    direct = [f"{p.name}:{n}" for p in root.rglob("*.py") if p.name != "plotting.py"
              for n, line in enumerate(p.read_text().splitlines(), 1) if re.search(r"\.savefig\(", line)]
    assert direct == []
