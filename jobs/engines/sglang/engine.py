"""The SGLang engine: one `launch_server` process group per configuration (docs/contracts.md
"SGLang engine contract").

The run itself is the served engines' (`jobs.engines.served`); what is SGLang's own: the
configuration spelled for the installed release (flag_table), its bench client as that release
has it (bench_client: `sglang.benchmark.serving` from 0.5.15, else `sglang.bench_serving`, and
the sampling it sends) appending its JSON line to `--output-file`, the ready line,
`/flush_cache` before each repetition and the client's `--flush-cache` after its warm-up (a
flush also resets SGLang's accept-length counters, so the figure the client reads is this
repetition's own).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jobs.core.engine_info import describe
from jobs.core.plans import BatchPlan, RunConfig
from jobs.core.records import RunRecord
from jobs.core.rules import load_rules
from jobs.engines import preflight
from jobs.engines.base import RunContext
from jobs.engines.dialect import is_real, prompts_given, seeded
from jobs.engines.fingerprint import host_fingerprint
from jobs.engines.flags import to_cli_args as to_cli_args
from jobs.engines.on_stack import OnStack
from jobs.engines.served import run_served
from jobs.engines.sglang import bench_client
from jobs.engines.sglang import probe as sglang_probe
from jobs.engines.sglang.flag_table import load_table, to_release
from jobs.errors import EngineError, UserError

INFO = describe("sglang")
READY_LINE = "The server is fired up and ready to roll!"
BENCH_DEFAULT_PROMPTS = 1000  # bench_serving's --num-prompts default in 0.5.2-0.5.23


def last_json_line(path: Path) -> dict[str, Any] | None:
    """The last line of a JSONL file that is a JSON object (bench_serving appends one per run)."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict):
            return data
    return None


def bench_args(bench: Mapping[str, Any], *, rep: int) -> dict[str, Any]:
    """The preset's bench settings for repetition `rep`: its own seed, and the cache flushed."""
    return {**seeded(bench, rep=rep), "flush-cache": True}


def prompts_sent(bench: Mapping[str, Any]) -> int:
    return prompts_given(bench, default=BENCH_DEFAULT_PROMPTS)


class SGLangDialect:
    """What SGLang says differently (jobs.engines.served.Dialect)."""

    bench_name = "bench_serving"
    ready_line: str | None = READY_LINE
    metrics = INFO.metrics

    def __init__(self, python: str, version: str | None = None, *,
                 env: Mapping[str, str] | None = None) -> None:
        self.python = python
        self.version = version  # the installed release (None: unknown, the launch will say)
        self.env: Mapping[str, str] = dict(env or {})  # the stack's

    def server_argv(self, port: int, config: RunConfig) -> list[str]:
        return [self.python, "-m", "sglang.launch_server", "--host", "127.0.0.1",
                "--port", str(port), *to_cli_args(config.server_args)]

    def bench_argv(self, port: int, out_file: Path, bench: Mapping[str, Any]) -> list[str]:
        return [self.python, "-m", bench_client.bench_module(self.version), "--backend",
                "sglang", "--base-url", f"http://127.0.0.1:{port}", "--output-file",
                str(out_file), *to_cli_args(bench)]

    def bench_settings(self, bench: Mapping[str, Any], *, rep: int) -> dict[str, Any]:
        return bench_args(bench_client.for_release(bench, self.version), rep=rep)

    def sampling(self, bench: Mapping[str, Any]) -> dict[str, Any]:
        return bench_client.sampling(bench)

    def prompts_sent(self, bench: Mapping[str, Any]) -> int:
        return prompts_sent(bench)

    def read_result(self, out_file: Path) -> dict[str, Any] | None:
        return last_json_line(out_file)

    def before_repetition(self, port: int, opener: urllib.request.OpenerDirector) -> str | None:
        """Empty the prefix cache (and the accept counters)."""
        request = urllib.request.Request(f"http://127.0.0.1:{port}/flush_cache", data=b"",
                                         method="POST")
        try:
            with opener.open(request, timeout=30) as response:
                return None if response.status == 200 else f"HTTP {response.status}"
        except (OSError, urllib.error.URLError, ValueError) as exc:
            return str(exc)

    def counters(self, port: int, opener: urllib.request.OpenerDirector) -> dict[str, float]:
        return {}  # bench_serving reports the accept length itself

    def accept_length(self, result: Mapping[str, Any], before: Mapping[str, float],
                      after: Mapping[str, float]) -> float | None:
        value = result.get("accept_length")
        return float(value) if is_real(value) and value > 0 else None


class SGLangEngine(OnStack):
    """Runs configurations with `$SPECBENCH_SGLANG_PYTHON -m sglang.launch_server`, or with a
    stack's interpreter and environment (docs/contracts.md "Stacks")."""

    name = "sglang"

    info = INFO

    def preflight(self, plan: BatchPlan) -> dict[str, str]:
        found = sglang_probe.known_help(self.python, env=self.env)
        self._version = found.version
        # launch_server's parser is argparse's with allow_abbrev on (0.5.19
        # srt/server_args.py:4261 prepare_server_args: `argparse.ArgumentParser(prog="sglang
        # serve")`): `--tp` is `--tp-size`, `--pp` is ambiguous from 0.5.4 on.
        return preflight.check_plan(plan, found, table=load_table(), abbreviations=True)

    def fingerprint(self) -> dict[str, Any]:
        return host_fingerprint(self.python, package="sglang", env=self.env)

    def run(self, config: RunConfig, ctx: RunContext) -> RunRecord:
        python = self.python
        version: str | None = None
        try:  # the record keeps the names that ran
            version = self._version or sglang_probe.sglang_version(
                sglang_probe.resolve_python(python), env=self.env)
            config = to_release(config, version, load_table())
        except (UserError, EngineError):
            pass  # no SGLang to ask: the launch itself will say so
        return run_served(config, ctx, rules=load_rules(),
                          dialect=SGLangDialect(python, version, env=self.env))
