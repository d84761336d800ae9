"""`specbench console`: the Slack experience in a terminal (Hubot's shell adapter).

The same router, templates and thread as the Slack bot; the thread is drawn indented under its
parent. On a terminal the progress message is redrawn in place; otherwise every update is
printed as plain lines. With `-c LINE` one line runs, and the console waits for any batch it
started to end: for its thread, or, should the end event never come (Redis away), for the store
to say so. SIGINT (Ctrl-C), SIGTERM and SIGHUP end the console and the batches it runs,
`cancelled`, their servers stopped (`bot.interrupts`), not only the display. Error replies
go to stderr. On a terminal readline edits the line (history, arrows), and a message drawn while
a line is being typed goes above it, the prompt and the typed text drawn again below.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import threading
from collections.abc import Callable
from typing import Any, TextIO

from bot.chat.router import Caller, Reply, Router
from bot.line_reader import PROMPT, LineReader, terminal_kept
from bot.thread.end_watch import EndWatch, stored_row
from bot.thread.messages import Message, Upload
from bot.thread.thread_hub import ThreadHub
from jobs import __version__, redaction, settings
from jobs.batches.dispatch import Dispatcher
from jobs.errors import InfraError
from jobs.store import BatchRow

INDENT = "  │ "
STORE_POLL_S = 3.0  # how often a wait asks the store whether its batch has ended
END_GRACE_S = 12.0  # a thread sees the end itself within its own store poll (5 s); then we do


class ConsolePoster:
    """bot.thread.messages' Poster on a text stream; uploads are saved under the data dir.

    Writes hold a lock: the loop's messages and the reading thread's prompt state change apart."""

    def __init__(self, out: TextIO, err: TextIO | None = None) -> None:
        self.out = out
        self.err = err or out
        self.tty = bool(getattr(out, "isatty", lambda: False)())
        self._count = 0
        self._texts: dict[str, tuple[str | None, str]] = {}  # ts -> (thread_ts, text)
        self._last: tuple[str, int] | None = None  # the last message drawn and its line count
        self._prompting = False  # the prompt is on screen, waiting for a line
        self._typed: Callable[[], str] = lambda: ""  # the line typed so far (readline's)
        self._lock = threading.RLock()

    def show_prompt(self) -> None:
        """Write the prompt (on a terminal); messages posted while it waits redraw it below
        them instead of writing into the line being typed."""
        if self.tty:
            with self._lock:
                self.out.write(PROMPT)
                self.out.flush()
                self._prompting = True

    def follow(self, typed: Callable[[], str]) -> None:
        """readline draws the prompt (`prompt_drawn` says when) and `typed` gives its line."""
        self._typed = typed

    def prompt_drawn(self) -> None:
        with self._lock:
            self._prompting = self.tty

    def prompt_answered(self) -> None:
        """The line was entered: the cursor is on a fresh line, no prompt to move."""
        with self._lock:
            self._prompting = False

    async def post(self, *, channel: str, thread_ts: str | None, message: Message) -> str:
        self._count += 1
        ts = f"{self._count}"
        self._texts[ts] = (thread_ts, message.text)
        self._draw(ts, message.text, thread=thread_ts is not None)
        return ts

    async def update(self, *, channel: str, ts: str, message: Message) -> None:
        thread_ts, old = self._texts.get(ts, (None, ""))
        if message.text == old:
            return
        self._texts[ts] = (thread_ts, message.text)
        with self._lock:
            if self.tty and self._last is not None and self._last[0] == ts:
                up = self._last[1] + (self._prompt_rows() if self._prompting else 0)
                self.out.write(f"\x1b[{up}F\x1b[J")  # up to the message, clear below
                self._draw(ts, message.text, thread=thread_ts is not None, cleared=True)
                return
        if thread_ts is None:
            message = Message(text="(edited) " + message.text)
        self._draw(ts, message.text, thread=thread_ts is not None)

    async def upload(self, *, channel: str, thread_ts: str, files: list[Upload]) -> None:
        folder = (settings.data_dir() / "console").resolve()
        folder.mkdir(parents=True, exist_ok=True)
        for f in files:
            path = folder / f.filename
            path.write_bytes(f.content)
            self._draw(None, f"[file] {f.title}: {path} ({len(f.content)} bytes)", thread=True)

    async def ephemeral(
        self, *, channel: str, user: str, message: Message, thread_ts: str | None = None
    ) -> None:
        self._draw(None, message.text, thread=thread_ts is not None)

    async def find_reply(
        self, *, channel: str, thread_ts: str, metadata: dict[str, Any] | None = None,
        filename: str | None = None,
    ) -> str | None:
        return None  # the console keeps no posting state: nothing to find again

    def say(self, text: str, *, error: bool = False) -> None:
        self._draw(None, text, thread=False, stream=self.err if error else self.out)

    def _draw(self, ts: str | None, text: str, *, thread: bool, cleared: bool = False,
              stream: TextIO | None = None) -> None:
        """`text`'s lines (indented in a thread); a prompt on screen is cleared first and
        drawn again below them, with the line typed so far."""
        lines = text.rstrip("\n").splitlines() or [""]
        prefix = INDENT if thread else ""
        stream = stream or self.out
        with self._lock:
            prompting = self._prompting and self.tty
            if prompting:
                rows = 0 if cleared else self._prompt_rows()
                # The prompt's rows cleared (the cursor sits on its last); it comes back below.
                self.out.write(f"\r\x1b[{rows}A\x1b[J" if rows else "\r\x1b[K")
                self.out.flush()
            stream.write("".join(f"{prefix}{line}\n" for line in lines))
            stream.flush()
            if prompting:
                self.out.write(PROMPT + self._typed())
                self.out.flush()
            self._last = None if ts is None or stream is not self.out else (ts, len(lines))

    def _prompt_rows(self) -> int:
        """How many rows above the cursor the prompt and the typed line begin (it wraps)."""
        width = shutil.get_terminal_size().columns or 80
        return (len(PROMPT) + len(self._typed())) // width


class Console:
    def __init__(self, dispatcher: Dispatcher, out: TextIO, *, err: TextIO | None = None,
                 interval: float = 1.0) -> None:
        self.dispatcher = dispatcher
        self.poster = ConsolePoster(out, err)
        self.router = Router(dispatcher)
        self.hub = ThreadHub(dispatcher, self.poster, interval=interval, durable=False)
        self.caller = Caller(user=os.environ.get("USER") or "local", channel=None,
                             surface="console")

    async def say(self, line: str) -> Reply:
        """Route one line; a started batch opens its thread."""
        reply = await asyncio.to_thread(self.router.handle, line, caller=self.caller)
        if reply.started is not None:
            self.hub.open(reply.started, channel="console")
        else:
            self.poster.say(reply.text, error=reply.exit_code != 0)
        return reply

    def banner(self) -> str:
        """What the console says first: who it is, where it keeps its data, how batches run."""
        if self.dispatcher.mode == "embedded":
            mode = "embedded (batches run in this process)"
        else:
            url = redaction.redact_urls(settings.broker_url() or "")
            mode = f"{self.dispatcher.mode} (broker {url}, queue {settings.default_queue()})"
        return (f"specbench console {__version__}\n"
                f"data dir: {settings.data_dir().resolve()}\n"
                f"mode: {mode}\n"
                "type `help` for commands, Ctrl-D to quit\n")

    async def wait(self, batch_id: str, *, timeout: float) -> None:
        """Until the batch's thread has ended. The store is the truth: polled every
        STORE_POLL_S, a batch it says ended gets END_GRACE_S for its thread to see it (the
        thread polls the store too), after which its end is posted from the stored row."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        watch = EndWatch(poll_s=STORE_POLL_S, grace_s=END_GRACE_S, polled_at=loop.time())
        store = self.dispatcher.store
        while (task := self.hub.tasks.get(batch_id)) is not None:
            left = deadline - loop.time()
            if left <= 0:
                self.dispatcher.cancel(batch_id)
                raise InfraError(f"batch {batch_id} did not finish within {timeout:g} s")
            done, _ = await asyncio.wait({task}, timeout=min(STORE_POLL_S, left))
            if done:
                return
            row = watch.saw(await asyncio.to_thread(stored_row, store, batch_id), loop.time())
            if row is not None and watch.store_says_ended(loop.time()):
                await self._end_from_store(batch_id, row)
                return

    async def _end_from_store(self, batch_id: str, row: BatchRow) -> None:
        """The thread missed the end: stop it and post its end from the store."""
        thread = self.hub.threads.get(batch_id)
        task = self.hub.tasks.get(batch_id)
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        if thread is not None:
            thread.row = row
            await thread.finish()

    async def run_line(self, line: str, *, timeout: float) -> int:
        self.hub.start()
        try:
            reply = await self.say(line)
            if reply.started is not None:
                await self.wait(reply.started.batch.id, timeout=timeout)
                row = self.dispatcher.store.get_batch(reply.started.batch.id)
                if row is not None and row.state == "failed":
                    return 1  # the infrastructure failed (SPEC's exit codes)
                if row is not None and row.state == "refused":
                    return 2  # the worker's preflight refused it: bad input
            return reply.exit_code
        finally:
            await self.hub.close()

    async def repl(self, stdin: TextIO, *, timeout: float) -> int:
        self.hub.start()
        reader = LineReader(stdin, self.poster)
        started: list[str] = []
        try:
            self.poster.say(self.banner())
            while True:
                line = await reader.next_line()
                if not line:
                    break
                if line.strip() in ("exit", "quit"):
                    break
                if line.strip():
                    reply = await self.say(line)
                    if reply.started is not None:
                        started.append(reply.started.batch.id)
            for batch_id in started:
                await self.wait(batch_id, timeout=timeout)
            return 0
        finally:
            await self.hub.close()


def run_console(*, line: str | None, timeout: float) -> int:
    """`specbench console [-c LINE] [--timeout S]`."""
    from bot import interrupts
    from jobs.dispatchers import get_dispatcher

    dispatcher = get_dispatcher()
    with interrupts.Trap() as trap:  # Ctrl-C stops the batches, not only the display
        try:
            console = Console(dispatcher, sys.stdout, err=sys.stderr)
            if line is not None:
                return asyncio.run(console.run_line(line, timeout=timeout))
            with terminal_kept(sys.stdin):
                return asyncio.run(console.repl(sys.stdin, timeout=timeout))
        finally:
            interrupts.close_dispatcher(dispatcher, trap=trap, command="console")
