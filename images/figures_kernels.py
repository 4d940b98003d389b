"""Diagrams for notebooks 01 (vector add) and 02 (window sum).

    draw_split_bind()        a loop split into blocks and threads (and a float4 per thread)
    draw_window_sum_tile()   one block's tile of the window sum in shared memory, with the halo
    draw_cuda_compile_flow() TensorIR -> CUDA C -> PTX -> SASS (cubin) -> GPU

Each returns a matplotlib Figure; `python images/draw.py` saves them as images/<name>.png.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle

BLOCK_COLORS = ["#8ecae6", "#ffb703", "#90be6d", "#f28482"]
from palette import LIGHT_GREY as GREY
INK = "#222222"


def _cell(ax, x, y, text, color, w=1.0, h=1.0, fontsize=8, weight="normal", edge=INK, lw=0.8):
    ax.add_patch(Rectangle((x, y), w, h, facecolor=color, edgecolor=edge, lw=lw))
    if text != "":
        ax.text(x + w / 2, y + h / 2, str(text), ha="center", va="center", fontsize=fontsize, weight=weight)


def _brace(ax, x0, x1, y, text, color=INK, fontsize=8, below=True):
    """A square bracket under (or over) cells x0..x1 with a label."""
    d = -0.25 if below else 0.25
    ax.plot([x0 + 0.05, x0 + 0.05, x1 - 0.05, x1 - 0.05], [y, y + d, y + d, y], color=color, lw=1)
    ax.text((x0 + x1) / 2, y + d + (-0.3 if below else 0.3), text, ha="center", va="top" if below else "bottom",
            fontsize=fontsize, color=color)


def draw_split_bind():
    """16 iterations of `for i` split three ways: the loop, blocks x threads, and float4 per thread."""
    n = 16
    fig, ax = plt.subplots(figsize=(10, 6.2))
    ax.set_xlim(-4.6, n + 0.4)
    ax.set_ylim(-10.2, 1.9)
    ax.axis("off")

    # row 1: the plain loop
    y = 0
    ax.text(-0.3, y + 0.5, "for i in range(16):\n    C[i] = A[i] + B[i]", ha="right", va="center",
            fontsize=8.5, family="monospace")
    for i in range(n):
        _cell(ax, i, y, i, GREY)
    ax.text(n / 2, y + 1.35, "one loop of 16 iterations (element i = index of C)", ha="center", fontsize=9)

    # row 2: split by 4 threads, bind
    y = -4
    ax.text(-0.3, y + 0.5, 'i0, i1 = split(i, [None, 4])\nbind(i0, "blockIdx.x")\nbind(i1, "threadIdx.x")',
            ha="right", va="center", fontsize=8.5, family="monospace")
    for i in range(n):
        b, t = divmod(i, 4)
        _cell(ax, i, y, f"t{t}", BLOCK_COLORS[b])
        ax.text(i + 0.5, y + 1.15, str(i), ha="center", fontsize=7, color="#555555")
    for b in range(4):
        _brace(ax, 4 * b, 4 * b + 4, y - 0.05, f"blockIdx.x = {b}")
    ax.text(n / 2, y + 1.5, "4 blocks x 4 threads: thread (b, t) computes i = b * 4 + t", ha="center",
            va="bottom", fontsize=9)
    for i in (0, 5, 10, 15):
        ax.add_patch(FancyArrowPatch((i + 0.5, -0.1), (i + 0.5, y + 2.15), arrowstyle="-|>", mutation_scale=8,
                                     color="#777777", lw=0.8))

    # row 3: float4 per thread
    y = -8.2
    ax.text(-0.3, y + 0.5, 'i0, i1, i2 = split(i, [None, 2, 4])\nbind(i0, "blockIdx.x")\n'
            'bind(i1, "threadIdx.x")\nvectorize(i2)', ha="right", va="center", fontsize=8.5, family="monospace")
    for i in range(n):
        b, rest = divmod(i, 8)
        t = rest // 4
        _cell(ax, i, y, "", BLOCK_COLORS[b], edge="#777777", lw=0.4)
        ax.text(i + 0.5, y + 1.15, str(i), ha="center", fontsize=7, color="#555555")
    for q in range(4):  # one float4 per thread: a thick outline around 4 cells
        b, t = divmod(q, 2)
        ax.add_patch(Rectangle((4 * q, y), 4, 1, fill=False, edgecolor=INK, lw=2.2))
        ax.text(4 * q + 2, y + 0.5, f"t{t}: one float4", ha="center", va="center", fontsize=8,
                bbox=dict(facecolor="white", edgecolor="none", alpha=0.85, pad=1.5))
    for b in range(2):
        _brace(ax, 8 * b, 8 * b + 8, y - 0.05, f"blockIdx.x = {b}")
    ax.text(n / 2, y + 1.5, "2 blocks x 2 threads x 4 lanes: one 16-byte load/store per array per thread",
            ha="center", va="bottom", fontsize=9)
    fig.tight_layout()
    return fig


def draw_window_sum_tile():
    """Block 1 of a window sum with 8 threads: 8 outputs need A[8..17], 10 inputs (2 halo)."""
    T = 8  # threads (outputs) per block
    n_out = 3 * T
    fig, ax = plt.subplots(figsize=(11, 5.6))
    ax.set_xlim(-3.3, n_out + 2.6)
    ax.set_ylim(-7.6, 3.2)
    ax.axis("off")

    # global A (n_out + 2 elements)
    y_a = 1.2
    ax.text(-0.3, y_a + 0.5, "A (global)", ha="right", va="center", fontsize=9, weight="bold")
    for i in range(n_out + 2):
        in_tile = T <= i < 2 * T + 2
        halo = 2 * T <= i < 2 * T + 2
        color = "#f4a261" if halo else (BLOCK_COLORS[1] if in_tile else GREY)
        _cell(ax, i, y_a, i, color, fontsize=7.5)
    _brace(ax, T, 2 * T + 2, y_a + 1.05,
           "block 1 needs A[8 .. 17]: 8 + 2 elements (drawn with 8 threads a block; the kernel has 256, 256 + 2)",
           below=False, fontsize=8.5)

    # shared memory tile
    y_s = -2.2
    x_s = T
    ax.text(x_s - 0.3, y_s + 0.5, "A_shared\n(block 1)", ha="right", va="center", fontsize=9, weight="bold")
    for j in range(T + 2):
        halo = j >= T
        _cell(ax, x_s + j, y_s, j, "#f4a261" if halo else BLOCK_COLORS[1], fontsize=7.5, lw=1.4)
    ax.text(x_s + T + 2.2, y_s + 0.5, "halo: also in\nblock 2's tile", ha="left", va="center", fontsize=8,
            color="#b5651d")
    # cooperative fetch arrows: thread t loads element t, then threads 0, 1 load the halo
    for j in range(T + 2):
        t = j % T
        ax.add_patch(FancyArrowPatch((x_s + j + 0.5, y_a - 0.05), (x_s + j + 0.5, y_s + 1.05), arrowstyle="-|>",
                                     mutation_scale=8, color="#b5651d" if j >= T else "#555555", lw=0.9))
        ax.text(x_s + j + 0.62, (y_a + y_s + 1) / 2, f"t{t}", fontsize=7.5, ha="left", va="center",
                color="#b5651d" if j >= T else "#555555")
    ax.text(-3.2, (y_a + y_s + 1) / 2, "cooperative fetch:\nthread t loads t, t+8, ...\nthen __syncthreads()",
            ha="left", va="center", fontsize=8.5)

    # outputs
    y_b = -6.2
    ax.text(-0.3, y_b + 0.5, "B (global)", ha="right", va="center", fontsize=9, weight="bold")
    for i in range(n_out):
        color = BLOCK_COLORS[1] if T <= i < 2 * T else GREY
        _cell(ax, i, y_b, i, color, fontsize=7.5)
    # one output's window: B[11] = A_shared[3] + A_shared[4] + A_shared[5]
    k = 3
    ax.add_patch(Rectangle((x_s + k, y_s), 3, 1, fill=False, edgecolor="#d62828", lw=2.2))
    ax.add_patch(FancyArrowPatch((x_s + k + 1.5, y_s - 0.05), (T + k + 0.5, y_b + 1.05), arrowstyle="-|>",
                                 mutation_scale=10, color="#d62828", lw=1.4))
    ax.text(T + k + 1.9, (y_s + y_b + 1) / 2, "thread 3: B[11] = A_shared[3] + A_shared[4] + A_shared[5]",
            fontsize=8.5, color="#d62828", va="center")
    ax.text(n_out / 2, -7.4, "each element of A is loaded from global memory once (the 2 halo elements twice: by two "
            "blocks) and read up to 3 times from shared memory", ha="center", fontsize=8.5)
    fig.tight_layout()
    return fig


def _box(ax, x, y, w, h, title, body, color):
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.02,rounding_size=0.12", facecolor=color,
                                edgecolor=INK, lw=1))
    ax.text(x + w / 2, y + h - 0.22, title, ha="center", va="top", fontsize=10, weight="bold")
    ax.text(x + w / 2, y + h - 0.62, body, ha="center", va="top", fontsize=7.6, family="monospace",
            linespacing=1.25)


def _arrow(ax, x0, x1, y, label, sub=""):
    ax.add_patch(FancyArrowPatch((x0, y), (x1, y), arrowstyle="-|>", mutation_scale=14, color=INK, lw=1.3))
    ax.text((x0 + x1) / 2, y + 0.12, label, ha="center", va="bottom", fontsize=8.5, weight="bold")
    if sub:
        ax.text((x0 + x1) / 2, y - 0.12, sub, ha="center", va="top", fontsize=7.5, color="#444444")


def draw_cuda_compile_flow():
    """From a TensorIR schedule to instructions on the GPU, with where the course lets you look."""
    fig, ax = plt.subplots(figsize=(14, 3.9))
    ax.set_xlim(0, 14.2)
    ax.set_ylim(0.0, 3.6)
    ax.axis("off")
    w, h, y = 2.0, 2.2, 0.7
    xs = [0.1, 3.65, 7.2, 10.75]
    boxes = [
        ("TensorIR", "IRModule after\nsplit / bind /\nvectorize ...\n\nsch.mod.script()", "#e0fbfc"),
        ("CUDA C", "__global__ void\nmain_kernel(...)\n{ ... threadIdx.x }\n\nhelpers.cuda_source()", "#caf0f8"),
        ("PTX", "virtual ISA:\nld.global.nc.f32\nadd.f32 ...\n\nhelpers.ptx()", "#ffe5b4"),
        ("SASS in a cubin", "machine code for\none arch (sm_90)\nLDG / FADD / STG\n\nhelpers.ptxas_report()",
         "#ffd6d6"),
    ]
    for x, (title, body, color) in zip(xs, boxes):
        _box(ax, x, y, w, h, title, body, color)
    mid = y + h / 2
    _arrow(ax, xs[0] + w + 0.05, xs[1] - 0.05, mid, "TVM codegen", "tvm.compile():\nlowers, emits C")
    _arrow(ax, xs[1] + w + 0.05, xs[2] - 0.05, mid, "NVVM front end", "NVRTC (TVM's\ndefault) or nvcc")
    _arrow(ax, xs[2] + w + 0.05, xs[3] - 0.05, mid, "ptxas", "allocates registers,\nschedules")
    ax.add_patch(FancyArrowPatch((xs[3] + w + 0.05, mid), (14.15, mid), arrowstyle="-|>", mutation_scale=14,
                                 color=INK, lw=1.3))
    ax.text(13.5, mid + 0.15, "driver\nloads it,\nGPU runs it", ha="center", va="bottom", fontsize=8)
    ax.text(7.1, 0.3, "A fatbin may carry PTX beside SASS: a newer GPU without matching SASS gets the PTX compiled "
            "by the driver at load time (JIT).", ha="center", fontsize=8, color="#444444")
    ax.text(7.1, 3.35, "The CUDA compile flow, as TVM drives it", ha="center", fontsize=11, weight="bold")
    return fig
