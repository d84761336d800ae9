"""The capacity chart of a batch with a capacity search (docs/contracts.md "Capacity under the
SLO"), drawn from its report alone: one row per configuration, the baseline on top, a bar to the
most load its server carried within the SLO in its capacity verdict's colour, a thin bar on to
the lowest load that broke it (the search's last bracket), the baseline's capacity a dashed line
across, and beside each bar its capacity, its % against the baseline's and the key that binds.

`capacity_figure` builds the matplotlib `Figure` (tests read its bars and texts);
`capacity_charts` renders it as `-capacity`, and is empty for a batch without a search.
"""

from __future__ import annotations

import io
import textwrap
from typing import Any

from jobs.charts.chart_file import ChartFile
from jobs.charts.summary import COLOURS, NOTE_BOX, chart_title, fit_notes
from jobs.core.capacity import Spec, pct, short

AXIS_UNITS = {"max-concurrency": "concurrent requests", "request-rate": "requests a second"}


def capacity_charts(report: dict[str, Any]) -> list[ChartFile]:
    """The capacity chart as a PNG; [] for a batch without a capacity search (or none found)."""
    figure = capacity_figure(report)
    if figure is None:
        return []
    out = io.BytesIO()
    figure.savefig(out, format="png", bbox_inches="tight")
    knob = report["capacity"]["knob"]
    return [ChartFile("capacity", out.getvalue(),
                      f"capacity under the SLO: the most {knob} each configuration carries, "
                      "against the baseline's, the binding key named")]


def rows_of(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The baseline, then each result: name, capacity, the load that broke above it, the
    verdict and the note beside its bar."""
    spec = Spec.of(report["capacity"])
    base = report["baseline"].get("capacity") or {}
    rows = [{"name": report["baseline"]["approach"], "verdict": "baseline",
             "value": base.get("value"), "above": base.get("above"),
             "note": _note(spec, base, baseline=True)}]
    for result in report.get("results", []):
        found = result.get("capacity") or {}
        verdict = str(found.get("verdict") or result["verdict"])
        rows.append({"name": result["approach"], "verdict": verdict,
                     "value": found.get("value"), "above": found.get("above"),
                     "note": _note(spec, found, baseline=False, result=result)})
    return rows


def _note(spec: Spec, found: dict[str, Any], *, baseline: bool,
          result: dict[str, Any] | None = None) -> str:
    value, binding = found.get("value"), found.get("binding")
    if result is not None and result["verdict"] in ("failed", "cancelled", "skipped") \
            and value is None:
        cause = result.get("cause")
        return f"✗ {result['verdict']}" + (f": {cause}" if cause else "")
    if value is None:
        return f"none: breaks the SLO at {short(spec, spec.start)}" + (
            f" ({binding} binds)" if binding else "")
    parts = [short(spec, value)]
    if not baseline and found.get("delta_pct") is not None:
        parts.append(pct(float(found["delta_pct"])))
    if not baseline and found.get("verdict") in ("unchanged", "inconclusive"):
        parts.append(str(found["verdict"]))
    parts.append(f"{binding} binds" if binding else f"holds up to {short(spec, spec.max)}")
    return " · ".join(parts)


def capacity_figure(report: dict[str, Any]) -> Any | None:
    """Horizontal bars, the baseline on top; None without a search or any capacity found."""
    if not report.get("capacity"):
        return None
    rows = rows_of(report)
    values = [float(r["value"]) for r in rows if r["value"] is not None]
    aboves = [float(r["above"]) for r in rows if r["above"] is not None]
    if not values:
        return None
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure  # no pyplot: no global state, thread-safe

    spec = Spec.of(report["capacity"])
    figure = Figure(figsize=(8.5, 1.9 + 0.4 * len(rows)), dpi=110)
    axes = figure.add_subplot()
    top = max(values + aboves)
    axes.set_xlim(0, top * 1.3)
    base = rows[0]["value"]
    if base is not None:
        axes.axvline(float(base), color=COLOURS["baseline"], lw=1, ls="--",
                     label="baseline capacity")
    for y, row in enumerate(reversed(rows)):
        colour = COLOURS.get(row["verdict"], COLOURS["inconclusive"])
        if row["value"] is None:
            axes.text(top * 0.013, y, row["note"], va="center", ha="left", fontsize=8,
                      color=colour, gid=f"note:{row['name']}", bbox=NOTE_BOX)
            continue
        value = float(row["value"])
        axes.barh([y], [value], height=0.5, color=colour, alpha=0.85, gid=f"bar:{row['name']}")
        end = value
        if row["above"] is not None:  # where the search saw it break
            end = float(row["above"])
            axes.barh([y], [end - value], left=[value], height=0.14, color=colour, alpha=0.35,
                      gid=f"bracket:{row['name']}")
        axes.annotate(row["note"], (end, y), xytext=(6, 0), textcoords="offset points",
                      va="center", ha="left", fontsize=8, color=colour,
                      gid=f"note:{row['name']}", bbox=NOTE_BOX)
    axes.set_yticks(range(len(rows)), [str(r["name"]) for r in reversed(rows)], fontsize=8)
    axes.set_ylim(-0.7, len(rows) - 0.3)
    limits = ", ".join(f"{k} ≤ {v:g}" for k, v in (report["capacity"].get("slo") or {}).items())
    axes.set_xlabel(f"{spec.knob} carried within the SLO ({AXIS_UNITS[spec.knob]}, higher is "
                    f"better); thin bar: up to the lowest load that broke it", fontsize=8)
    title = f"{chart_title(report)} · capacity under the SLO ({limits})"
    axes.set_title("\n".join(textwrap.wrap(title, 90)), fontsize=9, loc="left")
    axes.grid(axis="x", alpha=0.3)
    if base is not None:
        axes.legend(loc="lower right", fontsize=7, frameon=True)
    figure.tight_layout()
    fit_notes(figure, axes)
    return figure
