import json
import types
from pathlib import Path

import pytest

from helpers import mode, records


def test_gpu_slug():
    assert records.gpu_slug("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3"
    with pytest.raises(ValueError, match="cannot make a folder name"):
        records.gpu_slug("***")


def test_missing_file_is_none_not_a_crash(results_dir):
    assert records.load(results_dir / "nope.json") is None
    assert records.recorded("01_vector_add", "anything") is None
    assert records.recorded_device() is None


def test_corrupt_file_is_named(results_dir):
    bad = results_dir / "test-gpu" / "01_vector_add.json"
    bad.parent.mkdir()
    bad.write_text('{"gpu": "x", "measurements": ')
    with pytest.raises(records.RecordError, match=r"01_vector_add.json in test-gpu/ is not valid JSON"):
        records.recorded("01_vector_add", "vector add")


def test_json_that_is_not_a_results_file_is_named(results_dir):
    bad = results_dir / "test-gpu" / "01_vector_add.json"
    bad.parent.mkdir()
    bad.write_text('{"hello": 1}')
    with pytest.raises(records.RecordError, match="lacks .*gpu.*not a course results file"):
        records.load(bad)


def test_save_then_read_back(results_dir):
    device = {"name": "Test GPU", "sm_count": 1}
    path = records.save_measurement("02_window_sum", {"name": "a", "ms": 1.0}, device)
    records.save_measurement("02_window_sum", {"name": "b", "ms": 2.0}, device)
    assert path == results_dir / "test-gpu" / "02_window_sum.json"
    data = records.load(path)
    assert set(data["measurements"]) == {"a", "b"} and data["device"] == device
    assert records.recorded("02_window_sum", "b")["ms"] == 2.0


def test_recording_needs_the_variable(monkeypatch):
    monkeypatch.delenv("COURSE_RECORD", raising=False)
    mode.read()  # as helpers.start does
    assert not records.recording_enabled()
    monkeypatch.setenv("COURSE_RECORD", "1")
    mode.read()  # as helpers.start does
    assert records.recording_enabled()


def test_save_measurement_writes_the_documented_file(tmp_path):
    device = {"name": "NVIDIA Test GPU 80GB", "sm_count": 2}
    path = records.save_measurement("01_vector_add", {"name": "add", "ms": 1.0}, device, root=tmp_path / "new")
    assert path == tmp_path / "new" / "nvidia-test-gpu-80gb" / "01_vector_add.json"
    records.save_measurement("01_vector_add", {"name": "copy", "ms": 2.0}, device, root=tmp_path / "new")
    records.save_measurement("01_vector_add", {"name": "add", "ms": 0.5}, device, root=tmp_path / "new")
    data = json.loads(path.read_text())
    assert path.read_text() == json.dumps(data, indent=1, sort_keys=True) + "\n"  # stable diffs in git
    assert data == {"format": records.FORMAT_VERSION, "notebook": "01_vector_add", "gpu": "NVIDIA Test GPU 80GB",
                    "device": device, "measurements": {"add": {"name": "add", "ms": 0.5}, "copy": {"name": "copy", "ms": 2.0}}}
    assert records.gpu_slug("--NVIDIA--") == "nvidia"


def test_what_a_broken_file_lacks_is_named_with_the_way_out(tmp_path):
    """The message says which keys are missing (all of them when the JSON is not even an object,
    'a measurements table' when that is not a table) and how to get the file back."""
    folder = tmp_path / "test-gpu"
    folder.mkdir()
    cases = {'[1, 2]': "lacks ['gpu', 'measurements']: it is not a course results file",
             '"gpu and measurements"': "lacks ['gpu', 'measurements']: it is not a course results file",
             '3': "lacks ['gpu', 'measurements']: it is not a course results file",
             '{"gpu": "x"}': "lacks ['measurements']: it is not a course results file",
             '{"gpu": "x", "measurements": [1]}': "lacks ['a measurements table']: it is not a course results file"}
    for text, why in cases.items():
        (folder / "03.json").write_text(text)
        with pytest.raises(records.RecordError) as err:
            records.load(folder / "03.json")
        assert str(err.value) == f"results file 03.json in test-gpu/ {why}"
    (folder / "03.json").write_text("{")
    with pytest.raises(records.RecordError, match=r"not valid JSON \(.*\); restore it with git or re-record it on a GPU$"):
        records.load(folder / "03.json")


def test_the_recorded_gpu_is_the_h100_but_for_a_notebook_recorded_on_another_unless_overridden(monkeypatch):
    monkeypatch.delenv("COURSE_RECORDED_GPU", raising=False)
    # as when notebook 11's kernel changed while only an H200 was lent (whatever RECORDED_ON holds today)
    monkeypatch.setattr(mode, "RECORDED_ON", {"11_flash_attention_hopper": "nvidia-h200"})
    mode.read()  # as helpers.start does
    assert records.recorded_gpu() == records.DEFAULT_RECORDED_GPU == "nvidia-h100-80gb-hbm3"
    assert records.recorded_gpu("10_flash_attention") == records.DEFAULT_RECORDED_GPU
    assert records.results_path("01_vector_add").parts[-3:] == ("results", "nvidia-h100-80gb-hbm3", "01_vector_add.json")
    assert records.recorded_gpu("11_flash_attention_hopper") == "nvidia-h200"  # its records are the H200's
    assert records.results_path("11_flash_attention_hopper").parts[-2:] == ("nvidia-h200", "11_flash_attention_hopper.json")
    assert mode.current().shows_committed_records  # a notebook's own GPU's records are its committed ones
    monkeypatch.setenv("COURSE_RECORDED_GPU", "tesla-t4")
    mode.read()  # as helpers.start does
    assert records.results_path("01_vector_add", root=records.Path("r")) == records.Path("r/tesla-t4/01_vector_add.json")
    assert records.recorded_gpu("11_flash_attention_hopper") == records.recorded_gpu("10_flash_attention") == "tesla-t4"
    assert not mode.current().shows_committed_records
    monkeypatch.setenv("COURSE_RECORDED_GPU", records.DEFAULT_RECORDED_GPU)  # naming the default asks for nothing else
    mode.read()
    assert records.recorded_gpu("11_flash_attention_hopper") == "nvidia-h200"


def test_each_notebook_recorded_on_another_gpu_has_its_records_there(monkeypatch):
    """An entry of RECORDED_ON names a notebook, and a GPU folder that holds its records, and notebook
    00's: a session takes its copy ceiling from 00's records on the GPU its notebook shows."""
    monkeypatch.delenv("COURSE_RECORDED_GPU", raising=False)
    mode.read()
    notebooks = records.RESULTS_DIR.parent
    for notebook, gpu in mode.RECORDED_ON.items():
        assert gpu != records.DEFAULT_RECORDED_GPU, f"{notebook}: an entry for the default GPU is no exception"
        assert (notebooks / f"{notebook}.ipynb").is_file(), f"RECORDED_ON names {notebook}, which is no notebook"
        for name in (notebook, "00_gpu_architecture"):
            data = records.load(records.RESULTS_DIR / gpu / f"{name}.json")
            assert data and data["measurements"], f"{gpu}/ holds no records of {name}"
            assert records.gpu_slug(data["gpu"]) == gpu
        assert records.gpu_slug(records.recorded_device(notebook)["name"]) == gpu
    assert records.recorded_device("10_flash_attention")["name"] == "NVIDIA H100 80GB HBM3"


def test_records_are_read_from_the_folder_given(results_dir, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    device = {"name": "Test GPU", "sm_count": 1}
    records.save_measurement("01_vector_add", {"name": "add", "ms": 1.0}, device, root=elsewhere)
    assert records.recorded("01_vector_add", "add") is None  # not in the default folder
    assert records.recorded("01_vector_add", "add", root=elsewhere) == {"name": "add", "ms": 1.0}
    assert records.recorded_device(root=elsewhere) == device


def test_the_device_comes_from_the_first_file_that_has_one(results_dir):
    folder = results_dir / "test-gpu"
    folder.mkdir()
    (folder / "00_setup.json").write_text(json.dumps({"gpu": "Test GPU", "measurements": {}}))
    (folder / "01_vector_add.json").write_text(json.dumps({"gpu": "Test GPU", "measurements": {}, "device": {"name": "A"}}))
    (folder / "02_window_sum.json").write_text(json.dumps({"gpu": "Test GPU", "measurements": {}, "device": {"name": "B"}}))
    assert records.recorded_device() == {"name": "A"}


def _tables(path, tables):
    path.write_text(json.dumps({"header": "GPU X, 2026-11-25, apache-tvm 0.27; run 00:53 UTC: python3 study.py",
                                "tables": tables}))


def test_experiment_table_finds_a_table_by_its_title(tmp_path, monkeypatch):
    monkeypatch.setattr(records, "EXPERIMENTS_DIR", tmp_path)
    _tables(tmp_path / "study.json", [
        {"title": "GPU X, 1024^3 fp32", "header": ["", "first"], "rows": [["ms", "0.1"]]},
        {"title": "GPU X, 4096^3 fp32", "header": ["", "first", "second kernel"],
         "rows": [["ms", "1.5", "2,000.25"], ["stalls", "a, b", "c 1.0, d 2.0"]]}])
    made, title, rows = records.experiment_table("study", "4096^3")
    assert made == "GPU X, 2026-11-25, apache-tvm 0.27; run 00:53 UTC: python3 study.py"
    assert title == "GPU X, 4096^3 fp32"
    assert rows == [["", "first", "second kernel"], ["ms", "1.5", "2,000.25"], ["stalls", "a, b", "c 1.0, d 2.0"]]


def test_a_table_without_a_title_is_named_by_its_header_as_the_log_prints_it(tmp_path, monkeypatch):
    monkeypatch.setattr(records, "EXPERIMENTS_DIR", tmp_path)
    _tables(tmp_path / "study.json", [{"title": None, "header": ["variant", "ms", "note"],
                                       "rows": [["copy 2^20", "0.0043", "fits in L2"], ["add", "1.25", ""]]}])
    _, title, rows = records.experiment_table("study", "variant")
    assert title == "variant    ms      note"
    assert rows[1:] == [["copy 2^20", "0.0043", "fits in L2"], ["add", "1.25", ""]]


def test_experiment_table_names_what_it_cannot_find(tmp_path, monkeypatch):
    monkeypatch.setattr(records, "EXPERIMENTS_DIR", tmp_path)
    with pytest.raises(FileNotFoundError, match="no experiment tables missing.json"):
        records.experiment_table("missing", "anything")
    _tables(tmp_path / "study.json", [{"title": "fp32", "header": ["a"], "rows": []}])
    with pytest.raises(ValueError, match="study.json has no table whose title or header contains 'fp64'"):
        records.experiment_table("study", "fp64")


def test_a_study_writes_the_tables_it_prints_as_experiment_table_reads_them(tmp_path, monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(Path(records.__file__).parents[1] / "gpu" / "experiments"))
    import study

    monkeypatch.setattr(records, "EXPERIMENTS_DIR", tmp_path)
    monkeypatch.setattr(study.helpers, "local_gpu_spec", lambda: types.SimpleNamespace(name="GPU X"))
    with study.logged(tmp_path / "script.study.txt", "python3 gpu/experiments/script.py study"):
        print("a line before the tables")
        study.table([["variant", "ms"], ["copy", 0.5]])
        print()
        study.table([["", "first"], ["ms", "1.5"]], "GPU X, 4096^3 fp16")
    made, title, rows = records.experiment_table("script.study", "4096^3")
    assert made.endswith("UTC: python3 gpu/experiments/script.py study") and title == "GPU X, 4096^3 fp16"
    assert rows == [["", "first"], ["ms", "1.5"]]
    assert records.experiment_table("script.study", "variant")[1:] == ("variant  ms", [["variant", "ms"], ["copy", "0.5"]])
    log = (tmp_path / "script.study.txt").read_text().splitlines()
    assert log[0] == f"# {made}" and log[1:] == ["a line before the tables", "variant  ms", "-------  ---", "copy     0.5",
                                                  "", "GPU X, 4096^3 fp16", "    first", "--  -----", "ms  1.5"]


@pytest.mark.parametrize("log, title, kernels", [("03_04_matmul.profile", "fp32 (cuBLAS", 3),
                                                 ("06_fp16.profile", "4096^3 fp16", 5)])
def test_the_profiles_the_notebooks_show_have_full_rows(log, title, kernels):
    made, _, rows = records.experiment_table(log, title)
    assert made.startswith("NVIDIA H100") and "gpu/experiments/" in made
    assert len(rows) > 10 and all(len(row) == kernels + 1 and all(row[1:]) for row in rows), rows
