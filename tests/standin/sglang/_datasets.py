"""The stand-in benchmark's prompts, as the release's datasets give them: (prompt, output tokens)
per request, from --seed.

- `random-ids`: token ids, nothing read; `random` with a local --dataset-path that holds JSON:
  any of its rows (without one it downloads ShareGPT, which fails offline: None).
- `sharegpt` (sample_sharegpt_requests, the same from 0.5.2 bench_serving.py:1051 to 0.5.19
  benchmark/datasets/sharegpt.py:59): --sharegpt-output-len below 4 is "output_len too small";
  without a --dataset-path it downloads ShareGPT (None here); the file is one JSON document
  (json.load: anything else is its traceback), its entries' "conversations" (or "conversation")
  of two turns or more kept, each turn's "value" read (a turn without one: KeyError), shuffled
  with the seed, and the first --num-prompts taken that are not too short: a prompt of fewer than
  2 tokens, or an output of fewer than 2 (the reply's length without --sharegpt-output-len), is
  dropped. A token is a word here (the stand-in has no tokenizer; --apply-chat-template leaves the
  text as it is).
"""

from __future__ import annotations

import argparse
import json
import random

Row = tuple[str, int]  # a request: its prompt and the tokens it generates


class DatasetProblem(Exception):
    """What the release's loader raises: its traceback's last line."""


def is_valid_json(path: str) -> bool:
    try:
        with open(path, encoding="utf-8") as handle:
            json.load(handle)
        return True
    except (OSError, ValueError):
        return False


def sample(args: argparse.Namespace) -> list[Row] | None:
    """The benchmark's requests (see the module); None when the dataset needs a download."""
    rng = random.Random(args.seed)
    if args.dataset_name == "random":
        if not (args.dataset_path and is_valid_json(args.dataset_path)):
            return None
        with open(args.dataset_path, encoding="utf-8") as handle:
            rows = [str(row) for row in json.load(handle)] or ["hello"]
        return [(rng.choice(rows), args.random_output_len) for _ in range(args.num_prompts)]
    if args.dataset_name == "sharegpt":
        return sharegpt(args, rng)
    return [(" ".join(str(rng.randrange(32000)) for _ in range(8)), args.random_output_len)
            for _ in range(args.num_prompts)]


def sharegpt(args: argparse.Namespace, rng: random.Random) -> list[Row] | None:
    fixed = args.sharegpt_output_len
    if fixed is not None and fixed < 4:
        raise DatasetProblem("ValueError: output_len too small")
    if not args.dataset_path:
        return None
    try:
        with open(args.dataset_path, encoding="utf-8") as handle:
            dataset = json.load(handle)
    except FileNotFoundError:
        raise DatasetProblem(f"FileNotFoundError: [Errno 2] No such file or directory: "
                             f"'{args.dataset_path}'") from None
    except ValueError as exc:
        raise DatasetProblem(f"json.decoder.JSONDecodeError: {exc}") from None
    pairs = []
    for data in dataset:
        turns = data.get("conversations", data.get("conversation", []))
        if len(turns) < 2:
            continue
        if "value" not in turns[0] or "value" not in turns[1]:
            raise DatasetProblem("KeyError: 'value'")
        pairs.append((str(turns[0]["value"]), str(turns[1]["value"])))
    rng.shuffle(pairs)
    rows: list[Row] = []
    for prompt, reply in pairs:
        if len(rows) == args.num_prompts:
            break
        out = len(reply.split()) if fixed is None else fixed
        if len(prompt.split()) < 2 or out < 2:
            continue
        rows.append((prompt, out))
    return rows
