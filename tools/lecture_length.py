"""How long each notebook is as a lecture:  python tools/lecture_length.py notebooks/*.ipynb

A notebook is one lecture (course-design.md): at most 25 screens and about 2,500 words of prose.
This prints, per notebook, what that rule and the lessons issue measure:

- screens: slides plus sub-slides, as `tools/slides.py` lays them out;
- words: the prose a student reads (markdown, without code blocks, link targets, HTML tags and
  formulas);
- links: web links in the prose;
- code: lines of code a student sees (every code cell but the hidden Colab setup); a lecture
  holds at most 300, and what is not the lesson (tables, sweeps, plotting) lives in helpers;
- figures: diagrams the prose shows (`![...](...)` image links);
- setup: lines of code a student reads before the first number measured on a GPU (the first
  output saying "recorded on" or "live on");
- switches: functions with three or more boolean parameters (`x=False`/`x=True`), which hide the
  steps of a ladder behind flags instead of showing each as its change.

Plain nbformat and ast: no TVM, a second for the whole series.
"""

from __future__ import annotations

import ast
import re
import sys

import nbformat

MEASURED = re.compile(r"\[(recorded|live) on ")


def screens(nb) -> int:
    kinds = [c.metadata.get("slideshow", {}).get("slide_type") for c in nb.cells]
    return kinds.count("slide") + kinds.count("subslide")


def prose(nb) -> str:
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    text = re.sub(r"```.*?```", " ", text, flags=re.S)  # code blocks (solutions)
    text = re.sub(r"\$\$.*?\$\$|\$[^$\n]+\$", " ", text, flags=re.S)  # formulas
    text = re.sub(r"\]\([^)]*\)", "]", text)  # link targets, image paths
    text = re.sub(r"</?[A-Za-z][^<>\n]*>", " ", text)  # <details>, <summary>
    return text


def words(nb) -> int:
    return len(re.findall(r"[A-Za-z0-9][\w'.-]*", prose(nb)))


def links(nb) -> int:
    return sum(len(re.findall(r"\]\(https?://", c.source)) for c in nb.cells if c.cell_type == "markdown")


def code_lines(nb) -> int:
    return sum(len(c.source.splitlines()) for c in nb.cells
               if c.cell_type == "code" and "remove-cell" not in c.metadata.get("tags", []))


def figures(nb) -> int:
    return sum(len(re.findall(r"!\[[^\]]*\]\(", c.source)) for c in nb.cells if c.cell_type == "markdown")


def setup_lines(nb) -> int:
    lines = 0
    for cell in nb.cells:
        if cell.cell_type != "code" or "colab-setup" in cell.metadata.get("tags", []):
            continue
        lines += len(cell.source.splitlines())
        shown = "".join(out.get("text", "") + str(out.get("data", {}).get("text/plain", "")) for out in cell.get("outputs", []))
        if MEASURED.search(shown):
            return lines
    return lines


def switches(nb) -> list[str]:
    found = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef):
                args = node.args
                defaults = list(args.defaults) + [d for d in args.kw_defaults if d is not None]
                flags = [d for d in defaults if isinstance(d, ast.Constant) and isinstance(d.value, bool)]
                if len(flags) >= 3:
                    found.append(node.name)
    return found


def measure(path: str) -> dict:
    nb = nbformat.read(path, as_version=4)
    return {"screens": screens(nb), "words": words(nb), "links": links(nb), "code": code_lines(nb),
            "figures": figures(nb), "setup": setup_lines(nb),
            "switches": switches(nb)}


def main(paths: list[str]) -> None:
    print(f"{'notebook':40s} {'screens':>7s} {'words':>6s} {'links':>5s} {'code':>5s} {'figs':>4s} {'setup':>5s}  switches")
    for path in paths:
        m = measure(path)
        name = path.rsplit("/", 1)[-1].removesuffix(".ipynb")
        print(f"{name:40s} {m['screens']:7d} {m['words']:6d} {m['links']:5d} {m['code']:5d} {m['figures']:4d} {m['setup']:5d}  "
              f"{', '.join(m['switches']) or '-'}")


if __name__ == "__main__":
    main(sys.argv[1:])
