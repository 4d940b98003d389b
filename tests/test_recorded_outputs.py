"""`pytest` must pass on a GPU too, where every measurement is live and differs from the record.

CI has no GPU, so it simulates one: it runs every notebook under nbval with the records perturbed
(each time up to 15% off, `records.PERTURB_VARIABLE`), as a live run would print other numbers.
A cell checked everywhere (`nbval-check-output`) that prints a measurement, or something chosen
by one (the fastest of two kernels), then fails here as it would on the GPU. Cells computed from
measurements carry the tag `recorded-output` instead: compared where the committed records are
shown unchanged, text and charts (`tools.recorded_outputs`), and never elsewhere.
"""

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from helpers import mode, records
from tools import recorded_outputs

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
#: Two draws: a choice between two kernels a few percent apart flips in one or the other.
WORDS = ["gpu-run-1", "gpu-run-2"]


def _nbval(paths, perturb: str | None, *extra, cwd=ROOT) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in (records.PERTURB_VARIABLE, "COURSE_RECORD")}
    if perturb:
        env[records.PERTURB_VARIABLE] = perturb
    cmd = [sys.executable, "-m", "pytest", "-n", "0", "-q", "-p", "no:cacheprovider", *extra, *map(str, paths)]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=1200)


class TestLiveNumbers:
    """One class, so that pytest-xdist keeps these runs on one core while the others go on."""

    @pytest.mark.parametrize("word", WORDS)
    def test_checked_cells_hold_when_every_time_changes(self, word):
        run = _nbval(NOTEBOOKS, word)
        failed = [line for line in run.stdout.splitlines() if line.startswith("FAILED")]
        assert run.returncode == 0, (
            f"with {records.PERTURB_VARIABLE}={word}, as on a GPU, these checked cells change: {failed}. "
            f"A cell whose output comes from measurements is tagged `{recorded_outputs.TAG}`, not "
            f"`nbval-check-output`.\n{run.stdout[-3000:]}")


# ---------------------------------------------------------------- the planted cell


def _planted(tmp_path, tag: str) -> Path:
    """A notebook whose checked cell prints a recorded time, with the output it gives here."""
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("import helpers"),
        nbformat.v4.new_code_cell('m = helpers.recorded_measurements("01_vector_add")[0]\n'
                                  'print(f"{m.name}: {m.ms:.4f} ms")', metadata={"tags": [tag]}),
    ])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    NotebookClient(nb, timeout=600, kernel_name="python3").execute()
    path = tmp_path / "planted.ipynb"
    nbformat.write(nb, path)
    return path


def _plugin_args():
    # the repository's configuration, with the planted notebook outside it
    return ["-c", str(ROOT / "pyproject.toml"), "--rootdir", str(ROOT), "-p", "tools.recorded_outputs",
            "--nbval-sanitize-with", str(ROOT / "tests" / "sanitize.cfg")]


def test_a_planted_measurement_in_a_checked_cell_fails(tmp_path):
    path = _planted(tmp_path, "nbval-check-output")
    assert _nbval([path], None, *_plugin_args(), cwd=tmp_path).returncode == 0  # as committed: passes
    run = _nbval([path], WORDS[0], *_plugin_args(), cwd=tmp_path)
    assert run.returncode == 1 and "Cell outputs differ" in run.stdout, run.stdout[-2000:]


def test_a_recorded_output_is_compared_only_where_the_records_are_shown(tmp_path):
    path = _planted(tmp_path, recorded_outputs.TAG)
    assert _nbval([path], WORDS[0], *_plugin_args(), cwd=tmp_path).returncode == 0  # as on a GPU: not compared
    nb = nbformat.read(path, 4)
    nb.cells[1].outputs[0]["text"] = nb.cells[1].outputs[0]["text"].replace(" ms", "0 ms")  # a wrong formula
    nbformat.write(nb, path)
    run = _nbval([path], None, *_plugin_args(), cwd=tmp_path)
    assert run.returncode == 1 and "Cell outputs differ" in run.stdout, run.stdout[-2000:]


# ---------------------------------------------------------------- the pieces


def test_perturbation_moves_each_time_by_a_fixed_factor_and_the_ratio_with_it(monkeypatch):
    plain = records.load(records.results_path("04_matmul_shared_blocking"))
    monkeypatch.setenv(records.PERTURB_VARIABLE, "w")
    mode.read()  # as helpers.start does
    once = records.load(records.results_path("04_matmul_shared_blocking"))
    assert once == records.load(records.results_path("04_matmul_shared_blocking"))  # the same draw each time
    factors = []
    for name, entry in plain["measurements"].items():
        factor = once["measurements"][name]["ms"] / entry["ms"]
        assert 0.85 <= factor <= 1.15
        if entry.get("ratio"):
            assert once["measurements"][name]["ratio"] * factor == pytest.approx(entry["ratio"])
        factors.append(factor)
    assert len(set(round(f, 6) for f in factors)) > len(factors) // 2  # not one factor for all


def test_no_record_is_written_from_perturbed_numbers(results_dir, monkeypatch):
    monkeypatch.setenv(records.PERTURB_VARIABLE, "w")
    mode.read()  # as helpers.start does
    with pytest.raises(RuntimeError, match=records.PERTURB_VARIABLE):
        records.save_measurement("01_vector_add", {"name": "x", "ms": 1.0}, {"name": "Test GPU"}, root=results_dir)
    assert not list(results_dir.rglob("*.json"))


@pytest.mark.parametrize("live, gpu, word, shown", [
    (False, None, None, True), (True, None, None, False), (False, "nvidia-h200", None, False), (False, None, "w", False)])
def test_where_the_committed_records_are_shown(monkeypatch, live, gpu, word, shown):
    for name, value in ((records.PERTURB_VARIABLE, word), ("COURSE_RECORDED_GPU", gpu)):
        monkeypatch.setenv(name, value) if value else monkeypatch.delenv(name, raising=False)
        mode.read()  # as helpers.start does
    assert records.shows_committed_records(live) is shown


def _chart_outputs(notebook: str):
    nb = json.loads((ROOT / "notebooks" / f"{notebook}.ipynb").read_text())
    return next(c["outputs"] for c in nb["cells"] if recorded_outputs.is_recorded_output(c)
                and any("image/png" in o.get("data", {}) for o in c["outputs"]))


def test_a_chart_is_compared_by_its_pixels():
    outputs = _chart_outputs("06_metaschedule_tuning")
    assert recorded_outputs.image_difference(outputs, copy.deepcopy(outputs)) is None
    other = [o for c in json.loads((ROOT / "notebooks" / "00_gpu_architecture.ipynb").read_text())["cells"]
             if c["cell_type"] == "code" for o in c["outputs"] if "image/png" in o.get("data", {})][:1]
    assert "differs" in (recorded_outputs.image_difference(outputs, other) or "") or \
        "px" in (recorded_outputs.image_difference(outputs, other) or "")
    assert "draws 0 chart" in recorded_outputs.image_difference([], outputs)


def test_a_cell_cannot_carry_both_tags(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "print(1)", metadata={"tags": ["nbval-check-output", recorded_outputs.TAG]})])
    nbformat.write(nb, tmp_path / "both.ipynb")
    run = _nbval([tmp_path / "both.ipynb"], None, *_plugin_args(), cwd=tmp_path)
    assert run.returncode != 0 and "not both" in run.stdout + run.stderr
