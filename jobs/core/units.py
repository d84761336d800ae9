"""Units of the metrics: bench_serving's key names say what they measure; every message, chart
and digest shows a value with its unit from here (`unit_of`, `with_unit`), and a count with its
noun (`plural`)."""

from __future__ import annotations

# Exact names first, then suffixes (bench_serving: median_ttft_ms, p99_itl_ms, ...).
UNITS = {
    "output_throughput": "tok/s",
    "total_throughput": "tok/s",
    "input_throughput": "tok/s",
    "total_token_throughput": "tok/s",
    "request_throughput": "req/s",
    "accept_length": "tokens",
    "completed": "requests",
    "duration": "s",
}
SUFFIXES = (("_ms", "ms"), ("_s", "s"), ("_throughput", "tok/s"), ("_tokens", "tokens"),
            ("_gbps", "GB/s"))


def plural(count: int, word: str, many: str | None = None) -> str:
    """`count` with its noun: "1 rep", "3 reps" (`many` for an irregular plural)."""
    return f"{count} {word if count == 1 else (many or word + 's')}"


def unit_of(metric: str) -> str:
    """The unit of a metric by its name; '' when the name does not say."""
    if metric in UNITS:
        return UNITS[metric]
    for suffix, unit in SUFFIXES:
        if metric.endswith(suffix):
            return unit
    return ""


def with_unit(text: str, metric: str) -> str:
    """`text` followed by the metric's unit, when it has one: '879 tok/s', '12.5 ms'."""
    unit = unit_of(metric)
    return f"{text} {unit}" if unit else text


def human_size(size: int) -> str:
    """`4 KiB`, `56 KiB`, `1.5 MiB`, `300 B`."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            value = size / scale
            return f"{value:.0f} {unit}" if size % scale == 0 else f"{value:.1f} {unit}"
    return f"{size} B"
