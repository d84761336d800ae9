"""A watch's series chart (`watch show ID --chart`, docs/contracts.md "Regression watch"): noise,
a blip drawn hollow, a confirmed step with its confirmation and its segments' means, the stack's
change as a labelled line; every text inside the figure, none covering another, and the key
below the panels (inside one it covered the lowest points)."""

from __future__ import annotations

import datetime as dt
import random

import pytest

from jobs.core.watch import BLIP, CONFIRMED, Change, SeriesKey, SeriesPoint, settle
from jobs.core.watch import find_candidate as found
from tests.jobs.test_chart_legibility import cut_texts

pytest.importorskip("matplotlib")

from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402

from jobs.charts.watch import to_watch_png, watch_figure  # noqa: E402

KEY = SeriesKey("baseline", "output_throughput")
T0 = dt.datetime(2027, 1, 1, 2, 0, tzinfo=dt.UTC)


def history() -> tuple[list[SeriesPoint], list[Change]]:
    """25 noise nights (a blip on night 12, its confirmation back at the level), then a 10% step
    with a new release on night 25, confirmed, and 6 nights at the new level."""
    rng = random.Random(2)
    points: list[SeriesPoint] = []
    changes: list[Change] = []
    for i in range(32):
        level = 100.0 if i < 25 else 90.0
        value = level * (1 + 0.02 * rng.gauss(0, 1)) * (0.88 if i == 12 else 1.0)
        stack = {"engine": "sglang", "sglang": "0.5.2" if i < 25 else "0.5.3"}
        points.append(SeriesPoint(key=KEY, batch=f"n{i}", at=T0 + dt.timedelta(days=i),
                                  value=value, low=value * 0.99, high=value * 1.01,
                                  stack=stack))
        cuts = {c.since for c in changes if c.state == CONFIRMED}
        candidate = found(points, cuts=cuts, min_effect_pct=2.0)
        if candidate is not None:
            again = SeriesPoint(key=KEY, batch=f"c{i}", at=points[-1].at, value=level,
                                low=level, high=level)
            change = settle(candidate, series=points, confirmation=again,
                            confirming_batch=f"c{i}", min_effect_pct=2.0)
            changes.append(Change(key=change.key, batch=change.batch, state=change.state,
                                  data=change.data, id=len(changes) + 1,
                                  confirmation=change.confirmation))
    return points, changes


def test_the_chart_shows_the_blip_hollow_the_step_its_segments_and_the_release() -> None:
    points, changes = history()
    # the blip left in the old segment widens its spread: the step is raised on its third night
    assert [(c.batch, c.state, c.since) for c in changes] == [("n12", BLIP, "n12"),
                                                             ("n27", CONFIRMED, "n25")]
    figure = watch_figure(points, changes, title="watch 1: nightly")
    [axes] = figure.axes
    hollow = [line for line in axes.lines if line.get_markerfacecolor() == "white"
              and line.get_marker() == "o"]
    assert [list(line.get_xdata()) for line in hollow] == [[12]]
    means = sorted((line.get_xdata()[0], line.get_ydata()[0]) for line in axes.lines
                   if line.get_linestyle() == "-" and len(line.get_xdata()) == 2)
    assert [round(x) for x, _ in means] == [0, 25]
    assert abs(means[0][1] - sum(p.value for p in points[:25]) / 25) < 1e-9  # blip included
    texts = [t.get_text() for t in axes.texts]
    assert "sglang 0.5.2 → 0.5.3" in texts
    assert [t for t in texts if t.startswith("change ")] == [
        f"change 2: {changes[1].delta_pct:+.1f}%"]
    diamonds = [(list(line.get_xdata()), line.get_markerfacecolor()) for line in axes.lines
                if line.get_marker() == "D"]
    assert len(diamonds) == 2 and diamonds[0][1] == "white"  # the blip's confirmation hollow
    stack_lines = [line for line in axes.lines if line.get_linestyle() == "--"]
    assert [line.get_xdata()[0] for line in stack_lines] == [24.5]
    assert to_watch_png(points, changes, title="watch 1")[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_charts_texts_stay_inside_and_apart_and_the_key_covers_no_panel() -> None:
    points, changes = history()
    other = [SeriesPoint(key=SeriesKey("chunked", "output_throughput", "max-concurrency 4"),
                         batch=p.batch, at=p.at, value=p.value * 1.1, low=p.low * 1.1,
                         high=p.high * 1.1, stack=p.stack) for p in points]
    figure = watch_figure([*points, *other], changes, title="watch 1: nightly")
    assert cut_texts(figure) == []
    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    renderer = canvas.get_renderer()
    [legend] = figure.legends
    key = legend.get_window_extent(renderer)
    for axes in figure.axes:
        assert not key.overlaps(axes.get_window_extent(renderer))
        boxes = [t.get_window_extent(renderer) for t in axes.texts if t.get_text()]
        for i, box in enumerate(boxes):
            for earlier in boxes[:i]:
                assert not box.overlaps(earlier), (box.bounds, earlier.bounds)
    assert [a.get_title(loc="left") for a in figure.axes] == [
        "output_throughput of baseline", "output_throughput of chunked at max-concurrency 4"]


def test_no_point_no_chart() -> None:
    assert watch_figure([], [], title="watch 1") is None
