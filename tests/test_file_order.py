"""The suite's own scheduling (tests/file_order.py): the longest scopes first, and a room's files
on one pytest-xdist worker, like one file."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest

from tests import file_order
from tests.file_order import ROOMS, pytest_xdist_make_scheduler, scope_of

REPO = Path(__file__).resolve().parents[1]
ROOM = ROOMS["torch"]


@dataclass
class _Item:
    nodeid: str


@dataclass
class _Config:
    dist: str

    def getvalue(self, name: str) -> Any:
        return {"dist": self.dist, "tx": ["2*popen"]}[name]


def test_every_file_of_a_room_exists() -> None:
    """A room's entry for a file that moved would quietly send it back to any worker."""
    assert [f for room in ROOMS.values() for f in room if not (REPO / f).is_file()] == []


def test_a_rooms_files_are_one_scope_and_other_files_their_own() -> None:
    assert {scope_of(f"{file}::test_x") for file in ROOM} == {"torch"}
    assert scope_of("tests/test_house.py::test_x[a]") == "tests/test_house.py"


def test_the_longest_scope_goes_first_with_a_room_counted_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seconds = {ROOM[0]: 10.0, ROOM[1]: 10.0, "tests/long.py": 15.0, "tests/short.py": 1.0}
    monkeypatch.setattr(file_order, "known_seconds", lambda: seconds)
    items = [_Item(f"{file}::test_{n}") for file in
             ("tests/short.py", ROOM[0], "tests/long.py", ROOM[1]) for n in (1, 2)]
    file_order.pytest_collection_modifyitems(cast(list[pytest.Item], items))
    assert [item.nodeid.split("::")[0] for item in items] == [
        ROOM[0], ROOM[0], ROOM[1], ROOM[1], "tests/long.py", "tests/long.py",
        "tests/short.py", "tests/short.py"]


def test_loadfile_hands_a_room_to_one_worker_and_other_modes_are_left_alone() -> None:
    scheduler = pytest_xdist_make_scheduler(cast(pytest.Config, _Config("loadfile")), None)
    assert scheduler._split_scope(f"{ROOM[1]}::test_x") == "torch"
    assert scheduler._split_scope("tests/test_house.py::test_x") == "tests/test_house.py"
    assert pytest_xdist_make_scheduler(cast(pytest.Config, _Config("load")), None) is None
