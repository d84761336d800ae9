"""The newcomer's demo (issue 21 item 4), as `make demo` runs it: `specbench run cpu-demo`
(then `specbench run cpu-loads`, its load levels: issue 23 item 6) twice in a row, each in a
data dir of its own, and the verdicts of the two compared approach by approach (the sweep's
points are left out: Optuna chooses them from what it measures; its confirmed outcome is
compared instead). Each run is also a whole batch of the real local engine (a tiny Llama
through transformers, forked from its warm server), start to report."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.bench.bench_demo import SPECBENCH, verdicts

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def demo(data: Path, preset: str = "cpu-demo") -> tuple[dict[str, Any], str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPECBENCH_", "STANDIN_"))}
    env["SPECBENCH_DATA_DIR"] = str(data)
    done = subprocess.run([str(SPECBENCH), "run", preset, "--format", "json"], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    found: dict[str, Any] = dict(verdicts(report))
    if preset == "cpu-loads":  # the verdict at each level too
        found["levels"] = {r["approach"]: [level["verdict"] for level in r["by_load"]]
                           for r in report["results"]}
        found["whys"] = {r["approach"]: [level["why"] for level in r["by_load"]]
                         for r in report["results"]}
    return found, done.stderr


@pytest.mark.timeout(900)
def test_two_consecutive_demos_give_the_same_verdict_for_every_approach(tmp_path: Path) -> None:
    first, progress = demo(tmp_path / "first")
    second, _ = demo(tmp_path / "second")
    assert first == second
    assert first["prompt-lookup"] == "improved"
    assert first["sweep winner's confirmation"] == "improved"
    assert "confirmation" in progress  # every step is visible while it runs, the confirmation too
    loads = [demo(tmp_path / f"loads-{n}", "cpu-loads")[0] for n in (1, 2)]
    # Prompt lookup serves one request at a time: it wins at max-concurrency 1 and loses at 8,
    # where plain decoding batches 8 requests (and the 8th waits past the TTFT limit).
    assert [found["prompt-lookup"] for found in loads] == ["mixed", "mixed"]
    assert [found["levels"]["prompt-lookup"][::2] for found in loads] == [
        ["improved", "regressed"]] * 2
    for found in loads:  # at 8 the SLO breach itself, the limit and the median named
        assert "p99_ttft_ms" in found["whys"]["prompt-lookup"][2]
        assert "> 80 ms limit at max-concurrency 8" in found["whys"]["prompt-lookup"][2]
