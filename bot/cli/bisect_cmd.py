"""`specbench bisect`: the first of the host's stacks where a change appears (docs/contracts.md
"Stacks", bisect), in two forms. `bisect PRESET APPROACH --from STACK --to STACK [--before V
--after V]` names the configuration, the two stacks and, when known, the values; `bisect WATCH
[--change CHANGE]` takes all of them from a watch's confirmed change. Both wait for the bisection
as `run` waits for its batch."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from bot.cli.batch_options import add_reps, add_sets, add_wait

PRESET_ONLY = ("--from", "--to", "--before", "--after", "--set")  # what WATCH brings itself


def add_parser(commands: Any, *, seconds: Callable[[str], float], contract: str) -> None:
    """Register `bisect` on the command line's subparsers (imports nothing heavy)."""
    bisect = commands.add_parser(
        "bisect", help="the first of the host's stacks where a change appears",
        usage="specbench bisect WATCH [--change CHANGE] [--reps N] [--timeout S] [--format F]\n"
              "       specbench bisect PRESET APPROACH --from STACK --to STACK [--before VALUE "
              "--after VALUE] [--set KNOB=VALUE]... [--reps N] [--timeout S] [--format F]",
        description="Bisect the host's stacks between one without the change and one with it: "
                    "the first stack where the configuration changes, one batch per stack "
                    "measured, at most ceil(log2(n)) of them. WATCH takes the configuration, "
                    "key, values and stacks from the watch's confirmed change; PRESET APPROACH "
                    "names them.",
        epilog=f"See {contract}, \"Stacks\".")
    bisect.add_argument("preset", metavar="WATCH|PRESET",
                        help="a watch's id, or a preset name or a path to a YAML file")
    bisect.add_argument("approach", metavar="APPROACH", nargs="?",
                        help="with PRESET: one of its approaches, or baseline")
    bisect.add_argument("--change", metavar="CHANGE",
                        help="with WATCH: which of its changes, as `watch show` lists them "
                             "(default: its newest confirmed change)")
    bisect.add_argument("--from", dest="good", metavar="STACK",
                        help="with PRESET: the stack without the change")
    bisect.add_argument("--to", dest="bad", metavar="STACK",
                        help="with PRESET: the stack with the change")
    bisect.add_argument("--before", type=float, metavar="VALUE",
                        help="with PRESET: the configuration's value without the change (with "
                             "--after; without both, the two stacks are measured first)")
    bisect.add_argument("--after", type=float, metavar="VALUE",
                        help="with PRESET: the configuration's value with the change")
    add_sets(bisect, "with PRESET: set a knob the preset lists as overridable (repeatable)")
    add_reps(bisect)
    add_wait(bisect, seconds)
    bisect.add_argument("--format", choices=("text", "json"), default="text",
                        help="text (default) or json")


def cmd_bisect(args: argparse.Namespace) -> int:
    from bot import interrupts
    from bot.cli.commands import _context
    from bot.cli.waiting import run_and_wait
    from jobs.commands import bisect

    values = {"--from": args.good, "--to": args.bad, "--before": args.before,
              "--after": args.after, "--set": args.sets or None}
    bisect.check_form(approach=args.approach, change=args.change, good=args.good, bad=args.bad,
                      preset_options=[f for f in PRESET_ONLY if values[f] is not None])
    if args.approach is not None:
        from jobs.core.plans import load_preset

        load_preset(args.preset)
    ctx = _context()
    if args.approach is None:
        planned = bisect.plan_watch(ctx, bisect.WatchBisectArgs(
            watch=args.preset, change=args.change, reps=args.reps))
    else:
        planned = bisect.plan(ctx, bisect.BisectArgs(
            preset=args.preset, approach=args.approach, good=args.good, bad=args.bad,
            before=args.before, after=args.after, sets=args.sets, reps=args.reps))
    with interrupts.Trap() as trap:
        try:
            return run_and_wait(ctx, planned, args, trap=trap)
        finally:
            interrupts.close_context(ctx, trap=trap, command="bisect")
