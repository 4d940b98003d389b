"""Drawing steps the diagrams share, so that every arrow and every frame looks the same from figure to
figure: an arrow between two points, and the finish that makes an axes a diagram (its extent fixed,
equal units on both axes, no frame or ticks)."""

from matplotlib.patches import FancyArrowPatch


def arrow(ax, start, end, color="black", rad=0.0):
    """An arrow from `start` to `end`, bent by `rad` (0: straight)."""
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=12, color=color, lw=1.2,
                                 connectionstyle=f"arc3,rad={rad}"))


def finish(fig, ax, xlim, ylim):
    """`fig` with its one axes showing x in `xlim` and y in `ylim` at equal scale, without axes lines:
    a diagram, not a plot."""
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    ax.set_aspect("equal")
    ax.axis("off")
    return fig
