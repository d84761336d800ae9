"""The second half of the newcomer's demo (issue 21 item 4; its load levels: issue 23 item 6),
as `make demo` runs it after cpu-demo: `specbench run cpu-loads` twice in a row, each in a data
dir of its own, and the verdicts of the two compared level by level. Apart from cpu-demo's pair
(test_cpu_demo.py), so that pytest-xdist runs the two pairs on different workers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.bench.bench_demo import verdicts
from tests.bot.test_cpu_demo import demo

pytestmark = pytest.mark.slow


def loads_demo(data: Path) -> dict[str, Any]:
    """The approach's verdict, and its verdict and why at each load level."""
    report, _ = demo(data, "cpu-loads")
    found: dict[str, Any] = dict(verdicts(report))
    found["levels"] = {r["approach"]: [level["verdict"] for level in r["by_load"]]
                       for r in report["results"]}
    found["whys"] = {r["approach"]: [level["why"] for level in r["by_load"]]
                     for r in report["results"]}
    return found


@pytest.mark.timeout(900)
def test_two_consecutive_load_demos_give_the_same_verdict_at_every_level(tmp_path: Path) -> None:
    loads = [loads_demo(tmp_path / f"loads-{n}") for n in (1, 2)]
    # Prompt lookup serves one request at a time: it wins at max-concurrency 1 and loses at 8,
    # where plain decoding batches 8 requests (and the 8th waits past the TTFT limit).
    assert [found["prompt-lookup"] for found in loads] == ["mixed", "mixed"]
    assert [found["levels"]["prompt-lookup"][::2] for found in loads] == [
        ["improved", "regressed"]] * 2
    for found in loads:  # at 8 the SLO breach itself, the limit and the median named
        assert "p99_ttft_ms" in found["whys"]["prompt-lookup"][2]
        assert "> 80 ms limit at max-concurrency 8" in found["whys"]["prompt-lookup"][2]
