"""Diagrams for notebook 10 (FlashAttention on mma.sync): the tiling of the algorithm, the m16n8k16
accumulator that is already the A fragment of the next product, and the tiles a causal kernel
computes, masks and skips.

Each draw_<name>() returns a matplotlib Figure; images/draw.py saves it as images/<name>.png.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import Rectangle

from diagram import arrow, finish
from palette import BLUE as Q_COL, GREEN as O_COL, LIGHT_GREY as GREY, ORANGE as KV_COL, RED as HOT


def draw_flash_tiling():
    """One block of 64 query rows (Q_i, on chip for the whole loop) meets K and V tile by tile
    (64 keys each): a 64 x 64 tile of S, then P, exist only on chip; per row the block keeps the
    running maximum m, the running sum l and the unnormalized O_i."""
    fig, ax = plt.subplots(figsize=(10.5, 4.6))
    n, w = 8, 0.5  # the sequence in 8 tiles; the drawn width of a tile
    # Q: n tiles of rows, block i = 2 highlighted
    for t in range(n):
        ax.add_patch(Rectangle((0, (n - 1 - t) * w), 1.2, w, facecolor=Q_COL if t == 2 else "white",
                               alpha=0.7 if t == 2 else 1, edgecolor="black", lw=0.8))
    ax.text(0.6, n * w + 0.15, "Q (N x d)", ha="center", va="bottom", fontsize=9)
    ax.text(-0.1, (n - 2.5) * w, "block i:\n64 rows", ha="right", va="center", fontsize=9, color=Q_COL)
    # K^T: n tiles of columns; tile j = 4 highlighted
    x0 = 2.2
    for t in range(n):
        ax.add_patch(Rectangle((x0 + t * w, n * w - 0.85), w, 0.85, facecolor=KV_COL if t == 4 else "white",
                               alpha=0.7 if t == 4 else 1, edgecolor="black", lw=0.8))
    ax.text(x0 + n * w / 2, n * w + 0.15, "K^T (d x N): tile j = 0, 1, 2, ... streams past", ha="center",
            va="bottom", fontsize=9)
    # S: the row block times all tiles; only tile (i, j) exists at a time
    y_s = (n - 3) * w
    for t in range(n):
        done = t < 4
        ax.add_patch(Rectangle((x0 + t * w, y_s), w, w, facecolor=HOT if t == 4 else (GREY if done else "white"),
                               alpha=0.8 if t == 4 else 1, edgecolor="black", lw=0.8, ls="-" if t == 4 else ":"))
    ax.text(x0 + n * w / 2, y_s - 0.15, "S_ij = Q_i K_j^T / sqrt(d): one 64 x 64 tile at a time,\n"
            "in registers; grey: done and gone, white: still to come", ha="center", va="top", fontsize=8.5)
    # V: n tiles of rows; tile j highlighted
    x_v = x0 + n * w + 1.0
    for t in range(n):
        ax.add_patch(Rectangle((x_v, (n - 1 - t) * w), 1.2, w, facecolor=KV_COL if t == 4 else "white",
                               alpha=0.7 if t == 4 else 1, edgecolor="black", lw=0.8))
    ax.text(x_v + 0.6, n * w + 0.15, "V (N x d)", ha="center", va="bottom", fontsize=9)
    arrow(ax, (x0 + 4.5 * w, y_s + w / 2), (x_v, (n - 4.5) * w), color=HOT, rad=-0.25)
    ax.text(x_v - 0.1, (n - 5.6) * w, "O_i += P_ij V_j", ha="right", va="center", fontsize=8.5, color=HOT)
    # the block's state
    x_o = x_v + 2.0
    ax.add_patch(Rectangle((x_o, y_s), 1.2, w, facecolor=O_COL, alpha=0.7, edgecolor="black"))
    ax.text(x_o + 0.6, y_s + w + 0.1, "O_i (64 x d)", ha="center", va="bottom", fontsize=9)
    arrow(ax, (x_v + 1.25, (n - 4.5) * w), (x_o - 0.05, y_s + w / 2), color=O_COL)
    ax.text(x_o + 0.6, y_s - 0.15, "kept on chip per row:\nm (running max)\nl (running sum)\n"
            "O_i (not yet / l)\n\nafter the last tile:\nO_i / l to DRAM", ha="center", va="top", fontsize=8.5)
    return finish(fig, ax, (-1.3, x_o + 2.0), (-0.2, n * w + 0.6))


def _lane_grid(ax, x0, title, cell_of):
    """A 16 x 16 grid, each cell labelled with the lane that holds it; lane 5's cells named."""
    for r in range(16):
        for c in range(16):
            lane, name = cell_of(r, c)
            mine = lane == 5
            ax.add_patch(Rectangle((x0 + c, 15 - r), 1, 1, facecolor=HOT if mine else
                                   (Q_COL if (lane // 4) % 2 == 0 else "white"), alpha=0.75 if mine else 0.25,
                                   edgecolor="black", lw=0.3))
            ax.text(x0 + c + 0.5, 15.5 - r, name if mine else str(lane), ha="center", va="center",
                    fontsize=6.5 if mine else 6)
    ax.add_patch(Rectangle((x0, 0), 16, 16, facecolor="none", edgecolor="black", lw=1.2))
    ax.plot([x0 + 8, x0 + 8], [0, 16], color="black", lw=1.2)
    ax.plot([x0, x0 + 16], [8, 8], color="black", lw=0.6, ls=":")
    ax.text(x0 + 8, 16.4, title, ha="center", va="bottom", fontsize=9)


def draw_mma_fragment_reuse():
    """Left: the accumulators of S for one warp's 16 rows and 16 keys, two m16n8 tiles (PTX's C
    layout: lane 4g + t holds columns 2t, 2t+1 of rows g and g + 8). Right: the A fragment of
    m16n8k16 that P V needs (rows g, g + 8; columns 2t, 2t+1 and 2t+8, 2t+9). Every cell has the
    same lane on both sides: cvt.rn.f16x2 packs each lane's own pairs, and no data moves."""
    fig, ax = plt.subplots(figsize=(11, 6.2))

    def c_layout(r, c):
        lane = (r % 8) * 4 + (c % 8) // 2
        n, e = c // 8, c % 2
        return lane, f"s[{n * 4 + (r // 8) * 2 + e}]"

    def a_layout(r, c):
        lane = (r % 8) * 4 + (c % 8) // 2
        reg = (c // 8) * 2 + r // 8  # a0,a1 | a2,a3 | a4,a5 | a6,a7 = pf[0..3]
        return lane, f"a{reg * 2 + c % 2}"

    _lane_grid(ax, 0, "S (fp32): two m16n8 accumulators, keys 0-7 | 8-15", c_layout)
    _lane_grid(ax, 21, "P (fp16), m16n8k16's A fragment a0..a7 (pf[0] = a0 a1, ...)", a_layout)
    arrow(ax, (16.4, 8), (20.6, 8), color=HOT)
    ax.text(18.5, 9.2, "cvt.rn.f16x2\n(two fp32 of a\nlane -> one\nregister)", ha="center", va="bottom",
            fontsize=8.5, color=HOT)
    ax.text(18.5, -0.6, "each cell: the lane (0-31) that holds it; red: lane 5 (g = 1, t = 1) and its registers. "
            "Rows g and g + 8,\ncolumns 2t, 2t + 1 (+8): the same lane on both sides, so P never leaves the "
            "registers.", ha="center", va="top", fontsize=8.5)
    return finish(fig, ax, (-0.5, 37.5), (-2.6, 17.6))


def draw_causal_tiles():
    """Causal attention at 8 tiles of 64: block i (64 query rows) needs key tiles 0..i; tiles
    left of the diagonal are computed unmasked, the diagonal tile is masked (keys after a row's
    own position get -FLT_MAX), tiles right of it are skipped. Blocks are launched longest first."""
    fig, ax = plt.subplots(figsize=(9, 4.8))
    n = 8
    for i in range(n):
        for j in range(n):
            color = O_COL if j < i else (HOT if j == i else GREY)
            ax.add_patch(Rectangle((j, n - 1 - i), 1, 1, facecolor=color, alpha=0.7 if j <= i else 0.5,
                                   edgecolor="black", lw=0.6))
        rank = n - i  # bx counts down: the longest rows first
        ax.text(-0.2, n - 0.5 - i, f"block {i}: launched {rank}{ {1: 'st', 2: 'nd', 3: 'rd'}.get(rank, 'th')}",
                ha="right", va="center", fontsize=8.5)
    for j in range(n):
        ax.text(j + 0.5, n + 0.15, str(j), ha="center", va="bottom", fontsize=8.5)
    ax.text(n / 2, n + 0.65, "key tile j (64 keys each)", ha="center", va="bottom", fontsize=9)
    # a zoom on one diagonal tile: the mask inside it
    x0, s = n + 1.2, 4 / 8
    for r in range(8):
        for c in range(8):
            ax.add_patch(Rectangle((x0 + c * s, 2 + (7 - r) * s), s, s, facecolor=O_COL if c <= r else "white",
                                   alpha=0.7, edgecolor="black", lw=0.4))
    ax.text(x0 + 2, 6.15, "inside a diagonal tile:\nkey > query gets -FLT_MAX", ha="center", va="bottom",
            fontsize=8.5)
    for y, color, text in [(1.3, O_COL, "computed, no mask"), (0.7, HOT, "computed, masked (the last tile)"),
                           (0.1, GREY, "skipped: the loop stops")]:
        ax.add_patch(Rectangle((x0, y), 0.4, 0.4, facecolor=color, alpha=0.7, edgecolor="black", lw=0.5))
        ax.text(x0 + 0.55, y + 0.2, text, ha="left", va="center", fontsize=8.5)
    return finish(fig, ax, (-4.2, x0 + 5.0), (-0.2, n + 1.3))
