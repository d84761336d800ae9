"""Progress in words: what an `approach.phase` or `approach.finished` event says, with units.

The command line's progress line and the chat thread's progress message say the same thing
from the same event: `warm-up 459 tok/s (not a sample)`, `rep 1/3: 879 tok/s`,
`improved 951 tok/s (+9.1%)`. Units come from `jobs.core.units`. With load levels (DESIGN23
"Phases") a phase names its level: `level 2/4 max-concurrency 4 · rep 1/3`, and a finished
approach its verdict per level: `mixed 130 tok/s (+30.0%) at c=1 · c=1 ▲ +30.0% · c=16 ▼ -10.0%`.
With a workload a phase names its category (`category 2/3 code`, `code · rep 1/3`) and a
finished approach its verdict per category (`mixed ... · conversation ▲ +12.0% · code ▼ -9.3%`).
"""

from __future__ import annotations

from typing import Any

from jobs.core.capacity import KNOBS, Spec, short
from jobs.core.events import Event
from jobs.core.levels import at_lowest, compact_row
from jobs.core.plans import load_label
from jobs.core.units import plural, with_unit
from jobs.core.workloads import category_text

NOT_A_SAMPLE = "(not a sample)"


def value_text(value: Any, metric: str | None) -> str:
    """A measured value, four significant digits, with its metric's unit: '879.3 tok/s'."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return "no value"
    return with_unit(f"{value:.4g}", metric or "")


def level_text(event: Event) -> str:
    """A `level` phase: 'level 2/4 max-concurrency 4', or a capacity search's 'capacity level 3
    max-concurrency 4' (its levels are chosen as it goes: docs/contracts.md "Capacity under the
    SLO"); '' for any other event."""
    if event.get("phase") != "level":
        return ""
    load = load_label(event.get("load") or {})
    if event.get("search") == "capacity":
        return f"capacity level {event.get('level')} {load}"
    return f"level {event.get('level')}/{event.get('levels')} {load}"


def phase_text(event: Event, level: Event | None = None) -> str:
    """An `approach.phase` event as a few words (without the approach's name); a phase of a
    load level says which, from `level` (the approach's latest `level` phase) when it is that
    level's: 'level 2/4 max-concurrency 4 · rep 1/3'."""
    if event.get("phase") == "level":
        return level_text(event)
    if event.get("phase") == "category":
        return (f"category {event.get('position')}/{event.get('categories')} "
                f"{event.get('category')}")
    text = _phase_words(event)
    if event.get("category"):
        return f"{event['category']} · {text}"
    load = event.get("load")
    if not load:
        return text
    where = (level_text(level) if level is not None and level.get("load") == load
             else load_label(load))
    return f"{where} · {text}"


def _phase_words(event: Event) -> str:
    """The phase's words; with `starts: N` (docs/contracts.md "Noise, measured") each names its
    server start first: 'start 2/3 · rep 1/1'."""
    start = f"start {event['start']}/{event['starts']} · " if event.get("starts") else ""
    phase = str(event.get("phase", ""))
    if event.get("error"):
        return f"{start}{phase} failed: {event['error']}"
    if phase == "warmup":
        return f"{start}warm-up {NOT_A_SAMPLE}"
    if phase == "repetition":
        return f"{start}rep {event.get('rep')}/{event.get('reps')}"
    if phase == "result":
        return start + result_text(event)
    return start + phase


def result_text(event: Event) -> str:
    """A finished bench pass: the warm-up's value (never a sample) or a repetition's."""
    metric = event.get("metric")
    if event.get("warmup"):
        return f"warm-up {value_text(event.get('value'), metric)} {NOT_A_SAMPLE}"
    where = f"rep {event.get('rep')}/{event.get('reps')}"
    if event.get("why"):
        return f"{where}: no sample ({event['why']})"
    return f"{where}: {value_text(event.get('value'), metric)}"


def outcome_text(event: Event) -> str:
    """An `approach.finished` event: verdict (or status), value with its unit, change, cause."""
    verdict = event.get("verdict") or event.get("status") or "done"
    parts = [str(verdict)]
    if event.get("value") is not None:
        parts.append(value_text(event["value"], event.get("metric")))
    if event.get("delta_pct") is not None:
        parts.append(f"({event['delta_pct']:+.1f}%)")
    if event.get("cause"):
        parts.append(f"[{event['cause']}]")
    text = " ".join(parts) + at_lowest(event) + _capacity(event)
    if event.get("by_category"):
        return f"{text} · {category_text.compact_row(event['by_category'])}"
    levels = event.get("by_load")
    if not levels:
        return text
    return f"{text} · {compact_row(levels)}"


def _capacity(event: Event) -> str:
    """' · capacity c=24 (p99_ttft_ms binds)' for a run that searched its capacity."""
    found = event.get("capacity")
    if not isinstance(found, dict) or found.get("knob") not in KNOBS:
        return ""
    spec = Spec(str(found["knob"]), 1.0, 1.0)
    binds = f" ({found['binding']} binds)" if found.get("binding") else ""
    return f" · capacity {short(spec, found.get('value'))}{binds}"


def started_text(event: Event) -> str:
    """A `batch.started` event's repetitions: '3 reps each after a warm-up', '1 rep each'."""
    reps: Any = event.get("reps")
    each = f"{plural(reps, 'rep')} each"
    if event.get("warmup") is None:  # an event from a worker older than the warm-up
        return each
    return each + (" after a warm-up" if event["warmup"] else " (no warm-up)")
