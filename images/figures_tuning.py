"""Diagrams for notebook 06 (MetaSchedule tuning).

Each draw_<name>() returns a matplotlib Figure; images/draw.py saves it as images/<name>.png.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

from palette import BLUE as CPU, GREEN as GPU, ORANGE as DATA, PURPLE as MODEL


def _node(ax, x, y, w, h, color, title, body):
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.02,rounding_size=0.08",
                                facecolor=color, alpha=0.18, edgecolor=color, lw=1.6))
    ax.text(x, y + h / 2 - 0.12, title, ha="center", va="top", fontsize=9.5, weight="bold", color="black")
    ax.text(x, y + h / 2 - 0.42, body, ha="center", va="top", fontsize=8, color="#333333", linespacing=1.35)


def _arrow(ax, p, q, text=None, rad=0.0, offset=(0, 0.12)):
    ax.add_patch(FancyArrowPatch(p, q, arrowstyle="-|>", mutation_scale=12, lw=1.3, color="#444444",
                                 connectionstyle=f"arc3,rad={rad}"))
    if text:
        ax.text((p[0] + q[0]) / 2 + offset[0], (p[1] + q[1]) / 2 + offset[1], text, ha="center", va="bottom",
                fontsize=7.5, color="#444444", style="italic")


def draw_metaschedule_search():
    """MetaSchedule's loop: sketches from rules, sampled and evolved with a cost model, measured
    on the GPU, stored in the database that trains the model and seeds the next round."""
    fig, ax = plt.subplots(figsize=(10.5, 5.2))
    w, h = 2.55, 1.55
    steps = [  # (x, y, colour, title, text): the loop, clockwise from the top left
        (1.5, 4.1, CPU, "1. design space", "schedule rules applied to\nevery block (post-order):\nmulti-level tiling, cache_read,\ncooperative fetch, unroll ...\n= a few sketches"),
        (5.0, 4.1, CPU, "2. sample", "fill each sketch's decisions\n(tile sizes, vector length,\nunroll depth) at random;\npostprocessors reject what\nthe GPU cannot run"),
        (8.6, 4.1, MODEL, "3. evolutionary search", "population of ~512 programs,\nmutate decisions for a few\ngenerations, keep what the\ncost model (XGBoost) scores\nbest, plus a few at random"),
        (8.6, 1.2, GPU, "4. build and measure", "compile a batch of candidates\n(in parallel on the CPU),\nrun each on the GPU,\nrecord its time (or error)"),
        (5.0, 1.2, DATA, "5. tuning database", "workload + trace + run times\n(JSON files): the best record\nis replayed later without\ntuning again"),
        (1.5, 1.2, MODEL, "6. cost model update", "retrain XGBoost on the\nmeasured times: features of\neach program's loads, stores,\narithmetic and parallelism"),
    ]
    for x, y, colour, title, text in steps:
        _node(ax, x, y, w, h, colour, title, text)
    _arrow(ax, (2.8, 4.1), (3.7, 4.1))
    _arrow(ax, (6.3, 4.1), (7.3, 4.1))
    _arrow(ax, (8.6, 3.3), (8.6, 2.0), "top candidates", offset=(0.75, 0))
    _arrow(ax, (7.3, 1.2), (6.3, 1.2))
    _arrow(ax, (3.7, 1.2), (2.8, 1.2))
    _arrow(ax, (1.5, 2.0), (7.6, 3.3), "next round", rad=-0.12, offset=(-0.2, -0.35))
    _arrow(ax, (5.6, 2.0), (8.0, 3.3), "best so far seed the population", rad=0.0, offset=(0.9, -0.55))
    ax.text(5.0, 5.25, "One round of MetaSchedule: repeat until the trial budget (or the time limit) is used",
            ha="center", fontsize=10)
    ax.set_xlim(0, 10.1)
    ax.set_ylim(0.2, 5.5)
    ax.axis("off")
    return fig
