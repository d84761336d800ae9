"""`probe` from chat (issue 24, item 1): queued on the host like a batch, measured there with
real gloo ranks, shown by `status`, `show`, `history` and the Slack thread, stopped by `cancel`,
kept out of `compare`, `retry` and the digest; bad input refused where it is typed, and what the
host cannot run refused by the worker that takes it (distributed mode, a real Celery worker over
Redis). Small sizes and few iterations: each probe's ranks spend most of their time importing
torch."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.chat.router import Access, Caller, Reply, Router
from jobs.batches.dispatch import EmbeddedDispatcher
from jobs.commands import digest
from jobs.commands.context import Context
from jobs.store import TERMINAL_STATES, BatchRow, Store
from tests.bot.conftest import BotServer, FakeEngine, start_bot, summaries, thread_of
from tests.standin.slack_api import SlackStandin

ALICE = Caller(user="U_ALICE", channel="C_LAB")
ACCESS = Access(users=frozenset({"U_ALICE"}), admins=frozenset({"U_ADMIN"}))


@pytest.fixture
def router(slack_env: None) -> Iterator[Router]:
    dispatcher = EmbeddedDispatcher(Store(), engine_factory=lambda name: FakeEngine())
    yield Router(dispatcher, ACCESS, engine_for=lambda name: FakeEngine())
    dispatcher.close()


def said(router: Router, line: str) -> Reply:
    return router.handle(line, caller=ALICE)


def queued(router: Router, line: str) -> str:
    reply = said(router, line)
    assert reply.exit_code == 0 and reply.started is not None, reply.text
    return reply.started.batch.id


def row_of(router: Router, batch_id: str) -> BatchRow:
    row = router.dispatcher.store.get_batch(batch_id)
    assert row is not None
    return row


def ended(router: Router, batch_id: str, *, timeout: float = 60.0) -> BatchRow:
    deadline = time.monotonic() + timeout
    while (row := row_of(router, batch_id)).state not in TERMINAL_STATES:
        assert time.monotonic() < deadline, f"{batch_id} still {row.state}"
        time.sleep(0.05)
    return row


def refused(reply: Reply, *words: str) -> None:
    assert reply.exit_code == 2 and reply.started is None, reply.text
    assert len(reply.text.strip().splitlines()) == 1, reply.text
    for word in words:
        assert word in reply.text, reply.text


def ranks_of_this_process() -> dict[int, str]:
    """The probe's rank processes (`rank_worker.py`) this test process started: pid -> cmdline.
    In embedded mode the dispatcher's thread runs in this process, so the ranks are children."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue  # it exited meanwhile
        state, ppid = stat.rsplit(")", 1)[1].split()[:2]
        if "rank_worker.py" in cmdline and int(ppid) == os.getpid() and state != "Z":
            found[int(entry.name)] = cmdline
    return found


def alive(pid: int) -> bool:
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


# --------------------------------------------------------------------------- a probe, end to end


def test_a_probe_queues_runs_and_shows_like_a_batch_but_is_no_experiment(router: Router) -> None:
    first, second = (queued(router, "run demo --reps 1") for _ in range(2))
    ended(router, first), ended(router, second)
    reply = said(router, "probe --sizes 4K,64K --iters 5")
    assert reply.exit_code == 0 and reply.started is not None
    probe = reply.started.batch.id
    assert probe in reply.text and "(probe) queued" in reply.text
    assert "2 sizes from 4 KiB to 64 KiB, 5 iterations each" in reply.text
    status = said(router, "status")
    assert status.exit_code == 0 and probe in status.text  # queued or running: listed
    row = ended(router, probe)
    assert row.state == "done", row.error
    assert row.plan.is_probe and row.plan.configs == () and row.engine == "probe"

    report = row.report
    assert report is not None and report["state"] == "done" and report["batch"] == probe
    measured = report["probe"]
    assert (measured["backend"], measured["world"], measured["iters"]) == ("gloo", 2, 5)
    assert [s["bytes"] for s in measured["sizes"]] == [4096, 65536]
    n = measured["world"]
    for size in measured["sizes"]:
        assert size["latency_us"] > 0
        assert size["algbw_gbps"] == pytest.approx(size["bytes"] / size["latency_us"] / 1e3)
        assert size["busbw_gbps"] == pytest.approx(size["algbw_gbps"] * 2 * (n - 1) / n)

    shown = said(router, f"show {probe}")
    assert shown.exit_code == 0 and f"Probe {probe} done" in shown.text
    assert "size  latency (us)  algbw (GB/s)  busbw (GB/s)" in shown.text
    assert " 4 KiB " in shown.text and "64 KiB " in shown.text
    history = said(router, "history").text
    (line,) = [ln for ln in history.splitlines() if probe in ln]
    assert "probe by U_ALICE: done" in line and "all_reduce over 2 ranks (gloo)" in line

    # not an experiment: compare and retry refuse it, compare's defaults and the digest skip it
    refused(said(router, f"compare {probe} {second}"), probe, "is a probe")
    refused(said(router, f"compare {second} {probe}"), probe, "is a probe")
    refused(said(router, f"compare {probe}"), probe, "is a probe")
    refused(said(router, f"retry {probe} faster"), probe, "is a probe")
    compared = said(router, "compare")
    assert compared.exit_code == 0, compared.text
    assert first in compared.text and second in compared.text and probe not in compared.text
    ctx = Context(store=router.dispatcher.store, caller=ALICE, access=ACCESS,
                  make_dispatcher=lambda: router.dispatcher)
    data = digest.digest(ctx, chart=False).digest
    assert sum(data["counts"].values()) == 2 and probe not in json.dumps(data)
    assert len(router.dispatcher.store.list_batches()) == 3


# --------------------------------------------------------------------------- bad input


BAD = [
    ("probe --world 1", "--world must be at least 2"),
    ("probe --world 999", "--world 999 is more than gloo runs here"),
    ("probe --sizes 0", "more than 0 bytes"),
    ("probe --sizes 2G", "at most 1 GiB"),
    ("probe --backend mpi", "unknown backend 'mpi'"),
    ("probe --backend nccl", "--backend nccl needs CUDA"),  # embedded, and no GPU here
    ("probe --timeout 601", "--timeout must be at most 600"),
    ("probe --iters x", "--iters needs a whole number"),
    ("probe --bogus 1", "unknown option '--bogus'"),
    ("probe now", "unexpected word 'now'"),
    ("probe --env RANK=1", "--env RANK is set by the probe itself"),
    ("probe --env NCCL_ALGO", "--env needs KEY=VALUE"),
    ("probe --iters 2 --iters 3", "--iters is given twice"),
    ("probe --sizes 4K --iters", "--iters needs a value"),
]


def test_bad_input_is_one_line_exit_2_and_stores_nothing(router: Router) -> None:
    for line, why in BAD:
        refused(said(router, line), why)
    assert router.dispatcher.store.list_batches() == []


# --------------------------------------------------------------------------- cancel


def test_cancel_stops_a_running_probe_and_its_ranks(router: Router) -> None:
    long = queued(router, "probe --sizes 1M,4M --iters 10000 --timeout 300")
    behind = queued(router, "probe --sizes 4K --iters 1")
    deadline = time.monotonic() + 60  # a guard against a hang only
    while len(ranks := ranks_of_this_process()) < 2:
        assert time.monotonic() < deadline, "the long probe's ranks did not start"
        time.sleep(0.05)
    status = said(router, "status").text
    assert f"running  {long}  probe" in status and f"#1  {behind}  probe" in status, status

    cancelled = said(router, f"cancel {behind}")  # queued: it never starts
    assert cancelled.exit_code == 0, cancelled.text
    assert ended(router, behind, timeout=60).state == "cancelled"

    time.sleep(1.0)  # the ranks are importing torch or measuring by now
    assert row_of(router, long).state == "running"
    cancelled = said(router, f"cancel {long}")
    assert cancelled.exit_code == 0, cancelled.text
    row = ended(router, long, timeout=60)  # a probe left to itself ends done, not cancelled
    assert row.state == "cancelled" and row.report is not None
    assert row.report["state"] == "cancelled" and row.report["probe"] is None
    assert "cancelled" in row.report["error"] and "ranks were stopped" in row.report["error"]
    assert [pid for pid in ranks if alive(pid)] == []
    assert ranks_of_this_process() == {}
    behind_row = row_of(router, behind)
    assert behind_row.started_at is None  # a queued batch cancelled: no report, as any batch
    assert f"Probe {behind} cancelled" in said(router, f"show {behind}").text


# --------------------------------------------------------------------------- Slack


def test_the_slack_thread_ends_with_the_probes_table_and_json_once(
    dispatcher: EmbeddedDispatcher, standin: SlackStandin
) -> None:
    server: BotServer = start_bot(dispatcher, standin)
    try:
        assert server.command("probe --sizes 4K --iters 2").status_code == 200

        def finished(calls: list[Any]) -> bool:
            posts = [c for c in calls if c.method == "chat.postMessage" and c.status == 200]
            return (bool(summaries(calls))
                    and any(c.method == "files.completeUploadExternal" for c in calls)
                    and bool(posts) and any(
                        c.method == "chat.update" and c.body["ts"] == thread_of(calls)["parent_ts"]
                        and "probe · batch" in (c.body.get("text") or "") for c in calls))

        calls = standin.wait_for(finished, timeout=90)
        time.sleep(1.0)  # anything posted twice would be in by now
        calls = standin.recorded()
    finally:
        server.stop()
    (row,) = dispatcher.store.list_batches()
    assert row.state == "done" and row.plan.is_probe
    t = thread_of(calls)
    assert t["parent"].body["channel"] == "C_LAB"
    assert (f"specbench probe · batch {row.id} for U_ALICE: all_reduce over 2 ranks"
            in t["parent"].body["text"])
    (summary,) = summaries(calls)
    assert summary.body["thread_ts"] == t["parent_ts"]
    blocks = json.dumps(summary.body["blocks"], ensure_ascii=False)
    assert f"specbench: probe · {row.id}" in blocks and "busbw (GB/s)" in blocks
    assert f"Probe {row.id} done" in summary.body["text"]
    headline = t["parent_updates"][-1].body["text"]
    assert headline.startswith(f"probe · batch {row.id}: done, 1 size over 2 ranks (gloo)")
    names = [c.body["filename"] for c in calls if c.method == "files.getUploadURLExternal"]
    assert names == [f"{row.id}-probe.json"]
    (upload,) = [c for c in calls if c.method == "upload"]
    assert json.loads(upload.raw) == row.report["probe"]  # type: ignore[index]
    (complete,) = [c for c in calls if c.method == "files.completeUploadExternal"]
    assert complete.body["thread_ts"] == t["parent_ts"]


# --------------------------------------------------------------------------- distributed


@pytest.mark.redis
@pytest.mark.slow
@pytest.mark.timeout(90)
def test_the_worker_checks_the_host_and_runs_the_probe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jobs.broker.dispatcher import DistributedDispatcher
    from tests.jobs.test_distributed import Worker, collect, is_end, make_site, redis_db

    gen = redis_db()
    site = make_site(tmp_path, next(gen), {})
    for name, value in site.env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("SPECBENCH_BROKER_URL", site.broker)
    monkeypatch.delenv("SPECBENCH_QUEUE", raising=False)
    worker = Worker(site, "default")
    d = DistributedDispatcher(Store(site.database), site.broker)
    router = Router(d, ACCESS)
    sub = d.subscribe()
    try:
        assert d.mode == "distributed"
        nccl = queued(router, "probe --backend nccl --sizes 4K --iters 1")  # the bot has no GPU
        events = collect(sub, is_end(nccl), timeout=90)
        plain = queued(router, "probe --sizes 4K,16K --iters 2")
        done_events = collect(sub, is_end(plain), timeout=90)
    finally:
        sub.close()
        d.close()
        worker.stop()
        next(gen, None)
    store = Store(site.database)
    row = store.get_batch(nccl)
    assert row is not None and row.state == "refused" and row.report is not None
    error = row.report["error"]
    assert "this host cannot run the probe" in error and "nccl" in error and "GPU" in error
    assert row.report["probe"] is None and row.error and "nccl" in row.error
    kinds = [e["type"] for e in events if e["batch"] == nccl]
    assert "batch.started" not in kinds and "approach.phase" not in kinds, kinds
    assert kinds[-1] == "batch.finished"
    ran = store.get_batch(plain)
    assert ran is not None and ran.state == "done", ran and ran.error
    assert ran.report is not None and ran.report["host"]
    assert [s["bytes"] for s in ran.report["probe"]["sizes"]] == [4096, 16384]
    assert "batch.started" in [e["type"] for e in done_events if e["batch"] == plain]
