"""Notebook 05's schedule exercise (exercise 3: the final kernel of section 11 on a 128 x 128 block
tile of 2 x 2 warps), run with its published solution and with wrong answers. The schedules are only
built and read, so this runs on the CPU; see tests/test_exercises.py for how `run_exercise` works."""

import pytest

from test_exercises import right, run_exercise, solution

NB05 = "05_tensor_core_tensorization"
CONTEXT05 = ["nb = helpers.start(", "def matmul_module", "def frag_index", "def wmma_sync_desc", "def wmma_fill_desc",
             "def wmma_store_desc", "OURS = dict(", "def blockized", "def warp_tiled", "def staged", "def fragmented",
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
