"""The engine's own figures while a repetition runs: its Prometheus page, polled (docs/contracts.md
"Evidence for the why", server metrics).

A served engine may say what the benchmark cannot: how full its KV cache got, how many requests
ran and waited, how many draft tokens it accepted. `MetricsPoller` reads GET /metrics from
before a repetition's benchmark starts until after it ends, every POLL_S on a daemon thread (a
failed read only counts), and sums it up per repetition; `summarize` makes the record's
`server_metrics` of those. Which names to read, and whether a configuration serves the page at
all, are the engine's facts (engine.yaml `server_metrics`): no engine is named here.
"""

from __future__ import annotations

import statistics
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from jobs.core.engine_info import describe
from jobs.engines.flags import to_flag

POLL_S = 0.5
TIMEOUT_S = 2.0
DIGITS = 4
PEAKS = ("kv_cache_usage", "running", "queued")  # gauges: their maximum over a repetition
Series = list[tuple[dict[str, str], float]]


def is_served(facts: Mapping[str, Any], server_args: Mapping[str, Any]) -> bool:
    """Whether a configuration's server serves the page: the engine has one, and the arg that
    turns it on (`needs_arg`), if any, is set. specbench never adds that arg itself."""
    if not facts.get("gauges") and not facts.get("counters"):
        return False
    needs = facts.get("needs_arg")
    return needs is None or any(to_flag(k) == to_flag(str(needs)) and v is not None
                                and v is not False for k, v in server_args.items())


def samples_of(text: str) -> dict[str, Series]:
    """Every sample of a Prometheus text page by its name (a counter's as exposed: `_total`);
    a malformed page raises ValueError."""
    found: dict[str, Series] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found.setdefault(sample.name, []).append((dict(sample.labels), float(sample.value)))
    return found


def _combined(series: Series, *, rank_labels: Iterable[str],
              combine: Callable[[list[float]], float]) -> float:
    """One figure of a gauge's series: those differing only in rank labels are one figure seen
    by several ranks (their maximum); the rest (engines, data-parallel ranks) are combined."""
    ranks = set(rank_labels)
    groups: dict[tuple[tuple[str, str], ...], float] = {}
    for labels, value in series:
        key = tuple(sorted((k, v) for k, v in labels.items() if k not in ranks))
        groups[key] = max(value, groups.get(key, value))
    return combine(list(groups.values()))


def reading_of(text: str, facts: Mapping[str, Any]) -> dict[str, float]:
    """The facts' gauges and counters on one page, by their specbench names."""
    samples = samples_of(text)
    ranks = facts.get("rank_labels") or ()
    out: dict[str, float] = {}
    for key, name in (facts.get("gauges") or {}).items():
        if samples.get(name):
            combine = max if key == "kv_cache_usage" else sum
            out[key] = _combined(samples[name], rank_labels=ranks, combine=combine)
    for key, name in (facts.get("counters") or {}).items():
        if samples.get(name):
            out[key] = sum(value for _, value in samples[name])
    return out


def summary_of(readings: Sequence[Mapping[str, float]], *, errors: int = 0) -> dict[str, Any]:
    """One repetition's figures from its readings, the first taken before its benchmark started
    and the last after it ended: each gauge's peak; the accept length and rate from the
    counters' deltas, else the mean of the accept-length gauge after the first reading (it holds
    the engine's latest figure, which before the start is the previous repetition's)."""
    out: dict[str, Any] = {"polls": len(readings), "errors": errors}
    for key in PEAKS:
        values = [r[key] for r in readings if key in r]
        if values:
            out[f"{key}_max"] = round(max(values), DIGITS)
    first, last = (readings[0], readings[-1]) if readings else ({}, {})
    delta = {k: last[k] - first[k] for k in ("drafts", "draft_tokens", "accepted")
             if k in first and k in last}
    if delta.get("draft_tokens", 0) > 0 and "accepted" in delta:
        out["accept_rate"] = round(delta["accepted"] / delta["draft_tokens"], DIGITS)
    if delta.get("drafts", 0) > 0 and "accepted" in delta:
        out["accept_length"] = round(1.0 + delta["accepted"] / delta["drafts"], DIGITS)
    elif lengths := [r["accept_length"] for r in readings[1:] if r.get("accept_length", 0) > 0]:
        out["accept_length"] = round(statistics.fmean(lengths), DIGITS)
    return out


def summarize(reps: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The record's `server_metrics`: each repetition's figures, the peaks' maximum and the
    acceptance's mean over them; None without a repetition."""
    if not reps:
        return None
    out: dict[str, Any] = {"repetitions": [dict(r) for r in reps],
                           "polls": sum(int(r.get("polls", 0)) for r in reps),
                           "errors": sum(int(r.get("errors", 0)) for r in reps)}
    for key in (f"{k}_max" for k in PEAKS):
        if values := [float(r[key]) for r in reps if key in r]:
            out[key] = max(values)
    for key in ("accept_length", "accept_rate"):
        if values := [float(r[key]) for r in reps if key in r]:
            out[key] = round(statistics.fmean(values), DIGITS)
    return out


class MetricsPoller:
    """Reads the page from `start` to `stop` on a daemon thread; `stop` returns the summary."""

    def __init__(self, port: int, opener: urllib.request.OpenerDirector,
                 facts: Mapping[str, Any], *, every_s: float = POLL_S) -> None:
        self.url = f"http://127.0.0.1:{port}{facts.get('path') or '/metrics'}"
        self.opener = opener
        self.facts = facts
        self.every_s = every_s
        self.readings: list[dict[str, float]] = []
        self.errors = 0
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> MetricsPoller:
        self._poll()  # the counters' starting point, before the benchmark's first request
        self._thread = threading.Thread(target=self._loop, name="server-metrics", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> dict[str, Any]:
        self._done.set()
        if self._thread is not None:
            self._thread.join(TIMEOUT_S + self.every_s)
        self._poll()  # the counters' end point, after the benchmark's last request
        with self._lock:
            return summary_of(list(self.readings), errors=self.errors)

    def _loop(self) -> None:
        while not self._done.wait(self.every_s):
            self._poll()

    def _poll(self) -> None:
        try:
            with self.opener.open(self.url, timeout=TIMEOUT_S) as response:
                reading = reading_of(response.read().decode("utf-8", "replace"), self.facts)
        except (OSError, urllib.error.URLError, ValueError):
            with self._lock:
                self.errors += 1
            return
        with self._lock:
            self.readings.append(reading)


def poller_for(engine: str, *, port: int, opener: urllib.request.OpenerDirector,
               server_args: Mapping[str, Any]) -> MetricsPoller | None:
    """A poller for a configuration of `engine` whose server serves the page; else None."""
    facts = describe(engine).server_metrics
    return MetricsPoller(port, opener, facts) if is_served(facts, server_args) else None
