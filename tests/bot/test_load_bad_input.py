"""Bad `loads` and `slo` through the CLI (issue 23, item 7): exit 2, one line on stderr naming
the key, nothing stored. The first case runs as a process of its own; every case runs in this
process too (tests/builders.py `specbench_here`), its streams and exit code the process's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from jobs.store import Store
from tests.builders import specbench_here

REPO = Path(__file__).resolve().parents[2]
LOCAL = """\
name: lbad
engine: local
reps: 1
bench: {num-prompts: 2, input-len: 8, output-len: 4}
baseline:
  server_args: {hidden-size: 32, num-layers: 1, num-heads: 2, vocab-size: 128}
approaches:
  - name: lookup
    server_args: {prompt-lookup-num-tokens: 4}
"""
SGLANG = """\
name: lbad
engine: sglang
reps: 1
bench: {dataset-name: random-ids, num-prompts: 8}
baseline:
  server_args: {model-path: /models/tiny}
approaches:
  - name: eagle3
    server_args: {speculative-algorithm: EAGLE3}
"""
SEVENTEEN = ", ".join(str(2**n) for n in range(17))
BAD = {
    "two knobs": (LOCAL, "loads: {max-concurrency: [1, 4], request-rate: [1, 2]}",
                  "key 'loads' needs exactly one bench knob, max-concurrency or request-rate, "
                  "with its levels; got max-concurrency, request-rate"),
    "no knob": (LOCAL, "loads: {}", "key 'loads' needs exactly one bench knob"),
    "an unknown knob": (LOCAL, "loads: {concurrency: [1, 4]}",
                        "'concurrency' is not a load knob (did you mean 'max-concurrency'?)"),
    "an empty list": (LOCAL, "loads: {max-concurrency: []}",
                      "key 'loads.max-concurrency' needs a list of levels, lowest first"),
    "unsorted": (LOCAL, "loads: {max-concurrency: [4, 1, 16]}",
                 "key 'loads.max-concurrency' is not in order: [4, 1, 16]"),
    "duplicates": (LOCAL, "loads: {max-concurrency: [1, 4, 4]}",
                   "key 'loads.max-concurrency' lists 4 more than once"),
    "a level of 0": (LOCAL, "loads: {max-concurrency: [0, 4]}",
                     "key 'loads.max-concurrency': level 0 is not positive"),
    "a negative rate": (LOCAL, "loads: {request-rate: [-1, 2]}",
                        "key 'loads.request-rate': level -1 is not positive"),
    "more than 16 levels": (LOCAL, f"loads: {{max-concurrency: [{SEVENTEEN}]}}",
                            "lists 17 levels; at most 16"),
    "the knob in bench too": (LOCAL.replace("output-len: 4}", "output-len: 4, max-concurrency: 2}"),
                              "loads: {max-concurrency: [1, 4]}",
                              "key 'bench.max-concurrency' is set by 'loads' too"),
    "an unknown SLO key": (SGLANG, "slo: {p99_ttfb_ms: 1000}",
                           "key 'slo.p99_ttfb_ms': SGLang's benchmark reports no 'p99_ttfb_ms' "
                           "(did you mean 'p99_ttft_ms'?)"),
    "a non-numeric limit": (SGLANG, "slo: {p99_ttft_ms: fast}",
                            "key 'slo.p99_ttft_ms': the limit 'fast' is not a number"),
    "a zero limit": (LOCAL, "slo: {p99_ttft_ms: 0}",
                     "key 'slo.p99_ttft_ms': the limit 0 is not positive"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_loads_or_slo_is_exit_2_with_one_line_and_nothing_stored(
    tmp_path: Path, case: str, capsys: pytest.CaptureFixture[str],
) -> None:
    preset, extra, message = BAD[case]
    path = tmp_path / "lbad.yaml"
    path.write_text(preset + extra + "\n")
    data = tmp_path / "data"
    own = {"SPECBENCH_DATA_DIR": str(data), "SPECBENCH_DATABASE_URL": f"sqlite:///{data}/s.db"}
    if case == next(iter(BAD)):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SPECBENCH_", "STANDIN_"))}
        done = subprocess.run([sys.executable, "-m", "bot.cli.main", "run", str(path)],
                              capture_output=True, text=True, env={**env, **own}, timeout=60,
                              cwd=REPO)
    else:
        done = specbench_here(capsys, "run", str(path), env=own, drop=("SPECBENCH_", "STANDIN_"),
                              cwd=REPO)
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "lbad.yaml:" in done.stderr  # the file and the line of the key
    if (data / "s.db").exists():
        store = Store(f"sqlite:///{data}/s.db")
        assert store.list_batches() == []
