"""The charts of a batch with load levels (issue 23 item 5): the metric against load, one line per
configuration with the baseline bold and black and every level breaking the SLO marked; the
throughput against latency with the Pareto front over every configuration and level and the
SLO's limit; both legible (nothing past the figure's edge, the legend clear of the plot), both
in the thread's uploads and from `show --chart`; nothing for a batch without loads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("matplotlib")

from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402

from bot.thread.summary_message import summary_uploads  # noqa: E402
from jobs.charts.loads import (  # noqa: E402
    MAX_LINES,
    keys_of,
    load_charts,
    metric_figure,
    pareto_figure,
)
from jobs.charts.summary import COLOURS, chart_rows  # noqa: E402
from jobs.core.advice import (
    analyze,  # noqa: E402
    load_remedies,  # noqa: E402
)
from jobs.core.records import RunRecord  # noqa: E402
from jobs.core.rules import load_rules  # noqa: E402
from jobs.store import Store  # noqa: E402
from tests.bot.test_cli import specbench  # noqa: E402
from tests.conftest import make_plan, make_record  # noqa: E402
from tests.jobs.test_chart_legibility import cut_texts  # noqa: E402
from tests.jobs.test_level_report import batch  # noqa: E402
from tests.jobs.test_level_verdicts import SLO  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n"
LEVELS = [1, 4, 16, 64]


def levels(points: list[tuple[float | None, float | None, str | None]],
           levels: list[int] = LEVELS, verdict: str = "improved") -> list[dict[str, Any]]:
    """A by_load list as the report has it: (throughput, p99 TTFT, slo) per level."""
    out = []
    for level, (tput, ttft, slo) in zip(levels, points, strict=True):
        figures = {} if tput is None else {"output_throughput": tput}
        if ttft is not None:
            figures["p99_ttft_ms"] = ttft
        out.append({"load": {"max-concurrency": level}, "verdict": verdict, "value": tput,
                    "delta_pct": None, "slo": slo, "why": "", "figures": figures})
    return out


def report(**fields: Any) -> dict[str, Any]:
    """A hand-made report of a batch with loads [1, 4, 16, 64] and a p99 TTFT limit of 1000 ms:
    both c=64 levels break it; an OOM result has no value at any level."""
    base = levels([(100.0, 400.0, "met"), (180.0, 500.0, "met"), (300.0, 800.0, "met"),
                   (350.0, 1500.0, "violated")])
    eagle = levels([(130.0, 300.0, "met"), (200.0, 450.0, "met"), (280.0, 900.0, "met"),
                    (320.0, 2000.0, "violated")], verdict="mixed")
    data: dict[str, Any] = {
        "preset": "eagle3", "batch": "b-test", "fingerprint": {}, "metric": "output_throughput",
        "lower_is_better": False, "loads": {"knob": "max-concurrency", "levels": LEVELS},
        "slo": {"p99_ttft_ms": 1000.0},
        "baseline": {"approach": "baseline", "value": 100.0, "by_load": base},
        "results": [
            {"approach": "eagle3", "verdict": "mixed", "value": 130.0, "by_load": eagle},
            {"approach": "oom", "verdict": "failed", "value": None,
             "by_load": levels([(None, None, None)] * 4, verdict="failed")},
        ],
    }
    data.update(fields)
    return data


def gids(axes: Any, prefix: str) -> dict[str, Any]:
    return {a.get_gid(): a for a in [*axes.lines, *axes.collections]
            if (a.get_gid() or "").startswith(prefix)}


def test_the_metric_against_load_one_line_per_configuration() -> None:
    figure = metric_figure(report())
    assert figure is not None
    axes = figure.axes[0]
    lines = gids(axes, "load:")
    assert sorted(lines) == ["load:baseline", "load:eagle3"]  # oom has no value: no line
    base, eagle = lines["load:baseline"], lines["load:eagle3"]
    assert base.get_color() == "black" and base.get_linewidth() > 1.5 * eagle.get_linewidth()
    assert list(eagle.get_ydata()) == [130.0, 200.0, 280.0, 320.0]
    assert list(base.get_xdata()) == [1.0, 4.0, 16.0, 64.0]
    # both c=64 levels break the SLO: a marker on each, on its point
    breaches = gids(axes, "breaches")["breaches"].get_offsets().tolist()
    assert sorted(map(tuple, breaches)) == [(64.0, 320.0), (64.0, 350.0)]
    assert axes.get_xscale() == "log"  # 1 to 64
    assert [t.get_text() for t in axes.get_xticklabels()] == ["1", "4", "16", "64"]
    assert axes.get_xlabel() == "max-concurrency (concurrent requests)"
    assert axes.get_ylabel() == "output_throughput (tok/s, higher is better)"
    labels = [t.get_text() for t in figure.legends[0].get_texts()]
    assert labels[:2] == ["baseline", "eagle3 (mixed)"]
    assert "SLO violated (p99_ttft_ms ≤ 1000 ms)" in labels


def test_levels_spanning_less_than_8x_stay_linear() -> None:
    data = report(loads={"knob": "request-rate", "levels": [2, 4, 8]})
    for entry in [data["baseline"], *data["results"]]:
        entry["by_load"] = [{**e, "load": {"request-rate": r}}
                            for e, r in zip(entry["by_load"], [2, 4, 8], strict=False)]
    figure = metric_figure(data)
    assert figure is not None
    axes = figure.axes[0]
    assert axes.get_xscale() == "linear"
    assert [t.get_text() for t in axes.get_xticklabels()] == ["2", "4", "8"]
    assert axes.get_xlabel() == "request-rate (req/s)"


def test_the_pareto_front_over_every_configuration_and_level() -> None:
    figure = pareto_figure(report())
    assert figure is not None
    axes = figure.axes[0]
    assert axes.get_xlabel() == "p99_ttft_ms (ms, lower is better)"  # the SLO's key
    assert axes.get_ylabel() == "output_throughput (tok/s, higher is better)"
    shown = gids(axes, "")
    assert len(shown["pareto:baseline"].get_xdata()) == 4
    assert shown["pareto:baseline"].get_linewidth() > shown["pareto:eagle3"].get_linewidth()
    # eagle3 at 1 and 4, the baseline at 16 and 64: nothing else is faster and quicker at once
    front = shown["front"].get_offsets().tolist()
    assert front == [[300.0, 130.0], [450.0, 200.0], [800.0, 300.0], [1500.0, 350.0]]
    assert list(shown["front:line"].get_xdata()) == [300.0, 450.0, 800.0, 1500.0]
    assert len(shown["breaches"].get_offsets()) == 2
    assert list(shown["slo:limit"].get_xdata()) == [1000.0, 1000.0]  # vertical, at the limit
    texts = sorted(t.get_text() for t in axes.texts)
    assert texts.count("c=64") == 2 and len(texts) == 8  # each point's level beside it


def test_the_latency_without_an_slo_and_for_a_latency_metric() -> None:
    data = report(slo={})
    for entry in [data["baseline"], *data["results"]]:
        for e in entry["by_load"]:
            if e["figures"]:
                e["figures"]["median_ttft_ms"] = e["figures"]["p99_ttft_ms"] / 2
    assert keys_of(data) == ("output_throughput", "median_ttft_ms")
    figure = pareto_figure(data)
    assert figure is not None and "slo:limit" not in gids(figure.axes[0], "slo")
    assert keys_of(report(metric="p99_ttft_ms", lower_is_better=True, slo={})) == (
        "output_throughput", "p99_ttft_ms")
    no_latency = report(slo={})
    for entry in [no_latency["baseline"], *no_latency["results"]]:
        for e in entry["by_load"]:
            e["figures"].pop("p99_ttft_ms", None)
    assert keys_of(no_latency) == ("", "")
    assert [c.suffix for c in load_charts(no_latency)] == ["loads"]  # no Pareto chart


def test_nothing_without_loads_or_without_values() -> None:
    assert load_charts(report(loads=None)) == []
    empty = report()
    empty["baseline"]["by_load"] = levels([(None, None, None)] * 4)
    empty["results"] = [empty["results"][1]]
    assert load_charts(empty) == []
    assert metric_figure(empty) is None and pareto_figure(empty) is None


def crowded() -> dict[str, Any]:
    """A sweep's worth of configurations with long names: more than the chart draws."""
    results = [{"approach": f"eagle3-point-{i},speculative-num-steps={i},speculative-eagle-topk=8,"
                            f"speculative-num-draft-tokens={i * 4}",
                "verdict": "improved",
                "by_load": levels([(100.0 + i, 300.0 + i, "met"), (180.0 + i, 450.0, "met"),
                                   (290.0 + i, 850.0, "met"), (330.0 + i, 1400.0, "violated")])}
               for i in range(MAX_LINES + 3)]
    return report(results=results)


def test_every_text_stays_inside_and_the_legend_clear_of_the_plot() -> None:
    for data in (report(), crowded()):
        for figure in (metric_figure(data), pareto_figure(data)):
            assert figure is not None
            assert cut_texts(figure) == []
            canvas = FigureCanvasAgg(figure)
            canvas.draw()  # type: ignore[no-untyped-call]
            renderer = canvas.get_renderer()  # type: ignore[no-untyped-call]
            legend = figure.legends[0].get_window_extent(renderer)
            assert legend.y1 < figure.axes[0].get_tightbbox(renderer).y0  # below the x label
    figure = metric_figure(crowded())
    assert figure is not None
    assert len(gids(figure.axes[0], "load:")) == MAX_LINES + 1  # and the baseline
    title = " ".join(figure.axes[0].get_title(loc="left").split())
    assert "3 more configurations not drawn" in title


def test_a_batch_with_loads_uploads_both_charts() -> None:
    records = batch()
    data = analyze(records, metric=SLO, rules=load_rules(), remedies=load_remedies())
    files = summary_uploads(records, report=data, batch_id="b-1", plan=make_plan(),
                            redact=lambda t: t)
    names = [f.filename for f in files]
    assert names == ["b-1-chart.png", "b-1-loads.png", "b-1-load-pareto.png", "b-1-runs.jsonl"]
    assert all(f.content.startswith(PNG) for f in files[:3])
    assert files[1].title.startswith("output_throughput against max-concurrency")
    # the summary chart's row of a mixed result gives each level's %, in its own colour
    rows = {row["name"]: row for row in chart_rows(data, records)}
    assert rows["eagle3"]["note"] == "± mixed: c=1 +30.0%, c=4 +12.0%, c=16 -10.0%, c=64 -30.0%"
    assert COLOURS["mixed"] not in (COLOURS["improved"], COLOURS["regressed"])
    # through the report analyze builds: tuned's c=16 is the one level breaking the SLO
    figure = metric_figure(data)
    assert figure is not None
    breaches = gids(figure.axes[0], "breaches")["breaches"].get_offsets().tolist()
    assert breaches == [[16.0, 160.0]]
    plain = analyze([make_record("baseline", samples=[80.0, 81.0, 82.0]),
                     make_record("eagle3", samples=[90.0, 91.0, 92.0])], metric=SLO,
                    rules=load_rules(), remedies=load_remedies())
    assert plain["loads"] is None and load_charts(plain) == []


def stored(records: list[RunRecord]) -> None:
    report = analyze(records, metric=SLO, rules=load_rules(), remedies=load_remedies())
    with Store() as store:
        store.create_batch(batch_id="b-test", preset="eagle3", engine="local",
                           queue="default", requested_by="u", plan=make_plan())
        store.put_records([(i, r) for i, r in enumerate(records)])
        store.end("b-test", "done", report=report)


def test_show_chart_writes_the_load_charts_beside_it(tmp_path: Path) -> None:
    stored(batch())
    chart = tmp_path / "batch.png"
    result = specbench("show", "--chart", str(chart))
    assert result.returncode == 0, result.stderr
    written = [chart, tmp_path / "batch-loads.png", tmp_path / "batch-load-pareto.png"]
    assert all(path.read_bytes().startswith(PNG) for path in written)
    assert result.stderr.strip().splitlines() == [f"chart written to {p}" for p in written]
