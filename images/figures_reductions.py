"""Diagrams for notebook 09 (reductions): how a block of threads reduces a row, the online
softmax's running maximum and sum, and the plan that maps each row length onto threads.

Each draw_<name>() returns a matplotlib Figure; images/draw.py saves it as images/<name>.png.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, Rectangle

from figures_tensorcore import _rbox
from palette import BLUE, GREEN, LIGHT_GREY as GREY, ORANGE, RED

WARP_SHADES = ["#c6dbef", "#9ecae1", "#6baed6", "#4292c6", "#2171b5", "#08519c", "#08306b", "#041c40"]


def _clean(ax):
    ax.set_aspect("equal")
    ax.axis("off")


def _arrow(ax, start, end, color="black", lw=1.0, style="-|>", scale=10):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle=style, mutation_scale=scale, color=color, lw=lw))


def draw_block_allreduce():
    """One block of 256 threads sums one row of 4096 floats, as TVM's allreduce does (notebook 09,
    section 1): each thread sums its 16 elements (t, t + 256, ...) in a register; in each warp five
    __shfl_down_sync steps (16, 8, 4, 2, 1) leave the warp's sum in lane 0; the 8 warp sums go through
    shared memory (red_buf_staging) and a barrier; warp 0 adds them with three more shuffles."""
    fig, ax = plt.subplots(figsize=(10.5, 5.6))
    # the row: 16 passes of 256 elements; the first pass highlighted
    cell = 0.3
    for j in range(32):  # 32 cells of 128 elements each
        ax.add_patch(Rectangle((j * cell, 7.55), cell, 0.4, facecolor=ORANGE if j < 2 else GREY, edgecolor="white",
                               lw=0.5))
    ax.text(0, 8.1, "row i of X: 4096 floats", fontsize=9.5, va="bottom")
    ax.text(32 * cell + 0.2, 7.75, "pass 1: elements 0-255, one per thread: neighbours read\nneighbours (coalesced);"
            " then 256-511, ...: 16 passes", fontsize=8.5, va="center")
    # threads -> registers
    ax.text(0, 6.95, "256 threads, 8 warps: thread t adds elements t, t + 256, ..., t + 3840 in a register (in_thread_S)",
            fontsize=9, va="center")
    for w in range(8):
        ax.add_patch(Rectangle((w * 1.2, 5.95), 1.1, 0.55, facecolor=WARP_SHADES[w], edgecolor="black", lw=0.6))
        ax.text(w * 1.2 + 0.55, 6.22, f"warp {w}", ha="center", va="center", fontsize=8.5,
                color="white" if w >= 3 else "black")
    # one warp's tree of shuffles (left)
    lane = 0.27
    x0, top = 0.0, 4.9
    offsets = [16, 8, 4, 2, 1]
    for level in range(6):
        y = top - level * 0.78
        live = 32 if level == 0 else offsets[level - 1]  # lanes whose value still matters
        for k in range(32):
            ax.add_patch(Rectangle((x0 + k * lane, y), lane * 0.9, 0.3,
                                   facecolor=ORANGE if k < live else GREY, edgecolor="none"))
        if level < 5:
            off = offsets[level]
            for k in range(off):
                _arrow(ax, (x0 + (k + off) * lane + lane * 0.45, y - 0.02), (x0 + k * lane + lane * 0.45, y - 0.45),
                       color=BLUE, lw=0.6, scale=5)
            ax.text(x0 + 32 * lane + 0.1, y - 0.25, f"shfl_down {off}", fontsize=8.5, va="center", color=BLUE)
    ax.text(x0, top + 0.45, "in each warp: lane k adds lane k + 16, then k + 8, ... (registers only, no barrier)",
            fontsize=9, va="bottom")
    ax.text(x0, top - 5 * 0.78 - 0.3, "lane 0 holds the warp's sum", fontsize=9, va="top", color=RED)
    # the block's last steps (right)
    xr = 11.0
    _rbox(ax, xr, 4.35, 4.6, 0.7, GREEN, "shared memory: red_buf_staging[8]\nlane 0 of each warp writes its sum",
          fontsize=8.5, alpha=0.55)
    for w in range(8):
        ax.add_patch(Rectangle((xr + 0.3 + w * 0.5, 3.75), 0.45, 0.35, facecolor=WARP_SHADES[w], edgecolor="black",
                               lw=0.5))
    ax.text(xr + 2.3, 3.45, "__syncthreads(): all 8 are written", ha="center", va="top", fontsize=8.5)
    _rbox(ax, xr, 2.2, 4.6, 0.7, ORANGE, "warp 0 loads the 8 values:\nshfl_down 4, 2, 1", fontsize=8.5, alpha=0.55)
    _rbox(ax, xr + 1.3, 0.9, 2.0, 0.6, RED, "S[i]: one value", fontsize=9, alpha=0.6)
    _arrow(ax, (xr + 2.3, 4.3), (xr + 2.3, 4.15))
    _arrow(ax, (xr + 2.3, 3.05), (xr + 2.3, 2.95))
    _arrow(ax, (xr + 2.3, 2.15), (xr + 2.3, 1.55))
    _arrow(ax, (x0 + 32 * lane + 1.6, 1.9), (xr - 0.1, 4.6), color="black")
    ax.set_xlim(-0.2, 16.0)
    ax.set_ylim(0.6, 8.5)
    _clean(ax)
    return fig


def _online(xs):
    """The running (m, l) after each element, as one thread of the online softmax keeps them."""
    m, total, out = -math.inf, 0.0, []
    for x in xs:
        new = max(m, x)
        total = (total * math.exp(m - new) if total else 0.0) + (math.exp(x - new) if x > -math.inf else 0.0)
        out.append((new, total, new > m and m > -math.inf))
        m = new
    return out


def draw_online_softmax():
    """One thread's running maximum m and sum l over its elements (notebook 09, section 2, step 5):
    l' = l e^(m - m') + e^(x - m'). Where x raises the maximum, the old sum is rescaled to the new one;
    a masked -inf adds exactly 0. At the end the threads merge the same way."""
    xs = [2.0, 1.0, -math.inf, 4.0, 3.0, 6.0]
    steps = _online(xs)
    fig, ax = plt.subplots(figsize=(10.5, 4.0))
    w = 1.6
    for k, (x, (m, total, rescaled)) in enumerate(zip(xs, steps)):
        xk = k * (w + 0.25)
        _rbox(ax, xk, 2.6, w, 0.6, BLUE, f"x = {x:g}" if x > -math.inf else "x = -inf\n(masked)", fontsize=9.5,
              alpha=0.35)
        _rbox(ax, xk, 1.3, w, 0.95, RED if rescaled else GREY, f"m = {m:g}\n$\\ell$ = {total:.3f}", fontsize=10,
              alpha=0.45 if rescaled else 0.6)
        _arrow(ax, (xk + w / 2, 2.58), (xk + w / 2, 2.28))
        if k:
            _arrow(ax, (xk - 0.25, 1.78), (xk - 0.02, 1.78))
        if k == 0:
            note = "first element:\n$m = x,\\ \\ell = 1$"
        elif rescaled:
            note = "the maximum grew:\n$\\ell\\, e^{m - m'} + 1$"
        elif x == -math.inf:
            note = "masked: adds\n$e^{-\\infty} = 0$"
        else:
            note = "m kept:\n$\\ell + e^{x - m}$"
        ax.text(xk + w / 2, 1.15, note, ha="center", va="top", fontsize=9.5, color=RED if rescaled else "black")
    total = sum(math.exp(x - max(xs)) for x in xs if x > -math.inf)
    ax.text(0, -0.05, f"after one pass: m = {max(xs):g}, $\\ell$ = {total:.3f} = $\\sum e^{{x - 6}}$: the softmax's maximum "
            "and denominator, without a second pass over the row", fontsize=9.5, va="center")
    ax.text(0, -0.5, "then the threads merge their pairs the same way: $M = \\max_t m_t$,  "
            "$L = \\sum_t \\ell_t\\, e^{m_t - M}$", fontsize=9.5, va="center", color=BLUE)
    ax.text(0, 3.55, "one thread's elements, in order", fontsize=9.5, va="center")
    ax.set_xlim(-0.2, 6 * (w + 0.25))
    ax.set_ylim(-0.8, 3.8)
    _clean(ax)
    return fig


def _plan(n, dtype="float16"):
    """The notebook's plan for a row length (helpers.reduction_tables.plan)."""
    root = str(Path(__file__).resolve().parent.parent)
    if root not in sys.path:
        sys.path.insert(0, root)
    from helpers.reduction_tables import plan
    return plan(n, dtype)


def draw_reduction_plan():
    """The plan of notebook 09, section 5, for fp16 rows of 128 to 32,768: short rows get a warp or less
    each (threadIdx.x) and share a block of 128 threads (threadIdx.y); long rows get a block each of 128
    to 512 threads; every thread moves 16-byte vectors (8 fp16); the block's rows are staged in shared memory."""
    lengths = [128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768]
    fig, ax = plt.subplots(figsize=(10, 5.4))
    unit = 4.6 / 512  # width of one thread
    x0, h = 1.5, 0.5
    for k, n in enumerate(lengths):
        lanes, rows, vector = _plan(n)
        y = (len(lengths) - 1 - k) * (h + 0.12)
        short = rows > 1
        for r in range(rows):  # the block: `rows` bars of `lanes` threads
            ax.add_patch(Rectangle((x0, y + h - (r + 1) * h / rows), lanes * unit, h / rows,
                                   facecolor=ORANGE if short else BLUE, edgecolor="black", lw=0.5, alpha=0.8))
        ax.text(x0 - 0.15, y + h / 2, f"n = {n}", ha="right", va="center", fontsize=9.5, fontweight="bold")
        per_thread = n // (lanes * vector)
        ax.text(x0 + 512 * unit + 0.2, y + h / 2,
                f"{rows} row{'s' if short else ''} x {lanes} threads = a block of {rows * lanes};  "
                f"{per_thread} vector{'s' if per_thread > 1 else ''} of 8 a thread;  {rows * n * 2 // 1024} KiB staged",
                va="center", fontsize=9)
    top = len(lengths) * (h + 0.12)
    ax.text(x0, top + 0.05, "threads of a block: each bar is one row's threads (threadIdx.x), stacked rows share the "
            "block (threadIdx.y)", fontsize=9.5, va="bottom")
    for t in (32, 128, 512):
        ax.plot([x0 + t * unit] * 2, [-0.15, top - 0.05], color="grey", lw=0.6, ls=":")
        ax.text(x0 + t * unit, -0.2, f"{t}", ha="center", va="top", fontsize=9, color="grey")
    ax.text(x0 + 256 * unit, -0.55, "threads", ha="center", va="top", fontsize=9, color="grey")
    ax.text(x0 + 512 * unit + 0.45, -0.5, "orange: a warp or less a row, rows share a block of 128;  blue: a block a "
            "row.\nStaged: the block's rows in shared memory, where they fit the GPU's block", fontsize=9, va="center")
    ax.set_xlim(0, 15.2)
    ax.set_ylim(-0.9, top + 0.45)
    ax.axis("off")
    return fig
