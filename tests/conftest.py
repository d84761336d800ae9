"""Shared fixtures: an isolated environment, the seed session, and a run-record factory."""

from __future__ import annotations

import gc
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from jobs.core.plans import BatchPlan, RunConfig
from jobs.core.records import RunRecord, parse_lines, to_record
from tests.file_order import (  # noqa: F401  (hooks: the longest test files go first)
    pytest_addoption,
    pytest_collection_modifyitems,
    pytest_configure,
    pytest_xdist_make_scheduler,
)
from tests.warm_cli import installed as warm_cli_installed

REPO = Path(__file__).resolve().parents[1]

# The seed session's verdicts and causes, as the foundation issue lists them.
SEED_VERDICTS: dict[str, tuple[str, str | None]] = {
    "cuda-graph-max-bs-128": ("improved", None),
    "eagle3": ("regressed", None),
    "eagle3-nccl-tree": ("failed", "cuda-graph-incompatible"),
    "eagle3-flashinfer-fusion": ("failed", "arch-unsupported"),
    "eagle3-custom-allreduce": ("regressed", None),
    "eagle3-torch-symm-mem": ("failed", "arch-unsupported"),
    "eagle3-ep-flashinfer-a2a": ("failed", "out-of-memory"),
    "eagle3-nccl-fewer-channels": ("inconclusive", None),
}
SHARED = REPO.parent / "shared"  # the workspace's shared/ folder, beside the checkout
FIXTURES = SHARED / "fixtures"
# The article's session: shared/fixtures holds it, and the repository ships the same file as
# docs/examples/seed-session.jsonl (test_deployment checks they match), so no test skips for it.
SEED = next((path for path in (FIXTURES / "seed-session.jsonl",
                               REPO / "docs" / "examples" / "seed-session.jsonl") if path.exists()),
            FIXTURES / "seed-session.jsonl")
SPEC = SHARED / "SPEC.md"
WHY_SHARED = (
    "lives in the workspace's shared/ folder beside the checkout ({shared}), which this "
    "machine does not have; the tests that replay the article's recorded session or check "
    "the contracts against SPEC.md skip without it"
)


@pytest.fixture(scope="session", autouse=True)
def _warm_cli() -> Iterator[None]:
    """The session's `python -m bot.cli.main` processes fork from a warm interpreter
    (tests/warm_cli.py; SPECBENCH_TEST_COLD=1 starts each cold)."""
    with warm_cli_installed():
        yield


def need_shared(path: Path) -> Path:
    """`path` under ../shared, or skip saying what is missing and why the test needs it."""
    if not path.exists():
        pytest.skip(f"{path.name} " + WHY_SHARED.format(shared=SHARED))
    return path


def pytest_report_header() -> str:
    """The header says at once whether the tests that need ../shared will run."""
    if SHARED.is_dir():
        return f"shared fixtures: {SHARED} (found)"
    return f"shared fixtures: MISSING at {SHARED}: the tests that need them skip, saying why"

FINGERPRINT: dict[str, Any] = {
    "gpu": "NVIDIA RTX PRO 6000 Blackwell Server Edition", "gpu_count": 8,
    "compute_capability": "12.0", "interconnect": "PCIe", "driver": "575.57.08",
    "cuda": "12.8", "torch": "2.8.0", "sglang": "0.5.2", "nccl": "2.27.3",
}
BASE_ARGS: dict[str, Any] = {
    "model-path": "/models/m", "tp-size": 8, "mem-fraction-static": 0.85,
    "cuda-graph-max-bs": 512,
}


def make_plan(**fields: Any) -> BatchPlan:
    """A small stored plan (a baseline and `eagle3`) for tests that only keep or read it back."""
    none: dict[str, dict[str, Any]] = {"server_args": {}, "env": {}}
    eagle = {"speculative-algorithm": "EAGLE3"}
    values: dict[str, Any] = {
        "preset": "eagle3", "engine": "local", "queue": "default", "metric": "output_throughput",
        "lower_is_better": False, "min_effect_pct": 2.0, "reps": 3, "startup_s": 600.0,
        "bench_s": 600.0, "bench": {},
        "configs": (
            RunConfig(approach="baseline", role="baseline", parent=None, hypothesis="",
                      change=none, server_args=dict(BASE_ARGS), env={}),
            RunConfig(approach="eagle3", role="approach", parent=None, hypothesis="EAGLE-3",
                      change={"server_args": eagle, "env": {}},
                      server_args={**BASE_ARGS, **eagle}, env={}),
        ),
    }
    values.update(fields)
    return BatchPlan(**values)


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection built (every module, 2,040 items) stays to the end: frozen, the cycle
    collector's full passes no longer walk it, and it runs a young pass per 20,000 allocations
    instead of 700. In a pytest worker its passes took 1.1-2.3 s of CPU, a tenth of the worker's
    own; 0.4-0.9 s with this (measured with gc.callbacks over tests/jobs, six workers)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(20_000, 20, 50)


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """No test touches the developer's .specbench, broker, database or config override."""
    monkeypatch.setenv("SPECBENCH_DATA_DIR", str(tmp_path_factory.mktemp("data")))
    for name in ("SPECBENCH_BROKER_URL", "SPECBENCH_DATABASE_URL", "SPECBENCH_CONFIG_DIR"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def seed_records() -> list[RunRecord]:
    """The article's session (../shared/fixtures/seed-session.jsonl) as run records."""
    need_shared(SEED)
    return list(parse_lines(SEED.read_text(encoding="utf-8").splitlines(), source=str(SEED)))


@pytest.fixture
def seed_path() -> Path:
    return need_shared(SEED)


def make_record(
    approach: str = "a",
    *,
    samples: Sequence[float] | None = (100.0, 100.0, 100.0),
    status: str = "ok",
    role: str | None = None,
    parent: str | None = None,
    change: dict[str, dict[str, Any]] | None = None,
    server_args: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
    log_tail: str = "",
    accept_length: float | None = None,
    fingerprint: dict[str, Any] | None = None,
    metric: str = "output_throughput",
    batch: str = "b-test",
    preset: str = "test",
    extra: dict[str, Any] | None = None,
) -> RunRecord:
    """A run record built through `to_record`, as `analyze` would read it.

    Without `server_args`/`env` the record ran the baseline's settings plus its declared
    `change`, so that it has no confound unless a test asks for one.
    """
    given = change or {}
    change = {
        "server_args": dict(given.get("server_args", {})), "env": dict(given.get("env", {})),
    }
    data: dict[str, Any] = {
        "batch": batch, "preset": preset, "approach": approach,
        "role": role or ("baseline" if approach == "baseline" else "approach"),
        "parent": parent, "hypothesis": f"{approach} helps", "change": change,
        "server_args": (
            {**BASE_ARGS, **change["server_args"]} if server_args is None else server_args
        ),
        "env": dict(change["env"]) if env is None else env,
        "status": status, "exit_code": 0 if status == "ok" else 1, "log_tail": log_tail,
        "metrics": {metric: list(samples or []), "accept_length": accept_length},
        "fingerprint": dict(FINGERPRINT if fingerprint is None else fingerprint),
        "started_at": "2026-12-02T10:00:00Z", "finished_at": "2026-12-02T10:04:10Z",
        **(extra or {}),
    }
    return to_record(data, where="test")


@pytest.fixture
def config_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A writable copy of the shipped config/, installed as SPECBENCH_CONFIG_DIR."""
    import shutil

    target = tmp_path / "config"
    shutil.copytree(REPO / "config", target)
    monkeypatch.setenv("SPECBENCH_CONFIG_DIR", str(target))
    yield target
