"""`help`: the commands chat understands (the template lists their usage)."""

from __future__ import annotations

from jobs.commands import CHAT_COMMANDS
from jobs.commands.context import Context


def help_(ctx: Context | None = None) -> tuple[str, ...]:
    return CHAT_COMMANDS
