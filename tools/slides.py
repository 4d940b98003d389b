"""Slideshow metadata for the notebooks, derived from their structure, so it can be re-applied
after any edit or merge:

    python tools/slides.py notebooks/*.ipynb       # derive the metadata again after edits
    python tools/slides.py decks [OUT]             # write every notebook's reveal.js deck (default docs/_build/slides)

- the title cell and every level-2 section heading (`## 3. ...`, `## Exercises`) start a *slide*
  (a markdown cell with a heading below other text is split there first, so the heading opens it);
- the setup cells before the first section (the Colab cell, tagged `colab-setup`, whose metadata
  its generator owns and which is left alone, and the imports cell) are *skipped*;
- every other cell is a *fragment* of the current sub-slide while the sub-slide still fits a
  screen (`SCREEN_LINES`), else it starts a new *sub-slide*.

JupyterLab presents them live with the RISE extension (jupyterlab_rise). `decks` writes a deck per notebook
for a classroom without a network: nbconvert's reveal.js export, with reveal.js (5.x, from the pinned
sphinx-revealjs package) and MathJax (from jupyter-server-mathjax) copied beside the decks instead of fetched
from a CDN, the notebooks' images embedded in each deck, slides of the projector's 1280 x 720, and a slide
taller than that scrolling instead of being cut off. tests/test_presentation.py checks every notebook's
export; tests/test_decks.py opens every deck in Chromium, offline, at 1280 x 720.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

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


# ------------------------------------------------------------------ decks

ROOT = Path(__file__).resolve().parent.parent
DECKS = ROOT / "docs" / "_build" / "slides"
#: The projector: a deck's slides are laid out at this size (reveal.js scales them to the window).
SLIDE_WIDTH, SLIDE_HEIGHT = 1280, 720
REVEAL = "reveal.js"  # beside the decks: reveal.js's dist/ and plugin/
MATHJAX = "mathjax"  # beside the decks: MathJax 2.7 with its STIX web fonts, as the book serves it

#: nbconvert's reveal.js template with every file it would fetch from a CDN (reveal.js, require.js, jQuery,
#: MathJax, mermaid) read from beside the deck instead, no require.js or jQuery at all (reveal.js 5 loads as a
#: plain script), and each slide as tall as the screen, scrolling when its content is taller.
DECK_TEMPLATE = """{%- extends 'index.html.j2' -%}
{%- block html_head_js_jquery -%}{%- endblock html_head_js_jquery -%}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{%- block html_head_js_mathjax -%}
<script type="text/x-mathjax-config">
MathJax.Hub.Config({tex2jax: {inlineMath: [['$', '$'], ['\\\\(', '\\\\)']], displayMath: [['$$', '$$'], ['\\\\[', '\\\\]']],
                              processEscapes: true},
                    "HTML-CSS": {availableFonts: [], imageFont: null, preferredFont: null, webFont: "STIX-Web"},
                    showMathMenu: false, messageStyle: "none"});
</script>
<script src="{{ resources.mathjax_url }}"></script>
{%- endblock html_head_js_mathjax -%}
{%- block html_head_css -%}
<style type="text/css">
:root {
    --jp-content-font-size1: 18px;
    --jp-code-font-size: 15px;
    --jp-cell-prompt-width: 0px;
}
.jp-InputPrompt, .jp-OutputPrompt { display: none; }
.reveal .slides h1, .reveal .slides h2, .reveal .slides h3 { text-transform: none; }  /* not the theme's capitals */
/* a slide is the screen's height; what does not fit scrolls inside it, never cut off */
.reveal .slides > section, .reveal .slides > section > section { height: 100%; }
.reveal .slides > section:not(.stack), .reveal .slides > section > section { overflow-y: auto; }
.reveal .slides section img { max-height: none; }
</style>
{%- endblock html_head_css -%}
{% block footer_js %}
<script src="{{ resources.reveal.url_prefix }}/dist/reveal.js"></script>
<script src="{{ resources.reveal.url_prefix }}/plugin/notes/notes.js"></script>
<script>
Reveal.initialize({controls: true, progress: true, history: true, center: false, transition: "none",
                   slideNumber: "c/t", width: {{ resources.reveal.width }}, height: {{ resources.reveal.height }},
                   margin: 0.02, plugins: [RevealNotes]});
Reveal.on("slidechanged", function (event) {
  if (window.MathJax && MathJax.Hub) { MathJax.Hub.Queue(["Rerender", MathJax.Hub, event.currentSlide]); }
});
</script>
{% endblock footer_js %}
"""


def deck_exporter():
    """nbconvert's SlidesExporter set up for a deck that works offline (DECK_TEMPLATE)."""
    from jinja2 import DictLoader
    from nbconvert import SlidesExporter

    return SlidesExporter(extra_loaders=[DictLoader({"course_deck.html.j2": DECK_TEMPLATE})],
                          template_file="course_deck.html.j2", reveal_url_prefix=REVEAL, reveal_transition="none",
                          reveal_theme="white",  # its fonts ship with it (simple, the default, fetches two)
                          reveal_width=str(SLIDE_WIDTH), reveal_height=str(SLIDE_HEIGHT), embed_images=True,
                          mathjax_url=f"{MATHJAX}/MathJax.js?config=TeX-AMS-MML_HTMLorMML-full,Safe")


def reveal_files() -> Path:
    """reveal.js (dist/ and plugin/) as the pinned sphinx-revealjs package ships it."""
    import sphinx_revealjs

    return Path(sphinx_revealjs.__file__).parent / "_static" / "revealjs"


def write_decks(out: Path = DECKS, notebooks: list[Path] | None = None) -> list[Path]:
    """Every notebook's deck as `out/<notebook>.slides.html`, with reveal.js and MathJax copied into `out`; the
    notebook's images are embedded, so a deck needs only the two folders beside it."""
    import jupyter_server_mathjax

    notebooks = notebooks or sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for part in ("dist", "plugin"):
        shutil.copytree(reveal_files() / part, out / REVEAL / part, dirs_exist_ok=True)
    shutil.copytree(Path(jupyter_server_mathjax.__file__).parent / "static", out / MATHJAX, dirs_exist_ok=True)
    exporter, written = deck_exporter(), []
    for path in notebooks:
        nb = nbformat.read(path, as_version=4)
        # nbconvert embeds only images under the folder it is given: the notebooks' `../images/x.png`, read from
        # the repository's root, become `images/x.png`
        for cell in nb.cells:
            if cell.cell_type == "markdown":
                cell.source = cell.source.replace("](../images/", "](images/")
                cell.source = cell.source.replace('src="../images/', 'src="images/')
        body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": Path(path).stem, "path": str(ROOT)}})
        target = out / f"{Path(path).stem}.slides.html"
        target.write_text(body, encoding="utf-8")
        written.append(target)
    return written


def main(paths: list[str]) -> None:
    if paths[:1] == ["decks"]:
        out = Path(paths[1]) if len(paths) > 1 else DECKS
        for deck in write_decks(out):
            print(deck.relative_to(ROOT) if deck.is_relative_to(ROOT) else deck)
        print(f"open one in a browser; copy {out} whole (the decks, {REVEAL}/ and {MATHJAX}/) to present elsewhere")
        return
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        apply(nb)
        nbformat.write(nb, path)
        kinds = [c.metadata.get("slideshow", {}).get("slide_type") for c in nb.cells]
        print(f"{path}: {kinds.count('slide')} slides, {kinds.count('subslide')} sub-slides")


if __name__ == "__main__":
    main(sys.argv[1:])
