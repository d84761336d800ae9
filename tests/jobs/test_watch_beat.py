"""The watch's scheduler (docs/contracts.md "Regression watch", "Runs"): the beat down for three
nights starts one catch-up run when it is back, not three; a night whose previous batch still
runs is skipped, and the watch's thread says so. The real beat, worker, Redis and stand-in
SGLang, the nights driven by the watch's clock (tests/jobs/test_watch_history.py's site)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import pytest

from jobs.store import TERMINAL_STATES, Store
from tests.jobs.test_distributed import Site, Worker, wait_until
from tests.jobs.test_watch_history import (  # noqa: F401 - the fixtures
    CHANNEL,
    START,
    THREAD,
    Beat,
    cli,
    run_night,
    set_clock,
    set_night,
    site,
    slack,
    thread_texts,
)
from tests.standin.slack_api import SlackStandin

pytestmark = [pytest.mark.redis, pytest.mark.slow]


def quiet(value: float = 100.0, **env: str) -> dict[str, object]:
    return {"env": {"STANDIN_THROUGHPUT": f"{value}", "STANDIN_GPU_NAME": "NVIDIA H200", **env}}


@pytest.fixture(scope="module")
def watch(site: Site) -> int:  # noqa: F811
    added = cli(site, "watch", "add", "nightly")
    assert added.returncode == 0, added.stderr
    store = Store(site.database)
    found = store.list_watches()[-1].id
    store.set_watch_thread(found, CHANNEL, THREAD)
    return found


@pytest.fixture(scope="module")
def worker(site: Site) -> Iterator[Worker]:  # noqa: F811
    started = Worker(site, "nightly")
    yield started
    started.stop()


def watch_batches(store: Store, watch: int) -> list[str]:
    return [r.id for r in store.list_batches() if r.plan.watch == watch and r.plan.confirms is None]


@pytest.mark.timeout(240)
def test_a_beat_down_for_three_nights_catches_up_once(
    site: Site, slack: SlackStandin, watch: int, worker: Worker,  # noqa: F811
) -> None:
    store = Store(site.database)
    beat = Beat(site)
    try:
        first = run_night(site, slack, store, watch, 0, quiet())
    finally:
        beat.stop()
    set_night(site, quiet())
    set_clock(site, START + dt.timedelta(days=3, minutes=5))  # nights 1, 2 and 3 missed
    beat = Beat(site)
    try:
        slot = START + dt.timedelta(days=3)
        row = wait_until(lambda: (w := store.get_watch(watch)) and w.last_slot == slot and w,
                         timeout=60, what="the beat back, catching up")
        caught = str(row.last_batch)
        wait_until(lambda: any(t.startswith(f"Batch {caught} ") for t in thread_texts(slack)),
                   timeout=60, what="the catch-up batch's end line")
    finally:
        beat.stop()
    assert watch_batches(store, watch) == [first, caught]  # one catch-up run, not three
    again = store.get_batch(caught)
    assert again is not None and again.plan.watch_at == slot.isoformat()


@pytest.mark.timeout(240)
def test_a_night_whose_last_batch_still_runs_is_skipped_and_the_thread_says_so(
    site: Site, slack: SlackStandin, watch: int, worker: Worker,  # noqa: F811
) -> None:
    store = Store(site.database)
    beat = Beat(site)
    try:
        set_night(site, quiet(STANDIN_STARTUP_S="60"))  # a server that takes its time
        night = START + dt.timedelta(days=10)
        set_clock(site, night)
        slow = wait_until(lambda: (w := store.get_watch(watch)) and w.last_slot == night
                          and w.last_batch, timeout=60, what="the slow night's batch")
        wait_until(lambda: (b := store.get_batch(str(slow))) and b.state == "running",
                   timeout=60, what="the slow batch running")
        before = watch_batches(store, watch)
        next_night = night + dt.timedelta(days=1)
        set_clock(site, next_night)
        line = wait_until(lambda: [t for t in thread_texts(slack) if "skipped" in t],
                          timeout=60, what="the skipped night's line")
        assert line == [f"Night of {next_night:%Y-%m-%d %H:%M} UTC skipped: batch {slow} still "
                        "runs, and a watch never overlaps itself."]
        assert store.get_watch(watch).last_slot == next_night  # type: ignore[union-attr]
        cancelled = cli(site, "cancel", str(slow))
        assert cancelled.returncode == 0, cancelled.stderr
        wait_until(lambda: (b := store.get_batch(str(slow))) and b.state in TERMINAL_STATES,
                   timeout=60, what="the slow batch cancelled")
        wait_until(lambda: any(t.startswith(f"Batch {slow} ") for t in thread_texts(slack)),
                   timeout=30, what="the cancelled batch's end line")
    finally:
        beat.stop()
    assert watch_batches(store, watch) == before  # the skipped night started nothing after
