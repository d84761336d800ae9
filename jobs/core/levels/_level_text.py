"""Load levels in words (docs/contracts.md "Load levels and service-level objectives"): what every
surface says of a report's `loads` and `slo`, of a result's `by_load` and of the baseline's.

A level's cell is its short load, its verdict and delta, and what broke the SLO there:
`c=16 regressed +60.0% (p99_ttft_ms 1420 ms > 1000 ms)`; a row is the cells joined with " · ".
The summaries (templates via `jobs.core.messages`), `compare` and the progress lines share
these words, so the same level reads the same wherever a person looks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from jobs.core.levels._levels import breach_text, loads_text
from jobs.core.plans import load_label
from jobs.core.units import with_unit

SEPARATOR = " · "
ROW_WIDTH = 100  # a text line of cells wraps before this many characters
MARKS = {"improved": "▲", "regressed": "▼", "mixed": "±", "unchanged": "=", "inconclusive": "?",
         "failed": "✗", "cancelled": "■", "skipped": "·"}
"""Each verdict's mark (the summaries', the progress message's): `mixed` is ±."""
MEASURED = ("improved", "regressed", "unchanged", "inconclusive")
WORDS = {"skipped": "not reached"}  # a level never run, in words


def number(value: float | None) -> str:
    """Four significant digits, as the summaries show a value ('–' without one)."""
    if value is None:
        return "–"
    return f"{value:.4g}" if abs(value) < 10000 else f"{value:.0f}"


def slo_text(slo: Mapping[str, float] | None) -> str:
    """'p99_ttft_ms ≤ 1000 ms, median_tpot_ms ≤ 60 ms' ('' without an SLO)."""
    return ", ".join(f"{key} ≤ {with_unit(f'{limit:g}', key)}"
                     for key, limit in (slo or {}).items())


def loads_line(report: Mapping[str, Any]) -> str:
    """The summary's line under its header: the levels and the SLO ('' for a batch without
    either): 'Loads: max-concurrency 1, 4, 16 and 64 · SLO: p99_ttft_ms ≤ 1000 ms'."""
    loads, slo = report.get("loads"), report.get("slo") or {}
    parts = []
    if loads:
        parts.append("Loads: " + loads_text([{loads["knob"]: v} for v in loads["levels"]]))
    if slo:
        unmeasured = report.get("slo_measured") is False
        caveats = report.get("slo_caveats") or []
        parts.append("SLO: " + slo_text(slo) + (" (not measured: no run reported these keys)"
                                                if unmeasured else "")
                     + (f" ({'; '.join(caveats)})" if caveats and not unmeasured else ""))
    elif loads:
        parts.append("no SLO")
    return SEPARATOR.join(parts)


def broken(figures: Mapping[str, float] | None, slo: Mapping[str, float] | None) -> list[str]:
    """The SLO limits a level's figures break: ['p99_ttft_ms 1420 ms > 1000 ms']."""
    figures = figures or {}
    return [breach_text(key, figures[key], limit) for key, limit in (slo or {}).items()
            if key in figures and figures[key] > limit]


def level_cell(entry: Mapping[str, Any], slo: Mapping[str, float] | None = None, *,
               compact: bool = False) -> str:
    """One level of a result: 'c=1 improved +30.0%', 'c=16 regressed +60.0% (p99_ttft_ms 1420
    ms > 1000 ms)', 'c=64 failed (out-of-memory)', 'c=64 not reached'; `compact` marks the
    verdict instead of naming it ('c=1 ▲ +30.0%') and leaves the SLO's figures out."""
    verdict, delta = str(entry.get("verdict")), entry.get("delta_pct")
    where = load_label(entry.get("load") or {}, short=True)
    if "verdict" not in entry:  # the baseline's level: its value
        return baseline_cell(entry, "", slo) if not compact else (
            f"{where} {'✗' if entry.get('value') is None else number(entry['value'])}"
            + (" ✗SLO" if entry.get("slo") == "violated" else ""))
    word = MARKS.get(verdict, "?") if compact else verdict
    if verdict == "skipped":
        return f"{where} {'·' if compact else 'not reached'}"
    if verdict == "failed":
        return f"{where} {word}" + ("" if compact else f" ({entry.get('cause') or 'crash'})")
    shown = f"{where} {word}"
    if verdict in MEASURED and delta is not None:
        shown += f" {delta:+.1f}%"
    if compact:
        return shown
    mine = broken(entry.get("figures"), slo)
    if entry.get("slo") == "violated" and mine and verdict != "improved":
        shown += f" ({'; '.join(mine)})"
    elif verdict == "improved" and entry.get("slo") == "met" and _baseline_broke(entry):
        shown += " (the baseline breaks the SLO)"
    elif verdict == "inconclusive" and "both break" in str(entry.get("why")):
        shown += " (both break the SLO)"
    return shown


def _baseline_broke(entry: Mapping[str, Any]) -> bool:
    return str(entry.get("why", "")).startswith("the baseline's ")


def baseline_cell(entry: Mapping[str, Any], metric: str,
                  slo: Mapping[str, float] | None = None) -> str:
    """One level of the baseline: 'c=1 100 tok/s, SLO met', 'c=16 100 tok/s, SLO broken
    (p99_ttft_ms 1420 ms > 1000 ms)', 'c=64 failed', 'c=64 not reached'."""
    where = load_label(entry.get("load") or {}, short=True)
    status = entry.get("status")
    if status == "skipped":
        return f"{where} not reached"
    if status in ("failed", "cancelled", "timeout") or entry.get("value") is None:
        return f"{where} {status if status != 'ok' else 'no value'}"
    shown = f"{where} {with_unit(number(entry['value']), metric)}"
    if entry.get("slo") == "met":
        shown += ", SLO met"
    elif entry.get("slo") == "violated":
        shown += f", SLO broken ({'; '.join(broken(entry.get('figures'), slo))})"
    return shown


def wrap(cells: Sequence[str], width: int = ROW_WIDTH) -> list[str]:
    """Cells joined with ' · ' into lines under `width` characters (a cell is never split)."""
    lines: list[str] = []
    for cell in cells:
        if lines and len(lines[-1]) + len(SEPARATOR) + len(cell) <= width:
            lines[-1] += SEPARATOR + cell
        else:
            lines.append(cell)
    return lines


def level_rows(result: Mapping[str, Any], report: Mapping[str, Any]) -> list[str]:
    """A result's levels as text lines (none without levels, or when every level says the same,
    as a failure at every level does: the result's own why says it)."""
    entries = result.get("by_load") or []
    if not entries or len({(e.get("verdict"), e.get("why")) for e in entries}) == 1:
        return []
    return wrap([level_cell(e, report.get("slo")) for e in entries])


def baseline_rows(report: Mapping[str, Any]) -> list[str]:
    """The baseline's levels as text lines: each level's value and SLO ('SLO met at every
    level' once, when it is)."""
    entries = (report.get("baseline") or {}).get("by_load") or []
    metric, slo = str(report.get("metric")), report.get("slo")
    met = [e for e in entries if e.get("slo") == "met"]
    cells = [baseline_cell({**e, "slo": None} if e in met else e, metric, slo) for e in entries]
    others = [e["load"] for e in entries if e not in met]
    if met and not others:
        cells.append("SLO met at every level")
    elif len(met) > len(others):
        cells.append(f"SLO met at every level but {loads_text(others)}")
    elif met:
        cells.append(f"SLO met at {loads_text([e['load'] for e in met])}")
    return wrap(cells)


def level_summary(result: Mapping[str, Any]) -> str:
    """What a result with levels says in the Why column: a mixed result's crossover, else its
    verdicts grouped by level ('improved at max-concurrency 1 and 4; unchanged at 16 and 64'),
    or its one why when every level says the same."""
    entries = result.get("by_load") or []
    crossover = result.get("crossover")
    if crossover:
        return str(crossover["text"])
    if len({e.get("why") for e in entries}) == 1:
        return str(result.get("why", ""))
    kinds = list(dict.fromkeys(str(e.get("verdict")) for e in entries))
    if len(kinds) == 1:
        return f"{kinds[0]} at every level"
    return "; ".join(  # the knob named once, with the first group
        f"{WORDS.get(kind, kind)} at "
        f"{loads_text([e['load'] for e in entries if e.get('verdict') == kind], knob=i == 0)}"
        for i, kind in enumerate(kinds))


def at_lowest(result: Mapping[str, Any]) -> str:
    """' at c=1' after a leveled result's value (the lowest level's, docs/contracts.md), else ''."""
    entries = result.get("by_load") or []
    if not entries or result.get("value") is None:
        return ""
    return f" at {load_label(entries[0].get('load') or {}, short=True)}"


def load_words(load: Mapping[str, Any] | None, *, short: bool = False) -> str:
    """' at max-concurrency 4' (or ' at c=4'), '' without a load."""
    return f" at {load_label(load, short=short)}" if load else ""


def compact_row(entries: Sequence[Mapping[str, Any]] | None) -> str:
    """The progress line's levels: 'c=1 ▲ +30.0% · c=4 ▲ +12.0% · c=16 ▼ -10.0%'."""
    return SEPARATOR.join(level_cell(e, compact=True) for e in entries or [])

