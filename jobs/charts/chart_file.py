"""One chart beside a batch's summary chart: its file suffix, its PNG and its title
(`jobs.charts.files` gathers them; each chart module makes its own)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ChartFile:
    suffix: str  # the file's: "{batch}-{suffix}.png"
    png: bytes
    title: str
