import nbformat

from tools import run_notebooks


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


def _tagged(path):
    """A cell whose output stands as committed, and a recorded-output cell whose committed output is stale."""
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("print('now')", outputs=[nbformat.v4.new_output("stream", text="as the GPU ran it\n")]),
        nbformat.v4.new_code_cell("for part in ('a', 'b'): print(part)", metadata={"tags": ["recorded-output"]},
                                  outputs=[nbformat.v4.new_output("stream", text="stale\n")])])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


def test_recorded_outputs_rewrites_only_the_tagged_cells(tmp_path, monkeypatch):
    monkeypatch.setattr(run_notebooks.env, "gpu_available", lambda: False)
    monkeypatch.delenv(run_notebooks.records.PERTURB_VARIABLE, raising=False)
    monkeypatch.delenv("COURSE_RECORDED_GPU", raising=False)
    p = tmp_path / "tables.ipynb"
    _tagged(p)
    assert run_notebooks.main(["--recorded-outputs", str(p)]) == 0
    untouched, rewritten = nbformat.read(p, 4).cells
    assert untouched.outputs[0]["text"] == "as the GPU ran it\n"
    assert [o["text"] for o in rewritten.outputs] == ["a\nb\n"]  # one stream, as Jupyter saves it


def test_recorded_outputs_refuses_numbers_that_are_not_the_records(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(run_notebooks.env, "gpu_available", lambda: False)
    monkeypatch.setenv(run_notebooks.records.PERTURB_VARIABLE, "w")
    p = tmp_path / "tables.ipynb"
    _tagged(p)
    assert run_notebooks.main(["--recorded-outputs", str(p)]) == 2
    assert "committed records as they are" in capsys.readouterr().err
    assert nbformat.read(p, 4).cells[1].outputs[0]["text"] == "stale\n"  # nothing written
