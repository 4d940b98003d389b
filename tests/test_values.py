"""Numbers as values: rates, percentages and roofline coordinates from known times, FLOP and bytes.

Ratios and labels are scale-invariant (doubling every TFLOP/s leaves "50% of cuBLAS" at 50%), so
these tests compute each number by hand from round inputs and compare the value itself.
"""

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

import helpers

from conftest import H100

# 4 TFLOP of work and 6 GB of traffic in 2 ms: 2,000 TFLOP/s, 3,000 GB/s, 666.7 FLOP per byte.
FLOP, BYTES, MS = 4e12, 6e9, 2.0


def _m(name, ms, flops=None, bytes=None, rel_err=None, **kw):
    return helpers.Measurement(name, ms=ms, flops=flops, bytes=bytes, rel_err=rel_err, source="recorded",
                               gpu="Test GPU", date="2026-11-22", tvm="0.27.0.post1", **kw)


def test_rates_from_time_flop_and_bytes():
    m = _m("k", MS, flops=FLOP, bytes=BYTES)
    assert m.tflops == pytest.approx(2000.0)
    assert m.gbps == pytest.approx(3000.0)
    assert m.intensity == pytest.approx(4e12 / 6e9)
    assert m.rate() == "2,000.00 TFLOP/s, 3,000 GB/s"
    assert str(m) == "k: 2.0000 ms, 2,000.00 TFLOP/s, 3,000 GB/s  [recorded on Test GPU, 2026-11-22, TVM 0.27.0.post1]"


def test_rates_of_small_kernels():
    # a vector add of 2**24 floats in 0.0256 ms: 2**24 FLOP, 3 * 4 * 2**24 bytes
    n = 1 << 24
    m = _m("add", 0.0256, flops=n, bytes=12 * n, rel_err=0.0)
    assert m.tflops == pytest.approx(n / 25.6e-6 / 1e12)  # 0.655 TFLOP/s
    assert m.gbps == pytest.approx(12 * n / 25.6e-6 / 1e9)  # 7,864 GB/s
    assert m.rate() == "0.66 TFLOP/s, 7,864 GB/s"
    assert _m("copy", 1.0, bytes=2e9).rate() == "2,000 GB/s"  # no FLOP: only the bandwidth
    assert _m("tiny", 1.0, flops=1e6, bytes=1e6).rate() == "0.00 TFLOP/s"  # 1 GB/s is not worth showing
    assert _m("none", 1.0).tflops is None and _m("none", 1.0).gbps is None and _m("none", 1.0).intensity is None


def test_rates_survive_the_record_round_trip():
    m = helpers.Measurement.from_record(_m("k", MS, flops=FLOP, bytes=BYTES).to_record())
    assert (m.tflops, m.gbps, m.source) == (pytest.approx(2000.0), pytest.approx(3000.0), "recorded")


def _columns(text):
    """The table's rows as dicts of header -> cell, cut where the dashes under the header are."""
    import re

    lines = text.splitlines()
    spans = [m.span() for m in re.finditer(r"-+", lines[1])]
    cells = [[line[a:b].strip() for a, b in spans] for line in lines if not line.startswith("(")]
    return [dict(zip(cells[0], row)) for row in cells[2:]]


def test_table_values_against_cublas():
    kernel = _m("tiled", MS, flops=FLOP, bytes=BYTES, rel_err=3e-7)
    cublas = _m("cuBLAS", 0.5, flops=FLOP)  # 8,000 TFLOP/s: the kernel reaches 25% of it
    text = helpers.table([kernel, cublas], baseline=cublas)
    rows = _columns(text)
    assert rows[0] == {"kernel": "tiled", "ms": "2.0000", "TFLOP/s": "2,000.00", "GB/s": "3,000",
                       "rel. error": "3.0e-07", "vs baseline": "25% of 0.5000 ms"}
    assert rows[1]["TFLOP/s"] == "8,000.00" and rows[1]["vs baseline"] == "100%"
    assert text.splitlines()[-1] == "(every row: recorded 2026-11-22)"  # one source, said once


def test_an_interleaved_ratio_is_shown_beside_the_baseline_time_of_its_own_rounds():
    """Not beside cuBLAS's separate timing, which no ratio used: that row is left out."""
    cublas = _m("cuBLAS", 0.5, flops=FLOP)
    a = _m("a", MS, flops=FLOP, versus="cuBLAS", ratio=0.3, baseline_ms=0.61)
    old = _m("old record", MS, flops=FLOP, versus="cuBLAS", ratio=0.25)  # before baseline_ms was kept
    rows = _columns(helpers.table([a, old, cublas], baseline=cublas))
    assert [(r["kernel"], r["vs baseline"]) for r in rows] == [("a", "30% of 0.6100 ms"), ("old record", "25% of ~0.5000 ms")]
    mixed = _columns(helpers.table([a, _m("b", MS, flops=FLOP), cublas], baseline=cublas))
    assert [(r["kernel"], r["vs baseline"]) for r in mixed] == [
        ("a", "30% of 0.6100 ms"), ("b", "25% of 0.5000 ms"), ("cuBLAS", "100%")]


def test_no_share_of_a_baseline_of_another_problem_size():
    big = _m("cuBLAS 4096^3", 0.5, flops=FLOP)
    row, _ = _columns(helpers.table([_m("512^3", MS, flops=FLOP / 512), big], baseline=big))
    assert row["vs baseline"] == ""


def test_table_values_against_the_copy_ceiling():
    add = _m("add", 0.5, bytes=1.5e9)  # 3,000 GB/s against a 4,000 GB/s copy: 75%
    (row,) = _columns(helpers.table([add], ceiling_gbps=4000.0))
    assert (row["GB/s"], row["vs baseline"]) == ("3,000", "75% of copy 4,000 GB/s")


def _points(ax):
    return [(line.get_xdata()[0], line.get_ydata()[0]) for line in ax.lines if line.get_marker() == "o"]


def test_roofline_coordinates():
    matmul = _m("matmul", MS, flops=FLOP, bytes=BYTES)
    add = _m("add", 1.0, flops=1e9, bytes=12e9)  # 1/12 FLOP per byte, 1 TFLOP/s
    fig = helpers.roofline(H100, [matmul, add], measured_bandwidth=3000.0, measured_compute={"cuBLAS fp32": 51.6})
    ax = fig.axes[0]
    assert _points(ax) == [(pytest.approx(4e12 / 6e9), pytest.approx(2000.0)), (pytest.approx(1 / 12), pytest.approx(1.0))]
    peak, slope, measured, cublas = ax.lines[:4]
    # the theoretical roof: DRAM bandwidth in TB/s times intensity, up to the fp32 peak, then flat
    np.testing.assert_allclose(slope.get_ydata(), 3.352 * slope.get_xdata())
    assert max(slope.get_ydata()) <= H100.peak_fp32_tflops < 3.352 * max(slope.get_xdata()) * 1.04
    assert set(peak.get_ydata()) == {H100.peak_fp32_tflops} and min(peak.get_xdata()) * 3.352 >= H100.peak_fp32_tflops
    assert max(peak.get_xdata()) == pytest.approx(1e4)
    x = measured.get_xdata()
    # the measured roof: 3,000 GB/s = 3 TFLOP/s per FLOP/byte, capped at the highest measured or peak compute
    np.testing.assert_allclose(measured.get_ydata(), np.minimum(3.0 * x, max(H100.peak_fp32_tflops, 51.6)))
    assert list(cublas.get_ydata()) == [51.6, 51.6]


def test_roofline_tensor_core_ceiling():
    fig = helpers.roofline(H100, [], tensor_core=True)
    fp32, fp16 = fig.axes[0].lines[:2]
    assert max(fp32.get_ydata()) == pytest.approx(H100.peak_fp32_tflops)
    assert max(fp16.get_ydata()) == pytest.approx(H100.peak_fp16_tc_tflops)


def test_versus_baseline_bars_are_tflops():
    kernels = [_m("a", MS, flops=FLOP), _m("b", 4.0, flops=FLOP)]
    cublas = _m("cuBLAS", 1.0, flops=FLOP)
    ax = helpers.versus_baseline(kernels, cublas).axes[0]
    assert [bar.get_width() for bar in ax.patches] == [pytest.approx(2000.0), pytest.approx(1000.0), pytest.approx(4000.0)]
    assert [t.get_text().strip() for t in ax.texts] == ["2,000.0 TFLOP/s (50%)", "1,000.0 TFLOP/s (25%)",
                                                        "4,000.0 TFLOP/s (100%)"]


@pytest.mark.parametrize("metric, values", [("gbps", [3000.0, 1500.0]), ("tflops", [2000.0, 1000.0])])
def test_sweep_plots_the_metric(metric, values):
    ms = [_m("t1", MS, flops=FLOP, bytes=BYTES), _m("t2", 4.0, flops=FLOP, bytes=BYTES)]
    ax = helpers.sweep([64, 128], ms, xlabel="threads", metric=metric, ceiling=3500.0).axes[0]
    np.testing.assert_allclose(ax.lines[0].get_ydata(), values)
    assert list(ax.lines[1].get_ydata()) == [3500.0, 3500.0]


def test_heatmap_writes_each_value():
    ax = helpers.heatmap(np.array([[1.25, np.nan], [30.0, 4.0]]), [1, 2], ["a", "b"], xlabel="x", ylabel="y").axes[0]
    assert [t.get_text() for t in ax.texts] == ["1.2", "30.0", "4.0"]


def test_table_rows_for_missing_live_and_bare_measurements():
    """A missing record reads as dashes and carries on to the next row; a live one says live; a
    kernel with no FLOP, bytes or error leaves those cells empty, and nothing to compare with leaves
    'vs baseline' empty."""
    missing = helpers.Measurement("gone", ms=None, source="missing")
    live = helpers.Measurement("live one", ms=MS, flops=FLOP, source="live", gpu="Test GPU", date="2026-11-24")
    bare = _m("bare", 1.5)
    rows = _columns(helpers.table([missing, live, bare]))
    assert rows == [
        {"kernel": "gone", "ms": "-", "TFLOP/s": "-", "GB/s": "-", "rel. error": "-", "vs baseline": "-", "source": "no record"},
        {"kernel": "live one", "ms": "2.0000", "TFLOP/s": "2,000.00", "GB/s": "", "rel. error": "", "vs baseline": "", "source": "live"},
        {"kernel": "bare", "ms": "1.5000", "TFLOP/s": "", "GB/s": "", "rel. error": "", "vs baseline": "",
         "source": "recorded 2026-11-22"}]
    # a baseline without a result, or a kernel without a rate, compares with nothing
    (row,) = _columns(helpers.table([_m("k", MS, flops=FLOP)], baseline=missing, ceiling_gbps=4000.0))
    assert row["vs baseline"] == ""
    (row,) = _columns(helpers.table([_m("k", MS, bytes=BYTES)], baseline=_m("cuBLAS", 1.0, flops=FLOP)))
    assert row["vs baseline"] == ""


def test_text_table_is_left_aligned_without_trailing_spaces():
    text = helpers.text_table([("kernel", "ms"), ("a", "10.0"), ("longer name", "1")])
    assert text == ("kernel       ms\n"
                    "-----------  ----\n"
                    "a            10.0\n"
                    "longer name  1")


def test_charts_say_where_and_when_their_numbers_come_from():
    note = helpers.plots._source_note
    day = lambda d, **kw: helpers.Measurement("k", ms=1.0, source=kw.get("source", "recorded"), gpu=kw.get("gpu", "G"), date=d)
    assert note([day("2026-11-22"), day("2026-11-20"), day("2026-11-21")]) == "recorded on G, 2026-11-20 to 2026-11-22"
    assert note([day("2026-11-22"), day("2026-11-22")]) == "recorded on G, 2026-11-22"
    assert note([day("")]) == "recorded on G"  # no day known: none said
    assert note([day("2026-11-22"), day("2026-11-24", source="live", gpu="H")]) == \
        "recorded on G, 2026-11-22; live on H, 2026-11-24"
    assert note([helpers.Measurement("gone", ms=None, source="missing", gpu="X", date="2026-01-01")]) == ""


def test_requested_bytes_say_so_and_never_share_a_column_or_axis_unmarked():
    """03 and 04 count the bytes a schedule requests (caches serve the repeats), the rest the minimal
    DRAM traffic: the table marks which, the roofline says it on its axis or draws them hollow."""
    shape = [[64, 32], [32, 16], [64, 16]]
    tiled = _m("tiled", MS, flops=FLOP, bytes=BYTES, traffic="requested", shape=shape, dtype="float32")
    plain = _m("plain", MS, flops=FLOP, bytes=BYTES)
    text = helpers.table([tiled, plain])
    assert [r["GB/s"] for r in _columns(text)] == ["3,000 req.", "3,000"] and "requests from global memory" in text
    assert "GB/s requested" in tiled.rate() and "req" not in plain.rate() and "req" not in helpers.table([plain])
    minimal = tiled.at_minimal_traffic()
    assert minimal.bytes == 4 * (64 * 32 + 32 * 16 + 64 * 16) and minimal.traffic is None and plain.at_minimal_traffic() is plain
    assert helpers.roofline(H100, [tiled]).axes[0].get_xlabel() == \
        "arithmetic intensity (FLOP per byte requested from global memory)"
    mixed = helpers.roofline(H100, [tiled, plain]).axes[0]
    assert "hollow" in mixed.get_xlabel()
    assert [line.get_markerfacecolor() for line in mixed.lines if line.get_marker() == "o"][0] == "none"
    with pytest.raises(ValueError, match="no shape and dtype"):
        _m("bare", MS, flops=FLOP, bytes=BYTES, traffic="requested").at_minimal_traffic()
