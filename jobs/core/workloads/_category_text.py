"""A workload in words (docs/contracts.md "Workloads that represent the traffic"): what every
surface says of a report's `workload`, of a result's `by_category` and of the baseline's.

A category's cell is its name, its verdict and delta, and its accept length where the run
speculated: `summarization regressed -9.3% (accept 1.4)`; a row is the cells joined with " · ".
The summaries (templates via `jobs.core.messages`) and the progress lines share these words.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from jobs.core.levels import level_text
from jobs.core.units import with_unit
from jobs.core.workloads._category_verdicts import names_text

SEPARATOR = " · "
MEASURED = ("improved", "regressed", "unchanged", "inconclusive")
MARKS = {"improved": "▲", "regressed": "▼", "unchanged": "=", "inconclusive": "?",
         "failed": "✗", "cancelled": "■", "skipped": "·"}


def workload_line(report: Mapping[str, Any]) -> str:
    """The summary's line under its header ('' without a workload): 'Workload: conversation,
    summarization and code (4 prompts each) from small.jsonl'."""
    found = report.get("workload")
    if not isinstance(found, Mapping):
        return ""
    categories = [c for c in found.get("categories") or [] if isinstance(c, Mapping)]
    names = [str(c.get("category")) for c in categories]
    if not names:
        return ""
    counts = {c.get("prompts") for c in categories}
    each = ""
    if len(counts) == 1 and isinstance(next(iter(counts)), int):
        each = f" ({next(iter(counts))} prompts each)"
    elif all(isinstance(c.get("prompts"), int) for c in categories):
        each = " (" + ", ".join(f"{c['prompts']}" for c in categories) + " prompts)"
    source = str(found.get("path") or "").rsplit("/", 1)[-1]
    return (f"Workload: {names_text(names)}{each}" + (f" from {source}" if source else "")
            + SEPARATOR + "each value is the categories' mean")


def category_cell(entry: Mapping[str, Any], *, compact: bool = False) -> str:
    """One category of a result: 'code improved +8.1% (accept 3.1)', 'rag failed
    (out-of-memory)'; `compact` marks the verdict instead of naming it ('code ▲ +8.1%')."""
    verdict = str(entry.get("verdict"))
    word = MARKS.get(verdict, "?") if compact else verdict
    shown = f"{entry.get('category')} {word}"
    if verdict == "failed":
        return shown + ("" if compact else f" ({entry.get('cause') or 'crash'})")
    delta = entry.get("delta_pct")
    if verdict in MEASURED and isinstance(delta, int | float):
        shown += f" {delta:+.1f}%"
    accept = entry.get("accept_length")
    if not compact and isinstance(accept, int | float):
        shown += f" (accept {accept:.2f})"
    return shown


def baseline_cell(entry: Mapping[str, Any], metric: str) -> str:
    """One category of the baseline: 'conversation 82 tok/s', 'rag failed'."""
    status, value = entry.get("status"), entry.get("value")
    if status != "ok" or value is None:
        return f"{entry.get('category')} {'not reached' if status == 'skipped' else status}"
    shown = f"{value:.4g}" if abs(value) < 10000 else f"{value:.0f}"
    return f"{entry.get('category')} {with_unit(shown, metric)}"


def category_rows(result: Mapping[str, Any]) -> list[str]:
    """A result's categories as text lines (none without a workload)."""
    return level_text.wrap([category_cell(e) for e in result.get("by_category") or []])


def baseline_rows(report: Mapping[str, Any]) -> list[str]:
    """The baseline's categories as text lines: each category's value."""
    entries = (report.get("baseline") or {}).get("by_category") or []
    return level_text.wrap([baseline_cell(e, str(report.get("metric"))) for e in entries])


def category_summary(result: Mapping[str, Any]) -> str:
    """What a result with categories says in the Why column: where it wins and loses, without
    the figures its rows below show ("improved on conversation and code, regressed on
    summarization"), then what its why adds after them."""
    why = str(result.get("why") or "")
    head, _, rest = why.partition(": ")
    if not result.get("by_category") or not rest:
        return why
    added = rest.split("; ", 1)[1] if "; " in rest else ""
    return head + (f"; {added}" if added else "")


def compact_row(entries: Sequence[Mapping[str, Any]] | None) -> str:
    """The progress line's categories: 'conversation ▲ +12.0% · code ▼ -9.3%'."""
    return SEPARATOR.join(category_cell(e, compact=True) for e in entries or [])
