"""Diagrams for notebook 11 (FlashAttention on Hopper): the timelines of the producer and the two
consumer warpgroups, before and after ping-pong, with the exponentials' share of a tile computed
from the H100's data sheet; the mbarrier phases across the two stages; the persistent walk.

Each draw_<name>() returns a matplotlib Figure; images/draw.py saves it as images/<name>.png.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import Rectangle

from palette import BLUE, GREEN, LIGHT_GREY, ORANGE, PURPLE, RED


def _exp_share(d: int = 128) -> float:
    """The time of a tile's exponentials over the time of the wgmma they feed, on an H100: 989
    TFLOP/s of fp16 products against 16 exponentials per SM per clock (4 d FLOP per exponential)."""
    from helpers.env import datasheet
    h100 = datasheet("NVIDIA H100 80GB HBM3").spec()
    exp_per_s = h100.sm_count * 16 * h100.tensor_clock_mhz * 1e6
    return h100.peak_fp16_tc_tflops * 1e12 / (exp_per_s * 4 * d)


def _bar(ax, x, y, w, color, text, h=0.6):
    ax.add_patch(Rectangle((x, y - h / 2), w, h, facecolor=color, edgecolor="black", lw=0.8))
    if text:
        ax.text(x + w / 2, y, text, ha="center", va="center", fontsize=9)


def _timeline(ax, pingpong: bool, share: float, title: str):
    mma, sm = 1.0, share  # a product's time (S or P V, half a tile's wgmma each), a softmax's
    rows = {"producer (TMA)": 2.4, "consumer 0": 1.2, "consumer 1": 0.0}
    for name, y in rows.items():
        ax.text(-0.15, y, name, ha="right", va="center", fontsize=9)
    for j in range(4):  # the producer's copies run ahead
        _bar(ax, j * 1.5, rows["producer (TMA)"], 0.6, LIGHT_GREY, f"K{j} V{j}")
    for wg, y in ((0, 1.2), (1, 0.0)):
        t = mma * wg if pingpong else 0.0  # ping-pong: consumer 1 issues while consumer 0 computes its softmax
        for j in range(3):
            if pingpong:  # this consumer's two products, then its softmax while the other's products run
                _bar(ax, t, y, mma, BLUE, f"S{j + 1} + P{j}V{j}")
                _bar(ax, t + mma, y, sm, ORANGE, "exp")
                t += 2 * mma
            else:
                _bar(ax, t, y, mma / 2, BLUE, f"S{j}")
                _bar(ax, t + mma / 2, y, sm, ORANGE, "exp")
                _bar(ax, t + mma / 2 + sm, y, mma / 2, GREEN, f"P{j}V{j}")
                t += mma + sm
    ax.set_xlim(-2.2, 7.6)
    ax.set_ylim(-0.7, 3.0)
    ax.axis("off")
    ax.set_title(title, fontsize=10, loc="left")


def draw_flash_pingpong_timeline():
    """Section 2 against section 3: in section 2 each consumer computes S, then its softmax, then
    P V, so both consumers' products wait during their softmax; with two products in flight and
    ping-pong, one warpgroup's softmax runs while the other's products keep the tensor cores busy."""
    share = _exp_share()
    fig, axes = plt.subplots(2, 1, figsize=(10, 4.8))
    _timeline(axes[0], False, share, "Section 2: S, softmax, P V in turn (both consumers at once)")
    _timeline(axes[1], True, share, "Section 3: two products in flight, consumers taking turns (ping-pong)")
    fig.text(0.5, 0.01, f"H100: 989 TFLOP/s of fp16 wgmma, 132 SMs x 16 exponentials x 1.83 GHz = 3.9 T/s; one "
             f"exponential per 4d = 512 FLOP: a softmax takes {share:.0%} of its tile's products", ha="center",
             fontsize=9, color=RED)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    return fig


def draw_flash_mbarrier_phases():
    """Two stages, each with a full and an empty mbarrier: tile j goes to stage j % 2 and is its
    (j // 2)-th use, so a full barrier's wait asks for parity (j // 2) % 2, and the producer waits
    on the empty barrier for the parity before (phase ^ 1), which a fresh barrier counts as done."""
    fig, ax = plt.subplots(figsize=(10, 3.2))
    tiles = 6
    for j in range(tiles):
        st, phase = j % 2, j // 2 % 2
        x, y = j * 1.6, 1.4 - st * 1.2
        ax.add_patch(Rectangle((x, y), 1.4, 0.9, facecolor=[GREEN, PURPLE][phase], alpha=0.45, edgecolor="black"))
        ax.text(x + 0.7, y + 0.62, f"tile {j}: K{j}, V{j}", ha="center", va="center", fontsize=9)
        ax.text(x + 0.7, y + 0.25, f"full: parity {phase}\nempty: wait {phase ^ 1}", ha="center", va="center",
                fontsize=9)
    for st in range(2):
        ax.text(-0.2, 1.85 - st * 1.2, f"stage {st}", ha="right", va="center", fontsize=10)
    ax.text(tiles * 1.6 / 2, -0.25, "a barrier's phase flips each time its arrivals are in: the parity a wait asks "
            "for flips with each use of a stage: every second tile", ha="center", fontsize=9)
    ax.set_xlim(-1.6, tiles * 1.6)
    ax.set_ylim(-0.5, 2.5)
    ax.axis("off")
    return fig


def draw_flash_persistent_walk():
    """A persistent grid over causal work items: 2 heads of 8 row blocks (b + 1 tiles each) walked by
    4 blocks, item w going to block w % 4 at turn w // 4. Above, head by head, the longest row block
    first: block 0 walks 24 tiles, block 3 12. Below, in a group of 2 heads, every head's longest row
    block first: each turn hands out items of nearly one length, 20 tiles at most."""
    heads, row_blocks, blocks = 2, 8, 4
    colors = [BLUE, ORANGE, GREEN, PURPLE]
    orders = [("head by head", lambda w: (w // row_blocks, row_blocks - 1 - w % row_blocks)),
              ("in a group of 2 heads", lambda w: (w % heads, row_blocks - 1 - w // heads))]
    fig, ax = plt.subplots(figsize=(10, 6.4))
    for panel, (name, order) in enumerate(orders):
        y0, tiles = 4.6 - panel * 4.3, [0] * blocks
        for w in range(heads * row_blocks):
            head, rb = order(w)
            tiles[w % blocks] += rb + 1
            ax.add_patch(Rectangle((w, y0), 0.9, (rb + 1) * 0.3, facecolor=colors[w % blocks], alpha=0.7,
                                   edgecolor="black"))
            ax.text(w + 0.45, y0 - 0.15, f"h{head} r{rb}", ha="center", va="top", fontsize=9)
        ax.text(-0.3, y0 + 3.0, f"{name}: tiles walked by blocks 0-3: " + ", ".join(map(str, tiles)),
                ha="left", va="center", fontsize=10)
    for b in range(blocks):
        ax.add_patch(Rectangle((-0.3 + b * 4.15, 8.3), 0.3, 0.3, facecolor=colors[b], alpha=0.7))
        ax.text(0.1 + b * 4.15, 8.45, f"block {b}: items {b}, {b + blocks}, {b + 2 * blocks}, ...", va="center",
                fontsize=9)
    ax.text(8, -0.2, "bar height: tiles of K and V (row block + 1); item w, left to right, goes to block w % 4",
            ha="center", va="top", fontsize=9)
    ax.set_xlim(-0.4, 16.2)
    ax.set_ylim(-0.7, 8.8)
    ax.axis("off")
    return fig