"""A full data dir without privileges (issue 32, item 9): ENOSPC injected at the file writes of
the data dir (the server's log, the room probe), through the real `specbench run` on the stand-in
SGLang. The baseline's log cannot be written, so its result is lost: the batch pauses with a line
on stderr, finds room again once the space is freed (here: right after its first look), runs the
baseline again and ends done. test_full_disk.py does the same on a real full tmpfs, as root.
"""

from __future__ import annotations

import builtins
import errno
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from bot.cli.main import main
from jobs.batches import disk_space
from jobs.engines import procs
from jobs.store import Store
from tests.builders import standin_preset
from tests.standin.harness import Standin, make_standin


def edge_preset(*, tag: str) -> str:
    return standin_preset(
        "edge", description="a stand-in batch whose data dir fills up", bench_s=30,
        overridable=None, env={"STANDIN_STARTUP_S": "0.2", "STANDIN_TAG": tag},
        approaches=[{"name": "faster", "hypothesis": "a faster configuration",
                     "env": {"STANDIN_THROUGHPUT": "90", "STANDIN_TAG": tag}}],
    )


class FullDisk:
    """The data dir as a full disk answers: every write of a file under it raises ENOSPC, until
    the space is freed (after the first room probe it refused)."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.full = True
        self.refused: list[str] = []

    def open(self, file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> IO[Any]:
        handle = builtins.open(file, mode, *args, **kwargs)
        if mode.startswith("r") and "+" not in mode:
            return handle
        if not Path(file).resolve().is_relative_to(self.root):
            return handle
        return _Refusing(handle, self)  # type: ignore[return-value]


class _Refusing:
    def __init__(self, handle: IO[Any], disk: FullDisk) -> None:
        self._handle, self._disk = handle, disk

    def write(self, data: Any) -> int:
        if self._disk.full:
            name = Path(self._handle.name).name
            self._disk.refused.append(name)
            if name.startswith(".room-"):
                self._disk.full = False  # the space is freed while the batch is paused
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), self._handle.name)
        return self._handle.write(data)

    def __enter__(self) -> _Refusing:
        return self

    def __exit__(self, *_: object) -> None:
        self._handle.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._handle, name)


@pytest.fixture
def standin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Standin]:
    setup = make_standin(tmp_path, monkeypatch)
    yield setup
    setup.assert_clean()


@pytest.mark.timeout(120)
def test_a_full_data_dir_pauses_the_run_and_runs_the_configuration_again(
    tmp_path: Path, standin: Standin, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    preset = tmp_path / "edge.yaml"
    preset.write_text(edge_preset(tag=standin.tag))
    data = Path(os.environ["SPECBENCH_DATA_DIR"])
    disk = FullDisk(data)
    monkeypatch.setattr(procs, "open", disk.open, raising=False)  # the logs' writes
    monkeypatch.setattr(disk_space, "open", disk.open, raising=False)  # the room probe's
    assert main(["run", str(preset), "--format", "json"]) == 0
    out, err = capsys.readouterr()
    report = json.loads(out)
    assert report["state"] == "done"
    assert [r["approach"] for r in report["results"]] == ["faster"]
    assert report["results"][0]["value"] is not None
    lines = err.splitlines()
    paused = [i for i, line in enumerate(lines) if "paused: the data dir" in line]
    resumed = [i for i, line in enumerate(lines) if "resumed after" in line]
    launching = [i for i, line in enumerate(lines) if "baseline: launching" in line]
    assert len(paused) == 1 and len(resumed) == 1, err
    assert f"the data dir {data.resolve()} is full" in lines[paused[0]]
    assert "baseline runs again once space is freed" in lines[paused[0]]
    assert launching[0] < paused[0] < resumed[0] < launching[1], err
    assert disk.refused[0] == "baseline.log" and disk.refused[-1].startswith(".room-")
    store = Store(f"sqlite:///{data.resolve() / 'specbench.db'}")
    [row] = store.list_batches()
    assert row.state == "done"
    assert [(r.approach, r.status) for r in store.records(row.id)] == [
        ("baseline", "ok"), ("faster", "ok")]
