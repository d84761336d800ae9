"""Issue 13's compare figure: `compare` over 10,000 stored batches on SQLite (median ms).

The batches go in through the store's own SQLAlchemy session in bulk (three runs each, five
presets in turn, and one rare preset with a batch at the start and one at the end, the worst
case for the "latest earlier batch of the preset" query without a (preset, created_at) index).
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import insert

from jobs.commands.compare import CompareArgs, compare
from jobs.commands.context import Caller, Context
from jobs.core.records import RunRecord
from jobs.store import Store
from jobs.store.schema import Batch, Run
from tests.conftest import FINGERPRINT, make_plan

BATCHES = 10_000
PRESETS = ("eagle3", "eagle3-tune", "cpu-demo", "ngram", "medusa")
CALLS = 20
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _fill(store: Store) -> list[tuple[str, str]]:
    """10,000 ended batches; returns (id, preset) in creation order."""
    plan = json.dumps(make_plan().to_dict())
    batches: list[dict[str, Any]] = []
    runs: list[dict[str, Any]] = []
    made: list[tuple[str, str]] = []
    for i in range(BATCHES):
        preset = "rare" if i in (0, BATCHES - 1) else PRESETS[i % len(PRESETS)]
        batch = f"b-{i:06d}"
        made.append((batch, preset))
        results = []
        for position, approach in enumerate(("baseline", "eagle3", "cuda-graph")):
            value = 80.0 + (i % 7) + position
            record = RunRecord(
                batch=batch, preset=preset, approach=approach,
                role="baseline" if position == 0 else "approach", status="ok",
                metrics={"output_throughput": [value - 0.5, value, value + 0.5]},
                fingerprint={**FINGERPRINT, "driver": f"575.{i % 3}"},
            )
            runs.append({"batch_id": batch, "position": position, "approach": approach,
                         "role": record.role, "status": "ok", "record": record.to_json()})
            if position:
                results.append({"approach": approach, "verdict": "improved", "cause": None})
        batches.append({
            "id": batch, "preset": preset, "engine": "local", "queue": "default",
            "state": "done", "requested_by": "bench", "plan": plan, "cancel_requested": False,
            "created_at": T0 + timedelta(minutes=i),
            "report": json.dumps({"batch": batch, "results": results}),
        })
    with store._write() as session:
        session.execute(insert(Batch), batches)
        session.execute(insert(Run), runs)
    return made


def _median_ms(ctx: Context, args: CompareArgs) -> float:
    times = []
    for _ in range(CALLS):
        began = time.perf_counter()
        compare(ctx, args)
        times.append(time.perf_counter() - began)
    return statistics.median(times) * 1000


def run() -> dict[str, str]:
    with tempfile.TemporaryDirectory() as folder:
        store = Store(f"sqlite:///{folder}/bench.db")
        began = time.perf_counter()
        made = _fill(store)
        filled = time.perf_counter() - began
        ctx = Context(store=store, caller=Caller(user="bench", surface="cli"))
        older, newer = made[-1 - len(PRESETS)][0], made[-2][0]
        figures = {
            "stored": f"{BATCHES:,} batches, {3 * BATCHES:,} runs in {filled:.1f} s",
            f"compare, default (latest: a rare preset, its last 10,000 back; median of {CALLS})":
                f"{_median_ms(ctx, CompareArgs()):.1f} ms",
            f"compare B, a common preset (median of {CALLS})":
                f"{_median_ms(ctx, CompareArgs(a=newer)):.1f} ms",
            f"compare A B, explicit (median of {CALLS})":
                f"{_median_ms(ctx, CompareArgs(a=older, b=newer)):.1f} ms",
        }
        store.close()
    return figures
