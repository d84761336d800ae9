"""Issue 13's digest figure: `digest` (default 7-day window) over 10,000 stored batches in SQLite,
a few runs each, several presets, spread over ten months (median of 10 calls)."""

from __future__ import annotations

import datetime as dt
import json
import statistics
import tempfile
import time
from typing import Any

from sqlalchemy import insert

from jobs.commands.context import Caller, Context
from jobs.commands.digest import digest
from jobs.core.memory import config_key, stack_key
from jobs.core.records import to_record
from jobs.store import Store
from jobs.store.runs import run_measure
from jobs.store.schema import Batch, Run
from tests.conftest import BASE_ARGS, FINGERPRINT, make_plan

BATCHES = 10_000
PRESETS = ("eagle3", "eagle3-tune", "demo", "cpu-demo", "kimi")
NOW = dt.datetime(2026, 12, 7, 9, 0, tzinfo=dt.UTC)
SPAN = dt.timedelta(days=300)
ARCH = "RuntimeError: CUDA error: no kernel image is available for execution on the device"
TAIL = "\n".join(f"[2026-12-02 10:00:{i % 60:02d}] INFO: line {i}" for i in range(40))


def _record(batch: str, preset: str, approach: str, *, i: int, began: dt.datetime,
            status: str = "ok", driver: str = "575.57.08") -> dict[str, Any]:
    ok = status == "ok"
    return {
        "batch": batch, "preset": preset, "approach": approach,
        "role": "baseline" if approach == "baseline" else "approach", "parent": None,
        "hypothesis": f"{approach} helps", "change": {"server_args": {}, "env": {}},
        "server_args": dict(BASE_ARGS), "env": {}, "status": status,
        "exit_code": 0 if ok else 1, "log_tail": TAIL if ok else f"{TAIL}\n{ARCH}",
        "metrics": {"output_throughput": [80.0 + i % 7, 81.0 + i % 5, 82.0] if ok else [],
                    "accept_length": None},
        "fingerprint": {**FINGERPRINT, "driver": driver},
        "started_at": began.isoformat(),
        "finished_at": (began + dt.timedelta(minutes=5)).isoformat(),
    }


def _fill(store: Store) -> None:
    plans = {p: json.dumps(make_plan(preset=p).to_dict()) for p in PRESETS}
    batches, runs = [], []
    for i in range(BATCHES):
        batch, preset = f"b-{i:05d}", PRESETS[i % len(PRESETS)]
        created = NOW - SPAN + SPAN * (i / BATCHES)
        driver = "590.10" if i > BATCHES * 0.99 else "575.57.08"  # an upgrade in the last days
        batches.append({
            "id": batch, "preset": preset, "engine": "sglang", "queue": "default",
            "state": "done", "requested_by": "bench", "plan": plans[preset],
            "cancel_requested": False, "created_at": created, "started_at": created,
            "finished_at": created + dt.timedelta(minutes=20),
            "report": json.dumps({"batch": batch, "preset": preset, "results": [],
                                  "next_steps": []})})
        configs = [("baseline", "ok"), ("eagle3", "ok"), ("cg-128", "ok"), ("symm", "failed")]
        if i % 97 == 0 and i < BATCHES * 0.9:  # a dead end last tried before the upgrade
            configs.append(("fusion", "failed"))
        for position, (approach, status) in enumerate(configs):
            record = _record(batch, preset, approach, i=i + position, began=created,
                             status=status, driver=driver)
            # the columns the store writes with every run (jobs/store/runs.py)
            measure = run_measure(to_record(record), "output_throughput")
            runs.append({"batch_id": batch, "position": position, "approach": approach,
                         "role": record["role"], "status": status,
                         "record": json.dumps(record), "started_at": created,
                         "finished_at": created + dt.timedelta(minutes=5), **measure,
                         "config_key": config_key(record["server_args"], record["env"]),
                         "stack_key": stack_key(record["fingerprint"])})
    with store._write() as session:
        session.execute(insert(Batch), batches)
        session.execute(insert(Run), runs)


def run() -> dict[str, str]:
    with tempfile.TemporaryDirectory() as folder:
        store = Store(f"sqlite:///{folder}/bench.db")
        _fill(store)
        ctx = Context(store=store, caller=Caller("bench"))
        figures = {}
        for label, chart in (("data", False), ("with its trend chart", True)):
            times = []
            for _ in range(10):
                began = time.perf_counter()
                out = digest(ctx, days=7, chart=chart, now=NOW)
                times.append(time.perf_counter() - began)
            assert out.digest["batches"] and out.digest["reopened"]
            figures[f"digest, 7 days of {BATCHES:,} SQLite batches, {label} (median of 10)"] = (
                f"{statistics.median(times) * 1000:.0f} ms (target < 500 ms)")
        store.close()
    return figures
