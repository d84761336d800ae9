"""Longest test files first, so that under `--dist loadfile` no long file starts last.

xdist hands whole files to its workers in the order the items are collected. Left to itself
(`--loadscope-reorder`) it sorts them by their number of tests, which sends the files with one
long end-to-end test (the demo pair, the outage tests) last, and the suite then waits on them
alone. `tests/durations.json` holds each file's seconds from a real run; `make durations`
writes it anew. A file it does not know yet is placed as a file of median length. A stale
entry only costs speed: every test still runs.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from pathlib import Path

import pytest

DURATIONS = Path(__file__).resolve().parent / "durations.json"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--store-durations", action="store_true",
                     help=f"write each test file's seconds to {DURATIONS.name}, which orders "
                          "the files longest first")


def _file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def known_seconds() -> dict[str, float]:
    """Each file's seconds as last stored; none where the file is missing or unreadable."""
    try:
        stored = json.loads(DURATIONS.read_text())
    except (OSError, ValueError):
        return {}
    return {str(name): float(seconds) for name, seconds in stored.items()}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    seconds = known_seconds()
    if not seconds:
        return
    unknown = statistics.median(seconds.values())
    # A stable sort keeps each file's tests together and in their own order.
    items.sort(key=lambda item: -seconds.get(_file_of(item.nodeid), unknown))


class _Recorder:
    def __init__(self) -> None:
        self.seconds: defaultdict[str, float] = defaultdict(float)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seconds[_file_of(report.nodeid)] += report.duration

    def pytest_sessionfinish(self) -> None:
        ordered = dict(sorted(self.seconds.items(), key=lambda pair: -pair[1]))
        DURATIONS.write_text(json.dumps({name: round(value, 1) for name, value in ordered.items()},
                                        indent=1) + "\n")


def pytest_configure(config: pytest.Config) -> None:
    # Only the controlling process records: under xdist it sees every worker's reports.
    if config.getoption("--store-durations") and not hasattr(config, "workerinput"):
        config.pluginmanager.register(_Recorder(), "specbench-durations")
