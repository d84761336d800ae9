"""The console's input: lines read off the event loop, with readline's editing on a terminal,
and the terminal's settings kept across a console stopped mid-line (bot.console uses it)."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any, Protocol, TextIO

PROMPT = "specbench> "


class PromptPoster(Protocol):
    """What the reader asks of the console's poster (bot.console.ConsolePoster): where the
    prompt goes and when it is on screen. A protocol here, so the reader needs no console."""

    out: TextIO
    tty: bool

    def show_prompt(self) -> None: ...

    def prompt_drawn(self) -> None: ...

    def prompt_answered(self) -> None: ...

    def follow(self, typed: Callable[[], str]) -> None: ...


class LineReader:
    """The console's lines, each read on a daemon thread: a console stopped while it waits for
    a line must not wait for that thread (asyncio joins its own executor's threads).

    On a terminal (stdin and stdout both) readline, when there is one, draws the prompt and
    edits the line, and the poster asks it for the line typed so far; elsewhere lines are read
    plainly, and the prompt is written only where the output is a terminal."""

    def __init__(self, stdin: TextIO, poster: PromptPoster) -> None:
        self.stdin = stdin
        self.poster = poster
        self.readline = _readline(stdin, poster)

    async def next_line(self) -> str:
        """The next line with its newline; "" at the end of the input (Ctrl-D)."""
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[str] = loop.create_future()

        def give(text: str) -> None:
            if not answer.done():
                answer.set_result(text)

        def read() -> None:
            text = self._read()
            self.poster.prompt_answered()
            if not text and self.poster.tty:
                self.poster.out.write("\n")  # Ctrl-D leaves the cursor after the prompt
                self.poster.out.flush()
            try:
                loop.call_soon_threadsafe(give, text)
            except RuntimeError:
                pass  # the loop has closed: no one waits for this line any more

        if self.readline is None:
            self.poster.show_prompt()
        threading.Thread(target=read, name="console-stdin", daemon=True).start()
        return await answer

    def _read(self) -> str:
        if self.readline is None:
            return self.stdin.readline()
        try:
            return input(PROMPT) + "\n"  # readline's, through sys.stdin and sys.stdout
        except EOFError:
            return ""


def _readline(stdin: TextIO, poster: PromptPoster) -> Any:
    """The readline module, set up for `poster`, when `input()` would use it (the real stdin
    and stdout, both terminals); else None."""
    if not (stdin is sys.stdin and poster.out is sys.stdout and poster.tty
            and stdin.isatty()):
        return None
    try:
        import readline
    except ImportError:
        return None
    # No bracketed paste: a console stopped mid-line would leave the terminal in that mode.
    readline.parse_and_bind("set enable-bracketed-paste off")
    readline.set_pre_input_hook(poster.prompt_drawn)  # called once the prompt is on screen
    poster.follow(readline.get_line_buffer)
    return readline


@contextlib.contextmanager
def terminal_kept(stdin: TextIO) -> Iterator[None]:
    """The terminal's settings as they were on entry, again on exit: a console stopped while
    readline reads a line (echo off, one key at a time) must not leave the terminal so."""
    try:
        import termios
    except ImportError:  # not POSIX: no terminal settings to keep
        yield
        return
    try:
        saved = termios.tcgetattr(stdin.fileno())
    except (OSError, ValueError, termios.error):  # a pipe, a file: nothing to keep
        yield
        return
    try:
        yield
    finally:
        with contextlib.suppress(OSError, termios.error):
            termios.tcsetattr(stdin.fileno(), termios.TCSADRAIN, saved)
