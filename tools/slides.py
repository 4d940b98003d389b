"""Slideshow metadata for the notebooks, derived from their structure, so it can be re-applied
after any edit or merge:

    python tools/slides.py notebooks/*.ipynb

- the title cell and every level-2 section heading (`## 3. ...`, `## Exercises`) start a *slide*
  (a markdown cell with a heading below other text is split there first, so the heading opens it);
- the setup cells before the first section (the Colab cell, tagged `colab-setup`, whose metadata
  its generator owns and which is left alone, and the imports cell) are *skipped*;
- every other cell is a *fragment* of the current sub-slide while the sub-slide still fits a
  screen (`SCREEN_LINES`), else it starts a new *sub-slide*.

JupyterLab presents them live with the RISE extension (jupyterlab_rise); `jupyter nbconvert --to
slides notebooks/01_vector_add.ipynb` writes a reveal.js deck. tests/test_presentation.py checks
every notebook's export.
"""

from __future__ import annotations

import re
import sys

import nbformat

#: What one screen shows: JupyterLab's 13-14 px code at about 20 px a line leaves ~45-50 lines of a
#: 1080-pixel projector once the slide's margins are off. 48 is that screen; a cell's code and
#: outputs are at most 40 lines each, so a cell and a short explanation fit on one.
SCREEN_LINES = 48
#: A diagram or a chart is shown at about a third of the screen's height.
IMAGE_LINES = 16
SETUP_TAG = "colab-setup"
HEADING = re.compile(r"^## \S", re.M)
NUMBERED = re.compile(r"^## (\d+)\.", re.M)


def text_lines(cell) -> int:
    """Lines a cell takes on screen: its source and the text of its outputs, images at IMAGE_LINES."""
    lines = len(cell.source.splitlines())
    if cell.cell_type == "markdown":
        return lines + IMAGE_LINES * len(re.findall(r"!\[[^\]]*\]\(", cell.source))
    for out in cell.get("outputs", []):
        data = out.get("data", {})
        if any(kind.startswith("image/") for kind in data):
            lines += IMAGE_LINES
        elif out.output_type == "stream":
            lines += len(out.text.splitlines())
        elif out.output_type == "error":
            lines += len(out.traceback)
        elif "text/plain" in data and "text/html" not in data:
            lines += len(data["text/plain"].splitlines())
    return lines


def split_headings(nb) -> int:
    """Split markdown cells at level-2 headings that follow other text, so each heading opens a cell."""
    cells, splits = [], 0
    for cell in nb.cells:
        starts = [m.start() for m in HEADING.finditer(cell.source)] if cell.cell_type == "markdown" else []
        starts = [s for s in starts if cell.source[:s].strip()]
        if not starts:
            cells.append(cell)
            continue
        pieces = [cell.source[a:b].strip("\n") for a, b in zip([0] + starts, starts + [None])]
        cell.source = pieces[0]
        cells.append(cell)
        cells += [nbformat.v4.new_markdown_cell(piece) for piece in pieces[1:]]
        splits += len(pieces) - 1
    nb.cells = cells
    return splits


def slide_types(nb) -> list[str | None]:
    """The slide type of each cell (None: a setup cell whose metadata is not ours to set)."""
    types, used, first_section = [], 0, None
    for n, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown" and HEADING.match(cell.source):
            first_section = n
            break
    for n, cell in enumerate(nb.cells):
        lines = text_lines(cell)
        if SETUP_TAG in cell.metadata.get("tags", []):
            kind = None
        elif n == 0 or (cell.cell_type == "markdown" and HEADING.match(cell.source)):
            kind = "slide"
        elif first_section is not None and n < first_section and cell.cell_type == "code":
            kind = "skip"
        elif used + lines <= SCREEN_LINES:
            kind = "fragment"
        else:
            kind = "subslide"
        if kind in ("slide", "subslide"):
            used = lines
        elif kind == "fragment":
            used += lines
        types.append(kind)
    return types


def apply(nb) -> None:
    split_headings(nb)
    for cell, kind in zip(nb.cells, slide_types(nb)):
        if kind is not None:
            cell.metadata["slideshow"] = {"slide_type": kind}


def main(paths: list[str]) -> None:
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        apply(nb)
        nbformat.write(nb, path)
        kinds = [c.metadata.get("slideshow", {}).get("slide_type") for c in nb.cells]
        print(f"{path}: {kinds.count('slide')} slides, {kinds.count('subslide')} sub-slides")


if __name__ == "__main__":
    main(sys.argv[1:])
