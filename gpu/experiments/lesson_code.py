"""Lesson code read out of the notebooks, for the studies that measure a notebook's own kernels and
schedules: code cells run as a module (`notebook_code`, `notebook_functions`, `notebook_template`)
and notebooks 07 and 08's Hopper kernels (`hopper_code`). One module, so that the tag-based loader
replacing these scrapers changes one place.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import sys
import tempfile
from pathlib import Path

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"

HEADER = "import numpy as np\nimport tvm\nfrom tvm import s_tir\nfrom tvm.script import tirx as T\nimport helpers\n\n"


def code_cells(notebook: str) -> list[str]:
    cells = json.loads((NOTEBOOKS / f"{notebook}.ipynb").read_text())["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]


def import_code(code: str, name: str):
    """`code` (after the imports notebooks use) as a module: TVMScript reads its functions' source
    back from a file, so the code is written to one first."""
    path = Path(tempfile.mkdtemp()) / f"{name}.py"
    path.write_text(HEADER + code + "\n")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def notebook_functions(notebook: str, names: set[str]):
    """A module holding the named top-level functions of the notebook's code cells, as it defines them."""
    chunks = []
    for src in code_cells(notebook):
        try:
            tree = ast.parse(src)
        except SyntaxError:  # a cell with IPython magic
            continue
        chunks += [ast.get_source_segment(src, node) for node in tree.body
                   if isinstance(node, ast.FunctionDef) and node.name in names]
    return import_code("\n\n\n".join(chunks), f"{notebook}_functions")


def notebook_code(notebook: str, *markers: str):
    """A module of the notebook's code cells that hold any of `markers` (e.g. "def hopper_matmul("),
    run together in notebook order: a kernel a notebook writes, for an experiment to measure."""
    found = [c for c in code_cells(notebook) if any(m in c for m in markers)]
    missing = [m for m in markers if not any(m in c for c in found)]
    if missing:
        raise LookupError(f"notebook {notebook} has no code cell holding {', '.join(map(repr, missing))}")
    return import_code("\n\n\n".join(found), f"{notebook}_code")


def notebook_template(name: str, edits: dict | None = None):
    """The schedule function `name` as notebook 06 defines it: the one code cell holding `def name(`,
    run with the cells defining the functions it calls (its steps sit in cells of their own).
    `edits` (old text: new text, each old text found exactly once) makes a variant."""
    cells = code_cells("06_metaschedule_tuning")
    found = [c for c in cells if f"def {name}(" in c]
    if len(found) != 1:
        raise LookupError(f"notebook 06 has {len(found)} code cells defining {name}: expected one")
    src = found[0]
    for old, new in (edits or {}).items():
        if src.count(old) != 1:
            raise ValueError(f"{name} in notebook 06 holds {old!r} {src.count(old)} times: expected once")
        src = src.replace(old, new)
    return getattr(import_code("\n\n\n".join(_cells_called_by(src, cells) + [src]), f"notebook06_{name}"), name)


def _cells_called_by(src: str, cells: list[str]) -> list[str]:
    """The cells (in notebook order) that define a function `src` calls, and those their functions call."""
    def defined(cell):
        try:
            return {n.name for n in ast.parse(cell).body if isinstance(n, ast.FunctionDef)}
        except SyntaxError:  # a cell with IPython magic
            return set()

    def called(code):
        return {n.func.id for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}

    wanted, todo, chosen = set(), called(src) - defined(src), []
    while todo:
        wanted |= todo
        new = [c for c in cells if c != src and c not in chosen and defined(c) & todo]
        chosen += new
        todo = set().union(*(called(c) for c in new)) - wanted if new else set()
    return [c for c in cells if c in chosen]


# The kernels and the designs compared are notebooks 07's and 08's: 07's cell of constants (VARIANTS:
# name -> block_n, stages, specialized), its ladder (wgmma_matmul, tma_copy, tma_matmul), its macros
# and `hopper_matmul`; 08's macros and `persistent_matmul`, run together as one module.
HOPPER_07 = ("BM, BK = ", "@T.macro", "def hopper_matmul(", "def tma_copy(", "def tma_matmul(")
HOPPER_08 = ("@T.macro", "def persistent_matmul(", "def cluster_matmul(")


def hopper_code(*more_08: str):
    """Notebook 07's kernel cells, then notebook 08's (those holding HOPPER_08 or `more_08`), as one module."""
    cells = [c for c in code_cells("07_hopper_wgmma_tma") if any(m in c for m in HOPPER_07)]
    cells += [c for c in code_cells("08_hopper_persistent_kernel") if any(m in c for m in HOPPER_08 + more_08)]
    return import_code("\n\n\n".join(cells), "hopper_code")
