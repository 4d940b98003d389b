"""Diagrams for notebooks 03 (local blocking) and 04 (shared-memory blocking).

Each draw_<name>() returns a matplotlib Figure; images/draw.py saves it as images/<name>.png.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import FancyArrowPatch, Rectangle

from palette import BLUE as A_COL, GREEN as C_COL, LIGHT_GREY as GREY, ORANGE as B_COL, RED as HOT


def _grid(ax, x0, y0, rows, cols, cell, color="white", edge="#999999", lw=0.5):
    for r in range(rows):
        for c in range(cols):
            ax.add_patch(Rectangle((x0 + c * cell, y0 - (r + 1) * cell), cell, cell, facecolor=color,
                                   edgecolor=edge, lw=lw))


def _box(ax, x, y, w, h, color, alpha=1.0, label=None, fontsize=9, lw=1.0, edge="black"):
    ax.add_patch(Rectangle((x, y), w, h, facecolor=color, alpha=alpha, edgecolor=edge, lw=lw))
    if label:
        ax.text(x + w / 2, y + h / 2, label, ha="center", va="center", fontsize=fontsize)


def _matmul_panel(ax, title, rows_a, cols_b, note):
    """C = A x B drawn as three squares; rows_a/cols_b: how many rows of A / columns of B a thread reads."""
    n, k = 8, 8
    cell = 1.0
    # A at left, B on top, C bottom-right
    ax_x, ax_y = 0, 0
    bx_x, bx_y = k + 1, k + 1 + n
    cx_x, cx_y = k + 1, n
    _grid(ax, ax_x, n, n, k, cell)
    _grid(ax, bx_x, bx_y, k, n, cell)
    _grid(ax, cx_x, cx_y, n, n, cell)
    for r in range(rows_a):
        _box(ax, ax_x, n - (r + 1) * cell, k * cell, cell, A_COL, alpha=0.55, lw=0.5)
    for c in range(cols_b):
        _box(ax, bx_x + c * cell, bx_y - k * cell, cell, k * cell, B_COL, alpha=0.55, lw=0.5)
    _box(ax, cx_x, cx_y - rows_a * cell, cols_b * cell, rows_a * cell, C_COL, alpha=0.85, lw=1.2)
    ax.text(ax_x + k / 2, n + 0.4, "A (M x K)", ha="center", fontsize=9)
    ax.text(bx_x + n / 2, bx_y + 0.3, "B (K x N)", ha="center", fontsize=9)
    ax.text(cx_x + n / 2, -0.8, "C (M x N)", ha="center", fontsize=9)
    ax.text(0, bx_y - 1, note, fontsize=9, va="top", family="monospace")
    ax.set_title(title, fontsize=10)
    ax.set_xlim(-0.5, k + n + 1.5)
    ax.set_ylim(-1.5, bx_y + 1)
    ax.set_aspect("equal")
    ax.axis("off")


def draw_matmul_reuse():
    """One output per thread versus a V x V tile of outputs per thread: loads per FMA."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 5.2))
    _matmul_panel(axes[0], "one thread, one output", 1, 1,
                  "per k step:\n 2 loads, 1 FMA\n= 1 FMA per load")
    _matmul_panel(axes[1], "one thread, a 4 x 4 tile (registers)", 4, 4,
                  "per k step:\n 4 + 4 loads, 16 FMA\n= V/2 = 2 FMA per load")
    fig.suptitle("Loop tiling: a thread that computes a V x V tile reuses each loaded value V times",
                 fontsize=11)
    fig.tight_layout()
    return fig


def _owner_grid(rows, cols, threads_y, threads_x, interleave):
    """Which thread (ty, tx) computes each element of a block tile."""
    owner = np.zeros((rows, cols), dtype=int)
    ly, lx = rows // threads_y, cols // threads_x
    for i in range(rows):
        for j in range(cols):
            ty = i // ly
            tx = (j % (threads_x * interleave)) // interleave if interleave else j // lx
            owner[i, j] = ty * threads_x + tx
    return owner


def draw_matmul_thread_tiles():
    """Notebook 03's tiles (MLC_TILES = (ly, lx, by, bx, tk) = (8, 8, 8, 8, 4)): one row of threads of the 64 x 64
    block tile of C, each thread's 8 columns contiguous, or interleaved in groups of 4 (vthread.x = 2, 32 apart)."""
    rows, cols, tx, lx, width = 8, 64, 8, 8, 4
    fig, axes = plt.subplots(2, 1, figsize=(9.6, 4.4))
    cmap = plt.get_cmap("tab10")
    panels = [
        (axes[0], 0, "contiguous: thread t owns columns 8t .. 8t+7 "
                     "(a warp's float4 reads of a row of B start 32 bytes apart)"),
        (axes[1], width, "interleaved in groups of 4 (vthread.x = 2): thread t owns columns 4t .. 4t+3 and the "
                         "same 32 columns further on\n(a warp's float4 reads of a row of B are one contiguous run)"),
    ]
    for ax, inter, title in panels:
        owner = _owner_grid(rows, cols, 1, tx, inter)
        for i in range(rows):
            for j in range(cols):
                t = owner[i, j]
                ax.add_patch(Rectangle((j, rows - 1 - i), 1, 1, facecolor=cmap(t % 10), alpha=0.75,
                                       edgecolor="white", lw=0.8))
                ax.text(j + 0.5, rows - 0.5 - i, str(t), ha="center", va="center", fontsize=7.5)
        if inter:
            for v, x0 in enumerate((0, tx * width)):
                ax.annotate("", xy=(x0 + 0.1, -0.35), xytext=(x0 + tx * width - 0.1, -0.35),
                            arrowprops=dict(arrowstyle="-", lw=1))
                ax.text(x0 + tx * width / 2, -0.6, f"vthread {v}" + (": 32 columns further on" if v else ""),
                        ha="center", va="top", fontsize=8)
        ax.set_xlim(0, cols)
        ax.set_ylim(-1.6 if inter else 0, rows)
        ax.set_aspect("equal")
        ax.axis("off")
        ax.set_title(title, fontsize=8.5)
    fig.suptitle("One row of threads (threadIdx.y = 0) of the 64 x 64 block tile: 8 threads x 8 x 8 outputs "
                 "(number = threadIdx.x)", fontsize=9.5)
    fig.tight_layout()
    return fig


def draw_matmul_shared_blocking():
    """Block tile of C, its strips of A and B, the k tile staged in shared memory."""
    fig, ax = plt.subplots(figsize=(9, 5.6))
    M, N, K = 12, 12, 12
    bm, bn, bk = 4, 4, 3
    ay = 0
    # A (M x K) left, B (K x N) top, C bottom right
    _box(ax, 0, ay, K, M, "white")
    _box(ax, K + 1, M + 1, N, K, "white")
    _box(ax, K + 1, ay, N, M, "white")
    i0, j0, k0 = 1, 2, 1  # block row, block column, k step (in tiles)
    _box(ax, 0, M - (i0 + 1) * bm, K, bm, A_COL, alpha=0.25, lw=0.5)
    _box(ax, K + 1 + j0 * bn, M + 1, bn, K, B_COL, alpha=0.25, lw=0.5)
    _box(ax, k0 * bk, M - (i0 + 1) * bm, bk, bm, A_COL, alpha=0.9, lw=1.2)
    _box(ax, K + 1 + j0 * bn, M + 1 + K - (k0 + 1) * bk, bn, bk, B_COL, alpha=0.9, lw=1.2)
    _box(ax, K + 1 + j0 * bn, M - (i0 + 1) * bm, bn, bm, C_COL, alpha=0.9, lw=1.2,
         label="block\ntile\n(registers)", fontsize=8)
    ax.text(K / 2, -0.9, "A", ha="center", fontsize=10)
    ax.text(K + 1 + N / 2, M + 1 + K + 0.3, "B", ha="center", fontsize=10)
    ax.text(K + 1 + N / 2, -0.9, "C", ha="center", fontsize=10)
    # shared memory boxes
    sx = K + N + 3
    _box(ax, sx, 7, bk, bm, A_COL, alpha=0.9, label="A tile", fontsize=8)
    _box(ax, sx + bk + 1, 8, bn, bk, B_COL, alpha=0.9, label="B tile", fontsize=8)
    ax.add_patch(Rectangle((sx - 0.5, 6.5), bk + bn + 2, 5.5, fill=False, ls="--", lw=1.2))
    ax.text(sx + (bk + bn + 1) / 2, 12.4, "shared memory\n(one k tile)", ha="center", fontsize=9)
    for start, end in [((k0 * bk + bk, M - (i0 + 0.5) * bm), (sx, 9)),
                       ((K + 1 + j0 * bn + bn, M + 1 + K - (k0 + 0.5) * bk), (sx + bk + 1, 9.5))]:
        ax.add_patch(FancyArrowPatch(start, end, arrowstyle="->", mutation_scale=12, lw=1.2,
                                     connectionstyle="arc3,rad=-0.2"))
    ax.text(sx - 0.5, 5.6, "all threads of the block copy the\ntiles together (cooperative fetch),\n"
            "__syncthreads(), then each thread\nreads its rows / columns from\nshared memory into registers",
            fontsize=8, va="top")
    ax.set_xlim(-0.5, sx + bk + bn + 2)
    ax.set_ylim(-1.5, M + K + 2)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title("Shared-memory blocking: for each k tile, stage A and B tiles once per block", fontsize=10)
    return fig


def draw_coalescing():
    """A warp reading 32 consecutive floats (4 sectors) versus 32 floats a row apart (32 sectors)."""
    fig, axes = plt.subplots(2, 1, figsize=(11, 3.8))
    for ax, stride, title in [(axes[0], 1, "contiguous: thread t reads word t -> 128 bytes, 4 sectors of 32 B"),
                              (axes[1], 8, "strided: thread t reads word 8t -> 32 different sectors (shown: the first 16 threads)")]:
        words = 128
        for w in range(words):
            sector = w // 8
            ax.add_patch(Rectangle((w, 0), 1, 1, facecolor=GREY if sector % 2 else "white", edgecolor="#bbbbbb", lw=0.3))
        touched = [t * stride for t in range(32) if t * stride < words]
        for t, w in enumerate(touched):
            ax.add_patch(Rectangle((w, 0), 1, 1, facecolor=HOT if stride > 1 else C_COL, edgecolor="black", lw=0.4))
            if t % 4 == 0 or stride > 1:
                ax.text(w + 0.5, 1.25, str(t), ha="center", fontsize=7.5)
        sectors = {w // 8 for w in touched}
        for s in sectors:
            ax.add_patch(Rectangle((s * 8, -0.15), 8, 1.3, fill=False, edgecolor="black", lw=1.0))
        ax.set_xlim(0, words)
        ax.set_ylim(-0.5, 2)
        ax.axis("off")
        ax.set_title(title, fontsize=9)
    fig.suptitle("Memory coalescing: global memory is read in 32-byte sectors; number = thread of the warp", fontsize=10)
    fig.tight_layout()
    return fig


def bank_pattern(word_of_thread, width=1):
    """Conflict degree of one warp-wide shared-memory access.

    `word_of_thread[t]` is the first 32-bit word thread t reads, `width` how many (1, 2 or 4:
    32, 64 or 128-bit loads). The hardware serves 32-, 64- and 128-bit accesses in 1, 2 or 4
    phases of 32, 16 or 8 threads; in a phase, a bank asked for n distinct words needs n passes
    (threads asking for the same word share it). Returns the worst phase's n.
    """
    threads_per_phase = 32 // width
    degree = 0
    for p in range(0, 32, threads_per_phase):
        banks = {}
        for t in range(p, p + threads_per_phase):
            for w in range(word_of_thread[t], word_of_thread[t] + width):
                banks.setdefault(w % 32, set()).add(w)
        degree = max(degree, max(len(v) for v in banks.values()))
    return degree


def _threads_label(ts):
    """The threads reading one word, on two lines: "0" over "16" (threads 0 and 16), "0-" over "15" (0 to 15)."""
    if len(ts) > 2 and ts == list(range(ts[0], ts[-1] + 1)):
        return f"{ts[0]}-\n{ts[-1]}"
    return "\n".join(map(str, ts[:2])) + ("+" if len(ts) > 2 else "")


def _bank_panel(ax, words, width, title):
    cmap = plt.get_cmap("tab20")
    rows = {}
    for t in range(32):
        for w in range(words[t], words[t] + width):
            rows.setdefault(w // 32, {}).setdefault(w % 32, []).append(t)
    row_ids = sorted(rows)
    for r_i, r in enumerate(row_ids):
        for b in range(32):
            ts = rows[r].get(b, [])
            color = cmap(ts[0] % 20) if ts else "white"
            ax.add_patch(Rectangle((b, -r_i - 1), 1, 1, facecolor=color, alpha=0.8 if ts else 1, edgecolor="#999999", lw=0.4))
            if ts:
                ax.text(b + 0.5, -r_i - 0.5, _threads_label(ts), ha="center", va="center", fontsize=6.5,
                        linespacing=0.9)
    ax.set_xlim(0, 32)
    ax.set_ylim(-len(row_ids), 0.2)
    ax.set_xticks(np.arange(32) + 0.5, [str(b) for b in range(32)], fontsize=6.5)
    ax.set_yticks([-i - 0.5 for i in range(len(row_ids))], [f"words {32 * r}.." for r in row_ids], fontsize=7)
    ax.tick_params(length=0, pad=2)
    ax.set_title(f"{title}: {bank_pattern(words, width)}-way", fontsize=8.5)


def bank_cases():
    """The shared-memory accesses notebook 04 discusses: (title, first word of each thread, width)."""
    tx = np.arange(32) % 16
    ty = np.arange(32) // 16
    return [
        ("B tile read, contiguous 8-wide thread tiles (word 8*tx)", [int(8 * x) for x in tx], 1),
        ("B tile read, interleaved 4-wide groups, float4 (word 4*tx)", [int(4 * x) for x in tx], 4),
        ("A tile [i][k] read, rows of 16 floats (word 64*ty)", [int(64 * y) for y in ty], 1),
        ("A tile [i][k] read, rows padded to 20 floats (word 80*ty)", [int(80 * y) for y in ty], 1),
    ]


def draw_bank_conflicts():
    """Which bank each thread of a warp touches, for four shared-memory reads of notebook 04."""
    cases = bank_cases()
    fig, axes = plt.subplots(len(cases), 1, figsize=(8.6, 7.4),
                             gridspec_kw={"height_ratios": [max(1, len({(w + i) // 32 for w in c[1] for i in range(c[2])})) + 1 for c in cases]})
    for ax, (title, words, width) in zip(axes, cases):
        _bank_panel(ax, words, width, title)
    axes[-1].set_xlabel("shared-memory bank (32 banks of 4-byte words); in a cell, the threads of the warp (16 x 2)\n"
                        "that read that word: 0 over 16 = threads 0 and 16, 0- over 15 = threads 0 to 15", fontsize=8)
    fig.suptitle("Bank conflicts: n different words in one bank cost n passes (the same word is broadcast)", fontsize=9.5)
    fig.tight_layout()
    return fig
