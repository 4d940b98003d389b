"""helpers.autotune: a kernel's own design space searched with MetaSchedule's builder, runner and
database, as notebook 07 searches its Hopper kernel. Here the whole loop runs on the CPU (TVM's
LLVM target): a family of C = A + B kernels, one of which is wrong on purpose."""

import shutil

import numpy as np
import pytest
import tvm
from tvm import te

import helpers
from helpers import autotune, records

from test_gate import ADD, N  # C = A + B on 64 floats

WRONG = te.create_prim_func([*(a := [te.placeholder((N,), "float32", name=x) for x in "AB"]),
                             te.compute((N,), lambda i: a[0][i] - a[1][i], name="C")])
WORKLOAD = ADD.with_attr("tirx.noalias", True)  # what is computed: the database's key


def add(split, wrong=0):
    """One point of the space: C = A + B with its loop split by `split` (wrong=1: C = A - B)."""
    sch = tvm.s_tir.Schedule(WRONG if wrong else ADD)
    (i,) = sch.get_loops(sch.get_sblock("C"))
    sch.split(i, [None, split])
    return sch


@pytest.fixture(scope="module")
def searched(tmp_path_factory):
    """One search of four configurations, its database in a fresh folder."""
    rng = np.random.default_rng(0)
    x, y = rng.uniform(-1, 1, N).astype("float32"), rng.uniform(-1, 1, N).astype("float32")
    folder = tmp_path_factory.mktemp("db")
    found = helpers.search(WORKLOAD, helpers.configurations(split=[4, 16], wrong=[0, 1]), add, folder,
                           inputs=[x, y, np.zeros(N, "float32")], expected=x.astype("float64") + y, target="llvm")
    return found, folder


def test_a_search_times_the_correct_configurations_and_reports_why_the_others_failed(searched):
    found, _ = searched
    assert [c.config["wrong"] for c in found] == [0, 0, 1, 1]  # timed ones first, fastest first
    assert all(c.ms > 0 and c.error is None for c in found[:2]) and found[0].ms <= found[1].ms
    for c in found[2:]:
        assert c.ms is None and c.error.startswith("wrong result: relative error ")
        assert str(c).startswith(f"split={c.config['split']} wrong=1: wrong result")


def test_the_database_keeps_every_candidate_and_replays_the_best_without_running_anything(searched):
    found, folder = searched
    records_ = helpers.open_database(folder).get_all_tuning_records()
    assert len(records_) == 4
    assert sorted(min(float(s) for s in r.run_secs) >= 1e9 for r in records_) == [False, False, True, True]
    assert helpers.best_configuration(folder, WORKLOAD) == found[0].config
    ranked = helpers.ranked_configurations(folder, WORKLOAD, 5)
    assert [c.config for c in ranked] == [c.config for c in found[:2]]  # the wrong ones are never offered
    assert [c.ms for c in ranked] == pytest.approx([c.ms for c in found[:2]])
    tuned = helpers.replay(folder, WORKLOAD)
    assert "search.config" in str(tuned.trace) and autotune.config_of(tuned.sch) == found[0].config


def test_a_second_search_adds_to_the_database_and_another_workload_is_kept_apart(searched, tmp_path):
    _, folder = searched
    copy = tmp_path / "db"
    shutil.copytree(folder, copy)
    x = np.ones(N, "float32")
    again = helpers.search(WORKLOAD, [{"split": 8, "wrong": 0}], add, copy, inputs=[x, x, x], expected=2 * x,
                           target="llvm")
    assert [c.config for c in again] == [{"split": 8, "wrong": 0}] and again[0].ms > 0
    assert len(helpers.open_database(copy).get_all_tuning_records()) == 5
    assert {"split": 8, "wrong": 0} in [c.config for c in helpers.ranked_configurations(copy, WORKLOAD, 5)]
    other = WORKLOAD.with_attr("global_symbol", "other")
    with pytest.raises(LookupError, match="holds no valid record for this workload"):
        helpers.best_configuration(copy, other)


def test_configurations_are_the_product_of_the_choices_that_keep_accepts():
    space = helpers.configurations(block_n=[128, 256], stages=[3, 4, 5], keep=lambda c: c["block_n"] * c["stages"] <= 768)
    assert space == [{"block_n": 128, "stages": 3}, {"block_n": 128, "stages": 4}, {"block_n": 128, "stages": 5},
                     {"block_n": 256, "stages": 3}]
    assert helpers.configurations(order=["row", "grouped"]) == [{"order": "row"}, {"order": "grouped"}]


@pytest.mark.parametrize("choices, message", [
    ({}, "name at least one knob"),
    ({"stages": []}, "stages needs a non-empty list of values, got \\[\\]"),
    ({"stages": 4}, "stages needs a non-empty list of values, got 4"),
    ({"order": ["row major"]}, "order='row major': a value is a number or a string without spaces"),
    ({"stages": [None]}, "stages=None: a value is a number or a string without spaces"),
])
def test_a_malformed_space_is_refused_with_the_knob_it_names(choices, message):
    with pytest.raises(ValueError, match=message):
        helpers.configurations(**choices)


def test_a_space_that_keep_empties_is_refused():
    with pytest.raises(ValueError, match="none of the 2 configurations passes `keep`: the space is empty"):
        helpers.configurations(stages=[3, 4], keep=lambda c: False)


def test_a_configuration_reads_back_as_written():
    config = {"stages": 4, "block_n": 256, "order": "grouped", "scale": 0.5}
    text = helpers.format_config(config)
    assert text == "block_n=256 order='grouped' scale=0.5 stages=4"
    assert autotune.parse_config(text) == config


def test_a_schedule_that_no_search_wrote_has_no_configuration():
    with pytest.raises(LookupError, match="carries no 'search.config' annotation"):
        autotune.config_of(tvm.s_tir.Schedule(ADD))


def test_search_refuses_a_gpu_target_without_a_gpu_and_a_mismatched_output(monkeypatch, tmp_path):
    monkeypatch.setattr(helpers.env, "gpu_available", lambda: False)
    x = np.zeros(N, "float32")
    with pytest.raises(RuntimeError, match="search times every candidate on the GPU, and no CUDA GPU is visible"):
        helpers.search(WORKLOAD, [{"split": 4}], add, tmp_path, inputs=[x, x, x], expected=x, target="sm_90a")
    with pytest.raises(ValueError, match=r"its shape \(64,\) must be the expected result's, \(2, 32\)"):
        helpers.search(WORKLOAD, [{"split": 4}], add, tmp_path, inputs=[x, x, x], expected=x.reshape(2, 32),
                       target="llvm")
    with pytest.raises(ValueError, match="no configurations to search"):
        helpers.search(WORKLOAD, [], add, tmp_path, inputs=[x, x, x], expected=x, target="llvm")
    assert not list(tmp_path.iterdir())  # refused before anything was written


def test_the_committed_database_is_this_gpus_else_the_recorded_gpus(results_dir):
    assert helpers.committed_database("hopper") is None
    recorded = results_dir / "test-gpu" / "tuning" / "hopper"
    recorded.mkdir(parents=True)
    assert helpers.committed_database("hopper", "NVIDIA H200") == recorded
    own = results_dir / records.gpu_slug("NVIDIA H200") / "tuning" / "hopper"
    own.mkdir(parents=True)
    assert helpers.committed_database("hopper", "NVIDIA H200") == own
