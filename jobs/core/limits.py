"""The upper bounds of every number a user types (SPEC.md "Batch lifecycle and limits").

A typo (`--timeout 9e99`, `budget: 100000`, `--days 100000000`) must be bad input with a message
that names the bound, never hours of GPU time, memory that grows until the host swaps, or an
OverflowError. Each bound is far above any real use. `--reps` has its own, lower one
(`jobs.commands.run.MAX_REPS`): a preset may ask for more repetitions than a command line.
The size of a sweep's grid is bounded by `settings.max_points()` (SPECBENCH_MAX_POINTS).
"""

from __future__ import annotations

DAY_S = 24 * 3600

MAX_PRESET_REPS = 100
"""A preset's `reps`."""

MAX_TIMEOUT_S = 7 * DAY_S
"""`--timeout` (run, console) and a preset's `timeouts.startup_s` and `timeouts.bench_s`."""

MAX_DAYS = 3650
"""`digest --days`: ten years of history."""

MAX_BUDGET = 1000
"""A sweep's `budget`: the most points that get a server."""

MAX_CONFIRM_REPS = 100
"""A sweep's `confirm_reps`."""

MAX_MIN_EFFECT_PCT = 1000.0
"""A preset's `min_effect_pct` and `analyze --min-effect`."""

MAX_PRESET_BYTES = 1 << 20
"""A preset file: 1 MiB (the shipped ones are a few KiB)."""

MAX_DEPTH = 50
"""How deeply a preset's YAML may nest (the format needs 5 levels)."""
