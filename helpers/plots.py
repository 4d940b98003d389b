"""Charts the notebooks share: the roofline, bars against cuBLAS, sweeps and heatmaps.

Every chart labels where its numbers came from (live or recorded on which GPU), because a
roofline drawn from another GPU's numbers must say so.
"""

from __future__ import annotations

from collections.abc import Collection

import matplotlib.pyplot as plt
import numpy as np

from .bench import Measurement
from .env import GpuSpec
from .kernels import check_number


def _check_measurements(what: str, items, one: bool = False) -> None:
    """Refuse anything but a list of `Measurement`s (`one`: a Measurement), e.g. a kernel's name or a
    number where its result goes: the chart or table would fail further in, naming no argument."""
    if one:
        bad = not isinstance(items, Measurement)
    else:
        bad = isinstance(items, (str, bytes)) or not hasattr(items, "__iter__") or \
            isinstance(items, Collection) and not all(isinstance(m, Measurement) for m in items)  # a generator: unread
    if bad:
        kind = "a Measurement" if one else "a list of Measurements"
        raise TypeError(f"{what} must be {kind} (what Session.measure returns), got {items!r:.80}")


def _source_note(points) -> str:
    """Where the numbers come from, e.g. "recorded on NVIDIA H100, 2026-11-20 to 2026-11-22" or
    "live on NVIDIA H100, 2026-11-24": the GPU, the day(s), live or recorded, for every chart."""
    where = {}
    for p in points:
        if p.ok:
            where.setdefault((p.source, p.gpu), set()).add(p.date)
    parts = []
    for (source, gpu), dates in where.items():
        days = sorted(d for d in dates if d)
        when = "" if not days else f", {days[0]}" if len(days) == 1 else f", {days[0]} to {days[-1]}"
        parts.append(f"{'live' if source == 'live' else 'recorded'} on {gpu}{when}")
    return "; ".join(parts)


def _title(ax, title: str | None, note: str) -> None:
    """The chart's title with, under it, where its numbers come from (never one without the other)."""
    text = "\n".join(t for t in (title, note and f"({note})") if t)
    ax.set_title(text, fontsize=10)


# Where a point's label may go, in points from the point (text centred vertically there): beside
# it first, then further out, nearest first, the right side before the left.
_OFFSETS = sorted(((dx, dy) for dx in (6, -6, 20, -20, 40, -40, 70, -70, 110, -110, 160, -160)
                   for dy in range(-150, 151, 10)), key=lambda o: (abs(o[0]) / 2 + abs(o[1]), o[0] < 0, o[1]))


def place_labels(ax, points, names, avoid=(), unnamed=()) -> None:
    """Write each name near its point where it overlaps no label already placed, no point (named,
    or drawn `unnamed`), nor the boxes in `avoid` (e.g. the legend), and stays inside the axes;
    away from its point, a thin leader line joins them. Points are taken in the order given (the
    most important first)."""
    from matplotlib.transforms import Bbox

    renderer = ax.figure.canvas.get_renderer()
    ax.set_xlim(ax.get_xlim())  # fix the view, so that data map to the pixels measured here
    ax.set_ylim(ax.get_ylim())
    inside = ax.get_window_extent(renderer)
    scale = ax.figure.dpi / 72  # pixels per point
    pixels = [ax.transData.transform(xy) for xy in points]
    dot = 4 * scale
    dots = pixels + [ax.transData.transform(xy) for xy in unnamed]
    taken = list(avoid) + [Bbox.from_extents(px - dot, py - dot, px + dot, py + dot) for px, py in dots]
    for (px, py), xy, name in zip(pixels, points, names):
        probe = ax.text(0, 0, name, fontsize=8)
        box = probe.get_window_extent(renderer)
        probe.remove()
        w, h = box.width + 2, box.height + 2
        for dx, dy in _OFFSETS:
            x0 = px + dx * scale - (w if dx < 0 else 0)
            y0 = py + dy * scale - h / 2
            cand = Bbox.from_bounds(x0, y0, w, h)
            if inside.contains(cand.x0, cand.y0) and inside.contains(cand.x1, cand.y1) and \
                    not any(cand.overlaps(b) for b in taken):
                near = abs(dx) <= 6 and abs(dy) <= 10
                ax.annotate(name, xy, textcoords="offset points", xytext=(dx, dy), fontsize=8, va="center",
                            ha="right" if dx < 0 else "left",
                            arrowprops=None if near else {"arrowstyle": "-", "color": "grey", "lw": 0.6})
                taken.append(cand)
                break


def _to_label(points, labels):
    """Which points get a name on the roofline. "auto": all of them when there are at most 8;
    otherwise only the fastest kernel of each notebook (cuBLAS's runs stay unnamed dots: its roofs
    are in the legend), the others being dots in their notebook's colour. "all", "none", or a set
    of names."""
    if labels == "all" or (labels == "auto" and len(points) <= 8):
        return list(points)
    if labels == "none":
        return []
    if labels != "auto":
        return [p for p in points if p.name in set(labels)]
    best = {}
    for p in points:
        if p.name.startswith("cuBLAS"):
            continue
        if p.notebook not in best or p.tflops > best[p.notebook].tflops:
            best[p.notebook] = p
    chosen = {id(p) for p in best.values()}
    return [p for p in points if id(p) in chosen]


def roofline(spec: GpuSpec, points: list[Measurement] = (), *, measured_bandwidth: float | None = None,
             measured_compute: dict | None = None, tensor_core: bool = False, title: str | None = None, ax=None,
             labels="auto"):
    """Draw the roofline: bandwidth and compute ceilings (theoretical dashed, measured solid) and
    one point per kernel at (arithmetic intensity, achieved TFLOP/s), on log axes.

    `measured_compute` maps a label ("cuBLAS fp32") to TFLOP/s. `labels` says which points are
    named (see `_to_label`: by default all of a few, or the best of each notebook among many), and
    names never overlap. Points from several notebooks are coloured by notebook.
    """
    if spec is None:
        raise ValueError("no GPU spec: a roofline needs a GPU's (live or recorded) peaks")
    if not spec.dram_gbps:
        raise ValueError(f"the DRAM bandwidth of {spec.name} is unknown, so its roofline has no slope")
    check_number("the spec's dram_gbps", spec.dram_gbps, " (GB/s)", integer=False)
    _check_measurements("points", points)
    if measured_bandwidth is not None:
        check_number("measured_bandwidth", measured_bandwidth, " (GB/s) or None", integer=False)
    for label, tf in (measured_compute or {}).items():
        check_number(f"measured_compute[{label!r}]", tf, " (TFLOP/s)", integer=False)
    if isinstance(labels, str) and labels not in ("auto", "all", "none"):
        raise ValueError(f"labels is 'auto', 'all', 'none' or a set of kernel names, got {labels!r}")
    fig, ax = (ax.figure, ax) if ax is not None else plt.subplots(figsize=(8, 5))
    x = np.logspace(-2, 4, 400)
    bw = spec.dram_gbps * 1e9 / 1e12  # TB/s: TFLOP/s per FLOP/byte
    peaks = {"fp32 peak": spec.peak_fp32_tflops}
    if tensor_core and spec.has_tensor_cores:
        peaks["fp16 tensor-core peak"] = spec.peak_fp16_tc_tflops
    # the theoretical roof: one DRAM slope (grey) up to the highest peak, each peak flat from its ridge point
    for i, (label, peak) in enumerate(peaks.items()):
        flat = bw * x >= peak
        ax.plot(x[flat], np.full(flat.sum(), peak), "--", color=f"C{i}", lw=1.2, label=f"{label}: {peak:,.0f} TFLOP/s")
    slope = bw * x <= max(peaks.values())
    ax.plot(x[slope], bw * x[slope], "--", color="grey", lw=1.2, label=f"DRAM peak: {spec.dram_gbps:,.0f} GB/s")
    if measured_bandwidth:
        mbw = measured_bandwidth / 1e3
        top = max([spec.peak_fp32_tflops] + list((measured_compute or {}).values()))
        ax.plot(x, np.minimum(mbw * x, top), "-", color="grey", lw=2, alpha=0.7,
                label=f"measured copy: {measured_bandwidth:,.0f} GB/s")
    for j, (label, tf) in enumerate((measured_compute or {}).items()):
        ax.axhline(tf, color=f"C{j + 3}", lw=2, alpha=0.7, label=f"{label}: {tf:,.1f} TFLOP/s (measured)")
    pts = [q for q in points if q.ok and q.intensity and q.tflops]
    notebooks = sorted({p.notebook for p in pts})
    by_notebook = len(notebooks) > 1
    requested = [p for p in pts if p.traffic == "requested"]
    for k, p in enumerate(pts):
        color = f"C{(notebooks.index(p.notebook) + 5) % 10}" if by_notebook else f"C{(k + 5) % 10}"
        hollow = dict(mfc="none", mew=1.5) if requested and len(requested) < len(pts) and p in requested else {}
        ax.plot(p.intensity, p.tflops, "o", color=color, ms=7 if not by_notebook else 5, **hollow)
    if by_notebook:
        for n in notebooks:
            count = sum(p.notebook == n for p in pts)
            ax.plot([], [], "o", ms=5, color=f"C{(notebooks.index(n) + 5) % 10}",
                    label=f"{n or 'other'}: {count} kernel{'s' if count > 1 else ''}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    if not requested:
        ax.set_xlabel("arithmetic intensity (FLOP per byte of minimal DRAM traffic)")
    elif len(requested) == len(pts):  # caches serve the repeats: a point may sit above the DRAM slope
        ax.set_xlabel("arithmetic intensity (FLOP per byte requested from global memory)")
    else:
        ax.set_xlabel("FLOP per byte: of minimal DRAM traffic (filled), requested from global memory (hollow)")
    ax.set_ylabel("TFLOP/s")
    _title(ax, title or f"Roofline of {spec.name}", _source_note(pts))
    ax.grid(True, which="both", alpha=0.3)
    legend = ax.legend(fontsize=7 if by_notebook else 8, loc="lower right")
    if pts:
        roofs = list(peaks.values()) + list((measured_compute or {}).values())  # every roof stays in view
        ax.set_ylim(min(ax.get_ylim()[0], min(p.tflops for p in pts) / 3), max(max(p.tflops for p in pts) * 4, max(roofs) * 2))
        shown = sorted(_to_label(pts, labels), key=lambda p: -p.tflops)
        renderer = fig.canvas.get_renderer()
        place_labels(ax, [(p.intensity, p.tflops) for p in shown], [p.name for p in shown],
                     avoid=[legend.get_window_extent(renderer)] + _bands(ax, (measured_compute or {}).values()),
                     unnamed=[(p.intensity, p.tflops) for p in pts if p not in shown])
    return fig


def _bands(ax, levels) -> list:
    """Thin boxes along horizontal roofs (display coordinates), so that no label is struck through."""
    from matplotlib.transforms import Bbox

    box = ax.get_window_extent()
    return [Bbox.from_extents(box.x0, y - 3, box.x1, y + 3)
            for y in (ax.transData.transform((1.0, level))[1] for level in levels)]


def versus_baseline(points: list[Measurement], baseline: Measurement, *, title: str | None = None, ax=None):
    """Horizontal bars: each kernel's TFLOP/s, and its speed as a percentage of the baseline's
    (cuBLAS): the interleaved ratio where the two were timed together (`Measurement.of`)."""
    _check_measurements("points", points)
    _check_measurements("baseline", baseline, one=True)
    pts = [p for p in points if p.ok and p.tflops]
    if not baseline.ok or not baseline.tflops:
        raise ValueError(f"the baseline {baseline.name!r} has no result to compare with")
    if not pts:
        raise ValueError("none of the points has a result in TFLOP/s to compare with the baseline")
    fig, ax = (ax.figure, ax) if ax is not None else plt.subplots(figsize=(8, 0.5 * len(pts) + 1.5))
    # each kernel beside the baseline time its ratio was divided by: the same interleaved rounds'
    # (a tick on its bar), else the baseline's own bar below
    rounds = [_rounds_tflops(p, baseline) for p in pts]
    own = any(r is None for r in rounds)
    names = [p.name for p in pts] + ([baseline.name] if own else [])
    values = [p.tflops for p in pts] + ([baseline.tflops] if own else [])
    shares = [p.of(baseline) for p in pts] + ([1.0] if own else [])
    ax.barh(names, values, color=["C0"] * len(pts) + ["C3"] * own)
    for i, (v, share) in enumerate(zip(values, shares)):
        of = f" of {rounds[i]:,.1f}" if i < len(pts) and rounds[i] else ""
        text = f"  {v:,.1f} TFLOP/s" + (f" ({share:.0%}{of})" if share is not None else "")
        ax.text(max(v, rounds[i] or 0) if i < len(pts) else v, i, text, va="center", fontsize=8)
    ticks = [(r, i) for i, r in enumerate(rounds) if r]
    if ticks:
        ax.plot([r for r, _ in ticks], [i for _, i in ticks], "|", color="C3", ms=16, mew=2)
    ax.invert_yaxis()
    # said under the axis rather than in a legend, which could cover a bar
    ax.set_xlabel(f"TFLOP/s (red tick: {baseline.name}, timed in the same rounds)" if ticks else "TFLOP/s")
    ax.set_xlim(0, max(values + [r for r, _ in ticks]) * 1.45)
    _title(ax, title or f"Against {baseline.name}", _source_note(pts + [baseline]))
    return fig


def _rounds_tflops(m: Measurement, baseline: Measurement) -> float | None:
    """The baseline's TFLOP/s in the rounds interleaved with `m` (None: not timed together)."""
    rounds = m.baseline_in_rounds(baseline)
    return rounds.tflops if rounds is not baseline else None


def sweep(xs, measurements: list[Measurement] | dict[str, list[Measurement]], *, xlabel: str, metric: str = "gbps",
          ceiling: float | None = None, ceiling_label: str = "ceiling", title: str | None = None,
          label: str | None = None, ax=None):
    """A parameter sweep (e.g. threads per block) against GB/s or TFLOP/s. Several kernels share
    one chart when `measurements` is a dict (label: that kernel's measurements, one per x; the
    ceiling drawn once), or when each call passes its `label` and the same `ax`."""
    if metric not in ("gbps", "tflops"):
        raise ValueError(f"metric must be 'gbps' or 'tflops', got {metric!r}")
    if isinstance(measurements, dict):
        fig = None
        for name, series in measurements.items():
            fig = sweep(xs, list(series), xlabel=xlabel, metric=metric, ceiling=None if fig else ceiling,
                        ceiling_label=ceiling_label, title=title, label=name, ax=fig.axes[0] if fig else ax)
        return fig
    pairs = [(x, getattr(m, metric)) for x, m in zip(xs, measurements) if m.ok]
    fig, ax = (ax.figure, ax) if ax is not None else plt.subplots(figsize=(7, 4))
    if pairs:
        ax.plot([str(p[0]) for p in pairs], [p[1] for p in pairs], "o-", label=label)
    if ceiling:
        ax.axhline(ceiling, color="grey", ls="--", label=ceiling_label)
    if ceiling or label:
        ax.legend(fontsize=8)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("GB/s" if metric == "gbps" else "TFLOP/s")
    _title(ax, title, _source_note(measurements))
    ax.grid(True, alpha=0.3)
    return fig


def heatmap(values: np.ndarray, row_labels, col_labels, *, xlabel: str, ylabel: str, unit: str = "TFLOP/s",
            title: str | None = None, source=(), ax=None):
    """A 2-D sweep (e.g. tile sizes) with each cell's value written in it; NaN shows as blank.
    `source`: the measurements behind the values, so the chart says on which GPU and day."""
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
    _title(ax, title, _source_note(list(source)))
    return fig


def table(measurements: list[Measurement], baseline: Measurement | None = None, ceiling_gbps: float | None = None) -> str:
    """A plain-text table (reads the same on GitHub, in Jupyter and under nbval). Each "vs baseline"
    says what it was divided by: for a kernel timed interleaved with the baseline, the baseline's
    median over those same rounds (records older than `Measurement.baseline_ms` give ratio x ms,
    marked "~"); else the baseline's own time, at the same problem size only; or the copy
    ceiling's GB/s. Given both a baseline and a ceiling (a memory-bound kernel beside torch's), the
    share of the copy gets a column of its own. The baseline's own row is shown only where some
    ratio was divided by it. A source shared by every row is said once, under the table."""
    _check_measurements("measurements", measurements)
    if baseline is not None:
        _check_measurements("baseline", baseline, one=True)
    if ceiling_gbps is not None:
        check_number("ceiling_gbps", ceiling_gbps, " (the copy's GB/s) or None", integer=False)
    both = baseline is not None and ceiling_gbps  # a memory-bound kernel: a share of the copy, and a ratio
    rows = [("kernel", "ms", "TFLOP/s", "GB/s", "rel. error", "vs baseline", "source")]
    if both:
        rows[0] = rows[0][:4] + (f"of copy {ceiling_gbps:,.0f} GB/s",) + rows[0][4:]
    shares = {id(m): _share(m, baseline, None if both else ceiling_gbps) for m in measurements if m is not baseline}
    used = any(of == "own" for _, of in shares.values() if of)
    for m in measurements:
        if baseline is not None and m is baseline and not used and any(of for _, of in shares.values()):
            continue  # every ratio above came from its own interleaved rounds, not from this time
        if not m.ok:
            rows.append((m.name, *["-"] * (len(rows[0]) - 2), "no record"))
            continue
        share, of = shares[id(m)] if m is not baseline else ((1.0, None) if used else (None, None))
        if of == "own":
            of = f"{baseline.ms:.4f} ms"
        spread = m.spread() if m is not baseline and m.timed_with(baseline) else ""
        vs = f"{share:.0%}{spread}" + (f" of {of}" if of else "") if share is not None else ""
        gbps = f"{m.gbps:,.0f}" + (" req." if m.traffic == "requested" else "") if m.gbps else ""
        copy = (f"{m.gbps / ceiling_gbps:.0%}" if m.gbps else "",) if both else ()
        rows.append((
            m.name, f"{m.ms:.4f}", f"{m.tflops:,.2f}" if m.tflops else "", gbps, *copy,
            f"{m.rel_err:.1e}" if m.rel_err is not None else "", vs, "live" if m.source == "live" else f"recorded {m.date}",
        ))
    notes = []
    if any(m.ok and m.ratio_quartiles for m in measurements):
        notes.append("(vs baseline: the median of per-round ratios [their quartiles]; ahead only where the lower is >100%)")
    if any(m.ok and m.l2_flushed for m in measurements):
        notes.append("(timed with L2 flushed before every call: the data would fit in L2)")
    if any(m.ok and m.gbps and m.traffic == "requested" for m in measurements):
        notes.append("(GB/s req.: bytes the kernel requests from global memory, repeats included; "
                     "other GB/s: minimal DRAM traffic)")
    sources = {r[-1] for r in rows[1:]}
    if len(sources) == 1:
        rows = [r[:-1] for r in rows]
        notes.insert(0, f"(every row: {sources.pop()})")
    return "\n".join([text_table(_narrowed(rows, notes)), *notes])


WIDTH = 120  # characters: the book's column and a slide's


def _narrowed(rows: list, notes: list) -> list:
    """`rows` within WIDTH characters where they can be: a table wider than the book's column leaves out,
    in turn, GB/s where every row has TFLOP/s (a compute-bound table), the word "recorded" before each
    date (said once in a note), and the long header "rel. error". A table that fits is left as it is."""
    def width(rs):
        return len(text_table(rs).splitlines()[1])

    header = rows[0]
    if width(rows) > WIDTH and "GB/s" in header and "TFLOP/s" in header:
        g, t = header.index("GB/s"), header.index("TFLOP/s")
        if all(r[t] not in ("", "-") or r[-1] == "no record" for r in rows[1:]):
            rows = [r[:g] + r[g + 1:] for r in rows]
    if width(rows) > WIDTH and rows[0][-1] == "source" and any(str(r[-1]).startswith("recorded ") for r in rows[1:]):
        rows = [r[:-1] + (str(r[-1]).removeprefix("recorded "),) for r in rows]
        notes.append("(source: the date a row was recorded, or live)")
    if width(rows) > WIDTH and "rel. error" in rows[0]:
        e = rows[0].index("rel. error")
        rows = [rows[0][:e] + ("error",) + rows[0][e + 1:], *rows[1:]]
    return rows


def _share(m: Measurement, baseline: Measurement | None, ceiling_gbps: float | None):
    """(fraction, what it was divided by) for one row of `table`; "own": the baseline's own time."""
    if not m.ok:
        return None, None
    if (share := m.of(baseline)) is not None:
        if m.timed_with(baseline):
            return share, f"{'' if m.baseline_ms else '~'}{m.rounds_baseline_ms:.4f} ms"
        return share, "own"
    if ceiling_gbps and m.gbps:
        return m.gbps / ceiling_gbps, f"copy {ceiling_gbps:,.0f} GB/s"
    return None, None


def text_table(rows) -> str:
    """Rows of strings as aligned plain text, the first row a header underlined with dashes."""
    given = rows  # a generator of rows is read once, here
    rows = list(rows) if hasattr(rows, "__iter__") and not isinstance(rows, (str, bytes)) else None
    if rows is None or any(isinstance(r, (str, bytes)) for r in rows):
        raise TypeError(f"rows must be a list of rows (lists of cells), the header first, got {given!r:.80}")
    if not rows:
        raise ValueError("rows is empty: a table needs its header row at least")
    short = [r for r in rows if len(r) < len(rows[0])]
    if short:
        raise ValueError(f"every row needs the header's {len(rows[0])} cells, got {short[0]!r:.80}")
    rows = [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
