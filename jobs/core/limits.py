"""The upper bounds of every number a user types (docs/contracts.md "Bounded work and any file").

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

MAX_NAME_CHARS = 128
"""A preset's, an approach's or a sweep's name: it names files, chat rows and chart labels."""

MAX_PROMPTS = 100_000
"""A bench's requests: `num-prompts` and the other counts of prompts a benchmark sends."""

MAX_TOKENS = 10_000_000
"""A bench's token lengths (`random-input-len`, `output-len`...): the longest context windows."""

MAX_CONCURRENCY = 100_000
"""`max-concurrency`, in a bench or a load level: requests in flight at once."""

MAX_REQUEST_RATE = 100_000.0
"""`request-rate` (requests a second), in a bench or a load level; a bench's may be inf (all at
once), as the engines' own default."""

MAX_THREADS = 1024
"""The local engine's `threads`: torch's intra-op threads (100,000 crashed the child in
libgomp)."""


def name_problem(name: str) -> str | None:
    """Why a name (a preset's, an approach's, a sweep's) is too long, or None."""
    if len(name) <= MAX_NAME_CHARS:
        return None
    return f"a name is at most {MAX_NAME_CHARS} characters; that one has {len(name):,}"


def bounded_name(value: object) -> object:
    """A name as the preset's models take it: one longer than MAX_NAME_CHARS is refused, naming
    the bound, before anything is made of it."""
    if isinstance(value, str) and (problem := name_problem(value)) is not None:
        raise ValueError(problem)
    return value
