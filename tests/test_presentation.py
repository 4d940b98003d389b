"""Every notebook can be presented and read: cells and outputs short enough for a slide, lines
narrow enough for a slide and a GitHub page, a slide per numbered section that fits a screen, no
maintainer's words in what a student reads, and one lecture long (25 screens, 2,800 words of prose,
at least three sources linked, no function hiding a ladder's steps behind boolean switches).

These read the committed notebooks only (no kernel runs), so they take a second.
"""

from __future__ import annotations

import re
import sys
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest
from nbconvert import SlidesExporter

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
sys.path.insert(0, str(ROOT / "tools"))
import lecture_length  # noqa: E402  (tools/lecture_length.py: plain nbformat and ast)
import slides  # noqa: E402  (tools/slides.py: plain nbformat, no TVM)

CODE_LINES = 40  # lines of code in one cell
OUTPUT_LINES = 40  # lines of one text output
WIDTH = 120  # characters in one line of output

#: Cells over the limits for a reason this test cannot fix by itself (output recorded live on a GPU,
#: waiting for the next recording), keyed by (notebook, cell id) with the reason. Empty since the
#: series was re-recorded on 2026-11-24; the test fails when a listed cell already passes, so the
#: list only shrinks.
AWAITING: dict[tuple[str, str], str] = {}
#: Cells whose output prints a measurement's name with a maintainer's word in it: the name is also its
#: key in notebooks/results/, so it changes with the next recording ("seed schedule" in notebook 05).
RECORDED_NAMES = {("05_tensor_core_tensorization", "3068cff4"), ("05_tensor_core_tensorization", "61443e2b")}


def text_outputs(cell) -> list[str]:
    """The text a reader sees under a code cell: streams, the text of results, errors. Images and
    HTML are left out (a display's text/plain beside them is not shown)."""
    texts = []
    for out in cell.get("outputs", []):
        if out.output_type == "stream":
            texts.append(out.text)
        elif out.output_type == "execute_result":
            texts.append(out.get("data", {}).get("text/plain", ""))
        elif out.output_type == "error":
            texts.append("\n".join(out.traceback))
    return texts


def limit_problems(nb) -> dict[str, list[str]]:
    """Per cell id, what breaks the limits: too many lines of code or of one output, lines too wide."""
    found = {}
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        problems = []
        if len(cell.source.splitlines()) > CODE_LINES:
            problems.append(f"{len(cell.source.splitlines())} lines of code (at most {CODE_LINES})")
        for text in text_outputs(cell):
            lines = text.splitlines()
            if len(lines) > OUTPUT_LINES:
                problems.append(f"an output of {len(lines)} lines (at most {OUTPUT_LINES})")
            wide = [line for line in lines if len(line) > WIDTH]
            if wide:
                problems.append(f"{len(wide)} output lines wider than {WIDTH}, e.g. {wide[0][:60]!r}...")
        if problems:
            found[cell.get("id", "?")] = problems
    return found


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_cells_fit_a_slide(path):
    found = limit_problems(nbformat.read(path, as_version=4))
    waiting = {cid for (name, cid) in AWAITING if name == path.stem}
    unexpected = {cid: p for cid, p in found.items() if cid not in waiting}
    assert not unexpected, f"{path.name}: cells over the limits: {unexpected}"
    fixed = waiting - set(found)
    assert not fixed, f"{path.name}: cells {fixed} now pass: remove them from AWAITING"


def test_the_limits_catch_a_long_cell_a_long_output_and_a_wide_line():
    nb = nbformat.v4.new_notebook()
    long_code = nbformat.v4.new_code_cell("\n".join(f"x{i} = {i}" for i in range(CODE_LINES + 1)))
    long_out = nbformat.v4.new_code_cell("print(s)")
    long_out.outputs = [nbformat.v4.new_output("stream", name="stdout", text="line\n" * (OUTPUT_LINES + 1))]
    wide = nbformat.v4.new_code_cell("s")
    wide.outputs = [nbformat.v4.new_output("execute_result", data={"text/plain": "x" * (WIDTH + 1)}, execution_count=1)]
    fine = nbformat.v4.new_code_cell("\n".join(["y = 1"] * CODE_LINES))
    fine.outputs = [nbformat.v4.new_output("stream", name="stdout", text=("z" * WIDTH + "\n") * OUTPUT_LINES)]
    nb.cells = [long_code, long_out, wide, fine]
    found = limit_problems(nb)
    assert set(found) == {long_code.id, long_out.id, wide.id}


# ------------------------------------------------------------------ a student's words

#: Words of the course's making, not a student's: where the course came from, and how its
#: maintainers name their experiments. A student reads the experiment scripts' names instead.
MAINTAINER_WORDS = re.compile(
    r"\bseeds?\b|source material|source blog|\bstud(?:y|ies)\b|\bshared/(?!block\b)", re.IGNORECASE)


def student_text(nb) -> list[tuple[str, str]]:
    """(cell id, text) of what a student reads: markdown and printed output."""
    found = []
    for cell in nb.cells:
        texts = [cell.source] if cell.cell_type == "markdown" else text_outputs(cell)
        found += [(cell.get("id", "?"), text) for text in texts]
    return found


def maintainer_words(nb, name: str = "") -> list[str]:
    return [f"cell {cid}: {m.group(0)!r} in ...{text[max(0, m.start() - 40):m.end() + 20]!r}"
            for cid, text in student_text(nb) for m in MAINTAINER_WORDS.finditer(text)
            if (name, cid) not in RECORDED_NAMES]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_students_read_no_maintainer_words(path):
    found = maintainer_words(nbformat.read(path, as_version=4), path.stem)
    assert not found, "\n".join(found)


def test_the_word_check_catches_each_word():
    for text in ["as the source blog did", "the seed's shape", "see shared/seeds", "the levers study",
                 "two studies", "the Source Material's tiles"]:
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_markdown_cell(text)]
        assert maintainer_words(nb), text
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("0 KiB shared/block; rng seeded; a student")]
    assert not maintainer_words(nb)


# ------------------------------------------------------------------ slides


class _Deck(HTMLParser):
    """The slides of a reveal.js export: a list of slides, each a list of sub-slides, each the ids
    of the cells it shows (nbconvert nests a slide's sub-slides as <section>s in its <section>)."""

    def __init__(self):
        super().__init__()
        self.depth, self.slides = 0, []

    def handle_starttag(self, tag, attrs):
        if tag == "section":
            self.depth += 1
            if self.depth == 1:
                self.slides.append([])
            elif self.depth == 2:
                self.slides[-1].append([])
        cell = dict(attrs).get("id") or ""
        if cell.startswith("cell-id=") and self.depth >= 2:
            self.slides[-1][-1].append(cell.removeprefix("cell-id="))

    def handle_endtag(self, tag):
        if tag == "section":
            self.depth -= 1


def deck(nb) -> list[list[list[str]]]:
    html, _ = SlidesExporter().from_notebook_node(nb)
    parser = _Deck()
    parser.feed(html)
    return parser.slides


def slide_problems(nb, name: str = "") -> list[str]:
    """A numbered section without a slide of its own, a sub-slide over a screen (unless it holds a cell
    AWAITING its fix), a cell in no slide."""
    cells = {cell.get("id"): cell for cell in nb.cells}
    slides_ = deck(nb)
    problems = []
    openers = [cells[sub[0]].source for slide in slides_ for sub in slide[:1] if sub]
    for section in sorted({int(n) for cell in nb.cells if cell.cell_type == "markdown"
                           for n in slides.NUMBERED.findall(cell.source)}):
        if not any(re.match(rf"## {section}\.", text) for text in openers):
            problems.append(f"section {section} does not open a slide")
    for slide in slides_:
        for sub in slide:
            lines = sum(slides.text_lines(cells[cid]) for cid in sub)
            if lines > slides.SCREEN_LINES and not any((name, cid) in AWAITING for cid in sub):
                problems.append(f"a sub-slide of {lines} lines (more than {slides.SCREEN_LINES}), from cell {sub[0]}: "
                                f"{cells[sub[0]].source[:50]!r}")
    shown = {cid for slide in slides_ for sub in slide for cid in sub}
    hidden = [c for c in nb.cells if c.get("id") not in shown
              and c.metadata.get("slideshow", {}).get("slide_type") != "skip"
              and slides.SETUP_TAG not in c.metadata.get("tags", [])]
    if hidden:
        problems.append(f"{len(hidden)} cells are in no slide and not skipped, e.g. {hidden[0].source[:50]!r}")
    return problems


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_slides_have_a_slide_per_section_and_fit_a_screen(path):
    found = slide_problems(nbformat.read(path, as_version=4), path.stem)
    assert not found, f"{path.name}: " + "; ".join(found)


def test_the_slide_check_catches_a_missing_section_and_a_full_screen():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# Title"), nbformat.v4.new_markdown_cell("## 1. First"),
                nbformat.v4.new_code_cell("\n".join(["x = 1"] * 30)), nbformat.v4.new_code_cell("\n".join(["y = 2"] * 30)),
                nbformat.v4.new_markdown_cell("## 2. Second")]
    slides.apply(nb)
    assert not slide_problems(nb)  # the script gives section 2 a slide and the second cell a sub-slide
    nb.cells[-1].metadata["slideshow"] = {"slide_type": "fragment"}
    nb.cells[3].metadata["slideshow"] = {"slide_type": "fragment"}
    found = slide_problems(nb)
    assert any("section 2 does not open a slide" in p for p in found)
    assert any("a sub-slide of 62 lines" in p for p in found)  # 1 + 30 + 30 + the heading


# ------------------------------------------------------------------ a lecture long
SCREENS = 25  # slides + sub-slides: one lecture (course-design.md)
WORDS = 2800  # words of prose: "about 2,500", with room for a long formula's explanation
LINKS = 3  # sources a student can follow
CODE = 300  # lines of code a student sees: what is not the lesson lives in helpers
FIGURES = 3  # diagrams of what a student must picture, from notebook 07 on (the summit)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_notebook_is_one_lecture_with_its_sources(path):
    m = lecture_length.measure(str(path))
    assert m["screens"] <= SCREENS, f"{path.stem}: {m['screens']} screens (at most {SCREENS})"
    assert m["words"] <= WORDS, f"{path.stem}: {m['words']} words of prose (at most {WORDS})"
    assert m["links"] >= LINKS, f"{path.stem}: {m['links']} links (at least {LINKS})"
    assert not m["switches"], f"{path.stem}: functions with three or more boolean switches: {m['switches']}"
    assert m["code"] <= CODE, f"{path.stem}: {m['code']} lines of visible code (at most {CODE}): move plumbing to helpers"
    if path.stem >= "07":
        assert m["figures"] >= FIGURES, f"{path.stem}: {m['figures']} figures (at least {FIGURES} from notebook 07 on)"


def test_the_lecture_measure_counts_prose_screens_links_and_switches():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# Title\nSee [the guide](https://example.org/guide) and $x^2$."),
                nbformat.v4.new_markdown_cell("## 1. Step\n<details><summary>Solution</summary>\n```python\nx = 1\n```"),
                nbformat.v4.new_code_cell("def kernel(n, unroll=False, vector=False, pad=True):\n    return n")]
    slides.apply(nb)
    assert lecture_length.screens(nb) == 2
    assert lecture_length.words(nb) == 8  # Title, See, the, guide, and, 1., Step, Solution
    assert lecture_length.links(nb) == 1
    assert lecture_length.switches(nb) == ["kernel"]
    nb.cells += [nbformat.v4.new_markdown_cell("![a tiling](../images/t.png) and ![a timeline](../images/l.png)"),
                 nbformat.v4.new_code_cell("x = 1\n\ny = 2", metadata={"tags": ["remove-cell"]})]
    assert lecture_length.code_lines(nb) == 2  # the hidden cell is not read by the student
    assert lecture_length.figures(nb) == 2
