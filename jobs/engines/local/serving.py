"""How the local engine serves requests at a concurrency: plain greedy decoding batches, assisted
decoding and prompt lookup cannot.

A bench pass at `max-concurrency N` serves the prompts in waves of N requests that arrive
together (a closed loop: the next wave arrives when the last one is answered). Plain greedy
decoding generates a whole wave as one batched `generate()` call (left-padded, with its
attention mask); assisted decoding and prompt-lookup decoding are batch size 1 in transformers,
so a wave's requests are generated one after another and the later ones wait. Each request's
time to first token (TTFT), time per output token after it (TPOT) and end-to-end latency are
timed from its wave's arrival, as a client would see them.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jobs.engines.local.model import build_draft

if TYPE_CHECKING:
    import torch
    from transformers import LlamaForCausalLM

LATENCY_KEYS = ("median_ttft_ms", "p99_ttft_ms", "median_tpot_ms", "p99_tpot_ms",
                "median_e2e_latency_ms", "p99_e2e_latency_ms")
"""What each bench pass reports of its requests' latencies (config/engines/local/engine.yaml
`slo_keys`), named as bench_serving names them."""


@dataclass
class Pass:
    """One bench pass: every prompt served once."""

    outputs: list[list[int]]
    seconds: float
    forwards: int
    ttft_s: list[float] = field(default_factory=list)  # per request, from its wave's arrival
    e2e_s: list[float] = field(default_factory=list)
    batch_sizes: list[int] = field(default_factory=list)  # the requests of each generate() call

    @property
    def tokens(self) -> int:
        return sum(len(o) for o in self.outputs)

    def latencies(self) -> dict[str, float]:
        """Median and p99 (numpy's linear percentile, as bench_serving) of TTFT, TPOT and
        end-to-end latency over the pass's requests, in ms."""
        import numpy as np

        tpot = [(e2e - ttft) / (len(out) - 1) if len(out) > 1 else 0.0
                for ttft, e2e, out in zip(self.ttft_s, self.e2e_s, self.outputs, strict=True)]
        figures: dict[str, float] = {}
        for name, values in (("ttft", self.ttft_s), ("tpot", tpot), ("e2e_latency", self.e2e_s)):
            ms = np.asarray(values, dtype=float) * 1000.0
            figures[f"median_{name}_ms"] = float(np.median(ms))
            figures[f"p99_{name}_ms"] = float(np.percentile(ms, 99))
        return figures


class _FirstToken:
    """A transformers streamer that notes when the first generated token(s) come out (its
    first `put` is the prompt)."""

    def __init__(self) -> None:
        self.puts = 0
        self.at: float | None = None

    def put(self, value: Any) -> None:
        self.puts += 1
        if self.puts == 2:
            self.at = time.perf_counter()

    def end(self) -> None:
        pass


class Bench:
    """Greedy generation of the prompts at a concurrency (see the module's docstring)."""

    def __init__(self, args: argparse.Namespace, target: LlamaForCausalLM) -> None:
        self.args = args
        self.target = target
        self.draft = build_draft(target, args)
        self.forwards = 0
        target.register_forward_hook(self._count)

    @property
    def speculates(self) -> bool:
        """Assisted or prompt-lookup decoding: batch size 1 in transformers."""
        return self.draft is not None or self.args.prompt_lookup_num_tokens is not None

    def _count(self, *_: Any) -> None:
        self.forwards += 1

    def generate(self, prompt: list[int], *, max_new: int | None = None) -> list[int]:
        return self.generate_batch([prompt], max_new=max_new)[0][0]

    def generate_batch(
        self, prompts: Sequence[list[int]], *, max_new: int | None = None
    ) -> tuple[list[list[int]], float | None]:
        """One generate() call over `prompts` (one unless plain decoding): the outputs and
        when the first generated token came out (perf_counter)."""
        import torch

        if len(prompts) > 1 and self.speculates:
            raise ValueError("assisted and prompt-lookup decoding serve one request at a time")
        ids, mask = _left_padded(prompts)
        extra: dict[str, Any] = {}
        if self.draft is not None:
            extra["assistant_model"] = self.draft
        if self.args.prompt_lookup_num_tokens is not None:
            extra["prompt_lookup_num_tokens"] = self.args.prompt_lookup_num_tokens
            extra["max_matching_ngram_size"] = self.args.max_matching_ngram_size
        first = _FirstToken()
        with torch.no_grad():
            out = self.target.generate(
                ids, attention_mask=mask, max_new_tokens=max_new or self.args.output_len,
                streamer=first, **extra,
            )
        width = ids.shape[1]
        return [[int(t) for t in row[width:]] for row in out], first.at

    def serve(self, prompts: list[list[int]], concurrency: int = 1) -> Pass:
        """Every prompt served once, in waves of `concurrency` requests."""
        self.forwards = 0
        result = Pass(outputs=[], seconds=0.0, forwards=0)
        begun = time.perf_counter()
        for start in range(0, len(prompts), concurrency):
            wave = prompts[start : start + concurrency]
            arrived = time.perf_counter()
            calls = [[p] for p in wave] if self.speculates else [wave]
            for call in calls:
                outputs, first = self.generate_batch(call)
                done = time.perf_counter()
                result.outputs += outputs
                result.ttft_s += [(first or done) - arrived] * len(call)
                result.e2e_s += [done - arrived] * len(call)
                result.batch_sizes.append(len(call))
        result.seconds = time.perf_counter() - begun
        result.forwards = self.forwards
        return result

    def run(self, prompts: list[list[int]]) -> tuple[list[list[int]], float, int]:
        """(outputs, seconds, target forward passes) for one pass, one request at a time."""
        served = self.serve(prompts)
        return served.outputs, served.seconds, served.forwards


def _left_padded(prompts: Sequence[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids left-padded to the longest prompt (pad id 0, as the model's config) and the
    attention mask that hides the padding. The bench's prompts have one length, so a batch of
    them has no padding: its greedy output is each prompt's own (checked every pass)."""
    import torch

    width = max(len(p) for p in prompts)
    ids = torch.zeros((len(prompts), width), dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for row, prompt in enumerate(prompts):
        ids[row, width - len(prompt) :] = torch.tensor(prompt)
        mask[row, width - len(prompt) :] = 1
    return ids, mask
