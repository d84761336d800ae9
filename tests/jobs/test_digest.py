"""The weekly digest: pure data from batch rows and records, and its three renderings."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from bot.cli.main import main
from jobs.commands.context import Caller, Context
from jobs.commands.digest import digest as digest_command
from jobs.core.digest import build_digest
from jobs.core.messages import render_blocks, render_text
from jobs.core.records import RunRecord
from jobs.store import BatchRow, Store
from tests.conftest import make_plan, make_record

NOW = dt.datetime(2026, 12, 7, 9, 0, tzinfo=dt.UTC)


def row(batch: str, *, days_ago: float, preset: str = "eagle3", state: str = "done",
        results: list[dict[str, Any]] | None = None,
        steps: list[dict[str, Any]] | None = None) -> BatchRow:
    created = NOW - dt.timedelta(days=days_ago)
    report = None if results is None else {
        "batch": batch, "preset": preset, "results": results,
        "next_steps": steps or [{"rank": 1, "kind": "accept", "approach": "x", "action": "a",
                                 "why": "w", "effort": "low"}]}
    return BatchRow(
        id=batch, preset=preset, engine="sglang", queue="default", state=state,
        requested_by="U1", channel=None, thread_ts=None, host="gpu1",
        plan=make_plan(), idempotency_key=None,
        cancel_requested=False, lease_owner=None, lease_expires_at=None, created_at=created,
        started_at=created, finished_at=created + dt.timedelta(minutes=5), report=report,
        error=None)


def rec(batch: str, approach: str, value: float, **kw: Any) -> RunRecord:
    return make_record(approach, samples=[value, value], batch=batch, preset="eagle3", **kw)


def result(approach: str, verdict: str, **kw: Any) -> dict[str, Any]:
    return {"approach": approach, "verdict": verdict, "cause": kw.get("cause"),
            "value": kw.get("value"), "delta_pct": kw.get("delta_pct"), "why": kw.get("why", "")}


def week() -> tuple[list[BatchRow], dict[str, list[RunRecord]]]:
    rows = [
        row("b-old", days_ago=20, results=[result("eagle3", "inconclusive", why="noisy")]),
        row("b-1", days_ago=3, results=[
            result("cg-128", "improved", value=89.5, delta_pct=9.1),
            result("eagle3", "inconclusive", why="ranges overlap"),
            result("tree", "failed", cause="nccl-error"),
            result("symm", "failed", cause="arch-unsupported"),
        ]),
        row("b-2", days_ago=1, results=[
            result("eagle3", "regressed", value=54.1, delta_pct=-34.0),
            result("fusion", "failed", cause="arch-unsupported"),
            result("ep", "inconclusive", why="mem-fraction-static differs"),
        ], steps=[
            {"rank": 1, "kind": "retry", "approach": "ep", "action": "rerun ep", "why": "confound",
             "effort": "low"},
            {"rank": 2, "kind": "accept", "approach": "cg-128", "action": "keep", "why": "best",
             "effort": "low"}]),
        row("b-run", days_ago=0.1, state="running"),
    ]
    records = {
        "b-old": [rec("b-old", "baseline", 80.0)],
        "b-1": [rec("b-1", "baseline", 82.0), rec("b-1", "cg-128", 89.5),
                rec("b-1", "tree", 0.0, status="failed")],
        "b-2": [rec("b-2", "baseline", 81.0), rec("b-2", "eagle3", 54.1),
                rec("b-2", "other-gpu", 120.0, fingerprint={"gpu": "H200", "gpu_count": 1})],
    }
    return rows, records


def test_the_digest_sums_up_the_week() -> None:
    rows, records = week()
    digest = build_digest(rows, records, now=NOW, days=7)
    assert [b["batch"] for b in digest["batches"]] == ["b-1", "b-2", "b-run"]
    assert digest["counts"] == {"done": 2, "running": 1}
    best = {(b["preset"], b["hardware"]): b for b in digest["best"]}
    rtx = best[("eagle3", "8x NVIDIA RTX PRO 6000 Blackwell Server Edition")]
    assert (rtx["approach"], rtx["value"], rtx["batch"]) == ("cg-128", 89.5, "b-1")
    assert rtx["previous"] == {"approach": "baseline", "batch": "b-old", "value": 80.0}
    assert rtx["change_pct"] == pytest.approx(11.9)
    h200 = best[("eagle3", "1x H200")]
    assert h200["previous"] is None and h200["change_pct"] is None
    assert [(w["approach"], w["delta_pct"]) for w in digest["wins"]] == [("cg-128", 9.1)]
    assert digest["failures"] == [
        {"cause": "arch-unsupported", "count": 2, "approaches": ["eagle3/symm", "eagle3/fusion"]},
        {"cause": "nccl-error", "count": 1, "approaches": ["eagle3/tree"]},
    ]
    # eagle3 was inconclusive in b-1 but settled (regressed) in b-2: only ep stays open.
    assert [(i["approach"], i["batch"]) for i in digest["inconclusive"]] == [("ep", "b-2")]
    assert [(s["kind"], s["approach"]) for s in digest["next_steps"]] == [("retry", "ep")]


def test_an_empty_week_renders_in_every_format() -> None:
    digest = build_digest([], {}, now=NOW, days=7, tz="Europe/Paris")
    assert digest["period"]["to"] == "2026-12-07 10:00"
    text = render_text("digest", digest=digest)
    assert "0 batches" in text and "none measured yet" in text
    payload = render_blocks("digest", fallback=text, digest=digest)
    assert payload["blocks"][0]["type"] == "header"


def test_the_digest_renders_as_text_and_block_kit() -> None:
    rows, records = week()
    digest = build_digest(rows, records, now=NOW, days=7)
    text = render_text("digest", digest=digest)
    assert "eagle3 on 8x NVIDIA RTX PRO 6000" in text and "+11.9% over the week" in text
    assert "arch-unsupported: 2" in text and "eagle3: 1. [retry, low effort] rerun ep" in text
    payload = render_blocks("digest", fallback=text, digest=digest)
    assert len(payload["blocks"]) <= 50
    sections = " ".join(b["text"]["text"] for b in payload["blocks"] if b["type"] == "section")
    assert "cg-128" in sections and "ranges overlap" not in sections


def test_specbench_digest_reads_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    monkeypatch.setenv("SPECBENCH_DATABASE_URL", url)
    store = Store(url)
    created = dt.datetime.now(dt.UTC) - dt.timedelta(days=1)
    store.create_batch(batch_id="b-1", preset="eagle3", engine="sglang", queue="default",
                       requested_by="U1", plan=make_plan(),
                       created_at=created)
    store.put_record(rec("b-1", "baseline", 82.0), position=0)
    store.set_state("b-1", "done")
    assert main(["digest", "--format", "json"]) == 0
    digest = json.loads(capsys.readouterr().out)
    assert digest["counts"] == {"done": 1} and digest["best"][0]["value"] == 82.0
    assert main(["digest", "--format", "slack", "--days", "2"]) == 0
    assert json.loads(capsys.readouterr().out)["blocks"]
    assert main(["digest"]) == 0
    assert "1 batches: 1 done" in capsys.readouterr().out
    recent = digest_command(Context(store=store, caller=Caller("U1")), days=0.5, chart=False)
    assert recent.digest["batches"] == [] and recent.chart is None
