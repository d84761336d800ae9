"""The local engine's child process: a tiny seeded Llama on the CPU, benchmarked with generate().

`python -m jobs.engines.local.child --KNOB VALUE ...` builds the model (no download, no
tokenizer: token ids in, token ids out), warms up (with `--warmup`, one untimed-as-sample pass
over every prompt: the first pass runs cold), times greedy generation of every prompt once
per repetition and prints `SPECBENCH-EVENT {json}` lines that the engine reads. Knobs are
argparse flags, so an unknown or bad one fails exactly like a real server's command line.

The model (`jobs.engines.local.model`) makes every greedy choice sharp, so a greedy output
that differs between approaches means a real bug, not a tie broken differently.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Sequence
from typing import Any

from jobs.core.capacity import MAX_LEVELS, measured
from jobs.core.limits import MAX_CONCURRENCY, MAX_PROMPTS, MAX_THREADS, MAX_TOKENS
from jobs.engines.local.model import build_target, make_prompts
from jobs.engines.local.searching import add_flags, levels_of
from jobs.engines.local.serving import Bench, Pass

PROG = "local_child"
EVENT_PREFIX = "SPECBENCH-EVENT "
# Attention writes this fraction of its random output: context perturbs the next-token choice
# without blurring it (at 0.3 the top-1 margin falls ~200x).
WARMUP_TOKENS = 16
BENCH_COUNTS = ("num_prompts", "input_len", "output_len")  # bench knobs that must be 1 or more


class LosslessnessError(Exception):
    """Greedy output that differs from the baseline's, or between repetitions."""


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
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__, allow_abbrev=False)
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


def emit(event: str, **details: Any) -> None:
    print(EVENT_PREFIX + json.dumps({"event": event, **details}), flush=True)


def digest(tokens: Sequence[Sequence[int]]) -> str:
    """sha256 of greedy output token ids (prompt by prompt)."""
    return hashlib.sha256(json.dumps([list(t) for t in tokens]).encode()).hexdigest()


def prompt_digests(outputs: Sequence[Sequence[int]]) -> list[str]:
    return [digest([o])[:12] for o in outputs]


def check_lossless(outputs: list[list[int]], args: argparse.Namespace) -> None:
    """Raise LosslessnessError when the output is not the baseline's."""
    if args.baseline_digest is None or digest(outputs) == args.baseline_digest:
        return
    theirs = (args.baseline_prompt_digests or "").split(",")
    ours = prompt_digests(outputs)
    for index, (mine, base) in enumerate(zip(ours, theirs, strict=False)):
        if mine != base:
            raise LosslessnessError(
                f"greedy output differs from the baseline's at prompt {index} "
                f"(of {len(ours)}): digest {mine} vs {base}"
            )
    raise LosslessnessError("greedy output differs from the baseline's (digest)")


def pass_event(served: Pass, prompts: list[list[int]], **details: Any) -> None:
    """A bench pass's figures: throughputs, latencies and the size of each generate() call."""
    tokens = served.tokens
    emit("result", **details, tokens=tokens, seconds=served.seconds, completed=len(prompts),
         output_throughput=tokens / served.seconds,
         total_throughput=(tokens + sum(map(len, prompts))) / served.seconds,
         **served.latencies(), batch_sizes=served.batch_sizes, forwards=served.forwards)


def run_level(
    bench: Bench, prompts: list[list[int]], concurrency: int, *,
    tag: dict[str, Any], first: list[list[int]] | None,
    figures: dict[str, list[float]] | None = None,
) -> tuple[list[list[int]], float | None]:
    """The warm-up (with `--warmup`) and the repetitions at one concurrency; every pass's output
    must equal `first` (the first pass of the run). Returns the first output and the level's
    accept length, and keeps each repetition's latencies in `figures`; raises LosslessnessError
    at the first pass that differs."""
    args = bench.args
    at = f" at max-concurrency {concurrency}" if tag else ""
    passes = [(0, "the warm-up")] if args.warmup else []
    passes += [(rep, f"rep {rep}") for rep in range(1, args.reps + 1)]
    tokens = forwards = 0
    for rep, name in passes:
        if rep == 0:
            emit("warmup", of=args.reps, **tag)
        else:
            emit("repetition", rep=rep, of=args.reps, **tag)
        served = bench.serve(prompts, concurrency)
        rate = served.tokens / served.seconds
        if rep == 0:
            print(f"{PROG}: warm-up{at}: {served.tokens} tokens in {served.seconds:.3f} s = "
                  f"{rate:.1f} tok/s (not a sample)", flush=True)
            pass_event(served, prompts, rep=0, warmup=True, **tag)
        else:
            tokens += served.tokens
            forwards += served.forwards
            print(f"{PROG}: rep {rep}/{args.reps}{at}: {served.tokens} tokens in "
                  f"{served.seconds:.3f} s = {rate:.1f} tok/s, {served.forwards} target forward "
                  f"passes, {len(served.batch_sizes)} generate() calls", flush=True)
            pass_event(served, prompts, rep=rep, **tag)
            for key, value in served.latencies().items():
                (figures if figures is not None else {}).setdefault(key, []).append(value)
        if first is not None and served.outputs != first:
            raise LosslessnessError(f"greedy output of {name}{at} differs from the run's first "
                                    "pass")
        first = first or served.outputs
    assert first is not None
    return first, (tokens / forwards if bench.speculates and forwards else None)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    import torch
    import transformers

    transformers.logging.set_verbosity_error()  # type: ignore[no-untyped-call]
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    print(
        f"{PROG}: building a {args.num_layers}-layer Llama (hidden {args.hidden_size}, vocab "
        f"{args.vocab_size}, seed {args.seed}); torch {torch.__version__}, transformers "
        f"{transformers.__version__}, {torch.get_num_threads()} threads", flush=True,
    )
    target = build_target(args)
    refused = bench_refusal(args)
    prompts = make_prompts(args, target) if refused is None else []
    bench = Bench(args, target)
    try:  # the first request warms the model up; without the bench's prompts, a few tokens
        bench.generate(prompts[0] if prompts else [t % args.vocab_size for t in range(1, 9)],
                       max_new=WARMUP_TOKENS)
    except ValueError as exc:
        if args.draft_vocab_size in (None, args.vocab_size):
            raise
        raise ValueError(
            f"--draft-vocab-size {args.draft_vocab_size} and --vocab-size {args.vocab_size} "
            "cannot be used together: assisted decoding needs a draft that shares the target's "
            f"vocabulary (transformers: {str(exc).splitlines()[0]})"
        ) from exc
    emit("ready")
    if refused is not None:
        emit("bench_refused", reason=refused)
        print(f"{PROG}: error: {refused}", file=sys.stderr, flush=True)
        return 2
    first: list[list[int]] | None = None
    accepts: list[float | None] = []
    try:
        for index, concurrency, searching in levels_of(args):
            tag = {"load": {"max-concurrency": concurrency}} if args.loads or searching else {}
            if tag:
                emit("level", **tag, level=index, levels=MAX_LEVELS if searching else
                     len(args.loads), **({"search": "capacity"} if searching else {}))
            figures: dict[str, list[float]] = {}
            first, accept = run_level(bench, prompts, concurrency, tag=tag, first=first,
                                      figures=figures)
            accepts.append(accept)
            if searching:
                args.capacity_done = [*(args.capacity_done or []),
                                      measured(concurrency, figures, args.slo)]
            emit("level_done", accept_length=accept, **tag)
        if first is None:  # every level was measured before a restart: nothing left to run
            emit("done", accept_length=None, accept_lengths=[])
            return 0
        emit("done", output_digest=digest(first), prompt_digests=prompt_digests(first),
             accept_length=accepts[0], accept_lengths=accepts)
        check_lossless(first, args)
    except LosslessnessError as exc:
        emit("lossy", reason=str(exc))
        print(f"LosslessnessError: {exc}", flush=True)
        return 1
    print(f"{PROG}: done; output digest {digest(first)[:16]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
