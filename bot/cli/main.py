"""`specbench`: the command line (docs/contracts.md). Exit 0 done, 1 infrastructure, 2 bad input.

Imports stay inside the commands so that `specbench analyze` starts without torch, Celery or
Slack.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
import uuid
from collections.abc import Sequence
from typing import NoReturn

from bot.cli import bisect_cmd, probe_cmd, watch_cmd
from bot.cli.batch_options import add_reps, add_sets, add_wait
from jobs.core.engine_info import engine_names
from jobs.errors import SpecbenchError

FORMATS = ("text", "json", "slack")


class _Parser(argparse.ArgumentParser):
    """argparse with docs/contracts.md's one-line error and exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def _seconds(text: str) -> float:
    """A timeout: a number of seconds above 0 (0 or less would end a batch at once) and at most
    MAX_TIMEOUT_S (a week: docs/contracts.md "Bounded work and any file")."""
    from jobs.core.limits import MAX_TIMEOUT_S

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, got {text}")
    if not value <= MAX_TIMEOUT_S:
        raise argparse.ArgumentTypeError(
            f"must be at most {MAX_TIMEOUT_S:g} seconds (7 days), got {text}")
    return value


def _port(text: str) -> int:
    """A TCP port: 1 to 65535."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port from 1 to 65535, got {text}")
    return value


CONTRACT = "docs/contracts.md"
FORMAT_HELP = "how to print the report: text (default), json, or slack (Block Kit JSON)"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="specbench", description="Inference-serving experiments, reported.",
        epilog=f"Exit codes: 0 done, 1 infrastructure, 2 bad input. Every command and flag is "
               f"described in {CONTRACT}.")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    run = commands.add_parser(
        "run", help="run one batch and wait for it",
        description="Run one batch and wait for it: progress on stderr, the report on stdout.",
        epilog=f"See {CONTRACT}, \"Command line\".")
    run.add_argument("preset", metavar="PRESET", help="a preset name or a path to a YAML file")
    run.add_argument("--engine", choices=engine_names(),
                     help="the engine to run on (default: the preset's)")
    run.add_argument("--queue", metavar="NAME",
                     help="the queue to submit to (default: the preset's, else $SPECBENCH_QUEUE)")
    add_sets(run, "set a knob the preset lists as overridable, for the baseline and every "
                  "approach alike (repeatable; VALUE read as a YAML scalar)")
    add_reps(run)
    run.add_argument("--rerun-known", action="store_true",
                     help=f"start known dead ends too ({CONTRACT}, \"Memory across batches\")")
    run.add_argument("--stack", metavar="NAME",
                     help="run on this stack of the host's stacks file ($SPECBENCH_STACKS; "
                          f"{CONTRACT}, \"Stacks\"); default: the engine's own interpreter")
    run.add_argument("--against", metavar="NAME",
                     help="an upgrade check: every configuration on the current stack and "
                          "again on stack NAME, alternating, each judged on NAME against itself")
    add_wait(run, _seconds)
    run.add_argument("--format", choices=FORMATS, default="text", help=FORMAT_HELP)

    analyze = commands.add_parser("analyze", help="re-analyse run records")
    analyze.add_argument("runs", metavar="RUNS.jsonl", help="run records, one JSON per line")
    analyze.add_argument("--metric", metavar="NAME",
                         help="the metric to judge by (default: the preset's, else "
                              "output_throughput)")
    analyze.add_argument("--min-effect", type=float, metavar="PCT",
                         help="the smallest change in percent that counts, 0 to 1000 "
                              "(default: the preset's, else 2.0)")
    analyze.add_argument("--lower-is-better", action="store_true", default=None,
                         help="a lower value of the metric is better (default: the preset's, "
                              "else higher is better)")
    analyze.add_argument("--format", choices=FORMATS, default="text", help=FORMAT_HELP)

    console = commands.add_parser("console", help="a local chat session")
    console.add_argument("-c", dest="line", metavar="LINE",
                         help="run one line, wait for any batch it started, and exit")
    console.add_argument("--timeout", type=_seconds, default=24 * 3600.0, metavar="S",
                         help="how long to wait for a started batch, in seconds "
                              "(default: 24 hours)")

    bot = commands.add_parser("bot", help="the Slack bot")
    bot.add_argument("--http", type=_port, metavar="PORT",
                     help="serve Slack's events over HTTP on PORT instead of Socket Mode")

    worker = commands.add_parser("worker", help="a Celery worker for one GPU host")
    worker.add_argument("--queue", metavar="NAME",
                        help="the queue to serve (default: $SPECBENCH_QUEUE, else default)")

    status = commands.add_parser("status", help="running and queued batches")
    status.add_argument("--format", choices=("text", "json"), default="text",
                        help="text (default) or json")

    cancel = commands.add_parser("cancel", help="cancel a queued or running batch")
    cancel.add_argument("batch", metavar="BATCH", help="the batch's ID (b-...)")

    show = commands.add_parser("show", help="a stored batch")
    show.add_argument("batch", metavar="BATCH", nargs="?",
                      help="the batch's ID (default: the latest one started)")
    show.add_argument("--format", choices=(*FORMATS, "jsonl"), default="text",
                      help=FORMAT_HELP + "; jsonl prints its run records instead")
    show.add_argument("--chart", metavar="FILE.png",
                      help="also write the batch's chart (each approach against the baseline, "
                           "coloured by its verdict) to FILE.png; with load levels also "
                           "FILE-loads.png (the metric against load) and FILE-load-pareto.png "
                           "(throughput against latency), for a sweep FILE-landscape.png (the "
                           "metric over the swept knobs) and FILE-pareto.png")
    show.add_argument("--logs", metavar="APPROACH",
                      help="print the server log of one of the batch's runs instead: the whole "
                           "file where this host ran it, else the last lines its record keeps")

    commands.add_parser("presets", help="the presets and their approaches")

    history = commands.add_parser("history", help="the last batches started, newest first")
    history.add_argument("--format", choices=("text", "json"), default="text",
                         help="text (default) or json")

    compare = commands.add_parser("compare", help="two stored batches side by side")
    compare.add_argument("a", metavar="A", nargs="?",
                         help="a batch's ID (default: the latest batch)")
    compare.add_argument("b", metavar="B", nargs="?",
                         help="the batch to compare it with (default: the last ended batch of "
                              "the same preset before A)")
    compare.add_argument("--format", choices=FORMATS, default="text",
                         help=FORMAT_HELP.replace("the report", "the comparison"))

    digest = commands.add_parser("digest", help="the status digest over stored batches")
    digest.add_argument("--days", type=float, default=7.0,
                        help="how many days back to look, more than 0, at most 3650 "
                             "(default: 7)")
    digest.add_argument("--format", choices=FORMATS, default="text",
                        help=FORMAT_HELP.replace("the report", "the digest"))
    digest.add_argument("--chart", metavar="FILE.png",
                        help="also write the digest's trend chart to FILE.png")
    bisect_cmd.add_parser(commands, seconds=_seconds, contract=CONTRACT)
    probe_cmd.add_parser(commands, seconds=_seconds, contract=CONTRACT)
    watch_cmd.add_parser(commands, seconds=_seconds, contract=CONTRACT)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.version:
        from jobs import __version__

        print(f"specbench {__version__}")
        return 0
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        from bot.cli import commands

        module = {"bisect": bisect_cmd, "probe": probe_cmd, "watch": watch_cmd}.get(
            args.command, commands)
        return int(getattr(module, f"cmd_{args.command}")(args))
    except SpecbenchError as exc:
        print(f"specbench {args.command}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"specbench {args.command}: interrupted", file=sys.stderr)
        return 1
    except Exception as exc:  # noqa: BLE001 - the last line of defence: log it, give an ID
        from jobs.store.outage import is_outage

        if is_outage(exc):  # the database is away: say so, not "internal error"
            print(f"specbench {args.command}: error: {_database_away(exc)}", file=sys.stderr)
            return 1
        # The traceback goes to errors.log alone, masked: never to a logger, whose lastResort
        # handler would print it raw on stderr when nothing configured logging.
        incident = uuid.uuid4().hex[:8]
        kept = _log_incident(incident)
        where = "the traceback is in the data dir's logs/errors.log" if kept is None else \
            f"its traceback could not be kept: {kept}"
        print(f"specbench {args.command}: internal error, sorry (incident {incident}; {where})",
              file=sys.stderr)
        return 1


def _database_away(exc: BaseException) -> str:
    """One line for a database that did not answer: where (password masked), why, what next."""
    from jobs import redaction, settings
    from jobs.store.outage import describe

    where = redaction.redact_urls(settings.database_url())
    why = redaction.redact_urls(describe(exc))
    return (f"the database at {where} did not answer ({why}); "
            "try again once it answers")


def _log_incident(incident: str) -> str | None:
    """The current exception's traceback in the data dir's logs/errors.log, secrets masked
    (docs/contracts.md: env values with TOKEN, KEY, SECRET or PASSWORD in the name, URL
    passwords); None once written, else why it could not be (the message then names no file
    that does not exist)."""
    from jobs import redaction, settings

    try:
        folder = settings.data_dir() / "logs"
        folder.mkdir(parents=True, exist_ok=True)
        secrets = redaction.secret_values(os.environ)
        shown = redaction.redact_urls(redaction.redact(traceback.format_exc(), secrets=secrets))
        with open(folder / "errors.log", "a", encoding="utf-8") as handle:
            handle.write(f"--- incident {incident}\n{shown}\n")
    except OSError as exc:  # nowhere to write it: the one line on stderr still goes
        return f"{exc.strerror or exc} ({exc.filename})" if exc.filename else str(exc)
    except Exception as exc:  # noqa: BLE001 - a setting that names no usable folder, above all
        return str(exc)
    return None


def entry() -> int:
    """The `specbench` command: `main`, in a process that starts without the cycle collector
    (jobs.startup; tests call `main` in their own process and keep theirs)."""
    from jobs.startup import pause_collector

    pause_collector()
    return main()


if __name__ == "__main__":
    sys.exit(entry())
