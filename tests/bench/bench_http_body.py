"""Bench of the Slack HTTP bot's body cap (issue 10): what a 20 MB unsigned POST costs a real
`specbench bot --http PORT` process, in memory (VmRSS of /proc/PID/status, before and after,
and the growth of its peak, VmHWM) and in log (its log file's size, before and after).
`run()` returns name → figure.

Two bodies: one with a Content-Length (refused with 413 before a byte of it is read) and one
chunked, with no length (read up to the cap, then refused). Both sent by a client that watches
for an early answer, and both again by one that sends all 20 MB before it reads (http.client):
the lingering close (bot/slack/linger.py) lets that one read its 413 too.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run() -> dict[str, str]:
    from tests.bot.conftest import DEMO
    from tests.bot.test_http_hardening import BotProcess, post_twenty_mb
    from tests.bot.test_http_linger import post_with_http_client
    from tests.standin.slack_api import SlackStandin

    work = Path(tempfile.mkdtemp(prefix="bench-http-body-"))
    shutil.copytree(REPO / "config", work / "config")
    (work / "config" / "presets" / "demo.yaml").write_text(DEMO)
    standin = SlackStandin().start()
    bot = BotProcess(root=work, config=work / "config", api_url=standin.url)
    figures: dict[str, str] = {}
    try:
        time.sleep(1.0)  # start-up settles (auth.test, catch-up) outside the figures
        for name, chunked in (("Content-Length", False), ("chunked, no length", True)):
            rss, peak, logged = bot.rss_mib(), bot.rss_mib("VmHWM"), bot.log_bytes()
            started = time.monotonic()
            status, sent = post_twenty_mb(bot.port, chunked=chunked)
            took = time.monotonic() - started
            time.sleep(0.5)
            figures[f"http_body.20MB_unsigned ({name}): status, body bytes sent, s"] = (
                f"{status}, {sent}, {took:.2f}")
            figures[f"http_body.20MB_unsigned ({name}): bot RSS growth MiB"] = (
                f"{bot.rss_mib() - rss:.1f} (from {rss:.0f}; peak "
                f"+{bot.rss_mib('VmHWM') - peak:.1f})")
            figures[f"http_body.20MB_unsigned ({name}): bot log growth KiB"] = (
                f"{(bot.log_bytes() - logged) / 1024:.2f}")
        for name, chunked in (("Content-Length", False), ("chunked", True)):
            started = time.monotonic()
            try:
                answer = str(post_with_http_client(bot.port, chunked=chunked)[0])
            except OSError as exc:  # what a client saw before the lingering close
                answer = type(exc).__name__
            figures[f"http_body.20MB_unsigned, all sent before reading (http.client, {name}): "
                    "status, s"] = f"{answer}, {time.monotonic() - started:.2f}"
    finally:
        bot.stop()
        standin.stop()
        shutil.rmtree(work, ignore_errors=True)
    return figures


if __name__ == "__main__":
    for name, figure in run().items():
        print(f"{name}: {figure}")
