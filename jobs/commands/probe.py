"""`probe [--world N] [--backend nccl|gloo] [--sizes BYTES,...] [--iters N] [--env K=V]...`
from chat: the collectives probe queued on the GPU host like a batch (`jobs.batches.probing`).

What can be checked where it is typed is checked here (exit 2, nothing stored): the ranks, the
backend's name, the sizes, the iterations, the environment. What the host has (its GPUs for
nccl, a CPU per gloo rank) is checked here too in embedded mode, where this process is the
worker; in distributed mode the worker that takes the probe checks it and refuses it there.
The CLI's `specbench probe` measures at once, on the host it runs on (`bot.cli.probe_cmd`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from jobs import settings
from jobs.batches.probing import probe_plan
from jobs.commands.context import Context
from jobs.commands.run import Started, submit
from jobs.errors import UserError
from jobs.evidence.probe_input import (
    DEFAULT_ITERS,
    DEFAULT_SIZES,
    DEFAULT_TIMEOUT_S,
    DEFAULT_WORLD,
    asked,
    for_this_host,
    parse_env,
)


@dataclass(frozen=True)
class ProbeArgs:
    world: int = DEFAULT_WORLD
    backend: str | None = None
    sizes: Sequence[int] = DEFAULT_SIZES
    iters: int = DEFAULT_ITERS
    env: Sequence[str] = ()  # KEY=VALUE items
    timeout_s: float = DEFAULT_TIMEOUT_S


MAX_TIMEOUT_S = 600.0
"""The longest a probe from chat may hold its GPU host: the probe's own timeout stops it there
(1 GiB x 10,000 iterations over PCIe would take hours). The CLI's probe, run by the host's
operator, has no such limit."""


def probe(ctx: Context, args: ProbeArgs, *, idempotency_key: str | None = None) -> Started:
    """The probe checked and queued; raises UserError (exit 2) for bad input."""
    if args.timeout_s > MAX_TIMEOUT_S:
        raise UserError(f"--timeout must be at most {MAX_TIMEOUT_S:g} seconds from chat, "
                        f"got {args.timeout_s:g}")
    request = asked(world=args.world, backend=args.backend, sizes=args.sizes, iters=args.iters,
                    env=parse_env(args.env), timeout_s=args.timeout_s)
    dispatcher = ctx.dispatcher
    if dispatcher.mode == "embedded":
        for_this_host(request)  # this process is the worker: refused now, not once queued
    planned = probe_plan(request, queue=settings.default_queue())  # the GPU host's
    return submit(ctx, planned, idempotency_key=idempotency_key)
