"""The store: batches and their run records (SQLAlchemy; SQLite embedded, PostgreSQL in production).

The schema belongs to Alembic (`jobs/store/migrations`).
"""

from jobs.core.plans import BatchRow
from jobs.store.database import UnknownBatch
from jobs.store.posts import SlackPosts
from jobs.store.runs import RERUN_STATUSES
from jobs.store.store import ACTIVE_STATES, TERMINAL_STATES, Store

__all__ = ["ACTIVE_STATES", "RERUN_STATUSES", "TERMINAL_STATES", "BatchRow", "SlackPosts", "Store",
           "UnknownBatch"]
