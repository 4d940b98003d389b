"""Diagrams for notebook 05 (tensor cores, WMMA, tensorization).

Each draw_<name>() returns a matplotlib Figure; images/draw.py saves it as images/<name>.png.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle

from palette import BLUE as A_COL, GREEN as C_COL, LIGHT_GREY as GREY, ORANGE as B_COL, RED as HOT


def _grid(ax, x0, y0, rows, cols, cell, color="white", edge="#999999", lw=0.4, alpha=1.0):
    for r in range(rows):
        for c in range(cols):
            ax.add_patch(Rectangle((x0 + c * cell, y0 - (r + 1) * cell), cell, cell, facecolor=color,
                                   edgecolor=edge, lw=lw, alpha=alpha))


def _arrow(ax, x0, y0, x1, y1, text=None, color="black", fontsize=8, offset=(0, 0.25), ha="center"):
    ax.add_patch(FancyArrowPatch((x0, y0), (x1, y1), arrowstyle="-|>", mutation_scale=12, color=color, lw=1.2))
    if text:
        ax.text((x0 + x1) / 2 + offset[0], (y0 + y1) / 2 + offset[1], text, ha=ha, va="bottom",
                fontsize=fontsize, family="monospace")


def _rbox(ax, x, y, w, h, color, text, fontsize=9, alpha=0.9, text_color="black"):
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.02,rounding_size=0.15", facecolor=color,
                                edgecolor="black", lw=0.8, alpha=alpha))
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=fontsize, color=text_color)


def draw_wmma_fragment():
    """One warp computes D = A x B + C on 16x16 tiles: fp16 in, fp32 accumulate."""
    fig, ax = plt.subplots(figsize=(9.5, 3.6))
    cell = 0.16
    n = 16
    size = n * cell
    y0 = 3.0
    xs = {"D": 0.0, "A": 3.4, "B": 6.3, "C": 9.2}
    _grid(ax, xs["D"], y0, n, n, cell, C_COL, alpha=0.55)
    _grid(ax, xs["A"], y0, n, n, cell, A_COL, alpha=0.45)
    _grid(ax, xs["B"], y0, n, n, cell, B_COL, alpha=0.45)
    _grid(ax, xs["C"], y0, n, n, cell, C_COL, alpha=0.55)
    for sym, x in ((" = ", xs["D"] + size + 0.35), (" x ", xs["A"] + size + 0.3), (" + ", xs["B"] + size + 0.3)):
        ax.text(x, y0 - size / 2, sym, fontsize=16, ha="center", va="center")
    labels = {
        "D": "D  16x16\nfp32 (wmma.accumulator)",
        "A": "A  16x16\nfp16 (wmma.matrix_a)",
        "B": "B  16x16\nfp16 (wmma.matrix_b)",
        "C": "C  16x16\nfp32 (wmma.accumulator)",
    }
    for key, x in xs.items():
        ax.text(x + size / 2, y0 - size - 0.15, labels[key], ha="center", va="top", fontsize=8.5)
    # one row of A and one column of B feed one element of D
    ax.add_patch(Rectangle((xs["A"], y0 - 4 * cell), size, cell, fill=False, edgecolor=HOT, lw=1.6))
    ax.add_patch(Rectangle((xs["B"] + 6 * cell, y0 - size), cell, size, fill=False, edgecolor=HOT, lw=1.6))
    ax.add_patch(Rectangle((xs["D"] + 6 * cell, y0 - 4 * cell), cell, cell, facecolor=HOT, edgecolor=HOT))
    ax.text(xs["D"], y0 + 0.45,
            "nvcuda::wmma::mma_sync(d, a, b, c): all 32 threads of a warp issue it together;\n"
            "16 x 16 x 16 multiply-adds = 8192 FLOP, the fragments' elements are spread over the warp's registers",
            fontsize=9, va="bottom")
    ax.set_xlim(-0.2, xs["C"] + size + 0.2)
    ax.set_ylim(y0 - size - 1.1, y0 + 1.3)
    ax.set_aspect("equal")
    ax.axis("off")
    return fig


def draw_wmma_scopes():
    """The data path of a tensor-core matmul and the schedule primitive that creates each stage."""
    fig, ax = plt.subplots(figsize=(10, 3.9))
    _rbox(ax, 0.0, 2.3, 1.9, 1.0, GREY, "global\nA (M x K) fp16\nB (N x K) fp16", fontsize=8)
    _rbox(ax, 3.0, 2.3, 1.9, 1.0, "#c6dbef", "shared\nA tile, B tile", fontsize=8.5)
    _rbox(ax, 6.0, 3.0, 2.0, 0.8, A_COL, "wmma.matrix_a\n(registers)", fontsize=8.5, alpha=0.6)
    _rbox(ax, 6.0, 1.8, 2.0, 0.8, B_COL, "wmma.matrix_b\n(registers)", fontsize=8.5, alpha=0.6)
    _rbox(ax, 9.0, 2.3, 1.6, 1.0, "#fdd0a2", "tensor core\nmma_sync", fontsize=8.5)
    _rbox(ax, 8.7, 0.3, 2.2, 1.0, C_COL, "wmma.accumulator\n(registers)", fontsize=8.5, alpha=0.6)
    _rbox(ax, 4.4, 0.3, 2.0, 1.0, GREY, "global\nC (M x N) fp32", fontsize=8.5)
    _arrow(ax, 1.9, 2.8, 3.0, 2.8)
    ax.text(2.45, 3.45, "cache_read(.., \"shared\")\ncooperative, 16-byte\nvector loads", ha="center",
            fontsize=7.5, family="monospace")
    _arrow(ax, 4.9, 3.0, 6.0, 3.4)
    _arrow(ax, 4.9, 2.6, 6.0, 2.2)
    ax.text(5.45, 4.05, "cache_read(.., \"wmma.matrix_a/b\")\nload_matrix_sync", ha="center", fontsize=7.5,
            family="monospace")
    _arrow(ax, 8.0, 3.4, 9.0, 3.0)
    _arrow(ax, 8.0, 2.2, 9.0, 2.6)
    _arrow(ax, 9.55, 2.3, 9.55, 1.3)
    _arrow(ax, 10.05, 1.3, 10.05, 2.3)
    ax.text(10.2, 1.8, "C += A B\n(k loop)", fontsize=7.5, va="center", family="monospace")
    _arrow(ax, 8.7, 0.8, 6.4, 0.8)
    ax.text(7.55, 0.9, "store_matrix_sync", ha="center", fontsize=7.5, family="monospace")
    ax.text(7.55, 0.05, "cache_write(.., \"wmma.accumulator\")\nfill_fragment: decompose_reduction",
            ha="center", va="top", fontsize=7.5, family="monospace")
    ax.set_xlim(-0.2, 11.8)
    ax.set_ylim(-0.7, 4.6)
    ax.axis("off")
    return fig


def draw_wmma_tiling():
    """Notebook 05's first tensor-core kernel (section 5): a 128 x 128 block tile of C split among 4 x 4 warps
    (threadIdx.y), each warp 2 x 2 fragments of 16 x 16 = 32 x 32 outputs; k advances 64 at a time, a k tile
    of 2 steps (k1) x 2 fragments (k2)."""
    fig, ax = plt.subplots(figsize=(9, 4.6))
    cell = 0.3
    wm, wn, fm, fn = 4, 4, 2, 2
    rows, cols = wm * fm, wn * fn
    x0, y0 = 0.0, rows * cell
    colors = ["#c6dbef", "#fdd0a2", "#c7e9c0", "#dadaeb"]
    for w_r in range(wm):
        for w_c in range(wn):
            col = colors[(w_r + w_c) % len(colors)]
            _grid(ax, x0 + w_c * fn * cell, y0 - w_r * fm * cell, fm, fn, cell, col, edge="#777777")
            ax.add_patch(Rectangle((x0 + w_c * fn * cell, y0 - (w_r + 1) * fm * cell), fn * cell, fm * cell,
                                   fill=False, edgecolor="black", lw=1.4))
            ax.text(x0 + (w_c + 0.5) * fn * cell, y0 - (w_r + 0.5) * fm * cell, f"warp\n{w_r * wn + w_c}",
                    ha="center", va="center", fontsize=8, linespacing=0.95)
    ax.add_patch(Rectangle((x0, 0), cols * cell, rows * cell, fill=False, edgecolor=HOT, lw=2))
    ax.text(x0 + cols * cell / 2, y0 + 0.12, "block tile: 128 x 128 outputs of C\n= 4 x 4 warps (threadIdx.y 0-15)",
            ha="center", va="bottom", fontsize=9)
    ax.text(x0 + cols * cell / 2, -0.12, "each warp: 2 x 2 fragments\nof 16 x 16 = 32 x 32 outputs",
            ha="center", va="top", fontsize=9)
    # zoom: one warp's k step
    z = cell * 2.0  # a fragment, drawn larger
    zx = cols * cell + 1.9
    top = y0 - 0.35
    _grid(ax, zx, top, fm, fn, z, C_COL, alpha=0.5)
    _grid(ax, zx - z - 0.25, top, fm, 1, z, A_COL, alpha=0.5)
    _grid(ax, zx, top + z + 0.25, 1, fn, z, B_COL, alpha=0.5)
    ax.text(zx - z - 0.4, top - z, "A\nfragments", fontsize=8.5, ha="right", va="center")
    ax.text(zx + fn * z + 0.15, top + z / 2 + 0.25, "B fragments", fontsize=8.5, ha="left", va="center")
    ax.text(zx + fn * z + 0.15, top - z, "one warp's\n2 x 2 accumulators", fontsize=8.5, ha="left", va="center")
    ax.text(zx + fn * z / 2, top - fm * z - 0.2,
            "each 16 of k (one fragment deep): 2 + 2 fragment\nloads feed 2 x 2 = 4 mma_sync; "
            "a k tile of 64\n= 2 steps (k1) x 2 fragments (k2)", ha="center", va="top", fontsize=8.5)
    ax.set_xlim(-0.2, zx + 3.2)
    ax.set_ylim(-1.0, y0 + 0.9)
    ax.set_aspect("equal")
    ax.axis("off")
    return fig


def _bank_panel(ax, stride, title):
    """The 8 rows x 16 bytes that one phase of a fragment load (ldmatrix) reads: which banks."""
    ax.set_title(title, fontsize=9, loc="left")
    for bank in range(32):
        ax.text(bank + 0.5, 8.35, str(bank), ha="center", fontsize=6.5, color="#555555")
    counts = [0] * 32
    for r in range(8):
        start = (r * stride * 2 // 4) % 32  # first bank of row r: 2 bytes per half, 4 bytes per bank
        for w in range(4):  # 8 halves = 16 bytes = 4 banks
            b = (start + w) % 32
            counts[b] += 1
            ax.add_patch(Rectangle((b, 7 - r), 1, 1, facecolor=plt.cm.tab10(r), edgecolor="white", lw=0.5,
                                   alpha=0.85))
        ax.text(-0.4, 7.5 - r, f"row {r}", ha="right", va="center", fontsize=7)
    worst = max(counts)
    msg = (f"{worst}-way bank conflict: the load takes {worst} times as long" if worst > 1
           else "8 rows x 4 banks cover all 32 banks once: conflict-free")
    ax.text(16, -0.5, msg, ha="center", va="top", fontsize=8, color=HOT if worst > 1 else "black")
    ax.set_xlim(-3, 32.2)
    ax.set_ylim(-1.6, 8.8)
    ax.set_aspect("equal")
    ax.axis("off")


def draw_wmma_smem_padding():
    """Fragment loads from shared tiles whose rows are 64, 32 and 40 (padded) halves long."""
    fig, axes = plt.subplots(3, 1, figsize=(8, 7.4))
    _bank_panel(axes[0], 64, "row of 64 halves (the first schedule's k tile): every row starts in bank 0")
    _bank_panel(axes[1], 32, "row of 32 halves (k tile 32): rows start in banks 0 and 16")
    _bank_panel(axes[2], 40, "row of 32 halves padded to 40 (storage_align(factor=32, offset=8))")
    fig.tight_layout()
    return fig


def draw_wmma_pipeline():
    """Without a pipeline the warps wait for each tile; with 3 stages the copies of tiles k+1, k+2
    are in flight (cp.async) while the tensor cores work on tile k."""
    fig, axes = plt.subplots(2, 1, figsize=(9.5, 3.6), sharex=True)
    copy_t, mma_t = 1.0, 1.3

    ax = axes[0]
    t = 0.0
    for k in range(4):
        ax.add_patch(Rectangle((t, 1), copy_t, 0.8, facecolor="#c6dbef", edgecolor="black", lw=0.6))
        ax.text(t + copy_t / 2, 1.4, f"load {k}", ha="center", va="center", fontsize=7.5)
        t += copy_t
        ax.add_patch(Rectangle((t, 0), mma_t, 0.8, facecolor="#fdd0a2", edgecolor="black", lw=0.6))
        ax.text(t + mma_t / 2, 0.4, f"mma {k}", ha="center", va="center", fontsize=7.5)
        t += mma_t
    ax.set_title("no pipeline: load tile, __syncthreads, compute, repeat", fontsize=9, loc="left")

    ax = axes[1]
    for k in range(6):
        ax.add_patch(Rectangle((k * mma_t, 1), copy_t, 0.8, facecolor="#c6dbef", edgecolor="black", lw=0.6))
        ax.text(k * mma_t + copy_t / 2, 1.4, f"load {k}", ha="center", va="center", fontsize=7.5)
    for k in range(4):
        t = (k + 2) * mma_t
        ax.add_patch(Rectangle((t, 0), mma_t, 0.8, facecolor="#fdd0a2", edgecolor="black", lw=0.6))
        ax.text(t + mma_t / 2, 0.4, f"mma {k}", ha="center", va="center", fontsize=7.5)
    ax.set_title("3 stages: while tile k is multiplied, tiles k+1 and k+2 are being copied (cp.async)",
                 fontsize=9, loc="left")
    for ax in axes:
        ax.set_yticks([0.4, 1.4], ["tensor cores", "copies"], fontsize=8)
        ax.set_ylim(-0.2, 2.0)
        ax.set_xlim(0, 9.6)
        ax.set_xticks([])
        for s in ("top", "right"):
            ax.spines[s].set_visible(False)
    axes[1].set_xlabel("time")
    fig.tight_layout()
    return fig
