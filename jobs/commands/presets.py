"""`presets`: the presets in the config dir, with their approaches."""

from __future__ import annotations

from jobs.commands.context import Context
from jobs.core.plans import Preset, load_all


def presets(ctx: Context) -> list[Preset]:
    return load_all()
