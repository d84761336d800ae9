"""Two values on one metric compared: the relative change (positive: better) and which is better.

A leaf of the core (it imports nothing of it), so that presets, sweeps, verdicts and the digest
share one definition of "better" without importing one another.
"""

from __future__ import annotations


def change_pct(value: float, reference: float, *, lower_is_better: bool) -> float | None:
    """Relative change in percent, positive meaning better; None against a zero reference."""
    if reference == 0:
        return None
    delta = (value - reference) / reference * 100.0
    return -delta if lower_is_better else delta


def is_better(value: float, other: float, *, lower_is_better: bool) -> bool:
    """Whether `value` beats `other` on a metric (strictly: a tie is not better)."""
    return value < other if lower_is_better else value > other
