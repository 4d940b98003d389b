"""Every entry point refuses nonsense, before anything happens, with a message naming the argument and
what would be right: one table of error inputs (as PyTorch's OpInfo `error_inputs`), run by one test.

`ERROR_INPUTS` maps each entry point a notebook or a student calls to its bad calls: for each, the
exception it must raise and text its message must contain. None of them needs a GPU: the checks come
before anything that would. tests/test_fuzz_inputs.py draws the arguments nobody listed here."""

import functools
import importlib
import json
import math
import re
import sys

import numpy as np
import pytest
import tvm
import tvm_ffi

import helpers
from helpers import attention, autotune, baselines, bench, kernels, lessons, records, tuning
from helpers import attention_steps

from conftest import H100, bound_vector_add, write_record
from test_gate import ADD, WRITES_NAN

SMALL = tuning.matmul_workload(64, 32, 16)
ARCHS = "the course knows sm_60, sm_61, sm_70, sm_75, sm_80, sm_86, sm_87, sm_89, sm_90 (and sm_90a)"
DTYPES = "use float16, float32, float64"
NOTEBOOKS = "the notebooks are 00_gpu_architecture, 01_vector_add"
LIST = "must be a list of Measurements (what Session.measure returns)"
# texts that several entry points must say alike, as they reach one check (10's steps and
# attention.check_shape; 09's steps and the factor check of their lanes split)
HEAD_DIM_96 = "head dimension 96 is not supported: the kernels take 64 or 128"
SEQUENCE_1000 = "sequence length 1000 is not a multiple of the 64-token tiles: pad it to 1024 and mask the padded keys"
SEQUENCE_EMPTY = "the sequence length n must be a positive integer, got 0"
LANES_100 = "lanes factor 32 does not divide the extent 100"

@pytest.fixture(scope="module")
def notebook():
    """notebook(name): what that notebook exports (its cells tagged `export`, as helpers.lessons imports
    them): the one place these tests read notebooks."""
    return lessons.lesson


class Context:
    """What a bad call needs: a folder (`tmp`), a session showing records as without a GPU (`nb`), one
    running kernels live on the CPU (`live`, as tests/test_gate.py's), a notebook's functions, and
    arrays and measurements to pass."""

    def __init__(self, tmp, notebook):
        self.tmp, self.notebook = tmp, notebook

    @functools.cached_property
    def nb(self):
        return bench.Session("01_vector_add", quiet=True)

    @functools.cached_property
    def live(self):
        write_record(self.tmp, "01_vector_add", "recorded")
        return bench.Session("01_vector_add", quiet=True, device=tvm.cpu(0), target=tvm.target.Target("llvm"))

    def vectors(self, n=1 << 12, dtype="float32"):
        return [np.ones(n, dtype) for _ in range(3)]


@pytest.fixture
def context(results_dir, notebook):
    return Context(results_dir, notebook)


def m(name="k", ms=1.0, **kw):
    return helpers.Measurement(name, ms, **kw)


KERNEL = bound_vector_add()
SPEC = H100


def spec(**changed):
    return helpers.GpuSpec(**(SPEC.to_dict() | changed))


# entry point: [(what is wrong, the call, the exception, text its message contains)]
ERROR_INPUTS = {
    "helpers.start": [
        ("notebook", lambda c: helpers.start("99_no_such_notebook"), ValueError, "no notebook named '99_no_such_notebook'"),
        ("notebook None", lambda c: helpers.start(None), ValueError, f"no notebook named None in notebooks/: {NOTEBOOKS}"),
        ("notebook by number", lambda c: helpers.start(1), ValueError, "no notebook named 1"),
        ("notebook's path", lambda c: helpers.start("notebooks/01_vector_add"), ValueError,
         "no notebook named 'notebooks/01_vector_add'"),
    ],
    "Session": [
        ("notebook with its suffix", lambda c: bench.Session("01_vector_add.ipynb"), ValueError, "'01_vector_add.ipynb'"),
        ("notebook unnamed", lambda c: bench.Session(""), ValueError, "no notebook named ''"),
    ],
    "Session.measure": [
        ("repeat zero", lambda c: c.nb.measure("k", KERNEL, c.vectors(), repeat=0), ValueError,
         "repeat must be a positive integer, got 0"),
        ("repeat fraction", lambda c: c.nb.measure("k", KERNEL, c.vectors(), repeat=2.5), ValueError, "got 2.5"),
        ("traffic", lambda c: c.nb.measure("k", KERNEL, c.vectors(), traffic="dram"), ValueError,
         "traffic is None (bytes = the minimal DRAM traffic) or 'requested', got 'dram'"),
        ("flops negative", lambda c: c.nb.measure("k", KERNEL, c.vectors(), flops=-1), ValueError,
         "flops must be a positive number or None, got -1"),
        ("bytes NaN", lambda c: c.nb.measure("k", KERNEL, c.vectors(), bytes=math.nan), ValueError,
         "bytes must be a positive number or None, got nan"),
        ("tolerance negative", lambda c: c.nb.measure("k", KERNEL, c.vectors(), tol=-1e-5), ValueError,
         "tol must be a non-negative number (the largest relative error accepted), got -1e-05"),
        ("tolerance NaN", lambda c: c.nb.measure("k", KERNEL, c.vectors(), tol=math.nan), ValueError, "tol must be"),
        ("output index", lambda c: c.nb.measure("k", KERNEL, c.vectors(), out=3), ValueError,
         "out must be the index of the output among the 3 arrays, got 3"),
        ("output by name", lambda c: c.nb.measure("k", KERNEL, c.vectors(), out="C"), ValueError, "got 'C'"),
        ("arrays missing", lambda c: c.nb.measure("k", KERNEL, None), TypeError,
         "args must be a list of the kernel's arrays, outputs included, got NoneType"),
        ("an array too few", lambda c: c.nb.measure("k", KERNEL, c.vectors()[:2]), ValueError,
         "the kernel takes 3 arrays (A, B, C), got 2"),
        ("shape", lambda c: c.nb.measure("k", KERNEL, c.vectors(4095)), ValueError,
         "array A has shape (4095,), but the kernel's buffer A is (4096,)"),
        ("dtype", lambda c: c.nb.measure("k", KERNEL, c.vectors(dtype="float64")), ValueError,
         "array A has dtype float64, but the kernel's buffer A is float32"),
        ("a list for an array", lambda c: c.nb.measure("k", KERNEL, [[1.0] * 4096] * 3), TypeError,
         "array A is a list; pass a NumPy array or a tvm.runtime.Tensor"),
        ("kernel", lambda c: c.nb.measure("k", "vector add", c.vectors()), TypeError,
         "expected a tvm.s_tir.Schedule, IRModule or PrimFunc, got str"),
        ("name empty", lambda c: c.nb.measure("", KERNEL, c.vectors()), ValueError,
         "a measurement's name must be a non-empty string, got ''"),
    ],
    "Session.torch_op": [
        ("no function", lambda c: c.nb.torch_op("t", None, c.vectors()), TypeError,
         "fn must be a function of (torch, *tensors), got NoneType"),
        ("no arrays", lambda c: c.nb.torch_op("t", lambda torch, x: x, []), TypeError,
         "arrays must be a non-empty list of NumPy arrays, got []"),
        ("lists for arrays", lambda c: c.nb.torch_op("t", lambda torch, x: x, [[1, 2]]), TypeError,
         "arrays must be a non-empty list of NumPy arrays"),
        ("bytes negative", lambda c: c.nb.torch_op("t", lambda torch, x: x, c.vectors(), bytes=-8), ValueError,
         "bytes must be a positive number or None, got -8"),
        ("flops infinite", lambda c: c.nb.torch_op("t", lambda torch, x: x, c.vectors(), flops=math.inf), ValueError,
         "flops must be a positive number or None, got inf"),
        ("repeat zero", lambda c: c.nb.torch_op("t", lambda torch, x: x, c.vectors(), repeat=0), ValueError,
         "repeat must be a positive integer, got 0"),
        ("name empty", lambda c: c.nb.torch_op("", lambda torch, x: x, c.vectors()), ValueError,
         "a measurement's name must be a non-empty string"),
    ],
    "Session.cublas_matmul": [  # refused with or without a GPU: a mistyped dtype is not told to find one
        ("dtype unknown", lambda c: c.nb.cublas_matmul(64, 64, 64, "flaot32"), ValueError,
         f"dtype 'flaot32' is not supported here: {DTYPES}"),
        ("dtype integer", lambda c: c.nb.cublas_matmul(64, 64, 64, "int8"), ValueError, "dtype 'int8'"),
        ("C dtype", lambda c: c.nb.cublas_matmul(64, 64, 64, "float16", out_dtype="bfloat16"), ValueError,
         f"out_dtype 'bfloat16' is not supported here: {DTYPES}"),
        ("empty problem", lambda c: c.nb.cublas_matmul(0, 64, 64), ValueError, "M must be a positive integer, got 0"),
        ("N negative", lambda c: c.nb.cublas_matmul(64, -64, 64), ValueError, "N must be a positive integer, got -64"),
        ("K fraction", lambda c: c.nb.cublas_matmul(64, 64, 2.5), ValueError, "K must be a positive integer, got 2.5"),
        ("M NaN", lambda c: c.nb.cublas_matmul(math.nan, 64, 64), ValueError, "M must be a positive integer, got nan"),
        ("M text", lambda c: c.nb.cublas_matmul("64", 64, 64), ValueError, "M must be a positive integer, got '64'"),
        ("repeat zero", lambda c: c.nb.cublas_matmul(64, 64, 64, repeat=0), ValueError,
         "repeat must be a positive integer, got 0"),
    ],
    "Session.record": [  # on a live session: without a GPU, record shows the recorded number instead
        ("time negative", lambda c: c.live.record("r", -1.0), ValueError,
         "ms must be a positive number (milliseconds; None only with source='missing'), got -1.0"),
        ("time NaN", lambda c: c.live.record("r", math.nan), ValueError, "ms must be a positive number"),
        ("time infinite", lambda c: c.live.record("r", math.inf), ValueError, "got inf"),
        ("time zero", lambda c: c.live.record("r", 0.0), ValueError, "got 0.0"),
        ("no time", lambda c: c.live.record("r", None), ValueError, "None only with source='missing'), got None"),
        ("time text", lambda c: c.live.record("r", "0.5"), ValueError, "got '0.5'"),
        ("flops negative", lambda c: c.live.record("r", 1.0, flops=-2.0), ValueError,
         "flops must be a positive number or None, got -2.0"),
        ("an unknown field", lambda c: c.live.record("r", 1.0, milliseconds=1.0), TypeError, "'milliseconds'"),
        ("name empty", lambda c: c.live.record("", 1.0), ValueError, "a measurement's name must be a non-empty string"),
    ],
    "Session.copy_ceiling": [  # the course's fixed copy: nothing to choose
        ("an argument", lambda c: c.nb.copy_ceiling(1 << 20), TypeError, "takes 1 positional argument but 2 were given"),
    ],
    "Session.fits": [
        ("bytes negative", lambda c: c.nb.fits(-1, "instead"), ValueError,
         "shared_bytes must be a non-negative integer (bytes per block), got -1"),
        ("bytes NaN", lambda c: c.nb.fits(math.nan, "instead"), ValueError, "got nan"),
        ("bytes as text", lambda c: c.nb.fits("48 KB", "instead"), ValueError, "got '48 KB'"),
    ],
    "Session.supports": [
        ("feature", lambda c: c.nb.supports("tensor core", "instead"), ValueError,
         "unknown feature 'tensor core': one of tensor cores, cp.async, ldmatrix + mma.sync m16n8k16, wgmma + TMA"),
    ],
    "Measurement": [
        ("time negative", lambda c: m(ms=-1.0), ValueError, "ms must be a positive number (milliseconds; None only"),
        ("time NaN", lambda c: m(ms=math.nan), ValueError, "got nan"),
        ("time infinite", lambda c: m(ms=-math.inf), ValueError, "got -inf"),
        ("time zero", lambda c: m(ms=0), ValueError, "got 0"),
        ("no time, not missing", lambda c: m(ms=None, source="recorded"), ValueError, "got None"),
        ("time text", lambda c: m(ms="1.0"), ValueError, "got '1.0'"),
        ("time boolean", lambda c: m(ms=True), ValueError, "got True"),
        ("flops negative", lambda c: m(flops=-1e9), ValueError, "flops must be a positive number or None"),
        ("bytes NaN", lambda c: m(bytes=math.nan), ValueError, "bytes must be a positive number or None, got nan"),
        ("error negative", lambda c: m(rel_err=-1e-7), ValueError, "rel_err must be a non-negative number or None"),
        ("ratio zero", lambda c: m(ratio=0.0), ValueError, "ratio must be a positive number or None, got 0.0"),
        ("baseline time infinite", lambda c: m(baseline_ms=math.inf), ValueError, "baseline_ms must be a positive"),
        ("source", lambda c: m(source="lived"), ValueError, "source must be 'live', 'recorded' or 'missing', got 'lived'"),
        ("traffic", lambda c: m(traffic="dram"), ValueError, "traffic is None (bytes = the minimal DRAM traffic)"),
        ("dtype", lambda c: m(dtype="float8"), ValueError,
         "dtype 'float8' is not an element type NumPy knows: the course's are float16, float32, float64"),
        ("name empty", lambda c: m(name=""), ValueError, "a measurement's name must be a non-empty string, got ''"),
        ("name a number", lambda c: m(name=3), ValueError, "got 3"),
    ],
    "build": [
        ("kernel", lambda c: helpers.build("vector add"), TypeError, "expected a tvm.s_tir.Schedule, IRModule or PrimFunc"),
        ("arch", lambda c: helpers.build(KERNEL, "sm_999"), ValueError, f"unknown GPU architecture 'sm_999': {ARCHS}"),
        ("target number", lambda c: helpers.build(KERNEL, 90), ValueError,
         "TVM rejected the target 90: target has to be a string or dictionary"),
        ("target of TVM 0.1x", lambda c: helpers.build(KERNEL, "cuda -arch=sm_80"), ValueError,
         "Write a target as a tag ('nvidia/nvidia-h100'), a dict ({'kind': 'cuda', 'arch': 'sm_80'}) or an arch ('sm_80')"),
        ("pipeline", lambda c: helpers.build(KERNEL, tir_pipeline="fast"), ValueError,
         "Unknown pre-built pipeline fast,candidates are ['default', 'tirx'"),
        ("a size zero", lambda c: helpers.build(c.notebook("03_matmul_local_blocking").threads_1d(0, 64, 64)), ValueError,
         "main's array A has size 0 in dimension 0 (shape (0, 64)): every size must be a positive integer"),
    ],
    "make_target": [
        ("arch 999", lambda c: helpers.make_target("sm_999"), ValueError, "unknown GPU architecture 'sm_999'"),
        ("arch empty", lambda c: helpers.make_target("sm_"), ValueError, "unknown GPU architecture 'sm_'"),
        ("arch variant of an arch without one", lambda c: helpers.make_target("sm_80a"), ValueError, "'sm_80a'"),
        ("arch in a dict", lambda c: helpers.make_target({"kind": "cuda", "arch": "sm_100"}), ValueError,
         f"unknown GPU architecture 'sm_100': {ARCHS}"),
        ("arch missing from a dict", lambda c: helpers.make_target({"kind": "cuda", "arch": None}), ValueError,
         "unknown GPU architecture None"),
        ("arch as a number", lambda c: helpers.make_target(80), ValueError, "TVM rejected the target 80"),
        ("arch in capitals", lambda c: helpers.make_target("SM_80"), ValueError,
         "TVM rejected the target 'SM_80': Target kind \"SM_80\" is not defined"),
        ("kind", lambda c: helpers.make_target({"kind": "cdua", "arch": "sm_80"}), ValueError, "Target kind \"cdua\""),
        ("tag", lambda c: helpers.make_target("nvidia/nvidia-h1000"), ValueError,
         "TVM rejected the target 'nvidia/nvidia-h1000'"),
    ],
    "cuda_source": [
        ("arch of a listing", lambda c: helpers.cuda_source(bound_vector_add(), target="sm_42"), ValueError, "'sm_42'"),
    ],
    "autotune.search": [
        ("arch of a search", lambda c: autotune.search(SMALL, [], None, c.tmp / "w", inputs=[], expected=None,
                                                       target="sm_91"), ValueError, "'sm_91'"),
    ],
    "tuning.tune": [
        ("arch of a tuning", lambda c: tuning.tune(SMALL, c.tmp / "w", trials=4, target="sm_5"), ValueError, "'sm_5'"),
        ("minutes zero", lambda c: tuning.tune(SMALL, c.tmp / "w", trials=4, minutes=0), ValueError,
         "minutes must be a positive number (the time limit of the search) or None, got 0"),
        ("minutes NaN", lambda c: tuning.tune(SMALL, c.tmp / "w", trials=4, minutes=math.nan), ValueError, "got nan"),
        ("build timeout", lambda c: tuning.tune(SMALL, c.tmp / "w", trials=4, build_timeout=-5), ValueError,
         "build_timeout must be a positive number (the seconds one candidate may take to build), got -5"),
        ("build timeout text", lambda c: tuning.tune(SMALL, c.tmp / "w", trials=4, build_timeout="120"), ValueError,
         "got '120'"),
    ],
    "arch_constants": [
        ("compute capability", lambda c: helpers.arch_constants("sm_90"), ValueError, "compute capability sm_90"),
    ],
    "baselines.cublas_time": [
        ("warm-up calls", lambda c: baselines.cublas_time(8, 8, 8, warmup=-1), ValueError,
         "warmup must be a non-negative integer, got -1"),
        ("rounds", lambda c: baselines.cublas_time(8, 8, 8, repeat=2.5), ValueError, "repeat must be a positive integer, got 2.5"),
        ("cuBLAS dtype", lambda c: baselines.cublas_time(64, 64, 64, "int8"), ValueError, "dtype 'int8' is not supported here"),
        ("cuBLAS M zero", lambda c: baselines.cublas_time(0, 64, 64), ValueError, "M must be a positive integer, got 0"),
    ],
    "baselines.cublas_call": [
        ("cuBLAS C dtype", lambda c: baselines.cublas_call(64, 64, 64, "float16", out_dtype="bfloat16"), ValueError,
         "out_dtype 'bfloat16'"),
        ("cuBLAS N negative", lambda c: baselines.cublas_call(64, -1, 64), ValueError, "N must be a positive integer, got -1"),
    ],
    "tuning.matmul_workload": [
        ("workload sums", lambda c: tuning.matmul_workload(64, 64, 64, acc_dtype="float8"), ValueError, "acc_dtype 'float8'"),
        ("workload K fraction", lambda c: tuning.matmul_workload(64, 64, 2.5), ValueError, "K must be a positive integer, got 2.5"),
        ("workload M boolean", lambda c: tuning.matmul_workload(True, 64, 64), ValueError, "M must be a positive integer, got True"),
        ("workload N text", lambda c: tuning.matmul_workload(64, "64", 64), ValueError, "N must be a positive integer, got '64'"),
    ],
    "table": [
        ("no list", lambda c: helpers.table(None), TypeError, f"measurements {LIST}, got None"),
        ("numbers for measurements", lambda c: helpers.table([1.5, 2.0]), TypeError, f"measurements {LIST}, got [1.5, 2.0]"),
        ("baseline by name", lambda c: helpers.table([m()], baseline="cuBLAS"), TypeError,
         "baseline must be a Measurement (what Session.measure returns), got 'cuBLAS'"),
        ("ceiling negative", lambda c: helpers.table([m(bytes=1e9)], ceiling_gbps=-1), ValueError,
         "ceiling_gbps must be a positive number (the copy's GB/s) or None, got -1"),
        ("ceiling NaN", lambda c: helpers.table([m(bytes=1e9)], ceiling_gbps=math.nan), ValueError, "got nan"),
        ("ceiling zero", lambda c: helpers.table([m(bytes=1e9)], ceiling_gbps=0), ValueError, "got 0"),
    ],
    "text_table": [
        ("text", lambda c: helpers.text_table("kernel"), TypeError,
         "rows must be a list of rows (lists of cells), the header first, got 'kernel'"),
        ("a row as text", lambda c: helpers.text_table([("kernel", "ms"), "add 1.0"]), TypeError, "rows must be a list of rows"),
        ("no rows", lambda c: helpers.text_table([]), ValueError, "rows is empty: a table needs its header row at least"),
        ("a short row", lambda c: helpers.text_table([("kernel", "ms"), ("add",)]), ValueError,
         "every row needs the header's 2 cells, got ('add',)"),
        ("None", lambda c: helpers.text_table(None), TypeError, "got None"),
    ],
    "roofline": [
        ("no spec", lambda c: helpers.roofline(None), ValueError, "no GPU spec: a roofline needs a GPU's (live or recorded) peaks"),
        ("bandwidth unknown", lambda c: helpers.roofline(spec(dram_gbps=None)), ValueError,
         "the DRAM bandwidth of NVIDIA H100 80GB HBM3 is unknown, so its roofline has no slope"),
        ("bandwidth negative", lambda c: helpers.roofline(spec(dram_gbps=-3352.0)), ValueError,
         "the spec's dram_gbps must be a positive number (GB/s), got -3352.0"),
        ("bandwidth NaN", lambda c: helpers.roofline(spec(dram_gbps=math.nan)), ValueError, "got nan"),
        ("compute capability", lambda c: helpers.roofline(spec(compute_capability="9.9")), ValueError,
         "(compute capability 9.9): no per-SM rates for it"),
        ("points as text", lambda c: helpers.roofline(SPEC, "add"), TypeError, f"points {LIST}, got 'add'"),
        ("measured bandwidth negative", lambda c: helpers.roofline(SPEC, measured_bandwidth=-5), ValueError,
         "measured_bandwidth must be a positive number (GB/s) or None, got -5"),
        ("measured compute NaN", lambda c: helpers.roofline(SPEC, measured_compute={"cuBLAS": math.nan}), ValueError,
         "measured_compute['cuBLAS'] must be a positive number (TFLOP/s), got nan"),
        ("labels", lambda c: helpers.roofline(SPEC, labels="some"), ValueError,
         "labels is 'auto', 'all', 'none' or a set of kernel names, got 'some'"),
    ],
    "versus_baseline": [
        ("no baseline", lambda c: helpers.versus_baseline([m(flops=1e9)], None), TypeError,
         "baseline must be a Measurement (what Session.measure returns), got None"),
        ("baseline by name", lambda c: helpers.versus_baseline([m(flops=1e9)], "cuBLAS"), TypeError, "got 'cuBLAS'"),
        ("baseline missing", lambda c: helpers.versus_baseline([m(flops=1e9)], m("cuBLAS", None, source="missing")),
         ValueError, "the baseline 'cuBLAS' has no result to compare with"),
        ("no kernel with a rate", lambda c: helpers.versus_baseline([m()], m("cuBLAS", flops=1e9)), ValueError,
         "none of the points has a result in TFLOP/s to compare with the baseline"),
        ("numbers for points", lambda c: helpers.versus_baseline([1.0], m("cuBLAS", flops=1e9)), TypeError,
         f"points {LIST}, got [1.0]"),
    ],
    "require_divides": [
        ("extent negative", lambda c: helpers.require_divides(-64, 8), ValueError, "extent must be a positive integer, got -64"),
        ("extent fraction", lambda c: helpers.require_divides(64.5, 8), ValueError, "extent must be a positive integer, got 64.5"),
        ("factor zero", lambda c: helpers.require_divides(64, 0), ValueError, "tile factor must be positive, got 0"),
        ("factor fraction", lambda c: helpers.require_divides(64, 2.5), ValueError,
         "tile factor must be a positive integer, got 2.5"),
        ("factor NaN", lambda c: helpers.require_divides(64, math.nan, "k tile (tk)"), ValueError,
         "k tile (tk) factor must be a positive integer, got nan"),
        ("factor text", lambda c: helpers.require_divides(64, "8"), ValueError, "got '8'"),
        ("factor boolean", lambda c: helpers.require_divides(64, True), ValueError, "got True"),
        ("factor that does not divide", lambda c: helpers.require_divides(1000, 64, "block tile rows (by*ly)"), ValueError,
         "block tile rows (by*ly) factor 64 does not divide the extent 1000 (1000 = 15 x 64 + 40): pad the shape to 1024 "
         "or choose a factor that divides 1000"),
    ],
    "attention.check_shape": [
        ("head dim", lambda c: attention.check_shape(4096, 96, 64), ValueError, HEAD_DIM_96),
        ("head dim fraction", lambda c: attention.check_shape(4096, 64.0, 64), ValueError, "head dimension 64.0"),
        ("sequence", lambda c: attention.check_shape(1000, 64, 64), ValueError, SEQUENCE_1000),
        ("sequence empty", lambda c: attention.check_shape(0, 64, 64), ValueError, SEQUENCE_EMPTY),
        ("sequence negative", lambda c: attention.check_shape(-128, 64, 64), ValueError, "got -128"),
        ("sequence NaN", lambda c: attention.check_shape(math.nan, 64, 64), ValueError, "got nan"),
        ("tile rows", lambda c: attention.check_shape(128, 64, 0), ValueError, "the tile's rows must be a positive integer, got 0"),
    ],
    "attention.attention_flops": [
        ("batch zero", lambda c: attention.attention_flops(0, 16, 1024, 64), ValueError, "b must be a positive integer, got 0"),
        ("head dim NaN", lambda c: attention.attention_flops(1, 16, 1024, math.nan), ValueError,
         "d must be a positive integer, got nan"),
    ],
    "attention.qkv": [
        ("sequence negative", lambda c: attention.qkv(1, 16, -1, 64, live=False), ValueError,
         "n must be a positive integer, got -1"),
        ("heads fraction", lambda c: attention.qkv(1, 2.5, 64, 64, live=False), ValueError,
         "h must be a positive integer, got 2.5"),
    ],
    "attention_steps.row_statistics_case": [
        ("statistic", lambda c: attention_steps.row_statistics_case(np.empty((1, 64, 64), "float16"),
                                                                    np.empty((1, 64, 64), "float16"), "mean"),
         ValueError, "what is 'max' or 'logsumexp', not 'mean'"),
    ],
    "records.load": [
        ("a folder", lambda c: records.load(c.tmp), records.RecordError, "is a folder, not a results file"),
        ("not JSON", lambda c: records.load(write(c.tmp / "01_vector_add.json", "{")), records.RecordError,
         "results file 01_vector_add.json in"),
        ("no measurements", lambda c: records.load(write(c.tmp / "x.json", '{"gpu": "G"}')), records.RecordError,
         "lacks ['measurements']: it is not a course results file"),
    ],
    "recorded_measurements": [
        ("a record's time negative", lambda c: helpers.recorded_measurements(recorded(c, {"name": "add", "ms": -0.25})),
         records.RecordError,
         "the recorded measurement 'add' of 01_vector_add on Test GPU: ms must be a positive number"),
        ("a record not a table", lambda c: helpers.recorded_measurements(recorded(c, 0.25)), records.RecordError,
         "results file 01_vector_add.json in test-gpu/ has a measurement that is not a table of fields"),
        ("notebook", lambda c: helpers.recorded_measurements("99_no_such_notebook"), ValueError,
         f"no notebook named '99_no_such_notebook' in notebooks/: {NOTEBOOKS}"),
        ("notebook with its suffix", lambda c: helpers.recorded_measurements("01_vector_add.ipynb"), ValueError,
         "no notebook named '01_vector_add.ipynb'"),
    ],
    "records.gpu_slug": [
        ("no letters", lambda c: records.gpu_slug("***"), ValueError, "cannot make a folder name from the GPU name '***'"),
        ("a number", lambda c: records.gpu_slug(100), TypeError, "a GPU's name is a string, got 100"),
    ],
    "experiment_table": [
        ("log", lambda c: helpers.experiment_table("no_such_log", "x"), FileNotFoundError,
         "no experiment tables no_such_log.json in"),
        ("title", lambda c: helpers.experiment_table("00_ceilings.sweep", "no such title"), ValueError,
         "00_ceilings.sweep.json has no table whose title or header contains 'no such title'"),
    ],
    "occupancy": [
        ("threads zero", lambda c: helpers.occupancy(SPEC, 0, 32), ValueError, "threads_per_block must be a positive integer"),
        ("threads too many", lambda c: helpers.occupancy(SPEC, 2048, 32), ValueError,
         "threads_per_block must be in 1..1024, got 2048"),
        ("threads fraction", lambda c: helpers.occupancy(SPEC, 128.5, 32), ValueError, "got 128.5"),
        ("registers", lambda c: helpers.occupancy(SPEC, 128, 300), ValueError, "registers_per_thread must be in 1..255, got 300"),
        ("shared memory NaN", lambda c: helpers.occupancy(SPEC, 128, 32, math.nan), ValueError,
         "shared_bytes_per_block must be a non-negative integer, got nan"),
    ],
    "fit_listing": [
        ("no lines", lambda c: helpers.fit_listing("a\nb", 0), ValueError, "lines must be a positive integer, got 0"),
        ("width zero", lambda c: helpers.fit_listing("a\nb", 40, 0), ValueError,
         "width must be a positive integer (characters), got 0"),
    ],
    "tir_listing": [
        ("kernel", lambda c: helpers.tir_listing("main"), TypeError, "expected a tvm.s_tir.Schedule, IRModule or PrimFunc"),
    ],
    "helpers.lessons": [
        ("notebook", lambda c: lessons.lesson("10_flash"), ValueError,
         "no notebook named '10_flash' (without .ipynb) in notebooks/"),
        ("topic", lambda c: importlib.import_module("helpers.lessons.flash_atention"), ModuleNotFoundError,
         "no lesson named 'flash_atention': the lessons are gpu_architecture, vector_add"),
    ],
    "run": [
        ("an array too many", lambda c: helpers.run(KERNEL, c.vectors() * 2), ValueError,
         "the kernel takes 3 arrays (A, B, C), got 6"),
    ],
    "relative_error": [
        ("shapes", lambda c: helpers.relative_error(np.zeros(3), np.zeros(4)), ValueError,
         "output shape (3,) differs from the reference's (4,)"),
    ],
    "kernels.copy_kernel": [
        ("threads that do not divide", lambda c: kernels.copy_kernel(1000, 256, 4), ValueError,
         "threads x vector factor 1024 does not divide the extent 1000"),
        ("threads zero", lambda c: kernels.copy_kernel(1 << 20, 0), ValueError,
         "threads must be a positive integer, got 0"),
        ("vector of 16 floats", lambda c: kernels.copy_kernel(1 << 20, 256, 16), ValueError,
         "vector must be 1, 2 or 4 floats (one load of 4, 8 or 16 bytes per thread), got 16"),
        ("vector of 3 floats", lambda c: kernels.copy_kernel(3 << 18, 256, 3), ValueError, "got 3"),
        ("vector fraction", lambda c: kernels.copy_kernel(1 << 20, 256, 4.0), ValueError, "got 4.0"),
    ],
    # the schedule-building functions the notebooks define: tile factors, row lengths, head dims
    "03 threads_1d": [
        ("tx", lambda c: c.notebook("03_matmul_local_blocking").threads_1d(1024, 512, 2048, tx=48), ValueError,
         "threads per block (tx) factor 48 does not divide the extent 512 (512 = 10 x 48 + 32): pad the shape to 528"),
    ],
    "03 threads_2d": [
        ("ty", lambda c: c.notebook("03_matmul_local_blocking").threads_2d(1000, 512, 2048), ValueError,
         "threads per block along i (ty) factor 32 does not divide the extent 1000"),
    ],
    "03 local_blocking": [
        ("k tile", lambda c: c.notebook("03_matmul_local_blocking").local_blocking(1024, 512, 2048, (4, 4, 16, 16, 24)),
         ValueError, "k tile (tk) factor 24 does not divide the extent 2048"),
        ("thread tile fraction", lambda c: c.notebook("03_matmul_local_blocking").local_blocking(
            1024, 512, 2048, (4, 4.5, 16, 16, 8)), ValueError, "block tile columns (bx*lx) factor must be a positive integer, got 72.0"),
    ],
    "07 check_tiles": [
        ("block columns", lambda c: c.notebook("07_hopper_wgmma_tma").check_tiles(4096, 4096, 4096, 128, 96), ValueError,
         "4096x4096x4096 does not tile by 128 x 96 x 64 with blocks of 128 rows"),
    ],
    "09 plan": [
        ("row length", lambda c: c.notebook("09_reductions").plan(1000, "float16"), ValueError,
         "threads x vector factor 256 does not divide the extent 1000"),
        ("row length odd", lambda c: c.notebook("09_reductions").plan(1001, "float16"), ValueError,
         "a row of 1001 float16 values cannot be cut into 16-byte vectors"),
        ("dtype", lambda c: c.notebook("09_reductions").plan(4096, "int8"), ValueError, "rows of float16 or float32, not 'int8'"),
    ],
    "09 softmax": [
        ("dtype", lambda c: c.notebook("09_reductions").softmax(64, 64, "bfloat16"), ValueError,
         "softmax takes float16 or float32 rows, not 'bfloat16'"),
    ],
    "09 online_softmax": [
        ("lanes", lambda c: c.notebook("09_reductions").online_softmax(64, 100, 32), ValueError, LANES_100),
        ("lanes zero", lambda c: c.notebook("09_reductions").online_softmax(64, 128, 0), ValueError,
         "lanes factor must be positive, got 0"),
    ],
    "09 layer_norm": [
        ("lanes", lambda c: c.notebook("09_reductions").layer_norm(64, 100, 32), ValueError, LANES_100),
        ("row empty", lambda c: c.notebook("09_reductions").layer_norm(64, 0, 32), ValueError,
         "extent must be a positive integer, got 0"),
    ],
    "12 plan": [
        ("batch zero", lambda c: c.notebook("12_decoding").plan(0, 8192, 132), ValueError,
         "batch, length, SMs and KV heads must be positive, got (0, 8192, 132, 8)"),
    ],
    "12 decode_split": [
        ("heads", lambda c: c.notebook("12_decoding").decode_split(8, 8192, 32, 6, 128, 4, 2048), ValueError,
         "32 query heads are not a multiple of 6 KV heads"),
        ("head dim", lambda c: c.notebook("12_decoding").decode_split(8, 8192, 32, 8, 64, 4, 2048), ValueError,
         "head dimension 64 is not supported: the kernels take 128"),
    ],
    "helpers.decode.check_paged": [
        ("page outside", lambda c: helpers.decode.check_paged(np.zeros((4, 2, 8, 16, 128), "float16"),
                                                              np.array([[0, 4]], "int32"), np.array([20])), ValueError,
         "sequence 0 names page 4, outside the cache's 4 pages"),
        ("length above pages", lambda c: helpers.decode.check_paged(np.zeros((4, 2, 8, 16, 128), "float16"),
                                                                    np.array([[0, 1]], "int32"), np.array([33])),
         ValueError, "sequence 0 has length 33, above the 2 pages of 16 tokens"),
        ("length zero", lambda c: helpers.decode.check_paged(np.zeros((4, 2, 8, 16, 128), "float16"),
                                                             np.array([[0, 1]], "int32"), np.array([0])),
         ValueError, "sequence 0 has length 0: a decoding step needs at least one token"),
    ],
    "10 flash_attention": [
        ("head dim", lambda c: c.notebook("10_flash_attention").flash_attention(16, 4096, 96), ValueError, HEAD_DIM_96),
        ("sequence", lambda c: c.notebook("10_flash_attention").flash_attention(16, 1000, 64), ValueError,
         SEQUENCE_1000),
        ("sequence empty", lambda c: c.notebook("10_flash_attention").flash_attention(16, 0, 64), ValueError,
         SEQUENCE_EMPTY),
    ],
    "10 flash_attention_pipelined": [
        ("sequence", lambda c: c.notebook("10_flash_attention").flash_attention_pipelined(16, 1000, 128), ValueError,
         SEQUENCE_1000),
        ("head dim fraction", lambda c: c.notebook("10_flash_attention").flash_attention_pipelined(16, 1024, 128.0),
         ValueError, "head dimension 128.0 is not supported"),
    ],
}


def write(path, text):
    path.write_text(text)
    return path


def recorded(c, entry) -> str:
    """Notebook 01's results file on the test GPU holding `entry` (as edited by hand) as its one measurement."""
    if isinstance(entry, dict):
        entry |= {"notebook": "01_vector_add", "gpu": "Test GPU"}
    (c.tmp / "test-gpu").mkdir(exist_ok=True)
    write(c.tmp / "test-gpu" / "01_vector_add.json", json.dumps({"gpu": "Test GPU", "measurements": {"add": entry}}))
    return "01_vector_add"


@pytest.mark.parametrize("call, error, said", [pytest.param(call, error, said, id=f"{entry}: {wrong}")
                                               for entry, cases in ERROR_INPUTS.items()
                                               for wrong, call, error, said in cases])
def test_every_entry_point_refuses_its_error_inputs(call, error, said, context, capsys):
    """The exception the table names (that type, not a subclass or a parent) with its text, raised
    before anything was printed and before any work folder was made."""
    capsys.readouterr()
    with pytest.raises(error, match=re.escape(said)) as refused:
        call(context)
    assert refused.type is error
    assert capsys.readouterr().out == ""  # refused before any banner or line was printed
    assert not (context.tmp / "w").exists()  # and before any work directory was made


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
                              "11_flash_attention_hopper, 12_decoding")
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


def test_good_arguments_of_the_new_checks_are_still_accepted(results_dir):
    if helpers.gpu_available():
        pytest.skip("tests the no-GPU path: a live session records only real times")
    """What the notebooks pass where this table refuses: a missing measurement has no time, 0 is a
    tolerance (exact), NumPy integers are sizes, a generator gives rows, a placeholder time is fine
    where the record is shown instead (03 and 06 call `record(name, 0.0)` and `record(name, None)`)."""
    assert helpers.Measurement("gone", None, source="missing").ok is False
    assert helpers.Measurement("k", np.float32(0.5), flops=np.int64(2), rel_err=0.0, dtype="float16").tflops
    nb = bench.Session("01_vector_add", quiet=True)
    assert not nb.record("NumPy CPU fp32", 0.0).ok and not nb.record("MetaSchedule (live)", None).ok
    assert nb.cublas_matmul(np.int64(64), 64, 64, "float16", out_dtype="float32", quiet=True).source == "missing"
    assert nb.fits(0, "instead") and nb.fits(np.int64(48 * 1024), "instead")
    assert helpers.text_table(([name, "1"] for name in ("kernel", "add"))) == "kernel  1\n------  -\nadd     1"
    assert helpers.text_table([("kernel", "ms"), ("add", "1.0", "a cell beyond the header's")]).endswith("add     1.0")
    helpers.require_divides(np.int64(4096), np.int32(128))
    attention.check_shape(np.int64(1024), np.int64(128), 64)
    assert helpers.occupancy(SPEC, np.int64(256), 32, 0).blocks_per_sm == 8
    assert helpers.fit_listing("a\nb", 1, wraps=0) == "// ... (2 more lines)"


def test_every_committed_record_is_a_sound_measurement():
    """The records the notebooks show pass Measurement's checks: none is refused on the valid path."""
    count = 0
    for folder in sorted(p for p in records.RESULTS_DIR.iterdir() if p.is_dir()):
        for path in sorted(folder.glob("[0-9][0-9]_*.json")):
            count += len(helpers.recorded_measurements(path.stem, folder.name))
    assert count > 500


# Nothing half-done: with recording on, what is refused writes nothing.

def _files(folder) -> dict:
    """Every file under `folder`, temporary ones included, with its bytes."""
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("refused", [
    pytest.param(lambda nb, a, b, exact: nb.measure("add", WRITES_NAN, [a, b, np.empty_like(a)], exact, repeat=1),
                 id="a kernel that fails its check"),
    pytest.param(lambda nb, a, b, exact: nb.measure("add", ADD, [a, b, np.empty_like(a)], exact, flops=-1, repeat=1),
                 id="a bad argument"),
    pytest.param(lambda nb, a, b, exact: nb.record("torch add", math.nan), id="a time no kernel has"),
    pytest.param(lambda nb, a, b, exact: nb.baseline("torch add", lambda: -0.5, repeat=3), id="a baseline timed wrong"),
])
def test_a_refused_measurement_writes_no_record(context, monkeypatch, refused):
    """With COURSE_RECORD=1, a measurement refused or failing its check leaves the results folder (a
    temporary one here) byte for byte as it was: no record, no partial or temporary file. The same
    session then records a good one there, so the folder compared is the one recording writes to."""
    monkeypatch.setenv("COURSE_RECORD", "1")
    nb, a, b = context.live, np.arange(64, dtype="float32"), np.ones(64, "float32")
    exact = a.astype("float64") + b
    before = _files(context.tmp)
    with pytest.raises((ValueError, helpers.WrongResult)):
        refused(nb, a, b, exact)
    assert _files(context.tmp) == before and nb.results == []
    nb.measure("add", ADD, [a, b, np.empty_like(a)], exact, repeat=1, quiet=True)
    assert set(records.load(context.tmp / "test-gpu" / "01_vector_add.json")["measurements"]) == {"recorded", "add"}
    assert _files(context.tmp).keys() == before.keys()


def test_a_recording_stopped_mid_write_leaves_the_old_file_whole(context, monkeypatch):
    """The records are written to a temporary file, then renamed onto the old one: stopped between the
    two (here the rename fails), the old file is whole and no temporary file is left."""
    monkeypatch.setenv("COURSE_RECORD", "1")
    nb, a, b = context.live, np.arange(64, dtype="float32"), np.ones(64, "float32")
    before = _files(context.tmp)

    def stopped(src, dst):
        raise OSError("No space left on device")

    monkeypatch.setattr(records.os, "replace", stopped)
    with pytest.raises(OSError, match="No space left on device"):
        nb.measure("add", ADD, [a, b, np.empty_like(a)], a.astype("float64") + b, repeat=1, quiet=True)
    assert _files(context.tmp) == before
