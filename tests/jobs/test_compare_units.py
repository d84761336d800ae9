"""`compare`'s text and Slack views show every value with its metric's unit."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

from bot import views
from jobs.commands.compare import compare
from jobs.store import Store
from tests.conftest import SEED
from tests.jobs.test_compare import T0, UPGRADED, _ctx, load


def test_compared_values_carry_their_unit(tmp_path: Path) -> None:
    with Store(f"sqlite:///{tmp_path / 'db.sqlite'}") as store:
        load(store, SEED, at=T0)
        load(store, UPGRADED, at=T0 + timedelta(days=2))
        data = compare(_ctx(store))
    text = views.compared(data)
    assert "output_throughput (tok/s), higher is better" in text
    row = next(x for x in text.splitlines() if x.startswith("cuda-graph-max-bs-128 "))
    assert row.count(" tok/s ") == 2, row  # both sides' values
    slack = json.dumps(views.compared_payload(data), ensure_ascii=False)
    assert "output_throughput (tok/s, higher is better" in slack
    assert "cuda-graph-max-bs-128: 89.5 tok/s improved → " in slack
