"""The checked schedule exercises of notebooks 00-02 that tests/test_exercises.py does not cover:
00's "Fill the SM" (change the threads per block of the copy kernel until the SM is full), run
with its published solution and with wrong answers, on the CPU (the recorded GPU's numbers)."""

import pytest

from test_exercises import right, run_exercise, solution

NB00 = "00_gpu_architecture"
CONTEXT00 = ["helpers.start(", "N_COPY = 1 << 26"]
FILL = solution(NB00, "Fill the SM")
FILL_WRONG = {
    "one warp per block, as given": FILL.replace("threads=256", "threads=32"),
    "half a warp per block": FILL.replace("threads=256", "threads=16"),
    "more threads than a block holds": FILL.replace("threads=256", "threads=2048"),
    "another kernel's block size": "my_copy = helpers.kernels.copy_kernel(N_COPY, threads=32, vector=4)",
}


@pytest.mark.parametrize("answer", [None, *FILL_WRONG], ids=lambda x: x or "solution")
def test_00_fill_the_sm(tmp_path, capsys, answer):
    assert answer is None or FILL_WRONG[answer] != FILL, "a wrong answer that is the solution: the notebook's text moved"
    out = run_exercise(tmp_path, capsys, NB00, CONTEXT00, "Exercise 3: not answered yet",
                       FILL_WRONG[answer] if answer else FILL, extra="spec = nb.spec")
    assert right(out, "Exercise 3") == (answer is None), out


def test_00_fill_the_sm_solution_fills_every_gpu():
    """The solution's block size fills an SM on every GPU the course is built for, not only the
    recorded one (the solution says so), with the copy's registers or the check's 16."""
    import helpers

    for arch, name in helpers.env.REPRESENTATIVE.items():
        spec = helpers.env.datasheet(name).spec()
        assert helpers.occupancy(spec, 256, 16).occupancy == 1, (arch, name)
