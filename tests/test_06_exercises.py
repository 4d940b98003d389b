"""Notebook 06's exercises that write code, run with their published solutions (they must say right)
and with plausible wrong answers (they must not), on the CPU: see tests/test_exercises.py. Exercise 2
writes a design space; exercise 3 reads the tuned trace and writes its tiling as a schedule, checked
against the tuned kernel's loops (and, where a GPU runs, against NumPy)."""

import pytest
import tvm

import helpers
from test_exercises import _one, run_exercise, solution

NB06 = "06_metaschedule_tuning"
CONTEXT = ["helpers.start("]
MARKER = "space = None  # your template"

SPACE = solution(NB06, "Write a design space")
SAMPLE_I, SAMPLE_J = (f"sch.sample_perfect_tile({loop}, n=2, max_innermost_factor=16)" for loop in "ij")
FIXED = SPACE.replace(SAMPLE_I, "[None, 8]").replace(SAMPLE_J, "[None, 8]")
SPACE_WRONG = {
    "no sample at all": FIXED,
    "samples drawn, the loops still split by 8": FIXED.replace("    i0, i1", f"    {SAMPLE_I}\n    {SAMPLE_J}\n    i0, i1"),
    "k left outside the tiles' inner loops": SPACE.replace("    sch.reorder(i0, j0, k, i1, j1)\n", ""),
    "j still fixed": SPACE.replace(SAMPLE_J, "[None, 8]"),
}


@pytest.mark.parametrize("wrong", [None, *SPACE_WRONG], ids=lambda w: w or "solution")
def test_06_write_a_design_space(tmp_path, capsys, wrong):
    answer = SPACE_WRONG[wrong] if wrong else SPACE
    assert wrong is None or answer != SPACE, "a wrong answer that is the solution: the notebook's text moved"
    out = run_exercise(tmp_path, capsys, NB06, CONTEXT, MARKER, answer)
    ok = wrong is None
    assert out.startswith("correct") == ok and ("not right" in out) != ok, out


def test_06_design_space_blank_answer_says_so(tmp_path, capsys):
    out = run_exercise(tmp_path, capsys, NB06, CONTEXT, MARKER, "space = None")
    assert out.strip() == "Exercise 2: not answered yet"


# ------------------------------------------------------------------ 3: from the tuned trace back to a schedule

CONTEXT3 = ["helpers.start(", "fp32 = helpers.matmul_workload(", "def committed(", "data = tuning_lesson.Inputs("]
MARKER3 = "tuned_tiling = None  # your step"
REPLAY = "best32 = helpers.replay(db32, fp32)"
TILING = solution(NB06, "From a trace back to a schedule")
TILING_WRONG = {
    "i and j factors swapped": TILING.replace("[128, 8, 4, 1, 1]", "[16, 4, 16, 4, 1]", 1)
                                     .replace("sch.split(j, [16, 4, 16, 4, 1])", "sch.split(j, [128, 8, 4, 1, 1])"),
    "k levels reversed": TILING.replace("[512, 2, 4]", "[4, 2, 512]"),
    "k outside the tiles": TILING.replace("i2, j2, k0, k1, i3, j3, k2, i4, j4", "i2, j2, i3, j3, i4, j4, k0, k1, k2"),
    "threads and virtual threads swapped": TILING.replace('sch.bind(sch.fuse(i1, j1), "vthread.x")',
                                                          'sch.bind(sch.fuse(i1, j1), "threadIdx.x")')
                                                 .replace('sch.bind(threads, "threadIdx.x")', 'sch.bind(threads, "vthread.x")'),
    "sums in global memory": TILING.replace('    sch.reverse_compute_at(sch.cache_write(blk, 0, "local"), threads)\n', ""),
    "copied out per virtual thread": TILING.replace('sch.bind(sch.fuse(i1, j1), "vthread.x")',
                                                    'virtual = sch.fuse(i1, j1)\n    sch.bind(virtual, "vthread.x")')
                                           .replace('"local"), threads)', '"local"), virtual)'),
}


@pytest.fixture(scope="module")
def database06():
    path = helpers.database_dir("matmul_fp32_4096")
    assert path.is_dir(), f"no committed fp32 database at {path}: exercise 3 of notebook 06 cannot be checked"
    return path


@pytest.mark.parametrize("wrong", [None, *TILING_WRONG], ids=lambda w: w or "solution")
def test_06_tuned_tiling(tmp_path, capsys, database06, wrong):
    """Checked on the CPU (the loops against the tuned kernel's, the build); where a GPU runs, the
    solution's kernel is also checked against NumPy by the cell itself."""
    answer = TILING_WRONG[wrong] if wrong else TILING
    assert wrong is None or answer != TILING, "a wrong answer that is the solution: the notebook's text moved"
    try:
        out = run_exercise(tmp_path, capsys, NB06, CONTEXT3, MARKER3, answer, extra=REPLAY)
    except tvm.error.TVMError as err:  # a schedule TVM itself refuses is wrong too
        out = f"refused by TVM: {str(err).splitlines()[0]}"
    assert ("Exercise 3: right" in out) == (wrong is None), out


def test_06_tuned_tiling_blank_answer_says_so(tmp_path, capsys):
    blank = _one(NB06, MARKER3).split("\n\n")[0]
    out = run_exercise(tmp_path, capsys, NB06, CONTEXT3, MARKER3, blank, extra="best32 = None")
    assert out.strip() == "Exercise 3: not attempted yet"
