"""The vLLM engine (docs/contracts.md "vLLM engine"): `vllm serve MODEL` per configuration, `vllm
bench serve` per repetition.

The run itself is the served engines' (`jobs.engines.served`); what is vLLM's own: the preset's
`model` is the positional model tag (never a flag), a mapping is passed as JSON
(`--speculative-config '{"method": "eagle3", ...}'`), the server is ready when `/health` answers
(the port refuses connections while the model loads; no ready line is needed), each repetition's
result is the JSON file `--save-result` writes under a fresh name, and the accept length is the
result's `spec_decode_acceptance_length`, else 1 + accepted / drafts from the server's
`vllm:spec_decode_*` counters read around the repetition. vLLM has no cache flush outside its
development mode: each repetition's own seed gives it prompts of its own, so no prefix is reused.
"""

from __future__ import annotations

import dataclasses
import json
import re
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jobs.core.engine_info import describe
from jobs.core.plans import BatchPlan, RunConfig
from jobs.core.records import RunRecord
from jobs.core.rules import load_rules
from jobs.engines import flags, preflight
from jobs.engines.base import RunContext
from jobs.engines.dialect import is_real, prompts_given, seeded
from jobs.engines.fingerprint import host_fingerprint
from jobs.engines.on_stack import OnStack
from jobs.engines.served import run_served
from jobs.engines.vllm import bench_client
from jobs.engines.vllm import probe as vllm_probe
from jobs.errors import EngineError, UserError

INFO = describe("vllm")
MODEL = "model"  # the preset's server arg that is vLLM's positional model tag
CLI = ("-m", "vllm.entrypoints.cli.main")
BENCH_DEFAULT_PROMPTS = 1000  # vllm bench serve's --num-prompts default (0.33)
ACCEPTED = "vllm:spec_decode_num_accepted_tokens"
DRAFTS = "vllm:spec_decode_num_drafts"
_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][\w:]*)(?:\{[^}]*\})?\s+(?P<value>\S+)")


def to_cli_args(args: Mapping[str, Any]) -> list[str]:
    """Server args or bench settings as vLLM's flags (`jobs.engines.flags`), a mapping as compact
    JSON; `model` is never a flag here (`vllm serve MODEL`)."""
    return flags.to_cli_args({k: v for k, v in args.items() if k != MODEL},
                             json_separators=(",", ":"))


def model_of(config: RunConfig) -> str:
    model = config.server_args.get(MODEL)
    if not isinstance(model, str) or not model:
        raise UserError(f"{config.approach}: a vLLM configuration needs server_args.model (the "
                        "model vLLM serves, its positional argument)")
    return model


def counters_of(text: str) -> dict[str, float]:
    """The spec-decode counters of a Prometheus text page, summed over their labels (one series
    per engine and model); a counter's `_total` sample counts under its family's name."""
    found: dict[str, float] = {}
    for line in text.splitlines():
        if (sample := _SAMPLE.match(line)) is None:
            continue
        name = sample.group("name").removesuffix("_total")
        if name in (ACCEPTED, DRAFTS):
            try:
                found[name] = found.get(name, 0.0) + float(sample.group("value"))
            except ValueError:
                continue
    return found


class VLLMDialect:
    """What vLLM says differently (jobs.engines.served.Dialect)."""

    bench_name = "vllm bench serve"
    ready_line: str | None = None
    metrics = INFO.metrics

    def __init__(self, python: str, model: str, version: str | None = None, *,
                 env: Mapping[str, str] | None = None) -> None:
        self.python = python
        self.model = model
        self.version = version  # the installed release (None: unknown)
        self.env: Mapping[str, str] = dict(env or {})  # the stack's

    def server_argv(self, port: int, config: RunConfig) -> list[str]:
        return [self.python, *CLI, "serve", self.model, "--host", "127.0.0.1", "--port",
                str(port), *to_cli_args(config.server_args)]

    def bench_argv(self, port: int, out_file: Path, bench: Mapping[str, Any]) -> list[str]:
        return [self.python, *CLI, "bench", "serve", "--backend", "vllm", "--base-url",
                f"http://127.0.0.1:{port}", "--model", self.model, "--save-result",
                "--result-dir", str(out_file.parent), "--result-filename", out_file.name,
                *to_cli_args(bench)]

    def bench_settings(self, bench: Mapping[str, Any], *, rep: int) -> dict[str, Any]:
        return seeded(bench, rep=rep)

    def prompts_sent(self, bench: Mapping[str, Any]) -> int:
        return prompts_given(bench, default=BENCH_DEFAULT_PROMPTS)

    def read_result(self, out_file: Path) -> dict[str, Any] | None:
        try:
            data = json.loads(out_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def before_repetition(self, port: int, opener: urllib.request.OpenerDirector) -> str | None:
        return None  # see the module: a seed per repetition instead

    def sampling(self, bench: Mapping[str, Any]) -> dict[str, Any]:
        return bench_client.sampling(bench, self.version)

    def counters(self, port: int, opener: urllib.request.OpenerDirector) -> dict[str, float]:
        try:
            with opener.open(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
                return counters_of(response.read().decode("utf-8", "replace"))
        except (OSError, urllib.error.URLError, ValueError):
            return {}

    def accept_length(self, result: Mapping[str, Any], before: Mapping[str, float],
                      after: Mapping[str, float]) -> float | None:
        value = result.get("spec_decode_acceptance_length")
        if is_real(value) and value > 0:
            return float(value)
        drafts = after.get(DRAFTS, 0.0) - before.get(DRAFTS, 0.0)
        accepted = after.get(ACCEPTED, 0.0) - before.get(ACCEPTED, 0.0)
        return 1.0 + accepted / drafts if drafts > 0 and accepted >= 0 else None


class VLLMEngine(OnStack):
    """Runs configurations with `$SPECBENCH_VLLM_PYTHON -m vllm.entrypoints.cli.main serve`, or
    with a stack's interpreter and environment (docs/contracts.md "Stacks")."""

    name = "vllm"

    info = INFO

    def preflight(self, plan: BatchPlan) -> dict[str, str]:
        for config in plan.configs:
            model_of(config)
        found = vllm_probe.known_help(self.python, env=self.env)
        self._version = found.version
        flags_only = dataclasses.replace(plan, configs=tuple(
            dataclasses.replace(c, server_args={k: v for k, v in c.server_args.items()
                                                if k != MODEL})
            for c in plan.configs))
        return preflight.check_plan(flags_only, found, abbreviations=True)

    def fingerprint(self) -> dict[str, Any]:
        return host_fingerprint(self.python, package="vllm", env=self.env)

    def run(self, config: RunConfig, ctx: RunContext) -> RunRecord:
        python, version = self.python, self._version
        if version is None:
            try:  # its metadata, cached: the sampling its bench client sends depends on it
                version = vllm_probe.vllm_version(python, env=self.env)
            except EngineError:
                pass  # no vLLM to ask: the launch itself will say so
        dialect = VLLMDialect(python, model_of(config), version, env=self.env)
        return run_served(config, ctx, rules=load_rules(), dialect=dialect)
