"""Which dispatcher a process uses (docs/contracts.md "Modes"): embedded when
SPECBENCH_BROKER_URL is unset (`jobs.batches.dispatch`), distributed otherwise
(`jobs.broker.dispatcher`). The one place that knows both, so that neither imports the other.
"""

from __future__ import annotations

from jobs import settings
from jobs.batches.dispatch import Dispatcher, EmbeddedDispatcher
from jobs.extras import require
from jobs.store import Store


def get_dispatcher(store: Store | None = None) -> Dispatcher:
    """Embedded when SPECBENCH_BROKER_URL is unset, distributed otherwise."""
    store = store or Store()
    url = settings.broker_url()
    if url is None:
        return EmbeddedDispatcher(store)
    require(("distributed", "distributed mode (SPECBENCH_BROKER_URL is set)"))
    from jobs.broker.dispatcher import DistributedDispatcher  # Celery only where it is used

    return DistributedDispatcher(store, url)
