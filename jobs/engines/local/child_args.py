"""The local engine's child's command line (`jobs.engines.local.child`): the one declaration of
its knobs, their types and bounds, that the child parses and the engine checks a preset against
before anything runs (server knobs a preset's server_args, bench knobs its bench, and the
engine's own flags). An unknown or bad knob fails exactly like a real server's command line."""

from __future__ import annotations

import argparse
import difflib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from jobs.core.limits import MAX_CONCURRENCY, MAX_PROMPTS, MAX_THREADS, MAX_TOKENS
from jobs.engines.flags import to_flag
from jobs.engines.local.searching import add_flags

PROG = "local_child"
DESCRIPTION = ("The local engine's child process: a tiny seeded Llama on the CPU, benchmarked "
               "with generate().")
BENCH_COUNTS = ("num_prompts", "input_len", "output_len")  # bench knobs that must be 1 or more


def positive_int(text: str) -> int:
    """argparse type of a count that must be 1 or more (torch.set_num_threads(0) raises)."""
    value = int(text)
    if value < 1:
        raise ValueError(f"expected a positive value, got {value}")
    return value


class Count:
    """argparse type of a whole number within bounds (`low` None: no lower one), so that a
    typo (`threads=100000`) is refused by the child's own declaration, naming the bound, and
    the engine's type table (jobs.engines.local.types) refuses it before anything runs."""

    __name__ = "int"  # argparse's "invalid int value: 'abc'", as for int

    def __init__(self, *, low: int | None = None, high: int) -> None:
        self.low, self.high = low, high

    def __call__(self, text: str) -> int:
        value = int(text)
        if (self.low is not None and value < self.low) or value > self.high:
            span = f"of at most {self.high}" if self.low is None else \
                f"from {self.low} to {self.high}"
            raise argparse.ArgumentTypeError(f"expected an integer {span}, got {value}")
        return value


def concurrency_levels(text: str) -> list[int]:
    """argparse type of `--loads`: the plan's levels as the engine passes them, data (a JSON
    list of whole numbers of 1 or more, rising: [1, 4]), not words to split."""
    levels = json.loads(text)
    if not isinstance(levels, list) or not all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in levels):
        raise ValueError(f"expected a JSON list of positive levels, got {text}")
    if levels != sorted(set(levels)):
        raise ValueError(f"expected rising levels, got {text}")
    return levels


def build_parser() -> argparse.ArgumentParser:
    """Server knobs (a preset's server_args), bench knobs (its bench) and the engine's own."""
    parser = argparse.ArgumentParser(prog=PROG, description=DESCRIPTION, allow_abbrev=False)
    server = parser.add_argument_group("server")
    server.add_argument("--hidden-size", type=Count(high=65_536), default=64)
    server.add_argument("--intermediate-size", type=Count(high=262_144), default=None)
    server.add_argument("--num-layers", type=Count(high=1024), default=4)
    server.add_argument("--num-heads", type=Count(high=1024), default=4)
    server.add_argument("--vocab-size", type=Count(high=1 << 20), default=1024)
    server.add_argument("--seed", type=Count(low=-(1 << 62), high=1 << 62), default=0)
    server.add_argument("--threads", type=Count(low=1, high=MAX_THREADS), default=None)
    server.add_argument("--num-assistant-tokens", type=Count(high=1024), default=4)
    server.add_argument("--draft-vocab-size", type=Count(high=1 << 20), default=None)
    server.add_argument("--max-matching-ngram-size", type=Count(high=1024), default=2)
    spec = server.add_mutually_exclusive_group()
    spec.add_argument("--draft-layers", type=Count(high=1024), default=None)
    spec.add_argument("--prompt-lookup-num-tokens", type=Count(high=1024), default=None)
    bench = parser.add_argument_group("bench")
    bench.add_argument("--num-prompts", type=Count(high=MAX_PROMPTS), default=4)
    bench.add_argument("--input-len", type=Count(high=MAX_TOKENS), default=128)
    bench.add_argument("--output-len", type=Count(high=MAX_TOKENS), default=128)
    bench.add_argument("--max-concurrency", type=Count(low=1, high=MAX_CONCURRENCY), default=1,
                       help="requests served at once: plain decoding batches them, assisted "
                       "and prompt-lookup decoding serve them one after another")
    own = parser.add_argument_group("engine")
    own.add_argument("--reps", type=int, default=1)
    own.add_argument("--warmup", action="store_true", help="one pass before the repetitions, "
                     "reported as the warm-up, never a sample")
    own.add_argument("--loads", type=concurrency_levels, default=None,
                     help="max-concurrency levels, lowest first ([1, 4]): every level in this "
                     "process, each with its warm-up and repetitions")
    add_flags(own)  # the capacity search's (jobs.engines.local.searching)
    own.add_argument("--baseline-digest", default=None)
    own.add_argument("--baseline-prompt-digests", default=None)
    return parser


def knob_actions(group: str) -> list[argparse.Action]:
    """The argparse actions of one argument group ("server" or "bench"): the one declaration
    of the knobs, their types and choices, that the child parses and the engine checks."""
    parser = build_parser()
    for found in parser._action_groups:  # argparse keeps groups private; no public accessor
        if found.title == group:
            return list(found._group_actions)
    return []


def knob_flags(group: str) -> list[str]:
    """The long flags of one argument group ("server" or "bench")."""
    return [s for a in knob_actions(group) for s in a.option_strings]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.capacity is not None and (args.loads is not None or not args.slo):
        parser.error("argument --capacity: needs --slo, and cannot be used with --loads")
    if not 1 <= (args.draft_layers or 1) < args.num_layers:
        parser.error(
            f"argument --draft-layers: expected a value from 1 to {args.num_layers - 1}, "
            f"got {args.draft_layers}"
        )
    for name in ("reps", "num_assistant_tokens"):
        if getattr(args, name) < 1:
            parser.error(_not_positive(name, getattr(args, name)))
    if args.draft_vocab_size is not None and args.draft_layers is None:
        args.draft_layers = 1
    return args


def bench_refusal(args: argparse.Namespace) -> str | None:
    """The bench's own check of its settings, made once the model serves (as a benchmark client
    starts against a server that is up): a refusal is the benchmark's failure, not the
    server's (docs/contracts.md "Memory across batches")."""
    for name in BENCH_COUNTS:
        if getattr(args, name) < 1:
            return _not_positive(name, getattr(args, name))
    return None


def _not_positive(name: str, value: int) -> str:
    return f"argument --{name.replace('_', '-')}: expected a positive value, got {value}"


def to_argv(knobs: Mapping[str, Any]) -> list[str]:
    """Knobs as flags: `true` is a bare flag, `false`/`null` leaves the flag out."""
    argv: list[str] = []
    for key, value in knobs.items():
        if value is None or value is False:
            continue
        argv.append(to_flag(key))
        if value is not True:
            argv.append(str(value))
    return argv


def unknown_knobs_reason(knobs: Mapping[str, Any], known: list[str]) -> str | None:
    """Argparse's rejection of the knobs `local_child` does not know, with a did-you-mean."""
    unknown = [to_flag(k) for k in knobs if to_flag(k) not in known]
    if not unknown:
        return None
    reason = f"{PROG}: error: unrecognized arguments: {' '.join(unknown)}"
    hints = [
        f"{close[0]}" if len(unknown) == 1 else f"{close[0]} for {flag}"
        for flag in unknown
        if (close := difflib.get_close_matches(flag, known, n=1, cutoff=0.6))
    ]
    return reason + (f" (did you mean {', '.join(hints)}?)" if hints else "")
