"""The engine's Prometheus page around each repetition (jobs/engines/server_metrics.py): the
page's real format, the engines' facts, a poller against real HTTP servers and the stand-ins."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from jobs.core.engine_info import describe
from jobs.engines.procs import free_port
from jobs.engines.server_metrics import (
    MetricsPoller,
    is_served,
    poller_for,
    reading_of,
    samples_of,
    summarize,
    summary_of,
)
from tests.standin.harness import STANDIN
from tests.standin.vllm_harness import OPENER, make_vllm_standin, stop, wait_health

SGLANG = describe("sglang").server_metrics
VLLM = describe("vllm").server_metrics

# As SGLang 0.5.2's /metrics writes them (prometheus_client's multiprocess collector), with a
# histogram beside the gauges and two tensor-parallel ranks that see the same figures.
SGLANG_PAGE = """\
# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{engine_type="unified",model_name="m",pp_rank="0",tp_rank="0"} 12.0
sglang:num_running_reqs{engine_type="unified",model_name="m",pp_rank="0",tp_rank="1"} 12.0
# HELP sglang:token_usage The token usage.
# TYPE sglang:token_usage gauge
sglang:token_usage{engine_type="unified",model_name="m",pp_rank="0",tp_rank="0"} 0.97
sglang:token_usage{engine_type="unified",model_name="m",pp_rank="0",tp_rank="1"} 0.97
# HELP sglang:num_queue_reqs The number of requests in the waiting queue.
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{engine_type="unified",model_name="m",pp_rank="0",tp_rank="0"} 3.0
# HELP sglang:spec_accept_length The average acceptance length of speculative decoding.
# TYPE sglang:spec_accept_length gauge
sglang:spec_accept_length{engine_type="unified",model_name="m",pp_rank="0",tp_rank="0"} 2.71
# HELP sglang:e2e_request_latency_seconds Histogram of End-to-end request latency in seconds
# TYPE sglang:e2e_request_latency_seconds histogram
sglang:e2e_request_latency_seconds_bucket{le="0.1",model_name="m"} 0.0
sglang:e2e_request_latency_seconds_bucket{le="+Inf",model_name="m"} 9.0
sglang:e2e_request_latency_seconds_count{model_name="m"} 9.0
sglang:e2e_request_latency_seconds_sum{model_name="m"} 21.5
"""


def vllm_page(*, drafts: int, tokens: int, accepted: int, usage: float, running: int,
              waiting: int) -> str:
    """vLLM 0.33.0's page with two data-parallel engines (label engine) sharing the load."""
    out = []
    for name, kind, values in (
        ("vllm:num_requests_running", "gauge", (running // 2, running - running // 2)),
        ("vllm:num_requests_waiting", "gauge", (waiting, 0)),
        ("vllm:kv_cache_usage_perc", "gauge", (usage, usage / 2)),
    ):
        out += [f"# HELP {name} x", f"# TYPE {name} {kind}"]
        out += [f'{name}{{model_name="m",engine="{e}"}} {float(v)}' for e, v in enumerate(values)]
    for name, total in (("drafts", drafts), ("draft_tokens", tokens),
                        ("accepted_tokens", accepted)):
        family = f"vllm:spec_decode_num_{name}"
        out += [f"# HELP {family} x", f"# TYPE {family} counter"]
        for engine, share in enumerate((total // 2, total - total // 2)):
            out += [f'{family}_total{{model_name="m",engine="{engine}"}} {float(share)}',
                    f'{family}_created{{model_name="m",engine="{engine}"}} 1.7e9']
    return "\n".join(out) + "\n"


def test_the_page_is_parsed_by_sample_name_with_its_labels() -> None:
    samples = samples_of(SGLANG_PAGE)
    assert samples["sglang:token_usage"][1] == ({"engine_type": "unified", "model_name": "m",
                                                 "pp_rank": "0", "tp_rank": "1"}, 0.97)
    assert samples["sglang:e2e_request_latency_seconds_count"] == [({"model_name": "m"}, 9.0)]
    with pytest.raises(ValueError):
        samples_of("sglang:token_usage{tp_rank=0} not-a-number\n")


def test_sglang_s_gauges_count_each_rank_s_copy_once() -> None:
    assert reading_of(SGLANG_PAGE, SGLANG) == {"kv_cache_usage": 0.97, "running": 12.0,
                                               "queued": 3.0, "accept_length": 2.71}


def test_vllm_s_engines_add_up_and_the_kv_cache_is_the_fullest_one() -> None:
    page = vllm_page(drafts=101, tokens=303, accepted=150, usage=0.8, running=9, waiting=4)
    assert reading_of(page, VLLM) == {"kv_cache_usage": 0.8, "running": 9.0, "queued": 4.0,
                                      "drafts": 101.0, "draft_tokens": 303.0, "accepted": 150.0}


def test_a_repetition_s_acceptance_comes_from_the_counters_deltas() -> None:
    readings = [reading_of(vllm_page(drafts=d, tokens=3 * d, accepted=a, usage=u, running=r,
                                     waiting=w), VLLM)
                for d, a, u, r, w in ((100, 90, 0.0, 0, 0), (160, 200, 0.55, 6, 0),
                                      (300, 420, 0.9, 8, 5), (300, 420, 0.0, 0, 0))]
    got = summary_of(readings, errors=1)
    # 330 accepted over 200 drafts of 3 tokens: rate 0.55, length 1 + 330 / 200
    assert got == {"polls": 4, "errors": 1, "kv_cache_usage_max": 0.9, "running_max": 8.0,
                   "queued_max": 5.0, "accept_rate": 0.55, "accept_length": 2.65}


def test_the_accept_length_gauge_is_averaged_after_the_first_reading() -> None:
    before = {"kv_cache_usage": 0.1, "running": 0.0, "queued": 0.0, "accept_length": 3.9}
    during = [{"kv_cache_usage": 0.4, "running": 2.0, "queued": 0.0, "accept_length": v}
              for v in (2.0, 3.0, 0.0)]
    got = summary_of([before, *during])
    assert got["accept_length"] == 2.5  # the previous repetition's 3.9 and an idle 0 left out
    assert "accept_rate" not in got and got["kv_cache_usage_max"] == 0.4
    assert summary_of([]) == {"polls": 0, "errors": 0}


def test_summarize_keeps_each_repetition_and_the_peaks_and_means_over_them() -> None:
    reps = [{"rep": 1, "polls": 5, "errors": 0, "kv_cache_usage_max": 0.6, "running_max": 8.0,
             "accept_length": 2.5, "accept_rate": 0.5},
            {"rep": 2, "polls": 4, "errors": 2, "kv_cache_usage_max": 1.0, "queued_max": 7.0,
             "accept_length": 2.0, "accept_rate": 0.4}]
    got = summarize(reps)
    assert got == {"repetitions": reps, "polls": 9, "errors": 2, "kv_cache_usage_max": 1.0,
                   "running_max": 8.0, "queued_max": 7.0, "accept_length": 2.25,
                   "accept_rate": 0.45}
    assert summarize([]) is None


def test_sglang_serves_the_page_only_when_the_configuration_enables_it() -> None:
    assert SGLANG["needs_arg"] == "enable-metrics"
    assert not is_served(SGLANG, {"model-path": "/m"})
    assert not is_served(SGLANG, {"enable-metrics": False})
    assert is_served(SGLANG, {"enable_metrics": True})
    assert is_served(VLLM, {"model": "/m"})
    assert not is_served({}, {"enable-metrics": True})
    assert poller_for("sglang", port=1, opener=OPENER, server_args={}) is None
    assert isinstance(poller_for("vllm", port=1, opener=OPENER, server_args={}), MetricsPoller)


class _Pages:
    """A /metrics page the test turns, and every GET it answered."""

    def __init__(self, page: str) -> None:
        self.page = page
        self.gets = 0
        self.seen = threading.Event()


@contextmanager
def page_server(pages: _Pages) -> Iterator[int]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

        def do_GET(self) -> None:  # noqa: N802
            data = pages.page.encode()
            pages.gets += 1  # counted before the answer: the client may go on once it has it
            self.send_response(200 if self.path == "/metrics" else 404)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            pages.seen.set()

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield httpd.server_address[1]
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_the_poller_reads_before_during_and_after_over_real_http() -> None:
    quiet = dict(usage=0.0, running=0, waiting=0)
    pages = _Pages(vllm_page(drafts=10, tokens=30, accepted=5, **quiet))
    with page_server(pages) as port:
        poller = MetricsPoller(port, OPENER, VLLM, every_s=0.01).start()
        assert pages.gets == 1  # the starting point is read before start returns
        pages.page = vllm_page(drafts=50, tokens=150, accepted=65, usage=1.0, running=16,
                               waiting=3)
        pages.seen.clear()
        assert pages.seen.wait(5)  # the thread read the busy page
        while pages.gets < 3:
            pages.seen.clear()
            pages.seen.wait(5)
        pages.page = vllm_page(drafts=110, tokens=330, accepted=125, **quiet)
        got = poller.stop()
    assert got["kv_cache_usage_max"] == 1.0 and got["running_max"] == 16.0
    assert got["queued_max"] == 3.0 and got["errors"] == 0 and got["polls"] >= 3
    assert got["accept_rate"] == 0.4 and got["accept_length"] == 2.2  # 120 of 300; 1 + 120/100


def test_a_server_without_the_page_only_counts_errors() -> None:
    poller = MetricsPoller(free_port(), OPENER, VLLM, every_s=0.01).start()
    got = poller.stop()
    assert got["polls"] == 0 and got["errors"] >= 2
    assert set(got) == {"polls", "errors"}


def test_the_vllm_stand_in_s_gauges_follow_the_load(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    vllm = make_vllm_standin(tmp_path, monkeypatch)
    port = free_port()
    spec = json.dumps({"method": "eagle3", "model": "/models/e", "num_speculative_tokens": 3})
    proc = vllm.serve("/models/tiny", "--speculative-config", spec, "--max-num-seqs", "2",
                      port=port, env=vllm.env(STANDIN_STARTUP_S="0.05", STANDIN_KV_TOKENS="64",
                                              STANDIN_THROUGHPUT="100"))
    try:
        assert wait_health(port)
        poller = MetricsPoller(port, OPENER, VLLM, every_s=0.02).start()
        body = json.dumps({"model": "/models/tiny", "prompt": "a b c d e f g h",
                           "max_tokens": 40, "stream": True}).encode()

        def complete() -> None:
            request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions",
                                             data=body, headers={"Content-Type":
                                                                 "application/json"})
            with OPENER.open(request, timeout=10) as response:
                response.read()

        workers = [threading.Thread(target=complete) for _ in range(4)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(10)
        got = poller.stop()
    finally:
        stop(proc)
    # four requests of 8 + 40 tokens over 4 KV blocks of 16, at most 2 running: two of one
    # block each, then two of two (the cache full), then one of three with three waiting
    assert got["kv_cache_usage_max"] == 1.0
    assert got["running_max"] == 2.0 and got["queued_max"] == 3.0
    assert 1.5 < got["accept_length"] < 3.5 and 0.0 < got["accept_rate"] <= 1.0


@contextmanager
def sglang_server(*args: str, **env: str) -> Iterator[int]:
    port = free_port()
    environ = {k: v for k, v in os.environ.items() if not k.startswith("STANDIN_")}
    environ.update(PYTHONPATH=str(STANDIN), STANDIN_STARTUP_S="0.05", STANDIN_HEALTH_S="0.01",
                   **env)
    proc = subprocess.Popen(
        [sys.executable, "-m", "sglang.launch_server", "--model-path", "/models/tiny",
         "--host", "127.0.0.1", "--port", str(port), *args],
        env=environ, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
        start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not _answers(port, "/get_model_info"):
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        yield port
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _answers(port: int, path: str) -> bool:
    try:
        with OPENER.open(f"http://127.0.0.1:{port}{path}", timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def test_the_sglang_stand_in_serves_the_page_only_with_enable_metrics() -> None:
    with sglang_server() as port:
        assert not _answers(port, "/metrics")
    with sglang_server("--enable-metrics", "--speculative-algorithm", "EAGLE3",
                       STANDIN_KV_TOKENS="20") as port:
        poller = MetricsPoller(port, OPENER, SGLANG, every_s=0.01).start()
        body = json.dumps({"text": "hello there", "sampling_params": {"max_new_tokens": 16}})
        with OPENER.open(urllib.request.Request(f"http://127.0.0.1:{port}/generate",
                                                data=body.encode()), timeout=10) as response:
            response.read()
        got = poller.stop()
    # one request of 16 + 7 tokens over 20 cached tokens: full; its own accept length
    assert got["kv_cache_usage_max"] == 1.0 and got["running_max"] == 1.0
    assert got["queued_max"] == 0.0 and 2.0 < got["accept_length"] < 3.1
