"""A fuzzer over helpers' entry points: hypothesis draws the arguments tests/test_error_inputs.py does
not list, around each entry point: negative, zero, NaN, infinite, huge and fractional numbers, booleans,
NumPy scalars, numbers as text, unknown dtypes and architectures, shapes that do not divide.

Each call must end in a sound result or a refusal of the course's own kind: a ValueError or TypeError
(or the course's subclasses) raised by the course's code, whose message names the argument. Never an
error from inside TVM, never another exception, and never a silent acceptance: each test states which
arguments are sound, and the call must accept exactly those. Examples are derandomized, so CI draws the
same ones every run; the whole file takes well under a minute."""

import json
import math
import numbers
import re
import traceback

import matplotlib.pyplot as plt
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import helpers
from helpers import attention, env, kernels, records, tuning

from conftest import H100
from test_error_inputs import KERNEL, context, notebook  # noqa: F401  (fixtures: one definition of each)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # matplotlib on log axes of odd numbers

FUZZ = settings(max_examples=100, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
FEW = settings(FUZZ, max_examples=40)  # for calls that build a kernel or draw a chart

#: What a student might pass for a number: every kind of wrong, and a few right ones.
ODD = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, -1, 1, 0.5, -0.0, 1e300, 2**31, 2**40, True, False, None, np.int64(-8), np.int64(64),
                     np.float32("nan"), np.float64(64.0), "", "64", "nan", "1e3"]),
    st.text(max_size=4),
)
SIZES = st.one_of(st.integers(min_value=1, max_value=1 << 14), ODD)
#: Sizes for the notebooks' kernel functions: within int64, as TVMScript takes no larger integer (a
#: notebook's function is given it before helpers sees it, and fails in TVM's words).
SIZES_64 = SIZES.filter(lambda x: not isinstance(x, int) or -(2**63) <= x < 2**63)

COUNTS = st.one_of(st.none(), st.floats(min_value=1e-3, max_value=1e15), ODD)
DTYPES = st.one_of(st.sampled_from(list(kernels.MATMUL_DTYPES) + ["bfloat16", "int8", "float8", "fp32", "half", "Float32",
                                                                   "float32 ", ""]), st.text(max_size=8))
ARCHS = st.one_of(st.sampled_from(env.known_archs()), st.integers(-5, 1000).map("sm_{}".format),
                  st.integers(0, 200).map("sm_{}a".format), st.text(max_size=5).map("sm_{}".format))


def positive_int(x) -> bool:
    return isinstance(x, numbers.Integral) and not isinstance(x, bool) and x > 0


def natural(x) -> bool:
    """A non-negative integer (a count of bytes)."""
    return isinstance(x, numbers.Integral) and not isinstance(x, bool) and x >= 0


def positive_number(x) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool) and math.isfinite(x) and x > 0


def count(x) -> bool:
    """A count of FLOP or bytes, or none."""
    return x is None or positive_number(x)


def refusal(call, *names) -> str | None:
    """None if `call()` returned; the message if it refused in the course's own way: a ValueError or
    TypeError raised outside TVM, its message naming one of `names` (the arguments). Any other exception
    propagates, and fails the test."""
    try:
        call()
    except (ValueError, TypeError) as err:
        where = traceback.extract_tb(err.__traceback__)[-1].filename
        assert "tvm" not in where.split("site-packages")[-1], f"refused from inside TVM ({where}): {err!r}"
        assert any(re.search(rf"(?<!\w){re.escape(n)}(?!\w)", str(err)) for n in names), \
            f"{type(err).__name__}({str(err)!r}) names none of {names}"
        return str(err)
    return None


@FUZZ
@given(ms=st.one_of(st.floats(min_value=1e-4, max_value=1e4), ODD), flops=COUNTS, nbytes=COUNTS, rel_err=COUNTS,
       name=st.one_of(st.just("kernel"), st.text(max_size=3), ODD))
def test_measurement(ms, flops, nbytes, rel_err, name):
    sound = positive_number(ms) and count(flops) and count(nbytes) and (rel_err is None or rel_err == 0 or count(rel_err)) \
        and isinstance(name, str) and name != ""
    said = refusal(lambda: helpers.Measurement(name, ms, flops=flops, bytes=nbytes, rel_err=rel_err),
                   "ms", "flops", "bytes", "rel_err", "name")
    assert (said is None) == sound, said


@FUZZ
@given(extent=SIZES, factor=st.one_of(st.sampled_from([1, 2, 8, 32, 48, 128, 256]), ODD))
def test_require_divides(extent, factor):
    sound = positive_int(extent) and positive_int(factor) and extent % factor == 0
    said = refusal(lambda: helpers.require_divides(extent, factor, "k tile (tk)"), "extent", "k tile (tk) factor")
    assert (said is None) == sound, said
    if positive_int(extent) and positive_int(factor) and not sound:  # says what would divide
        assert f"pad the shape to {-(-extent // factor) * factor}" in said


@FUZZ
@given(n=st.one_of(st.integers(1, 8).map(lambda k: 512 * k), SIZES), d=st.one_of(st.sampled_from([64, 128, 96, 256]), ODD),
       rows=st.one_of(st.sampled_from([64, 128]), ODD))
def test_attention_check_shape(n, d, rows):
    sound = positive_int(n) and positive_int(rows) and n % rows == 0 and d in (64, 128) and positive_int(d)
    said = refusal(lambda: attention.check_shape(n, d, rows), "sequence length", "head dimension", "rows")
    assert (said is None) == sound, said


@FUZZ
@given(sizes=st.tuples(SIZES, SIZES, SIZES, SIZES))
def test_attention_sizes(sizes):
    """Sound sizes make a FLOP count, and inputs unless they exceed this machine's memory (said so)."""
    sound = all(map(positive_int, sizes))
    said = refusal(lambda: attention.attention_flops(*sizes), "b", "h", "n", "d")
    assert (said is None) == sound, said
    said = refusal(lambda: attention.qkv(*sizes, live=False), "b", "h", "n", "d")
    assert (said is None) == sound or sound and said.endswith("more than this machine can hold"), said


@FUZZ
@given(M=SIZES, N=SIZES, K=SIZES, dtype=DTYPES, out_dtype=st.one_of(st.none(), DTYPES),
       repeat=st.one_of(st.just(20), ODD))
def test_cublas_matmul_without_a_gpu(context, M, N, K, dtype, out_dtype, repeat):
    """Refused or not as on a GPU: the request is checked before the record is looked up."""
    sizes = all(map(positive_int, (M, N, K))) and positive_int(repeat)
    dtypes = dtype in kernels.MATMUL_DTYPES and out_dtype in (None, *kernels.MATMUL_DTYPES)
    said = refusal(lambda: context.nb.cublas_matmul(M, N, K, dtype, out_dtype=out_dtype, repeat=repeat, quiet=True),
                   "M", "N", "K", "dtype", "out_dtype", "repeat")
    assert (said is None) == (sizes and dtypes), said
    if sizes and not dtypes:
        assert said.endswith("use float16, float32, float64")  # a dtype error lists the dtypes


@FUZZ
@given(M=SIZES, N=SIZES, K=SIZES, dtype=DTYPES)
def test_matmul_workload(M, N, K, dtype):
    sound = all(map(positive_int, (M, N, K))) and dtype in kernels.MATMUL_DTYPES
    said = refusal(lambda: tuning.matmul_workload(M, N, K, dtype), "M", "N", "K", "dtype")
    assert (said is None) == sound, said


@FUZZ
@given(arch=ARCHS)
def test_make_target(arch):
    for spec in (arch, {"kind": "cuda", "arch": arch}):
        said = refusal(lambda: helpers.make_target(spec), repr(arch))
        assert (said is None) == (arch in env.known_archs()), said
        if said:
            assert "the course knows sm_60, sm_61, sm_70, sm_75, sm_80" in said  # an arch error lists them


@FUZZ
@given(threads=st.one_of(st.sampled_from([32, 256, 1024, 2048]), ODD), registers=st.one_of(st.sampled_from([32, 255, 256]), ODD),
       shared=st.one_of(st.sampled_from([0, 48 * 1024, 1 << 30]), ODD))
def test_occupancy(threads, registers, shared):
    sound = positive_int(threads) and threads <= 1024 and positive_int(registers) and registers <= 255 \
        and natural(shared)
    said = refusal(lambda: helpers.occupancy(H100, threads, registers, shared),
                   "threads_per_block", "registers_per_thread", "shared_bytes_per_block")
    assert (said is None) == sound, said
    if sound:
        assert 0 <= helpers.occupancy(H100, threads, registers, shared).occupancy <= 1


@FUZZ
@given(shared=st.one_of(st.sampled_from([0, 48 * 1024, 1 << 30]), ODD))
def test_session_fits(context, shared):
    sound = natural(shared)
    said = refusal(lambda: context.nb.fits(shared, "instead"), "shared_bytes")
    assert (said is None) == sound, said


@FUZZ
@given(flops=COUNTS, nbytes=COUNTS, tol=st.one_of(st.just(1e-5), ODD), repeat=st.one_of(st.just(20), ODD),
       out=st.one_of(st.sampled_from([-1, 2, 0, -3]), ODD))
def test_session_measure(context, flops, nbytes, tol, repeat, out):
    """Without a GPU: the kernel is built, the record shown (there is none here), or the call refused."""
    sound = count(flops) and count(nbytes) and (tol == 0 or count(tol) and tol is not None) and positive_int(repeat) \
        and isinstance(out, numbers.Integral) and not isinstance(out, bool) and -3 <= out < 3
    args = [np.ones(1 << 12, "float32") for _ in range(3)]
    said = refusal(lambda: context.nb.measure("k", KERNEL, args, flops=flops, bytes=nbytes, tol=tol, repeat=repeat,
                                              out=out, quiet=True), "flops", "bytes", "tol", "repeat", "out")
    assert (said is None) == sound, said


@FUZZ
@given(ms=st.one_of(st.floats(min_value=1e-4, max_value=1e4), ODD), flops=COUNTS)
def test_session_record_live(context, ms, flops):
    said = refusal(lambda: context.live.record("r", ms, flops=flops), "ms", "flops")
    assert (said is None) == (positive_number(ms) and count(flops)), said


@FUZZ
@given(rows=st.one_of(st.lists(st.lists(st.text(max_size=3), max_size=4), max_size=4), st.text(max_size=4)))
def test_text_table(rows):
    sound = isinstance(rows, list) and rows != [] and all(len(r) >= len(rows[0]) for r in rows)
    said = refusal(lambda: helpers.text_table(rows), "rows", "row")
    assert (said is None) == sound, said


@FUZZ
@given(ceiling=st.one_of(st.none(), st.floats(min_value=1, max_value=1e4), ODD))
def test_table_ceiling(ceiling):
    m = helpers.Measurement("copy", 1.0, bytes=2e9, source="recorded", gpu="G", date="2026-11-27")
    said = refusal(lambda: helpers.table([m], ceiling_gbps=ceiling), "ceiling_gbps")
    assert (said is None) == count(ceiling), said


@FEW
@given(dram=st.one_of(st.just(3352.0), ODD), measured=COUNTS)
def test_roofline(dram, measured):
    spec = helpers.GpuSpec(**(H100.to_dict() | {"dram_gbps": dram}))
    point = helpers.Measurement("k", 1.0, flops=1e12, bytes=1e9, source="recorded", gpu="G", date="2026-11-27")
    said = refusal(lambda: plt.close(helpers.roofline(spec, [point], measured_bandwidth=measured)),
                   "dram_gbps", "DRAM bandwidth", "measured_bandwidth")
    assert (said is None) == (positive_number(dram) and count(measured)), said


@FEW
@given(n=st.one_of(st.just(1 << 20), SIZES_64), threads=st.one_of(st.sampled_from([32, 256, 1024]), ODD),
       vector=st.one_of(st.sampled_from([1, 2, 4, 3, 8, 16]), ODD))
def test_copy_kernel(n, threads, vector):
    """Notebook 00's copy, as its exercise builds it (a block of more than 1024 threads is left to the
    exercise's own check, which says so in its words)."""
    sound = positive_int(n) and n < 2**31 and positive_int(threads) and vector in (1, 2, 4) and positive_int(vector) \
        and n % (threads * vector) == 0
    said = refusal(lambda: helpers.cuda_source(kernels.copy_kernel(n, threads, vector)),
                   "threads", "vector", "extent", "threads x vector factor", "A")
    assert (said is None) == sound, said


# The notebooks' schedule functions: what a student calls, then builds (as measure and cuda_source do).

@FEW
@given(n=st.one_of(st.integers(1, 64).map(lambda k: 256 * k), SIZES_64), dtype=DTYPES)
def test_plan_of_a_row_09(notebook, n, dtype):
    """A plan divides the row it is for, or the row length or dtype is refused."""
    found = []
    said = refusal(lambda: found.append(notebook("09_reductions").plan(n, dtype)), "row", "extent", "dtype",
                   "threads x vector factor", "rows of float16 or float32")
    if said is None:
        lanes, rows, vector = found[0]
        assert positive_int(n) and dtype in ("float16", "float32") and n % (lanes * vector) == 0


#: Head dimensions notebook 10's kernels reach `check_shape` with: they divide by D ** 0.5 first, so a zero
#: or a non-number fails in the notebook (ZeroDivisionError, TypeError) before helpers sees it.
HEAD_DIMS = st.one_of(st.sampled_from([64, 128, 96]), st.integers(-300, 300), st.floats()).filter(lambda d: d != 0)


@FEW
@given(bh=st.one_of(st.just(16), st.integers(min_value=-(2**62), max_value=2**62), st.sampled_from([2**31, 2**40])),
       n=st.one_of(st.integers(1, 16).map(lambda k: 64 * k), SIZES_64), d=HEAD_DIMS)
def test_flash_attention_10(notebook, bh, n, d):
    """The notebook's kernel, built as measure builds it: refused by check_shape (N, D) or by build (a
    batch of heads BH of zero or less); BH is taken as an integer (TVMScript fails on 2.5 heads)."""
    sound = positive_int(bh) and bh < 2**31 and positive_int(n) and n % 64 == 0 and n < 2**31 and d in (64, 128) \
        and positive_int(d)
    said = refusal(lambda: helpers.build(notebook("10_flash_attention").flash_attention(bh, n, d), "sm_80",
                                         tir_pipeline="tirx"), "sequence length", "head dimension", "Q")
    assert (said is None) == sound, said


@FEW
@given(M=SIZES_64, N=st.one_of(st.just(512), SIZES_64), ty=st.one_of(st.just(32), ODD), tx=st.one_of(st.just(32), ODD))
def test_threads_2d_03(notebook, M, N, ty, tx):
    sound = all(map(positive_int, (M, N, ty, tx))) and M % ty == 0 and N % tx == 0 and M < 2**31 and N < 2**31
    said = refusal(lambda: helpers.build(notebook("03_matmul_local_blocking").threads_2d(M, N, 64, ty, tx), "sm_80"),
                   "extent", "(ty) factor", "(tx) factor", "A", "B", "C")
    assert (said is None) == sound, said



@FUZZ
@given(entry=st.one_of(
    st.fixed_dictionaries({"name": st.one_of(st.just("add"), ODD), "ms": st.one_of(st.just(0.25), ODD),
                           "notebook": st.just("01_vector_add"), "gpu": st.just("Test GPU")},
                          optional={"flops": COUNTS, "rel_err": COUNTS, "traffic": st.one_of(st.none(), DTYPES),
                                    "dtype": st.sampled_from([None, "float16", "float32", "int8", "float8", "flaot32",
                                                              ""])}),
    ODD, st.lists(st.integers(), max_size=2)))
def test_a_record_read_back(context, entry):
    """A results file whose measurement was edited by hand (or half-written by another tool): read back
    as a sound Measurement, or refused as a RecordError that names the file, or the measurement and the
    field."""
    folder = context.tmp / "test-gpu"
    folder.mkdir(exist_ok=True)
    data = {"format": 1, "notebook": "01_vector_add", "gpu": "Test GPU", "measurements": {"add": entry}}
    try:
        (folder / "01_vector_add.json").write_text(json.dumps(data, allow_nan=True))
    except (TypeError, ValueError):  # NumPy scalars and the like: nothing JSON can hold, so no such file
        return
    fields = entry if isinstance(entry, dict) else {}
    sound = isinstance(entry, dict) and isinstance(fields["name"], str) and fields["name"] != "" \
        and positive_number(fields["ms"]) and count(fields.get("flops")) \
        and (fields.get("rel_err") in (None, 0) or count(fields.get("rel_err"))) \
        and fields.get("dtype") in (None, "float16", "float32", "int8") \
        and fields.get("traffic") in (None, "requested")
    said = refusal(lambda: helpers.recorded_measurements("01_vector_add"), "01_vector_add.json", "01_vector_add")
    assert (said is None) == sound, said
    if not sound:
        pytest.raises(records.RecordError, helpers.recorded_measurements, "01_vector_add")


NOTEBOOK_NAMES = sorted(p.stem for p in env.NOTEBOOKS_DIR.glob("[0-9][0-9]_*.ipynb"))


@FUZZ
@given(name=st.one_of(st.sampled_from(NOTEBOOK_NAMES), st.sampled_from(NOTEBOOK_NAMES).map("{}.ipynb".format),
                      st.sampled_from(NOTEBOOK_NAMES).map(str.upper), st.text(max_size=6), ODD))
def test_start(context, name):
    said = refusal(lambda: helpers.start(name), repr(name))
    assert (said is None) == (name in NOTEBOOK_NAMES), said
    if said:
        assert said.endswith(", ".join(NOTEBOOK_NAMES))  # a notebook's name error lists the notebooks


@FUZZ
@given(fn=st.sampled_from([lambda torch, x: x, None, "torch.softmax"]),
       arrays=st.sampled_from([[np.ones(4, "float16")], [], [[1.0, 2.0]], np.ones(4), None]),
       nbytes=COUNTS, flops=COUNTS, repeat=st.one_of(st.just(20), ODD))
def test_torch_op_without_a_gpu(context, fn, arrays, nbytes, flops, repeat):
    sound = callable(fn) and isinstance(arrays, list) and len(arrays) == 1 and isinstance(arrays[0], np.ndarray) \
        and count(nbytes) and count(flops) and positive_int(repeat)
    said = refusal(lambda: context.nb.torch_op("torch op", fn, arrays, bytes=nbytes, flops=flops, repeat=repeat,
                                               quiet=True), "fn", "arrays", "bytes", "flops", "repeat")
    assert (said is None) == sound, said
