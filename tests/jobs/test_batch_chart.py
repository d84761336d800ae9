"""The batch chart, read from the figure's own objects: its title names preset, batch and host,
its axis the metric's unit and starts at 0, every row has its verdict's colour and a note (the %
delta, the failure cause, cancelled or never started), the baseline's median and range are in
the legend."""

from __future__ import annotations

from typing import Any

from matplotlib.colors import to_hex

from jobs.charts.summary import COLOURS, chart_title, summary_figure, to_chart_png
from jobs.core.records import RunRecord
from tests.conftest import make_record

GPU = {"gpu": "NVIDIA RTX PRO 6000 Blackwell Server Edition", "gpu_count": 8,
       "compute_capability": "12.0", "interconnect": "PCIe"}
CPU = {"gpu": "none (CPU: AMD EPYC 9354)", "gpu_count": 0, "compute_capability": None,
       "cpu": "AMD EPYC 9354", "cpu_cores": 16, "torch": "2.13.0"}


def result(approach: str, verdict: str, value: float | None = None, delta: float | None = None,
           cause: str | None = None) -> dict[str, Any]:
    return {"approach": approach, "verdict": verdict, "value": value, "delta_pct": delta,
            "cause": cause, "why": "", "vs_parent": None, "break_even": None}


def batch(fingerprint: dict[str, Any] | None = None) -> tuple[dict[str, Any], list[RunRecord]]:
    """A report of every kind of row, with the records it was judged from."""
    records = [
        make_record("baseline", samples=[80.0, 82.0, 83.0]),
        make_record("faster", samples=[89.0, 90.0, 91.0]),
        make_record("slower", samples=[50.0, 54.0, 55.0]),
        make_record("same", samples=[81.0, 82.5, 83.0]),
        make_record("noisy", samples=[70.0, 85.0, 95.0]),
        make_record("oom", samples=[], status="failed"),
        make_record("stopped", samples=[], status="cancelled"),
        make_record("later", samples=[], status="skipped"),
    ]
    report = {
        "batch": "b-7f3a", "preset": "eagle3", "metric": "output_throughput",
        "lower_is_better": False, "fingerprint": fingerprint or GPU,
        "baseline": {"approach": "baseline", "value": 82.0, "status": "ok"},
        "results": [
            result("faster", "improved", 90.0, 9.8), result("slower", "regressed", 54.0, -34.1),
            result("same", "unchanged", 82.5, 0.6), result("noisy", "inconclusive", 85.0, 3.7),
            result("oom", "failed", cause="out-of-memory"), result("stopped", "cancelled"),
            result("later", "skipped"),
        ],
    }
    return report, records


def texts(figure: Any) -> dict[str, tuple[str, str]]:
    """Each row's note: row name -> (text, colour)."""
    return {t.get_gid().split(":", 1)[1]: (t.get_text(), to_hex(t.get_color()))
            for t in figure.axes[0].texts if (t.get_gid() or "").startswith("note:")}


def test_the_title_names_preset_batch_and_host() -> None:
    figure = summary_figure(*batch())
    title = figure.axes[0].get_title(loc="left")
    assert title == ("eagle3 · batch b-7f3a · 8x NVIDIA RTX PRO 6000 Blackwell Server Edition "
                     "(cc 12.0), PCIe")


def test_a_cpu_host_is_called_cpu_never_none() -> None:
    report, _ = batch(CPU)
    title = chart_title(report)
    assert title.endswith("· CPU (AMD EPYC 9354, 16 cores, torch 2.13.0)")
    assert "none" not in title and "0x" not in title
    assert chart_title({**report, "fingerprint": {"gpu": "none", "gpu_count": 0}}).endswith(
        "· CPU")


def test_the_value_axis_has_the_unit_and_starts_at_zero() -> None:
    axes = summary_figure(*batch()).axes[0]
    assert axes.get_xlabel().startswith("output_throughput (tok/s, higher is better)")
    assert axes.get_xlim()[0] == 0
    assert axes.get_xlim()[1] > 95  # the largest sample fits, with room for its note
    latency = {**batch()[0], "metric": "median_itl_ms", "lower_is_better": True}
    records = [make_record(r.approach, samples=r.samples("output_throughput"),
                           status=r.status, metric="median_itl_ms") for r in batch()[1]]
    assert summary_figure(latency, records).axes[0].get_xlabel().startswith(
        "median_itl_ms (ms, lower is better)")


def test_each_row_has_its_verdicts_colour() -> None:
    figure = summary_figure(*batch())
    by_gid = {c.get_gid(): c for c in figure.axes[0].collections if c.get_gid()}
    for name, verdict in (("baseline", "baseline"), ("faster", "improved"),
                          ("slower", "regressed"), ("same", "unchanged"),
                          ("noisy", "inconclusive")):
        colours = {to_hex(c) for c in by_gid[f"samples:{name}"].get_facecolors()}
        assert colours == {COLOURS[verdict]}, name
    assert len(set(COLOURS.values())) == len(COLOURS)  # no two verdicts look alike


def test_each_row_says_its_delta_or_why_it_has_none() -> None:
    notes = texts(summary_figure(*batch()))
    assert notes["faster"] == ("▲ +9.8%", COLOURS["improved"])
    assert notes["slower"] == ("▼ -34.1%", COLOURS["regressed"])
    assert notes["same"] == ("= +0.6%", COLOURS["unchanged"])
    assert notes["noisy"] == ("? +3.7% inconclusive", COLOURS["inconclusive"])
    assert notes["oom"] == ("✗ failed: out-of-memory", COLOURS["failed"])
    assert notes["stopped"] == ("■ cancelled", COLOURS["cancelled"])
    assert notes["later"] == ("· skipped (never started)", COLOURS["skipped"])
    assert notes["baseline"] == ("82 tok/s", COLOURS["baseline"])


def test_rows_in_report_order_with_the_baseline_on_top() -> None:
    axes = summary_figure(*batch()).axes[0]
    labels = [t.get_text() for t in axes.get_yticklabels()]
    assert labels[::-1] == ["baseline", "faster", "slower", "same", "noisy", "oom", "stopped",
                            "later"]


def test_the_legend_has_the_baseline_and_the_verdicts() -> None:
    legend = summary_figure(*batch()).axes[0].get_legend()
    labels = [t.get_text() for t in legend.get_texts()]
    assert labels[:2] == ["baseline range (min–max)", "baseline median"]
    assert labels[2:] == ["improved", "regressed", "unchanged", "inconclusive", "failed",
                          "cancelled", "skipped"]


def test_nothing_measured_is_no_chart() -> None:
    report, records = batch()
    empty = [make_record(r.approach, samples=[], status="failed") for r in records]
    assert summary_figure(report, empty) is None and to_chart_png(report, empty) is None
    png = to_chart_png(report, records)
    assert png is not None and png.startswith(b"\x89PNG")


def test_a_failed_baseline_still_draws_the_measured_rows() -> None:
    report, records = batch()
    records[0] = make_record("baseline", samples=[], status="failed")
    report = {**report, "baseline": {"approach": "baseline", "value": None, "status": "failed"}}
    figure = summary_figure(report, records)
    assert texts(figure)["baseline"][0] == "✗ baseline failed: nothing to compare"
    labels = [t.get_text() for t in figure.axes[0].get_legend().get_texts()]
    assert "baseline median" not in labels
