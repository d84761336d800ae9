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
from jobs.engines.local.child_args import PROG as PROG  # the names the engine and its types read
from jobs.engines.local.child_args import Count as Count
from jobs.engines.local.child_args import bench_refusal, parse_args
from jobs.engines.local.child_args import knob_actions as knob_actions
from jobs.engines.local.child_args import knob_flags as knob_flags
from jobs.engines.local.child_args import positive_int as positive_int
from jobs.engines.local.model import build_target, make_prompts
from jobs.engines.local.searching import levels_of
from jobs.engines.local.serving import Bench, Pass

EVENT_PREFIX = "SPECBENCH-EVENT "
# Attention writes this fraction of its random output: context perturbs the next-token choice
# without blurring it (at 0.3 the top-1 margin falls ~200x).
WARMUP_TOKENS = 16


class LosslessnessError(Exception):
    """Greedy output that differs from the baseline's, or between repetitions."""


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
