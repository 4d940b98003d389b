"""Impossible arguments are refused, before anything happens, with a message naming the argument
and the value: a GPU architecture, a notebook's name, a time, a dtype or a problem size. None of
these needs a GPU (the checks come before anything that would)."""

import math
import re
import sys

import numpy as np
import pytest
import tvm_ffi

import helpers
from helpers import autotune, baselines, bench, kernels, tuning

from conftest import bound_vector_add

SMALL = tuning.matmul_workload(64, 32, 16)

BAD = [
    # GPU architectures
    ("arch 999", lambda tmp: helpers.make_target("sm_999"), "unknown GPU architecture 'sm_999'"),
    ("arch empty", lambda tmp: helpers.make_target("sm_"), "unknown GPU architecture 'sm_'"),
    ("arch variant of an arch without one", lambda tmp: helpers.make_target("sm_80a"), "'sm_80a'"),
    ("arch in a dict", lambda tmp: helpers.make_target({"kind": "cuda", "arch": "sm_100"}), "'sm_100'"),
    ("arch of a listing", lambda tmp: helpers.cuda_source(bound_vector_add(), target="sm_42"), "'sm_42'"),
    ("arch of a search", lambda tmp: autotune.search(SMALL, [], None, tmp / "w", inputs=[], expected=None,
                                                     target="sm_91"), "'sm_91'"),
    ("arch of a tuning", lambda tmp: tuning.tune(SMALL, tmp / "w", trials=4, target="sm_5"), "'sm_5'"),
    ("compute capability", lambda tmp: helpers.arch_constants("sm_90"), "compute capability sm_90"),
    # notebooks
    ("notebook", lambda tmp: helpers.start("99_no_such_notebook"), "no notebook named '99_no_such_notebook'"),
    ("notebook with its suffix", lambda tmp: bench.Session("01_vector_add.ipynb"), "'01_vector_add.ipynb'"),
    ("notebook unnamed", lambda tmp: bench.Session(""), "no notebook named ''"),
    # times
    ("minutes zero", lambda tmp: tuning.tune(SMALL, tmp / "w", trials=4, minutes=0),
     "minutes must be a positive number (the time limit of the search) or None, got 0"),
    ("minutes NaN", lambda tmp: tuning.tune(SMALL, tmp / "w", trials=4, minutes=math.nan), "got nan"),
    ("build timeout", lambda tmp: tuning.tune(SMALL, tmp / "w", trials=4, build_timeout=-5),
     "build_timeout must be a positive number (the seconds one candidate may take to build), got -5"),
    ("build timeout text", lambda tmp: tuning.tune(SMALL, tmp / "w", trials=4, build_timeout="120"), "got '120'"),
    ("warm-up calls", lambda tmp: baselines.cublas_time(8, 8, 8, warmup=-1),
     "warmup must be a non-negative integer, got -1"),
    ("rounds", lambda tmp: baselines.cublas_time(8, 8, 8, repeat=2.5), "repeat must be a positive integer, got 2.5"),
    # dtypes
    ("cuBLAS dtype", lambda tmp: baselines.cublas_time(64, 64, 64, "int8"), "dtype 'int8' is not supported here"),
    ("cuBLAS C dtype", lambda tmp: baselines.cublas_call(64, 64, 64, "float16", out_dtype="bfloat16"),
     "out_dtype 'bfloat16'"),
    ("workload sums", lambda tmp: tuning.matmul_workload(64, 64, 64, acc_dtype="float8"), "acc_dtype 'float8'"),
    # problem sizes
    ("cuBLAS M zero", lambda tmp: baselines.cublas_time(0, 64, 64), "M must be a positive integer, got 0"),
    ("cuBLAS N negative", lambda tmp: baselines.cublas_call(64, -1, 64), "N must be a positive integer, got -1"),
    ("workload K fraction", lambda tmp: tuning.matmul_workload(64, 64, 2.5), "K must be a positive integer, got 2.5"),
    ("workload M boolean", lambda tmp: tuning.matmul_workload(True, 64, 64), "M must be a positive integer, got True"),
    ("workload N text", lambda tmp: tuning.matmul_workload(64, "64", 64), "N must be a positive integer, got '64'"),
    ("tile extent", lambda tmp: helpers.require_divides(-64, 8), "extent must be a positive integer, got -64"),
]


@pytest.mark.parametrize("call, said", [pytest.param(call, said, id=name) for name, call, said in BAD])
def test_an_impossible_argument_is_refused_by_name(call, said, tmp_path, capsys):
    with pytest.raises(ValueError, match=re.escape(said)):
        call(tmp_path)
    assert capsys.readouterr().out == ""  # refused before any banner or line was printed
    assert not (tmp_path / "w").exists()  # and before any work directory was made


def test_the_messages_say_what_is_accepted():
    with pytest.raises(ValueError) as err:
        helpers.make_target("sm_999")
    assert str(err.value) == ("unknown GPU architecture 'sm_999': the course knows sm_60, sm_61, sm_70, sm_75, sm_80, "
                              "sm_86, sm_87, sm_89, sm_90 (and sm_90a)")
    with pytest.raises(ValueError) as err:
        helpers.start("99_no_such_notebook")
    assert str(err.value) == ("no notebook named '99_no_such_notebook' in notebooks/: the notebooks are "
                              "00_gpu_architecture, 01_vector_add, 02_window_sum, 03_matmul_local_blocking, "
                              "04_matmul_shared_blocking, 05_tensor_core_tensorization, 06_metaschedule_tuning, "
                              "07_hopper_wgmma_tma, 08_hopper_persistent_kernel, 09_reductions, 10_flash_attention, "
                              "11_flash_attention_hopper")
    with pytest.raises(ValueError, match=r"^dtype 'int8' is not supported here: use float16, float32, float64$"):
        tuning.matmul_workload(8, 8, 8, "int8")


def test_course_arch_names_the_architecture_it_does_not_know(monkeypatch):
    if helpers.gpu_available():
        pytest.skip("COURSE_ARCH is read only without a GPU")
    monkeypatch.setenv("COURSE_ARCH", "sm_75,sm_999")
    with pytest.raises(ValueError, match="COURSE_ARCH='sm_999' is not an architecture the course is built for"):
        helpers.make_target()


@pytest.mark.parametrize("spec, arch", [("sm_75", "sm_75"), ("sm_90a", "sm_90a"), ("sm_87", "sm_87"),
                                        ({"kind": "cuda", "arch": "sm_80", "max_num_threads": 1024}, "sm_80"),
                                        ("nvidia/nvidia-h100", "sm_90a")])
def test_the_architectures_the_course_knows_are_accepted(spec, arch):
    assert str(helpers.make_target(spec).attrs["arch"]) == arch


def test_good_arguments_are_still_accepted(results_dir, monkeypatch):
    """Every notebook's name opens its session (the check reads the notebooks folder, not the results
    folder the tests move); sizes may be NumPy integers; cuBLAS without torch or cupy is None."""
    for path in sorted(helpers.env.NOTEBOOKS_DIR.glob("[0-9][0-9]_*.ipynb")):
        assert bench.Session(path.stem, quiet=True).notebook == path.stem
    assert tvm_ffi.structural_equal(tuning.matmul_workload(np.int64(64), 32, 16), SMALL)  # the same workload
    tuning.matmul_workload(16, 16, 16, "float16", "float32")
    helpers.require_divides(4096, 128)
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch fails
    monkeypatch.setitem(sys.modules, "cupy", None)
    assert baselines.cublas_time(8, 4, 2, "float64", repeat=1, warmup=0) is None
    assert baselines.cublas_call(8, 4, 2, "float16", out_dtype="float32") is None
    kernels.check_number("minutes", 0.5, integer=False)
    kernels.check_number("warmup", 0, zero=True)
