"""The command line's commands: each parses nothing, loads what it needs, calls the core."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from jobs.core.errors import InfraError, RecordError, UserError


def cmd_analyze(args: argparse.Namespace) -> int:
    from jobs.core.messages import render_report
    from jobs.core.records import parse_lines
    from jobs.core.remedies import load_remedies
    from jobs.core.report import analyze
    from jobs.core.rules import load_rules
    from jobs.core.verdicts import Metric

    path = Path(args.runs)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RecordError(f"{path}: cannot read ({exc.strerror})") from None
    records = list(parse_lines(text.splitlines(), source=str(path)))
    if not records:
        raise RecordError(f"{path}: no run records")
    metric = _metric_defaults(records[0].preset)
    metric = Metric(
        name=args.metric or metric.name,
        min_effect_pct=metric.min_effect_pct if args.min_effect is None else args.min_effect,
        lower_is_better=metric.lower_is_better if args.lower_is_better is None else True,
    )
    report = analyze(records, metric=metric, rules=load_rules(), remedies=load_remedies())
    sys.stdout.write(render_report(report, args.format))
    return 0


def _metric_defaults(preset_name: str) -> Any:
    """The metric settings of the preset the records name, when the config has it."""
    from jobs.core.errors import PresetError
    from jobs.core.presets import load_preset, preset_names
    from jobs.core.verdicts import Metric

    if preset_name not in preset_names():
        return Metric()
    try:
        preset = load_preset(preset_name)
    except PresetError as exc:
        print(f"specbench analyze: warning: {exc}; using the default metric", file=sys.stderr)
        return Metric()
    return Metric(
        name=preset.metric, min_effect_pct=preset.min_effect_pct,
        lower_is_better=preset.lower_is_better,
    )


def cmd_presets(args: argparse.Namespace) -> int:
    from jobs.core.messages import render_text
    from jobs.core.presets import load_all

    sys.stdout.write(render_text("presets", presets=load_all()))
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from jobs.batches import planning as batches
    from jobs.batches.dispatch import get_dispatcher
    from jobs.core.plans import parse_sets
    from jobs.engines import get_engine

    if args.reps is not None and args.reps < 1:
        raise UserError(f"--reps must be at least 1, got {args.reps}")
    plan = batches.plan_batch(
        args.preset, engine=args.engine, overrides=parse_sets(args.sets), reps=args.reps,
        queue=args.queue,
    )
    batches.check_flags(plan, get_engine(plan.engine))
    for warning in plan.warnings:
        print(f"specbench run: warning: {warning}", file=sys.stderr)
    dispatcher = get_dispatcher()
    try:
        return _run_and_wait(dispatcher, plan, args)
    finally:
        dispatcher.close()


def _run_and_wait(dispatcher: Any, plan: Any, args: argparse.Namespace) -> int:
    """Submit, follow the batch's events on stderr, print its report on stdout."""
    import time

    from bot.cli.progress import ProgressBar
    from jobs.core.messages import render_report

    bar = ProgressBar(sys.stderr)
    subscription = dispatcher.subscribe()
    submitted = dispatcher.submit(plan, requested_by=_local_user())
    batch_id = submitted.batch.id
    if submitted.live_workers == 0:
        bar.note(f"batch {batch_id} queued on {plan.queue!r}, which no live worker serves yet")
    deadline = time.monotonic() + args.timeout
    started = False
    interrupted = False
    report: dict[str, Any] | None = None
    try:
        while True:
            try:
                event = subscription.get(timeout=min(0.5, max(deadline - time.monotonic(), 0)))
            except KeyboardInterrupt:
                if interrupted:
                    raise
                interrupted = True
                bar.note("interrupt: cancelling the batch (Ctrl-C again to leave it running)")
                dispatcher.cancel(batch_id)
                continue
            if event is None:
                if time.monotonic() >= deadline:
                    if not started:
                        dispatcher.cancel(batch_id)
                        raise InfraError(
                            f"no worker picked batch {batch_id} up within {args.timeout:g} s"
                        )
                    raise InfraError(f"batch {batch_id} did not finish within {args.timeout:g} s")
                continue
            if event.get("batch") != batch_id:
                continue
            started = started or event["type"] != "batch.queued"
            bar.on_event(event)
            if event["type"] in ("batch.finished", "batch.cancelled"):
                report = event.get("report")
                break
    finally:
        subscription.close()
        bar.close()
    if report is None:
        row = dispatcher.store.get_batch(batch_id)
        raise InfraError(f"batch {batch_id} ended {row.state if row else 'unknown'} "
                         f"without a report: {row.error if row else ''}")
    sys.stdout.write(render_report(report, args.format))
    return 1 if interrupted else 0


def cmd_show(args: argparse.Namespace) -> int:
    from jobs.batches.execution import build_report
    from jobs.batches.planning import replan
    from jobs.core.messages import render_report
    from jobs.core.records import to_jsonl
    from jobs.store import Store

    store = Store()
    row = store.get_batch(args.batch) if args.batch else store.latest_batch()
    if row is None:
        raise UserError(f"unknown batch {args.batch!r}" if args.batch else "no batch stored yet")
    records = store.records(row.id)
    if args.format == "jsonl":
        sys.stdout.write(to_jsonl(records))
        return 0
    if not any(r.role == "baseline" for r in records):
        raise UserError(f"batch {row.id} ({row.state}) has no baseline record yet")
    report = build_report(records, replan(row))
    report["state"] = row.state
    sys.stdout.write(render_report(report, args.format))
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from jobs import settings
    from jobs.batches.dispatch import queue_entries
    from jobs.core.messages import render_text
    from jobs.store import Store

    store = Store()
    entries = queue_entries(store, store.list_batches(states=("queued", "running")))
    live: dict[str, int | None] = {name: None for name in entries}
    url = settings.broker_url()
    if url is not None:
        from jobs.broker.dispatcher import DistributedDispatcher

        dispatcher = DistributedDispatcher(store, url)
        try:
            live = {name: dispatcher.live_workers(name) for name in entries}
        finally:
            dispatcher.close()
    queues = [
        {"queue": name, "live_workers": live[name],
         "batches": [_status_entry(e) for e in members]}
        for name, members in sorted(entries.items())
    ]
    if args.format == "json":
        print(json.dumps({"mode": "distributed" if url else "embedded", "queues": queues},
                         indent=2))
    else:
        sys.stdout.write(render_text("status", queues=queues))
    return 0


def _status_entry(entry: Any) -> dict[str, Any]:
    row = entry.batch
    return {
        "batch": row.id, "preset": row.preset, "state": row.state, "position": entry.position,
        "eta_s": None if entry.eta_s is None else round(entry.eta_s, 1),
        "requested_by": row.requested_by, "host": row.host,
        "created_at": row.created_at.isoformat(),
        "started_at": row.started_at.isoformat() if row.started_at else None,
    }


def cmd_cancel(args: argparse.Namespace) -> int:
    from jobs.batches.dispatch import get_dispatcher
    from jobs.store import TERMINAL_STATES, Store

    store = Store()
    row = store.get_batch(args.batch)
    if row is None:
        raise UserError(f"unknown batch {args.batch!r}")
    if row.state in TERMINAL_STATES:
        print(f"batch {row.id} already ended ({row.state})")
        return 0
    dispatcher = get_dispatcher(store)
    try:
        row = dispatcher.cancel(row.id)
    finally:
        dispatcher.close()
    done = "cancelled" if row.state == "cancelled" else "cancel requested"
    print(f"batch {row.id}: {done}")
    return 0


def cmd_console(args: argparse.Namespace) -> int:
    from bot.console import run_console

    return run_console(line=args.line, timeout=args.timeout)


def cmd_bot(args: argparse.Namespace) -> int:
    from bot.slack.app import run_bot

    return run_bot(http_port=args.http)


def cmd_worker(args: argparse.Namespace) -> int:
    from jobs import settings
    from jobs.broker import worker
    from jobs.ops.logs import configure_logging, log_start

    queue = args.queue or settings.default_queue()
    configure_logging()
    log_start("worker", queue=queue)
    return worker.main(queue)


def cmd_digest(args: argparse.Namespace) -> int:
    from jobs import settings
    from jobs.core.digest import digest_from_store
    from jobs.core.messages import render_blocks, render_text
    from jobs.store import Store

    if args.days <= 0:
        raise UserError(f"--days must be positive, got {args.days:g}")
    digest = digest_from_store(Store(), days=args.days, tz=settings.timezone())
    text = render_text("digest", digest=digest)
    if args.format == "json":
        print(json.dumps(digest, indent=2, ensure_ascii=False))
    elif args.format == "slack":
        payload = render_blocks("digest", fallback=text, digest=digest)
        print(json.dumps(payload, indent=2, ensure_ascii=False))
    else:
        sys.stdout.write(text)
    return 0


def _local_user() -> str:
    return os.environ.get("USER") or os.environ.get("LOGNAME") or "local"
