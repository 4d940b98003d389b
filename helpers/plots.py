"""Charts the notebooks share: the roofline, bars against cuBLAS, sweeps and heatmaps.

Every chart labels where its numbers came from (live or recorded on which GPU), because a
roofline drawn from another GPU's numbers must say so.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from .bench import Measurement
from .env import GpuSpec


def _source_note(points) -> str:
    pts = [p for p in points if p.ok]
    if not pts:
        return ""
    p = pts[0]
    return f"live on {p.gpu}" if p.source == "live" else f"recorded on {p.gpu}, {p.date}"


def roofline(spec: GpuSpec, points: list[Measurement] = (), *, measured_bandwidth: float | None = None,
             measured_compute: dict | None = None, tensor_core: bool = False, title: str | None = None, ax=None):
    """Draw the roofline: bandwidth and compute ceilings (theoretical dashed, measured solid) and
    one labelled point per kernel at (arithmetic intensity, achieved TFLOP/s), on log axes.

    `measured_compute` maps a label ("cuBLAS fp32") to TFLOP/s.
    """
    if spec is None:
        raise ValueError("no GPU spec: a roofline needs a GPU's (live or recorded) peaks")
    if not spec.dram_gbps:
        raise ValueError(f"the DRAM bandwidth of {spec.name} is unknown, so its roofline has no slope")
    fig, ax = (ax.figure, ax) if ax is not None else plt.subplots(figsize=(8, 5))
    x = np.logspace(-2, 4, 400)
    bw = spec.dram_gbps * 1e9 / 1e12  # TB/s: TFLOP/s per FLOP/byte
    peaks = {"fp32 peak": spec.peak_fp32_tflops}
    if tensor_core and spec.has_tensor_cores:
        peaks["fp16 tensor-core peak"] = spec.peak_fp16_tc_tflops
    for i, (label, peak) in enumerate(peaks.items()):
        ax.plot(x, np.minimum(bw * x, peak), "--", color=f"C{i}", lw=1.2, label=f"{label}: {peak:,.0f} TFLOP/s")
    ax.plot([], [], "--", color="grey", label=f"DRAM peak: {spec.dram_gbps:,.0f} GB/s")
    if measured_bandwidth:
        mbw = measured_bandwidth / 1e3
        top = max([spec.peak_fp32_tflops] + list((measured_compute or {}).values()))
        ax.plot(x, np.minimum(mbw * x, top), "-", color="grey", lw=2, alpha=0.7,
                label=f"measured copy: {measured_bandwidth:,.0f} GB/s")
    for j, (label, tf) in enumerate((measured_compute or {}).items()):
        ax.axhline(tf, color=f"C{j + 3}", lw=2, alpha=0.7, label=f"{label}: {tf:,.1f} TFLOP/s (measured)")
    for k, p in enumerate(q for q in points if q.ok and q.intensity and q.tflops):
        ax.plot(p.intensity, p.tflops, "o", color=f"C{(k + 5) % 10}", ms=7)
        ax.annotate(p.name, (p.intensity, p.tflops), textcoords="offset points", xytext=(6, -4), fontsize=8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP per byte of DRAM traffic)")
    ax.set_ylabel("TFLOP/s")
    note = _source_note(points)
    ax.set_title(title or f"Roofline of {spec.name}" + (f" ({note})" if note else ""), fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    return fig


def versus_baseline(points: list[Measurement], baseline: Measurement, *, title: str | None = None, ax=None):
    """Horizontal bars: each kernel's TFLOP/s as a percentage of the baseline (cuBLAS)."""
    pts = [p for p in points if p.ok and p.tflops]
    if not baseline.ok or not baseline.tflops:
        raise ValueError(f"the baseline {baseline.name!r} has no result to compare with")
    fig, ax = (ax.figure, ax) if ax is not None else plt.subplots(figsize=(8, 0.5 * len(pts) + 1.5))
    names = [p.name for p in pts] + [baseline.name]
    values = [p.tflops for p in pts] + [baseline.tflops]
    colors = ["C0"] * len(pts) + ["C3"]
    ax.barh(names, values, color=colors)
    for i, v in enumerate(values):
        ax.text(v, i, f"  {v:,.1f} TFLOP/s ({v / baseline.tflops:.0%})", va="center", fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("TFLOP/s")
    ax.set_xlim(0, max(values) * 1.35)
    note = _source_note(pts + [baseline])
    ax.set_title(title or f"Against {baseline.name}" + (f" ({note})" if note else ""), fontsize=10)
    return fig


def sweep(xs, measurements: list[Measurement], *, xlabel: str, metric: str = "gbps", ceiling: float | None = None,
          ceiling_label: str = "ceiling", title: str | None = None, ax=None):
    """A parameter sweep (e.g. threads per block) against GB/s or TFLOP/s."""
    if metric not in ("gbps", "tflops"):
        raise ValueError(f"metric must be 'gbps' or 'tflops', got {metric!r}")
    pairs = [(x, getattr(m, metric)) for x, m in zip(xs, measurements) if m.ok]
    fig, ax = (ax.figure, ax) if ax is not None else plt.subplots(figsize=(7, 4))
    if pairs:
        ax.plot([str(p[0]) for p in pairs], [p[1] for p in pairs], "o-")
    if ceiling:
        ax.axhline(ceiling, color="grey", ls="--", label=ceiling_label)
        ax.legend(fontsize=8)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("GB/s" if metric == "gbps" else "TFLOP/s")
    note = _source_note(measurements)
    ax.set_title((title or "") + (f" ({note})" if note else ""), fontsize=10)
    ax.grid(True, alpha=0.3)
    return fig


def heatmap(values: np.ndarray, row_labels, col_labels, *, xlabel: str, ylabel: str, unit: str = "TFLOP/s",
            title: str | None = None, ax=None):
    """A 2-D sweep (e.g. tile sizes) with each cell's value written in it; NaN shows as blank."""
    values = np.asarray(values, dtype=float)
    if values.shape != (len(row_labels), len(col_labels)):
        raise ValueError(f"values are {values.shape}, labels give {(len(row_labels), len(col_labels))}")
    fig, ax = (ax.figure, ax) if ax is not None else plt.subplots(figsize=(1 + 1.1 * len(col_labels), 1 + 0.8 * len(row_labels)))
    im = ax.imshow(np.ma.masked_invalid(values), cmap="viridis")
    for (i, j), v in np.ndenumerate(values):
        if np.isfinite(v):
            ax.text(j, i, f"{v:.1f}", ha="center", va="center", fontsize=8,
                    color="white" if v < np.nanmax(values) * 0.6 else "black")
    ax.set_xticks(range(len(col_labels)), [str(c) for c in col_labels])
    ax.set_yticks(range(len(row_labels)), [str(r) for r in row_labels])
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    fig.colorbar(im, ax=ax, label=unit)
    ax.set_title(title or "", fontsize=10)
    return fig


def table(measurements: list[Measurement], baseline: Measurement | None = None, ceiling_gbps: float | None = None) -> str:
    """A plain-text table (reads the same on GitHub, in Jupyter and under nbval)."""
    rows = [("kernel", "ms", "TFLOP/s", "GB/s", "rel. error", "vs baseline", "source")]
    for m in measurements:
        if not m.ok:
            rows.append((m.name, "-", "-", "-", "-", "-", "no record"))
            continue
        vs = ""
        if baseline is not None and baseline.ok and m.tflops and baseline.tflops:
            vs = f"{m.tflops / baseline.tflops:.0%}"
        elif ceiling_gbps and m.gbps:
            vs = f"{m.gbps / ceiling_gbps:.0%} of copy"
        rows.append((
            m.name, f"{m.ms:.4f}", f"{m.tflops:,.2f}" if m.tflops else "", f"{m.gbps:,.0f}" if m.gbps else "",
            f"{m.rel_err:.1e}" if m.rel_err is not None else "", vs, "live" if m.source == "live" else f"recorded {m.date}",
        ))
    return text_table(rows)


def text_table(rows) -> str:
    """Rows of strings as aligned plain text, the first row a header underlined with dashes."""
    rows = [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
