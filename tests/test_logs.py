"""Structured logs: JSON lines that parse, plain lines otherwise, secrets never shown."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from jobs import __version__
from jobs.errors import BrokerError
from jobs.ops.logs import configure_logging, log_start, scrub

SECRET = "xoxb-planted-secret-4711"


@pytest.fixture(autouse=True)
def _root_logger(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test configures the root logger; put it back as it was."""
    monkeypatch.setenv("SLACK_BOT_TOKEN", SECRET)
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def _lines(stream: io.StringIO) -> list[str]:
    return [line for line in stream.getvalue().splitlines() if line]


def test_json_lines_parse_and_carry_the_fields() -> None:
    stream = io.StringIO()
    configure_logging(json=True, stream=stream)
    log = logging.getLogger("jobs.broker.worker")
    log.info("batch %s started", "b-1", extra={"queue": "h200-a"})
    (line,) = _lines(stream)
    entry = json.loads(line)
    assert entry["message"] == "batch b-1 started"
    assert entry["level"] == "info" and entry["logger"] == "jobs.broker.worker"
    assert entry["queue"] == "h200-a"
    assert entry["ts"].endswith("Z")


def test_json_redacts_secrets_in_message_extras_and_tracebacks() -> None:
    stream = io.StringIO()
    configure_logging(json=True, stream=stream)
    log = logging.getLogger("bot")
    log.warning('token "%s" \\ rejected', SECRET, extra={"env": {"HF_TOKEN": "hf_abcdef"}})
    try:
        raise RuntimeError(f"Slack said no to {SECRET}")
    except RuntimeError:
        log.exception("call failed")
    out = stream.getvalue()
    assert SECRET not in out and "hf_abcdef" not in out
    first, second = (json.loads(line) for line in _lines(stream))
    assert "***" in first["message"] and first["env"] == {"HF_TOKEN": "***"}
    assert "RuntimeError" in second["exc"] and "***" in second["exc"]


def test_url_passwords_are_masked() -> None:
    def scrubbed(text: str) -> str:
        return scrub(text, secrets=())

    assert scrubbed("redis://:hunter2@redis:6379/0") == "redis://:***@redis:6379/0"
    assert scrubbed("postgresql+psycopg://specbench:pw@db/x") == "postgresql+psycopg://specbench:***@db/x"
    assert scrubbed("http://example.com:8080/path") == "http://example.com:8080/path"


def test_the_broker_error_hides_the_urls_password() -> None:
    error = BrokerError.unreachable("redis://:hunter2@redis:6379/0", "Connection refused")
    assert str(error) == "cannot reach the broker at redis://:***@redis:6379/0: Connection refused"


def test_plain_lines_are_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPECBENCH_LOG_FORMAT", raising=False)
    stream = io.StringIO()
    configure_logging(stream=stream)
    logging.getLogger("bot").error("bad token %s", SECRET)
    (line,) = _lines(stream)
    assert "ERROR bot: bad token ***" in line
    with pytest.raises(json.JSONDecodeError):
        json.loads(line)


def test_the_environment_asks_for_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECBENCH_LOG_FORMAT", "json")
    stream = io.StringIO()
    configure_logging(stream=stream)
    logging.getLogger("x").info("hello")
    assert json.loads(_lines(stream)[0])["message"] == "hello"


def test_configuring_twice_keeps_one_handler() -> None:
    stream = io.StringIO()
    configure_logging(json=True, stream=io.StringIO())
    configure_logging(json=True, stream=stream)
    logging.getLogger("x").info("once")
    assert len(_lines(stream)) == 1


def test_the_version_is_logged_at_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECBENCH_BROKER_URL", "redis://:pw-9876@localhost:6379/0")
    stream = io.StringIO()
    configure_logging(json=True, stream=stream)
    log_start("worker", queue="h200-a")
    entry = json.loads(_lines(stream)[0])
    assert entry["version"] == __version__ and __version__ in entry["message"]
    assert entry["role"] == "worker" and entry["mode"] == "distributed"
    assert entry["queue"] == "h200-a"
