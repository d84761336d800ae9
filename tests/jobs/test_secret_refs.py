"""Secret references, the pure rules and their adapters (issue 19, item 4): what counts as a
literal secret, how a worker resolves `${NAME}`, what it masks, and how a missing NAME is
diagnosed. The end-to-end runs are in tests/bot/test_secret_references.py."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from jobs.core.advice import analyze, load_remedies
from jobs.core.events import MaskedSink, make_event
from jobs.core.plans import (
    ARG_UNSET_LINE,
    UNSET_LINE,
    RunConfig,
    is_literal_secret,
    is_literal_secret_arg,
    is_secret_arg,
    parse_preset,
    reference_name,
    reference_values,
    resolve,
    resolve_args,
    resolve_env,
)
from jobs.core.rules import load_rules
from jobs.core.verdicts import Metric
from jobs.engines.base import RunContext, server_env, worker_secrets
from jobs.engines.local.engine import LocalEngine
from jobs.errors import KnobError, PresetError
from jobs.redaction import redact_env, secret_values
from tests.conftest import make_plan, make_record

VALUE = "sk-unit-secretref-3f9a1c"

PRESET = """\
name: p
engine: local
baseline:
  server_args: {hidden-size: 8}
  env: {FOO_TOKEN: "${FOO_TOKEN}", TOKENIZERS_PARALLELISM: "false", NCCL_ALGO: Tree}
overridable: [FOO_TOKEN, API_KEY]
approaches:
  - name: a
    env: {API_KEY: "${VAULT_ITEM}"}
"""


def test_what_counts_as_a_literal_secret() -> None:
    assert is_literal_secret("HF_TOKEN", "hf_abcdef")
    assert is_literal_secret("my_api_key", "abcd")  # case-insensitive names
    assert is_literal_secret("DB_PASSWORD", 12345678)  # a number is a value too
    assert not is_literal_secret("HF_TOKEN", "${HF_TOKEN}")
    assert not is_literal_secret("HF_TOKEN", "${OTHER_NAME}")
    # Values masking would never hide are no secret: switches and very short values.
    assert not is_literal_secret("TOKENIZERS_PARALLELISM", "false")
    assert not is_literal_secret("KEY_SIZE", "16")
    assert not is_literal_secret("NCCL_ALGO", "a-long-plain-value")
    # A reference must be the whole value.
    assert is_literal_secret("HF_TOKEN", "Bearer ${HF_TOKEN}")
    assert reference_name("${A_1}") == "A_1" and reference_name("$A") is None
    assert reference_name("${1A}") is None


def test_resolving_takes_the_workers_values_and_names_what_it_lacks() -> None:
    env = {"FOO_TOKEN": "${FOO_TOKEN}", "LABEL": "${PLAIN}", "MISSING_KEY": "${NOPE}",
           "NCCL_ALGO": "Tree"}
    resolved = resolve_env(env, environ={"FOO_TOKEN": VALUE, "PLAIN": "plain-value"})
    assert resolved.env == {"FOO_TOKEN": VALUE, "LABEL": "plain-value", "NCCL_ALGO": "Tree"}
    assert resolved.unset == (UNSET_LINE.format(knob="MISSING_KEY", name="NOPE"),)
    assert resolved.unset[0] == (
        "specbench: env MISSING_KEY: ${NOPE} is not set in the worker's environment")
    # Every resolved value is masked, whatever its variable's name; a reference is never.
    assert reference_values([env], environ={"FOO_TOKEN": VALUE, "PLAIN": "plain-value"}) == (
        VALUE, "plain-value")
    assert secret_values(env) == ()
    assert redact_env(env) == {**env, "NCCL_ALGO": "Tree"}
    assert redact_env({"FOO_TOKEN": VALUE})["FOO_TOKEN"] == "***"


def test_the_worker_resolves_at_start_and_masks_what_it_resolved(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("VAULT_ITEM", VALUE)
    monkeypatch.delenv("FOO_TOKEN", raising=False)
    config = RunConfig(approach="a", role="approach", parent=None, hypothesis="",
                       change={"server_args": {}, "env": {}}, server_args={},
                       env={"LABEL": "${VAULT_ITEM}", "FOO_TOKEN": "${FOO_TOKEN}"})
    started = server_env(config, EXTRA="1")
    assert started.env["LABEL"] == VALUE and started.env["EXTRA"] == "1"
    assert "FOO_TOKEN" not in started.env  # never the reference itself
    assert VALUE in started.secrets and not started.is_complete
    assert VALUE in worker_secrets(config.env)

    sent: list[dict[str, object]] = []

    class Sink:
        def emit(self, event: dict[str, object]) -> None:
            sent.append(event)

    MaskedSink(Sink(), secrets=worker_secrets(config.env)).emit(make_event(
        "approach.finished", "b-1", why=f"line with {VALUE}", report={"x": [VALUE, 1]}))
    assert VALUE not in str(sent) and sent[0]["why"] == "line with ***"


def test_a_preset_keeps_references_and_refuses_literals_with_the_hint() -> None:
    preset = parse_preset(PRESET, source="p.yaml", stem="p")
    plan = resolve(preset, overrides={"FOO_TOKEN": "${OTHER}"})
    assert plan.baseline.env["FOO_TOKEN"] == "${OTHER}"
    assert plan.config("a").env["API_KEY"] == "${VAULT_ITEM}"
    with pytest.raises(KnobError, match=r"--set env API_KEY holds a literal secret: "
                                        r'write API_KEY: "\$\{API_KEY\}"'):
        resolve(preset, overrides={"API_KEY": VALUE})
    literal = PRESET.replace('"${VAULT_ITEM}"', f'"{VALUE}"')
    with pytest.raises(PresetError) as refused:
        parse_preset(literal, source="p.yaml", stem="p")
    assert str(refused.value).startswith("p.yaml:9: env API_KEY holds a literal secret")
    assert VALUE not in str(refused.value)


def test_a_missing_reference_is_bad_config_with_its_remedy() -> None:
    line = UNSET_LINE.format(knob="HF_TOKEN", name="HF_TOKEN")
    base = make_record("baseline", samples=[100.0, 101.0])
    failed = make_record("gated", status="failed", samples=[], log_tail=line)
    report = analyze([base, failed], metric=Metric("output_throughput"), rules=load_rules(),
                     remedies=load_remedies(), engine="sglang")
    (result,) = [r for r in report["results"] if r["approach"] == "gated"]
    assert result["cause"] == "bad-config" and "${HF_TOKEN} is not set" in result["why"]
    steps = [s["action"] for s in report["next_steps"]]
    assert any(s.startswith("Set HF_TOKEN in the environment of the worker that runs gated")
               for s in steps), steps


def test_the_local_engine_starts_no_child_without_the_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NOT_SET_ANYWHERE", raising=False)
    plan = make_plan(engine="local")
    config = RunConfig(approach="baseline", role="baseline", parent=None, hypothesis="",
                       change={"server_args": {}, "env": {}}, server_args={},
                       env={"HF_TOKEN": "${NOT_SET_ANYWHERE}"})
    phases: list[str] = []
    ctx = RunContext(batch_id="b-1", plan=plan, log_path=tmp_path / "baseline.log",
                     fingerprint={}, on_phase=lambda name, _: phases.append(name),
                     should_stop=lambda: False)
    record = LocalEngine().run(config, ctx)
    assert record.status == "failed" and "launching" not in phases
    assert record.log_tail.endswith(
        "specbench: env HF_TOKEN: ${NOT_SET_ANYWHERE} is not set in the worker's environment")
    assert record.env == {"HF_TOKEN": "${NOT_SET_ANYWHERE}"}
    assert "${NOT_SET_ANYWHERE} is not set" in (tmp_path / "baseline.log").read_text()


# --------------------------------------------------------------------------- secret server args


def test_which_server_args_hold_a_secret() -> None:
    for name in ("api-key", "admin-api-key", "hf-token", "ssl-keyfile-password", "--api_key",
                 "gsp-send-routing-key", "client-secret"):
        assert is_secret_arg(name), name
    for name in ("max-total-tokens", "max-prefill-tokens", "speculative-num-draft-tokens",
                 "tokenizer-path", "tokenizer-mode", "skip-tokenizer-init", "ssl-keyfile",
                 "mem-fraction-static", "disable-custom-all-reduce"):
        assert not is_secret_arg(name), name
    assert is_literal_secret_arg("api-key", "sk-abcdef")
    assert is_literal_secret_arg("api-key", ["${A}", "sk-abcdef"])  # vLLM: nargs +
    assert not is_literal_secret_arg("api-key", ["${A}", "${B}"])
    assert not is_literal_secret_arg("hf-token", True)  # a bare flag: vLLM's stored login
    assert not is_literal_secret_arg("kt-max-deferred-experts-per-token", 1024)  # a number
    assert not is_literal_secret_arg("api-key", "${SGLANG_API_KEY}")
    assert not is_literal_secret_arg("tokenizer-path", "/models/secret-tokenizer")


def test_a_preset_and_set_refuse_a_literal_secret_arg_naming_the_line() -> None:
    text = PRESET.replace("server_args: {hidden-size: 8}",
                          'server_args: {hidden-size: 8, api-key: "${SERVE_KEY}"}')
    preset = parse_preset(text.replace("overridable: [", "overridable: [api-key, "),
                          source="p.yaml", stem="p")
    plan = resolve(preset, overrides={"api-key": "${OTHER_KEY}"})
    assert plan.baseline.server_args["api-key"] == "${OTHER_KEY}"
    with pytest.raises(KnobError, match=r'--set server arg api-key holds a literal secret: '
                                        r'write api-key: "\$\{API_KEY\}"'):
        resolve(preset, overrides={"api-key": VALUE})
    with pytest.raises(PresetError) as refused:
        parse_preset(text.replace('"${SERVE_KEY}"', VALUE), source="p.yaml", stem="p")
    assert str(refused.value).startswith("p.yaml:4: server arg api-key holds a literal secret")
    assert VALUE not in str(refused.value)


def test_the_worker_resolves_secret_args_at_start_and_masks_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("VAULT_ITEM", VALUE)
    monkeypatch.delenv("NOPE", raising=False)
    args = {"api-key": "${VAULT_ITEM}", "model-path": "${VAULT_ITEM}", "tp-size": 2}
    resolved = resolve_args(args, environ={"VAULT_ITEM": VALUE})
    # only a secret arg's reference is read: other args are passed as they are written
    assert resolved.args == {"api-key": VALUE, "model-path": "${VAULT_ITEM}", "tp-size": 2}
    listed = resolve_args({"api-key": ["${VAULT_ITEM}", "${NOPE}"]}, environ={"VAULT_ITEM": "x"})
    assert "api-key" not in listed.args
    assert listed.unset == (ARG_UNSET_LINE.format(knob="api-key", name="NOPE"),)
    assert listed.unset[0] == (
        "specbench: server arg api-key: ${NOPE} is not set in the worker's environment")

    config = RunConfig(approach="a", role="approach", parent=None, hypothesis="",
                       change={"server_args": {}, "env": {}}, server_args=args, env={})
    started = server_env(config)
    assert started.config.server_args["api-key"] == VALUE and started.is_complete
    assert VALUE in started.secrets and config.server_args["api-key"] == "${VAULT_ITEM}"
    assert VALUE in worker_secrets(server_args=[config.server_args])
    assert reference_values([], environ={"VAULT_ITEM": VALUE}, server_args=[args]) == (VALUE,)


def test_a_process_groups_registry_entry_never_holds_a_secret_arg(tmp_path: Path) -> None:
    """The registry (what a worker killed with -9 left running) keeps each group's command
    line: a resolved secret arg reads *** there, as in the group's log."""
    from jobs.engines import orphans
    from jobs.engines.procs import ProcessGroup

    orphans.set_registry(tmp_path / "run")
    try:
        group = ProcessGroup(
            [sys.executable, "-c", "import sys, time; print(sys.argv[-1]); time.sleep(30)",
             "--api-key", VALUE],
            env=dict(os.environ), log_path=tmp_path / "g.log", secrets=[VALUE])
        try:
            (entry,) = (tmp_path / "run").glob("pg-*.json")
            text = entry.read_text()
            assert VALUE not in text and '"--api-key", "***"' in text, text
        finally:
            group.stop(grace_s=1.0)
    finally:
        orphans.set_registry(None)
    assert VALUE not in (tmp_path / "g.log").read_text()
