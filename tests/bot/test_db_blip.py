"""A database blip does not drop a batch's chat thread (issue 10, item 3, the bot's half).

Real processes: a `specbench worker` on PostgreSQL directly, a `specbench bot --http` on the
same database through a TCP proxy the test owns, a real Redis, the Slack stand-in. The proxy is
cut while the batch's thread is open, until the batch has ended and the thread has found its
store away and tried again; once it is restored the same bot process posts the summary, once.
How soon after the restore it does is the retry's pause, held where it is decided (its cap,
below), not timed here.

Skipped without PostgreSQL or Redis (unless SPECBENCH_REQUIRE_POSTGRES / _REDIS say otherwise).
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError

from jobs.store import Store
from jobs.store.outage import FIRST_PAUSE_S, MAX_PAUSE_S, Outage
from tests.bot.conftest import summaries
from tests.bot.conftest import thread_of as thread_calls
from tests.bot.test_db_hang import start_worker_and_bot
from tests.bot.test_distributed_bot import Bot
from tests.builders import standin_preset
from tests.jobs.test_distributed import REPO, Site, Worker, redis_db, wait_until
from tests.standin.harness import STANDIN
from tests.standin.postgres import fresh_database
from tests.standin.slack_api import SlackStandin
from tests.standin.tcp_proxy import TcpProxy

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]

RETRIED_S = 1.0  # the cut lasts this long past the thread's first failed call: two tries fail
PRESET = standin_preset(
    "standin-blip",
    description="a stand-in batch that ends while the bot cannot reach its database",
    queue="blipq", env={"STANDIN_STARTUP_S": "0.2"},
    approaches=[{"name": "during-the-cut", "hypothesis": "runs while the bot's database is away",
                 "env": {"STANDIN_THROUGHPUT": "90", "STANDIN_STARTUP_S": "1"}}],
)


@dataclass
class Blip:
    direct: str  # the worker's URL
    proxied: str  # the bot's URL, through `proxy`
    proxy: TcpProxy


@pytest.fixture
def blip() -> Iterator[Blip]:
    """A database of this test's own, migrated, and a proxy to the server for the bot."""
    with fresh_database("specbench_blip") as created:
        url = make_url(created)
        proxy = TcpProxy(url.host or "127.0.0.1", url.port or 5432)
        try:
            direct = url.render_as_string(hide_password=False)
            Store(direct).migrate()
            proxied = url.set(host="127.0.0.1", port=proxy.port).render_as_string(
                hide_password=False)
            yield Blip(direct=direct, proxied=proxied, proxy=proxy)
        finally:
            proxy.close()


def sites(root: Path, blip: Blip) -> Iterator[tuple[Site, Site]]:
    """The worker's and the bot's setup: one Redis, one database, two ways to reach it."""
    config = root / "config"
    shutil.copytree(REPO / "config", config)
    (config / "presets" / "standin-blip.yaml").write_text(PRESET)
    gen = redis_db()
    broker = next(gen)
    common = {
        "SPECBENCH_DATA_DIR": str(root / "data"), "SPECBENCH_CONFIG_DIR": str(config),
        "SPECBENCH_SGLANG_PYTHON": sys.executable, "SPECBENCH_LEASE_TTL": "3",
        "SPECBENCH_DIGEST_SCHEDULE": "off",
        "PYTHONPATH": os.pathsep.join((str(STANDIN), str(REPO))),
    }
    worker = Site(root=root, broker=broker,
                  env={**common, "SPECBENCH_DATABASE_URL": blip.direct})
    bot = Site(root=root, broker=broker, env={**common, "SPECBENCH_DATABASE_URL": blip.proxied})
    yield worker, bot
    next(gen, None)


@pytest.mark.timeout(150)
def test_a_database_blip_mid_batch_still_posts_the_summary_once(
    tmp_path: Path, blip: Blip
) -> None:
    setup = sites(tmp_path, blip)
    worker_site, bot_site = next(setup)
    standin = SlackStandin().start()
    store = Store(blip.direct)
    worker: Worker | None = None
    bot: Bot | None = None
    try:
        worker, bot = start_worker_and_bot(worker_site, "blipq", bot_site, standin)
        assert bot.command("run standin-blip").status_code == 200
        standin.wait_for(lambda cs: len([c for c in cs if c.method == "chat.postMessage"]) >= 2,
                         timeout=30)  # the parent and the progress message: the thread is open
        [row] = store.list_batches()
        wait_until(lambda: store.records(row.id), timeout=30, what="the baseline's record")
        blip.proxy.cut()
        wait_until(lambda: (r := store.get_batch(row.id)) is not None and r.state == "done",
                   timeout=60, what="the batch to end while the bot's database is away")
        ending = f"summary of {row.id}: the store is unreachable"
        wait_until(lambda: ending in bot.output(), timeout=30,
                   what="the thread's end to find its store away")
        time.sleep(RETRIED_S)
        assert not summaries(standin.recorded())  # nothing to post it with yet
        blip.proxy.restore()
        standin.wait_for(lambda cs: bool(summaries(cs)) and any(
            c.method == "chat.update" and c.body["ts"] == thread_calls(cs)["parent_ts"]
            and "baseline" in (c.body.get("text") or "") for c in cs), timeout=90)
        time.sleep(2)  # room for a second post, were there one
        assert bot.proc.poll() is None, "the same bot, no restart"
        output = bot.output()
    finally:
        if bot is not None:
            bot.stop()
        if worker is not None:
            worker.stop()
        standin.stop()
        next(setup, None)
    assert len(summaries(standin.recorded())) == 1
    assert len(standin.recorded("files.completeUploadExternal")) == 2  # chart, run records
    parents = [c for c in standin.recorded("chat.postMessage") if not c.body.get("thread_ts")]
    assert len(parents) == 1
    posts = store.slack_posts(row.id)
    assert posts is not None and posts.summary_posted_at is not None
    assert "store is unreachable" in output
    assert "thread of batch" not in output or "failed" not in output


def test_a_thread_tries_its_store_again_at_least_every_max_pause() -> None:
    """The pauses between a thread's tries double from FIRST_PAUSE_S and stop at MAX_PAUSE_S:
    a restored store is found again within MAX_PAUSE_S, however long it was away."""
    outage, failure = Outage("summary of b-1"), OperationalError("SELECT 1", {}, OSError("gone"))
    pauses = [outage.failed(failure) for _ in range(12)]
    assert pauses == [min(FIRST_PAUSE_S * 2 ** n, MAX_PAUSE_S) for n in range(12)]
    assert pauses[-1] == MAX_PAUSE_S
    outage.answered()
    assert outage.failed(failure) == FIRST_PAUSE_S  # a new outage starts from the first pause
