"""Diagrams for notebook 12 (decoding): how a block's 128 threads share one KV head among its query
heads, how split-KV cuts a sequence's keys over blocks and merges their states, and how a paged
cache is addressed through a block table.

Each draw_<name>() returns a matplotlib Figure; images/draw.py saves it as images/<name>.png.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import Rectangle

from diagram import arrow, finish
from palette import BLUE, GREEN, LIGHT_GREY, ORANGE, PURPLE, RED


def _box(ax, x, y, w, h, color, text="", fontsize=9, alpha=1.0, text_color="black"):
    ax.add_patch(Rectangle((x, y), w, h, facecolor=color, edgecolor="black", lw=0.8, alpha=alpha))
    if text:
        ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=fontsize, color=text_color)


def draw_decode_block():
    """One block of 128 threads: 8 rows of 16 lanes; each row takes a key (its 128 dims, 8 halves a
    lane, 16 bytes) and scores it against the 4 query heads of the group held in every lane."""
    fig, ax = plt.subplots(figsize=(12, 4.0))
    for h in range(4):
        _box(ax, 0, 3.0 - h * 0.8, 3.0, 0.6, BLUE, f"query head {h} of the group", alpha=0.35 + 0.15 * h)
    ax.text(1.5, 3.95, "q: 4 heads x 128 dims,\nin every lane's registers", ha="center", va="bottom", fontsize=9)
    x0, w = 7.7, 0.28
    for r in range(8):
        y = 3.6 - r * 0.5
        for lane in range(16):
            _box(ax, x0 + lane * w, y, w, 0.4, ORANGE if r % 2 == 0 else "#f2c4a5")
        ax.text(x0 - 0.1, y + 0.2, f"row {r}: keys {r}, {r + 8}, {r + 16}, ...", ha="right", va="center", fontsize=9)
    ax.text(x0 + 8 * w, 4.15, "16 lanes x 8 halves = one key's 128 dims (256 bytes)", ha="center", fontsize=9)
    ax.text(x0 + 8 * w, -0.35, "the 8 rows read 8 neighbouring keys: 2 KiB in one go", ha="center", fontsize=9)
    arrow(ax, (3.2, 1.95), (4.8, 1.95), RED)
    ax.text(4.0, 2.1, "4 dot products\nper key", ha="center", va="bottom", fontsize=9, color=RED)
    ax.text(x0 + 16 * w + 0.3, 2.6, "each row keeps, per head:\nm  (running maximum)\nl  (running sum)\n"
            "o  (its 8 dims of the output)", ha="left", va="center", fontsize=9)
    ax.text(x0 + 16 * w + 0.3, 0.9, "then the 8 rows merge\nthrough shared memory", ha="left", va="center", fontsize=9,
            color=GREEN)
    return finish(fig, ax, (-0.2, 15.5), (-0.6, 4.6))


def draw_split_kv():
    """Split-KV: one sequence's 8192 keys cut into 4 chunks, each chunk a block that writes a partial
    state (m, l, O); a second kernel merges the states into the output."""
    fig, ax = plt.subplots(figsize=(10, 3.8))
    colors = [BLUE, ORANGE, GREEN, PURPLE]
    for s in range(4):
        _box(ax, s * 2.4, 2.6, 2.4, 0.6, colors[s], f"keys {s * 2048}-{s * 2048 + 2047}", alpha=0.6)
        _box(ax, s * 2.4 + 0.3, 1.2, 1.8, 0.6, colors[s], f"block {s}: (O, L)", alpha=0.3)
        arrow(ax, (s * 2.4 + 1.2, 2.55), (s * 2.4 + 1.2, 1.85))
        arrow(ax, (s * 2.4 + 1.2, 1.15), (4.8, 0.25))
    ax.text(4.8, 3.5, "one sequence, one KV head: its cached keys and values", ha="center", fontsize=9)
    _box(ax, 3.3, -0.45, 3.0, 0.65, LIGHT_GREY, "merge (second kernel): O", fontsize=9)
    ax.text(9.9, 1.5, "kernel 1: a block per\n(sequence, KV head, split)\n\nkernel 2: a block per\n"
            "(sequence, query head)", ha="left", va="center", fontsize=9)
    return finish(fig, ax, (-0.2, 12.5), (-0.7, 3.8))


def draw_paged_cache():
    """A paged cache: three sequences of different lengths, their pages of 16 tokens scattered in
    one pool, found through each sequence's row of the block table; the last page partly filled."""
    fig, ax = plt.subplots(figsize=(10, 3.2))
    rows = [("seq 0: 40 tokens", [5, 2, 9], 40), ("seq 1: 17 tokens", [0, 7], 17), ("seq 2: 1 token", [4], 1)]
    colors = [BLUE, ORANGE, GREEN]
    ax.text(1.9, 3.75, "block table (page numbers)", ha="center", fontsize=9)
    for b, (name, pages, n) in enumerate(rows):
        y = 3.0 - b * 0.8
        ax.text(-0.1, y + 0.25, name, ha="right", va="center", fontsize=9)
        for i, p in enumerate(pages):
            _box(ax, i * 0.9 + 0.4, y, 0.9, 0.5, colors[b], str(p), alpha=0.5)
    ax.text(8.0, 3.75, "the pool: pages of 16 tokens (K and V, 8 KV heads, 128 dims)", ha="center", fontsize=9)
    owner = {p: (b, i, n) for b, (_, pages, n) in enumerate(rows) for i, p in enumerate(pages)}
    for p in range(10):
        x, y = 4.6 + (p % 5) * 1.4, 2.6 - (p // 5) * 1.3
        if p in owner:
            b, i, n = owner[p]
            used = min(16, n - 16 * i) / 16
            _box(ax, x, y, 1.2 * used, 0.8, colors[b], alpha=0.5)
            if used < 1:
                _box(ax, x + 1.2 * used, y, 1.2 * (1 - used), 0.8, LIGHT_GREY)
        else:
            _box(ax, x, y, 1.2, 0.8, LIGHT_GREY)
        ax.add_patch(Rectangle((x, y), 1.2, 0.8, facecolor="none", edgecolor="black", lw=0.8))
        ax.text(x + 0.6, y - 0.15, f"page {p}", ha="center", va="top", fontsize=9)
    arrow(ax, (3.2, 3.1), (4.55, 1.75), RED)
    ax.text(-2.1, 1.3, "key t of sequence b: row t % 16\nof page table[b, t // 16]", ha="left", va="top", fontsize=9,
            color=RED)
    ax.text(7.6, 0.55, "grey: unused pages and the tail of each last page, never read",
            ha="center", fontsize=9)
    return finish(fig, ax, (-2.2, 11.8), (0.2, 4.0))


def draw_bytes_in_flight():
    """One thread of section 6 over time, three ways: a load (in flight for DRAM's latency) then the
    arithmetic on what arrived; four keys' loads issued together; and the next four issued before
    the arithmetic on these, so that a load is always in flight. Schematic times: a latency of 4,
    0.6 of arithmetic a key."""
    fig, ax = plt.subplots(figsize=(12, 3.9))
    latency, per_key, end = 4.0, 0.6, 15.0
    rows = [("one key a step (section 5)", 1, False, 2.6), ("four keys a row", 4, False, 1.4),
            ("four keys a row, the next four ahead", 4, True, 0.2)]
    for label, keys, ahead, y in rows:
        ax.text(-0.2, y + 0.35, label, ha="right", va="center", fontsize=9)
        t, scored, load_at = 0.0, 0, 0.0
        while True:
            arrive = load_at + latency
            if arrive + keys * per_key > end:
                break
            ax.add_patch(Rectangle((load_at, y + 0.45), latency, 0.3, facecolor=BLUE, alpha=0.35,
                                   edgecolor="black", lw=0.6, hatch="//"))
            ax.text(load_at + latency / 2, y + 0.6, f"{32 * keys} B in flight", ha="center", va="center", fontsize=9)
            start = max(t, arrive)
            _box(ax, start, y, keys * per_key, 0.4, ORANGE, "score" if keys > 1 else "", fontsize=9)
            t, scored = start + keys * per_key, scored + keys
            load_at = start if ahead else t  # ahead: the next loads leave as this step's arithmetic starts
        ax.text(end + 0.2, y + 0.35, f"{scored} keys scored", ha="left", va="center", fontsize=9, color=GREEN)
    arrow(ax, (0, -0.35), (end, -0.35))
    ax.text(end / 2, -0.7, "time (schematic: DRAM's latency is several hundred nanoseconds)", ha="center", va="center",
            fontsize=9)
    return finish(fig, ax, (-6.2, end + 2.6), (-1.0, 3.4))


def _matrix(ax, x, y, rows, cols, cell, used_rows, color, label, below):
    """A rows x cols matrix at (x, y) (its top left), its first `used_rows` rows in color, the rest grey."""
    for r in range(rows):
        _box(ax, x, y - (r + 1) * cell, cols * cell, cell, color if r < used_rows else LIGHT_GREY,
             alpha=0.55 if r < used_rows else 1.0)
    ax.text(x + cols * cell / 2, y + 0.12, label, ha="center", va="bottom", fontsize=9)
    ax.text(x + cols * cell / 2, y - rows * cell - 0.12, below, ha="center", va="top", fontsize=9)


def draw_decode_mma():
    """Section 7: the group's 4 query heads as the rows of mma.sync.m16n8k16's A (12 rows of zeros), a page's
    16 keys as B's columns (two 8-key tiles), S in the accumulator (lane 4g + t: head g, keys 2t and
    2t + 1 of a tile); then O^T = V^T P^T with P^T the accumulator packed to fp16."""
    fig, ax = plt.subplots(figsize=(12, 4.4))
    c = 0.16
    ax.text(2.9, 3.55, "S = Q K^T: 8 k-steps of 16 dims, two 8-key tiles", ha="center", fontsize=9, color=RED)
    _matrix(ax, 0.0, 3.0, 16, 16, c, 4, BLUE, "A: Q, 16 dims", "4 query heads,\n12 rows of zeros")
    ax.text(2.85, 1.7, "x", ha="center", va="center", fontsize=12)
    for j in range(2):  # B: 16 dims (rows) x 8 keys, twice
        _matrix(ax, 3.2 + j * (8 * c + 0.1), 3.0, 16, 8, c, 16, ORANGE, "", "")
    ax.text(3.2 + 8 * c + 0.05, 3.12, "B: a page's 16 keys", ha="center", va="bottom", fontsize=9)
    ax.text(3.2 + 8 * c + 0.05, 3.0 - 16 * c - 0.12, "K, 16 dims x 8 keys,\ntwice", ha="center", va="top", fontsize=9)
    ax.text(6.15, 1.7, "=", ha="center", va="center", fontsize=12)
    _matrix(ax, 6.5, 3.0, 16, 16, c, 4, GREEN, "S: 4 heads x 16 keys", "lane 4g + t holds head g,\nkeys 2t, 2t + 1")
    ax.text(12.4, 3.55, "O^T += V^T P^T: P^T is S, packed to fp16", ha="center", fontsize=9, color=RED)
    _matrix(ax, 10.0, 3.0, 16, 16, c, 16, ORANGE, "V^T: dims x keys", "16 dims x 16 keys,\n8 of these for 128")
    ax.text(12.85, 1.7, "x", ha="center", va="center", fontsize=12)
    for r in range(16):  # P^T: 16 keys (rows) x 8 columns, heads 0-3 used
        for h in range(8):
            _box(ax, 13.2 + h * c, 3.0 - (r + 1) * c, c, c, GREEN if h < 4 else LIGHT_GREY, alpha=0.55 if h < 4 else 1.0)
    ax.text(13.2 + 4 * c, 3.12, "P^T", ha="center", va="bottom", fontsize=9)
    ax.text(13.2 + 4 * c, 3.0 - 16 * c - 0.12, "keys x heads,\n4 used", ha="center", va="top", fontsize=9)
    ax.text(14.95, 1.7, "=", ha="center", va="center", fontsize=12)
    for r in range(16):
        for h in range(8):
            _box(ax, 15.3 + h * c, 3.0 - (r + 1) * c, c, c, PURPLE if h < 4 else LIGHT_GREY, alpha=0.55 if h < 4 else 1.0)
    ax.text(15.3 + 4 * c, 3.12, "O^T", ha="center", va="bottom", fontsize=9)
    ax.text(15.3 + 4 * c, 3.0 - 16 * c - 0.12, "dims x heads", ha="center", va="top", fontsize=9)
    ax.text(8.6, -0.45, "a page costs a warp 16 mma for S and 8 for P V, where the CUDA-core kernel spends about 92 "
            "instructions a key", ha="center", va="center", fontsize=9)
    return finish(fig, ax, (-0.3, 16.9), (-0.8, 3.9))
