"""`vllm bench serve`'s prompts, as 0.33.0's datasets give them: (prompt, prompt_len, output_len)
per request.

- serve.py:2151-2167: no --dataset-name is refused; a random dataset (random, random-mm,
  random-rerank, prefix_repetition) with a --dataset-path is refused ("Cannot use 'random'
  dataset with --dataset-path ...").
- `random` (datasets.py RandomDataset): --random-input-len words and output lengths within
  --random-range-ratio, from --seed.
- `spec_bench` (datasets.py SpecBench, a CustomDataset): no --dataset-path is "dataset_path must
  be provided for loading data."; the file is read as pandas' read_json(lines=True) reads it
  (every line one JSON object: any other line is its ValueError); without a `turns` column,
  "JSONL file must contain a 'turns' column."; the rows of --spec-bench-category (every row
  without one; a row without a category then is pandas' KeyError), each the first of its turns;
  shuffled with the dataset's seed (BenchmarkDataset.DEFAULT_SEED, 0: SpecBench is given none)
  unless --disable-shuffle; each --spec-bench-output-len tokens long; the chat template applied
  unless --skip-chat-template (the stand-in has no tokenizer: a word is a token and the text
  stays as it is); then oversampled with the same seed up to --num-prompts (unless
  --no-oversample). A category with no rows leaves nothing to sample: IndexError.
"""

from __future__ import annotations

import argparse
import json
import random

Request = tuple[str, int, int]
RANDOM_DATASETS = ("random", "random-mm", "random-rerank", "prefix_repetition")
DEFAULT_SEED = 0


class DatasetProblem(Exception):
    """What the release raises: its traceback's last line."""


def sample(args: argparse.Namespace) -> list[Request]:
    if args.dataset_name is None:
        raise DatasetProblem("ValueError: Please specify '--dataset-name' and the corresponding "
                             "'--dataset-path' if required.")
    if args.dataset_name in RANDOM_DATASETS and args.dataset_path is not None:
        raise DatasetProblem(
            f"ValueError: Cannot use '{args.dataset_name}' dataset with --dataset-path. Please "
            "specify the appropriate --dataset-name (e.g., 'sharegpt', 'custom', 'hf') for your "
            f"dataset file: {args.dataset_path}")
    if args.dataset_name == "random":
        return random_rows(args)
    if args.dataset_name == "spec_bench":
        return spec_bench(args)
    raise DatasetProblem(f"ValueError: the stand-in serves only the random and spec_bench "
                         f"datasets, not {args.dataset_name!r}")


def random_rows(args: argparse.Namespace) -> list[Request]:
    """The random dataset: (prompt, prompt_len, output_len) from --seed."""
    rng = random.Random(args.seed)
    ratio = float(args.random_range_ratio or 0.0)
    rows = []
    for _ in range(args.num_prompts):
        low_in = max(1, int(args.random_input_len * (1 - ratio)))
        low_out = max(1, int(args.random_output_len * (1 - ratio)))
        n_in = rng.randint(low_in, max(low_in, int(args.random_input_len * (1 + ratio))))
        n_out = rng.randint(low_out, max(low_out, int(args.random_output_len * (1 + ratio))))
        rows.append((" ".join(f"w{rng.randrange(32000)}" for _ in range(n_in)), n_in, n_out))
    return rows


def spec_bench(args: argparse.Namespace) -> list[Request]:
    if args.dataset_path is None:
        raise DatasetProblem("ValueError: dataset_path must be provided for loading data.")
    try:
        with open(args.dataset_path, encoding="utf-8") as handle:
            rows = [json.loads(line) for line in handle if line.strip()]
    except FileNotFoundError:
        raise DatasetProblem(f"FileNotFoundError: File {args.dataset_path} does not "
                             "exist") from None
    except ValueError as exc:
        raise DatasetProblem(f"ValueError: {exc}") from None
    if not all(isinstance(row, dict) for row in rows):
        raise DatasetProblem("ValueError: Expected object or value")
    if not any("turns" in row for row in rows):
        raise DatasetProblem("ValueError: JSONL file must contain a 'turns' column.")
    category = args.spec_bench_category
    if category and not any("category" in row for row in rows):
        raise DatasetProblem("KeyError: 'category'")
    prompts = [str(row["turns"][0]) for row in rows
               if not category or row.get("category") == category]
    rng = random.Random(DEFAULT_SEED)
    if not args.disable_shuffle:
        rng.shuffle(prompts)
    out = int(args.spec_bench_output_len)
    sampled = [(p, len(p.split()), out) for p in prompts[:args.num_prompts]]
    if len(sampled) < args.num_prompts and not args.no_oversample:
        if not sampled:
            raise DatasetProblem("IndexError: Cannot choose from an empty sequence")
        pick = random.Random(DEFAULT_SEED)
        sampled += [pick.choice(sampled) for _ in range(args.num_prompts - len(sampled))]
    return sampled
