"""The harness's PNG panels draw a legend only when a panel has labelled artists: matplotlib's "No artists with
labels found to put in legend" warning must not appear in a passing log."""

from __future__ import annotations

import warnings

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


def test_a_saved_png_is_opaque_rgb_with_the_pixels_matplotlib_drew_and_smaller(tmp_path):
    """``save_png`` writes the figure's pixels (matplotlib's own PNG, alpha dropped where every pixel is opaque) as
    RGB with optimized compression: the same picture in fewer bytes than ``fig.savefig``."""
    from PIL import Image, ImageChops

    from portable_spec_harness.plotting import save_png

    fig, ax = plt.subplots(figsize=(6, 3))
    ax.plot(range(50), [i * i % 17 for i in range(50)], label="ours")
    ax.bar(range(5), [3, 1, 4, 1, 5])
    legend(ax, fontsize=8)
    plain, small = tmp_path / "plain.png", tmp_path / "small.png"
    fig.savefig(plain, dpi=110)
    save_png(fig, small, dpi=110)
    plt.close(fig)
    before, after = Image.open(plain), Image.open(small)
    assert before.mode == "RGBA" and before.getchannel("A").getextrema() == (255, 255)
    assert after.mode == "RGB" and after.size == before.size
    assert ImageChops.difference(after.convert("RGBA"), before.convert("RGBA")).getbbox() is None
    assert small.stat().st_size < plain.stat().st_size


def test_no_harness_plot_calls_savefig_directly():
    """Every PNG report goes through ``plotting.save_png``."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "harness" / "portable_spec_harness"
    direct = [f"{p.name}:{n}" for p in root.rglob("*.py") if p.name != "plotting.py"
              for n, line in enumerate(p.read_text().splitlines(), 1) if re.search(r"\.savefig\(", line)]
    assert direct == []
