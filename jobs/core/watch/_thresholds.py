"""The watch's stated thresholds (docs/contracts.md "Regression watch", "The threshold").

A candidate is a new segment whose mean lies beyond `t_crit` · s · √(1/age + 1/n₀) of the old
segment's mean (s: the old segment's standard deviation, n₀ its points, age the new segment's):
`t_crit` is Student's t quantile at two-sided α = `ALPHA`, so that noise alone makes a candidate
with probability α per test. The confirmation must then lie at least `k_conf` · s past the old
mean on the same side. Both are measured against the same old mean and s, so the two tests are
correlated (a small s by chance makes both easier): `k_conf` is calibrated jointly, the old
mean's error and s integrated out (Gauss-Hermite × Gauss-Legendre quadrature), so that under
noise alone P(candidate and confirmation) = α/2 · `BETA` per side, for every n₀, age and degrees
of freedom.

numpy and scipy are the `watch` extra's (with ruptures); imported when a threshold is first
asked for.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

ALPHA = 0.001
"""The candidate's two-sided false-alarm probability per test."""
BETA = 0.05
"""P(a noise-only confirmation confirms | a noise-only candidate)."""


@lru_cache(maxsize=1)
def _nodes() -> tuple[Any, Any, Any, Any]:
    import numpy as np

    hermite_x, hermite_w = np.polynomial.hermite_e.hermegauss(32)  # the old mean's error
    legendre_x, legendre_w = np.polynomial.legendre.leggauss(64)  # the quantile of s / sigma
    return hermite_x, hermite_w / hermite_w.sum(), (legendre_x + 1) / 2, legendre_w / 2


@lru_cache(maxsize=4096)
def thresholds(*, old_n: int, age: int, df: int) -> tuple[float, float]:
    """(t_crit, k_conf) for an old segment of `old_n` points (its s with `df` degrees of
    freedom: `old_n` − 1, more where earlier segments' noise is pooled) and a new one of `age`."""
    import numpy as np
    from scipy import optimize, special, stats

    hermite_x, hermite_w, quantiles, legendre_w = _nodes()
    t_crit = float(stats.t.ppf(1.0 - ALPHA / 2.0, df))
    ratio = np.sqrt(stats.chi2.ppf(quantiles, df) / df)[:, None]  # s / sigma
    error = (hermite_x / math.sqrt(old_n))[None, :]  # (old mean - mu) / sigma
    spread = math.sqrt(1.0 / age + 1.0 / old_n)

    def tail(z: Any) -> Any:
        return 0.5 * special.erfc(z / math.sqrt(2.0))

    candidate = tail(math.sqrt(age) * (t_crit * ratio * spread + error))
    weights = legendre_w[:, None] * hermite_w[None, :]
    target = ALPHA / 2.0 * BETA

    def joint(k: float) -> float:
        return float(np.sum(weights * candidate * tail(k * ratio + error))) - target

    if joint(0.0) <= 0:  # the new side alone is already rare enough
        return t_crit, 0.0
    high = 8.0
    while joint(high) > 0:
        high *= 2.0
    return t_crit, float(optimize.brentq(joint, 0.0, high, xtol=1e-6))
