"""Diagrams for notebook 00 (GPU architecture): the GPU -> SM -> warp -> thread hierarchy, the
memory hierarchy, how blocks and threads index an array, and the idea of the roofline.

Every number drawn here is a typical, rounded value for recent NVIDIA GPUs and is labelled so;
the notebook prints the student's own GPU's numbers next to them.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle

from palette import BLUE as SM_COLOR, GREEN as SMEM_COLOR, ORANGE as WARP_COLOR, RED as REG_COLOR

L2_COLOR = "#8172B2"
DRAM_COLOR = "#937860"
GREY = "#6b6b6b"


def _box(ax, x, y, w, h, color, text="", *, alpha=0.25, fontsize=9, lw=1.2, rounded=True, text_color="black",
         weight="normal"):
    style = "round,pad=0,rounding_size=0.08" if rounded else "square,pad=0"
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle=style, facecolor=color, edgecolor=color, alpha=alpha, lw=lw))
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle=style, facecolor="none", edgecolor=color, lw=lw))
    if text:
        ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=fontsize, color=text_color,
                weight=weight)


def _arrow(ax, a, b, color=GREY, style="-|>", lw=1.2, ls="-"):
    ax.add_patch(FancyArrowPatch(a, b, arrowstyle=style, mutation_scale=12, color=color, lw=lw, linestyle=ls))


def _canvas(w, h, figsize):
    fig, ax = plt.subplots(figsize=figsize)
    ax.set_xlim(0, w)
    ax.set_ylim(0, h)
    ax.set_aspect("equal")
    ax.axis("off")
    return fig, ax


def draw_gpu_hierarchy():
    """GPU (many SMs + L2 + DRAM) -> one SM (4 partitions, shared memory) -> one warp of 32 threads."""
    fig, ax = _canvas(17.2, 7.6, (13, 5.8))

    # --- the GPU chip
    ax.text(2.9, 7.25, "GPU", ha="center", fontsize=12, weight="bold")
    _box(ax, 0.1, 2.2, 5.6, 4.8, GREY, alpha=0.06)
    for r in range(4):
        for c in range(6):
            x, y = 0.35 + c * 0.88, 5.9 - r * 0.9
            hl = (r, c) == (0, 5)
            _box(ax, x, y, 0.72, 0.72, SM_COLOR, "SM", alpha=0.55 if hl else 0.2, fontsize=7,
                 text_color="white" if hl else "black")
    ax.text(2.9, 2.75, "... tens to 100+ SMs\n(the notebook prints yours)", ha="center", va="center", fontsize=8,
            color=GREY, style="italic")
    _box(ax, 0.1, 1.2, 5.6, 0.8, L2_COLOR, "L2 cache (shared by all SMs)", fontsize=9)
    _box(ax, 0.1, 0.1, 5.6, 0.9, DRAM_COLOR, "DRAM / HBM (global memory)", fontsize=9)

    # --- one SM
    ax.text(9.2, 7.25, "one SM (streaming multiprocessor)", ha="center", fontsize=12, weight="bold")
    _box(ax, 6.5, 0.1, 5.4, 6.9, SM_COLOR, alpha=0.08)
    for p in range(4):
        x = 6.7 + p * 1.28
        _box(ax, x, 3.0, 1.15, 3.8, SM_COLOR, alpha=0.12, lw=0.8)
        ax.text(x + 0.575, 6.55, "warp\nscheduler", ha="center", va="center", fontsize=7)
        _box(ax, x + 0.08, 5.3, 0.99, 0.75, REG_COLOR, "registers", alpha=0.3, fontsize=7)
        for k in range(4):
            for j in range(4):
                ax.add_patch(Rectangle((x + 0.1 + j * 0.24, 3.95 + k * 0.3), 0.2, 0.24, facecolor=SM_COLOR,
                                       alpha=0.55, lw=0))
        ax.text(x + 0.575, 3.72, "FP32 lanes", ha="center", va="center", fontsize=7)
        _box(ax, x + 0.08, 3.1, 0.99, 0.45, WARP_COLOR, "tensor core", alpha=0.35, fontsize=7)
    _box(ax, 6.7, 1.6, 4.99, 1.2, SMEM_COLOR, "shared memory / L1 cache\n(one pool per SM, split among its blocks)",
         fontsize=8)
    ax.text(9.2, 0.75, "resident: up to 16-32 blocks,\n1,024-2,048 threads (32-64 warps) per SM", ha="center", va="center",
            fontsize=8, color=GREY, style="italic")
    _arrow(ax, (5.48, 6.25), (6.5, 6.25), color=SM_COLOR, lw=1.5)

    # --- one warp
    ax.text(14.6, 7.25, "one warp = 32 threads", ha="center", fontsize=12, weight="bold")
    _box(ax, 12.6, 2.3, 4.0, 4.7, WARP_COLOR, alpha=0.08)
    for t in range(32):
        r, c = divmod(t, 8)
        x, y = 12.85 + c * 0.46, 5.9 - r * 0.75
        ax.add_patch(Rectangle((x, y), 0.38, 0.55, facecolor=WARP_COLOR, alpha=0.45, edgecolor=WARP_COLOR))
        ax.text(x + 0.19, y + 0.27, str(t), ha="center", va="center", fontsize=7)
    ax.text(14.6, 2.9, "one instruction, 32 threads in lockstep\n(SIMT); each has its own registers",
            ha="center", va="center", fontsize=8)
    _arrow(ax, (11.9, 6.3), (12.6, 6.3), color=WARP_COLOR, lw=1.5)
    ax.text(14.6, 1.3, "A thread block runs on ONE SM,\nsplit into warps of 32 consecutive threads.\n"
                       "Counts are typical of recent NVIDIA GPUs.", ha="center", va="center", fontsize=8, color=GREY)
    return fig


def draw_gpu_memory_hierarchy():
    """Registers -> shared memory/L1 -> L2 -> DRAM: who sees it, typical size, latency, bandwidth."""
    fig, ax = plt.subplots(figsize=(12, 5.2))
    ax.set_xlim(0, 12.4)
    ax.set_ylim(0, 5.7)
    ax.axis("off")
    levels = [
        ("registers", "one thread", "64 K x 32-bit = 256 KB per SM\n(at most 255 per thread)", "~1 cycle",
         REG_COLOR, 2.0),
        ("shared memory / L1", "one thread block (one SM)", "~100-256 KB per SM,\nsplit between shared memory and L1",
         "~20-30 cycles", SMEM_COLOR, 3.5),
        ("L2 cache", "every SM of the GPU", "~4-60 MB per GPU", "~200-300 cycles", L2_COLOR, 5.0),
        ("DRAM (GDDR / HBM)", "every SM; the host via copies", "~16-141 GB per GPU,\n~0.3-4.8 TB/s",
         "~400-800 cycles", DRAM_COLOR, 6.4),
    ]
    for k, (name, scope, size, lat, color, width) in enumerate(levels):
        y = 4.45 - k * 1.2
        x = 4.0 - width / 2
        _box(ax, x, y, width, 0.95, color, name, alpha=0.35, fontsize=10, weight="bold")
        ax.text(7.5, y + 0.7, f"seen by: {scope}", fontsize=8.5, va="center")
        ax.text(7.5, y + 0.3, size, fontsize=8.5, va="center", color="#333333")
        ax.text(10.9, y + 0.47, lat, fontsize=8.5, va="center", color=GREY, style="italic")
    _arrow(ax, (0.25, 5.3), (0.25, 0.55), color=GREY, lw=1.5)
    ax.text(0.4, 2.9, "larger, slower,\nshared more widely", rotation=90, va="center", fontsize=8.5, color=GREY)
    ax.text(7.5, 5.6, "scope and typical size", fontsize=8.5, weight="bold")
    ax.text(10.9, 5.6, "typical latency", fontsize=8.5, color=GREY, weight="bold")
    ax.text(6.2, 0.05, "Typical, rounded values for recent NVIDIA GPUs (Volta to Hopper): "
                       "the notebook prints the sizes of yours.", ha="center", fontsize=8.5, color=GREY,
            style="italic")
    return fig


def draw_gpu_grid_blocks_threads():
    """A 1-D grid: blockIdx.x picks a block, threadIdx.x a thread, together one array element."""
    fig, ax = _canvas(17.5, 6.2, (13, 4.6))
    blocks, threads = 4, 8
    colors = [SM_COLOR, WARP_COLOR, SMEM_COLOR, L2_COLOR]
    cw = 0.5
    ax.text(8.7, 5.85, "grid of 4 blocks x 8 threads  (blockDim.x = 8, gridDim.x = 4)", ha="center", fontsize=11,
            weight="bold")
    for b in range(blocks):
        x0 = 0.8 + b * (threads * cw + 0.15)
        _box(ax, x0 - 0.05, 3.55, threads * cw + 0.1, 1.9, colors[b], alpha=0.1)
        ax.text(x0 + threads * cw / 2, 5.2, f"blockIdx.x = {b}", ha="center", fontsize=9, weight="bold",
                color=colors[b])
        for t in range(threads):
            hl = (b, t) == (2, 5)
            ax.add_patch(Rectangle((x0 + t * cw + 0.04, 3.75), cw - 0.08, 1.1, facecolor=colors[b],
                                   alpha=0.85 if hl else 0.35, edgecolor="black" if hl else colors[b],
                                   lw=1.5 if hl else 0.6))
            ax.text(x0 + t * cw + cw / 2, 4.3, str(t), ha="center", va="center", fontsize=8,
                    color="white" if hl else "black", weight="bold" if hl else "normal")
        for t in range(threads):
            i = b * threads + t
            ax.add_patch(Rectangle((x0 + t * cw + 0.04, 1.5), cw - 0.08, 0.7, facecolor=colors[b],
                                   alpha=0.85 if (b, t) == (2, 5) else 0.2, edgecolor=colors[b], lw=0.6))
            ax.text(x0 + t * cw + cw / 2, 1.85, str(i), ha="center", va="center", fontsize=7.5,
                    color="white" if (b, t) == (2, 5) else "black")
            ax.plot([x0 + t * cw + cw / 2] * 2, [3.72, 2.25], color=colors[b], lw=0.5, alpha=0.5)
    ax.text(0.62, 4.3, "threadIdx.x", ha="right", va="center", fontsize=8.5)
    ax.text(0.62, 1.85, "A[i]", ha="right", va="center", fontsize=9)
    hx = 0.8 + 2 * (threads * cw + 0.15) + 5 * cw + cw / 2
    ax.annotate("block 2, thread 5:\ni = blockIdx.x * blockDim.x + threadIdx.x\n  = 2 * 8 + 5 = 21",
                xy=(hx, 1.45), xytext=(hx - 3.2, 0.1), fontsize=9, ha="left",
                arrowprops=dict(arrowstyle="-|>", color="black", lw=1))
    ax.text(0.8, 0.55, "A block runs on one SM: its threads can share\nshared memory and synchronize.\n"
                       "Blocks are independent: the GPU runs\nthem in any order, on any SM.",
            ha="left", va="center", fontsize=8.5, color=GREY)
    return fig


def draw_gpu_roofline_idea():
    """The roofline, schematically: a bandwidth slope, a compute roof, the ridge point between."""
    fig, ax = plt.subplots(figsize=(8, 4.8))
    peak, bw = 100.0, 5.0  # arbitrary units: the shape is the point
    x = np.logspace(-2, 3, 300)
    ax.plot(x, np.minimum(bw * x, peak), color="black", lw=2.2)
    ridge = peak / bw
    ax.axvline(ridge, color=GREY, ls=":", lw=1)
    ax.fill_between(x[x <= ridge], 1e-3, np.minimum(bw * x, peak)[x <= ridge], color=DRAM_COLOR, alpha=0.12)
    ax.fill_between(x[x >= ridge], 1e-3, peak, color=SM_COLOR, alpha=0.12)
    ax.plot([ridge], [peak], "o", color="black")
    ax.annotate("ridge point\nI* = peak FLOP/s / bandwidth", (ridge, peak), xytext=(ridge * 0.06, peak * 2.2),
                fontsize=9, arrowprops=dict(arrowstyle="-|>", color="black"))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(1e-2, 1e3)
    ax.set_ylim(1e-2, peak * 6)
    (x0, y0), (x1, y1) = ax.transData.transform([(0.1, bw * 0.1), (1.0, bw * 1.0)])
    angle = np.degrees(np.arctan2(y1 - y0, x1 - x0))
    ax.text(0.025, bw * 0.025 * 1.6, "slope = DRAM bandwidth (bytes/s)", rotation=angle, rotation_mode="anchor",
            fontsize=9, color=DRAM_COLOR)
    ax.text(90, peak * 1.25, "roof = peak FLOP/s", fontsize=9, color=SM_COLOR, ha="center")
    ax.text(1.5, 0.025, "memory-bound\n(feed it bytes faster:\ncoalescing, reuse)", fontsize=9, color=DRAM_COLOR,
            ha="center")
    ax.text(150, 0.025, "compute-bound\n(do FLOPs faster:\ntensor cores, ILP)", fontsize=9, color=SM_COLOR,
            ha="center")
    for xi, label, frac in [(1 / 12, "vector add\n(1 FLOP / 12 B)", 0.7), (2.0, "tiled matmul\n(some reuse)", 0.6),
                            (300.0, "large matmul\n(N/6 FLOP/B)", 0.55)]:
        y = min(bw * xi, peak) * frac
        ax.plot([xi], [y], "s", color=WARP_COLOR, ms=7)
        ax.annotate(label, (xi, y), textcoords="offset points", xytext=(7, -22), fontsize=8)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.minorticks_off()
    ax.set_xlabel("arithmetic intensity I (FLOP per byte moved to/from DRAM), log scale")
    ax.set_ylabel("attainable FLOP/s, log scale")
    ax.set_title("The roofline: attainable = min(peak, bandwidth x I)   (schematic)", fontsize=10)
    return fig
