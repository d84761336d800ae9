"""The one scheduler as a process of its own: `python -m bot.slack.beat` (compose's `beat`).

Celery beat over `jobs.broker.celery_app.make_app()`, embedded in a worker that serves only the
digest queue and knows only bot.slack.digest's `send_digest` and bot.slack.watch_beat's
`watch_tick`: it sends the digest when SPECBENCH_DIGEST_SCHEDULE says, and the regression
watches' tick every SPECBENCH_WATCH_TICK_S, and runs both itself (each still dedups per slot).
It logs through `jobs.ops.logs` and touches the `beat` heartbeat that `jobs.ops.health` checks.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from collections.abc import Sequence
from typing import Any

from jobs import settings
from jobs.extras import PROCESSES, MissingExtra, require
from jobs.ops import health, logs

log = logging.getLogger(__name__)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bot.slack.beat", description=__doc__)
    parser.add_argument("--schedule", metavar="PATH",
                        help="beat's state file (default: DATA_DIR/celerybeat-schedule)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:  # before Celery's or Slack's imports: one line naming the extra (jobs.extras)
        require(*PROCESSES["beat"])
    except MissingExtra as exc:
        print(f"python -m bot.slack.beat: error: {exc}", file=sys.stderr)
        return exc.exit_code
    from celery import signals

    from jobs.broker.celery_app import DIGEST_QUEUE, make_app

    logs.configure_logging()
    # A receiver on setup_logging keeps Celery from replacing the handler installed above.
    signals.setup_logging.connect(_keep_our_logging, weak=False)
    url = settings.broker_url()
    if url is None:
        print("python -m bot.slack.beat: error: SPECBENCH_BROKER_URL is not set",
              file=sys.stderr)
        return 1
    logs.log_start("beat")
    # send_digest and watch_tick, and no GPU task
    app = make_app(url, include=["bot.slack.digest", "bot.slack.watch_beat"])
    if "weekly-digest" not in app.conf.beat_schedule:
        log.info("SPECBENCH_DIGEST_SCHEDULE is off: beat sends no digest")
    schedule = args.schedule or str(settings.data_dir() / "celerybeat-schedule")
    settings.data_dir().mkdir(parents=True, exist_ok=True)
    # Until Celery installs its own handler, a stop request still unwinds through `finally`.
    signal.signal(signal.SIGTERM, _exit)
    heartbeat = health.start_heartbeat("beat")
    try:
        # The only scheduler, with a worker of its own for the digest queue: the digest is
        # built and posted here, so GPU workers need no Slack token.
        app.Worker(
            hostname="specbench-beat@%h", queues=[DIGEST_QUEUE], pool="solo", concurrency=1,
            beat=True, schedule_filename=schedule, loglevel="INFO", quiet=True,
            without_gossip=True, without_mingle=True, without_heartbeat=True,
            redirect_stdouts=False,
        ).start()
    except KeyboardInterrupt:
        return 1
    finally:
        heartbeat.stop()
    return 0


def _exit(*_: Any) -> None:
    raise SystemExit(0)


def _keep_our_logging(**_: Any) -> None:
    """Celery's setup_logging signal: logging is already configured."""


def entry() -> int:
    """`python -m bot.slack.beat`: `main`, in a process that starts without the cycle collector
    (jobs.startup: Celery's imports are main's; tests call `main` and keep their collector)."""
    from jobs.startup import pause_collector

    pause_collector()
    return main()


if __name__ == "__main__":
    sys.exit(entry())
