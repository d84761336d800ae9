"""Broken records for `specbench analyze` (issue 10, item 7): each is one line on stderr naming
file:LINE, exit 2, no traceback; no NaN or infinity ever reaches a report."""

from __future__ import annotations

import codecs
import json
import math
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from jobs.commands.analyze import AnalyzeArgs, analyze, non_finite
from jobs.core.records import decode_lines, parse_lines
from jobs.errors import RecordError
from tests.builders import specbench_here
from tests.conftest import REPO, SEED, make_record, need_shared


def _seed() -> list[str]:
    return need_shared(SEED).read_text(encoding="utf-8").splitlines()


def _utf8(lines: list[str]) -> bytes:
    return "".join(line + "\n" for line in lines).encode("utf-8")


def _edit(line: str, change: Callable[[dict[str, Any]], None]) -> str:
    data = json.loads(line)
    change(data)
    return json.dumps(data)


def _samples(values: list[Any]) -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        data["metrics"]["output_throughput"] = values
    return change


def _constant(line: str, literal: str) -> str:
    """The record's first sample replaced by a JSON-invalid literal (NaN, Infinity...)."""
    data = json.loads(line)
    data["metrics"]["output_throughput"][0] = 12345.5
    return json.dumps(data).replace("12345.5", literal, 1)


# (id, the file's bytes from the seed's lines, the line named, words of the message)
CASES: list[tuple[str, Callable[[list[str]], bytes], int, str]] = [
    ("latin-1", lambda s: _utf8(s[:2]) + b'{"batch": "caf\xe9"}\n', 3, "not UTF-8"),
    ("utf-16-bom", lambda s: codecs.BOM_UTF16_LE + "\n".join(s).encode("utf-16-le"), 1, "UTF-16"),
    ("utf-16-be", lambda s: codecs.BOM_UTF16_BE + "\n".join(s).encode("utf-16-be"), 1, "UTF-16"),
    ("utf-16-no-bom", lambda s: "\n".join(s).encode("utf-16-le"), 1, "NUL bytes"),
    ("100k-brackets", lambda s: _utf8([s[0], "[" * 100_000 + "]" * 100_000]), 2, "nested"),
    ("100k-open-brackets", lambda s: _utf8([*s[:3], "[" * 100_000]), 4, "nested"),
    ("deep-in-a-record", lambda s: _utf8([_edit(s[0], lambda d: d.update(
        extra=json.loads("[" * 500 + "]" * 500)))]), 1, "nested deeper than"),
    ("lone-surrogate", lambda s: _utf8([*s[:2], s[2].replace(
        '"hypothesis": "', '"hypothesis": "\\ud800', 1)]), 3, "lone surrogate"),
    ("surrogate-in-a-key", lambda s: _utf8([s[0].replace('"env": {}', '"env": {"\\udc00": "x"}',
                                                        1)]), 1, "lone surrogate"),
    ("nan", lambda s: _utf8([s[0], _constant(s[1], "NaN")]), 2, "NaN"),
    ("infinity", lambda s: _utf8([s[0], _constant(s[1], "Infinity")]), 2, "Infinity"),
    ("minus-infinity", lambda s: _utf8([_constant(s[0], "-Infinity"), *s[1:]]), 1, "-Infinity"),
    ("1e999", lambda s: _utf8([s[0], _constant(s[1], "1e999")]), 2, "out of range"),
    ("5000-digits", lambda s: _utf8([s[0], _constant(s[1], "9" * 5000)]), 2, "out of range"),
    ("negative-baseline", lambda s: _utf8([_edit(s[0], _samples([-82.0, -81.0, -83.0])),
                                           *s[1:]]), 1, "metrics.output_throughput holds -82"),
    ("negative-approach", lambda s: _utf8([*s[:4], _edit(s[4], _samples([95.0, -1.0])),
                                           *s[5:]]), 5, "holds -1"),
    ("absurd-throughput", lambda s: _utf8([s[0], _edit(s[1], _samples([1e308, 1e308]))]), 2,
     "between 0 and"),
    ("duplicate-approach", lambda s: _utf8([*s, s[1]]), 10, "appears twice in batch"),
    ("duplicate-baseline", lambda s: _utf8([s[0], *s[1:3], s[0]]), 4, "'baseline' appears twice"),
    ("fallbacks-not-strings", lambda s: _utf8([s[0], _edit(s[1], lambda d: d.update(
        fallbacks=[1, None]))]), 2, "'fallbacks' must be a list of strings"),
    ("change-not-an-object", lambda s: _utf8([s[0], _edit(s[1], lambda d: d.update(
        change={"server_args": 5}))]), 2, "'change.server_args' must be an object"),
]


def test_each_broken_file_is_one_line_naming_its_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """Every case in both formats through `specbench analyze` in this process (tests/builders.py
    `specbench_here`), the first again as a process of its own: what it writes on each stream
    and its exit code are the command's, not the process's."""
    seed = _seed()
    failures = []
    for name, build, line, words in CASES:
        path = tmp_path / f"{name}.jsonl"
        path.write_bytes(build(seed))
        for fmt in ("text", "json"):
            done = specbench_here(capsys, "analyze", str(path), "--format", fmt)
            failure = _refusal(done.returncode, done.stdout, done.stderr, f"{path}:{line}: ",
                               words)
            if failure:
                failures.append(f"{name} ({fmt}): {failure}")
    assert not failures, "\n".join(failures)
    name, _, line, words = CASES[0]
    done = subprocess.run([sys.executable, "-m", "bot.cli.main", "analyze",
                           str(tmp_path / f"{name}.jsonl")], cwd=REPO, capture_output=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120, check=False)
    text = done.stderr.decode("utf-8", "replace")
    assert not _refusal(done.returncode, done.stdout.decode(), text,
                        f"{tmp_path / name}.jsonl:{line}: ", words), text


def _refusal(code: int, out: str, err: str, where: str, words: str) -> str:
    """What is wrong with a refusal that must be exit 2, nothing on stdout and one line on
    stderr naming `where` with `words`, no traceback; empty when nothing is."""
    lines = err.strip().splitlines()
    ok = (code == 2 and out == "" and len(lines) == 1 and "Traceback" not in err
          and "internal error" not in err and where in lines[0] and words in lines[0])
    return "" if ok else f"exit {code}, stderr {err[:300]!r}"


def test_the_seed_still_analyses_and_a_utf8_bom_is_fine(tmp_path: Path) -> None:
    path = tmp_path / "bom.jsonl"
    path.write_bytes(codecs.BOM_UTF8 + _utf8(_seed()).replace(b"\n", b"\r\n"))
    report = analyze(AnalyzeArgs(runs=path))
    assert report["results"][0]["verdict"] == "improved"
    assert non_finite(report) is None
    json.loads(json.dumps(report, allow_nan=False))


def test_lines_split_on_newlines_only() -> None:
    # U+2028 is a line break to str.splitlines, not to JSON lines.
    record = make_record("baseline").to_dict() | {"hypothesis": "one\u2028two"}
    lines = decode_lines(json.dumps(record, ensure_ascii=False).encode("utf-8"), source="f")
    assert len(lines) == 1
    assert next(parse_lines(lines, source="f")).hypothesis == "one\u2028two"


def test_a_zero_baseline_gives_no_infinity(tmp_path: Path) -> None:
    seed = _seed()
    path = tmp_path / "zero.jsonl"
    path.write_bytes(_utf8([_edit(seed[0], _samples([0.0, 0.0, 0.0])), *seed[1:]]))
    report = analyze(AnalyzeArgs(runs=path))
    assert non_finite(report) is None
    json.loads(json.dumps(report, allow_nan=False))


def test_non_finite_names_the_path_and_samples_drop_non_finite() -> None:
    assert non_finite({"results": [{"change_pct": 1.0}, {"change_pct": math.inf}]}) == (
        "report.results.1.change_pct")
    assert non_finite({"a": [1, "x", None, {"b": -0.0}]}) is None
    record = make_record("a", samples=[100.0, math.nan, math.inf, 101.0])
    assert record.samples("output_throughput") == [100.0, 101.0]


def test_errors_quote_input_briefly() -> None:
    huge = "r" * 10_000
    line = json.dumps(make_record("baseline").to_dict() | {"role": huge})
    with pytest.raises(RecordError) as info:
        list(parse_lines([line], source="f"))
    assert len(str(info.value)) < 200 and "\n" not in str(info.value)
