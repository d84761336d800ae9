"""Longest test files first, so that under `--dist loadfile` no long file starts last.

xdist hands whole files to its workers in the order the items are collected. Left to itself
(`--loadscope-reorder`) it sorts them by their number of tests, which sends the files with one
long end-to-end test (the demo pair, the outage tests) last, and the suite then waits on them
alone. `tests/durations.json` holds each file's seconds from a real run; `make durations`
writes it anew. A file it does not know yet is placed as a file of median length. A stale
entry only costs speed: every test still runs.

`ROOMS` names files that import torch in the pytest process (the local engine's model, the
adaptive search's Gaussian process): xdist hands each room to one worker as if it were one file,
so that one worker pays torch's import (1 s of CPU) and transformers' (2 s) instead of each
worker that draws one of them. A room is placed by its files' seconds together.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

DURATIONS = Path(__file__).resolve().parent / "durations.json"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--store-durations", action="store_true",
                     help=f"write each test file's seconds to {DURATIONS.name}, which orders "
                          "the files longest first")


ROOMS: dict[str, tuple[str, ...]] = {
    "torch": (
        "tests/jobs/engines/test_local.py",
        "tests/jobs/engines/test_local_levels.py",
        "tests/jobs/test_search.py",
        "tests/jobs/test_search_slo.py",
        "tests/jobs/test_sweep_batches.py",
        "tests/jobs/test_bounds.py",
    ),
}
_ROOM_OF = {file: room for room, files in ROOMS.items() for file in files}


def _file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def scope_of(nodeid: str) -> str:
    """What one xdist worker runs together: the test's file, or the room the file is in."""
    file = _file_of(nodeid)
    return _ROOM_OF.get(file, file)


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
    scopes: defaultdict[str, float] = defaultdict(float)
    for file in {_file_of(item.nodeid) for item in items}:
        scopes[scope_of(file)] += seconds.get(file, unknown)
    # A stable sort keeps each scope's tests together and in their own order.
    items.sort(key=lambda item: -scopes[scope_of(item.nodeid)])


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadfile` with the rooms: each room goes to one worker whole, like a file."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class _RoomScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

    return _RoomScheduling(config, log)


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
