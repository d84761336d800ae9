"""The chat line parser shared by Slack and the console: a line in, reply data out.

`Router.handle` refuses a line over `MAX_LINE_CHARS` before reading it, splits
`[/specbench] COMMAND ...`, checks the allow-lists (every command but `help`: `Access.refusal`),
calls the command (`jobs.commands`) and renders its data with the shared views; it never sends
anything itself. A `run` or `retry` reply names the batch it started: the surface then opens the
batch's thread (bot.thread).
"""

from __future__ import annotations

import difflib
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bot import views
from bot.chat.bisect_line import parse_bisect
from bot.chat.options import SHOWN_CHARS, flag, parse_options, valued
from bot.chat.probe_line import parse_probe
from bot.chat.watch_line import access_name, parse_watch
from bot.thread.messages import Upload
from jobs.batches.dispatch import Dispatcher, Submitted
from jobs.commands import CHAT_COMMANDS as COMMANDS
from jobs.commands import (
    bisect,
    cancel,
    compare,
    digest,
    help,
    history,
    presets,
    probe,
    retry,
    run,
    show,
    status,
    watch,
    watch_run,
)
from jobs.commands.context import Access, Caller, Context
from jobs.engines.base import Engine
from jobs.errors import InfraError, UserError
from jobs.redaction import redact_urls
from jobs.store.outage import describe, is_outage

__all__ = ["COMMANDS", "Access", "Caller", "Reply", "Router", "parse_options", "split_line"]

PREFIX = "/specbench"
MAX_LINE_CHARS = 4_000
"""The longest line a chat surface reads. Splitting a line costs CPU in proportion to its length
(shlex is pure Python: a 900,000-character line took 12 s, while every other command waited),
and no command needs more: a preset name is at most 128 characters, and a few `--set` values fit
many times over."""


@dataclass(frozen=True)
class Reply:
    """What a command answers: text for every surface, blocks for Slack when it has them."""

    text: str
    blocks: list[dict[str, Any]] | None = None
    ephemeral: bool = True
    started: Submitted | None = None
    exit_code: int = 0  # the console's: 0 done, 1 infrastructure (broker away), 2 bad input
    warnings: tuple[str, ...] = ()
    uploads: tuple[Upload, ...] = ()  # files for the reply's thread (Slack)
    watch: int | None = None  # a watch just added: the reply's thread becomes its thread


@dataclass
class Router:
    dispatcher: Dispatcher
    access: Access = field(default_factory=Access)
    engine_for: Callable[[str], Engine] | None = None

    def handle(self, line: str, *, caller: Caller, idempotency_key: str | None = None) -> Reply:
        """Route one line; a UserError (exit 2), or an InfraError such as an unreachable broker
        or a database outage (exit 1), becomes an ephemeral error reply."""
        if len(line) > MAX_LINE_CHARS:
            return _error(f"that line is {len(line):,} characters long; a command is at most "
                          f"{MAX_LINE_CHARS:,}")
        try:
            words = split_line(line)
        except ValueError as exc:
            return _error(f"cannot read that line: {exc}")
        if not words or words[0] not in COMMANDS:
            return _unknown(words[0] if words else "")
        command, args = words[0], words[1:]
        ctx = Context(store=self.dispatcher.store, caller=caller, access=self.access,
                      make_dispatcher=lambda: self.dispatcher, engine_for=self.engine_for)
        try:
            judged = access_name(args) if command == "watch" else command
            if refusal := self.access.refusal(caller, judged):
                return _error(f"refused: {refusal}")
            handler: Callable[[list[str], Context, str | None], Reply] = _HANDLERS[command]
            return handler(args, ctx, idempotency_key)
        except UserError as exc:
            return _error(str(exc))
        except InfraError as exc:  # the broker away: said as the CLI says it, never silence
            return Reply(text=views.error(str(exc)), exit_code=exc.exit_code)
        except Exception as exc:
            if not is_outage(exc):
                raise
            return Reply(text=views.error(f"cannot reach the database right now "
                                          f"({redact_urls(describe(exc))}); try again shortly"),
                         exit_code=1)


@dataclass(frozen=True)
class _RunOptions:
    """What `run` and `retry` are given: their words, `--set`s (read once, here), `--reps`."""

    words: list[str]
    sets: run.Overrides
    reps: int | None
    rerun_known: bool


def _run_options(args: list[str], *, usage: str, words: int) -> _RunOptions:
    """`--set`, `--reps` and `--rerun-known`, and exactly `words` other words."""
    rerun_known, args = flag(args, "--rerun-known")
    _, sets, reps, rest = parse_options(args, usage=usage)
    if len(rest) != words:
        raise UserError(f"usage: {usage}")
    return _RunOptions(words=rest, sets=run.parse_sets(sets), reps=reps, rerun_known=rerun_known)


def _run(args: list[str], ctx: Context, key: str | None) -> Reply:
    usage = ("run PRESET [--set KNOB=VALUE]... [--reps N] [--rerun-known] [--stack NAME] "
             "[--against NAME]")
    stack, args = valued(args, "--stack", usage=usage)
    against, args = valued(args, "--against", usage=usage)
    got = _run_options(args, usage=usage, words=1)
    return _started(run.run(ctx, run.RunArgs(preset=got.words[0], sets=got.sets, reps=got.reps,
                                             rerun_known=got.rerun_known, stack=stack,
                                             against=against), idempotency_key=key))


def _retry(args: list[str], ctx: Context, key: str | None) -> Reply:
    got = _run_options(args, words=2, usage="retry BATCH APPROACH[,APPROACH...] [--set K=V]... "
                       "[--reps N] [--rerun-known]")
    names = [n for n in got.words[1].split(",") if n]
    return _started(retry.retry(ctx, retry.RetryArgs(
        batch=got.words[0], approaches=names, sets=got.sets, reps=got.reps,
        rerun_known=got.rerun_known), idempotency_key=key))


def _bisect(args: list[str], ctx: Context, key: str | None) -> Reply:
    line = parse_bisect(args)
    if isinstance(line, bisect.WatchBisectArgs):
        return _started(bisect.bisect_watch(ctx, line, idempotency_key=key))
    return _started(bisect.bisect(ctx, line, idempotency_key=key))


def _probe(args: list[str], ctx: Context, key: str | None) -> Reply:
    return _started(probe.probe(ctx, parse_probe(args), idempotency_key=key))


def _started(data: run.Started) -> Reply:
    return Reply(text=views.started(data), started=data.submitted, warnings=data.warnings)


def _status(args: list[str], ctx: Context, key: str | None) -> Reply:
    return Reply(text=views.status(status.status(ctx)))


def _cancel(args: list[str], ctx: Context, key: str | None) -> Reply:
    if len(args) > 1:
        raise UserError("usage: cancel [BATCH]")
    data = cancel.cancel(ctx, args[0] if args else None)
    return Reply(text=views.cancelled(data), ephemeral=data.outcome == "already-ended")


def _show(args: list[str], ctx: Context, key: str | None) -> Reply:
    if len(args) > 1:
        raise UserError("usage: show [BATCH]")
    data = show.show(ctx, args[0] if args else None)
    return Reply(text=views.shown(data), blocks=views.shown_blocks(data))


def _presets(args: list[str], ctx: Context, key: str | None) -> Reply:
    return Reply(text=views.presets(presets.presets(ctx)))


def _history(args: list[str], ctx: Context, key: str | None) -> Reply:
    return Reply(text=views.history(history.history(ctx)))


def _digest(args: list[str], ctx: Context, key: str | None) -> Reply:
    data = digest.digest(ctx, days=7.0)
    text = views.digest(data)
    uploads = () if data.chart is None else (
        Upload(digest.CHART_NAME, data.chart, digest.CHART_TITLE),)
    return Reply(text=text, blocks=views.digest_payload(data, fallback=text)["blocks"],
                 ephemeral=False, uploads=uploads)


def _compare(args: list[str], ctx: Context, key: str | None) -> Reply:
    usage = "compare [A] [B]"
    if len(args) > 2 or any(a.startswith("--") for a in args):
        raise UserError(f"usage: {usage}")
    data = compare.compare(ctx, compare.CompareArgs(*args))
    text = views.compared(data)
    return Reply(text=text, blocks=views.compared_payload(data, fallback=text)["blocks"])


def _watch(args: list[str], ctx: Context, key: str | None) -> Reply:
    line = parse_watch(args)
    if line.sub == "add":
        assert line.add is not None
        added = watch.add(ctx, line.add)
        return Reply(text=views.watch_added(added), ephemeral=False, watch=added.watch.id,
                     warnings=added.plan.warnings)
    if line.sub == "list":
        return Reply(text=views.watch_list(watch.watches(ctx)))
    assert line.ident is not None
    if line.sub == "show":
        data = watch.show(ctx, line.ident, chart=line.chart)
        uploads = () if data.chart is None else (
            Upload(f"watch-{data.watch.id}.png", data.chart, f"watch {data.watch.id}'s series"),)
        return Reply(text=views.watch_shown(data), uploads=uploads, ephemeral=not uploads)
    if line.sub == "run":
        return _started(watch_run.run_now(ctx, line.ident, idempotency_key=key))
    if line.sub in ("ack", "dismiss"):
        acked = watch_run.acknowledge(ctx, line.ident, action=line.sub)
        return Reply(text=views.watch_acked(acked), ephemeral=not acked.applied)
    moved = {"pause": watch.pause, "resume": watch.resume, "stop": watch.stop}[line.sub]
    return Reply(text=views.watch_moved(moved(ctx, line.ident)), ephemeral=False)


def _help(args: list[str], ctx: Context, key: str | None) -> Reply:
    return Reply(text=views.help_(help.help_(ctx)))


_HANDLERS: dict[str, Callable[[list[str], Context, str | None], Reply]] = {
    "run": _run, "retry": _retry, "status": _status, "cancel": _cancel, "show": _show,
    "presets": _presets, "history": _history, "digest": _digest, "compare": _compare,
    "help": _help, "probe": _probe, "bisect": _bisect, "watch": _watch,
}


def _unknown(word: str) -> Reply:
    hint = difflib.get_close_matches(word, COMMANDS, n=1) if word else []
    shown = word if len(word) <= SHOWN_CHARS else word[:SHOWN_CHARS] + "..."
    message = f"unknown command {shown!r}" if word else ""
    return Reply(text=views.error(message, hint=hint[0] if hint else None, usage=True),
                 exit_code=2)


def _error(message: str) -> Reply:
    return Reply(text=views.error(message), exit_code=2)


def split_line(line: str) -> list[str]:
    """The words of a line, without a leading `/specbench`; the command lower-cased."""
    words = shlex.split(line.replace("\u201c", '"').replace("\u201d", '"'))
    if words and words[0].lower() in (PREFIX, PREFIX[1:]):
        words = words[1:]
    if words:
        words[0] = words[0].lower()
    return words
