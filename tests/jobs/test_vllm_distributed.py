"""A vLLM batch through the queue: `specbench run` in distributed mode, a real Celery worker
over Redis running the vLLM stand-in, the report back to the CLI."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator

import pytest

from tests.bot.test_vllm_surfaces import VDEMO, check_vdemo
from tests.jobs.test_distributed import Site, Worker, cli, make_site, redis_db

pytestmark = [pytest.mark.redis, pytest.mark.slow]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    gen = redis_db()
    made = make_site(tmp_path_factory.mktemp("vllm-pipeline"), next(gen), {"vdemo": VDEMO})
    made.env["SPECBENCH_VLLM_PYTHON"] = sys.executable
    yield made
    next(gen, None)


@pytest.mark.timeout(120)
def test_a_vllm_batch_runs_through_the_queue(site: Site) -> None:
    worker = Worker(site, "gpu")
    try:
        done = cli(site, "run", "vdemo", "--queue", "gpu", "--format", "json", timeout=110)
    finally:
        worker.stop()
    assert done.returncode == 0, done.stderr
    check_vdemo(json.loads(done.stdout))
    assert "run_batch" in worker.output()
