import dataclasses

import matplotlib
import matplotlib.pyplot as plt
import matplotlib.text
import numpy as np
import pytest

matplotlib.use("Agg")

import helpers

from conftest import H100


def _m(name, ms, flops=None, bytes=None):
    return helpers.Measurement(name, ms=ms, flops=flops, bytes=bytes, source="recorded", gpu="Test GPU", date="2026-11-22")


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


def test_the_series_roofline_names_the_best_of_each_notebook_and_cublas():
    many = _kernels(30)
    cublas = dataclasses.replace(_m("cuBLAS fp32", 2.7, flops=2 * 4096**3, bytes=3 * 4 * 4096**2), notebook="03")
    fig = helpers.roofline(H100, many + [cublas])
    best = {n: max((k for k in many if k.notebook == n), key=lambda k: k.tflops).name for n in {k.notebook for k in many}}
    assert sorted(t.get_text() for t in fig.axes[0].texts) == sorted(list(best.values()) + ["cuBLAS fp32"])
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "03_matmul_local_blocking: 10 kernels" in legend


def test_several_kernels_share_one_sweep_chart_with_a_legend():
    xs = ["512", "1024", "2048"]
    a = [helpers.Measurement(f"a {x}", 1.0 / int(x), flops=1e9, gpu="Test GPU", date="2026-11-24") for x in xs]
    b = [helpers.Measurement(f"b {x}", 2.0 / int(x), flops=1e9, gpu="Test GPU", date="2026-11-24") for x in xs]
    fig = helpers.sweep(xs, a, xlabel="size", metric="tflops", label="kernel a")
    helpers.sweep(xs, b, xlabel="size", metric="tflops", label="kernel b", ax=fig.axes[0])
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["kernel a", "kernel b"]
    assert [list(line.get_ydata()) for line in ax.get_lines()] == [[m.tflops for m in a], [m.tflops for m in b]]
