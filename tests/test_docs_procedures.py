"""The procedures in docs/ and the README work as written (issue 32, item 6).

Each procedure is a section of a page (its heading and what follows, up to the next heading)
and its command blocks. What the code can tell is checked against the code itself: the README's
command table is the CLI's, every `specbench X` a page names exists, a section that starts a
worker sends its batches to the queue that worker serves, and an install line installs what
its section runs (`jobs.extras`, `jobs.batches.planning.needs`). Then the procedures that can
run here (no Docker, no Slack) are followed on a fresh clone: deploying.md's "Without Docker"
with a real Redis and a real worker, on an installation that has only the extras its install
line names, and every `docker compose exec|run` command that needs neither a GPU nor a batch.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from jobs.extras import EXTRAS, PROCESSES
from tests.test_deployment import _segments, _specbench_args, _subcommands

REPO = Path(__file__).resolve().parents[1]
PAGES = [*sorted((REPO / "docs").glob("*.md")), REPO / "README.md"]
_INSTALL = re.compile(r"""pip install ['"]?\.\[([a-z,]+)\]""")
_OPTION = re.compile(r"(?<![\w-])(--?[a-z][a-z-]*)")


@dataclass
class Section:
    """One heading of a page and its command lines (prompts and comments left in)."""

    page: str
    title: str
    lines: list[str] = field(default_factory=list)
    prose: list[str] = field(default_factory=list)

    @property
    def where(self) -> str:
        return f"{self.page} \u00a7 {self.title}"

    def commands(self) -> Iterator[list[str]]:
        """Each command of the section's blocks as tokens, in order."""
        for line in self.lines:
            yield from (s for s in _segments(line) if s)

    def exported(self) -> dict[str, str]:
        env: dict[str, str] = {}
        for tokens in self.commands():
            if tokens[:1] == ["export"]:
                env.update(t.split("=", 1) for t in tokens[1:] if "=" in t)
        return env

    def installed(self) -> set[str] | None:
        """The extras its install line names (in a block, or in a sentence's code span)."""
        found = [m.group(1) for line in [*self.lines, *self.prose]
                 for m in _INSTALL.finditer(line)]
        return {e for group in found for e in group.split(",")} if found else None


def sections(path: Path) -> list[Section]:
    found = [Section(page=path.name, title=path.stem)]
    inside = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            inside = not inside
        elif inside:
            found[-1].lines.append(line.strip().removeprefix("$ "))
        elif line.startswith("#"):
            found.append(Section(page=path.name, title=line.lstrip("#").strip()))
        else:
            found[-1].prose.append(line)
    return found


ALL = [s for page in PAGES for s in sections(page)]


def _option_value(args: list[str], option: str) -> str | None:
    for i, token in enumerate(args):
        if token == option and i + 1 < len(args):
            return args[i + 1]
        if token.startswith(option + "="):
            return token.split("=", 1)[1]
    return None


# --- what the code can tell ------------------------------------------------------------------


def test_the_readmes_commands_are_the_clis() -> None:
    """Every command of the CLI has a row, every row's commands and options exist, every option
    of a command is in its row, and every `specbench X` a page names (in prose too) exists."""
    rows: dict[str, set[str]] = {}
    for line in (REPO / "README.md").read_text(encoding="utf-8").splitlines():
        if line.startswith("| `specbench "):
            cell = line.split(" | ")[0]
            for span in re.findall(r"`(specbench [^`]+)`", cell):
                words = span.replace("\\|", "|").split()
                rows[words[1]] = set(_OPTION.findall(" ".join(words[2:])))
    cli = {name: {o for a in sub._actions for o in a.option_strings if o not in ("-h", "--help")}
           for name, sub in _subcommands().items()}
    assert set(rows) == set(cli), f"README rows {sorted(rows)}, CLI {sorted(cli)}"
    for name, options in cli.items():
        assert rows[name] == options, f"specbench {name}: README {rows[name]}, CLI {options}"
    named = {(page.name, name) for page in PAGES
             for name in re.findall(r"`specbench ([a-z][a-z-]*)",
                                    page.read_text(encoding="utf-8"))}
    assert len(named) > len(cli), "the pages name the commands"
    assert {(page, name) for page, name in named if name not in cli} == set()


def _worker_queues(section: Section) -> set[str]:
    default = section.exported().get("SPECBENCH_QUEUE", "default")
    return {_option_value(args, "--queue") or default for tokens in section.commands()
            if (args := _specbench_args(tokens)) and args[:1] == ["worker"]}


def _run_queue(section: Section, args: list[str]) -> str:
    from jobs.core.plans import load_preset

    return (_option_value(args, "--queue") or load_preset(args[1]).queue
            or section.exported().get("SPECBENCH_QUEUE", "default"))


def test_each_procedure_sends_its_batches_to_the_queue_its_worker_serves() -> None:
    checked = 0
    for section in ALL:
        serves = _worker_queues(section)
        for tokens in section.commands() if serves else ():
            args = _specbench_args(tokens)
            if args and args[:1] == ["run"]:
                queue = _run_queue(section, args)
                assert queue in serves, (
                    f"{section.where}: `{shlex.join(tokens)}` goes to queue {queue!r}; the "
                    f"section's worker serves {sorted(serves)}")
                checked += 1
    assert checked, "no procedure starts a worker and runs a batch: nothing was checked"


def _needs(section: Section) -> dict[str, str]:
    """extra -> what in the section needs it, by the code's own rules."""
    from jobs.batches.planning import needs, plan_batch

    found: dict[str, str] = {}
    for tokens in section.commands():
        args = _specbench_args(tokens)
        if tokens[:3] == ["python", "-m", "bot.slack.beat"]:
            found.update((extra, "beat") for extra, _ in PROCESSES["beat"])
        if not args:
            continue
        if args[0] in PROCESSES:
            found.update((extra, args[0]) for extra, _ in PROCESSES[args[0]])
        if args[0] == "run":
            found.update((extra, what) for extra, what in needs(plan_batch(args[1])))
        if "--chart" in args:
            found["charts"] = "--chart"
    return found


def _makefile_demo() -> Section:
    """`make demo` (README's quickstart) as a section: its EXTRAS installed, its runs."""
    text = (REPO / "Makefile").read_text(encoding="utf-8")
    extras = re.search(r"^EXTRAS\s*:=\s*(\S+)", text, re.MULTILINE)
    demo = re.search(r"^demo:.*\n((?:\t.*\n)+)", text, re.MULTILINE)
    assert extras and demo
    runs = [re.sub(r"^.*\$\(VENV\)/bin/specbench", "specbench", line.strip())
            for line in demo.group(1).splitlines()]
    return Section(page="Makefile", title="demo", lines=[f'pip install ".[{extras.group(1)}]"',
                                                          *runs])


def test_each_install_line_installs_what_its_procedure_runs() -> None:
    """deploying.md's "Without Docker", `make demo` (README's quickstart), and any other."""
    sections = [s for s in [*ALL, _makefile_demo()] if s.installed() is not None]
    assert {s.page for s in sections} >= {"deploying.md", "Makefile"}, sections
    for section in sections:
        installed = section.installed() or set()
        assert installed <= set(EXTRAS) | {"dev"}, section.where
        missing = {extra: what for extra, what in _needs(section).items()
                   if extra not in installed}
        assert not missing, f"{section.where}: installs {sorted(installed)}, needs {missing}"


# --- followed on a fresh clone ---------------------------------------------------------------

UNINSTALLED = '''import os, sys
for name in filter(None, os.environ.get("SPECBENCH_TEST_UNINSTALLED", "").split(",")):
    sys.modules[name] = None  # not installed: import fails, find_spec finds nothing
'''


def fresh_clone(dest: Path) -> Path:
    """`git clone` of the repository, with the working tree's changes on top (what a clone of
    it will hold): no virtual environment, data dir, cache or build output."""
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(dest)], check=True, timeout=120)
    listed = subprocess.run(["git", "ls-files", "--modified", "--others", "--exclude-standard",
                             "-z"], cwd=REPO, capture_output=True, check=True, timeout=60)
    for name in filter(None, listed.stdout.decode().split("\0")):
        if (REPO / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, dest / name)
        else:
            (dest / name).unlink(missing_ok=True)
    return dest


class Procedure:
    """A section's commands run in a clone, on an installation with only `installed` extras
    (the others' modules made unimportable in every process)."""

    def __init__(self, clone: Path, root: Path, *, installed: set[str],
                 env: dict[str, str]) -> None:
        self.clone = clone
        site = root / "site"
        site.mkdir()
        (site / "sitecustomize.py").write_text(UNINSTALLED, encoding="utf-8")
        kept = {m for e in installed if e in EXTRAS for m in EXTRAS[e]}
        absent = sorted({m for e, mods in EXTRAS.items() if e not in installed for m in mods}
                        - kept)
        base = {k: v for k, v in os.environ.items()
                if not k.startswith(("SPECBENCH_", "SLACK_", "STANDIN_"))}
        self.env = {**base, "PYTHONPATH": os.pathsep.join((str(site), str(clone))),
                    "SPECBENCH_TEST_UNINSTALLED": ",".join(absent),
                    "SPECBENCH_DATA_DIR": str(root / "data"), **env}
        self.procs: list[tuple[subprocess.Popen[str], Path]] = []

    def argv(self, tokens: list[str]) -> list[str]:
        """`specbench` and `python` as this installation's."""
        head = {"specbench": [sys.executable, "-m", "bot.cli.main"], "python": [sys.executable],
                "python3": [sys.executable]}
        return [*head.get(tokens[0], tokens[:1]), *tokens[1:]]

    def run(self, tokens: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.argv(tokens), cwd=self.clone, env=self.env, text=True,
                              capture_output=True, timeout=120)

    def start(self, tokens: list[str], *, until: str) -> subprocess.Popen[str]:
        """Start a process and wait until its output says `until` (its exit fails the test)."""
        log = self.clone / f"proc-{len(self.procs)}.log"
        out = open(log, "w")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(self.argv(tokens), cwd=self.clone, env=self.env, text=True,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append((proc, log))
        self.wait_for(proc, log, until, what=shlex.join(tokens))
        return proc

    @staticmethod
    def wait_for(proc: subprocess.Popen[str], log: Path, text: str, *, what: str,
                 refuse: str | None = None) -> str:
        deadline = time.monotonic() + 240  # a guard against a hang, not a measured wait
        while time.monotonic() < deadline:
            seen = log.read_text(errors="replace")
            if text in seen:
                return seen
            assert refuse is None or refuse not in seen, f"`{what}`: {seen[-3000:]}"
            assert proc.poll() is None, f"`{what}` exited {proc.returncode}: {seen[-3000:]}"
            time.sleep(0.1)
        raise AssertionError(f"`{what}` never said {text!r}: {log.read_text()[-3000:]}")

    def close(self) -> None:
        for proc, _ in reversed(self.procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()


def _section(page: str, title: str) -> Section:
    (found,) = [s for s in ALL if s.page == page and s.title == title]
    return found


@pytest.fixture
def broker() -> Iterator[str]:
    from tests.jobs.test_distributed import redis_db

    gen = redis_db()
    yield next(gen)
    next(gen, None)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_procedures_that_run_here_work_on_a_fresh_clone(tmp_path: Path, broker: str) -> None:
    """On one fresh clone: deploying.md's "Without Docker" as written, with a real Redis (the
    install line's extras and no others, the worker it starts, the bot and beat up to where they
    need Slack, the batch it runs taken by that worker, then cancelled: the demo itself is
    test_cpu_demo's); then every `docker compose exec|run` command that runs here, against the
    same store (a command several pages give, such as `specbench status`, once); then README's
    example session."""
    section = _section("deploying.md", "Without Docker")
    clone = fresh_clone(tmp_path / "specbench")
    procedure = Procedure(clone, tmp_path, installed=section.installed() or set(),
                          env={"SPECBENCH_BROKER_URL": broker, **section.exported()})
    ran: list[str] = []
    try:
        for tokens in section.commands():
            _follow(procedure, section, tokens)
            ran.append(shlex.join(tokens))
        assert any("specbench run" in r for r in ran) and any("worker" in r for r in ran), ran
        compose = _compose_commands()
        assert {"specbench status", "specbench presets"} <= {shlex.join(c) for _, c in compose}
        assert any("migrate()" in shlex.join(c) for _, c in compose), compose
        pages: dict[tuple[str, ...], list[str]] = {}  # a command on several pages: run once
        for where, inner in compose:
            pages.setdefault(tuple(inner), []).append(where)
        for command, wheres in pages.items():
            done = procedure.run(list(command))
            assert done.returncode == 0, (
                f"{wheres}: `{shlex.join(command)}`: {done.stderr[-2000:]}")
    finally:
        procedure.close()
    analyze = [tokens for s in ALL if s.page == "README.md" for tokens in s.commands()
               if (_specbench_args(tokens) or [""])[0] == "analyze"]
    assert analyze, "README's example session"
    for tokens in analyze:
        done = procedure.run(tokens)
        assert done.returncode == 0 and "batch b-seed-5254" in done.stdout, done.stderr


def _follow(procedure: Procedure, section: Section, tokens: list[str]) -> None:
    """One command of "Without Docker", as far as it can go here."""
    args = _specbench_args(tokens)
    if tokens[:2] == ["pip", "install"] or tokens[:1] == ["export"]:
        return  # the installation is this one, less the extras it does not name
    if args and args[0] == "worker":
        procedure.start(tokens, until="ready.")
    elif tokens[:3] == ["python", "-m", "bot.slack.beat"]:
        beat = procedure.start(tokens, until="beat starting")
        os.killpg(beat.pid, signal.SIGTERM)
    elif args and args[0] == "bot":  # no Slack here: it must get as far as asking for it
        done = procedure.run(tokens)
        assert (done.returncode, done.stderr.strip()) == (
            1, "specbench bot: error: SLACK_BOT_TOKEN is not set"), done.stderr
    elif args and args[0] == "run":
        _taken_by_the_worker(procedure, tokens)
    else:
        pytest.fail(f"{section.where}: no way to follow `{shlex.join(tokens)}` here")


def _taken_by_the_worker(procedure: Procedure, tokens: list[str]) -> None:
    """`run` until the worker starts its batch, then Ctrl-C: the batch is cancelled, its
    servers stopped, the report printed (exit 1, interrupted)."""
    log = procedure.clone / "run.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(procedure.argv(tokens), cwd=procedure.clone, env=procedure.env,
                                text=True, stdout=subprocess.DEVNULL, stderr=out)
        try:
            procedure.wait_for(proc, log, " started on ", what=shlex.join(tokens),
                               refuse="which no live worker serves yet")
            proc.send_signal(signal.SIGINT)
            assert proc.wait(timeout=120) == 1
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert "cancelling batch" in log.read_text()


# The commands of `docker compose exec|run SERVICE ...` that run here as they are: no GPU, no
# Slack, no batch of the reader's own (`show b-7f3a`, `cancel b-7f3a` name one).
HERE = {"presets", "status", "digest", "history"}


def _compose_commands() -> list[tuple[str, list[str]]]:
    found = []
    for section in ALL:
        for tokens in section.commands():
            if tokens[:2] != ["docker", "compose"] or tokens[2:3] not in (["exec"], ["run"]):
                continue
            rest = tokens[3:]
            while rest and rest[0].startswith("-"):
                rest = rest[1:]
            inner = rest[1:]  # past the service
            args = _specbench_args(inner) if inner else None
            if (args and args[0] in HERE) or inner[:2] == ["python", "-c"]:
                found.append((section.where, inner))
    return found


def test_history_the_readme_names_is_a_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`specbench history` (README: "show, compare, history, status and the digest") lists the
    batches people started, as chat's `history` does: the command as typed, in a process of its
    own; its `--format json` through the same entry in this process (tests/builders.py)."""
    import json

    from jobs.store import Store
    from tests.builders import specbench_here
    from tests.conftest import make_plan

    with Store() as store:
        store.migrate()
        store.create_batch(batch_id="b-hist", preset="eagle3", engine="local",
                           queue="default", requested_by="U_ALICE", plan=make_plan())
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    shown = [subprocess.run([sys.executable, "-m", "bot.cli.main", "history"], cwd=tmp_path,
                            env=env, capture_output=True, text=True, timeout=120),
             specbench_here(capsys, "history", "--format", "json", cwd=tmp_path)]
    assert [s.returncode for s in shown] == [0, 0], [s.stderr for s in shown]
    assert "b-hist" in shown[0].stdout and "eagle3" in shown[0].stdout
    assert [(r["batch"], r["preset"], r["by"]) for r in json.loads(shown[1].stdout)] == [
        ("b-hist", "eagle3", "U_ALICE")]
