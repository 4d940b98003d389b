import dataclasses

import matplotlib
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
