"""The shipped presets run on a host with no internet (docs/contracts.md "Real SGLang": no dataset
or model download at run time).

Every child process gets a `sitecustomize` that refuses, and writes down, any connection to an
address other than loopback: a preset whose engine reached for the Hub would fail here, and the
file would say where it tried to go.
"""

from __future__ import annotations

import dataclasses
import json
import textwrap
from pathlib import Path

import pytest

from jobs.core.plans import load_preset, resolve
from jobs.engines.base import RunContext
from jobs.engines.local.engine import LocalEngine
from jobs.engines.sglang.engine import SGLangEngine
from tests.builders import needs
from tests.standin.harness import make_standin

GUARD = '''
import json, os, socket

_connect = socket.socket.connect
_LOG = os.environ["OFFLINE_GUARD_LOG"]


def _guarded(self, address):
    host = address[0] if isinstance(address, tuple) else str(address)
    if self.family in (socket.AF_INET, socket.AF_INET6) and host not in (
        "127.0.0.1", "::1", "localhost"
    ):
        with open(_LOG, "a", encoding="utf-8") as out:
            out.write(json.dumps({"pid": os.getpid(), "address": str(address)}) + "\\n")
        raise OSError(101, "Network is unreachable (offline host)")
    return _connect(self, address)


socket.socket.connect = _guarded
'''


@pytest.fixture
def offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A host with no internet for every child process; returns the file of blocked attempts."""
    guard = tmp_path / "offline-guard"
    guard.mkdir()
    (guard / "sitecustomize.py").write_text(textwrap.dedent(GUARD), encoding="utf-8")
    attempts = tmp_path / "blocked.jsonl"
    monkeypatch.setenv("PYTHONPATH", str(guard))
    monkeypatch.setenv("OFFLINE_GUARD_LOG", str(attempts))
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "HF_HUB_OFFLINE",
                 "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)  # nothing kinder than a cut cable
    return attempts


def _blocked(attempts: Path) -> list[dict[str, object]]:
    if not attempts.is_file():
        return []
    return [json.loads(line) for line in attempts.read_text(encoding="utf-8").splitlines()]


def test_the_guard_blocks_a_download(offline: Path, tmp_path: Path) -> None:
    """The check can fail: a child that reaches for the internet is refused and written down."""
    import os
    import subprocess
    import sys

    code = "import urllib.request; urllib.request.urlopen('http://93.184.215.14/', timeout=2)"
    done = subprocess.run([sys.executable, "-c", code], env=dict(os.environ), cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "unreachable" in done.stderr
    assert [a["address"] for a in _blocked(offline)] == ["('93.184.215.14', 80)"]


@needs("torch", "transformers")
def test_cpu_demo_runs_offline(offline: Path, tmp_path: Path) -> None:
    full = resolve(load_preset("cpu-demo"), reps=1)
    wanted = ("baseline", "draft-1-layer", "prompt-lookup")  # plain, assisted and n-gram decoding
    plan = dataclasses.replace(full, configs=tuple(full.config(n) for n in wanted),
                               bench={**full.bench, "num-prompts": 1, "output-len": 32})
    engine = LocalEngine()
    assert engine.preflight(plan) == {}
    for config in plan.configs:
        ctx = RunContext(batch_id="b-offline", plan=plan,
                         log_path=tmp_path / f"{config.approach}.log", fingerprint={},
                         on_phase=lambda phase, details: None, should_stop=lambda: False)
        record = engine.run(config, ctx)
        assert record.status == "ok", record.log_tail[-2000:]
        assert record.samples("output_throughput")
    assert _blocked(offline) == []


def test_eagle3_runs_offline(
    offline: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """eagle3's baseline and one approach on the stand-in, which like a GPU host has no internet
    (its bench_serving fails `random` for want of ShareGPT), with the guard on every process."""
    standin = make_standin(tmp_path, monkeypatch)
    monkeypatch.setenv("STANDIN_TAG", standin.tag)
    monkeypatch.setenv("STANDIN_INFO_FILE", str(standin.info_file))
    monkeypatch.setenv("STANDIN_HEALTH_S", "0.05")
    monkeypatch.setenv("STANDIN_VERSION", "0.5.23")
    full = resolve(load_preset("eagle3"), reps=1)
    plan = dataclasses.replace(full, configs=(full.baseline, full.config("eagle3")),
                               bench={**full.bench, "num-prompts": 4})
    engine = SGLangEngine()
    assert engine.preflight(plan) == {}
    for config in plan.configs:
        record = engine.run(config, standin.ctx(plan, config.approach))
        assert record.status == "ok", record.log_tail[-2000:]
        assert record.samples("output_throughput")
    assert _blocked(offline) == []
    standin.assert_clean()
