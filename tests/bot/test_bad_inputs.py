"""The bad-input catalogue (issue 32, "What a first week finds"): every case of
tests/bad_inputs.yaml through the real surface it names, each with its exit code (chat: its reply)
and a fragment of its one-line message, and nothing stored.

Surfaces: `cli` (`bot.cli.main.main(argv)`, the `specbench` entry, in this process), `console`
(`specbench console -c LINE`, the same way), `chat` (the router the Slack app hands each command
to, with the real engines and store) and `preset` (a preset's YAML written to a fresh copy of the
config dir, then run by name or path through one of the others). A case marked `subprocess` runs
the installed `specbench` console script instead; a few chat cases also go through the Bolt app to
the Slack stand-in (`test_chat_cases_reach_slack_as_one_ephemeral_line`).
"""

from __future__ import annotations

import copy
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.chat.router import Caller, Router
from bot.cli.main import main
from jobs.batches.dispatch import EmbeddedDispatcher
from jobs.core.config_files import load_yaml
from jobs.store import Store
from tests.conftest import REPO

CATALOGUE = Path(__file__).resolve().parents[1] / "bad_inputs.yaml"
SURFACES = ("cli", "console", "chat", "preset")
_REPEAT = re.compile(r"\{\{(.+?)\*(\d+)\}\}")
_DATA = load_yaml(CATALOGUE.read_text(encoding="utf-8"))  # libyaml: each worker collects it


@dataclass(frozen=True)
class Case:
    """One bad input: where it is typed, what it needs, what must come back."""

    id: str
    surface: str
    exit: int
    message: str
    argv: tuple[str, ...] = ()
    line: str = ""
    preset: dict[str, Any] | None = None
    via: str = "cli"  # a preset case: cli (run NAME), path (run FILE), console or chat
    args: tuple[str, ...] = ()  # a preset case: what follows `run NAME`
    env: dict[str, str | None] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    lines: int | None = 1  # lines of the message (stderr, or the reply); None: any number
    subprocess: bool = False
    issue: str | None = None  # the issue's item it comes from, e.g. "32.4"


def load_cases() -> list[Case]:
    return [Case(**{**raw, "argv": tuple(raw.get("argv", ())), "args": tuple(raw.get("args", ()))})
            for raw in _DATA["cases"]]


CASES = load_cases()


@dataclass
class Place:
    """A case's own folders: its data dir, a config dir copy, a plain file."""

    root: Path

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def config(self) -> Path:
        return self.root / "config"

    @property
    def file(self) -> Path:
        return self.root / "a-file"

    def expand(self, value: Any) -> Any:
        """`{{x*N}}` repeated, `{data}`, `{config}`, `{file}`, `{tmp}` placed, in every string."""
        if isinstance(value, dict):
            return {self.expand(k): self.expand(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.expand(v) for v in value]
        if not isinstance(value, str):
            return value
        value = _REPEAT.sub(lambda m: m[1] * int(m[2]), value)
        for name, path in (("data", self.data), ("config", self.config), ("file", self.file),
                           ("tmp", self.root)):
            value = value.replace("{" + name + "}", str(path))
        return value


def preset_name(case: Case) -> str:
    return re.sub(r"[^a-z0-9-]", "-", case.id.lower())


def write_preset(case: Case, place: Place) -> Path:
    """The case's preset file: raw text (in an encoding) or a base with keys set and unset."""
    spec = case.preset or {}
    name = place.expand(spec.get("name", preset_name(case)))
    folder = place.root if case.via == "path" else place.config / "presets"
    path = folder / f"{spec.get('file_name', name)}.yaml"
    if "text" in spec:
        text = place.expand(spec["text"]).replace("{name}", name)
        path.write_bytes(text.encode(spec.get("encoding", "utf-8")))
        return path
    data = copy.deepcopy(_DATA["presets"][spec.get("base", "local")])
    data["name"] = name
    for dotted, value in spec.get("set", {}).items():
        _set(data, dotted, place.expand(value))
    for dotted in spec.get("unset", ()):
        _set(data, dotted, None, delete=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False, width=10_000), encoding="utf-8")
    return path


def _set(data: Any, dotted: str, value: Any, *, delete: bool = False) -> None:
    *parents, last = [int(p) if p.isdigit() else p for p in dotted.split(".")]
    for part in parents:
        data = data[part]
    if delete:
        del data[last]
    else:
        data[last] = value


@dataclass(frozen=True)
class Outcome:
    code: int
    out: str
    err: str


def run_case(case: Case, place: Place, capsys: pytest.CaptureFixture[str]) -> Outcome:
    """The case through its surface; a preset case through the surface its `via` names."""
    surface, argv, line = case.surface, list(case.argv), case.line
    if case.surface == "preset":
        path = write_preset(case, place)
        target = str(path) if case.via == "path" else path.stem
        surface = "cli" if case.via == "path" else case.via
        argv = ["run", target, *case.args]
        line = " ".join(["run", target, *case.args])
    if surface == "console":
        argv = ["console", "-c", line, *([] if case.surface == "preset" else argv)]
    argv = [place.expand(a) for a in argv]
    if case.subprocess:
        return _subprocess(argv, place)
    if surface == "chat":
        return _chat(place.expand(line))
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's refusals
        code = exc.code if isinstance(exc.code, int) else 2
    captured = capsys.readouterr()
    return Outcome(code, captured.out, captured.err)


def _chat(line: str) -> Outcome:
    """The line as the Slack app hands it to the router, with the real engines and store."""
    dispatcher = EmbeddedDispatcher(Store())
    try:
        reply = Router(dispatcher).handle(
            line, caller=Caller(user="U_TESTER", channel="C_LAB", surface="slack"))
    finally:
        dispatcher.close()
    assert reply.started is None, f"a batch started: {reply.started}"
    return Outcome(reply.exit_code, "", reply.text)


def specbench() -> list[str]:
    """The installed console script, else the module."""
    script = Path(sys.executable).parent / "specbench"
    return [str(script)] if script.exists() else [sys.executable, "-m", "bot.cli.main"]


def _subprocess(argv: list[str], place: Place) -> Outcome:
    env = {**os.environ, "PYTHONPATH": str(REPO)}  # this checkout's code, whatever is installed
    done = subprocess.run([*specbench(), *argv], cwd=place.root, env=env,
                          capture_output=True, text=True, timeout=120)
    return Outcome(done.returncode, done.stdout, done.stderr)


def stored_batches(data: Path, table: str = "batches") -> int:
    database = data / "specbench.db"
    if not database.exists():
        return 0
    with sqlite3.connect(database) as db:
        found = db.execute("select name from sqlite_master where name = ?", (table,)).fetchone()
        count = None if found is None else db.execute(f"select count(*) from {table}")
        return 0 if count is None else int(count.fetchone()[0])


def assert_nothing_stored(place: Place) -> None:
    if place.data.is_dir():
        assert stored_batches(place.data) == 0
        assert stored_batches(place.data, "watches") == 0  # a regression watch (issue 34)
        logs = place.data / "logs"
        started = [p.name for p in logs.iterdir() if p.name.startswith("b-")] \
            if logs.is_dir() else []
        assert started == [], f"server logs of a batch: {started}"


def prepare(case: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Place:
    place = Place(tmp_path)
    shutil.copytree(REPO / "config", place.config)
    place.file.write_text("a plain file, where a folder is needed\n")
    for name, text in case.files.items():
        (tmp_path / name).write_text(place.expand(text), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SPECBENCH_DATA_DIR", str(place.data))
    monkeypatch.setenv("SPECBENCH_CONFIG_DIR", str(place.config))
    monkeypatch.setenv("USER", "tester")
    for name, value in case.env.items():
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, place.expand(value))
    return place


@pytest.mark.timeout(120)  # a hang guard: a case that ran would also have stored its batch
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(case: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                   capsys: pytest.CaptureFixture[str]) -> None:
    place = prepare(case, tmp_path, monkeypatch)
    got = run_case(case, place, capsys)
    said = got.err.strip()

    assert got.code == case.exit, (got.code, said[-2000:], got.out[-2000:])
    assert "Traceback" not in got.err + got.out and "internal error" not in said, said[-3000:]
    if case.lines is not None:
        assert len(said.splitlines()) == case.lines, said[-3000:]
    assert place.expand(case.message).replace("{name}", preset_name(case)) in said, said[-3000:]
    assert_nothing_stored(place)


def test_the_catalogue_holds_every_surface_and_the_issues_cases() -> None:
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids)), "an id is repeated"
    assert {c.surface for c in CASES} == set(SURFACES)
    assert {c.via for c in CASES if c.surface == "preset"} >= {"cli", "path", "console", "chat"}
    assert len([c for c in CASES if c.issue is None]) >= 100
    assert {c.issue for c in CASES if c.issue} >= {"32.3", "32.4", "32.5"}
    for case in CASES:
        assert case.surface in SURFACES, case.id
        assert case.message, case.id
        assert case.exit in (1, 2), case.id


SLACK_CASES = ("issue-threads-100000-chat", "issue-metric-banana-chat", "chat-path-traversal",
               "chat-line-too-long", "preset-approach-name-chat", "preset-bounds-through-chat")


@pytest.mark.timeout(120)
def test_chat_cases_reach_slack_as_one_ephemeral_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A few chat cases as Slack sends them: a signed slash command to the Bolt app, whose one
    ephemeral line reaches the Slack stand-in; nothing is stored."""
    from tests.bot.conftest import BOT_TOKEN, SIGNING_SECRET, start_bot
    from tests.standin.slack_api import SlackStandin

    cases = [c for c in CASES if c.id in SLACK_CASES]
    assert len(cases) == len(SLACK_CASES)
    place = prepare(cases[0], tmp_path, monkeypatch)
    lines = {}
    for case in cases:
        if case.surface == "preset":
            lines[case.id] = f"run {write_preset(case, place).stem}"
        else:
            lines[case.id] = place.expand(case.line)
    monkeypatch.setenv("SLACK_SIGNING_SECRET", SIGNING_SECRET)
    monkeypatch.setenv("SLACK_BOT_TOKEN", BOT_TOKEN)
    standin = SlackStandin().start()
    dispatcher = EmbeddedDispatcher(Store())
    from jobs.engines import get_engine

    bot = start_bot(dispatcher, standin, engine_for=get_engine)
    try:
        for n, case in enumerate(cases):
            user = f"U_CASE{n}"
            assert bot.command(lines[case.id], user=user).status_code == 200
            calls = standin.wait_for(lambda calls, user=user: any(
                c.method == "chat.postEphemeral" and c.body.get("user") == user for c in calls),
                timeout=30)
            (reply,) = [c for c in calls if c.method == "chat.postEphemeral"
                        and c.body.get("user") == user]
            text = reply.body["text"].strip()
            assert "\n" not in text and case.message.replace("{name}", preset_name(case)) \
                in text, (case.id, text)
        assert not standin.recorded("chat.postMessage")  # no thread was opened
    finally:
        bot.stop()
        dispatcher.close()
        standin.stop()
    assert_nothing_stored(place)
