"""One warm local engine for the local engine's test files (test_local, test_local_levels).

tests/file_order.py puts both in one pytest worker (they import torch in the test process), so
one engine and one data dir can serve them: one fork server imports torch and transformers
(3.4 s of CPU) for both files' runs instead of one per file. The data dir is set for the
session, before a module's own fixtures run a configuration, and again over each test's own
(`_one_data_dir` in each file): the same environment, so the same warm server.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from jobs.engines.local.engine import LocalEngine


@pytest.fixture(scope="session")
def local_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("local-data")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SPECBENCH_DATA_DIR", str(path))
        yield path


@pytest.fixture(scope="session")
def local_engine(local_data_dir: Path) -> Iterator[LocalEngine]:
    shared = LocalEngine()
    yield shared
    shared.close()
