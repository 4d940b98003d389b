"""Every checked exercise, run with its published solution (it must say right) and with plausible
wrong answers (they must not), on the CPU.

nbval runs the exercise cells with their blank answers only, so without these tests a check that
accepts anything would pass CI. Each test takes the definitions the exercise needs from the
notebook's own code cells (found by what they hold), then runs the exercise cell as committed with
its answer lines (everything before the cell's first blank line) replaced by an answer.
"""

import ast
import json
import re
import runpy
import textwrap
from pathlib import Path

import pytest

import helpers

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def _cells(notebook, kind="code"):
    cells = json.loads((NOTEBOOKS / f"{notebook}.ipynb").read_text())["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == kind]


def _one(notebook, marker, kind="code"):
    found = [c for c in _cells(notebook, kind) if marker in c]
    assert len(found) == 1, f"{notebook} has {len(found)} {kind} cells holding {marker!r}: expected one"
    return found[0]


def _definitions(source):
    """A cell's imports, functions, classes and plain assignments: what later cells use, without its
    prints, measurements (`nb.measure`, ...) or branches."""
    keep, lines = [], source.splitlines()
    for node in ast.parse(source).body:
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        text = "\n".join(lines[first - 1:node.end_lineno])
        if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef)):
            keep.append(text)
        elif isinstance(node, ast.Assign) and "nb." not in text:
            keep.append(text)
    return "\n\n\n".join(keep)


def solution(notebook, exercise_marker):
    """The python block of the first Solution after `exercise_marker` in the notebook's markdown."""
    text = "\n".join(_cells(notebook, "markdown"))
    text = text[text.index("<summary>Solution</summary>", text.index(exercise_marker)):]
    return re.search(r"```python\n(.*?)```", text, flags=re.S).group(1)


def run_cell(tmp_path, capsys, setup, cell, answer):
    """Run the exercise `cell` with `answer` as its answer lines after `setup` (source, or the
    namespace it made: a lesson's exports); return what it printed, or 'AssertionError: ...' if a
    check failed."""
    check = cell[cell.index("\n\n"):]  # the answer lines end at the first blank line
    code = tmp_path / "exercise.py"  # files, so TVMScript can read the classes' source
    code.write_text(textwrap.dedent(answer) + "\n\n" + check)
    if isinstance(setup, str):
        context = tmp_path / "context.py"
        context.write_text(setup)
        namespace = runpy.run_path(str(context))
    else:
        namespace = dict(setup)
    capsys.readouterr()
    try:
        runpy.run_path(str(code), init_globals=namespace)
    except AssertionError as err:
        return f"AssertionError: {err}"
    return capsys.readouterr().out


def run_exercise(tmp_path, capsys, notebook, context, exercise, answer, extra=""):
    """Run `exercise` (a marker of its code cell) after the lesson's exported cells and the definitions of the `context` cells, with
    `answer` as its answer lines; return what it printed, or 'AssertionError: ...' if a check failed."""
    setup = "\n\n\n".join(helpers.lessons.exported_cells(notebook) + [_definitions(_one(notebook, m)) for m in context]
                         + [extra])
    return run_cell(tmp_path, capsys, setup, _one(notebook, exercise), answer)


def right(out, exercise):
    return f"{exercise}: right" in out or out.startswith("correct")


# ------------------------------------------------------------------ 01: count the blocks, schedule the copy

NB01 = "01_vector_add"
CONTEXT01 = ["helpers.start(", "class VecAdd", "class Copy", "sch_vec = s_tir.Schedule(VecAdd)"]


@pytest.mark.parametrize("answer, ok", [("my_blocks = 2**24 // (256 * 4)", True), ("my_blocks = 2**24 // 256", False),
                                        ("my_blocks = 2**24 // 4", False)])
def test_01_count_the_blocks(tmp_path, capsys, answer, ok):
    out = run_exercise(tmp_path, capsys, NB01, CONTEXT01, "Exercise 1: not answered yet", answer)
    assert right(out, "Exercise 1") == ok, out


COPY = solution(NB01, "Schedule the copy yourself")
COPY_WRONG = {
    "two floats per thread, not vectorized": COPY.replace("my_copy.vectorize(i2)\n", ""),
    "the vector add, not the copy": COPY.replace("Copy", "VecAdd").replace('"B"', '"C"'),
    "a float4 per thread": COPY.replace("128, 2]", "128, 4]"),
    "256 threads per block": COPY.replace("128, 2]", "256, 2]"),
}


# ------------------------------------------------------------------ 02: shared bytes, a wider window

NB02 = "02_window_sum"
CONTEXT02 = ["helpers.start(", "class WindowSum", "def shared_schedule("]
WINDOW5 = solution(NB02, "A wider window")


@pytest.mark.parametrize("answer, ok", [("my_bytes = 4 * (512 * 4 + 2)", True), ("my_bytes = 512 * 4 + 2", False),
                                        ("my_bytes = 4 * 512 * 4", False)])
def test_02_shared_bytes(tmp_path, capsys, answer, ok):
    out = run_exercise(tmp_path, capsys, NB02, CONTEXT02, "Exercise 1: not answered yet", answer)
    assert right(out, "Exercise 1") == ok, out


WINDOW5_WRONG = {
    "two of the five points": WINDOW5.replace("A[vi] + A[vi + 1] + A[vi + 2] + A[vi + 3] + A[vi + 4]", "A[vi] + A[vi + 4]"),
    "another tile size": WINDOW5.replace("256, 4)", "256, 2)"),
    "the 3-point module scheduled": WINDOW5.replace("my_sch = shared_schedule(WindowSum5", "my_sch = shared_schedule(WindowSum"),
}


SCHEDULES = {  # the exercises that ask for a schedule: (notebook, context, cell marker, exercise, solution, wrong answers)
    "01 copy": (NB01, CONTEXT01, "Exercise 2: not attempted yet", "Exercise 2", COPY, COPY_WRONG),
    "02 window": (NB02, CONTEXT02, "Exercise 2: not attempted yet", "Exercise 2", WINDOW5, WINDOW5_WRONG),
}


@pytest.mark.parametrize("case, answer", [(case, None) for case in SCHEDULES]
                         + [(case, wrong) for case, spec in SCHEDULES.items() for wrong in spec[-1]],
                         ids=lambda x: x or "solution")
def test_schedule_exercises(tmp_path, capsys, case, answer):
    notebook, context, marker, exercise, published, wrong = SCHEDULES[case]
    assert answer is None or wrong[answer] != published, "a wrong answer that is the solution: the notebook's text moved"
    out = run_exercise(tmp_path, capsys, notebook, context, marker, wrong[answer] if answer else published)
    assert right(out, exercise) == (answer is None), out


# ------------------------------------------------------------------ 04: conflict degree, shared bytes

NB04 = "04_matmul_shared_blocking"
CONTEXT04 = ["helpers.start(", "def conflict_degree("]


@pytest.mark.parametrize("answer, ok", [
    (solution(NB04, "What is the conflict degree"), True),
    ("answer_unpadded, answer_padded = 8, 1", False),  # padding as if it spread one row's reads
    ("answer_unpadded, answer_padded = 16, 16", False),
    ("answer_unpadded, answer_padded = 2, 2", False),
])
def test_04_conflict_degree(tmp_path, capsys, answer, ok):
    out = run_exercise(tmp_path, capsys, NB04, CONTEXT04, "answer_unpadded = ...", answer)
    assert out.startswith("correct") == ok and "not answered" not in out, out


SHARED_WRONG = {
    "ignores bn": "def shared_bytes(bm, bn, tk, stages=1):\n    return 4 * (bm * tk + tk * bm) * stages\n",
    "ignores bm": "def shared_bytes(bm, bn, tk, stages=1):\n    return 4 * 2 * tk * bn * stages\n",
    "ignores the stages": "def shared_bytes(bm, bn, tk, stages=1):\n    return 4 * (bm * tk + tk * bn)\n",
    "floats, not bytes": "def shared_bytes(bm, bn, tk, stages=1):\n    return (bm * tk + tk * bn) * stages\n",
}


@pytest.mark.parametrize("answer", [solution(NB04, "Shared memory per block"), *SHARED_WRONG.values()],
                         ids=["solution", *SHARED_WRONG])
def test_04_shared_bytes(tmp_path, capsys, monkeypatch, answer):
    monkeypatch.setattr(helpers, "nvcc_path", lambda: None)  # the ptxas report below the check needs a GPU build
    out = run_exercise(tmp_path, capsys, NB04, CONTEXT04, "def shared_bytes(", answer)
    assert (out.strip() == "correct") == (answer == solution(NB04, "Shared memory per block")), out


@pytest.mark.parametrize("marker, unanswered", [("answer_unpadded = ...", "Exercise 1: not answered yet"),
                                                ("def shared_bytes(", "Exercise 2: not answered yet")])
def test_04_blank_answers_say_so(tmp_path, capsys, monkeypatch, marker, unanswered):
    monkeypatch.setattr(helpers, "nvcc_path", lambda: None)
    blank = _one(NB04, marker).split("\n\n")[0]
    assert run_exercise(tmp_path, capsys, NB04, CONTEXT04, marker, blank).strip() == unanswered


# ------------------------------------------------------------------ 06: threads of the tuned kernel (its design-space
# exercise: tests/test_06_exercises.py)

NB06 = "06_metaschedule_tuning"
CONTEXT06 = ["helpers.start(", "fp32 = helpers.matmul_workload(", "def committed("]
REPLAY = "best32 = helpers.replay(db32, fp32)"


@pytest.fixture(scope="module")
def database06():
    path = helpers.database_dir("matmul_fp32_4096")
    assert path.is_dir(), f"no committed fp32 database at {path}: the exercises of notebook 06 cannot be checked"
    return path


@pytest.mark.parametrize("answer, ok", [
    (solution(NB06, "how many threads does each block"), True),
    ("tiles = [d for inst, d in best32.trace.decisions.items() if inst.kind.name == 'SamplePerfectTile']\n"
     "threads = tiles[0][1] * tiles[1][1]", False),  # the vthread factors, not threadIdx
    ("threads = 1024", False),
])
def test_06_threads_per_block(tmp_path, capsys, database06, answer, ok):
    out = run_exercise(tmp_path, capsys, NB06, CONTEXT06, "threads = None  # your answer", answer, extra=REPLAY)
    assert out.startswith("correct") == ok and ("not right" in out) != ok, out


@pytest.mark.parametrize("marker, unanswered", [("threads = None  # your answer", "Exercise 1: not answered yet")])
def test_06_blank_answers_say_so(tmp_path, capsys, marker, unanswered):
    blank = _one(NB06, marker).split("\n\n")[0]
    out = run_exercise(tmp_path, capsys, NB06, CONTEXT06, marker, blank, extra="best32 = None")
    assert out.strip() == unanswered
