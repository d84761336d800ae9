"""Messages: Jinja templates turn report data into text, JSON or Slack Block Kit.

The report is data; templates only format it. `StrictUndefined` is on, HTML autoescape off;
only what Slack needs (`&`, `<`, `>`) is escaped. Slack's limits are enforced here, visibly.
A template is compiled once per host, not once per process: Jinja's own bytecode cache keeps it
in the user's temporary folder (`_jinja2-cache-UID`), keyed by the template's text, so an edited
template is compiled again. Compiling the batch summary and its parts costs a `specbench` process
about 0.1 s; a cache that cannot be read or written is only not used.
"""

from __future__ import annotations

import functools
import json
import os
from typing import Any

import jinja2

from jobs import redaction, settings
from jobs.core.capacity import capacity_text
from jobs.core.levels import compare_levels, level_text
from jobs.core.units import plural, unit_of
from jobs.core.workloads import category_text

MAX_BLOCKS = 50
MAX_SECTION_CHARS = 3000
MAX_HEADER_CHARS = 150
MAX_TABLE_ROWS = 100  # the header row included
MAX_NAME_WIDTH = 80  # a text table's approach column; a longer name gets a line of its own
FORMATS = ("text", "json", "slack")


def name_width(names: list[str]) -> int:
    """The approach column of a text table: the longest name up to MAX_NAME_WIDTH, at least the
    header's; the templates put a longer name on a line of its own above its row."""
    return max([len(n) for n in names if len(n) <= MAX_NAME_WIDTH] + [len("Approach")])


def slack_escape(text: Any) -> str:
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


@functools.lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(settings.templates_dir())),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        trim_blocks=False,
        lstrip_blocks=False,
        keep_trailing_newline=False,
        bytecode_cache=_bytecode_cache(),
    )
    env.filters["slack"] = slack_escape
    env.filters["unit"] = unit_of  # {{ metric|unit }}: "tok/s", "ms" or ""
    env.filters["plural"] = plural  # {{ reps|plural("rep") }}: "1 rep", "3 reps"
    env.globals["levels"] = level_text  # load levels in words: levels.level_rows(r, report)
    env.globals["compare_levels"] = compare_levels  # a compared row's levels in words
    env.globals["capacity"] = capacity_text  # capacity under the SLO in words
    env.globals["workloads"] = category_text  # a workload's categories in words
    return env


class _QuietCache(jinja2.FileSystemBytecodeCache):
    """Jinja's file cache, which a full or read-only disk turns off rather than failing."""

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        try:
            super().load_bytecode(bucket)
        except OSError:
            bucket.reset()

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        try:
            super().dump_bytecode(bucket)
        except OSError:
            pass


def _bytecode_cache() -> jinja2.BytecodeCache | None:
    try:
        return _QuietCache()
    except (OSError, RuntimeError):  # no private temporary folder to be had: compile each time
        return None


def render_text(name: str, **context: Any) -> str:
    """A plain-text template (`NAME.txt.j2`), redacted."""
    text = environment().get_template(f"{name}.txt.j2").render(**context)
    return redaction.redact(text, secrets=_secrets()).rstrip() + "\n"


def render_blocks(name: str, *, fallback: str, **context: Any) -> dict[str, Any]:
    """A Block Kit template (`NAME.slack.j2`) as a chat.postMessage payload within limits."""
    raw = environment().get_template(f"{name}.slack.j2").render(**context)
    secrets = _secrets()
    blocks = json.loads(redaction.redact(raw, secrets=secrets))
    text = redaction.redact(fallback, secrets=secrets)[:MAX_SECTION_CHARS]
    return {"text": text, "blocks": fit_blocks(blocks)}


def _secrets() -> tuple[str, ...]:
    """The process's secrets, read at each render: a message never shows one, even one set late."""
    return redaction.secret_values(os.environ)


def fit_blocks(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Cut sections, headers, tables and the block count to Slack's limits, saying so."""
    fitted = [_fit_block(block) for block in blocks]
    if len(fitted) > MAX_BLOCKS:
        dropped = len(fitted) - (MAX_BLOCKS - 1)
        fitted = fitted[: MAX_BLOCKS - 1] + [_note(f"… {dropped} more blocks cut (Slack's limit)")]
    return fitted


def _fit_block(block: dict[str, Any]) -> dict[str, Any]:
    block = dict(block)
    text = block.get("text")
    if isinstance(text, dict) and isinstance(text.get("text"), str):
        limit = MAX_HEADER_CHARS if block.get("type") == "header" else MAX_SECTION_CHARS
        block["text"] = {**text, "text": cut(text["text"], limit)}
    if block.get("type") == "table" and len(block.get("rows", [])) > MAX_TABLE_ROWS:
        block["rows"] = block["rows"][:MAX_TABLE_ROWS]
    return block


def cut(text: str, limit: int) -> str:
    """`text` within `limit` characters; a cut text ends with a note saying how much was cut."""
    if len(text) <= limit:
        return text
    keep = max(limit - 40, 0)  # room for the note below
    return f"{text[:keep]}\n… (cut: {len(text) - keep} more characters)"


def _note(text: str) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": text}]}


def render_report(
    report: dict[str, Any], fmt: str, *, running: dict[str, Any] | None = None,
) -> str:
    """The batch summary (a queued probe's: `is_probe_report`) in one of `FORMATS`. `running`:
    a batch not yet ended, its report built from the records so far (`state`, runs `done` of
    `planned`): the summary says so and marks its key achievement provisional."""
    if fmt == "json":
        text = json.dumps(report, indent=2, ensure_ascii=False)
        return redaction.redact(text, secrets=_secrets()) + "\n"
    if fmt == "slack":
        payload = summary_payload(report, running=running)
        return json.dumps(payload, indent=2, ensure_ascii=False) + "\n"
    if is_probe_report(report):
        return render_text("probe_summary", **_probe_context(report))
    if is_bisect_report(report):
        return render_text("bisect_summary", report=report, b=report["bisect"])
    names = [report["baseline"]["approach"], *(r["approach"] for r in report["results"])]
    return render_text("batch_summary", report=report, width=name_width(names), cut_rows=0,
                       running=running)


def summary_payload(
    report: dict[str, Any], *, running: dict[str, Any] | None = None,
) -> dict[str, Any]:
    if is_probe_report(report):
        context = _probe_context(report)
        text = render_text("probe_summary", **context)
        return render_blocks("probe_summary", fallback=text, headline=text.split("\n", 1)[0],
                             **context)
    if is_bisect_report(report):
        text = render_text("bisect_summary", report=report, b=report["bisect"])
        return render_blocks("bisect_summary", fallback=text, report=report, b=report["bisect"],
                             headline=text.split("\n", 1)[0])
    headline = environment().get_template("_macros.j2").module.headline(report)  # type: ignore[attr-defined]
    return render_blocks(
        "batch_summary", fallback=str(headline), report=report, table_rows=MAX_TABLE_ROWS - 1,
        running=running,
    )


def is_probe_report(report: dict[str, Any]) -> bool:
    """A queued probe's report (`jobs.batches.probing`), not a batch's."""
    return "probe" in report and "request" in report


def is_bisect_report(report: dict[str, Any]) -> bool:
    """A bisection's report (jobs.batches.bisecting: docs/contracts.md "Stacks"), not a
    batch's."""
    return isinstance(report.get("bisect"), dict) and "results" not in report


def _probe_context(report: dict[str, Any]) -> dict[str, Any]:
    from jobs.core.probe_text import asked_text, to_text

    probe = report.get("probe")
    return {"report": report, "asked": asked_text(report.get("request") or {}),
            "table": to_text(probe).rstrip("\n") if probe else None}
