import dataclasses

import matplotlib
import matplotlib.pyplot as plt
import matplotlib.text
import numpy as np
import pytest

matplotlib.use("Agg")

import helpers

from conftest import H100


def _m(name, ms, flops=None, bytes=None, **kw):
    return helpers.Measurement(name, ms=ms, flops=flops, bytes=bytes, source="recorded", gpu="Test GPU", date="2026-11-22",
                               **kw)


def test_roofline_places_points_and_ceilings():
    pts = [_m("matmul", 3.0, flops=2 * 4096**3, bytes=3 * 4 * 4096**2), _m("add", 0.1, flops=1 << 24, bytes=12 << 24)]
    fig = helpers.roofline(H100, pts, measured_bandwidth=3000, measured_compute={"cuBLAS fp32": 51.6}, tensor_core=True)
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    labels = [t.get_text() for t in ax.texts]
    assert labels == ["matmul", "add"]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("measured copy: 3,000 GB/s" in s for s in legend) and any("tensor-core" in s for s in legend)
    assert "recorded on Test GPU" in ax.get_title()


def test_roofline_without_bandwidth_is_refused():
    with pytest.raises(ValueError, match="DRAM bandwidth of .* is unknown"):
        helpers.roofline(dataclasses.replace(H100, dram_gbps=None))


def test_versus_baseline_needs_a_baseline_result():
    missing = helpers.Measurement("cuBLAS", ms=None, source="missing")
    with pytest.raises(ValueError, match="baseline 'cuBLAS' has no result"):
        helpers.versus_baseline([_m("a", 1.0, flops=1e12)], missing)
    fig = helpers.versus_baseline([_m("a", 2.0, flops=1e12)], _m("cuBLAS", 1.0, flops=1e12))
    assert "(50%)" in " ".join(t.get_text() for t in fig.axes[0].texts)


def test_heatmap_shape_must_match_labels():
    with pytest.raises(ValueError, match=r"values are \(2, 2\), labels give \(2, 3\)"):
        helpers.heatmap(np.ones((2, 2)), [1, 2], [1, 2, 3], xlabel="x", ylabel="y")


def test_sweep_metric_is_checked():
    with pytest.raises(ValueError, match="metric must be"):
        helpers.sweep([1], [_m("a", 1.0)], xlabel="x", metric="fps")


# ---------------------------------------------------------------- charts a reader can read


def _texts(fig):
    """Every piece of text the charts write themselves: labels, values, titles, legend entries."""
    out = []
    for ax in fig.axes:
        out += [t for t in ax.texts if t.get_text()]
        out += [t for t in (ax.title, ax._left_title, ax._right_title) if t.get_text()]
        if ax.get_legend():
            out += [t for t in ax.get_legend().get_texts() if t.get_text()]
    return out


def overlapping_texts(fig):
    fig.canvas.draw()
    # the text's own box: an annotation's get_window_extent also covers its leader line
    boxes = [(t.get_text(), matplotlib.text.Text.get_window_extent(t)) for t in _texts(fig)]
    return [(a, b) for i, (a, ba) in enumerate(boxes) for b, bb in boxes[i + 1:] if ba.overlaps(bb)]


def _kernels(n, notebooks=("03_matmul_local_blocking", "04_matmul_shared_blocking", "05_tensor_core_tensorization"),
             seed=0, **kw):
    """n kernels of 4096^3 matmuls spread over a few notebooks, as 06's series summary gathers."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        m = _m(f"kernel {i}: tiles ({i % 8}, {i % 5}, 16, 16)", float(rng.uniform(0.2, 40)),
               flops=2 * 4096**3, bytes=float(rng.choice([3, 6, 12])) * 4096**2 * 4, **kw)
        out.append(dataclasses.replace(m, notebook=notebooks[i % len(notebooks)]))
    return out


def _series():
    return _kernels(60) + [dataclasses.replace(_m("cuBLAS float16 4096x4096x4096", 0.2, flops=2 * 4096**3,
                                                  bytes=3 * 2 * 4096**2), notebook="06_metaschedule_tuning")]


def _one_spot():
    """04's roofline: long names on nearly one spot."""
    return [dataclasses.replace(k, bytes=3 * 4 * 4096**2, ms=3.0 + 0.1 * i, notebook="04")
            for i, k in enumerate(_kernels(5))]


# Each chart kind, drawn with many points.
CHARTS = {
    "series roofline": lambda: helpers.roofline(H100, _series(), tensor_core=True,
                                                measured_compute={"cuBLAS fp32": 51.5, "cuBLAS fp16": 685.1}),
    "04 roofline": lambda: helpers.roofline(H100, _one_spot(), title="Shared-memory blocking",
                                            measured_compute={"cuBLAS fp32": 52.0}),
    "versus baseline": lambda: helpers.versus_baseline(_kernels(24), _m("cuBLAS", 3.0, flops=2 * 4096**3),
                                                       title="24 kernels against cuBLAS"),
    "sweep": lambda: helpers.sweep(list(range(16)), _kernels(16), xlabel="x", metric="tflops", ceiling=50,
                                   title="A sweep of 16"),
    "heatmap": lambda: helpers.heatmap(np.arange(48.0).reshape(6, 8), list(range(6)), list(range(8)), xlabel="x",
                                       ylabel="y", title="A 6 x 8 sweep", source=_kernels(3)),
}


@pytest.mark.parametrize("kind", list(CHARTS))
def test_no_two_labels_overlap(kind):
    fig = CHARTS[kind]()
    try:
        assert not overlapping_texts(fig)
    finally:
        plt.close(fig)


def test_every_chart_says_gpu_day_and_source_even_with_a_title():
    for kind, draw in CHARTS.items():
        fig = draw()
        title = fig.axes[0].get_title()
        assert "recorded on Test GPU, 2026-11-22" in title, (kind, title)
        plt.close(fig)
    live = [dataclasses.replace(k, source="live", date="2026-11-24") for k in _kernels(3)]
    fig = helpers.sweep([1, 2, 3], live, xlabel="x", title="Live")
    assert fig.axes[0].get_title() == "Live\n(live on Test GPU, 2026-11-24)"


def test_the_series_roofline_names_only_the_best_of_each_notebook():
    many = _kernels(30)
    cublas = dataclasses.replace(_m("cuBLAS fp32", 2.7, flops=2 * 4096**3, bytes=3 * 4 * 4096**2), notebook="03")
    fig = helpers.roofline(H100, many + [cublas])
    best = {n: max((k for k in many if k.notebook == n), key=lambda k: k.tflops).name for n in {k.notebook for k in many}}
    assert sorted(t.get_text() for t in fig.axes[0].texts) == sorted(best.values())  # cuBLAS: a dot, its roof in the legend
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "03_matmul_local_blocking: 10 kernels" in legend


# ---------------------------------------------------------------- what each chart says


def _legend(ax):
    return [t.get_text() for t in ax.get_legend().get_texts()]


def test_roofline_says_each_ceiling_and_axis():
    """The legend gives every roof's value, theoretical ones dashed and measured ones solid; the
    axes say what they measure; without a title the chart names its GPU."""
    fig = helpers.roofline(H100, [_m("k", 1.0, flops=1e12, bytes=1e10)], measured_bandwidth=3000,
                           measured_compute={"cuBLAS fp32": 51.6, "cuBLAS fp16": 685.1}, tensor_core=True)
    ax = fig.axes[0]
    assert _legend(ax) == ["fp32 peak: 67 TFLOP/s", "fp16 tensor-core peak: 989 TFLOP/s", "DRAM peak: 3,352 GB/s",
                           "measured copy: 3,000 GB/s", "cuBLAS fp32: 51.6 TFLOP/s (measured)",
                           "cuBLAS fp16: 685.1 TFLOP/s (measured)"]
    styles = {line.get_label(): line.get_linestyle() for line in ax.lines if len(line.get_xdata())}  # drawn, not legend-only
    assert [styles[s] for s in _legend(ax)] == ["--", "--", "--", "-", "-", "-"]
    looks = [(matplotlib.colors.to_hex(line.get_color()), line.get_linestyle()) for line in ax.lines
             if line.get_label() in _legend(ax)]
    assert len(set(looks)) == len(looks), "two roofs that look alike"
    assert ax.get_xlabel() == "arithmetic intensity (FLOP per byte of minimal DRAM traffic)" and ax.get_ylabel() == "TFLOP/s"
    assert ax.get_title() == "Roofline of NVIDIA H100 80GB HBM3\n(recorded on Test GPU, 2026-11-22)"
    assert ax.xaxis._major_tick_kw["gridOn"] and ax.xaxis._minor_tick_kw["gridOn"]
    # the measured copy roof rises until the highest compute anyone reached (here cuBLAS fp16)
    copy = next(line for line in ax.lines if line.get_label().startswith("measured copy"))
    assert max(copy.get_ydata()) == pytest.approx(685.1)
    # the roofs span intensities from 1/100 to 10,000 FLOP per byte
    assert (min(copy.get_xdata()), max(copy.get_xdata())) == (pytest.approx(1e-2), pytest.approx(1e4))


def test_roofline_without_a_spec_says_why():
    with pytest.raises(ValueError, match=r"^no GPU spec: a roofline needs a GPU's \(live or recorded\) peaks$"):
        helpers.roofline(None)


def test_roofline_draws_only_kernels_with_a_rate_and_an_intensity():
    kept = _m("kept", 1.0, flops=1e12, bytes=1e10)
    fig = helpers.roofline(H100, [kept, _m("no bytes", 1.0, flops=1e12), _m("no flops", 1.0, bytes=1e10),
                                  helpers.Measurement("missing", ms=None, flops=1e12, bytes=1e10, source="missing")])
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.texts] == ["kept"]
    assert [(line.get_xdata()[0], line.get_ydata()[0]) for line in ax.lines if line.get_marker() == "o"] == [(100.0, 1000.0)]
    # the view holds every point with room for its label: from a third of the slowest to 4x the fastest
    assert ax.get_ylim()[0] <= 1000.0 / 3 and ax.get_ylim()[1] == pytest.approx(4000.0)
    # and the compute roof, above slow kernels' points (01's roofline once stopped at 0.8 TFLOP/s)
    slow = helpers.roofline(H100, [_m("add", 1.0, flops=1e8, bytes=1.2e9)]).axes[0]
    assert slow.get_ylim()[1] == pytest.approx(2 * H100.peak_fp32_tflops)
    crawling = _m("crawling", 1.0, flops=1e5, bytes=1e3)  # 1e-4 TFLOP/s: far below every roof
    assert helpers.roofline(H100, [kept, crawling]).axes[0].get_ylim() == (pytest.approx(1e-4 / 3), pytest.approx(4000.0))


def test_roofline_colours_points_by_notebook():
    """With several notebooks, a notebook's kernels share a colour, its legend entry's; with one,
    each kernel has its own colour."""
    pts = [dataclasses.replace(_m(f"k{i}", 1.0 + i, flops=1e12, bytes=1e10), notebook=nb)
           for i, nb in enumerate(["03", "04", "03", ""])]
    ax = helpers.roofline(H100, pts).axes[0]
    dots = [line for line in ax.lines if line.get_marker() == "o"]
    drawn, legend = dots[:4], {line.get_label(): line.get_color() for line in dots[4:]}
    assert list(legend) == ["other: 1 kernel", "03: 2 kernels", "04: 1 kernel"]
    assert [d.get_color() for d in drawn] == [legend["03: 2 kernels"], legend["04: 1 kernel"],
                                              legend["03: 2 kernels"], legend["other: 1 kernel"]]
    assert len(set(legend.values())) == 3 and not set(legend.values()) & {"C0", "C1", "C3", "C4"}  # not a roof's
    assert _legend(ax)[-3:] == list(legend)
    one = helpers.roofline(H100, [dataclasses.replace(p, notebook="03") for p in pts[:2]]).axes[0]
    colours = [line.get_color() for line in one.lines if line.get_marker() == "o"]
    assert len(set(colours)) == 2 and not set(colours) & {"C0", "C1", "C3", "C4"}
    assert not any("kernel" in s for s in _legend(one))
    two = helpers.roofline(H100, pts[:2]).axes[0]  # two notebooks are already told apart
    assert _legend(two)[-2:] == ["03: 1 kernel", "04: 1 kernel"]


def test_which_points_are_named():
    pts = [dataclasses.replace(_m(f"k{i}", 1.0 + i, flops=1e12, bytes=1e10), notebook="03") for i in range(9)]
    named = lambda labels, points=pts: sorted(t.get_text() for t in helpers.roofline(H100, points, labels=labels).axes[0].texts)
    assert named("auto", pts[:8]) == [f"k{i}" for i in range(8)]  # a few: all of them
    assert named("auto") == ["k0"]  # many: the fastest of the notebook
    assert named("all") == [f"k{i}" for i in range(9)]
    assert named("none") == []
    assert named({"k3", "k5"}) == ["k3", "k5"]
    # a cuBLAS run, even the fastest, stays unnamed among many (06's course chart had 13 labels); of equals, the first
    cublas = dataclasses.replace(_m("cuBLAS fp32", 3.0, flops=1e12, bytes=1e10), notebook="03")
    twin = dataclasses.replace(pts[0], name="k0 again")
    assert named("auto", pts + [twin, cublas]) == ["k0"]


def _dots_and_labels(fig):
    fig.canvas.draw()
    ax = fig.axes[0]
    dots = [ax.transData.transform((line.get_xdata()[0], line.get_ydata()[0]))
            for line in ax.lines if line.get_marker() == "o" and len(line.get_xdata())]
    return ax, dots, [(a, matplotlib.text.Text.get_window_extent(a)) for a in ax.texts]


@pytest.mark.parametrize("kind", ["series roofline", "04 roofline"])
def test_names_cover_no_point_and_stay_inside(kind):
    """A point's name never hides a point, stays inside the axes, and when it had to move away
    from its point a thin grey line leads back to it."""
    fig = CHARTS[kind]()
    ax, dots, labels = _dots_and_labels(fig)
    inside = ax.get_window_extent()
    scale = fig.dpi / 72
    for a, box in labels:
        # the text is centred, vertically, where it was placed: its offset from its point
        assert abs((box.y0 + box.y1) / 2 - (ax.transData.transform(a.xy)[1] + a.xyann[1] * scale)) < 1.5, a.get_text()
        assert inside.x0 <= box.x0 and box.x1 <= inside.x1 and inside.y0 <= box.y0 and box.y1 <= inside.y1, a.get_text()
        r = 2.5 * scale  # a dot's radius: 5 points across
        assert not [d for d in dots if box.x0 - r < d[0] < box.x1 + r and box.y0 - r < d[1] < box.y1 + r], a.get_text()
        dx, dy = a.xyann
        assert (a.arrow_patch is None) == (abs(dx) <= 6 and abs(dy) <= 10), (a.get_text(), a.xyann)
        assert a.get_ha() == ("right" if dx < 0 else "left")
    assert any(a.arrow_patch is not None for a, _ in labels) and any(a.arrow_patch is None for a, _ in labels)
    plt.close(fig)


def test_a_name_goes_beside_its_point_or_to_its_left_at_the_edge():
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.set_xlim(0, 10)
    ax.set_ylim(0, 10)
    helpers.plots.place_labels(ax, [(5, 5), (9.9, 2)], ["middle", "at the right edge"])
    middle, edge = ax.texts
    assert middle.xyann == (6, 0) and middle.get_ha() == "left" and middle.arrow_patch is None
    fig.canvas.draw()
    box = matplotlib.text.Text.get_window_extent(edge)
    assert edge.xyann[0] < 0 and edge.get_ha() == "right" and box.x1 < ax.transData.transform((9.9, 2))[0]
    assert (ax.get_xlim(), ax.get_ylim()) == ((0, 10), (0, 10))
    plt.close(fig)


def test_versus_baseline_says_what_it_compares():
    kernels = [_m("a", 2.0, flops=1e12), _m("no rate", 1.0), helpers.Measurement("gone", ms=None, flops=1e12, source="missing")]
    ax = helpers.versus_baseline(kernels, _m("cuBLAS", 1.0, flops=1e12)).axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a", "cuBLAS"]  # the kernels first, the baseline last
    colours = [matplotlib.colors.to_hex(b.get_facecolor()) for b in ax.patches]
    assert colours[0] != colours[1], "the baseline's bar stands out"
    assert ax.get_xlabel() == "TFLOP/s" and ax.get_title() == "Against cuBLAS\n(recorded on Test GPU, 2026-11-22)"
    assert ax.get_xlim() == (0, pytest.approx(1450.0))  # from zero, with room for the longest bar's text
    assert all(t.get_va() == "center" for t in ax.texts)
    with pytest.raises(ValueError, match="baseline 'cuBLAS' has no result"):
        helpers.versus_baseline(kernels, _m("cuBLAS", 1.0))  # a time but no rate


def test_versus_baseline_marks_the_baseline_of_each_kernels_own_rounds():
    """Timed interleaved, each bar carries its cuBLAS of the same rounds; cuBLAS's separate bar,
    which no ratio used, is left out."""
    kernels = [_m("a", 2.0, flops=1e12, versus="cuBLAS", ratio=1.02, baseline_ms=2.04),
               _m("b", 1.0, flops=1e12, versus="cuBLAS", ratio=0.5)]  # an older record: ratio x ms
    ax = helpers.versus_baseline(kernels, _m("cuBLAS", 1.9, flops=1e12)).axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a", "b"]
    (ticks,) = [line for line in ax.lines if line.get_marker() == "|"]
    assert list(ticks.get_xdata()) == [pytest.approx(1e12 / 2.04e-3 / 1e12), pytest.approx(1e12 / 0.5e-3 / 1e12)]
    assert ax.texts[0].get_text().strip() == "500.0 TFLOP/s (102% of 490.2)"
    assert ax.get_xlabel() == "TFLOP/s (red tick: cuBLAS, timed in the same rounds)" and ax.get_legend() is None


def test_sweep_says_what_it_measures():
    ms = [_m("t1", 2.0, flops=1e12, bytes=1e9), helpers.Measurement("gone", ms=None, source="missing"),
          _m("t3", 4.0, flops=1e12, bytes=1e9)]
    ax = helpers.sweep([64, 128, 256], ms, xlabel="threads per block", ceiling=3000.0).axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["64", "256"]  # the missing one left out
    assert ax.get_xlabel() == "threads per block" and ax.get_ylabel() == "GB/s"
    assert ax.lines[0].get_marker() == "o" and ax.lines[0].get_linestyle() == "-"
    assert _legend(ax) == ["ceiling"] and ax.lines[1].get_linestyle() == "--"
    assert ax.lines[1].get_color() != ax.lines[0].get_color()
    assert ax.xaxis._major_tick_kw["gridOn"]
    tf = helpers.sweep([64, 128, 256], ms, xlabel="x", metric="tflops", ceiling=60, ceiling_label="cuBLAS").axes[0]
    assert tf.get_ylabel() == "TFLOP/s" and _legend(tf) == ["cuBLAS"]
    assert not helpers.sweep([1], ms[:1], xlabel="x").axes[0].get_legend()  # no ceiling, no legend


def test_heatmap_cells_ticks_and_colour_bar():
    """Values below 60% of the largest sit on viridis' dark end and are written in white; the rest
    in black; a NaN cell is left blank; the colour bar says the unit."""
    fig = helpers.heatmap([[5.9, 6.0], [10.0, float("nan")]], [16, 32], ["a", "b"], xlabel="tile x", ylabel="tile y",
                          source=[_m("k", 1.0)])
    ax, bar = fig.axes
    assert [(t.get_text(), t.get_color()) for t in ax.texts] == [("5.9", "white"), ("6.0", "black"), ("10.0", "black")]
    assert [t.get_position() for t in ax.texts] == [(0, 0), (1, 0), (0, 1)]
    assert all(t.get_ha() == "center" and t.get_va() == "center" for t in ax.texts)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["16", "32"]
    assert (ax.get_xlabel(), ax.get_ylabel(), bar.get_ylabel()) == ("tile x", "tile y", "TFLOP/s")
    image = ax.images[0]
    assert image.get_cmap().name == "viridis" and bool(np.ma.getmaskarray(image.get_array())[1, 1])
    assert bar.get_position().x0 > ax.get_position().x1  # the bar beside this heatmap
    assert ax.get_title() == "(recorded on Test GPU, 2026-11-22)"
    gbps = helpers.heatmap(np.ones((1, 1), int), [1], [1], xlabel="x", ylabel="y", unit="GB/s", title="Copy")
    assert gbps.axes[1].get_ylabel() == "GB/s" and gbps.axes[0].get_title() == "Copy"


def test_charts_draw_into_the_axes_given():
    fig, axes = plt.subplots(1, 4)
    pts = [_m("k", 1.0, flops=1e12, bytes=1e10)]
    assert helpers.roofline(H100, pts, ax=axes[0]) is fig
    assert helpers.versus_baseline(pts, pts[0], ax=axes[1]) is fig
    assert helpers.sweep([1], pts, xlabel="x", ax=axes[2]) is fig
    assert helpers.heatmap([[1.0]], [1], [1], xlabel="x", ylabel="y", ax=axes[3]) is fig
    assert [len(ax.lines) + len(ax.patches) + len(ax.images) > 0 for ax in axes] == [True] * 4
    plt.close(fig)


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def test_bar_charts_and_heatmaps_grow_with_what_they_show():
    """Half an inch per bar; about an inch per heatmap column and 0.8 inch per row: names and
    values stay readable however many kernels or tiles there are."""
    base = _m("cuBLAS", 1.0, flops=1e12)
    bars = lambda n: helpers.versus_baseline(_kernels(n), base).get_size_inches()
    assert bars(6)[1] - bars(2)[1] == pytest.approx(2.0) and bars(6)[0] == bars(2)[0]
    cells = lambda rows, cols: helpers.heatmap(np.ones((rows, cols)), range(rows), range(cols), xlabel="x",
                                               ylabel="y").get_size_inches()
    assert cells(2, 4)[0] - cells(2, 2)[0] == pytest.approx(2.2) and cells(4, 2)[1] - cells(2, 2)[1] == pytest.approx(1.6)


def test_a_name_keeps_out_of_the_legend():
    """A kernel in the legend's corner (lower right: much reuse, little speed) is named outside it."""
    corner = [_m("in the corner", 1.0, flops=5e7, bytes=5e7 / 3000), _m("high up", 1.0, flops=5e10, bytes=1e9)]
    fig = helpers.roofline(H100, corner, measured_compute={"cuBLAS fp32": 51.6})
    fig.canvas.draw()
    ax = fig.axes[0]
    legend = ax.get_legend().get_window_extent()
    label = next(a for a in ax.texts if a.get_text() == "in the corner")
    assert legend.contains(*ax.transData.transform(label.xy))  # the point itself is under the legend
    assert not matplotlib.text.Text.get_window_extent(label).overlaps(legend)


def test_a_series_draws_smaller_dots_and_legend_than_one_notebook():
    """Dozens of kernels from several notebooks get smaller dots and a smaller legend than one
    notebook's few, so they hide less of each other; the legend's dot for a notebook is drawn
    like that notebook's dots."""
    series = helpers.roofline(H100, _series()).axes[0]
    few = helpers.roofline(H100, _one_spot()).axes[0]
    dot_size = lambda ax: {line.get_markersize() for line in ax.lines if line.get_marker() == "o" and len(line.get_xdata())}
    (small,), (large,) = dot_size(series), dot_size(few)
    assert small < large
    legend_dots = {h.get_markersize() for h in series.get_legend().legend_handles if h.get_marker() == "o"}
    assert legend_dots == {small}
    legend_font = lambda ax: {t.get_fontsize() for t in ax.get_legend().get_texts()}
    assert max(legend_font(series)) < min(legend_font(few))


def test_bandwidth_lines_are_grey():
    """Grey means memory bandwidth: the DRAM roof's legend entry, the measured copy roof, a
    sweep's copy ceiling; the compute roofs have colours of their own."""
    ax = helpers.roofline(H100, [], measured_bandwidth=3000.0, measured_compute={"cuBLAS fp32": 51.6}).axes[0]
    colour = {line.get_label(): matplotlib.colors.to_hex(line.get_color()) for line in ax.lines}
    grey = matplotlib.colors.to_hex("grey")
    assert colour["DRAM peak: 3,352 GB/s"] == colour["measured copy: 3,000 GB/s"] == grey
    assert colour["fp32 peak: 67 TFLOP/s"] != grey and colour["cuBLAS fp32: 51.6 TFLOP/s (measured)"] != grey
    sweep = helpers.sweep([1, 2], [_m("a", 1.0, bytes=1e9)] * 2, xlabel="x", ceiling=3000.0, ceiling_label="copy").axes[0]
    assert matplotlib.colors.to_hex(sweep.lines[1].get_color()) == grey


def test_names_of_one_spot_stack_as_near_as_they_fit():
    """Six kernels on one spot: their names take the six nearest places, beside the point and one
    line above and below it on either side, and touch neither each other nor the point."""
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.set_xlim(0, 10)
    ax.set_ylim(0, 10)
    helpers.plots.place_labels(ax, [(5, 5)] * 6, [f"kernel number {i}" for i in range(6)])
    assert sorted(a.xyann for a in ax.texts) == sorted((dx, dy) for dx in (-6, 6) for dy in (-10, 0, 10))
    fig.canvas.draw()
    boxes = [matplotlib.text.Text.get_window_extent(a) for a in ax.texts]
    assert not [(i, j) for i in range(6) for j in range(i) if boxes[i].overlaps(boxes[j])]


def test_several_kernels_share_one_sweep_chart_with_a_legend():
    xs = ["512", "1024", "2048"]
    a = [helpers.Measurement(f"a {x}", 1.0 / int(x), flops=1e9, gpu="Test GPU", date="2026-11-24") for x in xs]
    b = [helpers.Measurement(f"b {x}", 2.0 / int(x), flops=1e9, gpu="Test GPU", date="2026-11-24") for x in xs]
    fig = helpers.sweep(xs, a, xlabel="size", metric="tflops", label="kernel a")
    helpers.sweep(xs, b, xlabel="size", metric="tflops", label="kernel b", ax=fig.axes[0])
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["kernel a", "kernel b"]
    assert [list(line.get_ydata()) for line in ax.get_lines()] == [[m.tflops for m in a], [m.tflops for m in b]]


def test_a_dict_of_kernels_draws_the_same_chart_as_one_call_each():
    xs = ["512", "1024", "2048"]
    a = [helpers.Measurement(f"a {x}", 1.0 / int(x), flops=1e9, gpu="Test GPU", date="2026-11-24") for x in xs]
    b = [helpers.Measurement(f"b {x}", 2.0 / int(x), flops=1e9, gpu="Test GPU", date="2026-11-24") for x in xs]
    ax = helpers.sweep(xs, {"kernel a": a, "kernel b": tuple(b)}, xlabel="size", metric="tflops", title="t").axes[0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["kernel a", "kernel b"]
    assert [list(line.get_ydata()) for line in ax.get_lines()] == [[m.tflops for m in a], [m.tflops for m in b]]
    assert ax.get_ylabel() == "TFLOP/s" and ax.get_xlabel() == "size"


def test_no_label_is_struck_through_by_a_measured_roof():
    """00's and 04's cuBLAS points sit on their own roofs: their names go above or below the line."""
    blas = _m("cuBLAS float32 4096x4096x4096", 2.7, flops=2 * 4096**3, bytes=3 * 4 * 4096**2)
    fig = helpers.roofline(H100, [blas], measured_compute={"cuBLAS fp32": blas.tflops})
    ax = fig.axes[0]
    fig.canvas.draw()
    (label,) = ax.texts
    box = label.get_window_extent(fig.canvas.get_renderer())
    y = ax.transData.transform((1.0, blas.tflops))[1]
    assert not box.y0 <= y <= box.y1


def test_a_memory_bound_table_shows_the_copy_share_beside_the_ratio():
    """With a baseline and a copy ceiling (notebook 09), the share of the copy gets its own column
    and the ratio still says which baseline time it divided."""
    torch = _m("torch.softmax", 0.050, bytes=64e6)
    ours = _m("softmax", 0.025, bytes=64e6, versus="torch.softmax", ratio=2.0, baseline_ms=0.05)
    lines = helpers.table([ours, torch], baseline=torch, ceiling_gbps=3000.0).splitlines()
    assert "of copy 3,000 GB/s" in lines[0] and "vs baseline" in lines[0]
    assert "85%" in lines[2] and lines[2].split()[-1] == "ms" and "200% of 0.0500 ms" in lines[2]
    alone = helpers.table([ours], ceiling_gbps=3000.0).splitlines()  # no baseline: the share is the column
    assert "of copy" not in alone[0] and "85% of copy 3,000 GB/s" in alone[2]


def test_a_dict_of_kernels_draws_the_ceiling_once():
    xs = ["128", "256"]
    a = [_m(f"a {x}", 1.0, bytes=1e9) for x in xs]
    b = [_m(f"b {x}", 2.0, bytes=1e9) for x in xs]
    ax = helpers.sweep(xs, {"ours": a, "torch": b}, xlabel="row length", ceiling=3000.0, ceiling_label="copy").axes[0]
    assert _legend(ax) == ["ours", "copy", "torch"]
    assert [line.get_linestyle() for line in ax.get_lines()].count("--") == 1
