"""`specbench watch add|list|show|pause|resume|stop|run|ack|dismiss`: the regression watches
(docs/contracts.md "Regression watch") from the command line. `watch run ID` runs the watch once
now and waits for it (and for the confirmation it queues) as `run` does."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from bot.cli.batch_options import add_sets, add_wait

FORMATS = ("text", "json")
FORMAT_HELP = "text (default) or json (docs/contracts.md's shape)"
ID_HELP = "the watch's id, as `watch list` shows it"


def add_parser(commands: Any, *, seconds: Callable[[str], float], contract: str) -> None:
    """Register `watch` and its subcommands on the command line's subparsers."""
    watch = commands.add_parser(
        "watch", help="regression watches: a preset on a schedule, alerts once confirmed",
        description="A preset re-run on a schedule by the beat; a change in its series is "
                    "confirmed by a second run before anyone is alerted.",
        epilog=f"See {contract}, \"Regression watch\".")
    subs = watch.add_subparsers(dest="watch_command", metavar="SUBCOMMAND", required=True,
                                parser_class=type(watch),
                                help="add, list, show, pause, resume, stop, run, ack, dismiss")
    add = subs.add_parser("add", help="add a watch")
    add.add_argument("preset", metavar="PRESET", help="a preset name or a path to a YAML file")
    add.add_argument("--every", metavar="daily|weekly",
                     help="daily (default), weekly, hourly or N hours (6h): never more often "
                          "than hourly")
    add.add_argument("--at", metavar="HH:MM", help="the time of day, UTC (default: 02:00)")
    add.add_argument("--queue", metavar="NAME", help="the queue (default: the preset's)")
    add_sets(add, "as `run --set` (repeatable)")
    listing = subs.add_parser("list", help="the watches")
    listing.add_argument("--format", choices=FORMATS, default="text", help=FORMAT_HELP)
    show = subs.add_parser("show", help="a watch: its series, changes and precision")
    show.add_argument("watch", metavar="ID", help=ID_HELP)
    show.add_argument("--format", choices=FORMATS, default="text", help=FORMAT_HELP)
    show.add_argument("--chart", metavar="FILE.png",
                      help="also write its series chart (each key over time, segments' means, "
                           "confirmed changes, stack changes, blips hollow) to FILE.png")
    for name, what in (("pause", "pause a watch"), ("resume", "resume a paused watch"),
                       ("stop", "stop a watch for good")):
        subs.add_parser(name, help=what).add_argument("watch", metavar="ID", help=ID_HELP)
    run = subs.add_parser("run", help="run a watch once now and wait for it")
    run.add_argument("watch", metavar="ID", help=ID_HELP)
    add_wait(run, seconds)
    run.add_argument("--format", choices=("text", "json", "slack"), default="text",
                     help="how to print the batch's report: text (default), json or slack")
    for name, what in (("ack", "acknowledge a confirmed change"),
                       ("dismiss", "mark a confirmed change as not a regression")):
        subs.add_parser(name, help=what).add_argument(
            "change", metavar="CHANGE", help="the change's id, as `watch show` lists it")


def cmd_watch(args: argparse.Namespace) -> int:
    from bot import views
    from bot.cli.commands import _chart_path, _context, _write_chart
    from jobs.commands import watch, watch_run
    from jobs.errors import UserError

    sub = args.watch_command
    ctx = _context()
    if sub == "run":
        return _run(ctx, args)  # closes its context, its batch ended or cancelled
    try:
        if sub == "add":
            from jobs.core.plans import load_preset

            load_preset(args.preset)  # a bad file is refused before anything else is read
            added = watch.add(ctx, watch.WatchArgs(preset=args.preset, every=args.every,
                                                   at=args.at, queue=args.queue,
                                                   sets=tuple(args.sets)))
            for warning in added.plan.warnings:
                print(f"specbench watch: warning: {warning}", file=sys.stderr)
            sys.stdout.write(views.watch_added(added))
        elif sub == "list":
            sys.stdout.write(views.watch_list(watch.watches(ctx), args.format))
        elif sub == "show":
            chart = _chart_path(args.chart)
            data = watch.show(ctx, args.watch, chart=chart is not None)
            if chart is not None:
                if data.chart is None:
                    raise UserError(f"no chart: watch {data.watch.id} has no point yet")
                _write_chart(chart, data.chart)
            sys.stdout.write(views.watch_shown(data, args.format))
        elif sub in ("pause", "resume", "stop"):
            print(views.watch_moved(getattr(watch, sub)(ctx, args.watch)))
        else:
            print(views.watch_acked(watch_run.acknowledge(ctx, args.change, action=sub)))
    finally:
        ctx.close()
    return 0


def _run(ctx: Any, args: argparse.Namespace) -> int:
    from bot import interrupts
    from bot.cli.waiting import run_and_wait
    from jobs.commands import watch_run

    row, planned = watch_run.run_plan(ctx, args.watch)
    with interrupts.Trap() as trap:
        try:
            return run_and_wait(ctx, planned, args, trap=trap, on_submitted=lambda batch: (
                ctx.store.set_watch_batch(row.id, batch)))
        finally:
            interrupts.close_context(ctx, trap=trap, command="watch run")
