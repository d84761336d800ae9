"""The store: batches and their run records (SQLAlchemy; SQLite embedded, PostgreSQL in production).

The schema belongs to Alembic (`jobs/store/migrations`).
"""

from jobs.store.schema import BatchRow
from jobs.store.store import RERUN_STATUSES, TERMINAL_STATES, SlackPosts, Store, UnknownBatch

__all__ = ["RERUN_STATUSES", "TERMINAL_STATES", "BatchRow", "SlackPosts", "Store", "UnknownBatch"]
