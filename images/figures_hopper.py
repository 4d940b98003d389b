"""Diagrams for notebook 07 (wgmma, the TMA, mbarriers, warp specialization) and for the
cp.async pipeline of notebook 04, section 7.

Each draw_<name>() returns a matplotlib Figure; images/draw.py saves it as images/<name>.png.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, Rectangle

from figures_tensorcore import _rbox
from palette import BLUE as A_COL, GREEN as C_COL, LIGHT_GREY as GREY, ORANGE as B_COL, PURPLE, RED as HOT

WARP_SHADES = ["#9ecae1", "#6baed6", "#4292c6", "#2171b5"]  # the four warps of a warpgroup
GREEN_LIGHT = "#a1d99b"  # a copy in flight
CHUNK_SHADES = plt.get_cmap("tab10").colors[:8]  # the eight 16-byte chunks of a 128-byte row


def _clean(ax):
    ax.set_aspect("equal")
    ax.axis("off")


def _arrow(ax, start, end, color="black", text=None, text_at=None, ha="center", style="-|>", lw=1.2, rad=0.0):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle=style, mutation_scale=12, color=color, lw=lw,
                                 connectionstyle=f"arc3,rad={rad}"))
    if text:
        x, y = text_at or ((start[0] + end[0]) / 2, (start[1] + end[1]) / 2)
        ax.text(x, y, text, ha=ha, va="center", fontsize=8, color=color)


def draw_wgmma_warpgroup():
    """One wgmma m64n256k16: A (64 x 16) and B (16 x 256) are read from shared memory through
    descriptors; the accumulator D (64 x 256, fp32) lives in the registers of the warpgroup's
    four warps, 16 rows per warp, 128 floats per thread."""
    fig, ax = plt.subplots(figsize=(10, 4.6))
    u = 0.05  # one row/column of the drawing
    # B: 16 x 256 above D; A: 64 x 16 left of D
    ax.add_patch(Rectangle((0, 0), 256 * u, 64 * u, facecolor="none", edgecolor="black", lw=1))
    for w in range(4):
        y = (3 - w) * 16 * u
        ax.add_patch(Rectangle((0, y), 256 * u, 16 * u, facecolor=WARP_SHADES[w], edgecolor="black", lw=0.8))
        ax.text(128 * u, y + 8 * u, f"warp {w} (threads {32 * w}-{32 * w + 31}): rows {16 * w}-{16 * w + 15}",
                ha="center", va="center", fontsize=8.5, color="white" if w >= 2 else "black")
    ax.text(128 * u, -0.25, "D: 64 x 256 fp32 accumulators in registers (wgmma.mma_async ... f32)\n"
            "each of the 128 threads holds 256 / 2 = 128 floats", ha="center", va="top", fontsize=9)
    ax.add_patch(Rectangle((0, 64 * u + 0.35), 256 * u, 16 * u, facecolor=B_COL, alpha=0.55, edgecolor="black"))
    ax.text(128 * u, 72 * u + 0.35, "B: 16 x 256 fp16 in shared memory", ha="center", va="center", fontsize=9)
    ax.add_patch(Rectangle((-16 * u - 0.35, 0), 16 * u, 64 * u, facecolor=A_COL, alpha=0.55, edgecolor="black"))
    ax.text(-16 * u - 0.5, 2.1, "A: 64 x 16 fp16\nin shared memory", ha="right", va="center", fontsize=9)
    # the descriptors: the tensor cores read A and B themselves
    _rbox(ax, -5.8, 0.1, 2.6, 0.55, GREY, "descriptor of A", fontsize=8)
    _rbox(ax, -5.8, 3.65, 2.6, 0.55, GREY, "descriptor of B", fontsize=8)
    _arrow(ax, (-3.2, 0.37), (-16 * u - 0.35, 0.6), color=PURPLE)
    _arrow(ax, (-3.2, 3.92), (0.0, 72 * u + 0.35), color=PURPLE)
    ax.text(-4.5, 3.5, "64 bits each: shared address,\nrow strides, swizzle", ha="center", va="top", fontsize=8,
            color=PURPLE)
    ax.text(13.6, 4.0, "one instruction, issued by all\n4 warps (a warpgroup) together:\n\n"
            "D = A B + D\n\nasynchronous: commit_group,\nthen wait_group(n)", ha="left", va="center",
            fontsize=9)
    ax.set_xlim(-6.0, 17.5)
    ax.set_ylim(-1.0, 5.7)
    _clean(ax)
    return fig


def draw_tma_swizzle():
    """The TMA copies a box of A (128 rows x 64 halves, 128 bytes a row) into shared memory; the
    128-byte swizzle stores chunk c of row r at chunk c XOR (r % 8), so the 8 rows wgmma reads
    together at one chunk index fall in 8 different 16-byte slots, i.e. all 32 banks."""
    fig, axes = plt.subplots(1, 3, figsize=(11, 4.2), gridspec_kw={"width_ratios": [1.15, 1, 1]})
    ax = axes[0]
    ax.add_patch(Rectangle((0, 0), 6, 6, facecolor="white", edgecolor="black"))
    ax.add_patch(Rectangle((2.0, 2.0), 1.2, 2.4, facecolor=A_COL, alpha=0.6, edgecolor=HOT, lw=1.6))
    ax.text(3, 6.2, "A in global memory (M x K, fp16)", ha="center", va="bottom", fontsize=9)
    ax.text(1.85, 3.2, "box:\n128 rows\nx 64 halves\n(128 bytes\na row)", ha="right", va="center", fontsize=8)
    ax.text(3, -0.3, "the tensor map (encoded once on the host):\nsizes, row stride, box, swizzle",
            ha="center", va="top", fontsize=8)
    ax.set_xlim(-0.2, 7.1)
    ax.set_ylim(-1.3, 7)
    _clean(ax)
    for ax, swizzled in ((axes[1], False), (axes[2], True)):
        for r in range(8):
            for c in range(8):
                slot = c ^ r if swizzled else c
                ax.add_patch(Rectangle((slot, 7 - r), 1, 1, facecolor=CHUNK_SHADES[c], alpha=0.75,
                                       edgecolor="white", lw=1))
                ax.text(slot + 0.5, 7.5 - r, str(c), ha="center", va="center", fontsize=8)
            ax.text(-0.15, 7.5 - r, f"row {r}", ha="right", va="center", fontsize=7.5)
        # the 8 rows' chunk 0: where wgmma reads them
        for r in range(8):
            slot = (0 ^ r) if swizzled else 0
            ax.add_patch(Rectangle((slot, 7 - r), 1, 1, facecolor="none", edgecolor="black", lw=2))
        for b in range(8):
            ax.text(b + 0.5, 8.1, str(4 * b), ha="center", va="bottom", fontsize=7)
        ax.text(4, 8.7, "first of the 4 banks of each 16-byte slot", ha="center", va="bottom", fontsize=7.5)
        title = ("128-byte swizzle: chunk c of row r at c XOR (r % 8)\nchunk 0 of 8 rows: 8 slots, all 32 banks"
                 if swizzled else "no swizzle: chunk c of every row in slot c\nchunk 0 of 8 rows: the same 4 banks")
        ax.text(4, -0.35, title, ha="center", va="top", fontsize=8.5, color=C_COL if swizzled else HOT)
        ax.set_xlim(-1.3, 8.2)
        ax.set_ylim(-1.6, 9.5)
        _clean(ax)
    _arrow(axes[0], (3.3, 3.2), (7.0, 3.2), color="black")
    axes[0].text(4.6, 3.4, "TMA", ha="center", va="bottom", fontsize=9)
    fig.text(0.69, 0.9, "one 128-byte row of shared memory = 8 chunks of 16 bytes (the numbers: which chunk of the "
             "row in global memory)", ha="center", fontsize=8.5)
    fig.subplots_adjust(wspace=0.15)
    return fig


def draw_mbarrier_ring():
    """A ring of 4 shared-memory stages between one producer warpgroup (TMA copies) and two
    consumer warpgroups (wgmma); full[s] says stage s has landed, empty[s] that both consumers
    are done with it."""
    fig, ax = plt.subplots(figsize=(10, 4.4))
    stage_w, gap = 2.0, 0.45
    xs = [0.6 + s * (stage_w + gap) for s in range(4)]
    for s, x in enumerate(xs):
        ax.add_patch(Rectangle((x, 1.6), stage_w, 1.2, facecolor=C_COL, alpha=0.35, edgecolor="black"))
        ax.text(x + stage_w / 2, 2.2, f"stage {s}\nA + B\n48 KB", ha="center", va="center", fontsize=8)
        _rbox(ax, x + 0.05, 2.95, 0.9, 0.4, "#c6dbef", f"full[{s}]", fontsize=7.5)
        _rbox(ax, x + 1.05, 2.95, 0.9, 0.4, "#fdd0a2", f"empty[{s}]", fontsize=7.5)
    right = xs[-1] + stage_w
    _rbox(ax, 0.6, 4.4, right - 0.6, 0.75, A_COL,
          "producer: warpgroup 0, one thread issues the TMA copies (40 registers a thread)",
          fontsize=9, text_color="white")
    _rbox(ax, 0.6, -0.1, (right - 0.6) / 2 - 0.1, 0.75, B_COL,
          "consumer: warpgroup 1 (rows 0-63)", fontsize=9)
    _rbox(ax, 0.6 + (right - 0.6) / 2 + 0.1, -0.1, (right - 0.6) / 2 - 0.1, 0.75, B_COL,
          "consumer: warpgroup 2 (rows 64-127)", fontsize=9)
    # one lap of stage 1, as an example
    x = xs[1]
    _arrow(ax, (x + 0.5, 4.4), (x + 0.5, 3.36), color=A_COL)
    ax.text(x + 0.38, 3.95, "1 wait empty[s],\nTMA into stage s,\ncounts bytes on full[s]", ha="right",
            va="center", fontsize=7.5, color=A_COL)
    _arrow(ax, (x + 0.5, 2.94), (x + 0.5, 0.66), color="#2171b5")
    ax.text(x + 0.38, 1.25, "2 wait full[s],\nwgmma from stage s", ha="right", va="center", fontsize=7.5,
            color="#2171b5")
    _arrow(ax, (x + 1.5, 0.66), (x + 1.5, 2.94), color="#b35806")
    ax.text(x + 1.62, 1.25, "3 both consumers done:\narrive on empty[s]", ha="left", va="center", fontsize=7.5,
            color="#b35806")
    _arrow(ax, (x + 1.5, 3.36), (x + 1.5, 4.4), color="#b35806")
    ax.text(x + 1.62, 3.95, "4 producer may\nrefill stage s", ha="left", va="center", fontsize=7.5, color="#b35806")
    # the ring: after stage 3 comes stage 0 again
    ax.text(right + 0.2, 2.2, "a ring: k step k\nuses stage k % 4;\nafter stage 3\ncomes stage 0", ha="left",
            va="center", fontsize=8, color="grey")
    ax.set_xlim(-0.9, right + 1.6)
    ax.set_ylim(-0.4, 5.3)
    _clean(ax)
    return fig


def _bar(ax, t, row, length, color, text, alpha=0.85):
    ax.add_patch(Rectangle((t, row - 0.35), length, 0.7, facecolor=color, alpha=alpha, edgecolor="black", lw=0.6))
    ax.text(t + length / 2, row, text, ha="center", va="center", fontsize=7.5)


def draw_hopper_roles_timeline():
    """Who does what over time in the warp-specialized kernel: the producer runs up to 4 k steps
    ahead (as many as there are stages), the copy engine moves the tiles, both consumers run wgmma
    on the oldest full stage and release it; from then on the producer waits for a free stage."""
    fig, ax = plt.subplots(figsize=(10.5, 3.3))
    copy, mma, tick = 0.8, 1.0, 0.22
    issue, copied, done = [], [], []
    for k in range(10):
        issue.append(max(issue[-1] + tick if issue else 0.0, done[k - 4] if k >= 4 else 0.0))
        copied.append(max(issue[k] + tick, copied[-1] if copied else 0.0) + copy)
        done.append(max(copied[k], done[-1] if done else 0.0) + mma)
    last = done[7]
    for k in range(10):
        if issue[k] < last:
            _bar(ax, issue[k], 3, tick, A_COL, "")
        if k >= 4 and issue[k] - (issue[k - 1] + tick) > 0.05 and issue[k] < last:
            ax.add_patch(Rectangle((issue[k - 1] + tick, 2.75), issue[k] - issue[k - 1] - tick, 0.5,
                                   facecolor="white", edgecolor=GREY, hatch="///", lw=0.6))
        if copied[k] - copy < last:
            _bar(ax, copied[k] - copy, 2, copy, GREEN_LIGHT, f"k{k}: s{k % 4}")
        if done[k] <= last + 1e-9:
            for row in (1, 0):
                _bar(ax, done[k] - mma, row, mma, B_COL, f"wgmma k{k}")
    ax.text(issue[0], 3.55, "issue k0-k3: the ring starts empty", fontsize=7.5, va="bottom")
    ax.text(issue[5], 3.55, "hatched: wait for empty[k % 4]", fontsize=7.5, va="bottom", color="grey")
    ax.set_yticks([3, 2, 1, 0], ["producer (warpgroup 0)", "TMA copy (k step: stage)", "consumer 1",
                                 "consumer 2"], fontsize=8)
    ax.set_ylim(-0.5, 4.0)
    ax.set_xlim(-0.1, last + 0.1)
    ax.set_xticks([])
    ax.set_xlabel("time, as planned: measured, the tensor pipe is busy 84% of the cycles, not all")
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    ax.tick_params(axis="y", length=0)
    fig.tight_layout()
    return fig


GREEN_LIGHT = "#a1d99b"


def draw_cp_async_pipeline():
    """Notebook 04's double buffering with cp.async: a prologue starts the copy of tile 0; each
    iteration starts the copy of tile k+1 into the other buffer, waits for tile k (wait_group)
    and computes on it, so copies and arithmetic overlap."""
    fig, axes = plt.subplots(2, 1, figsize=(10, 3.8), sharex=True)
    copy, comp = 1.0, 1.3
    ax = axes[0]
    t = 0.0
    for k in range(4):
        _bar(ax, t, 1, copy, "#c6dbef", f"load tile {k}")
        t += copy
        _bar(ax, t, 0, comp, "#fdd0a2", f"compute {k}")
        t += comp
    ax.set_title("one buffer: load (through registers), __syncthreads, compute, repeat", fontsize=9, loc="left")
    ax = axes[1]
    for k in range(6):
        buf = k % 2
        _bar(ax, k * comp, 1, copy, "#c6dbef" if buf == 0 else "#9ecae1", f"tile {k}\n-> buf {buf}")
    for k in range(5):
        _bar(ax, copy + k * comp, 0, comp, "#fdd0a2" if k % 2 == 0 else "#fdae6b", f"compute {k}\n(buf {k % 2})")
    ax.annotate("prologue", (0.5, 1.4), xytext=(0.5, 1.85), ha="center", fontsize=7.5,
                arrowprops={"arrowstyle": "-", "color": "grey"})
    ax.annotate("wait_group: tile 1 has landed", (copy + comp, 0.38), xytext=(copy + comp + 0.3, -0.85),
                fontsize=7.5, color=HOT, arrowprops={"arrowstyle": "-|>", "color": HOT})
    ax.set_title("double buffering with cp.async: tile k+1 is copied into the other buffer while tile k is "
                 "computed on", fontsize=9, loc="left")
    for ax in axes:
        ax.set_yticks([0, 1], ["compute\n(FMA)", "copies\nglobal -> shared"], fontsize=8)
        ax.set_ylim(-1.1 if ax is axes[1] else -0.6, 2.2)
        ax.set_xlim(0, 9.6)
        ax.set_xticks([])
        for s in ("top", "right", "left"):
            ax.spines[s].set_visible(False)
        ax.tick_params(axis="y", length=0)
    axes[1].set_xlabel("time")
    fig.tight_layout()
    return fig
