"""The digest's wins and verdict counts (`jobs.core.digest`): an experiment's improvements, and
its results counted by verdict (`verdict_counts`); with load levels
(docs/contracts.md "Load levels and service-level objectives") its mixed results too, as what they
are: a win up to (or from) the crossover, never a plain win nor a plain regression.

A win is the result's own value and delta; a mixed result's (and an improved result's with
levels) is its largest improvement at a level whose SLO is met, with that `load`, and a mixed
one's `crossover` text ("improved up to max-concurrency 4, regressed from 16").
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from jobs.core.digest._digest_memory import sweep_points
from jobs.core.digest._experiments import Experiment
from jobs.core.units import unit_of

ORDER = ("improved", "mixed", "regressed", "unchanged", "inconclusive", "failed", "cancelled",
         "skipped")
"""The order verdicts are counted in (the summaries' headline order)."""
SETTLED = ("improved", "unchanged", "regressed", "mixed")
"""Verdicts that answer a retry (or an open inconclusive): every level was measured and judged;
a mixed result is as conclusive as an improved one, level by level."""


def wins_of(exp: Experiment) -> list[dict[str, Any]]:
    """The experiment's improvements: its own approaches' (never a sweep's point on its own
    draws), its mixed results', and a sweep's winner confirmed by its confirmation, with the
    confirmed margin."""
    row, points = exp.row, sweep_points(exp.row)
    metric = row.plan.metric
    found = [_win(res) for res in (row.report or {}).get("results") or []
             if res.get("verdict") in ("improved", "mixed") and res.get("approach") not in points]
    confirmation = ((row.report or {}).get("sweep") or {}).get("confirmation") or {}
    if confirmation.get("verdict") == "improved":
        found.append({"approach": confirmation.get("approach"), "verdict": "improved",
                      "value": confirmation.get("value"),
                      "delta_pct": confirmation.get("delta_pct"),
                      "confirmed_in": confirmation.get("batch"), "load": None,
                      "crossover": None})
    return [{"batch": row.id, "preset": row.preset, **win, "metric": metric,
             "unit": unit_of(metric)} for win in found]


def _win(res: Mapping[str, Any]) -> dict[str, Any]:
    best = _best_level(res)
    crossover = res.get("crossover") or {}
    return {"approach": res["approach"], "verdict": res.get("verdict"),
            "value": res.get("value") if best is None else best.get("value"),
            "delta_pct": res.get("delta_pct") if best is None else best.get("delta_pct"),
            "confirmed_in": None, "load": None if best is None else best.get("load"),
            "crossover": crossover.get("text")}


def _best_level(res: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The result's largest improvement at a level that met its SLO (None without levels)."""
    levels = [e for e in res.get("by_load") or []
              if e.get("verdict") == "improved" and e.get("slo") != "violated"
              and e.get("delta_pct") is not None]
    return max(levels, key=lambda e: float(e["delta_pct"]), default=None)


def verdict_counts(exps: Sequence[Experiment]) -> dict[str, int]:
    """The experiments' results by verdict, in ORDER (a sweep's points never count: its
    confirmation's verdict does); a verdict no result has is left out."""
    counts: Counter[str] = Counter()
    for exp in exps:
        points = sweep_points(exp.row)
        counts.update(str(res.get("verdict")) for res in (exp.row.report or {}).get("results")
                      or [] if res.get("approach") not in points)
        confirmation = ((exp.row.report or {}).get("sweep") or {}).get("confirmation") or {}
        if exp.confirmation is not None:  # its confirmation batch, folded into the sweep's
            counts.update(str(res.get("verdict")) for res
                          in (exp.confirmation.report or {}).get("results") or [])
        elif confirmation.get("verdict"):
            counts[str(confirmation["verdict"])] += 1
    return {v: counts[v] for v in (*ORDER, *sorted(set(counts) - set(ORDER))) if counts[v]}
