"""Draw every diagram the notebooks show:  python images/draw.py

Each `images/figures_*.py` module holds functions named `draw_<name>()` that return a
matplotlib Figure; this script saves each one as `images/<name>.png`. Output is byte-for-byte
reproducible (fixed DPI, no timestamps in the PNG metadata), and tests/test_images.py checks
that the committed PNGs are exactly what this script draws.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = Path(__file__).resolve().parent
DPI = 110


def figure_functions():
    """(name, function) for every draw_* function in every figures_*.py module, sorted."""
    if str(HERE) not in sys.path:  # the figure modules share images/palette.py
        sys.path.insert(0, str(HERE))
    found = []
    for path in sorted(HERE.glob("figures_*.py")):
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        for attr in sorted(dir(module)):
            if attr.startswith("draw_"):
                found.append((attr[len("draw_"):], getattr(module, attr)))
    return found


def _style() -> None:
    plt.rcParams.update({"svg.hashsalt": "course", "font.size": 10})


def smallest_text_px(fig) -> float:
    """The height in pixels of the smallest text a figure holds, in the PNG this script saves (font size in
    points x DPI / 72). Shown at a scale s in a page, it is s times that: tests/test_book.py asks for 9 px."""
    from matplotlib.text import Text

    fig.canvas.draw()  # tick labels exist once drawn
    sizes = [t.get_fontsize() for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
    return min(sizes) * DPI / 72


def text_sizes() -> dict[str, float]:
    """{image name: its smallest text in pixels} for every diagram."""
    _style()
    sizes = {}
    for name, fn in figure_functions():
        fig = fn()
        sizes[f"{name}.png"] = smallest_text_px(fig)
        plt.close(fig)
    return sizes


def draw_all(out_dir: Path = HERE) -> list[Path]:
    _style()
    written = []
    for name, fn in figure_functions():
        fig = fn()
        path = Path(out_dir) / f"{name}.png"
        fig.savefig(path, dpi=DPI, metadata={"Software": None}, bbox_inches="tight")
        plt.close(fig)
        written.append(path)
    return written


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE
    for p in draw_all(out):
        print(p.name)
