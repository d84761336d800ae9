"""Messages: snapshots of the seed summary, Slack's limits, and no secret in any format."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from jobs.core.advice import analyze, load_remedies
from jobs.core.messages import (
    MAX_BLOCKS,
    MAX_HEADER_CHARS,
    MAX_SECTION_CHARS,
    MAX_TABLE_ROWS,
    cut,
    fit_blocks,
    render_report,
    render_text,
    slack_escape,
    summary_payload,
)
from jobs.core.plans import load_all
from jobs.core.records import RunRecord
from jobs.core.rules import load_rules
from jobs.core.verdicts import Metric
from tests.conftest import make_record

SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"
SECRET = "xoxb-planted-secret-123"
OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."


def report_of(records: list[RunRecord]) -> dict[str, Any]:
    return analyze(records, metric=Metric(), rules=load_rules(), remedies=load_remedies())


def check_snapshot(name: str, text: str) -> None:
    """Compare with snapshots/NAME; a missing snapshot is written (review it, then commit it)."""
    path = SNAPSHOTS / name
    if not path.exists() or os.environ.get("SPECBENCH_UPDATE_SNAPSHOTS") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8"), (
        f"{path} differs; rerun with SPECBENCH_UPDATE_SNAPSHOTS=1 if the change is intended"
    )


def check_slack_limits(payload: dict[str, Any]) -> None:
    json.loads(json.dumps(payload))
    blocks = payload["blocks"]
    assert len(blocks) <= MAX_BLOCKS
    assert len(payload["text"]) <= MAX_SECTION_CHARS
    for block in blocks:
        text = block.get("text")
        if isinstance(text, dict):
            limit = MAX_HEADER_CHARS if block["type"] == "header" else MAX_SECTION_CHARS
            assert len(text["text"]) <= limit, block["type"]
        for element in block.get("elements", []):
            assert len(element.get("text", "")) <= MAX_SECTION_CHARS
        if block["type"] == "table":
            assert len(block["rows"]) <= MAX_TABLE_ROWS


def big_batch(n: int) -> list[RunRecord]:
    records = [make_record("baseline", samples=[100.0, 101.0, 102.0])]
    for i in range(n):
        kind = i % 4
        name = f"approach-{i:03d}-with-a-rather-long-descriptive-name"
        if kind == 0:
            records.append(make_record(name, samples=[110.0 + i, 111.0 + i, 112.0 + i]))
        elif kind == 1:
            records.append(make_record(name, samples=[80.0, 81.0, 82.0], accept_length=2.5))
        elif kind == 2:
            records.append(make_record(name, status="failed", samples=[], log_tail=OOM * 3))
        else:
            records.append(make_record(name, samples=[95.0, 103.0, 110.0]))
    return records


# --------------------------------------------------------------------------- snapshots


@pytest.fixture
def seed_report(seed_records: list[RunRecord]) -> dict[str, Any]:
    return report_of(seed_records)


def test_seed_text_snapshot(seed_report: dict[str, Any]) -> None:
    check_snapshot("seed_summary.txt", render_report(seed_report, "text"))


def test_seed_slack_snapshot(seed_report: dict[str, Any]) -> None:
    text = render_report(seed_report, "slack")
    check_snapshot("seed_summary.slack.json", text)
    payload = json.loads(text)
    check_slack_limits(payload)
    assert "cuda-graph-max-bs-128" in payload["text"]


def test_seed_text_shows_the_essentials(seed_report: dict[str, Any]) -> None:
    text = render_report(seed_report, "text")
    assert "cuda-graph-max-bs-128" in text and "+9.1%" in text
    assert "compute capability 12.0" in text
    assert "48.2 ms" in text and "31.8 ms" in text
    assert "vs eagle3: +2.4%" in text
    assert text.index("1. [retry") < text.index("2. [adopt")


def test_json_format_is_the_report(seed_report: dict[str, Any]) -> None:
    assert json.loads(render_report(seed_report, "json")) == json.loads(json.dumps(seed_report))


def test_presets_listing() -> None:
    text = render_text("presets", presets=load_all())
    assert "eagle3 (sglang)" in text
    assert "- eagle3-nccl-tree (extends eagle3)" in text
    assert render_text("presets", presets=[]).strip() == "No presets in the config folder."


# --------------------------------------------------------------------------- Slack's limits


def test_sixty_approaches_fit_slack() -> None:
    report = report_of(big_batch(60))
    payload = summary_payload(report)
    check_slack_limits(payload)
    table = next(b for b in payload["blocks"] if b["type"] == "table")
    assert len(table["rows"]) == 62  # the header row, the baseline's and every approach
    assert "more approaches not shown" not in json.dumps(payload)
    for block in payload["blocks"]:
        text = block.get("text", {}).get("text", "") if block["type"] == "section" else ""
        # a section too long for Slack (here: 60 approaches' next steps) says it was cut
        assert "(cut:" not in text or text.rstrip().endswith("more characters)")


def test_a_hundred_and_fifty_approaches_are_cut_visibly() -> None:
    report = report_of(big_batch(150))
    payload = json.loads(render_report(report, "slack"))
    check_slack_limits(payload)
    table = next(b for b in payload["blocks"] if b["type"] == "table")
    assert table["rows"][1][0]["text"] == "baseline"
    shown = len(table["rows"]) - 2  # the header and the baseline's row
    assert shown < 150
    notes = [
        e["text"] for b in payload["blocks"] if b["type"] == "context" for e in b["elements"]
    ]
    assert any(f"{150 - shown} more approaches not shown" in n for n in notes), notes
    # the long next-steps section is cut with a note saying so
    steps = [b["text"]["text"] for b in payload["blocks"] if b["type"] == "section"][-1]
    assert steps.startswith("*Next steps*")
    assert steps.endswith("more characters)") and "(cut:" in steps


def test_fit_blocks_cuts_every_limit_visibly() -> None:
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": "h" * 400}},
        {"type": "section", "text": {"type": "mrkdwn", "text": "s" * 5000}},
    ] + [{"type": "divider"} for _ in range(80)]
    fitted = fit_blocks(blocks)
    assert len(fitted) == MAX_BLOCKS
    assert len(fitted[0]["text"]["text"]) <= MAX_HEADER_CHARS
    assert "(cut:" in fitted[1]["text"]["text"]
    assert len(fitted[1]["text"]["text"]) <= MAX_SECTION_CHARS
    assert "more blocks cut" in fitted[-1]["elements"][0]["text"]
    assert cut("short", 10) == "short"


def test_slack_text_is_escaped_only_where_slack_needs_it() -> None:
    assert slack_escape("a < b & c > d 'q' \"x\"") == "a &lt; b &amp; c &gt; d 'q' \"x\""
    records = [
        make_record("baseline", samples=[100.0, 101.0]),
        make_record("x", status="failed", samples=[], log_tail="bye <now> & 'then'\n"),
    ]
    payload = summary_payload(report_of(records))
    text = json.dumps(payload)
    assert "&amp;#" not in text and "&#39;" not in text


# --------------------------------------------------------------------------- secrets


def test_no_secret_in_any_format(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLACK_BOT_TOKEN", SECRET)
    records = [
        make_record("baseline", samples=[100.0, 101.0]),
        # a confound in a secret-named env var, and the planted value in the log and env
        make_record("leaky", samples=[110.0, 111.0], env={"SLACK_BOT_TOKEN": SECRET}),
        make_record(
            "oom", status="failed", samples=[],
            log_tail=f"starting with token {SECRET}\n{OOM} (token={SECRET})\n",
        ),
        # a secret only the record knows (not in this process's environment)
        make_record("hf", samples=[120.0, 121.0], env={"HF_TOKEN": "hf_only_in_the_record"}),
        make_record(
            "hf-oom", status="failed", samples=[], env={"HF_TOKEN": "hf_only_in_the_record"},
            change={"server_args": {}, "env": {"HF_TOKEN": "hf_only_in_the_record"}},
            log_tail=f"{OOM} while loading with hf_only_in_the_record\n",
        ),
        make_record(
            "hf-win", samples=[130.0, 131.0],
            change={"server_args": {}, "env": {"API_KEY": "key-only-in-the-record"}},
        ),
    ]
    report = report_of(records)
    assert report["key_achievement"]["approach"] == "hf-win"
    for fmt in ("text", "json", "slack"):
        out = render_report(report, fmt)
        for secret in (SECRET, "hf_only_in_the_record", "key-only-in-the-record"):
            assert secret not in out, (fmt, secret)
        assert "***" in out, fmt


# --------------------------------------------------------------------------- table and host


CPU_HOST = {"gpu": "none (CPU: AMD EPYC 9354)", "gpu_count": 0, "compute_capability": None,
            "interconnect": None, "cpu": "AMD EPYC 9354", "cpu_cores": 16, "torch": "2.13.0"}


def table_rows(report: dict[str, Any]) -> dict[str, list[str]]:
    table = next(b for b in summary_payload(report)["blocks"] if b["type"] == "table")
    return {row[0]["text"]: [cell["text"] for cell in row[1:]] for row in table["rows"][1:]}


def test_the_table_starts_with_the_baseline_and_its_spread() -> None:
    report = report_of([make_record("baseline", samples=[790.0, 803.0, 810.0]),
                        make_record("fast", samples=[860.0, 879.0, 890.0])])
    rows = table_rows(report)
    assert list(rows) == ["baseline", "fast"]
    assert rows["baseline"] == ["● baseline 803 tok/s",
                                "range [790, 810] over 3 repetitions: every row is judged "
                                "against it"]
    text = render_report(report, "text")
    lines = text.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("Approach"))
    assert lines[header + 2].split()[:4] == ["baseline", "●", "baseline", "803"]


def test_the_why_column_explains_instead_of_repeating_the_result() -> None:
    report = report_of([
        make_record("baseline", samples=[790.0, 803.0, 810.0]),
        make_record("fast", samples=[860.0, 879.0, 890.0]),
        make_record("same", samples=[800.0, 805.0, 812.0]),
        make_record("once", samples=[900.0]),
        make_record("oom", status="failed", samples=[], log_tail=OOM),
    ])
    rows = table_rows(report)
    assert rows["fast"] == ["▲ improved 879 tok/s (+9.5%)",
                            "879 tok/s vs 803 tok/s baseline, ranges [860, 890] and [790, 810] "
                            "disjoint"]
    assert rows["same"][1] == "805 tok/s vs 803 tok/s baseline: within the 2% minimum effect"
    assert rows["once"] == ["? inconclusive 900 tok/s (+12.1%)",
                            "+12.1% (900 vs 803) from one repetition: no noise estimate"]
    assert rows["oom"][0] == "✗ FAILED (out-of-memory)"
    assert "out of memory" in rows["oom"][1]  # a failure keeps its evidence
    for result, why in rows.values():
        assert result.split(" (")[0] not in why or result.startswith("✗")
    text = render_report(report, "text")
    assert "879 tok/s vs 803 tok/s baseline, ranges [860, 890] and [790, 810] disjoint" in text
    assert "Key achievement: fast 879 tok/s (+9.5%)" in text
    assert "baseline 803 tok/s output_throughput" in text.splitlines()[0]


def test_a_latency_metric_is_shown_in_ms() -> None:
    records = [make_record("baseline", samples=[20.0, 21.0], metric="median_itl_ms"),
               make_record("quick", samples=[15.0, 15.5], metric="median_itl_ms")]
    report = analyze(records, metric=Metric(name="median_itl_ms", lower_is_better=True),
                     rules=load_rules(), remedies=load_remedies())
    assert table_rows(report)["quick"][0] == "▲ improved 15.25 ms (+25.6%)"


def test_a_cpu_host_is_cpu_never_none() -> None:
    records = [make_record("baseline", samples=[100.0, 101.0], fingerprint=CPU_HOST),
               make_record("a", samples=[110.0, 111.0], fingerprint=CPU_HOST)]
    report = report_of(records)
    text = render_report(report, "text")
    assert "Host: CPU (AMD EPYC 9354, 16 cores, torch 2.13.0)" in text
    slack = render_report(report, "slack")
    assert "Host: CPU (AMD EPYC 9354, 16 cores, torch 2.13.0)" in slack
    bare = {"gpu": "none", "gpu_count": 0, "compute_capability": None}
    report = report_of([make_record("baseline", samples=[100.0], fingerprint=bare)])
    for out in (render_report(report, "text"), render_report(report, "slack")):
        assert "Host: CPU" in out
        assert "none" not in out.split("Host: ")[1].splitlines()[0]
        assert "0x" not in out


def test_a_failed_baseline_row_says_there_is_nothing_to_compare() -> None:
    report = report_of([make_record("baseline", status="failed", samples=[], log_tail=OOM),
                        make_record("a", samples=[110.0, 111.0])])
    assert table_rows(report)["baseline"] == ["✗ baseline FAILED",
                                              "no baseline value: nothing to compare against"]
    text = render_report(report, "text")
    assert "✗ baseline FAILED" in text and "baseline – output_throughput" in text


def test_a_template_is_compiled_once_per_host_and_an_unwritable_cache_is_only_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Jinja's bytecode cache behind every message (jobs/core/messages.py): a second environment,
    as a second `specbench` process has, loads the compiled template instead of compiling it;
    a cache folder that cannot be written renders as before."""
    import jinja2

    from jobs import settings
    from jobs.core import messages

    def environment(folder: Path) -> jinja2.Environment:
        return jinja2.Environment(loader=jinja2.FileSystemLoader(str(settings.templates_dir())),
                                  undefined=jinja2.StrictUndefined,
                                  bytecode_cache=messages._QuietCache(str(folder)))

    cache = tmp_path / "cache"
    cache.mkdir()
    first = environment(cache).get_template("help.txt.j2")
    assert [p.suffix for p in cache.iterdir()] == [".cache"]

    def no_compiling(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("compiled again")

    again = environment(cache)
    monkeypatch.setattr(again, "compile", no_compiling)
    assert again.get_template("help.txt.j2").render() == first.render()
    monkeypatch.undo()
    gone = environment(tmp_path / "no-such-folder").get_template("help.txt.j2")
    assert gone.render() == first.render()
    assert messages.environment().bytecode_cache is not None  # what every message goes through
