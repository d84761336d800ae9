"""The words of a chat `watch` line (docs/contracts.md "Regression watch"): `watch PRESET
[--every daily|weekly] [--at HH:MM] [--queue NAME] [--set KNOB=VALUE]...` (also `watch add
PRESET ...`), `watch list`, `watch show ID [--chart]`, `watch pause|resume|stop|run ID`,
`watch ack|dismiss CHANGE`. Only the syntax is read here; `jobs.commands.watch` checks values.
"""

from __future__ import annotations

from dataclasses import dataclass

from jobs.commands.watch import WatchArgs
from jobs.errors import UserError

USAGE = ("watch PRESET [--every daily|weekly] [--at HH:MM] [--queue NAME] [--set KNOB=VALUE]..."
         " | watch list | watch show ID [--chart] | watch pause|resume|stop|run ID"
         " | watch ack|dismiss CHANGE")
ON_ONE = ("show", "pause", "resume", "stop", "run", "ack", "dismiss")
SUBCOMMANDS = ("add", "list", *ON_ONE)
LAUNCHING = ("add", "pause", "resume", "stop", "run", "ack", "dismiss")
"""What changes a watch or its alerts: only users on the launch list (SPECBENCH_ALLOWED_USERS)."""
_OPTIONS = {"--every": "every", "--at": "at", "--queue": "queue"}


@dataclass(frozen=True)
class WatchLine:
    """A parsed `watch` line: its subcommand and either the watch to add or the id it names."""

    sub: str
    add: WatchArgs | None = None
    ident: str | None = None
    chart: bool = False


def subcommand(args: list[str]) -> str:
    """The line's subcommand (`add` when the first word names a preset)."""
    first = args[0].lower() if args else ""
    return first if first in SUBCOMMANDS else "add"


def access_name(args: list[str]) -> str:
    """The command the allow-lists judge: `watch add` (and every other that changes a watch)
    follows the launch list; `watch list` and `watch show` are open to everyone allowed."""
    return f"watch {subcommand(args)}"


def parse_watch(args: list[str]) -> WatchLine:
    if not args:
        raise UserError(f"usage: {USAGE}")
    sub = subcommand(args)
    rest = args[1:] if args[0].lower() in SUBCOMMANDS else args
    if sub == "list":
        if rest:
            raise UserError("usage: watch list")
        return WatchLine(sub=sub)
    if sub in ON_ONE:
        chart = sub == "show" and "--chart" in rest
        words = [w for w in rest if not (chart and w == "--chart")]
        what = "CHANGE" if sub in ("ack", "dismiss") else "ID"
        if len(words) != 1 or words[0].startswith("--"):
            raise UserError(f"usage: watch {sub} {what}{' [--chart]' if sub == 'show' else ''}")
        return WatchLine(sub=sub, ident=words[0], chart=chart)
    return WatchLine(sub="add", add=_add_args(rest))


def _add_args(words: list[str]) -> WatchArgs:
    fields: dict[str, str] = {}
    sets: list[str] = []
    positional: list[str] = []
    it = iter(words)
    for word in it:
        option, eq, inline = word.partition("=")
        if option in (*_OPTIONS, "--set"):
            value = inline if eq else next(it, None)
            if value is None:
                raise UserError(f"{option} needs a value; usage: {USAGE}")
            if option == "--set":
                sets.append(value)
            elif _OPTIONS[option] in fields:
                raise UserError(f"{option} is given twice; give it once")
            else:
                fields[_OPTIONS[option]] = value
        elif word.startswith("--"):
            raise UserError(f"unknown option {option!r}; usage: {USAGE}")
        else:
            positional.append(word)
    if len(positional) != 1:
        raise UserError(f"usage: {USAGE}")
    return WatchArgs(preset=positional[0], sets=tuple(sets), **fields)
