"""`analyze RUNS.jsonl`: run records re-analysed into a report (no GPU, broker or Slack).

The metric settings (and the SLO, judged level by level like the batch's own report) default to
the preset the records name, when the config has it. A broken
file is one RecordError naming its line (`jobs.core.records`); a report is plain JSON: no NaN
or infinity reaches it.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jobs.core.advice import analyze as analyze_records
from jobs.core.advice import load_remedies
from jobs.core.capacity import CAPACITY, capacity_of
from jobs.core.engine_info import describe, engine_of
from jobs.core.limits import MAX_MIN_EFFECT_PCT
from jobs.core.plans import load_preset, preset_names
from jobs.core.records import RunRecord, decode_lines, parse_lines
from jobs.core.rules import load_rules
from jobs.core.verdicts import Metric
from jobs.core.workloads import by_category
from jobs.engines import flag_facts
from jobs.errors import PresetError, RecordError, UserError, did_you_mean


@dataclass(frozen=True)
class AnalyzeArgs:
    runs: Path
    metric: str | None = None
    min_effect_pct: float | None = None
    lower_is_better: bool | None = None


def analyze(args: AnalyzeArgs) -> dict[str, Any]:
    try:
        data = args.runs.read_bytes()
    except OSError as exc:
        raise RecordError(f"{args.runs}: cannot read ({exc.strerror})") from None
    source = str(args.runs)
    records = list(parse_lines(decode_lines(data, source=source), source=source))
    if not records:
        raise RecordError(f"{args.runs}: no run records")
    default = metric_defaults(records[0].preset)
    if args.min_effect_pct is not None and not 0 <= args.min_effect_pct <= MAX_MIN_EFFECT_PCT:
        raise UserError(f"--min-effect must be a percentage from 0 to {MAX_MIN_EFFECT_PCT:g}, "
                        f"got {args.min_effect_pct:g}")
    searched = [found for r in records if (found := capacity_of(r)) is not None]
    if args.metric is not None and not any(args.metric in r.metrics for r in records) \
            and not (args.metric == CAPACITY and searched):
        measured = sorted({k for r in records for k in r.metrics if k != "accept_length"}
                          | ({CAPACITY} if searched else set()))
        raise UserError(f"no record of {source} measures {args.metric!r}"
                        f"{did_you_mean(args.metric, measured)}; they measure: "
                        f"{', '.join(measured) or 'nothing'}")
    metric = Metric(
        name=args.metric or default.name,
        min_effect_pct=default.min_effect_pct if args.min_effect_pct is None
        else args.min_effect_pct,
        lower_is_better=default.lower_is_better if args.lower_is_better is None else True,
        # docs/contracts.md "Capacity under the SLO": a search's records keep the limits it used
        slo=default.slo or tuple(next((f.slo for f in searched if f.slo), {}).items()),
        requests=_requests(records) or default.requests,
    )
    engine = engine_of(records[0].fingerprint, named=records[0].engine)
    report = analyze_records(records, metric=metric, rules=load_rules(), remedies=load_remedies(),
                             flags=flag_facts(engine), engine=engine)
    if (where := non_finite(report)) is not None:
        raise RecordError(f"{source}: the records give a non-finite {where}")
    return report


def _requests(records: list[RunRecord]) -> int | None:
    """The fewest requests a repetition sent, where the records say (their `repetitions`):
    what a tail percentile rests on (docs/contracts.md "Noise, measured")."""
    sent = [rep["sent"] for r in records for level in [r.extra, *r.by_load, *by_category(r)]
            for rep in (level.get("repetitions") or []) if isinstance(rep, dict)
            and isinstance(rep.get("sent"), int) and not isinstance(rep.get("sent"), bool)]
    return min(sent) if sent else None


def non_finite(data: Any, path: str = "report") -> str | None:
    """The path of the first NaN or infinity in `data`, or None (JSON has neither)."""
    if isinstance(data, float) and not math.isfinite(data):
        return path
    if isinstance(data, dict):
        items: Any = data.items()
    elif isinstance(data, list | tuple):
        items = enumerate(data)
    else:
        return None
    for key, value in items:
        if (found := non_finite(value, f"{path}.{key}")) is not None:
            return found
    return None


def metric_defaults(preset_name: str) -> Metric:
    """The metric settings of the preset the records name, when the config has it."""
    if preset_name not in preset_names():
        return Metric()
    try:
        preset = load_preset(preset_name)
    except PresetError as exc:
        print(f"specbench analyze: warning: {exc}; using the default metric", file=sys.stderr)
        return Metric()
    return Metric(
        name=preset.metric, min_effect_pct=preset.min_effect_pct,
        lower_is_better=preset.lower_is_better,
        slo=tuple((key, float(limit)) for key, limit in (preset.slo or {}).items()),
        requests=describe(preset.engine).requests_of(preset.bench),
    )
