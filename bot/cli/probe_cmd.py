"""`specbench probe`: the collectives probe (jobs.evidence) from the command line: all_reduce
timed across N local ranks, printed as a table or as docs/contracts.md's probe JSON."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any


def add_parser(commands: Any, *, seconds: Callable[[str], float], contract: str) -> None:
    """Register `probe` on the command line's subparsers (imports nothing heavy)."""
    probe = commands.add_parser(
        "probe", help="time all_reduce across local ranks",
        description="Time torch.distributed all_reduce across N local ranks (NCCL over this "
                    "host's GPUs, gloo over CPU processes) with the given environment: per "
                    "size the median latency, algbw and busbw (the nccl-tests convention).",
        epilog=f"Sizes are bytes: 4096, or 4K/4KiB, 1M/1MiB, 1G/1GiB (powers of 1024). "
               f"See {contract}, \"Evidence for the why\".")
    probe.add_argument("--world", type=int, default=2, metavar="N",
                       help="ranks, at least 2 (default: 2)")
    probe.add_argument("--backend", choices=("nccl", "gloo"),
                       help="nccl or gloo (default: nccl when this host has N GPUs, else gloo)")
    probe.add_argument("--sizes", metavar="BYTES,...",
                       help="message sizes, more than 0 and at most 1G "
                            "(default: 4K,16K,64K,256K,1M,4M)")
    probe.add_argument("--iters", type=int, default=20, metavar="N",
                       help="timed iterations per size after 5 warm-up ones (default: 20)")
    probe.add_argument("--env", dest="env", action="append", default=[], metavar="KEY=VALUE",
                       help="an environment variable for every rank, e.g. NCCL_ALGO=Ring "
                            "(repeatable)")
    probe.add_argument("--format", choices=("text", "json"), default="text",
                       help="text (default) or json")
    probe.add_argument("--timeout", type=seconds, default=120.0, metavar="S",
                       help="stop every rank and fail after S seconds (default: 120)")


def cmd_probe(args: argparse.Namespace) -> int:
    from jobs.core.probe_text import render
    from jobs.evidence.collectives import run_probe
    from jobs.evidence.probe_input import DEFAULT_SIZES, parse_env, parse_sizes, to_request

    request = to_request(
        world=args.world, backend=args.backend,
        sizes=DEFAULT_SIZES if args.sizes is None else parse_sizes(args.sizes),
        iters=args.iters, env=parse_env(args.env), timeout_s=args.timeout)
    sys.stdout.write(render(run_probe(request), args.format))
    return 0
