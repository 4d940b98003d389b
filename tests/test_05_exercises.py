"""Notebook 05's schedule exercises, run with their published solutions and with wrong answers:
exercise 3 (the final kernel of section 11 on a 128 x 128 block tile of 2 x 2 warps) and exercise 4
(the student's own padding of the shared rows, read back from the CUDA's load_matrix_sync strides).
The schedules are built and read on the CPU; on a GPU with tensor cores exercise 4 also checks the
product against NumPy. See tests/test_exercises.py for how `run_exercise` works."""

import pytest

from test_exercises import _one, right, run_exercise, solution

NB05 = "05_tensor_core_tensorization"
CONTEXT05 = ["nb = helpers.start(", "def matmul_module", "def frag_index", "def wmma_sync_desc", "OURS = dict(", "def blockized", "def warp_tiled", "def staged", "def fragmented",
             "def tensorized", "def library", "def padded", "def pipelined", "def double_fragments"]
EXTRA05 = "K64 = dict(TILE, k_tile=4)\nASYNC = True  # as on a GPU with cp.async"
EX05_3 = "tiles_2x2 = ..."


def run05(tmp_path, capsys, answer):
    return run_exercise(tmp_path, capsys, NB05, CONTEXT05, EX05_3, answer, extra=EXTRA05)


def test_05_warp_layout_solution(tmp_path, capsys):
    out = run05(tmp_path, capsys, solution(NB05, "**3.**"))
    assert right(out, "3"), out
    assert "108 KB" in out, out


@pytest.mark.parametrize("answer", [
    # the final kernel as section 11 built it: 2 x 4 warps
    'tiles_2x2 = K64\nsch_2x2 = early_fragments(M, N, K, tiles_2x2, scope="shared.dyn")',
    # 2 x 2 warps of 2 x 2 fragments: a 64 x 64 block tile
    'tiles_2x2 = dict(K64, warps=(2, 2), frags=(2, 2))\nsch_2x2 = early_fragments(M, N, K, tiles_2x2, scope="shared.dyn")',
    # the k tile of section 10.1 (32)
    'tiles_2x2 = dict(TILE, warps=(2, 2))\nsch_2x2 = early_fragments(M, N, K, tiles_2x2)',
    # the right tiles without the early fragment loads
    'tiles_2x2 = dict(K64, warps=(2, 2))\nsch_2x2 = double_fragments(M, N, K, tiles_2x2, scope="shared.dyn")',
    # not a schedule at all
    'tiles_2x2 = dict(K64, warps=(2, 2))\nsch_2x2 = None',
])
def test_05_warp_layout_wrong_answers(tmp_path, capsys, answer):
    out = run05(tmp_path, capsys, answer)
    assert not right(out, "3"), out
    assert out.startswith("not yet"), out


EX05_4 = "def my_padded("
PAD = solution(NB05, "**4.**")
EXTRA05_4 = EXTRA05 + "\nRUN = nb.live and TENSOR_CORES"
PAD_WRONG = {
    "an offset of 16: 10 units of 16 bytes, rows 0 and 4 share banks": PAD.replace("offset=8", "offset=16"),
    "only A padded": PAD.replace('for operand in "AB"', 'for operand in "A"'),
    "rows not padded": PAD.replace("offset=8", "offset=0"),
    "not tensorized": PAD.replace("tensorized(M, N, K, tiles, library(scope), scope=scope)", "staged(M, N, K, tiles, scope=scope)"),
    "no schedule returned": PAD.replace("    return sch\n", ""),
}


def run05_4(tmp_path, capsys, answer):
    return run_exercise(tmp_path, capsys, NB05, CONTEXT05, EX05_4, answer, extra=EXTRA05_4)


def test_05_padding_solution(tmp_path, capsys):
    out = run05_4(tmp_path, capsys, PAD)
    assert out.startswith("correct: rows 72 and 72 halves apart"), out


def test_05_padding_another_offset_that_spreads_the_rows(tmp_path, capsys):
    out = run05_4(tmp_path, capsys, PAD.replace("offset=8", "offset=24"))
    assert out.startswith("correct: rows 88 and 88 halves apart"), out


@pytest.mark.parametrize("wrong", PAD_WRONG)
def test_05_padding_wrong_answers(tmp_path, capsys, wrong):
    assert PAD_WRONG[wrong] != PAD, "a wrong answer that is the solution: the notebook's text moved"
    try:
        out = run05_4(tmp_path, capsys, PAD_WRONG[wrong])
    except Exception as err:  # a schedule TVM refuses is refused too
        out = f"refused by TVM: {err}"
    assert not out.startswith("correct"), out


def test_05_padding_unanswered_says_not_yet(tmp_path, capsys):
    cell = _one(NB05, EX05_4)
    out = run05_4(tmp_path, capsys, cell[:cell.index("\n\n")])
    assert out.startswith("not yet: A's shared rows are 64 halves apart"), out
