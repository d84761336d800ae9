"""Which point of a sweep runs next: every point in grid order, or Optuna's choice (adaptive)."""

from jobs.search.propose import next_point, servers_used

__all__ = ["next_point", "servers_used"]
