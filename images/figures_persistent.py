"""Diagrams for notebook 08 (the persistent Hopper kernel): which block takes which tiles and in what
order, two blocks of a cluster sharing B's tile by TMA multicast, and what overlaps in time.

Each draw_<name>() returns a matplotlib Figure; images/draw.py saves it as images/<name>.png.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, Rectangle

from palette import BLUE, GREEN, LIGHT_GREY, ORANGE, PURPLE, RED

WAVES = ["#c6dbef", "#6baed6", "#2171b5", "#08306b"]  # waves 0-3 of 132 work items


def _grouped(t, tiles_n, group):  # notebook 08's grouped_order, in tiles
    band, inner = t // (group * tiles_n), t % (group * tiles_n)
    return band * group + inner % group, inner // group


def draw_persistent_tile_walk():
    """C at 4096^3 in 128 x 256 tiles (32 rows x 16 columns of tiles), each coloured by the wave of 132
    work items it falls in; block 0's tiles are marked with the order it takes them, in row-major
    order (group=1) and in groups of 8 block rows (group=8)."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 7.2))
    tiles_m, tiles_n, ctas = 32, 16, 132
    for ax, group in zip(axes, (1, 8)):
        for t in range(tiles_m * tiles_n):
            r, c = _grouped(t, tiles_n, group)
            wave = t // ctas
            ax.add_patch(Rectangle((c, tiles_m - 1 - r), 1, 1, facecolor=WAVES[wave], edgecolor="white", lw=0.5))
            if t % ctas == 0:  # block 0's tiles: work items 0, 132, 264, 396
                ax.add_patch(Rectangle((c, tiles_m - 1 - r), 1, 1, facecolor=RED, edgecolor="black", lw=1))
                ax.text(c + 0.5, tiles_m - 0.5 - r, str(wave + 1), ha="center", va="center", fontsize=8,
                        color="white")
        ax.set_xlim(-0.2, tiles_n + 0.2)
        ax.set_ylim(-1.5, tiles_m + 0.2)
        ax.set_aspect("equal")
        ax.axis("off")
        name = "row-major (group=1)" if group == 1 else "groups of 8 block rows (group=8)"
        ax.set_title(name, fontsize=10)
        ax.text(tiles_n / 2, -0.9, "columns of tiles: 16 x 256 columns of B", ha="center", va="center", fontsize=8)
    axes[0].text(-0.6, 16, "rows of tiles: 32 x 128 rows of A", rotation=90, ha="center", va="center", fontsize=8)
    for wave, colour in enumerate(WAVES):
        fig.text(0.18 + 0.17 * wave, 0.035, f"wave {wave + 1}: work items {wave * 132}-{min(wave * 132 + 131, 511)}",
                 fontsize=8, ha="left", va="center", bbox=dict(facecolor=colour, edgecolor="none", pad=2),
                 color="white" if wave >= 2 else "black")
    fig.text(0.5, 0.965, "block t of 132 takes work items t, t + 132, t + 264, t + 396; red: block 0's four tiles, "
             "numbered in its order", ha="center", fontsize=9)
    return fig


def _arrow(ax, start, end, color="black", lw=1.4):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=12, color=color, lw=lw))


def _box(ax, x, y, w, h, colour, text, fontsize=8.5, alpha=0.6, text_colour="black"):
    ax.add_patch(Rectangle((x, y), w, h, facecolor=colour, alpha=alpha, edgecolor="black", lw=0.8))
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=fontsize, color=text_colour)


def draw_cluster_multicast():
    """A 2-block cluster at one k step: block 2c computes the upper tile of C, block 2c + 1 the one below;
    each loads its own A tile, and one half of B's tile with a multicast copy that lands in both blocks."""
    fig, ax = plt.subplots(figsize=(10, 5.2))
    ax.set_xlim(0, 10)
    ax.set_ylim(0, 5.6)
    ax.axis("off")
    # global memory: B's k step (64 x 256, two halves) and the two A tiles
    ax.text(5, 5.35, "global memory (through L2)", ha="center", fontsize=9)
    _box(ax, 3.2, 4.4, 1.8, 0.6, ORANGE, "B, columns 0-127")
    _box(ax, 5.0, 4.4, 1.8, 0.6, ORANGE, "B, columns 128-255")
    _box(ax, 0.2, 4.4, 1.6, 0.6, BLUE, "A, rows of tile 2c")
    _box(ax, 8.2, 4.4, 1.6, 0.6, BLUE, "A, rows of tile 2c+1")
    for x0, label in ((0.3, "block 2c (rank 0), SM i"), (5.2, "block 2c+1 (rank 1), SM i+1")):
        ax.add_patch(Rectangle((x0, 0.3), 4.5, 2.9, facecolor=GREEN, alpha=0.15, edgecolor="black", lw=1))
        ax.text(x0 + 2.25, 2.95, label + ": shared memory", ha="center", fontsize=8.5)
        _box(ax, x0 + 0.2, 1.7, 1.3, 0.8, BLUE, "own A tile")
        _box(ax, x0 + 1.7, 1.7, 1.3, 0.8, ORANGE, "B half 0")
        _box(ax, x0 + 3.0, 1.7, 1.3, 0.8, ORANGE, "B half 1")
        _box(ax, x0 + 0.2, 0.5, 4.1, 0.8, LIGHT_GREY, "full[s]: expects A + all of B (bytes from both)", fontsize=8)
    _arrow(ax, (1.0, 4.4), (1.15, 2.5), BLUE)
    _arrow(ax, (9.0, 4.4), (6.05, 2.5), BLUE)
    # each producer's multicast: its half into both blocks (mask 0b11)
    for src, dst_a, dst_b, colour in (((4.1, 4.4), (2.65, 2.5), (7.55, 2.5), RED),
                                      ((5.9, 4.4), (3.95, 2.5), (8.85, 2.5), PURPLE)):
        _arrow(ax, src, dst_a, colour)
        _arrow(ax, src, dst_b, colour)
    ax.text(5, 3.55, "rank 0 copies half 0 (red), rank 1 half 1 (purple), each with mask 0b11: B read once per pair",
            ha="center", fontsize=8.5, bbox=dict(facecolor="white", edgecolor="none", pad=1))
    ax.text(5, 0.05, "empty[s] counts 4 arrivals: a stage is refilled once the 2 consumers of both blocks read it",
            ha="center", fontsize=8.5)
    return fig


def draw_persistent_epilogue_overlap():
    """Two tiles of one persistent block, in time: with C stored from the registers the consumers
    stop the tensor cores for the epilogue; with the TMA store they hand C to the TMA in chunks and
    start tile t+1's wgmma while the copy runs, and the producer has loaded its first stages already."""
    fig, axes = plt.subplots(2, 1, figsize=(10, 4.8), sharex=True)
    rows = ["producer (TMA loads)", "consumers (wgmma)", "epilogue (C)"]
    for ax, tma, title in zip(axes, (False, True), ("C stored from the registers (steps 1-2)",
                                                   "C through shared memory by the TMA store (step 3)")):
        ax.set_ylim(-0.2, 3.5)
        ax.set_xlim(0, 10.5)
        ax.set_yticks([2.35, 1.35, 0.35], rows, fontsize=8.5)
        ax.set_xticks([])
        for side in ("top", "right", "left"):
            ax.spines[side].set_visible(False)
        ax.set_title(title, fontsize=9.5, loc="left")
        store = 0.6 if tma else 1.0  # the consumers' share of the epilogue
        t0, end = 0.0, 0.0
        for tile in range(2):
            main = 3.6
            ax.add_patch(Rectangle((t0, 1.05), main, 0.6, facecolor=BLUE, alpha=0.7, edgecolor="black"))
            ax.text(t0 + main / 2, 1.35, f"tile {'t' if tile == 0 else 't+1'}: k loop", ha="center", va="center",
                    fontsize=8.5, color="white")
            ax.add_patch(Rectangle((t0 - 0.3 if tile else 0, 2.05), main - 0.3 if tile else main - 0.6, 0.6,
                                   facecolor=ORANGE, alpha=0.7, edgecolor="black"))
            ax.text(t0 + main / 2 - 0.3, 2.35, "stages of A and B", ha="center", va="center", fontsize=8)
            end = t0 + main
            ax.add_patch(Rectangle((end, 0.05), store, 0.6, facecolor=GREEN, alpha=0.8, edgecolor="black"))
            ax.text(end + store / 2, 0.35, "regs" if not tma else "smem", ha="center", va="center", fontsize=8)
            if tma:  # the TMA store of this tile, under the next tile's k loop
                ax.add_patch(Rectangle((end + store, 0.05), 1.6, 0.6, facecolor=GREEN, alpha=0.35, edgecolor="black",
                                       hatch="//"))
                ax.text(end + store + 0.8, 0.35, "TMA store", ha="center", va="center", fontsize=8)
            t0 = end + store
        ax.annotate("", xy=(t0, 2.85), xytext=(0, 2.85), arrowprops=dict(arrowstyle="<->", lw=0.8))
        ax.text(t0 / 2, 2.95, "two tiles" + (": shorter, the tensor cores idle only while C goes to shared memory"
                                             if tma else ": the tensor cores idle for each whole epilogue"),
                ha="center", va="bottom", fontsize=8)
    axes[1].set_xlabel("time", fontsize=9)
    fig.tight_layout()
    return fig
