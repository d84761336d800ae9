"""The words of a chat `bisect` line (docs/contracts.md "Stacks", bisect): `bisect WATCH
[--change CHANGE] [--reps N]`, a watch's confirmed change, or `bisect PRESET APPROACH --from
STACK --to STACK [--before VALUE --after VALUE] [--set KNOB=VALUE]... [--reps N]`. Only the syntax
is read here; `jobs.commands.bisect` checks values."""

from __future__ import annotations

from bot.chat.options import number, parse_options, valued
from jobs.commands.bisect import BisectArgs, WatchBisectArgs, check_form
from jobs.errors import UserError

USAGE = ("bisect WATCH [--change CHANGE] [--reps N] | bisect PRESET APPROACH --from STACK --to "
         "STACK [--before VALUE --after VALUE] [--set KNOB=VALUE]... [--reps N]")
VALUED = ("--change", "--from", "--to", "--before", "--after")


def parse_bisect(args: list[str]) -> BisectArgs | WatchBisectArgs:
    """The line's form and its arguments (bad syntax, or options of the other form: UserError)."""
    named: dict[str, str | None] = {}
    for option in VALUED:
        named[option], args = valued(args, option, usage=USAGE)
    first, sets, reps, rest = parse_options(args, usage=USAGE)
    if len(rest) > 2:
        raise UserError(f"usage: {USAGE}")
    given = [f for f in VALUED[1:] if named[f] is not None] + (["--set"] if sets else [])
    good, bad = named["--from"], named["--to"]
    check_form(approach=rest[1] if len(rest) == 2 else None, change=named["--change"],
               good=good, bad=bad, preset_options=given)
    if len(rest) == 1:
        return WatchBisectArgs(watch=first, change=named["--change"], reps=reps)
    assert good is not None and bad is not None
    return BisectArgs(preset=first, approach=rest[1], good=good, bad=bad,
                      before=number(named["--before"], "--before"),
                      after=number(named["--after"], "--after"), sets=sets, reps=reps)
