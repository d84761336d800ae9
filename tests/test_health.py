"""Health checks: heartbeat files for bot, worker and beat; GET /healthz for an HTTP bot."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from jobs import __version__
from jobs.ops import health

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_a_fresh_heartbeat_is_healthy() -> None:
    path = health.touch_heartbeat("worker")
    assert path.is_file()
    assert health.main(["worker", "--quiet"]) == 0


def test_no_heartbeat_is_unhealthy(capsys: pytest.CaptureFixture[str]) -> None:
    assert health.main(["beat"]) == 1
    assert "no heartbeat" in capsys.readouterr().out


def test_a_stale_heartbeat_is_unhealthy() -> None:
    path = health.touch_heartbeat("bot")
    old = time.time() - 600
    os.utime(path, (old, old))
    assert health.main(["bot", "--quiet"]) == 1
    assert health.main(["bot", "--quiet", "--max-age", "900"]) == 0


def test_a_bad_role_is_unhealthy_not_a_crash() -> None:
    assert health.main(["../etc", "--quiet"]) == 1


def test_the_heartbeat_thread_beats_and_stop_removes_it() -> None:
    beat = health.start_heartbeat("beat", interval=0.05)
    try:
        deadline = time.monotonic() + 60
        while health.heartbeat_age("beat") is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert health.main(["beat", "--quiet"]) == 0
    finally:
        beat.stop()
    assert health.heartbeat_age("beat") is None


def test_no_beat_while_not_alive() -> None:
    beat = health.start_heartbeat("bot", interval=0.02, is_alive=lambda: False)
    time.sleep(0.1)
    beat.stop()
    assert health.heartbeat_age("bot") is None


class _Healthz(BaseHTTPRequestHandler):
    status = 200

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self.send_response(self.status if self.path == "/healthz" else 404)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[ThreadingHTTPServer]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Healthz)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()
    _Healthz.status = 200


def test_http_mode_asks_healthz(server: ThreadingHTTPServer) -> None:
    port = str(server.server_address[1])
    assert health.main(["bot", "--http", port, "--quiet"]) == 0
    _Healthz.status = 503
    assert health.main(["bot", "--http", port, "--quiet"]) == 1


def test_http_mode_with_nothing_listening_is_unhealthy(server: ThreadingHTTPServer) -> None:
    port = server.server_address[1]
    server.shutdown()
    server.server_close()
    assert health.main(["bot", "--http", str(port), "--quiet"]) == 1


def test_the_module_runs_as_compose_calls_it() -> None:
    health.touch_heartbeat("worker")
    env = {**os.environ, "PYTHONPATH": REPO_ROOT}
    ok = subprocess.run([sys.executable, "-m", "jobs.ops.health", "worker"], env=env,
                        capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.startswith("healthy")
    bad = subprocess.run([sys.executable, "-m", "jobs.ops.health", "beat"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1


def _redis_url() -> str:
    import socket

    try:
        socket.create_connection(("127.0.0.1", 6379), timeout=0.5).close()
    except OSError:
        if os.environ.get("SPECBENCH_REQUIRE_REDIS"):
            pytest.fail("no Redis on 127.0.0.1:6379 and SPECBENCH_REQUIRE_REDIS is set")
        pytest.skip("no Redis on 127.0.0.1:6379")
    return "redis://127.0.0.1:6379/15"


@pytest.mark.redis
def test_the_beat_process_keeps_its_heartbeat(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": REPO_ROOT, "SPECBENCH_DATA_DIR": str(tmp_path),
           "SPECBENCH_BROKER_URL": _redis_url(), "SPECBENCH_LOG_FORMAT": "json"}
    beat = subprocess.Popen([sys.executable, "-m", "bot.slack.beat"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    check = [sys.executable, "-m", "jobs.ops.health", "beat", "--quiet"]
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and beat.poll() is None:
            if subprocess.run(check, env=env, timeout=30).returncode == 0:
                break
            time.sleep(0.2)
        assert subprocess.run(check, env=env, timeout=30).returncode == 0
    finally:
        beat.terminate()
        _, err = beat.communicate(timeout=30)
    first = json.loads(err.splitlines()[0])
    assert first["role"] == "beat" and first["version"] == __version__
    assert not (tmp_path / "heartbeat" / "beat").exists()  # stopped: no stale heartbeat
