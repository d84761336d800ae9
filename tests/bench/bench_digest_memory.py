"""Issue 13's digest figure: `digest` (default 7-day window) over 10,000 stored batches in SQLite,
a few runs each, several presets, spread over ten months (median of 10 calls). Since issue 14
each batch holds a report as the worker stores it (judged, confounded and failed results, next
steps): the best configuration is read from the reports' judged results."""

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
from jobs.store.runs import run_measure, verdict_values
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


def _report(batch: str, preset: str, i: int) -> dict[str, Any]:
    """A report as the worker stores it: every approach judged or not (a confounded one with
    the largest raw delta, a failure), and its next steps."""
    def result(approach: str, verdict: str, delta: float | None) -> dict[str, Any]:
        return {"approach": approach, "verdict": verdict, "cause": None,
                "value": None if delta is None else 81.0 * (1 + delta / 100),
                "delta_pct": delta, "why": "one line, quoting the evidence",
                "vs_parent": None, "break_even": None}
    steps = [{"rank": n, "kind": kind, "approach": approach, "action": f"{kind} {approach}",
              "why": "because", "effort": "low"}
             for n, (kind, approach) in enumerate(
                 [("retry", "eagle3"), ("adopt", "cg-128"), ("remedy", "symm"),
                  ("accept", "cg-128")], start=1)]
    return {"batch": batch, "preset": preset, "metric": "output_throughput",
            "baseline": {"approach": "baseline", "value": 81.0, "status": "ok"},
            "results": [result("eagle3", "inconclusive", 40.0 + i % 9),
                        result("cg-128", "improved" if i % 3 else "unchanged", (i % 11) / 2),
                        {**result("symm", "failed", None), "cause": "arch-unsupported"}],
            "key_achievement": None, "root_cause": None, "next_steps": steps}


def _fill(store: Store) -> None:
    plans = {p: json.dumps(make_plan(preset=p).to_dict()) for p in PRESETS}
    batches, runs = [], []
    for i in range(BATCHES):
        batch, preset = f"b-{i:05d}", PRESETS[i % len(PRESETS)]
        created = NOW - SPAN + SPAN * (i / BATCHES)
        driver = "590.10" if i > BATCHES * 0.99 else "575.57.08"  # an upgrade in the last days
        report = _report(batch, preset, i)
        judged = {v["b_approach"]: v for v in verdict_values(batch, report, frozenset())}
        batches.append({
            "id": batch, "preset": preset, "engine": "sglang", "queue": "default",
            "state": "done", "requested_by": "bench", "plan": plans[preset],
            "cancel_requested": False, "created_at": created, "started_at": created,
            "finished_at": created + dt.timedelta(minutes=20),
            "report": json.dumps(report)})
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
                         # and with the report (jobs/store/runs.py write_verdicts)
                         "verdict": judged.get(approach, {}).get("b_verdict"),
                         "judged_delta": judged.get(approach, {}).get("b_delta"),
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
            assert out.digest["batches"] and out.digest["reopened"] and out.digest["best"]
            assert all(b["verdict"] != "inconclusive" for b in out.digest["best"])
            figures[f"digest, 7 days of {BATCHES:,} SQLite batches, {label} (median of 10)"] = (
                f"{statistics.median(times) * 1000:.0f} ms (target < 500 ms)")
        store.close()
    return figures
