"""The command router shared by Slack and the console: a line in, reply data out.

`Router.handle` parses `[/specbench] COMMAND ...`, checks who may do it, calls the dispatcher or
the store, and returns a `Reply`; it never sends anything itself. A `run` or `retry` reply names
the batch it started: the surface then opens the batch's thread (bot.thread.batch_thread).
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bot.thread.messages import Upload
from jobs import settings
from jobs.batches.dispatch import Dispatcher, Submitted
from jobs.core.errors import UserError
from jobs.core.messages import render_text, summary_payload
from jobs.core.plans import BatchPlan, parse_sets, to_plan
from jobs.engines.base import Engine
from jobs.store import TERMINAL_STATES, BatchRow

COMMANDS = ("run", "status", "cancel", "retry", "show", "presets", "history", "digest", "help")
PREFIX = "/specbench"
HISTORY_ROWS = 10


@dataclass(frozen=True)
class Caller:
    """Who typed the line, and where; `surface` is "slack" or "console"."""

    user: str
    channel: str | None = None
    surface: str = "slack"


@dataclass(frozen=True)
class Access:
    """SPEC.md's allow-lists; empty means everyone, every channel."""

    users: frozenset[str] = frozenset()
    channels: frozenset[str] = frozenset()
    admins: frozenset[str] = frozenset()

    @classmethod
    def from_env(cls) -> Access:
        return cls(
            users=settings.id_list("SPECBENCH_ALLOWED_USERS"),
            channels=settings.id_list("SPECBENCH_ALLOWED_CHANNELS"),
            admins=settings.id_list("SPECBENCH_ADMINS"),
        )

    def refusal(self, caller: Caller) -> str | None:
        """Why this caller may not launch a batch here, or None."""
        if self.users and caller.user not in self.users:
            return f"user {caller.user} is not on SPECBENCH_ALLOWED_USERS"
        if self.channels and caller.channel not in self.channels:
            return "batches cannot be launched from this channel (SPECBENCH_ALLOWED_CHANNELS)"
        return None

    def may_cancel(self, caller: Caller, row: BatchRow) -> bool:
        return caller.user == row.requested_by or caller.user in self.admins


@dataclass(frozen=True)
class Reply:
    """What a command answers: text for every surface, blocks for Slack when it has them."""

    text: str
    blocks: list[dict[str, Any]] | None = None
    ephemeral: bool = True
    started: Submitted | None = None
    exit_code: int = 0  # the console's: 0 done, 2 bad input or refused
    warnings: tuple[str, ...] = ()
    uploads: tuple[Upload, ...] = ()  # files for the reply's thread (Slack)


@dataclass
class Router:
    dispatcher: Dispatcher
    access: Access = field(default_factory=Access)
    engine_for: Callable[[str], Engine] | None = None

    def handle(self, line: str, *, caller: Caller, idempotency_key: str | None = None) -> Reply:
        """Route one line; a UserError becomes an ephemeral error reply."""
        try:
            words = split_line(line)
        except ValueError as exc:
            return self._error(f"cannot read that line: {exc}")
        if not words or words[0] not in COMMANDS:
            return self._unknown(words[0] if words else "")
        command, args = words[0], words[1:]
        try:
            if command in ("run", "retry"):
                refusal = self.access.refusal(caller) if caller.surface == "slack" else None
                if refusal is not None:
                    return self._error(f"refused: {refusal}")
            handler: Callable[..., Reply] = getattr(self, f"_{command}")
            return handler(args, caller=caller, key=idempotency_key)
        except UserError as exc:
            return self._error(str(exc))

    def _run(self, args: list[str], *, caller: Caller, key: str | None) -> Reply:
        preset, sets, reps, rest = parse_options(args, usage="run PRESET [--set K=V]... [--reps N]")
        if len(rest) != 1 or rest[0] != preset:
            raise UserError("usage: run PRESET [--set KNOB=VALUE]... [--reps N]")
        from jobs.batches.planning import plan_batch

        plan = plan_batch(preset, overrides=parse_sets(sets), reps=reps)
        return self._submit(plan, caller=caller, key=key)

    def _retry(self, args: list[str], *, caller: Caller, key: str | None) -> Reply:
        usage = "retry BATCH APPROACH[,APPROACH...] [--set K=V]... [--reps N]"
        _, sets, reps, rest = parse_options(args, usage=usage)
        if len(rest) != 2:
            raise UserError(f"usage: {usage}")
        row = self._batch(rest[0])
        old = to_plan(row.plan)
        names = [n for n in rest[1].split(",") if n]
        known = [c.approach for c in old.approaches]
        for name in names:
            if name not in known:
                hint = did_you_mean(name, known)
                raise UserError(f"batch {row.id} has no approach {name!r}{hint}")
        from jobs.batches.planning import plan_batch

        overrides = {**old.overrides, **parse_sets(sets)}
        plan = plan_batch(row.preset, overrides=overrides, reps=reps or old.reps, queue=row.queue)
        keep = [c for c in plan.configs if c.role == "baseline" or c.approach in names]
        plan = dataclasses.replace(
            plan, configs=tuple(keep),
            warnings=tuple(w for w in plan.warnings if w.split(":", 1)[0] in names),
        )
        return self._submit(plan, caller=caller, key=key)

    def _submit(self, plan: BatchPlan, *, caller: Caller, key: str | None) -> Reply:
        from jobs.batches.planning import check_flags
        from jobs.engines import get_engine

        check_flags(plan, (self.engine_for or get_engine)(plan.engine))
        submitted = self.dispatcher.submit(
            plan, requested_by=caller.user, channel=caller.channel, idempotency_key=key
        )
        row = submitted.batch
        verb = "queued" if submitted.created else "already submitted"
        text = f"batch {row.id} ({row.preset}) {verb}, position {submitted.position} on {row.queue}"
        return Reply(text=text, started=submitted, warnings=plan.warnings)

    def _status(self, args: list[str], *, caller: Caller, key: str | None) -> Reply:
        queues = [
            {"queue": name, "live_workers": self.dispatcher.live_workers(name),
             "batches": [
                 {"batch": e.batch.id, "preset": e.batch.preset, "state": e.batch.state,
                  "position": e.position, "eta_s": e.eta_s, "requested_by": e.batch.requested_by,
                  "host": e.batch.host}
                 for e in members]}
            for name, members in sorted(self.dispatcher.queues().items())
        ]
        return Reply(text=render_text("status", queues=queues))

    def _cancel(self, args: list[str], *, caller: Caller, key: str | None) -> Reply:
        if len(args) > 1:
            raise UserError("usage: cancel [BATCH]")
        if args:
            row = self._batch(args[0])
        else:
            mine = [
                r for r in self.dispatcher.store.list_batches(states=("queued", "running"))
                if r.requested_by == caller.user
            ]
            if not mine:
                raise UserError("you have no queued or running batch; name one: cancel BATCH")
            row = mine[-1]
        if caller.surface == "slack" and not self.access.may_cancel(caller, row):
            return self._error(
                f"refused: only {row.requested_by} or an admin may cancel batch {row.id}"
            )
        if row.state in TERMINAL_STATES:
            return Reply(text=f"batch {row.id} already ended ({row.state})")
        self.dispatcher.cancel(row.id)
        return Reply(text=f"batch {row.id}: cancel requested by {caller.user}", ephemeral=False)

    def _show(self, args: list[str], *, caller: Caller, key: str | None) -> Reply:
        if len(args) > 1:
            raise UserError("usage: show [BATCH]")
        store = self.dispatcher.store
        row = self._batch(args[0]) if args else store.latest_batch()
        if row is None:
            raise UserError("no batch stored yet")
        report = report_of(row, store=store)
        from jobs.core.messages import render_report

        payload = summary_payload(report)
        secrets = {k: v for c in row.plan["configs"] for k, v in c["env"].items()
                   if settings.is_secret_name(k)}
        text = settings.redact(render_report(report, "text"), secrets)
        blocks = json.loads(settings.redact(json.dumps(payload["blocks"]), secrets))
        return Reply(text=text, blocks=blocks)

    def _presets(self, args: list[str], *, caller: Caller, key: str | None) -> Reply:
        from jobs.core.presets import load_all

        return Reply(text=render_text("presets", presets=load_all()))

    def _history(self, args: list[str], *, caller: Caller, key: str | None) -> Reply:
        rows = self.dispatcher.store.list_batches()[-HISTORY_ROWS:]
        items = [_summary_line(r) for r in reversed(rows)]
        return Reply(text=render_text("history", items=items))

    def _digest(self, args: list[str], *, caller: Caller, key: str | None) -> Reply:
        from jobs.core.messages import render_blocks
        from jobs.core.trends import digest_with_trend

        digest, chart = digest_with_trend(
            self.dispatcher.store, days=7.0, tz=settings.timezone()
        )
        text = render_text("digest", digest=digest)
        payload = render_blocks("digest", fallback=text, digest=digest, chart=chart is not None)
        uploads = () if chart is None else (
            Upload("specbench-digest-trend.png", chart,
                   "Best value per preset and hardware, day by day"),)
        return Reply(text=text, blocks=payload["blocks"], ephemeral=False, uploads=uploads)

    def _help(self, args: list[str], *, caller: Caller, key: str | None) -> Reply:
        return Reply(text=render_text("help", commands=COMMANDS))

    def _batch(self, batch_id: str) -> BatchRow:
        row = self.dispatcher.store.get_batch(batch_id)
        if row is None:
            known = [r.id for r in self.dispatcher.store.list_batches()[-50:]]
            raise UserError(f"unknown batch {batch_id!r}{did_you_mean(batch_id, known)}")
        return row

    def _unknown(self, word: str) -> Reply:
        hint = difflib.get_close_matches(word, COMMANDS, n=1) if word else []
        return Reply(
            text=render_text("error", message=f"unknown command {word!r}" if word else "",
                             hint=hint[0] if hint else None, usage=True),
            exit_code=2,
        )

    def _error(self, message: str) -> Reply:
        return Reply(text=render_text("error", message=message, hint=None, usage=False),
                     exit_code=2)


def split_line(line: str) -> list[str]:
    """The words of a line, without a leading `/specbench`; the command lower-cased."""
    words = shlex.split(line.replace("\u201c", '"').replace("\u201d", '"'))
    if words and words[0].lower() in (PREFIX, PREFIX[1:]):
        words = words[1:]
    if words:
        words[0] = words[0].lower()
    return words


def parse_options(args: list[str], *, usage: str) -> tuple[str, list[str], int | None, list[str]]:
    """(first positional, --set values, --reps, positionals) of a command's arguments."""
    sets: list[str] = []
    reps: int | None = None
    rest: list[str] = []
    words = iter(args)
    for word in words:
        option, eq, inline = word.partition("=")
        if option in ("--set", "--reps"):
            value = inline if eq else next(words, None)
            if value is None:
                raise UserError(f"{option} needs a value; usage: {usage}")
            if option == "--set":
                sets.append(value)
            else:
                try:
                    reps = int(value)
                except ValueError:
                    raise UserError(f"--reps needs a whole number, got {value!r}") from None
        elif word.startswith("--"):
            raise UserError(f"unknown option {option!r}; usage: {usage}")
        else:
            rest.append(word)
    if not rest:
        raise UserError(f"usage: {usage}")
    return rest[0], sets, reps, rest


def did_you_mean(word: str, known: list[str]) -> str:
    hint = difflib.get_close_matches(word, known, n=1)
    return f" (did you mean {hint[0]!r}?)" if hint else ""


def report_of(row: BatchRow, *, store: Any) -> dict[str, Any]:
    """The batch's stored report, or one built from its records so far."""
    if row.report is not None:
        return row.report
    from jobs.batches.execution import build_report

    records = store.records(row.id)
    if not any(r.role == "baseline" for r in records):
        raise UserError(f"batch {row.id} ({row.state}) has no baseline record yet")
    report = build_report(records, to_plan(row.plan))
    report["state"] = row.state
    return report


def _summary_line(row: BatchRow) -> dict[str, Any]:
    report = row.report or {}
    return {
        "batch": row.id, "preset": row.preset, "state": row.state, "by": row.requested_by,
        "when": row.created_at.strftime("%Y-%m-%d %H:%M"),
        "counts": report.get("counts") or {}, "best": report.get("key_achievement"),
    }
