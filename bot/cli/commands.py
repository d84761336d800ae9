"""The command line's commands: argv in, a command of `jobs.commands` called, its data
rendered with the shared views (`bot.views`) on stdout. `run` also follows its batch
(`bot.cli.waiting`)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from bot import interrupts
from bot.cli.waiting import END_GRACE_S as END_GRACE_S  # where tests have always found them
from bot.cli.waiting import STORE_POLL_S as STORE_POLL_S
from bot.cli.waiting import run_and_wait
from jobs.errors import UserError


def _context() -> Any:
    from jobs.commands.context import Caller, Context
    from jobs.store import Store

    return Context(store=Store(), caller=Caller(user=_local_user(), surface="cli"))


def cmd_analyze(args: argparse.Namespace) -> int:
    from jobs.commands.analyze import AnalyzeArgs, analyze
    from jobs.core.messages import render_report

    report = analyze(AnalyzeArgs(
        runs=Path(args.runs), metric=args.metric, min_effect_pct=args.min_effect,
        lower_is_better=args.lower_is_better,
    ))
    sys.stdout.write(render_report(report, args.format))
    return 0


def cmd_presets(args: argparse.Namespace) -> int:
    from bot import views
    from jobs.commands.presets import presets

    sys.stdout.write(views.presets(presets(_context())))
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from jobs.core.plans import load_preset, parse_sets

    # The file is read once, here: a bad one is refused before the store's and engines' imports
    # (docs/contracts.md "Bounded work and any file": a huge grid in under a second).
    read = load_preset(args.preset)
    sets = parse_sets(args.sets)
    from jobs.commands import run

    ctx = _context()
    planned = run.plan(ctx, run.RunArgs(
        preset=args.preset, read=read, sets=sets, reps=args.reps, engine=args.engine,
        queue=args.queue, rerun_known=args.rerun_known, stack=args.stack, against=args.against,
    ))
    for warning in planned.warnings:
        print(f"specbench run: warning: {warning}", file=sys.stderr)
    with interrupts.Trap() as trap:  # SIGINT, SIGTERM, SIGHUP: the batch ends, its servers too
        try:
            return run_and_wait(ctx, planned, args, trap=trap)
        finally:
            interrupts.close_context(ctx, trap=trap, command="run")


def cmd_show(args: argparse.Namespace) -> int:
    from bot import views
    from jobs.commands.show import show
    from jobs.core.records import to_jsonl

    if args.logs is not None:
        return _show_logs(args.batch, args.logs)
    chart = _chart_path(args.chart)
    data = show(_context(), args.batch, records_only=args.format == "jsonl" and not chart)
    if chart is not None:
        from jobs.commands.show import chart_of, extra_charts_of

        _write_chart(chart, chart_of(data))
        for extra in extra_charts_of(data):  # FILE-loads.png, FILE-landscape.png, ...
            _write_chart(chart.with_name(f"{chart.stem}-{extra.suffix}{chart.suffix}"),
                         extra.png)
    if args.format == "jsonl":
        sys.stdout.write(to_jsonl(data.records))
    else:
        sys.stdout.write(views.shown(data, args.format))
    return 0


def _show_logs(batch: str | None, approach: str) -> int:
    """`show [BATCH] --logs APPROACH`: the log on stdout; where the whole file is, on stderr,
    when this host has only the record's last lines."""
    from jobs.commands.show import server_log

    found = server_log(_context(), batch, approach)
    sys.stdout.write(found.text if found.text.endswith("\n") or not found.text
                     else found.text + "\n")
    if not found.whole:
        where = f" on {found.host}" if found.host else ""
        print(f"specbench show: the last lines {found.batch}'s record keeps of {approach}; the "
              f"whole log is {found.path}{where}", file=sys.stderr)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from bot import views
    from jobs.commands.status import status

    ctx = _context()
    try:
        sys.stdout.write(views.status(status(ctx), args.format))
    finally:
        ctx.close()
    return 0


def cmd_cancel(args: argparse.Namespace) -> int:
    from bot import views
    from jobs.commands.cancel import cancel

    ctx = _context()
    try:
        print(views.cancelled(cancel(ctx, args.batch)))
    finally:
        ctx.close()
    return 0


def cmd_console(args: argparse.Namespace) -> int:
    from bot.console import run_console

    return run_console(line=args.line, timeout=args.timeout)


def cmd_bot(args: argparse.Namespace) -> int:
    from jobs.extras import PROCESSES, require

    require(*PROCESSES["bot"])
    from bot.slack.app import run_bot

    return run_bot(http_port=args.http)


def cmd_worker(args: argparse.Namespace) -> int:
    from jobs import settings
    from jobs.extras import PROCESSES, require

    require(*PROCESSES["worker"])
    from jobs.broker import worker
    from jobs.ops.logs import configure_logging, log_start

    queue = args.queue or settings.default_queue()
    configure_logging()
    log_start("worker", queue=queue)
    return int(worker.main(queue))


def cmd_digest(args: argparse.Namespace) -> int:
    from bot import views
    from jobs.commands.digest import digest

    chart = _chart_path(args.chart)
    data = digest(_context(), days=args.days, chart=chart is not None)
    if chart is not None:
        if data.chart is None:
            raise UserError(f"no chart: nothing was measured in the last {args.days:g} days")
        _write_chart(chart, data.chart)
    sys.stdout.write(views.digest(data, args.format))
    return 0


def _chart_path(given: str | None) -> Path | None:
    """--chart FILE.png as a path; a name that is no PNG's is bad input."""
    if given is None:
        return None
    path = Path(given)
    if path.suffix.lower() != ".png":
        raise UserError(f"--chart writes a PNG: {given!r} must end in .png")
    from jobs.extras import require

    require(("charts", "--chart"))
    return path


def _write_chart(path: Path, png: bytes) -> None:
    """The chart written before the report is printed, so that a path it cannot write is a
    one-line error (exit 2) and not a report followed by a traceback."""
    try:
        path.write_bytes(png)
    except OSError as exc:
        raise UserError(f"cannot write the chart to {path}: {exc.strerror or exc}") from None
    print(f"chart written to {path}", file=sys.stderr)


def cmd_history(args: argparse.Namespace) -> int:
    import json

    from bot import views
    from jobs.commands.history import history

    data = history(_context())
    sys.stdout.write(json.dumps(data, indent=2) + "\n" if args.format == "json"
                     else views.history(data))
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from bot import views
    from jobs.commands.compare import CompareArgs, compare

    data = compare(_context(), CompareArgs(a=args.a, b=args.b))
    sys.stdout.write(views.compared(data, args.format))
    return 0


def _local_user() -> str:
    return os.environ.get("USER") or os.environ.get("LOGNAME") or "local"
