"""Diagram for notebook 06's reading of a tuned trace: the tiling its SamplePerfectTile decisions chose.

Each draw_<name>() returns a matplotlib Figure; images/draw.py saves it as images/<name>.png.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import Rectangle

from palette import GREEN, LIGHT_GREY, RED

#: the committed fp32 record's decisions (notebook 06, section 5): i and j in five levels
#: (blockIdx, vthread, threadIdx, then two inside a thread), k in three
I_TILES = (128, 8, 4, 1, 1)
J_TILES = (16, 4, 16, 4, 1)
ROW = 4.0  # drawn height of one row of C (a column is 1): the 32 x 256 block tile stays readable


def draw_tuned_tiling():
    """One thread block of the tuned fp32 kernel: its 32 x 256 tile of C, cut into 8 x 4 virtual-thread
    tiles of 4 x 64, each cut again among 4 x 16 threads; one thread's outputs (1 x 4 in each virtual
    tile, 8 x 16 in all) in red."""
    _, vi, ti, ri, _ = I_TILES
    _, vj, tj, rj, _ = J_TILES
    rows, cols = vi * ti * ri, vj * tj * rj  # 32 x 256
    fig, ax = plt.subplots(figsize=(10.5, 5.4))
    ax.add_patch(Rectangle((0, 0), cols, rows * ROW, facecolor=GREEN, alpha=0.12, edgecolor="none"))
    for r in range(rows + 1):  # the threads' rows, thin; the virtual tiles' edges, thick
        ax.plot([0, cols], [r * ROW] * 2, color="black" if r % (ti * ri) == 0 else LIGHT_GREY,
                lw=1.6 if r % (ti * ri) == 0 else 0.6)
    for c in range(0, cols + 1, rj):
        ax.plot([c, c], [0, rows * ROW], color="black" if c % (tj * rj) == 0 else LIGHT_GREY,
                lw=1.6 if c % (tj * rj) == 0 else 0.6)
    thread = (1, 5)  # threadIdx.x = 1 * 16 + 5: its row and column among the 4 x 16 threads
    for v in range(vi):
        for w in range(vj):
            x = w * tj * rj + thread[1] * rj
            y = (rows - 1 - (v * ti * ri + thread[0] * ri)) * ROW
            ax.add_patch(Rectangle((x, y), rj, ri * ROW, facecolor=RED, edgecolor="none"))
    top = rows * ROW
    ax.text(cols / 2, top + 20, "One thread block of the tuned fp32 kernel: a 32 x 256 tile of C "
            "(128 x 16 = 2048 such blocks, blockIdx.x)", ha="center", fontsize=11)
    ax.text(cols / 2, top + 7, "i split (128, 8, 4, 1, 1),  j split (16, 4, 16, 4, 1): blockIdx, vthread, threadIdx, "
            "then two levels inside a thread", ha="center", fontsize=9.5, color="#333333")
    ax.annotate("8 x 4 virtual threads (vthread.x = 32):\nthick lines, tiles of 4 x 64", xy=(tj * rj, top - 2 * ROW),
                xytext=(cols + 8, top - 6), fontsize=9.5, va="top",
                arrowprops=dict(arrowstyle="-|>", color="#444444", lw=1.1))
    ax.annotate("4 x 16 threads (threadIdx.x = 64):\nthin lines, 1 x 4 outputs each", xy=(2 * tj * rj + 2, top - 5 * ROW),
                xytext=(cols + 8, top * 0.55), fontsize=9.5, va="center",
                arrowprops=dict(arrowstyle="-|>", color="#444444", lw=1.1))
    ax.annotate("threadIdx.x = 21: its 1 x 4 in every\nvirtual tile, 8 x 16 = 128 outputs,\nheld in registers",
                xy=(3 * tj * rj + thread[1] * rj + rj, (rows - 1 - (7 * ti * ri + thread[0] * ri)) * ROW + ROW / 2),
                xytext=(cols + 8, top * 0.18), fontsize=9.5, va="center", color=RED,
                arrowprops=dict(arrowstyle="-|>", color=RED, lw=1.1))
    ax.text(cols / 2, -10, "j: 256 columns of C (4 x 64)", ha="center", fontsize=9.5)
    ax.text(-6, top / 2, "i: 32 rows\n(8 x 4)", ha="right", va="center", fontsize=9.5)
    ax.set_xlim(-40, cols + 120)
    ax.set_ylim(-18, top + 28)
    ax.set_aspect("equal")
    ax.axis("off")
    return fig
