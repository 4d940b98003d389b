"""The committed diagrams are exactly what images/draw.py draws."""

import importlib.util
from pathlib import Path

import pytest

IMAGES = Path(__file__).resolve().parent.parent / "images"


def _draw_module():
    spec = importlib.util.spec_from_file_location("draw", IMAGES / "draw.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_images_are_regenerated_identically(tmp_path):
    draw = _draw_module()
    written = draw.draw_all(tmp_path)
    if not written:
        pytest.skip("no figures_*.py modules yet")
    for path in written:
        committed = IMAGES / path.name
        assert committed.exists(), f"{path.name} is drawn by images/draw.py but not committed"
        assert committed.read_bytes() == path.read_bytes(), f"{path.name} differs from what images/draw.py draws"


def test_every_committed_image_is_drawn_by_a_script():
    drawn = {f"{name}.png" for name, _ in _draw_module().figure_functions()}
    committed = {p.name for p in IMAGES.glob("*.png")}
    assert drawn, "images/draw.py finds no draw_* functions"
    assert committed <= drawn, f"committed but drawn by no script (delete them or draw them): {sorted(committed - drawn)}"
