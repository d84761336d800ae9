"""A process's start without Python's cycle collector.

Importing what specbench needs allocates hundreds of thousands of objects and frees almost
none, so the collector's passes over them during the imports find nothing: with it paused,
`import torch, transformers.models.llama.modeling_llama` took 3.0 s of CPU instead of 3.7 s,
and the bot's and console's imports 0.41 s instead of 0.46 s. Each process's entry point
pauses it and resumes it once its imports are done, or after `RESUME_AFTER_S` where the
entry point cannot tell (the CLI imports each command's modules in the command itself): a long
command (a worker, a batch run in-process) then runs with the collector as usual.

What was allocated while it was paused is frozen when it resumes (`gc.freeze`): the collector
no longer walks it. Unfrozen, all of it sat in the youngest generation, and the first young
pass, the next middle one and the next full one each walked it again: 130,000 objects after the
CLI's imports (0.09 s of CPU a walk), 376,000 after torch's and transformers' (0.28 s), so a
`specbench` command spent 0.1-0.2 s and the fork server 0.25 s on passes that found nothing.
The price is the garbage of the paused span, never freed: 2,000 objects after the CLI's
imports, 11,000 after torch's and transformers', once per process.
"""

from __future__ import annotations

import gc
import threading

RESUME_AFTER_S = 2.0


def pause_collector(*, resume_after_s: float | None = RESUME_AFTER_S) -> None:
    """Pause the cycle collector; resume it after `resume_after_s` (None: `resume_collector`
    alone resumes it). For a process's entry point only: never from code that others import."""
    gc.disable()
    if resume_after_s is not None:
        timer = threading.Timer(resume_after_s, resume_collector)
        timer.daemon = True
        timer.start()


def resume_collector() -> None:
    """Freeze what was allocated while the cycle collector was paused, then resume it."""
    gc.freeze()
    gc.enable()
