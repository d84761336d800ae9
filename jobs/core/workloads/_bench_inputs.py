"""A workload's category as the engine's own bench client reads it offline (docs/contracts.md
"Workloads that represent the traffic"): the file's text, and the bench settings that send every
prompt of it.

Which format, and which settings, is the engine's fact (`workload` in its engine.yaml):
- `sharegpt`: one JSON list of conversations, `{"id", "conversations": [{"from": "human",
  "value": PROMPT}, {"from": "gpt", "value": ""}]}` (the ShareGPT readers keep conversations of
  two turns or more and send the first; the reply's length is replaced by the output length);
- `spec-bench`: Spec-Bench's question.jsonl, one `{"question_id", "category", "turns": [PROMPT]}`
  a line (the Spec-Bench readers send the first turn of the rows of one category).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from jobs.core.engine_info import describe
from jobs.core.workloads._workload_files import Category

FORMATS = ("sharegpt", "spec-bench")


def input_text(fmt: str, category: Category) -> str:
    """The file a bench client reads for `category`, in format `fmt`."""
    if fmt == "sharegpt":
        rows = [{"id": f"{category.name}-{i}",
                 "conversations": [{"from": "human", "value": prompt},
                                   {"from": "gpt", "value": ""}]}
                for i, prompt in enumerate(category.prompts, start=1)]
        return json.dumps(rows, ensure_ascii=False, indent=1) + "\n"
    if fmt == "spec-bench":
        return "".join(json.dumps({"question_id": i, "category": category.name,
                                   "turns": [prompt]}, ensure_ascii=False) + "\n"
                       for i, prompt in enumerate(category.prompts, start=1))
    raise ValueError(f"unknown workload format {fmt!r}; one of {', '.join(FORMATS)}")


def input_suffix(engine: str) -> str:
    """The suffix of the file the engine's bench client reads (`.json`, `.jsonl`)."""
    return str(describe(engine).workload.get("suffix") or ".json")


def input_format(engine: str) -> str:
    return str(describe(engine).workload["format"])


def category_bench(bench: Mapping[str, Any], *, engine: str, path: str, category: Category,
                   output_len: int) -> dict[str, Any]:
    """The preset's bench settings for one category: the engine's settings that read the file at
    `path`, the category where its reader filters by one, every prompt of it, each generating
    `output_len` tokens."""
    info = describe(engine)
    facts = info.workload
    found = {**bench, **facts.get("bench", {}), facts["path_arg"]: path,
             facts["output_arg"]: output_len}
    if facts.get("category_arg"):
        found[facts["category_arg"]] = category.name
    prompts_arg = info.bench_prompts.get("arg")
    if prompts_arg:
        found[prompts_arg] = len(category.prompts)
    return found
