"""One way for a notebook, a test or a study to build on an earlier lesson's code: import it.

A lesson marks the cells others may build on with the cell tag `export`: its imports, constants,
functions, macros and kernels, never a measurement. Those cells, in order, are the module
`helpers.lessons.<topic>` (the notebook's name without its number), so a later notebook says in one
ordinary line what it takes:

    from helpers.lessons.hopper_wgmma_tma import BM, BK, load_stage, hopper_matmul

Nothing matches text in cells: the tag is the contract, so a comment edited in one lesson cannot
break another, and `tests/test_lessons.py` imports every lesson's exports on their own.

A step of a lesson is the last step's code plus a change; `source_diff` shows that change, as
`helpers.tir_diff` shows a schedule step's change to the TensorIR.
"""

import importlib
import importlib.abc
import importlib.util
import inspect
import json
import re
import sys
import tempfile
import types
from pathlib import Path

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
#: the cell tag of the cells a lesson exports
EXPORT = "export"
__path__ = []  # a package of modules made from notebooks, found by _LessonFinder below


def notebook_of(topic: str) -> str:
    """The notebook whose name is `topic` after its number ("flash_attention" -> "10_flash_attention")."""
    found = [p.stem for p in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")) if p.stem.split("_", 1)[1] == topic]
    if not found:
        topics = ", ".join(p.stem.split("_", 1)[1] for p in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")))
        raise ModuleNotFoundError(f"no lesson named {topic!r}: the lessons are {topics}", name=f"{__name__}.{topic}")
    return found[0]


def exported_cells(notebook: str) -> list[str]:
    """The source of the notebook's code cells tagged `export`, in notebook order."""
    path = NOTEBOOKS / f"{notebook}.ipynb"
    if not isinstance(notebook, str) or not path.is_file():
        raise ValueError(f"no notebook named {notebook!r} (without .ipynb) in {NOTEBOOKS.name}/")
    cells = json.loads(path.read_text())["cells"]
    return ["".join(c["source"]) for c in cells
            if c["cell_type"] == "code" and EXPORT in c.get("metadata", {}).get("tags", [])]


class _LessonFinder(importlib.abc.MetaPathFinder):
    """Finds `helpers.lessons.<topic>`: the lesson's exported cells, written to a file and imported from
    it (TVMScript reads a kernel's source back from its module's file)."""

    def find_spec(self, fullname, path=None, target=None):
        package, _, topic = fullname.rpartition(".")
        if package != __name__:
            return None
        notebook = notebook_of(topic)
        cells = exported_cells(notebook)
        if not cells:
            raise ImportError(f"{notebook} exports no code: tag the cells other lessons build on {EXPORT!r}",
                              name=fullname)
        file = Path(tempfile.mkdtemp(prefix="lesson-")) / f"{notebook}.py"
        file.write_text(f"# the cells of notebooks/{notebook}.ipynb tagged {EXPORT!r}\n" + "\n\n\n".join(cells) + "\n")
        return importlib.util.spec_from_file_location(fullname, file)


if not any(isinstance(f, _LessonFinder) for f in sys.meta_path):
    sys.meta_path.append(_LessonFinder())


def lesson(notebook: str) -> types.ModuleType:
    """The module of a notebook's exports, by the notebook's full name ("07_hopper_wgmma_tma"): for a
    test or a study that walks the lessons by name."""
    exported_cells(notebook)  # refuse a name that is no notebook, by name
    return importlib.import_module(f"{__name__}.{notebook.split('_', 1)[1]}")


def source_of(fn) -> str:
    """The Python source of a function or of a TIRx macro, as written (a macro's decorator returns a
    wrapper that keeps the macro, with its source, in its closure): what a lesson's diff of two
    steps compares."""
    for cell in getattr(fn, "__closure__", None) or ():
        source = getattr(getattr(cell.cell_contents, "source", None), "source", None)
        if isinstance(source, str):
            return source
    return inspect.getsource(fn)


def source_diff(before, after, context: int = 0, lines: int = 40) -> str:
    """What one step changed in a kernel's code, shown as `tir_diff` shows TensorIR: the lines of `before`'s
    source that `after` removed (`-`) and added (`+`), a run of unchanged lines as `# ... (n lines)`. Each
    of the two is a function, a TIRx macro or a list of them (their sources one after the other).
    Docstrings, comment lines and blank lines are left out: they describe a step, they are not its change;
    so are the counts of unchanged lines before the first change and after the last."""
    from .kernels import fit_listing, line_diff  # kernels loads TVM: only when a diff is asked for

    shown = line_diff(_code_of(before), _code_of(after), context, 10**9, "#").splitlines()
    ends = [i for i in (0, len(shown) - 1) if _SKIPPED.fullmatch(shown[i])]
    return fit_listing("\n".join(row for i, row in enumerate(shown) if i not in ends), lines, comment="#")


_SKIPPED = re.compile(r"\s*# \.\.\. \(\d+ lines?\)")


def _code_of(fns) -> str:
    text = "\n".join(source_of(f) for f in (fns if isinstance(fns, (list, tuple)) else [fns]))
    text = re.sub(r'[ \t]*"""(.|\n)*?"""[ \t]*\n', "", text)
    return "\n".join(line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#"))
