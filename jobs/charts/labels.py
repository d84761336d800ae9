"""Point labels that keep clear of one another and of the points: each label tries the spots
around its point, nearest first, and takes the first where it covers no label placed before it
and no point, inside the plot; one placed beyond the nearest ring gets a thin leader line to its
point. Placed once the figure's layout is final (the spots are measured as drawn).

Points that coincide on screen share one label, their texts joined. The labels are placed in
the order given: one that must be drawn (`keep`) takes the spot that covers least when none is
free; any other is left out where no spot is free (a crowded plot shows what fits).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

# Directions from the point, nearest first (each times a ring's distance, in points).
SPOTS = ((1, 0.6), (1, -0.6), (-1, 0.6), (-1, -0.6), (0, 1.2), (0, -1.2), (1.3, 0), (-1.3, 0))
RINGS = (8.0, 18.0, 30.0)  # points from the point to the label's near corner
POINT_PT = 6.5  # a marker's radius in points (the Pareto front's ring included)
JOINED = "#333333"  # the colour of a label that names several points


@dataclass(frozen=True)
class PointLabel:
    """A label to place: its point (data coordinates), text, colour, and whether it must be
    drawn even where it covers something."""

    x: float
    y: float
    text: str
    colour: str
    keep: bool = True


def place_labels(axes: Any, labels: Sequence[PointLabel], *, fontsize: float = 6.5,
                 points: Sequence[tuple[float, float]] = ()) -> list[Any]:
    """Annotate `axes` with the labels; `points` (data coordinates): every marker the labels
    must leave visible, the labels' own included. Returns the annotations drawn."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    figure = axes.figure
    canvas = figure.canvas if isinstance(figure.canvas, FigureCanvasAgg) else (
        FigureCanvasAgg(figure))  # what savefig draws a figure without pyplot with
    figure.draw_without_rendering()  # the axes' final place and scale
    renderer = canvas.get_renderer()  # type: ignore[no-untyped-call]
    frame = axes.get_window_extent(renderer)
    radius = POINT_PT * figure.dpi / 72.0
    markers = [_box_around(axes.transData.transform(p), radius) for p in points]
    placed: list[Any] = []
    drawn = []
    for label in _joined(axes, labels, near=radius):
        spot = _spot(axes, label, fontsize=fontsize, renderer=renderer,
                     avoid=[*placed, *markers], frame=frame)
        if spot is not None:
            placed.append(spot[1])
            drawn.append(spot[0])
    return drawn


def text_box(text: Any, renderer: Any = None) -> Any:
    """A label's text as drawn, without its leader line (which may cross others)."""
    from matplotlib.text import Text

    text.get_window_extent(renderer)  # an annotation's text moves to its offset here
    return Text.get_window_extent(text, renderer)


def _joined(axes: Any, labels: Sequence[PointLabel], *, near: float) -> list[PointLabel]:
    """Labels whose points lie within `near` pixels of an earlier one's join it."""
    out: list[tuple[Any, PointLabel]] = []
    for label in labels:
        at = axes.transData.transform((label.x, label.y))
        for n, (where, held) in enumerate(out):
            if abs(where[0] - at[0]) <= near and abs(where[1] - at[1]) <= near:
                texts = held.text.split(", ")
                if label.text not in texts:
                    texts = sorted([*texts, label.text], key=_number)
                    out[n] = (where, PointLabel(held.x, held.y, ", ".join(texts), JOINED,
                                                held.keep or label.keep))
                break
        else:
            out.append((at, label))
    return [label for _, label in out]


def _number(text: str) -> tuple[float, str]:
    """'c=16' sorts after 'c=2' (the number after the last '='; text without one last)."""
    try:
        return float(text.rpartition("=")[2]), text
    except ValueError:
        return float("inf"), text


def _spot(axes: Any, label: PointLabel, *, fontsize: float, renderer: Any,
          avoid: list[Any], frame: Any) -> tuple[Any, Any] | None:
    """The first free spot's (annotation, box); for a label to keep, else the one that covers
    least; None for a label left out. The text is measured once: a spot's box is its size
    moved to the spot, and only the chosen spot is annotated."""
    probe = _annotate(axes, label, (0.0, 0.0), fontsize=fontsize, leader=False)
    size = text_box(probe, renderer)
    probe.remove()
    x, y = axes.transData.transform((label.x, label.y))
    to_px = axes.figure.dpi / 72.0
    best: tuple[float, tuple[float, float], Any] | None = None
    for ring in RINGS:
        for dx, dy in SPOTS:
            offset = (dx * ring, dy * ring)
            box = _moved(size, x + offset[0] * to_px, y + offset[1] * to_px, offset)
            cost = sum(_overlap(box, other) for other in avoid) + _outside(box, frame)
            if cost == 0:
                best = (cost, offset, box)
                break
            if label.keep and (best is None or cost < best[0]):
                best = (cost, offset, box)
        if best is not None and best[0] == 0:
            break
    if best is None:
        return None
    text = _annotate(axes, label, best[1], fontsize=fontsize, leader=best[1] not in (
        (dx * RINGS[0], dy * RINGS[0]) for dx, dy in SPOTS))
    return text, text_box(text, renderer)


def _moved(size: Any, x: float, y: float, offset: tuple[float, float]) -> Any:
    """A text's box of `size` anchored at (x, y) as `_annotate` aligns it for `offset`."""
    from matplotlib.transforms import Bbox

    w, h = size.width, size.height
    x0 = x if offset[0] > 0 else x - w if offset[0] < 0 else x - w / 2
    y0 = y if offset[1] > 0 else y - h if offset[1] < 0 else y - h / 2
    return Bbox.from_extents(x0, y0, x0 + w, y0 + h)


def _annotate(axes: Any, label: PointLabel, offset: tuple[float, float], *, fontsize: float,
              leader: bool) -> Any:
    dx, dy = offset
    ha = "left" if dx > 0 else "right" if dx < 0 else "center"
    va = "bottom" if dy > 0 else "top" if dy < 0 else "center"
    arrow = {"arrowstyle": "-", "lw": 0.5, "color": label.colour, "shrinkA": 0,
             "shrinkB": POINT_PT} if leader else None
    return axes.annotate(label.text, (label.x, label.y), xytext=offset,
                         textcoords="offset points", ha=ha, va=va, fontsize=fontsize,
                         color=label.colour, arrowprops=arrow, gid=f"label:{label.text}",
                         zorder=7)


def _box_around(centre: Any, radius: float) -> Any:
    from matplotlib.transforms import Bbox

    x, y = centre
    return Bbox.from_extents(x - radius, y - radius, x + radius, y + radius)


def _overlap(a: Any, b: Any) -> float:
    width = min(a.x1, b.x1) - max(a.x0, b.x0)
    height = min(a.y1, b.y1) - max(a.y0, b.y0)
    return width * height if width > 0 and height > 0 else 0.0


def _outside(box: Any, frame: Any) -> float:
    """The area of `box` outside the plot, weighted so that a spot inside which covers
    something is always taken before one reaching out of the plot."""
    return 1000.0 * float(box.width * box.height - _overlap(box, frame))
