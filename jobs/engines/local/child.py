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
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from jobs.engines.local.model import build_draft, build_target, make_prompts

if TYPE_CHECKING:
    from transformers import LlamaForCausalLM

PROG = "local_child"
EVENT_PREFIX = "SPECBENCH-EVENT "
# Attention writes this fraction of its random output: context perturbs the next-token choice
# without blurring it (at 0.3 the top-1 margin falls ~200x).
WARMUP_TOKENS = 16


class LosslessnessError(Exception):
    """Greedy output that differs from the baseline's, or between repetitions."""


def positive_int(text: str) -> int:
    """argparse type of a count that must be 1 or more (torch.set_num_threads(0) raises)."""
    value = int(text)
    if value < 1:
        raise ValueError(f"expected a positive value, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """Server knobs (a preset's server_args), bench knobs (its bench) and the engine's own."""
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__, allow_abbrev=False)
    server = parser.add_argument_group("server")
    server.add_argument("--hidden-size", type=int, default=64)
    server.add_argument("--intermediate-size", type=int, default=None)
    server.add_argument("--num-layers", type=int, default=4)
    server.add_argument("--num-heads", type=int, default=4)
    server.add_argument("--vocab-size", type=int, default=1024)
    server.add_argument("--seed", type=int, default=0)
    server.add_argument("--threads", type=positive_int, default=None)
    server.add_argument("--num-assistant-tokens", type=int, default=4)
    server.add_argument("--draft-vocab-size", type=int, default=None)
    server.add_argument("--max-matching-ngram-size", type=int, default=2)
    spec = server.add_mutually_exclusive_group()
    spec.add_argument("--draft-layers", type=int, default=None)
    spec.add_argument("--prompt-lookup-num-tokens", type=int, default=None)
    bench = parser.add_argument_group("bench")
    bench.add_argument("--num-prompts", type=int, default=4)
    bench.add_argument("--input-len", type=int, default=128)
    bench.add_argument("--output-len", type=int, default=128)
    own = parser.add_argument_group("engine")
    own.add_argument("--reps", type=int, default=1)
    own.add_argument("--warmup", action="store_true", help="one pass before the repetitions, "
                     "reported as the warm-up, never a sample")
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
    if not 1 <= (args.draft_layers or 1) < args.num_layers:
        parser.error(
            f"argument --draft-layers: expected a value from 1 to {args.num_layers - 1}, "
            f"got {args.draft_layers}"
        )
    for name in ("num_prompts", "input_len", "output_len", "reps", "num_assistant_tokens"):
        if getattr(args, name) < 1:
            flag = "--" + name.replace("_", "-")
            parser.error(f"argument {flag}: expected a positive value, got {getattr(args, name)}")
    if args.draft_vocab_size is not None and args.draft_layers is None:
        args.draft_layers = 1
    return args


def emit(event: str, **details: Any) -> None:
    print(EVENT_PREFIX + json.dumps({"event": event, **details}), flush=True)


class Bench:
    """Greedy generation of every prompt, one at a time (assisted decoding needs batch 1)."""

    def __init__(self, args: argparse.Namespace, target: LlamaForCausalLM) -> None:
        self.args = args
        self.target = target
        self.draft = build_draft(target, args)
        self.forwards = 0
        target.register_forward_hook(self._count)

    @property
    def speculates(self) -> bool:
        return self.draft is not None or self.args.prompt_lookup_num_tokens is not None

    def _count(self, *_: Any) -> None:
        self.forwards += 1

    def generate(self, prompt: list[int], *, max_new: int | None = None) -> list[int]:
        import torch

        ids = torch.tensor([prompt])
        extra: dict[str, Any] = {}
        if self.draft is not None:
            extra["assistant_model"] = self.draft
        if self.args.prompt_lookup_num_tokens is not None:
            extra["prompt_lookup_num_tokens"] = self.args.prompt_lookup_num_tokens
            extra["max_matching_ngram_size"] = self.args.max_matching_ngram_size
        with torch.no_grad():
            out = self.target.generate(
                ids, attention_mask=torch.ones_like(ids),
                max_new_tokens=max_new or self.args.output_len, **extra,
            )
        return [int(t) for t in out[0, len(prompt) :]]

    def run(self, prompts: list[list[int]]) -> tuple[list[list[int]], float, int]:
        """(outputs, seconds, target forward passes) for one pass over all prompts."""
        self.forwards = 0
        begun = time.perf_counter()
        outputs = [self.generate(p) for p in prompts]
        return outputs, time.perf_counter() - begun, self.forwards


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


def warm_up(bench: Bench, prompts: list[list[int]]) -> list[list[int]]:
    """One pass over every prompt before the repetitions, reported as the warm-up (rep 0)."""
    emit("warmup", of=bench.args.reps)
    outputs, seconds, _ = bench.run(prompts)
    tokens = sum(len(o) for o in outputs)
    print(f"{PROG}: warm-up: {tokens} tokens in {seconds:.3f} s = {tokens / seconds:.1f} tok/s "
          "(not a sample)", flush=True)
    emit("result", rep=0, warmup=True, tokens=tokens, seconds=seconds, completed=len(prompts),
         output_throughput=tokens / seconds,
         total_throughput=(tokens + sum(map(len, prompts))) / seconds)
    return outputs


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
    prompts = make_prompts(args, target)
    bench = Bench(args, target)
    try:
        bench.generate(prompts[0], max_new=WARMUP_TOKENS)
    except ValueError as exc:
        if args.draft_vocab_size in (None, args.vocab_size):
            raise
        raise ValueError(
            f"--draft-vocab-size {args.draft_vocab_size} and --vocab-size {args.vocab_size} "
            "cannot be used together: assisted decoding needs a draft that shares the target's "
            f"vocabulary (transformers: {str(exc).splitlines()[0]})"
        ) from exc
    emit("ready")
    warm = warm_up(bench, prompts) if args.warmup else None
    first: list[list[int]] | None = None
    total_forwards = total_tokens = 0
    for rep in range(1, args.reps + 1):
        emit("repetition", rep=rep, of=args.reps)
        outputs, seconds, forwards = bench.run(prompts)
        tokens = sum(len(o) for o in outputs)
        total_tokens += tokens
        total_forwards += forwards
        print(f"{PROG}: rep {rep}/{args.reps}: {tokens} tokens in {seconds:.3f} s "
              f"= {tokens / seconds:.1f} tok/s, {forwards} target forward passes", flush=True)
        emit("result", rep=rep, tokens=tokens, seconds=seconds,
             output_throughput=tokens / seconds,
             total_throughput=(tokens + sum(map(len, prompts))) / seconds)
        if first is not None and outputs != first:
            print(f"LosslessnessError: greedy output of rep {rep} differs from rep 1's", flush=True)
            return 1
        if first is None and warm is not None and outputs != warm:
            print("LosslessnessError: greedy output of rep 1 differs from the warm-up's",
                  flush=True)
            return 1
        first = outputs
    assert first is not None
    accept = total_tokens / total_forwards if bench.speculates and total_forwards else None
    emit("done", output_digest=digest(first), prompt_digests=prompt_digests(first),
         accept_length=accept)
    try:
        check_lossless(first, args)
    except LosslessnessError as exc:
        print(f"LosslessnessError: {exc}", flush=True)
        return 1
    print(f"{PROG}: done; output digest {digest(first)[:16]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
