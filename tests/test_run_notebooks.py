import nbformat

from helpers import run_notebooks


def _notebook(path, *sources):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


def test_executes_in_place_and_keeps_outputs(tmp_path):
    p = tmp_path / "ok.ipynb"
    _notebook(p, "print(6 * 7)")
    assert run_notebooks.main([str(p)]) == 0
    out = nbformat.read(p, 4).cells[0].outputs[0]
    assert out["text"].strip() == "42"


def test_a_failing_cell_is_saved_and_reported(tmp_path, capsys):
    p = tmp_path / "bad.ipynb"
    _notebook(p, "print('before')", "raise ValueError('tile factor 7 does not divide 1000')", "print('never')")
    assert run_notebooks.main([str(p)]) == 1
    assert "FAILED" in capsys.readouterr().out
    cells = nbformat.read(p, 4).cells
    assert cells[0].outputs[0]["text"].strip() == "before"
    assert cells[1].outputs[0]["output_type"] == "error" and not cells[2].outputs


def test_missing_notebook_is_named(tmp_path, capsys):
    assert run_notebooks.main([str(tmp_path / "nope.ipynb")]) == 2
    assert "no such notebook" in capsys.readouterr().err
