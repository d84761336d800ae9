"""Preflight runs where SGLang is (docs/contracts.md "Real SGLang"): on the worker, when it takes
the batch.

A real `specbench bot --http` whose host has no SGLang at all (no interpreter, no package on its
path) takes `/specbench run` for SGLang presets: it checks the preset and the knobs, nothing more.
The `specbench worker`, which has the stand-in SGLang, preflights the batch; a baseline its
release refuses ends the batch `refused`, the reason posted in the thread, and `specbench run`
exits 2. Skipped without Redis unless SPECBENCH_REQUIRE_REDIS=1.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jobs.store import Store
from tests.bot.conftest import summaries
from tests.bot.test_distributed_bot import Bot
from tests.builders import standin_preset
from tests.jobs.test_distributed import REPO, Site, Worker, cli, make_site, redis_db, wait_until
from tests.standin.slack_api import SlackStandin

pytestmark = [pytest.mark.redis, pytest.mark.slow]


def preset(name: str, *, info: Path, server_args: dict[str, Any] | None = None) -> str:
    return standin_preset(
        name, description="a stand-in batch whose flags only the worker can check",
        queue="preq", overridable=["mem-fraction-static"], server_args=server_args,
        env={"STANDIN_STARTUP_S": "0.2", "STANDIN_INFO_FILE": str(info)},
        approaches=[{"name": "faster", "hypothesis": "the stand-in's throughput knob",
                     "env": {"STANDIN_THROUGHPUT": "120"}}],
    )


# In no release (0.5.2 .. 0.5.23): the issue's own example of a flag the preflight refuses.
NO_SUCH_FLAG = "enable-custom-allreduce-pcie"


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    info = tmp_path / "standin-info.jsonl"
    presets = {"standin-pre": preset("standin-pre", info=info),
               "standin-refused": preset("standin-refused", info=info,
                                         server_args={NO_SUCH_FLAG: True})}
    gen = redis_db()
    yield make_site(tmp_path, next(gen), presets)
    next(gen, None)


def without_sglang(site: Site) -> Site:
    """The bot's host: no SGLang interpreter, no sglang package on its path."""
    env = {**site.env, "SPECBENCH_SGLANG_PYTHON": "/nonexistent/sglang-python",
           "PYTHONPATH": str(REPO)}
    return dataclasses.replace(site, env=env)


def launches(site: Site) -> list[dict[str, object]]:
    """The stand-in servers started (each writes a line to its info file)."""
    path = site.root / "standin-info.jsonl"
    if not path.is_file():
        return []
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [entry for entry in lines if entry["role"] == "server"]


@pytest.mark.timeout(150)
def test_the_worker_preflights_and_a_bot_without_sglang_only_checks_preset_and_knobs(
    site: Site,
) -> None:
    standin = SlackStandin().start()
    worker = Worker(site, "preq")
    store = Store(site.database)
    bot: Bot | None = None
    try:
        bot = Bot(without_sglang(site), standin)
        # A bad knob is the bot's to refuse: privately, nothing stored.
        assert bot.command("run standin-pre --set nope=1").status_code == 200
        standin.wait_for(lambda cs: any("nope" in (c.body.get("text") or "") for c in cs),
                         timeout=60)
        assert store.list_batches() == []

        # A good batch runs: the bot asked no SGLang, the worker did.
        assert bot.command("run standin-pre").status_code == 200
        standin.wait_for(lambda cs: len(summaries(cs)) == 1, timeout=60)
        [good] = store.list_batches()
        assert good.state == "done" and good.preset == "standin-pre"
        started = len(launches(site))
        assert started >= 2  # the baseline's server and the approach's

        # A baseline the worker's release refuses: accepted by the bot, refused by the worker.
        assert bot.command("run standin-refused").status_code == 200
        refused = wait_until(
            lambda: next((r for r in store.list_batches() if r.preset == "standin-refused"
                          and r.state == "refused"), None),
            timeout=30, what="the worker to refuse the batch")
        assert NO_SUCH_FLAG in (refused.error or "")
        assert "unrecognized arguments" in (refused.error or "")
        assert store.records(refused.id) == []
        assert len(launches(site)) == started  # no server was started for it

        def refusal_posted(calls: list) -> bool:  # type: ignore[type-arg]
            return any(c.method == "chat.postMessage" and c.body.get("thread_ts")
                       and "refused" in (c.body.get("text") or "")
                       and NO_SUCH_FLAG in (c.body.get("text") or "") for c in calls)

        standin.wait_for(refusal_posted, timeout=30)
        assert len(summaries(standin.recorded())) == 1  # no summary for a refused batch
        standin.wait_for(lambda cs: any(
            c.method == "chat.update" and refused.id in (c.body.get("text") or "")
            and "refused" in (c.body.get("text") or "") for c in cs), timeout=60)

        # The CLI in distributed mode: the same refusal is its exit 2, with the reason.
        done = cli(site, "run", "standin-refused", timeout=90)
        assert done.returncode == 2, done.stderr
        assert "refused" in done.stderr and NO_SUCH_FLAG in done.stderr
        assert "Traceback" not in done.stderr
    finally:
        if bot is not None:
            bot.stop()
        worker.stop()
        standin.stop()
    assert bot is not None and "cannot import sglang" not in bot.output()
