"""Colab: the "Open in Colab" badge and the setup cell of every notebook, and the install that cell runs.

A notebook opened in Colab from GitHub runs in a fresh runtime that holds nothing of this
repository. Its first code cell (the *setup cell*) therefore fetches the repository (a shallow
clone), installs what Colab lacks (`requirements-colab.txt`, never changing a package Colab has),
puts `helpers` on the path and moves into `notebooks/`, so the notebook's relative paths hold; on
any other machine it only checks that the course is there (a notebook downloaded alone stops there, with
one line on how to get the course, instead of a bare ModuleNotFoundError at `import helpers`). Running
it again, or in a second notebook of the same runtime, reuses what is there.

Badges and setup cells are generated from one setting, the repository's URL in pyproject.toml
(`[tool.course] repository`):

    python -m tools.colab            # write badges and setup cells into the notebooks and README
    python -m tools.colab --check    # exit 1 and say what differs (what tests/test_colab.py asserts)

The setup cell runs this file as a script (`python tools/colab.py install`) before TVM is
installed, so it imports nothing but the standard library at module level.
"""

from __future__ import annotations

import argparse
import copy
import re
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
SETUP_TAG = "colab-setup"  # the cell tag that marks the setup cell
#: The tag myst-nb (the course's book, docs/conf.py) reads to leave a cell out of the page: a reader of the book
#: runs nothing, so the setup cell is not shown there.
HIDDEN_TAG = "remove-cell"
BADGE_IMAGE = "https://colab.research.google.com/assets/colab-badge.svg"
NO_BADGE = ("*Open in Colab: not yet. The course has no public repository yet, so Colab cannot fetch it; "
            "run it on your machine as the README says.*")

SETUP_CELL = '''\
# Sets this notebook up on Colab: fetches the course, installs what Colab lacks, moves into notebooks/.
# Elsewhere it checks that the rest of the course is there. (Written by `python -m tools.colab`.)
import importlib.util, os, subprocess, sys, time
REPOSITORY = {repository!r}
try:
    import google.colab  # Colab's own package, found on Colab alone
except ImportError:
    if importlib.util.find_spec("helpers") is None:  # a notebook alone, without the course around it
        class NotInTheCourse(Exception):
            def _render_traceback_(self):  # Jupyter shows this one line instead of a traceback
                return [f"NotInTheCourse: {{self}}"]
        raise NotInTheCourse("This notebook is one lesson of a course and needs the rest of it: "
                             + (f"git clone {{REPOSITORY}}" if REPOSITORY else "get a copy of the course")
                             + ", run pip install -r requirements.txt in it, open the notebook from its notebooks/.")
    print("Not on Colab: nothing to set up.")
else:
    if REPOSITORY is None:
        raise RuntimeError("This copy of the course names no repository to fetch (it is not published yet): "
                           "run it on your own machine, as the README says.")
    started = time.time()
    root = os.environ.setdefault("COURSE_ROOT", os.path.abspath(REPOSITORY.rstrip("/").split("/")[-1]))
    fetched = not os.path.isdir(root)
    if fetched:
        subprocess.run(["git", "clone", "--quiet", "--depth", "1", REPOSITORY, root], check=True)
    install = subprocess.run([sys.executable, f"{{root}}/tools/colab.py", "install"],
                             capture_output=True, text=True)
    if install.returncode:
        raise RuntimeError(install.stdout + install.stderr)
    if root not in sys.path:
        sys.path.insert(0, root)
    os.chdir(f"{{root}}/notebooks")
    print(f"Colab: {{'fetched' if fetched else 'reused'}} {{root}}; {{install.stdout.strip()}}; "
          f"{{time.time() - started:.0f}} s")'''


# ---------------------------------------------------------------- the setting


def repository(pyproject: Path = ROOT / "pyproject.toml") -> str | None:
    """The repository's URL from pyproject.toml's `[tool.course] repository`, or None while empty."""
    import tomllib

    course = tomllib.loads(pyproject.read_text()).get("tool", {}).get("course", {})
    url = course.get("repository", "").strip()
    return url or None


def colab_url(repository: str | None, notebook: str, branch: str = "main") -> str | None:
    """The link that opens `notebook` (e.g. "01_vector_add") in Colab; None without a GitHub repository
    (Colab opens notebooks from GitHub, not from any git URL)."""
    match = re.fullmatch(r"https://github\.com/([\w.-]+)/([\w.-]+?)(?:\.git)?/?", repository or "")
    if not match:
        return None
    owner, name = match.groups()
    return f"https://colab.research.google.com/github/{owner}/{name}/blob/{branch}/notebooks/{notebook}.ipynb"


def badge(repository: str | None, notebook: str) -> str:
    """The markdown of a notebook's badge (or, without a GitHub repository, the line that says why none)."""
    url = colab_url(repository, notebook)
    return f"[![Open In Colab]({BADGE_IMAGE})]({url})" if url else NO_BADGE


def setup_source(repository: str | None) -> str:
    return SETUP_CELL.format(repository=repository)


# ---------------------------------------------------------------- writing and checking notebooks


def _is_badge_line(line: str) -> bool:
    return line.startswith(f"[![Open In Colab]({BADGE_IMAGE})]") or line == NO_BADGE


def with_badge(title_markdown: str, line: str) -> str:
    """The first markdown cell with `line` as its badge: right under the title, replacing an old badge."""
    title, *rest = [x for x in title_markdown.split("\n") if not _is_badge_line(x)]
    body = "\n".join(rest).lstrip("\n")
    return f"{title}\n\n{line}\n\n{body}" if body else f"{title}\n\n{line}"


def setup_cells(nb) -> list:
    """The cells of `nb` tagged as its setup cell (one, once generated)."""
    return [c for c in nb["cells"] if SETUP_TAG in c.get("metadata", {}).get("tags", [])]


def _setup_cell():
    import nbformat

    return nbformat.v4.new_code_cell(metadata={"slideshow": {"slide_type": "skip"}, "tags": [SETUP_TAG, HIDDEN_TAG]})


def apply(nb: dict, name: str, repository: str | None) -> dict:
    """`nb` (a notebook as JSON) with its badge and setup cell made from `repository`. The setup cell is
    the first code cell, tagged `colab-setup` and `remove-cell` (left out of the book), stored without output."""
    cells = nb["cells"]
    first = cells[0]
    assert first["cell_type"] == "markdown", f"{name}: the first cell must be the title (markdown)"
    first["source"] = with_badge("".join(first["source"]), badge(repository, name))
    old = setup_cells(nb)
    cell = old[0] if old else _setup_cell()
    if not old:
        cells.insert(next(i for i, c in enumerate(cells) if c["cell_type"] == "code"), cell)
    cell["id"] = SETUP_TAG  # a fixed id: regenerating, or merging two branches, finds the same cell
    tags = cell.setdefault("metadata", {}).setdefault("tags", [])
    tags += [t for t in (SETUP_TAG, HIDDEN_TAG) if t not in tags]
    cell["source"] = setup_source(repository)
    cell["outputs"], cell["execution_count"] = [], None  # stored unrun: what it prints depends on the machine
    return nb


def _read(path: Path):
    import nbformat

    return nbformat.read(path, as_version=4)


def _write(path: Path, nb) -> None:
    import nbformat

    nbformat.write(nb, path)


def readme_with_badges(text: str, repository: str | None) -> str:
    """README.md with a badge after each notebook's link in its table (none without a GitHub repository)."""
    def row(match):
        name = match.group(1)
        url = colab_url(repository, name)
        return f"| [{name}](notebooks/{name}.ipynb)" + (f" [![Open In Colab]({BADGE_IMAGE})]({url})" if url else "") + " |"

    return re.sub(r"^\| \[(\d\d_\w+)\]\(notebooks/\1\.ipynb\)(?: \[!\[Open In Colab\]\([^)]*\)\]\([^)]*\))? \|",
                  row, text, flags=re.M)


def generate(repository: str | None, notebooks: list[Path], readme: Path | None = ROOT / "README.md") -> list[Path]:
    """Write badges and setup cells; returns the files that changed."""
    changed = []
    for path in notebooks:
        before = path.read_text()
        _write(path, apply(_read(path), path.stem, repository))
        if path.read_text() != before:
            changed.append(path)
    if readme is not None:
        text = readme.read_text()
        new = readme_with_badges(text, repository)
        if new != text:
            readme.write_text(new)
            changed.append(readme)
    return changed


def problems(repository: str | None, notebooks: list[Path], readme: Path | None = ROOT / "README.md") -> list[str]:
    """What differs from what `generate` would write, one line per file."""
    found = []
    for path in notebooks:
        nb = _read(path)
        expected = apply(copy.deepcopy(nb), path.stem, repository)
        if "".join(nb["cells"][0]["source"]) != expected["cells"][0]["source"]:
            found.append(f"{path.name}: its badge line is not `{badge(repository, path.stem)}`")
        setup = setup_cells(nb)
        first_code = next(c for c in nb["cells"] if c["cell_type"] == "code")
        if not setup:
            found.append(f"{path.name}: no setup cell (a code cell tagged {SETUP_TAG!r})")
        elif setup[0] is not first_code:
            found.append(f"{path.name}: the setup cell is not the first code cell")
        elif "".join(setup[0]["source"]) != setup_source(repository):
            found.append(f"{path.name}: its setup cell differs from the one made for REPOSITORY = {repository!r}")
        elif HIDDEN_TAG not in setup[0].get("metadata", {}).get("tags", []):
            found.append(f"{path.name}: its setup cell is not tagged {HIDDEN_TAG!r}, so the book would show it")
    if readme is not None and readme_with_badges(readme.read_text(), repository) != readme.read_text():
        found.append(f"{readme.name}: the notebook table's badges differ from those made for {repository!r}")
    return found


# ---------------------------------------------------------------- the install on Colab


def requirements(path: Path = ROOT / "requirements-colab.txt") -> list[str]:
    return [line.split("#")[0].strip() for line in path.read_text().splitlines() if line.split("#")[0].strip()]


def _name(requirement: str) -> str:
    return re.split(r"[=<>!~ \[]", requirement, maxsplit=1)[0]


def missing(reqs: list[str]) -> list[str]:
    """The requirements this environment does not meet (not installed, or another version than pinned)."""
    lacking = []
    for req in reqs:
        name, _, pin = req.partition("==")
        try:
            have = metadata.version(name)
        except metadata.PackageNotFoundError:
            lacking.append(req)
            continue
        if pin and have != pin:
            lacking.append(req)
    return lacking


def installed_constraints() -> str:
    """Every installed distribution pinned at its version: given to pip as constraints, it lets pip add
    packages but never upgrade, downgrade or replace one that is there."""
    pins = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            pins[re.sub(r"[-_.]+", "-", name).lower()] = dist.version
    return "".join(f"{name}=={version}\n" for name, version in sorted(pins.items()))


def install(reqs: list[str] | None = None) -> str:
    """Install what this runtime lacks of `requirements-colab.txt`, changing nothing it has; one line on what."""
    import tempfile

    lacking = missing(requirements() if reqs is None else reqs)
    if not lacking:
        return "packages already there"
    started = time.time()
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as constraints:
        constraints.write(installed_constraints())
        constraints.flush()
        pip = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                              "-c", constraints.name, *lacking], capture_output=True, text=True)
    if pip.returncode:
        raise RuntimeError(f"pip could not install {' '.join(lacking)} without changing a package this runtime "
                           f"already has:\n{pip.stderr.strip()}")
    return f"installed {', '.join(_name(r) for r in lacking)} in {time.time() - started:.0f} s"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.colab", description=__doc__.split("\n\n")[0])
    ap.add_argument("command", nargs="?", choices=["generate", "install"], default="generate",
                    help="generate (default): write badges and setup cells; install: what the setup cell runs")
    ap.add_argument("--check", action="store_true", help="only say what differs from what generate writes")
    ap.add_argument("--repository", help="use this URL instead of pyproject.toml's (e.g. a fork, or a local clone)")
    ap.add_argument("notebooks", nargs="*", type=Path, help="default: notebooks/*.ipynb")
    args = ap.parse_args(argv)
    if args.command == "install":
        try:
            print(install())
        except RuntimeError as err:
            print(err)
            return 1
        return 0
    url = args.repository or repository()
    notebooks = args.notebooks or sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    readme = None if args.notebooks else ROOT / "README.md"
    if url is None:
        print("No repository URL is set ([tool.course] repository in pyproject.toml is empty): the notebooks "
              "say the course is not published yet instead of showing a badge, and their setup cells stop on "
              "Colab with that message.")
    if args.check:
        found = problems(url, notebooks, readme)
        print("\n".join(found) if found else f"badges and setup cells match {url!r}")
        return 1 if found else 0
    changed = generate(url, notebooks, readme)
    print(f"wrote {len(changed)} file(s): {', '.join(p.name for p in changed)}" if changed else "nothing to change")
    return 0


if __name__ == "__main__":
    sys.exit(main())
