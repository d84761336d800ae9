"""The command layer: one module per command, each a function from typed arguments and a
`Context` to data, never text. The CLI (`bot.cli`), the console and Slack (`bot.chat.router`)
only parse their input, call a command here and render its data with the same templates.

    run      a preset planned, checked and submitted          -> Started
    retry    approaches of a stored batch, with its baseline  -> Started
    status   running and queued batches per queue             -> Status
    show     a stored batch's report (and records)            -> Shown
    cancel   a queued or running batch                        -> Cancelled
    digest   the status digest over stored batches            -> Digest
    presets  the presets and their approaches                 -> list[Preset]
    history  the last batches                                 -> list of summary lines
    compare  two stored batches side by side                  -> comparison dict
    probe    a collectives probe queued on the GPU host           -> Started
    bisect   the first stack where a change appears (a watch's too) -> Started
    watch    regression watches: add, list, show, pause, resume, stop -> WatchRow, WatchShown
             (`watch_run`: run one now -> Started, ack or dismiss a change -> Acked, the
             scheduler's tick -> TickAction list)
    help     the chat commands                                -> tuple of names
    analyze  run records re-analysed (the CLI's)              -> report dict
"""

CHAT_COMMANDS = (
    "run", "status", "cancel", "retry", "show", "presets", "history", "digest", "compare",
    "probe", "bisect", "watch", "help",
)
