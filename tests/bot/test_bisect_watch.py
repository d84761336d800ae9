"""A watch's confirmed change bisected over the host's stacks (issue 37, docs/contracts.md
"Stacks", `bisect WATCH`): four stand-in stacks installed, the watch's stack upgraded in place
from the first to the last, the change appearing on the third. The beat starts the bisection
with the alert and tells its result once, however often it ticks; `bisect WATCH` finds the same
in two batches; with no stacks between, the reply and the alert name the stacks they would need;
bad input is one line, exit 2, nothing stored. In this process, embedded, on the stand-in SGLang."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.chat.router import Caller, Router
from bot.cli.main import main
from bot.slack.client import SlackPoster, make_client
from bot.slack.watch_beat import SCHEDULER, news
from jobs.batches import stacks
from jobs.batches.dispatch import EmbeddedDispatcher
from jobs.batches.planning import plan_batch
from jobs.commands.context import Context
from jobs.core.stacks import load_stacks
from jobs.core.watch import CONFIRMED, Change, SeriesKey, SeriesPoint, point_stack
from jobs.store import TERMINAL_STATES, Store
from tests.bot.conftest import BOT_TOKEN
from tests.bot.test_stacks import FOUR, REGRESS, SMALL
from tests.standin.harness import Standin, make_standin
from tests.standin.slack_api import SlackStandin
from tests.standin.stacks import make_interpreter, write_stacks_file

THREAD = ("C_LAB", "1700000000.000100")
EAGLE3 = SeriesKey("eagle3", "output_throughput")


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, config_copy: Path,
         ) -> Iterator[Standin]:
    """The four stacks in the host's file; the engine's own interpreter is the newest (the
    watch's stack, upgraded in place); the `regress` preset slower from 0.5.21 on."""
    setup = make_standin(tmp_path, monkeypatch)
    values = {"tag": setup.tag, "info": str(setup.info_file), "bench": SMALL}
    (config_copy / "presets" / "regress.yaml").write_text(REGRESS.format(**values))
    write_stacks_file(tmp_path, FOUR)
    monkeypatch.setenv("SPECBENCH_STACKS", str(tmp_path / "stacks.yaml"))
    monkeypatch.setenv("SPECBENCH_SGLANG_PYTHON", str(make_interpreter(tmp_path, FOUR[1])))
    monkeypatch.setenv("USER", "tester")
    yield setup
    assert setup.leftovers() == []


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def seed_nights(store: Store, watch: int) -> None:
    """Fifteen nights of eagle3 at 82 (±1) on sglang-0.5.19, as this host measured them."""
    found = load_stacks()
    assert found is not None
    fingerprint = stacks.engine_on("sglang", found.get("sglang-0.5.19")).fingerprint()
    stack = point_stack(fingerprint, engine="sglang", host=socket.gethostname(),
                        model_revision=None)
    start = dt.datetime(2026, 11, 1, 2, 0, tzinfo=dt.UTC)
    store.put_points(watch, [SeriesPoint(key=EAGLE3, batch=f"b-old{i}",
                                         at=start + dt.timedelta(days=i),
                                         value=82.0 + (i % 3) - 1, low=80.0, high=84.0,
                                         stack=stack) for i in range(15)])


def stored_change(store: Store, watch: int, like: Change, *, batch: str,
                  **data: object) -> Change:
    """A confirmed change of the watch found by `batch`, as the worker stores one."""
    made = store.put_change(watch, dataclasses.replace(
        like, batch=batch, data={**like.data, **data}, id=None))
    assert made.id is not None
    store.settle_change(made.id, dataclasses.replace(made, state=CONFIRMED))
    return dataclasses.replace(made, state=CONFIRMED)


def wait_ended(store: Store, batch: str) -> None:
    deadline = time.monotonic() + 120
    while (row := store.get_batch(batch)) is None or row.state not in TERMINAL_STATES:
        assert time.monotonic() < deadline, f"batch {batch} did not end"
        time.sleep(0.05)


def servers(setup: Standin) -> list[str]:
    return [note["version"] for note in setup.notes("server")]


@pytest.mark.timeout(240)
def test_a_confirmed_change_is_bisected_to_the_third_of_four_stacks_from_the_beat_and_by_hand(
    host: Standin, capsys: pytest.CaptureFixture[str],
) -> None:
    store = Store()
    assert run(capsys, "watch", "add", "regress")[0] == 0
    store.set_watch_thread(1, *THREAD)
    seed_nights(store, 1)
    code, out, err = run(capsys, "watch", "run", "1", "--format", "json")
    assert code == 0, err
    [change] = [c for c in json.loads(out)["watch_changes"] if c["approach"] == "eagle3"]
    assert change["state"] == "confirmed" and change["direction"] == "regression"
    assert change["stack_diff"] == [{"key": "sglang", "before": "0.5.19", "after": "0.5.23"}]
    # the worker that confirmed it found the host's stacks between its two ends
    assert change["span"] == {"from": "sglang-0.5.19", "to": "sglang-0.5.23",
                              "stacks": ["sglang-0.5.20", "sglang-0.5.21"], "needs": None}
    night = len(servers(host))

    # the beat: the alert names the bisection it started; its result follows once, once ended
    slack = SlackStandin().start()
    dispatcher = EmbeddedDispatcher(store)
    ctx = Context(store=store, caller=SCHEDULER, make_dispatcher=lambda: dispatcher)
    poster = SlackPoster(make_client(BOT_TOKEN, api_url=slack.url))
    try:
        news(store, [], poster=poster, ctx=ctx)
        [started] = [r for r in store.list_batches() if r.plan.bisect]
        assert (started.plan.bisect or {})["change"] == change["id"]
        wait_ended(store, started.id)
        for _ in range(3):  # a tick delivered twice, the beat restarted: each told once
            news(store, [], poster=poster, ctx=ctx)
        texts = [str(c.body["text"]) for c in slack.recorded("chat.postMessage")
                 if c.body.get("thread_ts") == THREAD[1]]
    finally:
        dispatcher.close()
        slack.stop()
    [alert] = [t for t in texts if f"watch 1 (regress), change {change['id']}:" in t]
    assert ("Bisecting this host's stacks between sglang-0.5.19 and sglang-0.5.23 "
            "(sglang-0.5.20, sglang-0.5.21; at most 2 batches): batch "
            f"{started.id}") in alert
    assert [t for t in texts if "bisect " in t] == [
        f"Watch 1, change {change['id']}: bisect {started.id}: first slower on sglang-0.5.21: "
        "sglang 0.5.20 → 0.5.21 (2 batches)"]
    assert [r.id for r in store.list_batches() if r.plan.bisect] == [started.id]
    assert servers(host)[night:] == ["0.5.21", "0.5.21", "0.5.20", "0.5.20"]
    assert store.unposted_changes() == []

    # by hand: `bisect WATCH` takes the watch's newest confirmed change
    code, out, err = run(capsys, "bisect", "1", "--format", "json")
    assert code == 0, err
    found = json.loads(out)["bisect"]
    assert (found["from"], found["to"], found["first"]) == ("sglang-0.5.19", "sglang-0.5.23",
                                                          "sglang-0.5.21")
    assert found["text"] == "first slower on sglang-0.5.21: sglang 0.5.20 → 0.5.21"
    assert [m["stack"] for m in found["measured"]] == ["sglang-0.5.21", "sglang-0.5.20"]
    assert found["batches"] == 2 == found["max_batches"]
    assert (found["watch"], found["change"], found["key"]) == (1, change["id"],
                                                              "output_throughput")

    # with no stacks between: the reply names the stacks it would need, and runs nothing
    write_stacks_file(host.root, [FOUR[2], FOUR[1]])
    before = len(servers(host))
    code, out, err = run(capsys, "bisect", "w1", "--change", f"c{change['id']}")
    assert code == 0, err
    assert ("no stacks between sglang-0.5.19 and sglang-0.5.23: the change came between them "
            "(sglang 0.5.19 → 0.5.23); to narrow it down this host would need a stack with "
            "sglang 0.5.20 or 0.5.21 or 0.5.22") in out
    assert len(servers(host)) == before


def test_with_no_stacks_between_the_alert_names_what_it_would_need_and_starts_nothing(
    host: Standin, capsys: pytest.CaptureFixture[str],
) -> None:
    """The beat with a change whose worker found no stacks between (a change stored as the
    worker stores it); and bad input: a change without a stack diff, an unknown change."""
    store = Store()
    assert run(capsys, "watch", "add", "regress")[0] == 0
    store.set_watch_thread(1, *THREAD)
    good = {"batch": "b-1", "stack": {"engine": "sglang", "sglang": "0.5.19"}}
    bad = {"batch": "b-2", "stack": {"engine": "sglang", "sglang": "0.5.23"}}
    base = Change(key=EAGLE3, batch="b-2", state=CONFIRMED, confirmation="b-3", data={
        "before": {"value": 82.0, "low": 81.0, "high": 83.0, "batches": 15},
        "after": {"value": 60.0, "low": 60.0, "high": 60.0, "batches": 1},
        "delta_pct": -26.8, "direction": "regression", "last_good": good, "first_bad": bad,
        "stack_diff": [{"key": "sglang", "before": "0.5.19", "after": "0.5.23"}],
        "environment": False})
    alone = stored_change(store, 1, base, batch="b-2", span={
        "from": "sglang-0.5.19", "to": "sglang-0.5.23", "stacks": [],
        "needs": "a stack with sglang 0.5.20 or 0.5.21 or 0.5.22"})
    same = stored_change(store, 1, base, batch="b-3", stack_diff=[], span=None)
    for name in ("b-2", "b-3"):  # the nights the changes name, ended
        store.create_batch(batch_id=name, preset="regress", engine="sglang", queue="default",
                           requested_by="tester", plan=plan_batch("regress"))
        store.set_state(name, "done")
    slack = SlackStandin().start()
    dispatcher = EmbeddedDispatcher(store)
    try:
        ctx = Context(store=store, caller=SCHEDULER, make_dispatcher=lambda: dispatcher)
        for _ in range(2):
            news(store, [], poster=SlackPoster(make_client(BOT_TOKEN, api_url=slack.url)),
                 ctx=ctx)
        texts = [str(c.body["text"]) for c in slack.recorded("chat.postMessage")]
        [said] = [t for t in texts if f"change {alone.id}:" in t]
        assert ("No stacks between sglang-0.5.19 and sglang-0.5.23 on this host to bisect it: "
                "to narrow it down it would need a stack with sglang 0.5.20 or 0.5.21 or "
                "0.5.22.") in said
        [other] = [t for t in texts if f"change {same.id}:" in t]
        assert "bisect" not in other.lower()
        assert store.list_batches() == [store.get_batch("b-2"), store.get_batch("b-3")]

        router = Router(dispatcher)
        for args, says in (
            (["bisect", "1", "--change", str(same.id)],
             f"change {same.id} of watch 1 cannot be bisected over stacks: it has no stack "
             "diff (same stack: the host or the workload changed)"),
            (["bisect", "1", "--change", "c99"], "unknown change 'c99'"),
            (["bisect", "1", "--from", "sglang-0.5.19"],
             "bisect WATCH takes the configuration, stacks and values from the watch's change: "
             "--from goes with bisect PRESET APPROACH"),
        ):
            code, out, err = run(capsys, *args)
            assert code == 2 and out == "" and err.count("\n") == 1, err
            assert err.startswith("specbench bisect: error: ") and says in err, err
            reply = router.handle(" ".join(args), caller=Caller(user="U_A", surface="slack"))
            assert reply.exit_code == 2 and says in reply.text, reply.text
            assert "\n" not in reply.text.strip()
    finally:
        dispatcher.close()
        slack.stop()
    assert len(store.list_batches()) == 2  # nothing stored
