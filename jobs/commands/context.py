"""What every command runs against: the store, a dispatcher when it needs one, and who asks."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from jobs import settings
from jobs.errors import UserError, did_you_mean

if TYPE_CHECKING:
    from jobs.batches.dispatch import Dispatcher
    from jobs.engines.base import Engine
    from jobs.store import BatchRow, Store


@dataclass(frozen=True)
class Caller:
    """Who typed the command, and where; `surface` is "slack", "console", "cli" or "beat"."""

    user: str
    channel: str | None = None
    surface: str = "slack"


OPEN_COMMANDS = ("help",)
"""What Slack answers anyone, anywhere, allow-lists or not."""

LAUNCH_COMMANDS = ("run", "retry", "probe", "bisect", "watch add", "watch pause", "watch resume",
                   "watch stop", "watch run", "watch ack", "watch dismiss")
"""What starts processes on a GPU host, or changes what will (a watch, its alerts): only users on
the user list (admins read and cancel)."""


@dataclass(frozen=True)
class Access:
    """docs/contracts.md's allow-lists; empty means everyone, every channel. They bind Slack alone.

    Set, they bind every command but `help` (README "Access"): a user off the user list (or, but
    for launching, off the admins) gets the same refusal for all of them, and no one is answered
    in a channel off the channel list, since reports and history name hosts, models and who ran
    what."""

    users: frozenset[str] = frozenset()
    channels: frozenset[str] = frozenset()
    admins: frozenset[str] = frozenset()

    @classmethod
    def from_env(cls) -> Access:
        return cls(
            users=settings.id_list("SPECBENCH_ALLOWED_USERS"),
            channels=settings.id_list("SPECBENCH_ALLOWED_CHANNELS"),
            admins=settings.id_list("SPECBENCH_ADMINS"),
        )

    def refusal(self, caller: Caller, command: str = "run") -> str | None:
        """Why this caller may not use `command` here, or None."""
        if caller.surface != "slack" or command in OPEN_COMMANDS:
            return None
        allowed = self.users if command in LAUNCH_COMMANDS else self.users | self.admins
        if self.users and caller.user not in allowed:
            return f"user {caller.user} is not on SPECBENCH_ALLOWED_USERS"
        if self.channels and caller.channel not in self.channels:
            return "specbench does not answer in this channel (SPECBENCH_ALLOWED_CHANNELS)"
        return None

    def may_cancel(self, caller: Caller, row: BatchRow) -> bool:
        return (caller.surface != "slack" or caller.user == row.requested_by
                or caller.user in self.admins)


@dataclass
class Context:
    """A command's world. The dispatcher is made on first use (status and show need none)."""

    store: Store
    caller: Caller
    access: Access = field(default_factory=Access)
    make_dispatcher: Callable[[], Dispatcher] | None = None
    engine_for: Callable[[str], Engine] | None = None

    @cached_property
    def dispatcher(self) -> Dispatcher:
        if self.make_dispatcher is not None:
            return self.make_dispatcher()
        from jobs.dispatchers import get_dispatcher

        return get_dispatcher(self.store)

    def engine(self, name: str) -> Engine:
        if self.engine_for is not None:
            return self.engine_for(name)
        from jobs.engines import get_engine

        return get_engine(name)

    def batch(self, batch_id: str) -> BatchRow:
        """The stored batch, or a UserError with the closest known ID."""
        row = self.store.get_batch(batch_id)
        if row is None:
            known = [r.id for r in self.store.list_batches()[-50:]]
            raise UserError(f"unknown batch {batch_id!r}{did_you_mean(batch_id, known)}")
        return row

    def close(self) -> None:
        if "dispatcher" in self.__dict__:
            self.dispatcher.close()
