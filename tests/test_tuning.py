"""helpers.tuning without a GPU: budget checks, design spaces and templates, and the quiet log
(helpers.tuning_log). Reading databases is tests/test_tuned.py."""

import functools
import logging
import math
import os

import pytest
import tvm
from tvm.s_tir import meta_schedule as ms

import helpers
from helpers import tuned, tuning, tuning_log


@pytest.fixture(scope="module")
def small():
    return tuning.matmul_workload(64, 32, 16)


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize("trials", [0, -5, 2.5, True, "64", None])
def test_trials_must_be_a_positive_integer(small, tmp_path, trials):
    with pytest.raises(ValueError, match="trials must be a positive integer"):
        tuning.tune(small, tmp_path / "w", trials=trials)
    assert not (tmp_path / "w").exists()  # nothing written before the budget is checked


@pytest.mark.parametrize("minutes", [0, -1, math.nan, math.inf, "3"])
def test_minutes_must_be_positive(small, tmp_path, minutes):
    with pytest.raises(ValueError, match="minutes must be a positive number"):
        tuning.tune(small, tmp_path, trials=4, minutes=minutes)


def test_trials_per_iter_must_be_positive(small, tmp_path):
    with pytest.raises(ValueError, match="trials_per_iter must be a positive integer"):
        tuning.tune(small, tmp_path, trials=4, trials_per_iter=0)


def test_unknown_space(small, tmp_path):
    with pytest.raises(ValueError, match="unknown design space 'cuda-fast'"):
        tuning.tune(small, tmp_path, trials=4, space="cuda-fast")


def test_unknown_compiler_option_is_named(small, tmp_path):
    with pytest.raises(ValueError, match="Invalid config option 'tirx.use_async_cpy'"):
        tuning.tune(small, tmp_path / "w", trials=4, space="llvm", target={"kind": "llvm"},
                    pass_config={"tirx.use_async_cpy": True})
    assert not (tmp_path / "w").exists()
    with pytest.raises(TypeError, match="pass_config must be a dict"):
        tuning.tune(small, tmp_path / "w", trials=4, space="llvm", target={"kind": "llvm"},
                    pass_config=["tirx.use_async_copy"])


def test_schedule_is_not_a_workload(small, tmp_path):
    with pytest.raises(TypeError, match="not a Schedule"):
        tuning.tune(tvm.s_tir.Schedule(small), tmp_path, trials=4)


@pytest.mark.skipif(helpers.gpu_available(), reason="checks the message shown without a GPU")
def test_tuning_for_cuda_needs_a_gpu(small, tmp_path):
    with pytest.raises(RuntimeError, match="no CUDA GPU is visible"):
        tuning.tune(small, tmp_path / "w", trials=4)


def test_workload_shape_checked():
    with pytest.raises(ValueError, match="K must be a positive integer"):
        tuning.matmul_workload(64, 64, 0)
    with pytest.raises(ValueError, match="dtype 'int8'"):
        tuning.matmul_workload(64, 64, 64, "int8")


def test_workload_keeps_noalias(small):
    assert bool(small.attrs["tirx.noalias"])


# ---------------------------------------------------------------- templates


def _tile_template(sch):
    """A template for the CPU: the i loop split by a sampled factor, the inner part vectorised."""
    i, _, _ = sch.get_loops(sch.get_sblock("C"))
    _, inner = sch.split(i, sch.sample_perfect_tile(i, n=2, max_innermost_factor=8))
    sch.parallel(_)


def test_a_template_is_a_space_with_its_own_samples(small):
    assert isinstance(tuning.make_space(_tile_template), ms.space_generator.ScheduleFn)
    assert tuning.space_name(_tile_template) == "template _tile_template"
    cpu = {"kind": "llvm", "num-cores": 1}
    (sketch,) = tuning.design_spaces(small, _tile_template, target=cpu)
    (inst,) = [i for i in sketch.trace.insts if i.kind.name == "SamplePerfectTile"]
    samples = tuning.sample_candidates(small, sketch, space=_tile_template, tries=12, target=cpu)
    assert len(samples.valid) == 12  # nothing for the CPU postprocessors to reject
    factors = {tuple(int(x) for x in s.trace.decisions[next(i for i in s.trace.insts if i.kind.name == "SamplePerfectTile")])
               for s in samples.valid}
    assert len(factors) > 1 and all(a * b == 64 and b <= 8 for a, b in factors)  # 64 rows, sampled splits


@pytest.mark.skipif(helpers.gpu_available(), reason="checks the refusal without a GPU")
def test_tuning_a_template_for_cuda_needs_a_gpu(small, tmp_path):
    with pytest.raises(RuntimeError, match="no CUDA GPU is visible"):
        tuning.tune(small, tmp_path, trials=4, space=_tile_template)


def test_candidates_compile_under_pass_config(small, monkeypatch):
    """The builder worker compiles each candidate inside a PassContext holding pass_config."""
    import cloudpickle
    from tvm.s_tir.meta_schedule.builder import local_builder

    seen = {}
    monkeypatch.setattr(local_builder, "default_build",
                        lambda mod, target, params: seen.update(tvm.transform.PassContext.current().config))
    tuning._build_with({"tirx.use_async_copy": True}, tuned._as_module(small), tvm.target.Target("llvm"), None)
    assert bool(seen["tirx.use_async_copy"])
    # the worker process receives the build function by reference: it must survive pickling
    f = cloudpickle.loads(cloudpickle.dumps(functools.partial(tuning._build_with, {"tirx.use_async_copy": True})))
    assert f.func is tuning._build_with


# ---------------------------------------------------------------- the quiet log


def test_metaschedule_log_goes_to_the_file(tmp_path, capsys):
    log = tmp_path / "logs" / "tuning.log"
    with tuning_log._quiet(log, redirect_fds=False):
        logging.getLogger("tvm.s_tir.meta_schedule.task_scheduler").info("Trial #1: GFLOPs: 123")
        logging.getLogger("tvm.s_tir.meta_schedule").warning("a warning")
    out = capsys.readouterr()
    assert "Trial #1" not in out.out + out.err and "a warning" not in out.out + out.err
    text = log.read_text()
    assert "Trial #1: GFLOPs: 123" in text and "a warning" in text
    # afterwards MetaSchedule's logger is as it was
    assert logging.getLogger("tvm.s_tir.meta_schedule").propagate


def test_task_table_goes_to_the_log_not_the_notebook(tmp_path, monkeypatch):
    """In a notebook MetaSchedule would display a table after every round; inside `_quiet`
    the check it asks says "not IPython", and outside it passes on MetaSchedule's answer."""
    import tvm_ffi

    def check():
        return tvm_ffi.get_global_func(tuning_log._IPYTHON_CHECK)()

    with tuning_log._quiet(tmp_path / "x.log", redirect_fds=False):
        pass  # installs the check
    monkeypatch.setattr(tuning_log, "_ipython_original", lambda: True)  # as in a notebook
    assert check() is True
    with tuning_log._quiet(tmp_path / "x.log", redirect_fds=False):
        assert check() is False
    assert check() is True


def test_clear_screen_requests_are_dropped(tmp_path):
    logger = logging.getLogger("helpers-test-clear")
    logger.propagate = False
    handler = logging.FileHandler(tmp_path / "x.log")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    f = tuning_log._log_func(logger)
    f(-1, "task_scheduler.cc", 1, "")  # MetaSchedule's "clear the notebook output": ignored
    f(logging.INFO, "task_scheduler.cc", 2, "hello")
    handler.close()
    assert (tmp_path / "x.log").read_text().strip() == "[task_scheduler.cc:2] hello"


# ---------------------------------------------------------------- a real (CPU) tuning run


@pytest.mark.skipif(not os.environ.get("COURSE_SLOW_TESTS"),
                    reason="about a minute on a small CPU: set COURSE_SLOW_TESTS=1 to run it")
def test_tune_on_cpu_end_to_end(small, tmp_path, capfd):
    """The whole loop on an LLVM target: progress bar, log file, database, replay, resume."""
    run = tuning.tune(small, tmp_path, trials=4, trials_per_iter=4, space="llvm", minutes=10)
    out = capfd.readouterr()
    assert run.trials == 4 and not run.stopped_for_time
    assert "tuning" in out.out + out.err  # the progress bar
    assert "Trial #" not in out.out + out.err  # MetaSchedule's per-trial log lines are not
    assert "Trial #" in run.log_file.read_text()  # ... they are in the file
    assert run.log_file == tmp_path / "logs" / "tuning.log"
    assert run.best is not None and tuned.replay(tmp_path, small).records == run.best.records
    again = tuning.tune(small, tmp_path, trials=4, trials_per_iter=4, space="llvm")  # resumes
    assert again.best.records >= run.best.records


@pytest.mark.skipif(not os.environ.get("COURSE_SLOW_TESTS"),
                    reason="about a minute on a small CPU: set COURSE_SLOW_TESTS=1 to run it")
def test_tune_a_template_on_cpu(small, tmp_path):
    """A template searched end to end, its candidates compiled under a pass_config."""
    run = tuning.tune(small, tmp_path, trials=4, trials_per_iter=4, space=_tile_template,
                      target={"kind": "llvm", "num-cores": 1}, pass_config={"tirx.disable_vectorize": True})
    assert run.trials == 4 and run.failed == 0
    (decision,) = [d for inst, d in run.best.trace.decisions.items() if inst.kind.name == "SamplePerfectTile"]
    assert int(decision[0]) * int(decision[1]) == 64
