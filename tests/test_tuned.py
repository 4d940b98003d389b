"""helpers.tuned without a GPU: opening databases, picking their best records, replaying them."""

import pytest
import tvm
from tvm.s_tir import meta_schedule as ms

from helpers import tuned, tuning


@pytest.fixture(scope="module")
def small():
    return tuning.matmul_workload(64, 32, 16)


def _database(path, func, schedules_and_secs):
    """A JSON database holding one record per (schedule function, seconds)."""
    db = ms.database.JSONDatabase(work_dir=str(path))
    mod = tuned._as_module(func)
    workload = db.commit_workload(mod)
    for make, secs in schedules_and_secs:
        sch = tvm.s_tir.Schedule(mod)
        make(sch)
        db.commit_tuning_record(ms.database.TuningRecord(
            sch.trace, workload, run_secs=None if secs is None else [secs],
            target=tvm.target.Target({"kind": "llvm"}), args_info=ms.arg_info.ArgInfo.from_prim_func(mod["main"])))
    return db


def _split_i(factor):
    def make(sch):
        i, _, _ = sch.get_loops(sch.get_sblock("C"))
        sch.split(i, [None, factor])
    return make


def test_missing_database_directory_is_named(tmp_path):
    missing = tmp_path / "results" / "matmul_fp32_4096"
    with pytest.raises(FileNotFoundError, match="matmul_fp32_4096: the directory does not exist"):
        tuned.replay(missing)


def test_directory_without_database_files(tmp_path):
    (tmp_path / tuned.WORKLOAD_FILE).write_text("")
    with pytest.raises(FileNotFoundError, match="lacks database_tuning_record.json"):
        tuned.open_database(tmp_path)


def test_database_path_is_a_file(tmp_path):
    f = tmp_path / "db"
    f.write_text("x")
    with pytest.raises(NotADirectoryError):
        tuned.open_database(f)


def test_database_dir_layout():
    d = tuned.database_dir("matmul_fp32_4096", "NVIDIA H100 80GB HBM3")
    assert d.parts[-4:] == ("results", "nvidia-h100-80gb-hbm3", "tuning", "matmul_fp32_4096")


def test_replay_picks_the_fastest_record(small, tmp_path):
    _database(tmp_path, small, [(_split_i(4), 3e-3), (_split_i(8), 1e-3), (_split_i(16), None), (_split_i(2), 2e-3)])
    best = tuned.replay(tmp_path, small)
    assert best.tuning_ms == pytest.approx(1.0)
    assert best.records == 3  # the failed record (no run_secs) is not a candidate
    assert "factors=[None, 8]" in str(best.trace)
    # the trace applied to the workload gives the same module as scheduling it by hand
    expected = tvm.s_tir.Schedule(tuned._as_module(tuning.matmul_workload(64, 32, 16)))
    _split_i(8)(expected)
    tvm.ir.assert_structural_equal(best.sch.mod, expected.mod)
    assert "1.0000 ms" in best.describe()
    assert best.flop == 2 * 64 * 32 * 16 and best.tuning_tflops == pytest.approx(2 * 64 * 32 * 16 / 1e-3 / 1e12)
    # the workload stored in the database is enough: no PrimFunc needed
    assert tuned.replay(tmp_path).tuning_ms == pytest.approx(1.0)
    top = tuned.top_kernels(tuned.open_database(tmp_path), small, k=5)
    assert [round(k.tuning_ms, 6) for k in top] == [1.0, 2.0, 3.0]
    assert ["factors=[None, %d]" % f in str(k.trace) for k, f in zip(top, (8, 2, 4))] == [True] * 3


def test_replay_of_another_workload_explains_noalias(small, tmp_path):
    _database(tmp_path, small, [(_split_i(4), 1e-3)])
    # an IRModule is taken as it is (a PrimFunc gets the attribute added, as tune_tir does)
    without_attr = tvm.IRModule({"main": small.without_attr("tirx.noalias")})
    with pytest.raises(LookupError, match="tirx.noalias"):
        tuned.replay(tmp_path, without_attr)
    assert tuned.replay(tmp_path, small.without_attr("tirx.noalias")).records == 1


def test_database_without_valid_records(small, tmp_path):
    _database(tmp_path, small, [(_split_i(4), None)])
    with pytest.raises(LookupError, match="no valid"):
        tuned.replay(tmp_path)
